//! The session's logical optimizer rules: DataFusion's, with two of them changed where their
//! answers differed from PostgreSQL's.
//!
//! * `eliminate_group_by_constant` is left out: it turned an aggregation whose grouping keys
//!   are all constant (`SELECT 1 AS c, count(*) ... GROUP BY 1`) into one without keys, so it
//!   made a row for empty input where PostgreSQL has none (and a view kept a count-0 row after
//!   every row was deleted).
//! * `eliminate_duplicated_expr` is replaced by [`DuplicateExprs`], which removes repeated sort
//!   and grouping expressions only. DataFusion's also drops sort keys it takes to be
//!   determined by earlier ones, and after a GROUP BY it took a constant to determine the
//!   group key: `SELECT 4 AS c, s ... GROUP BY s ORDER BY 1, 2 DESC LIMIT 1` sorted by `c`
//!   alone and returned any row.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan, Sort, SortExpr};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// DataFusion's logical optimizer rules with the changes of the module docs.
pub fn rules() -> Vec<Arc<dyn OptimizerRule + Send + Sync>> {
    datafusion::optimizer::Optimizer::new()
        .rules
        .into_iter()
        .filter(|r| r.name() != "eliminate_group_by_constant")
        .map(|r| if r.name() == "eliminate_duplicated_expr" { Arc::new(DuplicateExprs) as Arc<dyn OptimizerRule + Send + Sync> } else { r })
        .collect()
}

fn has_repeats(order: &[SortExpr]) -> bool {
    order.iter().enumerate().any(|(i, e)| order[..i].iter().any(|u| u.expr == e.expr))
}

/// `order` without the keys an earlier one repeats (the first decides the direction).
fn without_repeats(order: &[SortExpr]) -> Vec<SortExpr> {
    let mut unique: Vec<SortExpr> = Vec::with_capacity(order.len());
    for e in order {
        if !unique.iter().any(|u| u.expr == e.expr) {
            unique.push(e.clone());
        }
    }
    unique
}

/// Removes repeated expressions from sorts (the first occurrence decides the direction), from
/// aggregates' ORDER BY and from grouping keys.
#[derive(Debug, Default)]
pub struct DuplicateExprs;

impl OptimizerRule for DuplicateExprs {
    fn name(&self) -> &str {
        "eddy_duplicate_exprs"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> DfResult<Transformed<LogicalPlan>> {
        match plan {
            LogicalPlan::Sort(sort) if has_repeats(&sort.expr) => {
                Ok(Transformed::yes(LogicalPlan::Sort(Sort { expr: without_repeats(&sort.expr), input: sort.input, fetch: sort.fetch })))
            }
            LogicalPlan::Aggregate(agg) => {
                let mut unique: Vec<Expr> = Vec::with_capacity(agg.group_expr.len());
                for e in &agg.group_expr {
                    if !unique.contains(e) {
                        unique.push(e.clone());
                    }
                }
                // An aggregate's own ORDER BY too (DISTINCT ON (s) ... ORDER BY s, id, s DESC
                // became first_value ordered by s twice, which failed an assertion).
                let mut orders_changed = false;
                let aggr_expr: Vec<Expr> = agg
                    .aggr_expr
                    .iter()
                    .map(|e| {
                        let out = e.clone().transform_down(|x| match x {
                            Expr::AggregateFunction(mut f) if has_repeats(&f.params.order_by) => {
                                f.params.order_by = without_repeats(&f.params.order_by);
                                Ok(Transformed::yes(Expr::AggregateFunction(f)))
                            }
                            other => Ok(Transformed::no(other)),
                        })?;
                        if !out.transformed {
                            return Ok(out.data);
                        }
                        orders_changed = true;
                        // The nodes above read the aggregate by its name.
                        Ok(match out.data {
                            aliased @ Expr::Alias(_) => aliased,
                            other => other.alias(e.schema_name().to_string()),
                        })
                    })
                    .collect::<DfResult<_>>()?;
                if unique.len() == agg.group_expr.len() && !orders_changed {
                    return Ok(Transformed::no(LogicalPlan::Aggregate(agg)));
                }
                Ok(Transformed::yes(LogicalPlan::Aggregate(Aggregate::try_new(agg.input, unique, aggr_expr)?)))
            }
            other => Ok(Transformed::no(other)),
        }
    }
}
