//! `INTERSECT ALL` and `EXCEPT ALL` as multisets, as SQL defines them: a row occurring m times
//! on the left and n times on the right occurs min(m, n) times in the intersection and
//! max(m - n, 0) times in the difference. DataFusion plans both as a semi/anti join of the
//! sides on every column (NULLs equal), which keeps every left copy of a row the right side
//! has at all (INTERSECT ALL) or drops them all (EXCEPT ALL).
//!
//! Numbering the copies of each row on both sides (`row_number() OVER (PARTITION BY every
//! column)`) and joining on the number too makes the k-th copy on the left meet the k-th copy
//! on the right, which is exactly the multiset rule. At the initial plan a semi/anti join with
//! NULLs equal and no filter comes only from these set operations (subqueries are decorrelated
//! later); a left side that is already distinct (INTERSECT/EXCEPT without ALL) is left alone.

use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, NullEquality};
use datafusion::functions_window::expr_fn::row_number;
use datafusion::logical_expr::{Expr, ExprFunctionExt, JoinType, LogicalPlan, LogicalPlanBuilder};
use eddy_common::Result;

const COPY: &str = "__eddy_copy";

/// The plan with every INTERSECT ALL / EXCEPT ALL made a multiset operation.
pub fn multiset_set_ops(plan: LogicalPlan) -> Result<LogicalPlan> {
    let out = plan.transform_up_with_subqueries(|node| {
        let LogicalPlan::Join(j) = &node else { return Ok(Transformed::no(node)) };
        let n = j.left.schema().fields().len();
        let set_op = matches!(j.join_type, JoinType::LeftSemi | JoinType::LeftAnti)
            && j.null_equality == NullEquality::NullEqualsNull
            && j.filter.is_none()
            && j.on.len() == n
            && j.right.schema().fields().len() == n
            && !matches!(j.left.as_ref(), LogicalPlan::Distinct(_));
        if !set_op {
            return Ok(Transformed::no(node));
        }
        let mut keys: (Vec<Column>, Vec<Column>) = (Vec::new(), Vec::new());
        for (l, r) in &j.on {
            let (Expr::Column(l), Expr::Column(r)) = (l, r) else { return Ok(Transformed::no(node)) };
            keys.0.push(l.clone());
            keys.1.push(r.clone());
        }
        keys.0.push(Column::from_name(COPY));
        keys.1.push(Column::from_name(COPY));
        let numbered = |p: &LogicalPlan| -> datafusion::error::Result<LogicalPlan> {
            let columns: Vec<Expr> = p.schema().columns().into_iter().map(Expr::Column).collect();
            let copy = row_number().partition_by(columns).build()?.alias(COPY);
            LogicalPlanBuilder::from(p.clone()).window(vec![copy])?.build()
        };
        let output: Vec<Expr> = j.left.schema().columns().into_iter().map(Expr::Column).collect();
        let plan = LogicalPlanBuilder::from(numbered(&j.left)?)
            .join_detailed(numbered(&j.right)?, j.join_type, keys, None, NullEquality::NullEqualsNull)?
            .project(output)?
            .build()?;
        Ok(Transformed::yes(plan))
    })?;
    Ok(out.data)
}
