//! The session's logical optimizer rules: DataFusion's, with five of them changed where their
//! answers differed from PostgreSQL's or their plans failed (besides the two below,
//! `eliminate_cross_join` is skipped on plans with NULL-matching joins,
//! [`CrossJoinsKeepingNullEquality`], `replace_distinct_aggregate` keeps a DISTINCT over
//! joined grouped rows, [`DistinctOverJoins`], `common_sub_expression_eliminate` leaves
//! window keys without aliases, [`WindowKeysUnaliased`], and
//! `single_distinct_aggregation_to_group_by` keeps output types, [`TypesKept`]).
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
        .flat_map(|r| {
            let before: Option<Arc<dyn OptimizerRule + Send + Sync>> = (r.name() == "optimize_projections").then(|| Arc::new(ComputedProjectionDependencies) as _);
            before.into_iter().chain(std::iter::once(r))
        })
        .map(|r| match r.name() {
            "eliminate_duplicated_expr" => Arc::new(DuplicateExprs) as Arc<dyn OptimizerRule + Send + Sync>,
            "eliminate_cross_join" => Arc::new(CrossJoinsKeepingNullEquality(r)),
            "replace_distinct_aggregate" => Arc::new(DistinctOverJoins(r)),
            "common_sub_expression_eliminate" => Arc::new(WindowKeysUnaliased(r)),
            "single_distinct_aggregation_to_group_by" => Arc::new(TypesKept(r)),
            _ => r,
        })
        .collect()
}

/// Projections that compute a column drop their functional dependencies before
/// `optimize_projections` reads them. DataFusion derives a projection's dependencies by the
/// positions of its plain columns among the input's, skipping computed ones, so every later
/// index is off by one: `SELECT DISTINCT r.v + 0 AS c0, b.n, b.k FROM (... GROUP BY k) b JOIN
/// r ...` took `n` to determine `c0`, and grouping dropped `c0` (too few rows).
#[derive(Debug)]
struct ComputedProjectionDependencies;

impl OptimizerRule for ComputedProjectionDependencies {
    fn name(&self) -> &str {
        "eddy_computed_projection_dependencies"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> DfResult<Transformed<LogicalPlan>> {
        use datafusion::common::FunctionalDependencies;
        use datafusion::logical_expr::Projection;
        let LogicalPlan::Projection(p) = plan else { return Ok(Transformed::no(plan)) };
        let computes = p.expr.iter().any(|e| !matches!(e, Expr::Column(_)) && !matches!(e, Expr::Alias(a) if matches!(a.expr.as_ref(), Expr::Column(_))));
        if !computes || p.schema.functional_dependencies().is_empty() {
            return Ok(Transformed::no(LogicalPlan::Projection(p)));
        }
        let schema = p.schema.as_ref().clone().with_functional_dependencies(FunctionalDependencies::empty())?;
        Ok(Transformed::yes(LogicalPlan::Projection(Projection::try_new_with_schema(p.expr, p.input, Arc::new(schema))?)))
    }
}

/// DataFusion's `replace_distinct_aggregate`, except that a `DISTINCT` over rows whose
/// columns are only determined by a key, not unique (a grouped subquery joined to another
/// relation: `SELECT DISTINCT c.g FROM t, (SELECT g FROM u GROUP BY g) c`), becomes an
/// aggregation: DataFusion's removed it, reading the dependency as uniqueness, and returned
/// duplicates.
#[derive(Debug)]
struct DistinctOverJoins(Arc<dyn OptimizerRule + Send + Sync>);

impl OptimizerRule for DistinctOverJoins {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.0.apply_order()
    }

    fn rewrite(&self, plan: LogicalPlan, config: &dyn OptimizerConfig) -> DfResult<Transformed<LogicalPlan>> {
        use datafusion::common::Dependency;
        use datafusion::logical_expr::Distinct;
        match plan {
            LogicalPlan::Distinct(Distinct::All(input))
                if !input.schema().fields().is_empty() && input.schema().functional_dependencies().iter().any(|d| d.mode == Dependency::Multi) =>
            {
                let group_expr = input.schema().columns().into_iter().map(Expr::Column).collect();
                Ok(Transformed::yes(LogicalPlan::Aggregate(Aggregate::try_new(input, group_expr, vec![])?)))
            }
            other => self.0.rewrite(other, config),
        }
    }
}

