//! Integer and decimal arithmetic that fails on overflow, as in PostgreSQL
//! (`SELECT 2147483647 + 1` is `ERROR: integer out of range`, SQLSTATE 22003).
//!
//! DataFusion's `+`, `-` and `*` wrap around unless a binary expression is built with
//! `fail_on_overflow`, which its planner never sets. [`checked`] rebuilds such expressions over
//! integer and decimal operands with it; [`CheckedArithmetic`] applies that to the projections
//! and filters of every query plan, and the stream planner applies it to view expressions.
//! Float `+`, `-`, `*` are wrapped in [`FloatOverflow`]. The same pass makes `AND` and `OR`
//! lazy ([`crate::planner::lazy_logic`]), in join conditions too.

use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Literal, NegativeExpr};
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateInputMode, PhysicalGroupBy};
use datafusion::scalar::ScalarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::ExecutionPlan;

fn overflows(t: &DataType) -> bool {
    t.is_integer() || matches!(t, DataType::Decimal128(_, _) | DataType::Decimal256(_, _))
}

/// `expr` with every integer/decimal `+`, `-`, `*` over `schema` checked for overflow.
pub fn checked(expr: Arc<dyn PhysicalExpr>, schema: &Schema) -> DfResult<Arc<dyn PhysicalExpr>> {
    Ok(checked_if_needed(expr, schema)?.data)
}

fn checked_if_needed(expr: Arc<dyn PhysicalExpr>, schema: &Schema) -> DfResult<Transformed<Arc<dyn PhysicalExpr>>> {
    expr.transform_up(|e| {
        let e = match crate::planner::lazy_logic::lazy(e) {
            t if t.transformed => return Ok(t),
            t => t.data,
        };
        // `-x` of the smallest integer wraps to itself; `0 - x` fails as PostgreSQL does.
        if let Some(n) = e.downcast_ref::<NegativeExpr>() {
            let Ok(t) = n.arg().data_type(schema) else { return Ok(Transformed::no(e)) };
            if !t.is_signed_integer() {
                return Ok(Transformed::no(e));
            }
            let zero = Arc::new(Literal::new(ScalarValue::new_zero(&t)?)) as Arc<dyn PhysicalExpr>;
            let rebuilt = BinaryExpr::new(zero, Operator::Minus, Arc::clone(n.arg())).with_fail_on_overflow(true);
            return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn PhysicalExpr>));
        }
        let Some(b) = e.downcast_ref::<BinaryExpr>() else { return Ok(Transformed::no(e)) };
        if !matches!(b.op(), Operator::Plus | Operator::Minus | Operator::Multiply) {
            return Ok(Transformed::no(e));
        }
        let (Ok(l), Ok(r)) = (b.left().data_type(schema), b.right().data_type(schema)) else { return Ok(Transformed::no(e)) };
        if matches!(l, DataType::Float64 | DataType::Float32) && matches!(r, DataType::Float64 | DataType::Float32) {
            return Ok(Transformed::yes(Arc::new(FloatOverflow(e)) as Arc<dyn PhysicalExpr>));
        }
        if !(overflows(&l) && overflows(&r)) {
            return Ok(Transformed::no(e));
        }
        let rebuilt = BinaryExpr::new(Arc::clone(b.left()), *b.op(), Arc::clone(b.right())).with_fail_on_overflow(true);
        Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn PhysicalExpr>))
    })
}

/// A float `+`, `-` or `*` whose finite operands give an infinite result fails with 22003, as
/// PostgreSQL's float arithmetic does ("value out of range: overflow"; Arrow's gives
/// Infinity). Infinite operands keep their infinite results.
#[derive(Debug, Eq)]
struct FloatOverflow(Arc<dyn PhysicalExpr>);

impl PartialEq for FloatOverflow {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_ref() == other.0.as_ref()
    }
}

impl std::hash::Hash for FloatOverflow {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl std::fmt::Display for FloatOverflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl PhysicalExpr for FloatOverflow {
    fn data_type(&self, input_schema: &Schema) -> DfResult<DataType> {
        self.0.data_type(input_schema)
    }

    fn nullable(&self, input_schema: &Schema) -> DfResult<bool> {
        self.0.nullable(input_schema)
    }

