//! PostgreSQL's interval (and numeric division) semantics where DataFusion's differ:
//!
//! * Comparisons: PostgreSQL compares intervals as one length, a month counting 30 days and a
//!   day 24 hours (`INTERVAL '25 hours' > INTERVAL '1 day'`, `'1 mon' = '30 days'`); DataFusion
//!   compares months, then days, then nanoseconds, so `now() - ts > INTERVAL '1 day'` was false
//!   for any `ts` less than a month old. Comparisons of intervals (and ORDER BY an interval)
//!   compare [`INTERVAL_KEY`] instead, and `min`/`max` of an interval are the first value in
//!   that order.
//! * `date ± interval` is a timestamp (typed before coercion, so a date compared with it, or in
//!   one CASE, IN list or UNION with it, is coerced to a timestamp).
//! * `numeric / numeric` has PostgreSQL's digits: [`crate::planner::numeric_div`].
//! * `real` with an integer or a numeric computes in double precision.
//! * `time ± interval` is a time of day that wraps at midnight (DataFusion gave an interval:
//!   `TIME '23:00' + INTERVAL '3 hours'` was `26:00:00`).
//! * `trunc(numeric, n)` and `round(numeric, n)` have `n` decimals.
//! * `date_trunc(unit, date)` is a timestamptz (the date cast), not a timestamp, and so are
//!   the values of `generate_series(date, date, interval)`.
//! * A text literal compared with a uuid is read as one ([`super::uuid_literals`]).
//! * `AT TIME ZONE` of a timestamptz is its wall time in the zone ([`super::time_zones`]).
//! * `timestamp - timestamp` is days and a time (`2 days 05:00:00`, PostgreSQL's
//!   `justify_hours`), not hours only (`53:00:00`): [`JUSTIFY_HOURS`].

use std::sync::Arc;

use arrow::array::{Array, AsArray, Decimal128Array, IntervalMonthDayNanoArray};
use arrow::datatypes::{DataType, IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::DFSchema;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{BinaryExpr, Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarUDF, Signature, SortExpr, Volatility};
use super::timestamps::{expression_schema, is_text_literal};

/// An interval's length in nanoseconds (a month is 30 days), as `decimal(38, 0)`.
pub const INTERVAL_KEY: &str = "eddy_interval_key";
/// `a - b` of timestamps as days and a time (`justify_hours`' form).
pub const JUSTIFY_HOURS: &str = "eddy_timestamp_difference";

const NANOS_PER_DAY: i128 = 86_400_000_000_000;
const MDN: DataType = DataType::Interval(IntervalUnit::MonthDayNano);

fn length(v: IntervalMonthDayNano) -> i128 {
    (i128::from(v.months) * 30 + i128::from(v.days)) * NANOS_PER_DAY + i128::from(v.nanoseconds)
}

/// `left - right` microseconds as whole days and the rest (both of the difference's sign).
fn difference_of(left: i64, right: i64) -> IntervalMonthDayNano {
    const MICROS_PER_DAY: i128 = 86_400_000_000;
    let d = i128::from(left) - i128::from(right);
    // Days of any two timestamps fit an i32 (PostgreSQL's range is 294,276 years).
    IntervalMonthDayNano::new(0, (d / MICROS_PER_DAY) as i32, ((d % MICROS_PER_DAY) * 1000) as i64)
}

/// The functions, built once.
struct IntervalFunctions {
    key: Arc<ScalarUDF>,
    justify: Arc<ScalarUDF>,
    time_plus: Arc<ScalarUDF>,
    time_minus: Arc<ScalarUDF>,
    numeric_div: Arc<ScalarUDF>,
    numeric_mul: Arc<ScalarUDF>,
}

fn functions() -> &'static IntervalFunctions {
    static FUNCTIONS: std::sync::OnceLock<IntervalFunctions> = std::sync::OnceLock::new();
    FUNCTIONS.get_or_init(|| {
        let key = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
            let iv = arrow::compute::cast(&args[0].to_array(rows)?, &MDN)?;
            let iv = iv.as_primitive::<IntervalMonthDayNanoType>();
            let out: Decimal128Array = iv.iter().map(|v| v.map(length)).collect();
            Ok(ColumnarValue::Array(Arc::new(out.with_precision_and_scale(38, 0)?)))
        };
        // `a - b` of timestamps (or a date): the difference in microseconds as days and a
        // time, `justify_hours`' form. Computed on microseconds, so spans past 292 years (the
        // nanoseconds DataFusion subtracted in) are exact, not NULL.
        let difference = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
            let micros = |a: &ColumnarValue| -> DfResult<arrow::array::ArrayRef> {
                let t = arrow::compute::cast(&a.to_array(rows)?, &DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None))?;
                Ok(arrow::compute::cast(&t, &DataType::Int64)?)
            };
            let (l, r) = (micros(&args[0])?, micros(&args[1])?);
            let (l, r) = (l.as_primitive::<arrow::datatypes::Int64Type>(), r.as_primitive::<arrow::datatypes::Int64Type>());
            let out: IntervalMonthDayNanoArray = (0..rows)
                .map(|i| (l.is_valid(i) && r.is_valid(i)).then(|| difference_of(l.value(i), r.value(i))))
                .collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        };
        let udf = |name: &str, ret: DataType, body: Arc<crate::planner::udf::Body>| {
            Arc::new(crate::planner::udf::closure_udf(name, Signature::any(1, Volatility::Immutable), ret, body))
        };
        IntervalFunctions {
            key: udf(INTERVAL_KEY, DataType::Decimal128(38, 0), Arc::new(key)),
            justify: Arc::new(crate::planner::udf::closure_udf(JUSTIFY_HOURS, Signature::any(2, Volatility::Immutable), MDN, Arc::new(difference))),
            time_plus: Arc::new(super::scalar_fns::time_interval_udf(false)),
            time_minus: Arc::new(super::scalar_fns::time_interval_udf(true)),
            numeric_div: crate::planner::numeric_div::numeric_div_udf(),
            numeric_mul: crate::planner::numeric_div::numeric_mul_udf(),
        }
    })
}

