//! `x IS [NOT] TRUE`, `IS [NOT] FALSE` and `IS [NOT] UNKNOWN` written as the comparisons
//! DataFusion executes them as (`x IS DISTINCT FROM true`, ...).
//!
//! DataFusion's logical plan says these tests never return NULL, but its physical planner turns
//! them into `IS [NOT] DISTINCT FROM` comparisons whose result field is nullable when `x` is. A
//! plan that carries such a test as a column into an aggregation then fails the physical
//! planner's schema check with an internal error: `SELECT z, count(*) FROM (SELECT b IS NOT TRUE
//! AS z FROM t) s GROUP BY z`, or any two aggregates sharing `FILTER (WHERE b IS NOT TRUE)`
//! (common-subexpression elimination projects the test as a column). Written as the comparison,
//! the logical and physical fields agree. The rule runs last in every optimizer pass, so the
//! tests other rules introduce are rewritten too.

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{binary_expr, lit, Expr, LogicalPlan, Operator};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The optimizer rule.
#[derive(Debug)]
pub struct TruthTestsAsComparisons;

/// `e` as the comparison DataFusion executes it as, if it is a truth test.
fn comparison(e: &Expr) -> Option<Expr> {
    let (inner, op, value) = match e {
        Expr::IsTrue(x) => (x, Operator::IsNotDistinctFrom, lit(true)),
        Expr::IsNotTrue(x) => (x, Operator::IsDistinctFrom, lit(true)),
        Expr::IsFalse(x) => (x, Operator::IsNotDistinctFrom, lit(false)),
        Expr::IsNotFalse(x) => (x, Operator::IsDistinctFrom, lit(false)),
        Expr::IsUnknown(x) => (x, Operator::IsNotDistinctFrom, lit(ScalarValue::Boolean(None))),
        Expr::IsNotUnknown(x) => (x, Operator::IsDistinctFrom, lit(ScalarValue::Boolean(None))),
        _ => return None,
    };
    Some(binary_expr(inner.as_ref().clone(), op, value))
}

fn has_truth_test(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        let _ = node.apply_expressions(|e| {
            found = e.exists(|x| Ok(comparison(x).is_some()))?;
            Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
        });
        Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    found
}

impl OptimizerRule for TruthTestsAsComparisons {
    fn name(&self) -> &str {
        "eddy_truth_tests_as_comparisons"
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> DfResult<Transformed<LogicalPlan>> {
        if !has_truth_test(&plan) {
            return Ok(Transformed::no(plan));
        }
        // A rewritten column may be nullable now, so every node above it recomputes its schema.
        let out = plan.transform_up_with_subqueries(|node| {
            let node = crate::planner::names::map_expressions_keeping_names(node, |e| e.transform_up(|x| Ok(comparison(&x).map_or(Transformed::no(x), Transformed::yes))))?.data;
            Ok(Transformed::yes(node.recompute_schema()?))
        })?;
        Ok(Transformed::yes(out.data))
    }
}
