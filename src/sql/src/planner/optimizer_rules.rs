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

use datafusion::common::tree_node::Transformed;
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

/// Removes repeated expressions from sorts (the first occurrence decides the direction) and
/// from grouping keys.
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
            LogicalPlan::Sort(sort) => {
                let mut unique: Vec<SortExpr> = Vec::with_capacity(sort.expr.len());
                for e in &sort.expr {
                    if !unique.iter().any(|u| u.expr == e.expr) {
                        unique.push(e.clone());
                    }
                }
                if unique.len() == sort.expr.len() {
                    return Ok(Transformed::no(LogicalPlan::Sort(sort)));
                }
                Ok(Transformed::yes(LogicalPlan::Sort(Sort { expr: unique, input: sort.input, fetch: sort.fetch })))
            }
            LogicalPlan::Aggregate(agg) => {
                let mut unique: Vec<Expr> = Vec::with_capacity(agg.group_expr.len());
                for e in &agg.group_expr {
                    if !unique.contains(e) {
                        unique.push(e.clone());
                    }
                }
                if unique.len() == agg.group_expr.len() {
                    return Ok(Transformed::no(LogicalPlan::Aggregate(agg)));
                }
                Ok(Transformed::yes(LogicalPlan::Aggregate(Aggregate::try_new(agg.input, unique, agg.aggr_expr)?)))
            }
            other => Ok(Transformed::no(other)),
        }
    }
}
