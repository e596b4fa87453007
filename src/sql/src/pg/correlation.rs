//! Correlated subqueries whose decorrelation would give wrong answers are refused (0A000)
//! before DataFusion decorrelates them:
//!
//! * an outer reference in the ON clause of an outer join inside the subquery
//!   (`EXISTS (SELECT 1 FROM a LEFT JOIN b ON outer.x = b.x)`): pulled up into the subquery's
//!   join with the outer query, it filtered away the rows the left join keeps;
//! * an outer reference below a window function (`LATERAL (SELECT count(*) OVER () FROM t WHERE
//!   t.k = outer.k)`): the window ran over every outer row's matches at once.

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{Expr, JoinType, LogicalPlan};
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

fn has_outer_reference(e: &Expr) -> bool {
    e.exists(|x| Ok(matches!(x, Expr::OuterReferenceColumn(..)))).unwrap_or(false)
}

/// Whether a node of `plan` (not counting nested subqueries) evaluates an outer reference.
fn reads_outer_columns(plan: &LogicalPlan) -> bool {
    plan.exists(|n| Ok(n.expressions().iter().any(has_outer_reference))).unwrap_or(false)
}

/// Refuses the correlated shapes in the module docs, anywhere in `plan`.
pub fn check_correlations(plan: &LogicalPlan) -> Result<()> {
    let mut refusal = None;
    let _ = plan.apply_with_subqueries(|node| {
        refusal = match node {
            LogicalPlan::Join(j)
                if j.join_type != JoinType::Inner
                    && (j.filter.as_ref().is_some_and(has_outer_reference) || j.on.iter().any(|(l, r)| has_outer_reference(l) || has_outer_reference(r))) =>
            {
                Some("a subquery whose outer join refers to the enclosing query in its ON clause is not supported yet")
            }
            LogicalPlan::Window(w) if reads_outer_columns(&w.input) => {
                Some("window functions over a subquery's rows that depend on the enclosing query (a correlated or LATERAL subquery) are not supported yet")
            }
            _ => None,
        };
        Ok(if refusal.is_some() { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    match refusal {
        Some(message) => Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "{message}")),
        None => Ok(()),
    }
}