fn call(udf: &Arc<ScalarUDF>, e: Expr) -> Expr {
    udf.call(vec![e])
}

fn is_interval(e: &Expr, schema: &DFSchema) -> bool {
    matches!(e.get_type(schema), Ok(DataType::Interval(_)))
}

fn is_timestamp(e: &Expr, schema: &DFSchema) -> bool {
    matches!(e.get_type(schema), Ok(DataType::Timestamp(..)))
}

fn rewrite_expr(e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let f = functions();
    if let Expr::Cast(c) = &e {
        if let Some(out) = super::time_zones::at_time_zone(c, schema) {
            return Ok(Transformed::yes(out));
        }
    }
    if let Expr::AggregateFunction(a) = &e {
        if let Some(out) = interval_extreme(a, schema, f) {
            return Ok(Transformed::yes(out));
        }
    }
    // concat/concat_ws write a boolean argument in its output form, `t` / `f` (before type
    // coercion, which casts it to text: `true`; an explicit `b::text` stays `true`).
    if let Expr::ScalarFunction(call) = &e {
        if matches!(call.func.name(), "concat" | "concat_ws") && call.args.iter().any(|a| matches!(a.get_type(schema), Ok(DataType::Boolean))) {
            let mut call = call.clone();
            for a in call.args.iter_mut() {
                if matches!(a.get_type(schema), Ok(DataType::Boolean)) {
                    *a = crate::planner::text_cast::pg_text_call(a.clone());
                }
            }
            return Ok(Transformed::yes(Expr::ScalarFunction(call)));
        }
    }
    if let Expr::WindowFunction(w) = &e {
        if let Some(out) = widened_default(w, schema) {
            return Ok(Transformed::yes(out));
        }
    }
    // date_trunc of a date is a timestamptz, as PostgreSQL casts the date (DataFusion gave a
    // timestamp without time zone).
    if let Expr::ScalarFunction(mut call) = e {
        let date = |e: &Expr| matches!(e.get_type(schema), Ok(DataType::Date32 | DataType::Date64));
        if call.func.name() == "date_trunc" && call.args.len() == 2 && date(&call.args[1]) {
            let tz = DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some(eddy_common::types::UTC.into()));
            let d = call.args.pop().unwrap_or_else(|| unreachable!("two arguments"));
            call.args.push(Expr::Cast(Cast::new(Box::new(d), tz)));
            return Ok(Transformed::yes(Expr::ScalarFunction(call)));
        }
        // A series of dates is PostgreSQL's timestamptz series (there is no date one).
        if matches!(call.func.name(), "generate_series" | "range") && call.args.len() == 3 && date(&call.args[0]) && date(&call.args[1]) {
            let tz = DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some(eddy_common::types::UTC.into()));
            for a in call.args.iter_mut().take(2) {
                *a = Expr::Cast(Cast::new(Box::new(a.clone()), tz.clone()));
            }
            return Ok(Transformed::yes(Expr::ScalarFunction(call)));
        }
        if let Some(out) = super::scalar_fns::bytea_length(call.func.name(), &call.args, schema) {
            return Ok(Transformed::yes(out));
        }
        if let Some(out) = numeric_rounding(&call, schema) {
            return Ok(Transformed::yes(out));
        }
        // ceil/floor of a numeric may need one more integer digit than the argument has
        // (`ceil(0.5)`, numeric(1,1), is 1; DataFusion failed with "Decimal overflow"), and
        // are integral: scale 0, typed before coercion so a comparison with them coerces both
        // sides (`2.5 = floor(2.5)` compared numeric(3,1) with numeric(3,0) and failed).
        if matches!(call.func.name(), "ceil" | "floor") && call.args.len() == 1 {
            if let Ok(DataType::Decimal128(p, s)) = call.args[0].get_type(schema) {
                if s > 0 {
                    let p = (p + 1).min(38);
                    let x = call.args.pop().unwrap_or_else(|| unreachable!("one argument"));
                    call.args.push(Expr::Cast(Cast::new(Box::new(x), DataType::Decimal128(p, s))));
                    let integral = Expr::Cast(Cast::new(Box::new(Expr::ScalarFunction(call)), DataType::Decimal128(p, 0)));
                    return Ok(Transformed::yes(integral));
                }
            }
        }
        // atan2 of integers is double precision (DataFusion's was real).
        if call.func.name() == "atan2" && call.args.iter().any(|a| a.get_type(schema).is_ok_and(|t| t.is_integer())) {
            call.args = call.args.into_iter().map(|a| Expr::Cast(Cast::new(Box::new(a), DataType::Float64))).collect();
            return Ok(Transformed::yes(Expr::ScalarFunction(call)));
        }
        return Ok(Transformed::no(Expr::ScalarFunction(call)));
    }
    let Expr::BinaryExpr(b) = e else { return Ok(Transformed::no(e)) };
    if let Some(out) = super::uuid_literals::canonical_uuid_literal(&b, schema).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))? {
        return Ok(Transformed::yes(out));
    }
    let comparison = matches!(b.op, Operator::Eq | Operator::NotEq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq | Operator::IsDistinctFrom | Operator::IsNotDistinctFrom);
    if comparison {
        let (li, ri) = (is_interval(&b.left, schema), is_interval(&b.right, schema));
        let side = |e: Expr, interval: bool| if interval { call(&f.key, e) } else { call(&f.key, Expr::Cast(Cast::new(Box::new(e), MDN))) };
        let one_side_text = (li && is_text_literal(&b.right)) || (ri && is_text_literal(&b.left));
        if (li && ri) || one_side_text {
            let BinaryExpr { left, op, right } = b;
            return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(Box::new(side(*left, li)), op, Box::new(side(*right, ri))))));
        }
    }
    // numeric / numeric (or an integer) to PostgreSQL's digits, typed before coercion so the
    // expressions around it coerce to the quotient's type.
    let decimal = |e: &Expr| matches!(e.get_type(schema), Ok(DataType::Decimal128(..) | DataType::Decimal256(..)));
    let integer = |e: &Expr| e.get_type(schema).is_ok_and(|t| t.is_integer());
    if b.op == Operator::Divide && ((decimal(&b.left) && (decimal(&b.right) || integer(&b.right))) || (integer(&b.left) && decimal(&b.right))) {
        return Ok(Transformed::yes(f.numeric_div.call(vec![*b.left, *b.right])));
    }
    // A product of numerics whose scales add past 38 (a quotient times a quotient), which
    // DataFusion refuses: exact, rounded to 20 decimals (PostgreSQL keeps them all).
    let scale = |e: &Expr| match e.get_type(schema) {
        Ok(DataType::Decimal128(_, s)) => Some(i32::from(s)),
        _ => None,
    };
    if b.op == Operator::Multiply && scale(&b.left).zip(scale(&b.right)).is_some_and(|(l, r)| l + r > 38) {
        return Ok(Transformed::yes(f.numeric_mul.call(vec![*b.left, *b.right])));
    }
    // real with an integer or numeric is double precision arithmetic, as PostgreSQL resolves
    // the operator (DataFusion kept real: 10::real / 3 printed 3.3333333).
    let real = |e: &Expr| matches!(e.get_type(schema), Ok(DataType::Float32));
    let exact = |e: &Expr| e.get_type(schema).is_ok_and(|t| t.is_integer() || matches!(t, DataType::Decimal128(..)));
    if matches!(b.op, Operator::Plus | Operator::Minus | Operator::Multiply | Operator::Divide | Operator::Modulo)
        && ((real(&b.left) && exact(&b.right)) || (exact(&b.left) && real(&b.right)))
    {
        let double = |e: Expr| Box::new(Expr::Cast(Cast::new(Box::new(e), DataType::Float64)));
        return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(double(*b.left), b.op, double(*b.right)))));
    }
    // date ± interval is a timestamp, as in PostgreSQL (DataFusion kept a date and dropped the
    // hours); typed before coercion, so comparisons, CASE, IN, COALESCE and UNION with dates
    // coerce the dates to timestamps.
    let is_date = |e: &Expr| matches!(e.get_type(schema), Ok(DataType::Date32 | DataType::Date64));
    let ts = |e: Expr| Box::new(Expr::Cast(Cast::new(Box::new(e), DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None))));
    if matches!(b.op, Operator::Plus | Operator::Minus) && is_date(&b.left) && is_interval(&b.right, schema) {
        return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(ts(*b.left), b.op, b.right))));
    }
    if b.op == Operator::Plus && is_interval(&b.left, schema) && is_date(&b.right) {
        return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(b.left, b.op, ts(*b.right)))));
    }
    // time ± interval is a time of day (DataFusion made the time an interval and added).
    let is_time = |e: &Expr| matches!(e.get_type(schema), Ok(DataType::Time32(_) | DataType::Time64(_)));
    if matches!(b.op, Operator::Plus | Operator::Minus) && is_time(&b.left) && is_interval(&b.right, schema) {
        let udf = if b.op == Operator::Plus { &f.time_plus } else { &f.time_minus };
        return Ok(Transformed::yes(udf.call(vec![*b.left, *b.right])));
    }
    if b.op == Operator::Plus && is_interval(&b.left, schema) && is_time(&b.right) {
        return Ok(Transformed::yes(f.time_plus.call(vec![*b.right, *b.left])));
    }
    let (lt, rt) = (is_timestamp(&b.left, schema), is_timestamp(&b.right, schema));
    if b.op == Operator::Minus && ((lt && (rt || is_date(&b.right))) || (is_date(&b.left) && rt)) {
        return Ok(Transformed::yes(f.justify.call(vec![*b.left, *b.right])));
    }
    Ok(Transformed::no(Expr::BinaryExpr(b)))
}

