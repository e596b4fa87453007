//! `GROUPING SETS`, `ROLLUP` and `CUBE` in views: an aggregation over several grouping sets
//! becomes a `UNION ALL` of one aggregation per set, each padding the columns its set leaves
//! out with NULLs and giving DataFusion's `__grouping_id` (which `grouping(...)` reads) as a
//! constant. Each branch is an ordinary keyed aggregation, so the view keeps every set's groups
//! under inserts, updates and deletes; queries keep DataFusion's own grouping-set execution.
//!
//! The grouping id is DataFusion's: one bit per distinct grouping expression, the first the
//! most significant, set where the set leaves the expression out; a set repeated in the list is
//! told apart by its ordinal in the bits above.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::GroupingSet;
use datafusion::logical_expr::utils::{enumerate_grouping_sets, grouping_set_to_exprlist};
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan, Projection, Union};

/// The sets a (normalized) grouping expression stands for.
fn sets_of(set: &GroupingSet) -> Vec<Vec<Expr>> {
    match set {
        GroupingSet::GroupingSets(sets) => sets.clone(),
        GroupingSet::Rollup(exprs) => (0..=exprs.len()).rev().map(|n| exprs[..n].to_vec()).collect(),
        GroupingSet::Cube(exprs) => (0..1usize << exprs.len())
            .map(|mask| exprs.iter().enumerate().filter(|(i, _)| mask & (1 << (exprs.len() - 1 - i)) == 0).map(|(_, e)| e.clone()).collect())
            .collect(),
    }
}

/// The union of per-set aggregations equal to `a`, if `a` groups by grouping sets.
fn expand(a: &Aggregate) -> DfResult<Option<LogicalPlan>> {
    if !a.group_expr.iter().any(|e| matches!(e, Expr::GroupingSet(_))) {
        return Ok(None);
    }
    let normalized = enumerate_grouping_sets(a.group_expr.clone())?;
    let [Expr::GroupingSet(set)] = normalized.as_slice() else { return Ok(None) };
    let distinct: Vec<Expr> = grouping_set_to_exprlist(&normalized)?.into_iter().cloned().collect();
    let n = distinct.len();
    let id_type = a.schema.field(n).data_type().clone();
    // A set that names an expression twice (`GROUPING SETS ((x), (x, x))`) groups by it once.
    let sets: Vec<Vec<Expr>> = sets_of(set)
        .into_iter()
        .map(|members| members.iter().enumerate().filter(|(i, e)| !members[..*i].contains(e)).map(|(_, e)| e.clone()).collect())
        .collect();
    let mut branches = Vec::with_capacity(sets.len());
    for (i, members) in sets.iter().enumerate() {
        let ordinal = sets[..i].iter().filter(|s| *s == members).count() as u64;
        let semantic = distinct.iter().fold(0u64, |acc, e| (acc << 1) | u64::from(!members.contains(e)));
        let id = ScalarValue::UInt64(Some(semantic | (ordinal << n))).cast_to(&id_type)?;
        // The empty set with no aggregate left (the query reads none of them) still makes its
        // one row: count(*) is computed and not read.
        let aggr_expr = if members.is_empty() && a.aggr_expr.is_empty() {
            vec![datafusion::functions_aggregate::count::count_all()]
        } else {
            a.aggr_expr.clone()
        };
        let agg = Aggregate::try_new(a.input.clone(), members.clone(), aggr_expr)?;
        let column = |k: usize| Expr::Column(Column::from(agg.schema.qualified_field(k)));
        let mut exprs = Vec::with_capacity(a.schema.fields().len());
        for (j, e) in distinct.iter().enumerate() {
            let value = match members.iter().position(|m| m == e) {
                Some(k) => column(k),
                None => Expr::Literal(ScalarValue::try_from(a.schema.field(j).data_type())?, None),
            };
            exprs.push(value);
        }
        exprs.push(Expr::Literal(id, None));
        exprs.extend((0..a.aggr_expr.len()).map(|k| column(members.len() + k)));
        let named = exprs
            .into_iter()
            .zip(a.schema.iter())
            .map(|(e, (q, f))| e.alias_qualified(q.cloned(), f.name()))
            .collect();
        branches.push(Arc::new(LogicalPlan::Projection(Projection::try_new(named, Arc::new(LogicalPlan::Aggregate(agg)))?)));
    }
    Ok(Some(LogicalPlan::Union(Union { inputs: branches, schema: a.schema.clone() })))
}

/// `plan` with every aggregation over grouping sets expanded (see the module docs).
pub fn expand_grouping_sets(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up(|node| match &node {
        LogicalPlan::Aggregate(a) => Ok(match expand(a)? {
            Some(union) => Transformed::yes(union),
            None => Transformed::no(node),
        }),
        _ => Ok(Transformed::no(node)),
    })
    .map(|t| t.data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::col;

    #[test]
    fn rollup_and_cube_list_their_sets() {
        let (a, b) = (col("a"), col("b"));
        let rollup = sets_of(&GroupingSet::Rollup(vec![a.clone(), b.clone()]));
        assert_eq!(rollup, vec![vec![a.clone(), b.clone()], vec![a.clone()], vec![]]);
        let cube = sets_of(&GroupingSet::Cube(vec![a.clone(), b.clone()]));
        assert_eq!(cube, vec![vec![a.clone(), b.clone()], vec![a], vec![b], vec![]]);
    }
}
