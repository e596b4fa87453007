//! Integer and decimal arithmetic that fails on overflow, as in PostgreSQL
//! (`SELECT 2147483647 + 1` is `ERROR: integer out of range`, SQLSTATE 22003).
//!
//! DataFusion's `+`, `-` and `*` wrap around unless a binary expression is built with
//! `fail_on_overflow`, which its planner never sets. [`checked`] rebuilds such expressions over
//! integer and decimal operands with it; [`CheckedArithmetic`] applies that to the projections
//! and filters of every query plan, and the stream planner applies it to view expressions.

use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::BinaryExpr;
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
        let Some(b) = e.downcast_ref::<BinaryExpr>() else { return Ok(Transformed::no(e)) };
        if !matches!(b.op(), Operator::Plus | Operator::Minus | Operator::Multiply) {
            return Ok(Transformed::no(e));
        }
        let (Ok(l), Ok(r)) = (b.left().data_type(schema), b.right().data_type(schema)) else { return Ok(Transformed::no(e)) };
        if !(overflows(&l) && overflows(&r)) {
            return Ok(Transformed::no(e));
        }
        let rebuilt = BinaryExpr::new(Arc::clone(b.left()), *b.op(), Arc::clone(b.right())).with_fail_on_overflow(true);
        Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn PhysicalExpr>))
    })
}

/// Physical optimizer rule applying [`checked`] to projections and filters.
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
