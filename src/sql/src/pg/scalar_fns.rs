//! PostgreSQL scalar functions DataFusion lacks: `div`, `width_bucket`, `scale`, `trim_scale`,
//! `regexp_split_to_array`, `encode` (PostgreSQL's base64),
//! `min_scale`, `justify_hours`, `justify_days`, `justify_interval`, and `time ± interval`
//! (the interval pass rewrites the operator to [`TIME_PLUS`]/[`TIME_MINUS`]: the time of day
//! wraps around midnight, months and days are ignored, as in PostgreSQL), and the rounding of
//! `timestamp(p)` / `time(p)` casts and clock functions (`pg::rewrite::clock`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, Int32Array, IntervalMonthDayNanoArray, Time64MicrosecondArray};
use arrow::datatypes::{DataType, Decimal128Type, Float64Type, IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit, Time64MicrosecondType, TimeUnit};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{Signature, Volatility};
use datafusion::prelude::SessionContext;
use eddy_common::error::sqlstate;
use eddy_common::types::DEFAULT_NUMERIC;

use super::udf::user_error;
use crate::planner::numeric_div::{display_scale, min_scale as min_scale_of};
use crate::planner::udf::{closure_udf, columnar, register, Body};

/// `time + interval`, as the interval pass writes it.
pub const TIME_PLUS: &str = "eddy_time_plus_interval";
/// `time - interval`.
pub const TIME_MINUS: &str = "eddy_time_minus_interval";
/// `x::uuid`.
pub const UUID_IN: &str = "eddy_uuid_in";

const MDN: DataType = DataType::Interval(IntervalUnit::MonthDayNano);
const NUMERIC: DataType = DataType::Decimal128(DEFAULT_NUMERIC.0, DEFAULT_NUMERIC.1);
const MICROS_PER_DAY: i64 = 86_400_000_000;
const NANOS_PER_DAY: i128 = 86_400_000_000_000;

fn cast(a: &ArrayRef, to: &DataType) -> DfResult<ArrayRef> {
    Ok(arrow::compute::cast(a, to)?)
}

fn division_by_zero() -> datafusion::error::DataFusionError {
    user_error(sqlstate::DIVISION_BY_ZERO, "division by zero".into())
}