/// `trunc(x [, n])` and `round(x, n)` of a numeric with a constant `n`, typed with `max(n, 0)`
/// decimals as PostgreSQL's are (`trunc(20.00, 1)` is `20.0`, `round(5.25, 3)` is `5.250`;
/// DataFusion's `trunc` of a numeric was a double and its `round` kept the argument's scale
/// when `n` was larger).
fn numeric_rounding(call: &datafusion::logical_expr::expr::ScalarFunction, schema: &DFSchema) -> Option<Expr> {
    let name = call.func.name();
    let mut x = call.args.first()?.clone();
    let (p, s) = match x.get_type(schema).ok()? {
        DataType::Decimal128(p, s) => (p, s),
        // An integer with decimals to keep is a numeric (`trunc(7, 1)` is 7.0).
        t if t.is_integer() && call.args.len() == 2 => {
            x = Expr::Cast(Cast::new(Box::new(x), DataType::Decimal128(20, 0)));
            (20, 0)
        }
        _ => return None,
    };
    let n = match (name, call.args.as_slice()) {
        ("trunc", [_]) => 0,
        ("trunc" | "round", [_, Expr::Literal(v, _)]) => i32::try_from(v.cast_to(&DataType::Int64).ok().and_then(|v| match v {
            datafusion::scalar::ScalarValue::Int64(Some(n)) => Some(n),
            _ => None,
        })?)
        .ok()?
        .clamp(-38, 38),
        _ => return None,
    };
    if n >= i32::from(s) {
        let to = n.min(38);
        let precision = (i32::from(p) - i32::from(s) + to).clamp(1, 38) as u8;
        return Some(Expr::Cast(Cast::new(Box::new(x), DataType::Decimal128(precision, to as i8))));
    }
    let n_arg = Expr::Literal(datafusion::scalar::ScalarValue::Int32(Some(n)), None);
    (name == "trunc").then(|| Arc::new(crate::planner::numeric_div::numeric_trunc_udf(p, s, n)).call(vec![x, n_arg]))
}