    fn evaluate(&self, batch: &arrow::array::RecordBatch) -> DfResult<datafusion::logical_expr::ColumnarValue> {
        use arrow::array::{Array, AsArray};
        let out = self.0.evaluate(batch)?;
        let rows = batch.num_rows();
        let as_f64 = |v: &datafusion::logical_expr::ColumnarValue| -> DfResult<arrow::array::ArrayRef> {
            Ok(arrow::compute::cast(&v.to_array(rows.max(1))?, &DataType::Float64)?)
        };
        let result = as_f64(&out)?;
        let result = result.as_primitive::<arrow::datatypes::Float64Type>();
        if !result.values().iter().any(|v| v.is_infinite()) {
            return Ok(out);
        }
        let inputs = self.0.children().iter().map(|c| c.evaluate(batch).and_then(|v| as_f64(&v))).collect::<DfResult<Vec<_>>>()?;
        let finite = |a: &arrow::array::ArrayRef, i: usize| {
            let a = a.as_primitive::<arrow::datatypes::Float64Type>();
            let i = if a.len() == 1 { 0 } else { i };
            a.is_null(i) || a.value(i).is_finite()
        };
        let overflowed = (0..result.len()).any(|i| result.is_valid(i) && result.value(i).is_infinite() && inputs.iter().all(|a| finite(a, i)));
        if overflowed {
            return Err(datafusion::error::DataFusionError::External(Box::new(eddy_common::EddyError::user(
                eddy_common::error::sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                "value out of range: overflow",
            ))));
        }
        Ok(out)
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.0]
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn PhysicalExpr>>) -> DfResult<Arc<dyn PhysicalExpr>> {
        match children.pop() {
            Some(c) if children.is_empty() => Ok(Arc::new(FloatOverflow(c))),
            _ => Err(datafusion::error::DataFusionError::Internal("FloatOverflow takes one child".into())),
        }
    }

    fn fmt_sql(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt_sql(f)
    }
}

/// `agg` with its arguments, filters and grouping expressions checked, if any needs it (an
/// aggregation over raw input evaluates them itself: `sum(b * 1000000000)`).
fn checked_aggregate(agg: &AggregateExec) -> DfResult<Option<AggregateExec>> {
    if agg.mode().input_mode() != AggregateInputMode::Raw {
        return Ok(None);
    }
    let schema = agg.input_schema();
    let mut changed = false;
    let mut check = |e: &Arc<dyn PhysicalExpr>| -> DfResult<Arc<dyn PhysicalExpr>> {
        let t = checked_if_needed(Arc::clone(e), &schema)?;
        changed |= t.transformed;
        Ok(t.data)
    };
    let mut aggr_expr = Vec::with_capacity(agg.aggr_expr().len());
    for a in agg.aggr_expr() {
        let args = a.expressions().iter().map(&mut check).collect::<DfResult<Vec<_>>>()?;
        let order_by = a.order_bys().iter().map(|o| Arc::clone(&o.expr)).collect();
        aggr_expr.push(match a.with_new_expressions(args, order_by) {
            Some(rebuilt) => Arc::new(rebuilt),
            None => Arc::clone(a),
        });
    }
    let filter_expr = agg.filter_expr().iter().map(|f| f.as_ref().map(&mut check).transpose()).collect::<DfResult<Vec<_>>>()?;
    let group = agg.group_expr();
    let group_expr = group.expr().iter().map(|(e, name)| Ok((check(e)?, name.clone()))).collect::<DfResult<Vec<_>>>()?;
    if !changed {
        return Ok(None);
    }
    let group_by = PhysicalGroupBy::new(group_expr, group.null_expr().to_vec(), group.groups().to_vec(), group.has_grouping_set());
    let rebuilt = AggregateExec::try_new(*agg.mode(), group_by, aggr_expr, filter_expr, Arc::clone(agg.input()), agg.input_schema())?;
    Ok(Some(rebuilt.with_limit_options(agg.limit_options())))
}

/// `node` rebuilt with its join condition checked, if it is a join and its condition needs it.
/// (Sort keys are left alone: a window above a sort requires the ordering by the very
/// expressions it was planned with.)
fn checked_join(node: &Arc<dyn ExecutionPlan>) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    use datafusion::physical_plan::joins::utils::JoinFilter;
    use datafusion::physical_plan::joins::{HashJoinExec, NestedLoopJoinExec, NestedLoopJoinExecBuilder};
    let join_filter = |f: Option<&JoinFilter>| -> DfResult<Option<JoinFilter>> {
        let Some(f) = f else { return Ok(None) };
        let t = checked_if_needed(Arc::clone(f.expression()), f.schema())?;
        Ok(t.transformed.then(|| JoinFilter::new(t.data, f.column_indices().to_vec(), Arc::clone(f.schema()))))
    };
    if let Some(join) = node.downcast_ref::<HashJoinExec>() {
        let Some(filter) = join_filter(join.filter())? else { return Ok(None) };
        return Ok(Some(Arc::new(join.builder().with_filter(Some(filter)).build()?)));
    }
    if let Some(join) = node.downcast_ref::<NestedLoopJoinExec>() {
        let Some(filter) = join_filter(join.filter())? else { return Ok(None) };
        return Ok(Some(Arc::new(NestedLoopJoinExecBuilder::from(join).with_filter(Some(filter)).build()?)));
    }
    Ok(None)
}

