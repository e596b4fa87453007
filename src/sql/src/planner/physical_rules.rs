//! The session's physical optimizer rules: DataFusion's, with two changes where its plans
//! evaluated what PostgreSQL's never does.
//!
//! * The pre-optimization `FilterPushdown` is left out: in DataFusion 54 it pushes a filter on
//!   the NULL-padded side of an outer join whose inputs were swapped into the other input (a
//!   self-join `t r12 RIGHT JOIN t r13 ... WHERE r12.a IS NULL` lost its padded rows;
//!   PostgreSQL keeps them). The logical `push_down_filter` still pushes every filter that may
//!   move.
//! * [`FilterFirst`] runs last: DataFusion's projection pushdown moves a projection that narrows
//!   its input below the filter above it, so the projection's expressions ran on rows the
//!   filter removes: `SELECT id, a / b FROM t WHERE id = 1` failed with "division by zero" on
//!   a row `WHERE` excludes. The filter goes back under the projection.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result as DfResult;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::ExecutionPlan;

/// DataFusion's physical optimizer rules with the changes of the module docs.
pub fn rules() -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules: Vec<_> = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules.into_iter().filter(|r| r.name() != "FilterPushdown").collect();
    rules.push(Arc::new(FilterFirst));
    rules
}

/// The rule of the module docs.
#[derive(Debug)]
struct FilterFirst;

impl PhysicalOptimizerRule for FilterFirst {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, _config: &ConfigOptions) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(filter) = node.downcast_ref::<FilterExec>() else { return Ok(Transformed::no(node)) };
            let Some(projection) = filter.input().downcast_ref::<ProjectionExec>() else { return Ok(Transformed::no(node)) };
            let computes = projection.expr().iter().any(|p| p.expr.downcast_ref::<Column>().is_none());
            if !computes || filter.projection().is_some() {
                return Ok(Transformed::no(node));
            }
            // The predicate over the projection's input: each column it reads must be one the
            // projection passes through (nothing is computed twice).
            let exprs = projection.expr();
            let mut passes = true;
            let predicate = Arc::clone(filter.predicate())
                .transform(|e| {
                    let Some(c) = e.downcast_ref::<Column>() else { return Ok(Transformed::no(e)) };
                    match exprs.get(c.index()).map(|p| &p.expr).filter(|x| x.downcast_ref::<Column>().is_some()) {
                        Some(input) => Ok(Transformed::yes(Arc::clone(input) as Arc<dyn PhysicalExpr>)),
                        None => {
                            passes = false;
                            Ok(Transformed::no(e))
                        }
                    }
                })?
                .data;
            if !passes {
                return Ok(Transformed::no(node));
            }
            let below = FilterExecBuilder::new(predicate, Arc::clone(projection.input()))
                .with_default_selectivity(filter.default_selectivity())
                .with_batch_size(filter.batch_size())
                .with_fetch(filter.fetch())
                .build()?;
            let above = ProjectionExec::try_new(exprs.to_vec(), Arc::new(below))?;
            Ok(Transformed::yes(Arc::new(above) as Arc<dyn ExecutionPlan>))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "eddy_filter_first"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