/// The plan pass (see the module docs).
pub fn pg_intervals(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    let f = functions();
    // Once an expression changed type (date ± interval is a timestamp), every node visited
    // after it (its ancestors among them) recomputes its schema.
    let changed = std::cell::Cell::new(false);
    let out = plan.transform_up_with_subqueries(|node| {
        let node = if changed.get() { node.recompute_schema()? } else { node };
        let schema = match (&node, expression_schema(&node)) {
            (_, Some(schema)) => schema,
            (LogicalPlan::Sort(s), None) => {
                let schema = s.input.schema().clone();
                if !s.expr.iter().any(|e| is_interval(&e.expr, &schema)) {
                    return Ok(Transformed::no(node));
                }
                let LogicalPlan::Sort(mut s) = node else { unreachable!("matched above") };
                s.expr = s
                    .expr
                    .into_iter()
                    .map(|e| if is_interval(&e.expr, &schema) { SortExpr { expr: call(&f.key, e.expr), ..e } } else { e })
                    .collect();
                return Ok(Transformed::yes(LogicalPlan::Sort(s)));
            }
            (LogicalPlan::Window(w), None) => {
                // The functions' arguments too (`lag(d + INTERVAL '3 hours')` is a timestamp);
                // the window's schema then changes with them.
                let schema = w.input.schema().clone();
                let t = crate::planner::names::map_expressions_keeping_names(node, |e| {
                    e.transform_up(|e| window_interval_order(e, &schema, f))?.transform_data(|e| e.transform_up(|e| rewrite_expr(e, &schema)))
                })?;
                if !t.transformed {
                    return Ok(t);
                }
                changed.set(true);
                return Ok(Transformed::yes(t.data.recompute_schema()?));
            }
            _ => return Ok(Transformed::no(node)),
        };
        let t = crate::planner::names::map_expressions_keeping_names(node, |e| e.transform_up(|e| rewrite_expr(e, &schema)))?;
        if t.transformed {
            changed.set(true);
            Ok(Transformed::yes(t.data.recompute_schema()?))
        } else {
            Ok(t)
        }
    })?;
    Ok(out.data)
}

