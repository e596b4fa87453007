//! Where PostgreSQL leaves the choice of rows open, a materialized view picks the same rows
//! as its batch recomputation (`VERIFY`): the smallest by every column of the input.
//!
//! * `DISTINCT ON (k)` keeps, per `k`, the first row by its `ORDER BY` (if any) and then by
//!   every input column, so ties pick one row, and every selected column comes from it;
//! * `LIMIT n` / `OFFSET m` without `ORDER BY` keep the first rows by every input column (as
//!   RisingWave breaks ties on the key);
//! * `first_value(x)` / `last_value(x)` without `ORDER BY` order by every input column, and so
//!   does a scalar subquery's value (`planner::single_value`), read as `first_value`: a view
//!   keeps the first row where PostgreSQL would fail because the subquery returned several.
//!
//! Applied to a view's query before it is planned, both for the stream and for `VERIFY`.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Aggregate, Distinct, DistinctOn, Expr, Limit, LogicalPlan, Sort, SortExpr};
use eddy_common::Result;

/// Every column of `plan`'s output, ascending with NULLs last (PostgreSQL's default order).
fn every_column(plan: &LogicalPlan) -> Vec<SortExpr> {
    plan.schema().columns().into_iter().map(|c| Expr::Column(c).sort(true, false)).collect()
}

/// True if `plan` is ordered: a sort, maybe under projections and aliases.
fn ordered(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Sort(_) => true,
        LogicalPlan::Projection(p) => ordered(&p.input),
        LogicalPlan::SubqueryAlias(a) => ordered(&a.input),
        _ => false,
    }
}

/// `plan` with each scalar subquery's `eddy_one_row(eddy_single_value(x))` read as
/// `first_value(x)` (a view has no way to fail a statement when a subquery's rows grow).
fn read_first_values(plan: LogicalPlan) -> Result<LogicalPlan> {
    use crate::planner::single_value::{NAME, READ};
    // Nodes above a changed one see new column types: their schemas are recomputed.
    let mut changed = false;
    let out = plan.transform_up_with_subqueries(|node| {
        let t = crate::planner::names::map_expressions_keeping_names(node, |e| {
            e.transform_up(|e| match e {
                Expr::ScalarFunction(mut f) if f.name() == READ && f.args.len() == 1 => Ok(Transformed::yes(f.args.remove(0))),
                Expr::AggregateFunction(mut f) if f.func.name() == NAME => {
                    f.func = datafusion::functions_aggregate::first_last::first_value_udaf();
                    Ok(Transformed::yes(Expr::AggregateFunction(f)))
                }
                other => Ok(Transformed::no(other)),
            })
        })?;
        changed |= t.transformed;
        match changed {
            true => Ok(Transformed::yes(t.data.recompute_schema()?)),
            false => Ok(t),
        }
    })?;
    Ok(out.data)
}

/// `plan` with its arbitrary choices made deterministic (see the module docs).
pub fn settle_arbitrary_choices(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = read_first_values(plan)?;
    let out = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Distinct(Distinct::On(on)) => {
            let mut sort = on.sort_expr.clone().unwrap_or_else(|| on.on_expr.iter().map(|e| e.clone().sort(true, false)).collect());
            // Each expression once (DataFusion's ordered first_value counts them apart).
            for c in every_column(&on.input) {
                if !sort.iter().any(|s| s.expr == c.expr) {
                    sort.push(c);
                }
            }
            let settled = DistinctOn::try_new(on.on_expr, on.select_expr, Some(sort), on.input)?;
            Ok(Transformed::yes(LogicalPlan::Distinct(Distinct::On(settled))))
        }
        LogicalPlan::Limit(limit) if !ordered(&limit.input) => {
            let sort = LogicalPlan::Sort(Sort { expr: every_column(&limit.input), input: limit.input.clone(), fetch: None });
            Ok(Transformed::yes(LogicalPlan::Limit(Limit { skip: limit.skip, fetch: limit.fetch, input: std::sync::Arc::new(sort) })))
        }
        LogicalPlan::Aggregate(a) => {
            let columns = every_column(&a.input);
            let mut changed = false;
            // Upper nodes name the aggregate by its old text (`first_value(t.x)`).
            let names = NamePreserver::new_for_projection();
            let aggr_expr = a
                .aggr_expr
                .iter()
                .map(|e| {
                    let saved = names.save(e);
                    let picked = e.clone().transform_up(|e| match e {
                        Expr::AggregateFunction(mut f) if is_pick(&f) && f.params.order_by.is_empty() => {
                            f.params.order_by = columns.clone();
                            Ok(Transformed::yes(Expr::AggregateFunction(f)))
                        }
                        other => Ok(Transformed::no(other)),
                    })?;
                    changed |= picked.transformed;
                    Ok(if picked.transformed { saved.restore(picked.data) } else { picked.data })
                })
                .collect::<datafusion::error::Result<Vec<_>>>()?;
            if !changed {
                return Ok(Transformed::no(LogicalPlan::Aggregate(a)));
            }
            let settled = Aggregate::try_new(a.input, a.group_expr, aggr_expr)?;
            Ok(Transformed::yes(LogicalPlan::Aggregate(settled)))
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(out.data)
}

fn is_pick(f: &AggregateFunction) -> bool {
    matches!(f.func.name(), "first_value" | "last_value")
}