/// Physical optimizer rule applying [`checked`] to projections, filters, aggregations and join
/// conditions.
#[derive(Debug, Default)]
pub struct CheckedArithmetic;

impl PhysicalOptimizerRule for CheckedArithmetic {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, _config: &ConfigOptions) -> DfResult<Arc<dyn ExecutionPlan>> {
        let out = plan.transform_up(|node| {
            if let Some(p) = node.downcast_ref::<ProjectionExec>() {
                let schema = p.input().schema();
                let mut changed = false;
                let exprs = p
                    .expr()
                    .iter()
                    .map(|pe| {
                        let t = checked_if_needed(Arc::clone(&pe.expr), &schema)?;
                        changed |= t.transformed;
                        Ok(ProjectionExpr { expr: t.data, alias: pe.alias.clone() })
                    })
                    .collect::<DfResult<Vec<_>>>()?;
                if !changed {
                    return Ok(Transformed::no(node));
                }
                let rebuilt = ProjectionExec::try_new(exprs, Arc::clone(p.input()))?;
                return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
            }
            if let Some(a) = node.downcast_ref::<AggregateExec>() {
                return Ok(match checked_aggregate(a)? {
                    Some(rebuilt) => Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>),
                    None => Transformed::no(node),
                });
            }
            if let Some(rebuilt) = checked_join(&node)? {
                return Ok(Transformed::yes(rebuilt));
            }
            if let Some(f) = node.downcast_ref::<FilterExec>() {
                let schema = f.input().schema();
                let t = checked_if_needed(Arc::clone(f.predicate()), &schema)?;
                if !t.transformed {
                    return Ok(Transformed::no(node));
                }
                let predicate = t.data;
                let rebuilt = FilterExecBuilder::new(predicate, Arc::clone(f.input()))
                    .apply_projection_by_ref(f.projection().as_ref())?
                    .with_default_selectivity(f.default_selectivity())
                    .with_batch_size(f.batch_size())
                    .with_fetch(f.fetch())
                    .build()?;
                return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
            }
            Ok(Transformed::no(node))
        })?;
        Ok(out.data)
    }

    fn name(&self) -> &str {
        "eddy_checked_arithmetic"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A constant `timestamp ± interval` that constant folding left alone because it overflows
/// (`now() + INTERVAL '1 day' * -98304000`) fails at planning with PostgreSQL's 22008
/// "timestamp out of range". Left in the plan, DataFusion's range analysis of the expression
/// met bounds of two timestamp types (a debug assertion; the query panicked in debug builds).
#[derive(Debug)]
pub struct ConstantTimeOverflow;

/// The error of `l op r` if both are literals, one a timestamp and the other an interval, and
/// their sum or difference overflows.
fn constant_time_overflow(e: &datafusion::logical_expr::Expr) -> Option<datafusion::error::DataFusionError> {
    use datafusion::logical_expr::{BinaryExpr, Expr};
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else { return None };
    if !matches!(op, Operator::Plus | Operator::Minus) {
        return None;
    }
    let (Expr::Literal(l, _), Expr::Literal(r, _)) = (left.as_ref(), right.as_ref()) else { return None };
    let time = |v: &datafusion::scalar::ScalarValue| matches!(v.data_type(), DataType::Timestamp(..) | DataType::Date32 | DataType::Date64);
    let interval = |v: &datafusion::scalar::ScalarValue| matches!(v.data_type(), DataType::Interval(_));
    if !((time(l) && interval(r)) || (interval(l) && time(r))) {
        return None;
    }
    let (Ok(a), Ok(b)) = (l.to_array(), r.to_array()) else { return None };
    let result = match op {
        Operator::Plus => arrow::compute::kernels::numeric::add(&a, &b),
        _ => arrow::compute::kernels::numeric::sub(&a, &b),
    };
    result.err().map(|_| crate::planner::udf::user_error(eddy_common::error::sqlstate::DATETIME_FIELD_OVERFLOW, "timestamp out of range".into()))
}

impl datafusion::optimizer::OptimizerRule for ConstantTimeOverflow {
    fn name(&self) -> &str {
        "eddy_constant_time_overflow"
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: datafusion::logical_expr::LogicalPlan,
        _config: &dyn datafusion::optimizer::OptimizerConfig,
    ) -> DfResult<Transformed<datafusion::logical_expr::LogicalPlan>> {
        use datafusion::common::tree_node::TreeNodeRecursion;
        let mut failure = None;
        plan.apply_with_subqueries(|node| {
            node.apply_expressions(|e| {
                e.apply(|x| {
                    failure = constant_time_overflow(x);
                    Ok(if failure.is_some() { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
                })
            })
        })?;
        match failure {
            Some(e) => Err(e),
            None => Ok(Transformed::no(plan)),
        }
    }
}