/// DataFusion's `eliminate_cross_join`, not run on plans with a join whose keys match NULLs
/// (`a JOIN b ON a.g IS NOT DISTINCT FROM b.g CROSS JOIN c`): it flattens the joins and
/// rebuilds them all with the top join's NULL equality, so that join lost its NULL = NULL
/// matches.
#[derive(Debug)]
struct CrossJoinsKeepingNullEquality(Arc<dyn OptimizerRule + Send + Sync>);

impl OptimizerRule for CrossJoinsKeepingNullEquality {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.0.apply_order()
    }

    fn rewrite(&self, plan: LogicalPlan, config: &dyn OptimizerConfig) -> DfResult<Transformed<LogicalPlan>> {
        let nulls_match = plan.exists(|n| Ok(matches!(n, LogicalPlan::Join(j) if j.null_equality == datafusion::common::NullEquality::NullEqualsNull)))?;
        if nulls_match {
            return Ok(Transformed::no(plan));
        }
        self.0.rewrite(plan, config)
    }
}

/// A rule whose rewrite is kept only if the node's output types stay the same.
/// `single_distinct_aggregation_to_group_by` sums a sum again, and the second sum of a
/// `numeric(20,2)` is a `numeric(30,2)`: `count(DISTINCT f) ... HAVING sum(n) >= 7` compared it
/// with a constant typed for the first (22000 "Invalid comparison operation").
#[derive(Debug)]
struct TypesKept(Arc<dyn OptimizerRule + Send + Sync>);

impl OptimizerRule for TypesKept {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.0.apply_order()
    }

    fn rewrite(&self, plan: LogicalPlan, config: &dyn OptimizerConfig) -> DfResult<Transformed<LogicalPlan>> {
        let before = plan.clone();
        let t = self.0.rewrite(plan, config)?;
        let types = |p: &LogicalPlan| p.schema().fields().iter().map(|f| f.data_type().clone()).collect::<Vec<_>>();
        if t.transformed && types(&t.data) != types(&before) {
            return Ok(Transformed::no(before));
        }
        Ok(t)
    }
}

/// `common_sub_expression_eliminate`, after which windows' PARTITION BY and ORDER BY keys
/// carry no aliases. It replaced a key shared by two window functions with `__common_expr_1
/// AS upper(b1.g)` in one and `__common_expr_1` in the other (when the first one's argument
/// changed too), so one window node held two sets of sort keys: DataFusion's physical planner
/// asserts that they are one (XX000 in debug builds), and sorts by the first function's.
#[derive(Debug)]
struct WindowKeysUnaliased(Arc<dyn OptimizerRule + Send + Sync>);

impl OptimizerRule for WindowKeysUnaliased {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.0.apply_order()
    }

    fn rewrite(&self, plan: LogicalPlan, config: &dyn OptimizerConfig) -> DfResult<Transformed<LogicalPlan>> {
        let t = self.0.rewrite(plan, config)?;
        if !t.transformed {
            return Ok(t);
        }
        let unaliased = t.data.transform_up(|node| {
            let LogicalPlan::Window(mut w) = node else { return Ok(Transformed::no(node)) };
            let inputs = w.input.schema().fields().len();
            let mut changed = false;
            for (i, e) in w.window_expr.iter_mut().enumerate() {
                let (f, aliased) = match &mut *e {
                    Expr::Alias(a) => (a.expr.as_mut(), true),
                    other => (other, false),
                };
                let Expr::WindowFunction(f) = f else { continue };
                let keys = f.params.partition_by.iter_mut().chain(f.params.order_by.iter_mut().map(|o| &mut o.expr));
                let mut this = false;
                for k in keys {
                    if let Expr::Alias(a) = k {
                        *k = a.expr.as_ref().clone();
                        this = true;
                    }
                }
                if this && !aliased {
                    // The function's output keeps its name.
                    let name = w.schema.field(inputs + i).name().clone();
                    *e = e.clone().alias(name);
                }
                changed |= this;
            }
            Ok(if changed { Transformed::yes(LogicalPlan::Window(w)) } else { Transformed::no(LogicalPlan::Window(w)) })
        })?;
        Ok(Transformed::yes(unaliased.data))
    }
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