/// `lead(x, n, d)` / `lag(x, n, d)` whose default is of a wider type than `x` computes in the
/// common type, as PostgreSQL does (`lead(int_col, 1, -1.4)` is numeric; DataFusion cast the
/// default to the argument's type: -1).
fn widened_default(w: &datafusion::logical_expr::expr::WindowFunction, schema: &DFSchema) -> Option<Expr> {
    use datafusion::logical_expr::type_coercion::binary::comparison_coercion;
    if !matches!(w.fun.name(), "lead" | "lag") || w.params.args.len() != 3 {
        return None;
    }
    let x = w.params.args[0].get_type(schema).ok()?;
    let d = w.params.args[2].get_type(schema).ok()?;
    // An integer default is an integer literal's type here (bigint), not a wider one.
    if x == d || d == DataType::Null || (x.is_integer() && d.is_integer()) {
        return None;
    }
    let common = comparison_coercion(&x, &d)?;
    if common == x || !(common.is_numeric() && x.is_numeric()) {
        return None;
    }
    let mut w = w.clone();
    w.params.args[0] = Expr::Cast(Cast::new(Box::new(w.params.args[0].clone()), common));
    Some(Expr::WindowFunction(Box::new(w)))
}

/// `min(i)` / `max(i)` of an interval: its first value ordered by [`INTERVAL_KEY`] (NULLs
/// last, so a NULL is the answer only when every value is), as PostgreSQL compares intervals
/// by their length (`max('1 mon', '31 days')` is `31 days`; DataFusion compared months first).
fn interval_extreme(a: &datafusion::logical_expr::expr::AggregateFunction, schema: &DFSchema, f: &IntervalFunctions) -> Option<Expr> {
    let name = a.func.name();
    let p = &a.params;
    if !matches!(name, "min" | "max") || p.args.len() != 1 || !p.order_by.is_empty() || !is_interval(&p.args[0], schema) {
        return None;
    }
    let order = SortExpr { expr: call(&f.key, p.args[0].clone()), asc: name == "min", nulls_first: false };
    let first = datafusion::functions_aggregate::first_last::first_value_udaf();
    Some(Expr::AggregateFunction(datafusion::logical_expr::expr::AggregateFunction::new_udf(first, p.args.clone(), false, p.filter.clone(), vec![order], None)))
}