/// `div(y, x)`: the integer quotient of y/x, truncated toward zero, as a numeric.
fn div(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    let (y, x) = (cast(&a[0], &NUMERIC)?, cast(&a[1], &NUMERIC)?);
    let (y, x) = (y.as_primitive::<Decimal128Type>(), x.as_primitive::<Decimal128Type>());
    let unit = 10i128.pow(DEFAULT_NUMERIC.1 as u32);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if y.is_null(i) || x.is_null(i) {
            out.push(None);
            continue;
        }
        if x.value(i) == 0 {
            return Err(division_by_zero());
        }
        // Both carry the same scale, so the quotient of the raw values is y/x.
        let q = y.value(i) / x.value(i);
        out.push(Some(q.checked_mul(unit).ok_or_else(|| user_error(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow".into()))?));
    }
    Ok(Arc::new(Decimal128Array::from(out).with_precision_and_scale(DEFAULT_NUMERIC.0, DEFAULT_NUMERIC.1)?))
}

/// `width_bucket(operand, low, high, count)`: which of `count` equal buckets between `low`
/// and `high` holds the operand (0 below, count + 1 above; the range may run downward).
fn width_bucket(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    let f: Vec<ArrayRef> = a[..3].iter().map(|x| cast(x, &DataType::Float64)).collect::<DfResult<_>>()?;
    let (op, low, high) = (f[0].as_primitive::<Float64Type>(), f[1].as_primitive::<Float64Type>(), f[2].as_primitive::<Float64Type>());
    let count = cast(&a[3], &DataType::Int64)?;
    let count = count.as_primitive::<arrow::datatypes::Int64Type>();
    let bad = |m: &str| user_error(sqlstate::INVALID_ARGUMENT_FOR_WIDTH_BUCKET, m.to_string());
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if op.is_null(i) || low.is_null(i) || high.is_null(i) || count.is_null(i) {
            out.push(None);
            continue;
        }
        let (x, lo, hi, c) = (op.value(i), low.value(i), high.value(i), count.value(i));
        if c <= 0 || c > i64::from(i32::MAX) {
            return Err(bad("count must be greater than zero"));
        }
        if lo == hi {
            return Err(bad("lower bound cannot equal upper bound"));
        }
        if x.is_nan() || lo.is_nan() || hi.is_nan() {
            return Err(bad("operand, lower bound, and upper bound cannot be NaN"));
        }
        if !lo.is_finite() || !hi.is_finite() {
            return Err(bad("lower and upper bounds must be finite"));
        }
        let cf = c as f64;
        let bucket = if lo < hi {
            if x < lo {
                0
            } else if x >= hi {
                c + 1
            } else {
                (((x - lo) / (hi - lo) * cf).floor() as i64 + 1).min(c)
            }
        } else if x > lo {
            0
        } else if x <= hi {
            c + 1
        } else {
            (((lo - x) / (lo - hi) * cf).floor() as i64 + 1).min(c)
        };
        out.push(Some(i32::try_from(bucket).map_err(|_| user_error(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range".into()))?));
    }
    Ok(Arc::new(Int32Array::from(out)))
}

/// The argument as decimals: its precision and scale (anything else as an unconstrained
/// numeric).
fn decimal(a: &ArrayRef) -> DfResult<(ArrayRef, u8, i8)> {
    Ok(match a.data_type() {
        DataType::Decimal128(p, s) => (a.clone(), *p, *s),
        _ => (cast(a, &NUMERIC)?, DEFAULT_NUMERIC.0, DEFAULT_NUMERIC.1),
    })
}

/// `min_scale(numeric)`: the digits after the point the value needs.
fn min_scale(a: &[ArrayRef], _: usize) -> DfResult<ArrayRef> {
    let (d, _, s) = decimal(&a[0])?;
    let out: Int32Array = d.as_primitive::<Decimal128Type>().iter().map(|v| v.map(|v| min_scale_of(v, s))).collect();
    Ok(Arc::new(out))
}

/// `scale(numeric)`: the digits after the point it shows (an unconstrained numeric, or an
/// integer taken as one, shows those it needs).
fn scale(a: &[ArrayRef], _: usize) -> DfResult<ArrayRef> {
    let (d, p, s) = decimal(&a[0])?;
    let out: Int32Array = d.as_primitive::<Decimal128Type>().iter().map(|v| v.map(|v| display_scale(v, p, s))).collect();
    Ok(Arc::new(out))
}

/// `trim_scale(numeric)`: the value without trailing zeros after the point (an unconstrained
/// numeric, which prints so).
fn trim_scale(a: &[ArrayRef], _: usize) -> DfResult<ArrayRef> {
    cast(&a[0], &NUMERIC)
}

fn intervals(a: &ArrayRef) -> DfResult<ArrayRef> {
    cast(a, &MDN)
}

/// PostgreSQL's `justify_hours`: whole days of the time move to the days; days and time end
/// with one sign.
fn justify_hours_of(v: IntervalMonthDayNano) -> Option<IntervalMonthDayNano> {
    let total = i128::from(v.days) * NANOS_PER_DAY + i128::from(v.nanoseconds);
    Some(IntervalMonthDayNano::new(v.months, i32::try_from(total / NANOS_PER_DAY).ok()?, i64::try_from(total % NANOS_PER_DAY).ok()?))
}

/// PostgreSQL's `justify_days`: whole 30-day months of the days move to the months; months
/// and days end with one sign.
fn justify_days_of(v: IntervalMonthDayNano) -> Option<IntervalMonthDayNano> {
    let (mut months, mut days) = (v.months.checked_add(v.days / 30)?, v.days % 30);
    if months > 0 && days < 0 {
        days += 30;
        months -= 1;
    } else if months < 0 && days > 0 {
        days -= 30;
        months += 1;
    }
    Some(IntervalMonthDayNano::new(months, days, v.nanoseconds))
}

/// PostgreSQL's `justify_interval`: both, with one sign across months, days and time.
fn justify_interval_of(v: IntervalMonthDayNano) -> Option<IntervalMonthDayNano> {
    let h = justify_hours_of(IntervalMonthDayNano::new(0, v.days, v.nanoseconds))?;
    let (mut months, mut days, mut time) = (v.months.checked_add(h.days / 30)?, h.days % 30, h.nanoseconds);
    let day = NANOS_PER_DAY as i64;
    if months > 0 && (days < 0 || (days == 0 && time < 0)) {
        days += 30;
        months -= 1;
    } else if months < 0 && (days > 0 || (days == 0 && time > 0)) {
        days -= 30;
        months += 1;
    }
    if days > 0 && time < 0 {
        time += day;
        days -= 1;
    } else if days < 0 && time > 0 {
        time -= day;
        days += 1;
    }
    Some(IntervalMonthDayNano::new(months, days, time))
}

fn justify(f: fn(IntervalMonthDayNano) -> Option<IntervalMonthDayNano>) -> impl Fn(&[ArrayRef], usize) -> DfResult<ArrayRef> {
    move |a, _| {
        let iv = intervals(&a[0])?;
        let iv = iv.as_primitive::<IntervalMonthDayNanoType>();
        let out = iv
            .iter()
            .map(|v| v.map(|v| f(v).ok_or_else(|| user_error(sqlstate::DATETIME_FIELD_OVERFLOW, "interval out of range".into()))).transpose())
            .collect::<DfResult<IntervalMonthDayNanoArray>>()?;
        Ok(Arc::new(out) as ArrayRef)
    }
}

/// `time ± interval`: the interval's time part moves the time of day, wrapping at midnight.
fn time_interval(sign: i64) -> impl Fn(&[ArrayRef], usize) -> DfResult<ArrayRef> {
    move |a, _| {
        let t = cast(&a[0], &DataType::Time64(TimeUnit::Microsecond))?;
        let iv = intervals(&a[1])?;
        let (t, iv) = (t.as_primitive::<Time64MicrosecondType>(), iv.as_primitive::<IntervalMonthDayNanoType>());
        let out: Time64MicrosecondArray = t
            .iter()
            .zip(iv.iter())
            .map(|(t, iv)| Some((t? + sign * (iv?.nanoseconds / 1000 % MICROS_PER_DAY)).rem_euclid(MICROS_PER_DAY)))
            .collect();
        Ok(Arc::new(out) as ArrayRef)
    }
}

/// The `time ± interval` function ([`TIME_PLUS`] or [`TIME_MINUS`]).
pub fn time_interval_udf(minus: bool) -> datafusion::logical_expr::ScalarUDF {
    let (name, sign) = if minus { (TIME_MINUS, -1) } else { (TIME_PLUS, 1) };
    let f = time_interval(sign);
    let body: Arc<Body> = Arc::new(move |args, rows| columnar(args, rows, &f));
    closure_udf(name, Signature::any(2, Volatility::Immutable), DataType::Time64(TimeUnit::Microsecond), body)
}

/// `eddy_interval_mul(interval, number)` or `eddy_interval_div` (`divide`): months and days
/// scale, and their fractions carry into days (30 per month) and time, as in PostgreSQL
/// (`'1 mon' * 1.5` is `1 mon 15 days`); dividing by zero is 22012.
pub fn interval_arithmetic_udf(divide: bool) -> datafusion::logical_expr::ScalarUDF {
    let name = if divide { "eddy_interval_div" } else { "eddy_interval_mul" };
    let f = move |a: &[ArrayRef], n: usize| -> DfResult<ArrayRef> {
        let (iv, f) = (intervals(&a[0])?, cast(&a[1], &DataType::Float64)?);
        let (iv, f) = (iv.as_primitive::<IntervalMonthDayNanoType>(), f.as_primitive::<Float64Type>());
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            if iv.is_null(i) || f.is_null(i) {
                out.push(None);
                continue;
            }
            let factor = if divide {
                if f.value(i) == 0.0 {
                    return Err(division_by_zero());
                }
                1.0 / f.value(i)
            } else {
                f.value(i)
            };
            out.push(Some(eddy_common::interval::scale(iv.value(i), factor).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?));
        }
        Ok(Arc::new(out.into_iter().collect::<IntervalMonthDayNanoArray>()) as ArrayRef)
    };
    let body: Arc<Body> = Arc::new(move |args, rows| columnar(args, rows, f));
    closure_udf(name, Signature::any(2, Volatility::Immutable), MDN, body)
}

/// Plans `interval * number`, `number * interval` and `interval / number` of any interval
/// expression (a column too) as [`interval_arithmetic_udf`]'s functions; DataFusion refuses
/// them, and the SQL rewrite sees only intervals that are so by their syntax.
#[derive(Debug)]
struct IntervalArithmetic {
    mul: Arc<datafusion::logical_expr::ScalarUDF>,
    div: Arc<datafusion::logical_expr::ScalarUDF>,
}

impl datafusion::logical_expr::planner::ExprPlanner for IntervalArithmetic {
    fn plan_binary_op(
        &self,
        expr: datafusion::logical_expr::planner::RawBinaryExpr,
        schema: &datafusion::common::DFSchema,
    ) -> DfResult<datafusion::logical_expr::planner::PlannerResult<datafusion::logical_expr::planner::RawBinaryExpr>> {
        use datafusion::logical_expr::planner::PlannerResult;
        use datafusion::logical_expr::ExprSchemable;
        use datafusion::sql::sqlparser::ast::BinaryOperator;
        let interval = |e: &datafusion::logical_expr::Expr| matches!(e.get_type(schema), Ok(DataType::Interval(_)));
        let number = |e: &datafusion::logical_expr::Expr| e.get_type(schema).is_ok_and(|t| t.is_numeric());
        // A quoted literal beside a number in arithmetic takes the number's type, as PostgreSQL
        // resolves an unknown-type operand (`x - '31.5'`; DataFusion refused text arithmetic).
        let text = |e: &datafusion::logical_expr::Expr| matches!(e, datafusion::logical_expr::Expr::Literal(datafusion::scalar::ScalarValue::Utf8(Some(_)), _));
        let arithmetic = matches!(expr.op, BinaryOperator::Plus | BinaryOperator::Minus | BinaryOperator::Multiply | BinaryOperator::Divide | BinaryOperator::Modulo);
        if arithmetic && (text(&expr.left) && number(&expr.right) || number(&expr.left) && text(&expr.right)) {
            let mut expr = expr;
            let (lit, other) = if text(&expr.left) { (&mut expr.left, &expr.right) } else { (&mut expr.right, &expr.left) };
            // Beside a numeric, a numeric of the literal's own decimals (the column's scale would
            // round it; PostgreSQL's numeric keeps the digits written).
            let to = match other.get_type(schema)? {
                DataType::Decimal128(..) | DataType::Decimal256(..) => {
                    let written = match &*lit {
                        datafusion::logical_expr::Expr::Literal(datafusion::scalar::ScalarValue::Utf8(Some(t)), _) => t.trim().split_once('.').map_or(0, |(_, d)| d.len()),
                        _ => 0,
                    };
                    DataType::Decimal128(38, written.min(30) as i8)
                }
                t => t,
            };
            *lit = datafusion::logical_expr::Expr::Cast(datafusion::logical_expr::Cast::new(Box::new(lit.clone()), to));
            return Ok(PlannerResult::Original(expr));
        }
        let planned = match expr.op {
            BinaryOperator::Multiply if interval(&expr.left) && number(&expr.right) => self.mul.call(vec![expr.left, expr.right]),
            BinaryOperator::Multiply if number(&expr.left) && interval(&expr.right) => self.mul.call(vec![expr.right, expr.left]),
            BinaryOperator::Divide if interval(&expr.left) && number(&expr.right) => self.div.call(vec![expr.left, expr.right]),
            _ => return Ok(PlannerResult::Original(expr)),
        };
        Ok(PlannerResult::Planned(planned))
    }
}

/// PostgreSQL's regular-expression `flags` (as `regexp_matches` takes them; `g` is the
/// caller's) as a prefix of inline flags for the `regex` crate. PostgreSQL's `.` matches a
/// newline unless `n` (or `p`) says otherwise, and `^`/`$` match at lines with `n` (or `w`).
fn regex_flags(flags: &str, allowed: &str) -> DfResult<String> {
    if let Some(bad) = flags.chars().find(|c| !allowed.contains(*c)) {
        return Err(user_error(sqlstate::INVALID_PARAMETER_VALUE, format!("invalid regular expression option: \"{bad}\"")));
    }
    let mut out = String::new();
    // The last of `i` and `c` wins, as in PostgreSQL.
    if flags.rfind('i') > flags.rfind('c') {
        out.push('i');
    }
    if !flags.contains(['n', 'p', 'm']) {
        out.push('s');
    }
    if flags.contains(['n', 'w', 'm']) {
        out.push('m');
    }
    if flags.contains('x') {
        out.push('x');
    }
    Ok(if out.is_empty() { out } else { format!("(?{out})") })
}

/// The arguments of `name(text, pattern [, flags])` as text.
fn regex_args(name: &str, a: &[ArrayRef]) -> DfResult<Vec<ArrayRef>> {
    if !(2..=3).contains(&a.len()) {
        return Err(user_error(sqlstate::UNDEFINED_FUNCTION, format!("function {name} takes 2 or 3 arguments, not {}", a.len())));
    }
    a.iter().map(|x| cast(x, &DataType::Utf8)).collect()
}

/// `pattern` compiled, or the last row's regex again when the pattern is the same.
fn compiled_regex(last: &mut Option<(String, regex::Regex)>, pattern: String) -> DfResult<&regex::Regex> {
    if last.as_ref().is_none_or(|(q, _)| *q != pattern) {
        let re = regex::Regex::new(&pattern).map_err(|e| user_error(sqlstate::INVALID_REGULAR_EXPRESSION, format!("invalid regular expression: {e}")))?;
        *last = Some((pattern, re));
    }
    last.as_ref().map(|(_, re)| re).ok_or_else(|| user_error(sqlstate::INTERNAL_ERROR, "no regular expression".into()))
}

/// `eddy_regexp_matches(text, pattern [, flags])`: PostgreSQL's set-returning `regexp_matches`
/// as a list the rewrite unnests: per match (the first, or with `g` every one) the captured
/// substrings (a group that took no part is NULL), or the whole match if the pattern has no
/// groups. No match is an empty list, so the call yields no rows.
fn regexp_matches(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    use arrow::array::{ListBuilder, StringBuilder};
    let text = regex_args("regexp_matches", a)?;
    let (s, p) = (text[0].as_string::<i32>(), text[1].as_string::<i32>());
    let flags = text.get(2).map(|f| f.as_string::<i32>());
    let mut out = ListBuilder::new(ListBuilder::new(StringBuilder::new()));
    let mut compiled: Option<(String, regex::Regex)> = None;
    for i in 0..n {
        if s.is_null(i) || p.is_null(i) || flags.is_some_and(|f| f.is_null(i)) {
            out.append_null();
            continue;
        }
        let flag = flags.map_or("", |f| f.value(i));
        let pattern = format!("{}{}", regex_flags(flag, "gicnpwmxs")?, p.value(i));
        let re = compiled_regex(&mut compiled, pattern)?;
        let global = flag.contains('g');
        for caps in re.captures_iter(s.value(i)).take(if global { usize::MAX } else { 1 }) {
            let groups = out.values();
            if caps.len() == 1 {
                groups.values().append_option(caps.get(0).map(|m| m.as_str()));
            } else {
                for g in caps.iter().skip(1) {
                    groups.values().append_option(g.map(|m| m.as_str()));
                }
            }
            groups.append(true);
        }
        out.append(true);
    }
    Ok(Arc::new(out.finish()))
}

/// `regexp_match(text, pattern [, flags])`: the captured substrings of the first match (a group
/// that took no part is NULL; DataFusion's left it out, shifting the later groups), the whole
/// match if the pattern has no groups, NULL if nothing matches.
fn regexp_match(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    use arrow::array::{ListArray, ListBuilder, StringBuilder};
    if let Some(flags) = a.get(2) {
        let flags = cast(flags, &DataType::Utf8)?;
        if flags.as_string::<i32>().iter().flatten().any(|f| f.contains('g')) {
            return Err(user_error(sqlstate::INVALID_PARAMETER_VALUE, "regexp_match() does not support the \"global\" option".into()));
        }
    }
    let all = regexp_matches(a, n)?;
    let all = all.as_any().downcast_ref::<ListArray>().ok_or_else(|| user_error(sqlstate::INTERNAL_ERROR, "regexp matches are not a list".into()))?;
    let mut out = ListBuilder::new(StringBuilder::new());
    for i in 0..n {
        let matches = (!all.is_null(i)).then(|| all.value(i));
        let first = matches.as_ref().and_then(|m| m.as_any().downcast_ref::<ListArray>()).filter(|m| !m.is_empty()).map(|m| m.value(0));
        match first {
            Some(groups) => {
                for g in groups.as_string::<i32>().iter() {
                    out.values().append_option(g);
                }
                out.append(true);
            }
            None => out.append_null(),
        }
    }
    Ok(Arc::new(out.finish()))
}

/// `regexp_split_to_array(text, pattern [, flags])`: the text split at each match, as
/// PostgreSQL splits it (an empty match at either end, or right after another match, splits
/// nothing; flag `i` ignores case).
fn regexp_split_to_array(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    use arrow::array::{ListBuilder, StringBuilder};
    let text = regex_args("regexp_split_to_array", a)?;
    let (s, p) = (text[0].as_string::<i32>(), text[1].as_string::<i32>());
    let flags = text.get(2).map(|f| f.as_string::<i32>());
    let mut out = ListBuilder::new(StringBuilder::new());
    let mut compiled: Option<(String, regex::Regex)> = None;
    for i in 0..n {
        if s.is_null(i) || p.is_null(i) || flags.is_some_and(|f| f.is_null(i)) {
            out.append_null();
            continue;
        }
        let flag = flags.map_or("", |f| f.value(i));
        if let Some(bad) = flag.chars().find(|c| !matches!(c, 'i' | 'c' | 'n' | 'x' | 's')) {
            return Err(user_error(sqlstate::INVALID_PARAMETER_VALUE, format!("invalid regular expression option: \"{bad}\"")));
        }
        let pattern = if flag.contains('i') { format!("(?i){}", p.value(i)) } else { p.value(i).to_string() };
        let re = compiled_regex(&mut compiled, pattern)?;
        let v = s.value(i);
        let (mut start, mut last_end) = (0, None);
        for m in re.find_iter(v) {
            if m.start() == m.end() && (m.start() == 0 || m.start() == v.len() || Some(m.start()) == last_end) {
                continue;
            }
            out.values().append_value(&v[start..m.start()]);
            start = m.end();
            last_end = Some(m.end());
        }
        out.values().append_value(&v[start..]);
        out.append(true);
    }
    Ok(Arc::new(out.finish()))
}

/// `encode(bytes, format)` as PostgreSQL writes it: `base64` padded and broken into lines of
/// 76 characters (DataFusion's was unpadded), `hex` in lower case, `escape` with backslashes
/// doubled and other bytes outside printable ASCII as `\ooo`.
fn encode(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    use base64::Engine;
    let bytes = cast(&a[0], &DataType::Binary)?;
    let (bytes, format) = (bytes.as_binary::<i32>(), cast(&a[1], &DataType::Utf8)?);
    let format = format.as_string::<i32>();
    let mut out = arrow::array::StringBuilder::with_capacity(n, n * 16);
    for i in 0..n {
        if bytes.is_null(i) || format.is_null(i) {
            out.append_null();
            continue;
        }
        let b = bytes.value(i);
        let text = match format.value(i).to_ascii_lowercase().as_str() {
            "base64" => {
                let flat = base64::engine::general_purpose::STANDARD.encode(b);
                let lines: Vec<&str> = flat.as_bytes().chunks(76).map(|c| std::str::from_utf8(c).unwrap_or_default()).collect();
                lines.join("\n")
            }
            "hex" => b.iter().map(|x| format!("{x:02x}")).collect(),
            "escape" => b
                .iter()
                .map(|&x| match x {
                    b'\\' => "\\\\".to_string(),
                    0 | 0x80..=0xff => format!("\\{x:03o}"),
                    x => char::from(x).to_string(),
                })
                .collect(),
            other => return Err(user_error(sqlstate::INVALID_PARAMETER_VALUE, format!("unrecognized encoding: \"{other}\""))),
        };
        out.append_value(text);
    }
    Ok(Arc::new(out.finish()))
}

/// `v` microseconds rounded to `digits` fractional digits of a second, half away from zero, as
/// PostgreSQL rounds `timestamp(p)` and `time(p)` (`AdjustTimestampForTypmod`).
fn round_micros(v: i64, digits: i64) -> i64 {
    let unit = 10i64.pow((6 - digits.clamp(0, 6)) as u32);
    let half = unit / 2;
    if v >= 0 {
        v.saturating_add(half) / unit * unit
    } else {
        -((-v).saturating_add(half) / unit * unit)
    }
}

/// `(value, digits)` → the value as `to` (a microsecond timestamp or time), rounded.
fn round_time_value(to: DataType) -> impl Fn(&[ArrayRef], usize) -> DfResult<ArrayRef> {
    move |a, n| {
        let raw = cast(&cast(&a[0], &to)?, &DataType::Int64)?;
        let digits = cast(&a[1], &DataType::Int64)?;
        let (raw, digits) = (raw.as_primitive::<arrow::datatypes::Int64Type>(), digits.as_primitive::<arrow::datatypes::Int64Type>());
        let out: arrow::array::Int64Array = (0..n)
            .map(|i| (!raw.is_null(i) && !digits.is_null(i)).then(|| round_micros(raw.value(i), digits.value(i))))
            .collect();
        cast(&(Arc::new(out) as ArrayRef), &to)
    }
}

/// `length(bytea)` is its number of bytes (DataFusion's `length` counted the characters of the
/// value's text form, `\x616263`): the call on a binary argument, rewritten.
pub(super) fn bytea_length(name: &str, args: &[datafusion::logical_expr::Expr], schema: &datafusion::common::DFSchema) -> Option<datafusion::logical_expr::Expr> {
    use datafusion::logical_expr::ExprSchemable;
    static UDF: std::sync::OnceLock<Arc<datafusion::logical_expr::ScalarUDF>> = std::sync::OnceLock::new();
    let [arg] = args else { return None };
    if name != "character_length" || !matches!(arg.get_type(schema), Ok(DataType::Binary | DataType::LargeBinary | DataType::BinaryView)) {
        return None;
    }
    let udf = UDF.get_or_init(|| {
        let body = |a: &[ArrayRef], _n: usize| -> DfResult<ArrayRef> { cast(&arrow::compute::kernels::length::length(&cast(&a[0], &DataType::Binary)?)?, &DataType::Int32) };
        let body: Arc<crate::planner::udf::Body> = Arc::new(move |a, rows| columnar(a, rows, body));
        Arc::new(closure_udf("eddy_bytea_length", Signature::any(1, Volatility::Immutable), DataType::Int32, body))
    });
    Some(udf.call(vec![arg.clone()]))
}

/// Registers the functions on `ctx`.
pub fn register_scalar_functions(ctx: &SessionContext) {
    fn add(ctx: &SessionContext, name: &str, args: usize, ret: DataType, f: impl Fn(&[ArrayRef], usize) -> DfResult<ArrayRef> + Send + Sync + 'static) {
        register(ctx, name, Signature::any(args, Volatility::Immutable), ret, Arc::new(move |a, rows| columnar(a, rows, &f)));
    }
    let arithmetic = IntervalArithmetic { mul: Arc::new(interval_arithmetic_udf(false)), div: Arc::new(interval_arithmetic_udf(true)) };
    if let Err(e) = datafusion::execution::FunctionRegistry::register_expr_planner(&mut *ctx.state_ref().write(), Arc::new(arithmetic)) {
        tracing::warn!("interval arithmetic is not planned: {e}");
    }
    add(ctx, "div", 2, NUMERIC, div);
    add(ctx, "encode", 2, DataType::Utf8, encode);
    add(ctx, "decode", 2, DataType::Binary, super::to_number::decode);
    add(ctx, "to_number", 2, NUMERIC, super::to_number::to_number);
    let text_array = DataType::List(Arc::new(arrow::datatypes::Field::new("item", DataType::Utf8, true)));
    register(ctx, "regexp_split_to_array", Signature::variadic_any(Volatility::Immutable), text_array.clone(), Arc::new(|a, rows| columnar(a, rows, regexp_split_to_array)));
    register(ctx, "regexp_match", Signature::variadic_any(Volatility::Immutable), text_array.clone(), Arc::new(|a, rows| columnar(a, rows, regexp_match)));
    let matches = DataType::List(Arc::new(arrow::datatypes::Field::new("item", text_array, true)));
    register(ctx, super::rewrite::REGEXP_MATCHES, Signature::variadic_any(Volatility::Immutable), matches, Arc::new(|a, rows| columnar(a, rows, regexp_matches)));
    add(ctx, super::rewrite::SIMILAR_REGEX, 1, DataType::Utf8, |a, _| {
        let patterns = arrow::compute::cast(&a[0], &DataType::Utf8)?;
        let out: arrow::array::StringArray = patterns.as_string::<i32>().iter().map(|p| p.map(super::rewrite::similar_regex)).collect();
        Ok(Arc::new(out))
    });
    add(ctx, "width_bucket", 4, DataType::Int32, width_bucket);
    add(ctx, "min_scale", 1, DataType::Int32, min_scale);
    add(ctx, "scale", 1, DataType::Int32, scale);
    add(ctx, "trim_scale", 1, NUMERIC, trim_scale);
    add(ctx, "justify_hours", 1, MDN, justify(justify_hours_of));
    add(ctx, "justify_days", 1, MDN, justify(justify_days_of));
    add(ctx, "justify_interval", 1, MDN, justify(justify_interval_of));
    // `x::uuid`: validated, canonical, uuid-typed text.
    let uuid_in = |a: &[ArrayRef], _n: usize| -> DfResult<ArrayRef> {
        let text = cast(&a[0], &DataType::Utf8)?;
        let out: arrow::array::StringArray = text
            .as_string::<i32>()
            .iter()
            .map(|v| v.map(eddy_common::text::parse_uuid).transpose())
            .collect::<eddy_common::Result<_>>()
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        Ok(Arc::new(out))
    };
    let body: Arc<crate::planner::udf::Body> = Arc::new(move |a, rows| columnar(a, rows, uuid_in));
    ctx.register_udf(crate::planner::udf::typed_closure_udf(UUID_IN, Signature::any(1, Volatility::Immutable), eddy_common::ColumnType::Uuid, body));
    ctx.register_udf(crate::planner::udf::gen_random_uuid_udf());
    // `octet_length` of text or bytea: bytes (DataFusion's took text only).
    add(ctx, "octet_length", 1, DataType::Int32, |a, _| {
        let bytes = match a[0].data_type() {
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => cast(&a[0], &DataType::Binary)?,
            _ => cast(&a[0], &DataType::Utf8)?,
        };
        cast(&arrow::compute::kernels::length::length(&bytes)?, &DataType::Int32)
    });
    use super::rewrite::{ROUND_TIME, ROUND_TIMESTAMP, ROUND_TIMESTAMPTZ};
    let timestamptz = DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from(eddy_common::types::UTC)));
    for (name, to) in [
        (ROUND_TIMESTAMP, DataType::Timestamp(TimeUnit::Microsecond, None)),
        (ROUND_TIMESTAMPTZ, timestamptz),
        (ROUND_TIME, DataType::Time64(TimeUnit::Microsecond)),
    ] {
        add(ctx, name, 2, to.clone(), round_time_value(to));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000_000_000;

    #[test]
    fn time_precision_rounds_half_away_from_zero() {
        assert_eq!(round_micros(1_567_890, 0), 2_000_000);
        assert_eq!(round_micros(1_499_999, 0), 1_000_000);
        assert_eq!(round_micros(1_567_890, 2), 1_570_000);
        assert_eq!(round_micros(1_567_850, 4), 1_567_900);
        assert_eq!(round_micros(-1_500_000, 0), -2_000_000);
        assert_eq!(round_micros(-1_499_999, 0), -1_000_000);
        assert_eq!(round_micros(1_567_891, 6), 1_567_891);
        assert_eq!(round_micros(1_567_891, 9), 1_567_891);
    }

    #[test]
    fn justify_as_postgresql() {
        let iv = IntervalMonthDayNano::new;
        assert_eq!(justify_hours_of(iv(0, 0, 27 * HOUR)), Some(iv(0, 1, 3 * HOUR)));
        assert_eq!(justify_hours_of(iv(0, 1, -HOUR)), Some(iv(0, 0, 23 * HOUR)));
        assert_eq!(justify_days_of(iv(0, 35, 0)), Some(iv(1, 5, 0)));
        assert_eq!(justify_days_of(iv(1, -5, 0)), Some(iv(0, 25, 0)));
        assert_eq!(justify_interval_of(iv(1, 0, -HOUR)), Some(iv(0, 29, 23 * HOUR)));
        assert_eq!(justify_interval_of(iv(0, 0, 50 * HOUR)), Some(iv(0, 2, 2 * HOUR)));
    }

}
