//! Temporal filters (`WHERE ts > now() - INTERVAL '1' HOUR` in a view): `now()` in a view's
//! filter becomes `eddy_now()`, which the optimizer cannot fold into the creation time (it is
//! volatile, and it refuses to evaluate), and the stream planner turns each conjunct comparing
//! it with an expression of the row into a bound of `eddy_stream`'s `TemporalFilter`.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::DFSchema;
use datafusion::logical_expr::{ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator as BinOp, Signature, Volatility};
use datafusion::scalar::ScalarValue;
use eddy_common::{not_supported, Result};
use eddy_stream::operator::{TemporalBound, TimeBound};

/// The name `now()` has in a view's filters.
pub const NOW_UDF: &str = "eddy_now";

/// The current-time functions a temporal filter may compare with.
const NOW_FUNCTIONS: [&str; 6] = ["now", "current_timestamp", "statement_timestamp", "transaction_timestamp", "clock_timestamp", "localtimestamp"];

fn now_udf(ret: DataType) -> Expr {
    let body = |_: &[ColumnarValue], _: usize| -> datafusion::error::Result<ColumnarValue> {
        Err(datafusion::error::DataFusionError::NotImplemented(
            "now() in a materialized view is only supported in WHERE, compared with an expression of the row".into(),
        ))
    };
    crate::planner::udf::closure_udf(NOW_UDF, Signature::nullary(Volatility::Volatile), ret, Arc::new(body)).call(vec![])
}

/// Replaces the current-time functions in every filter of `plan` by [`NOW_UDF`].
pub fn rewrite_now(plan: LogicalPlan) -> Result<LogicalPlan> {
    let out = plan.transform_up_with_subqueries(|node| {
        let LogicalPlan::Filter(f) = &node else { return Ok(Transformed::no(node)) };
        let schema = f.input.schema().clone();
        let pred = f.predicate.clone().transform(|e| match &e {
            Expr::ScalarFunction(func) if func.args.is_empty() && NOW_FUNCTIONS.contains(&func.name().to_ascii_lowercase().as_str()) => {
                let ret = e.get_type(&schema)?;
                Ok(Transformed::yes(now_udf(ret)))
            }
            _ => Ok(Transformed::no(e)),
        })?;
        if !pred.transformed {
            return Ok(Transformed::no(node));
        }
        Ok(Transformed::yes(LogicalPlan::Filter(datafusion::logical_expr::Filter::try_new(pred.data, f.input.clone())?)))
    })?;
    Ok(out.data)
}

/// True if `e` calls [`NOW_UDF`].
pub fn contains_now(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::ScalarFunction(f) if f.name() == NOW_UDF))).unwrap_or(false)
}

fn refused(_: &Expr) -> eddy_common::EddyError {
    not_supported!(
        "now() in a materialized view must be compared with an expression of the row, such as ts > now() - INTERVAL '1' HOUR: \
         one side now() plus or minus a constant interval of days or less (months vary in length), the other a timestamp or date \
         of the row, joined to the rest of WHERE by AND"
    )
}

/// Microseconds of a constant interval (no months: their length varies).
fn interval_us(v: &ScalarValue) -> Option<i64> {
    match v {
        ScalarValue::IntervalMonthDayNano(Some(i)) if i.months == 0 => i64::from(i.days).checked_mul(86_400_000_000)?.checked_add(i.nanoseconds / 1000),
        ScalarValue::IntervalDayTime(Some(i)) => i64::from(i.days).checked_mul(86_400_000_000)?.checked_add(i64::from(i.milliseconds) * 1000),
        ScalarValue::IntervalYearMonth(Some(0)) => Some(0),
        _ => None,
    }
}

/// Microseconds of a constant interval expression (a literal, maybe cast).
pub(crate) fn constant_us(e: &Expr) -> Option<i64> {
    match e {
        Expr::Literal(v, _) => interval_us(v),
        Expr::Cast(c) => match c.expr.as_ref() {
            Expr::Literal(v, _) => interval_us(v),
            _ => None,
        },
        _ => None,
    }
}

fn fine_timestamp(t: &DataType) -> bool {
    matches!(t, DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond | arrow::datatypes::TimeUnit::Nanosecond, _))
}

/// `now() + k` (through casts and `±` constant intervals): `k` in microseconds.
fn now_shift(e: &Expr) -> Option<i64> {
    match e {
        Expr::ScalarFunction(f) if f.name() == NOW_UDF => Some(0),
        // Casts to other timestamp types keep the instant; to a date or to seconds they truncate.
        Expr::Cast(c) if fine_timestamp(c.field.data_type()) => now_shift(&c.expr),
        Expr::TryCast(c) if fine_timestamp(c.field.data_type()) => now_shift(&c.expr),
        Expr::Alias(a) => now_shift(&a.expr),
        Expr::BinaryExpr(b) => {
            let constant = constant_us;
            match b.op {
                BinOp::Plus => match (now_shift(&b.left), constant(&b.right)) {
                    (Some(k), Some(c)) => k.checked_add(c),
                    _ => now_shift(&b.right)?.checked_add(constant(&b.left)?),
                },
                BinOp::Minus => now_shift(&b.left)?.checked_sub(constant(&b.right)?),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The bound a conjunct `e op now() + k` (or `now() + k op e`) puts on a row's visibility.
pub fn temporal_bound(conjunct: &Expr, schema: &DFSchema, physical: impl Fn(&Expr) -> Result<Arc<dyn datafusion::physical_expr::PhysicalExpr>>) -> Result<TemporalBound> {
    let Expr::BinaryExpr(b) = conjunct else { return Err(refused(conjunct)) };
    let (row, k, op) = match (contains_now(&b.left), contains_now(&b.right)) {
        (false, true) => (&b.left, now_shift(&b.right).ok_or_else(|| refused(conjunct))?, b.op),
        (true, false) => {
            let flipped = match b.op {
                BinOp::Lt => BinOp::Gt,
                BinOp::LtEq => BinOp::GtEq,
                BinOp::Gt => BinOp::Lt,
                BinOp::GtEq => BinOp::LtEq,
                _ => return Err(refused(conjunct)),
            };
            (&b.right, now_shift(&b.left).ok_or_else(|| refused(conjunct))?, flipped)
        }
        _ => return Err(refused(conjunct)),
    };
    let bound = match op {
        BinOp::Gt => TimeBound::Before,
        BinOp::GtEq => TimeBound::BeforeOrAt,
        BinOp::Lt => TimeBound::After,
        BinOp::LtEq => TimeBound::AtOrAfter,
        _ => return Err(refused(conjunct)),
    };
    if !matches!(row.get_type(schema)?, DataType::Timestamp(..) | DataType::Date32 | DataType::Date64) {
        return Err(refused(conjunct));
    }
    Ok(TemporalBound { expr: physical(row)?, shift_us: k, bound })
}