/// A window ordered by an interval orders by its [`INTERVAL_KEY`], as a sort does (DataFusion
/// could not run the default RANGE frame over an interval: "Cannot run range queries on
/// datatype"). Frames with offsets, which are intervals themselves, are left as they are.
fn window_interval_order(e: Expr, schema: &DFSchema, f: &IntervalFunctions) -> DfResult<Transformed<Expr>> {
    use datafusion::logical_expr::{WindowFrameBound, WindowFrameUnits};
    let Expr::WindowFunction(mut w) = e else { return Ok(Transformed::no(e)) };
    let unbounded = |b: &WindowFrameBound| match b {
        WindowFrameBound::CurrentRow => true,
        WindowFrameBound::Preceding(v) | WindowFrameBound::Following(v) => v.is_null(),
    };
    let frame = &w.params.window_frame;
    let offsets = frame.units == WindowFrameUnits::Range && !(unbounded(&frame.start_bound) && unbounded(&frame.end_bound));
    if offsets || !w.params.order_by.iter().any(|o| is_interval(&o.expr, schema)) {
        return Ok(Transformed::no(Expr::WindowFunction(w)));
    }
    let order_by = std::mem::take(&mut w.params.order_by);
    w.params.order_by = order_by.into_iter().map(|o| if is_interval(&o.expr, schema) { SortExpr { expr: call(&f.key, o.expr), ..o } } else { o }).collect();
    Ok(Transformed::yes(Expr::WindowFunction(w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_count_a_month_as_30_days_and_justify_moves_whole_days() {
        let iv = IntervalMonthDayNano::new;
        assert!(length(iv(0, 0, 25 * 3_600_000_000_000)) > length(iv(0, 1, 0)));
        assert_eq!(length(iv(1, 0, 0)), length(iv(0, 30, 0)));
        assert_eq!(difference_of(53 * 3_600_000_000, 0), iv(0, 2, 5 * 3_600_000_000_000));
        assert_eq!(difference_of(0, 53 * 3_600_000_000), iv(0, -2, -5 * 3_600_000_000_000));
        // 2024-01-01 - 1700-01-01: past the 292 years nanoseconds hold.
        assert_eq!(difference_of(1_704_067_200_000_000, -8_520_336_000_000_000), iv(0, 118_338, 0));
    }
}
