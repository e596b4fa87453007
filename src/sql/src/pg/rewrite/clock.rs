//! SQL's value functions, time precisions and `date_trunc` units as PostgreSQL reads them:
//! - `current_role`, `current_catalog`, `current_schema`, `localtime` and `localtimestamp`
//!   without parentheses (reserved words in PostgreSQL, so never a column);
//! - a precision on the clock functions (`current_timestamp(2)`, `localtime(0)`) and on time
//!   casts (`x::timestamp(0)`, `x::timestamptz(3)`, `x::time(1)`): the value rounded to that
//!   many fractional digits, half away from zero, keeping microsecond values (DataFusion would
//!   refuse most precisions and truncate `timestamp(0)` into a seconds type).

use datafusion::sql::sqlparser::ast::{CastKind, DataType as SqlType, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, TimezoneInfo, Value};

use super::ast::{base_name, call};
use crate::pg::colnames::is_value_function;

/// Rounds a timestamp without time zone: `(timestamp, digits)`.
pub const ROUND_TIMESTAMP: &str = "eddy_round_timestamp";
/// Rounds a timestamp with time zone.
pub const ROUND_TIMESTAMPTZ: &str = "eddy_round_timestamptz";
/// Rounds a time of day.
pub const ROUND_TIME: &str = "eddy_round_time";

fn cast(expr: Expr, data_type: SqlType) -> Expr {
    Expr::Cast { kind: CastKind::Cast, expr: Box::new(expr), data_type, array: false, format: None }
}

fn timestamp() -> SqlType {
    SqlType::Timestamp(None, TimezoneInfo::None)
}

fn time() -> SqlType {
    SqlType::Time(None, TimezoneInfo::None)
}

fn digits(p: u64) -> Expr {
    // PostgreSQL warns and uses 6 for a larger precision.
    Expr::value(Value::Number(p.min(6).to_string(), false))
}

/// A bare reserved word that PostgreSQL reads as a value function.
pub(super) fn value_function(i: &Ident) -> Option<Expr> {
    if !is_value_function(i) {
        return None;
    }
    Some(match i.value.to_ascii_lowercase().as_str() {
        "current_role" => call("current_role", vec![]),
        "current_catalog" => call("current_database", vec![]),
        "current_schema" => call("current_schema", vec![]),
        // The session runs in UTC.
        "localtimestamp" => cast(call("now", vec![]), timestamp()),
        "localtime" => cast(call("now", vec![]), time()),
        _ => return None,
    })
}

/// `current_timestamp(p)`, `localtimestamp(p)`, `current_time(p)`, `localtime(p)`, and
/// the value functions the parser reads as calls without arguments.
pub(super) fn clock_function(f: &Function) -> Option<Expr> {
    let name = base_name(&f.name);
    if matches!(f.args, FunctionArguments::None) {
        return match name.as_str() {
            "localtimestamp" => Some(cast(call("now", vec![]), timestamp())),
            "localtime" => Some(cast(call("now", vec![]), time())),
            "current_catalog" => Some(call("current_database", vec![])),
            "current_role" | "current_schema" => Some(call(&name, vec![])),
            _ => None,
        };
    }
    let FunctionArguments::List(list) = &f.args else { return None };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))] = list.args.as_slice() else { return None };
    let Value::Number(p, _) = &v.value else { return None };
    let p: u64 = p.parse().ok()?;
    let (f, value) = match name.as_str() {
        "current_timestamp" => (ROUND_TIMESTAMPTZ, call("now", vec![])),
        "localtimestamp" => (ROUND_TIMESTAMP, cast(call("now", vec![]), timestamp())),
        "current_time" | "localtime" => (ROUND_TIME, cast(call("now", vec![]), time())),
        _ => return None,
    };
    Some(call(f, vec![value, digits(p)]))
}

/// `expr::timestamp(p)`, `::timestamptz(p)`, `::time(p)`: the cast without a precision, rounded.
pub(super) fn cast_with_precision(expr: &Expr, data_type: &SqlType) -> Option<Expr> {
    let (f, plain, p) = match data_type {
        SqlType::Timestamp(Some(p), tz @ (TimezoneInfo::None | TimezoneInfo::WithoutTimeZone)) => (ROUND_TIMESTAMP, SqlType::Timestamp(None, *tz), *p),
        SqlType::Timestamp(Some(p), tz @ (TimezoneInfo::WithTimeZone | TimezoneInfo::Tz)) => (ROUND_TIMESTAMPTZ, SqlType::Timestamp(None, *tz), *p),
        SqlType::Time(Some(p), tz @ (TimezoneInfo::None | TimezoneInfo::WithoutTimeZone)) => (ROUND_TIME, SqlType::Time(None, *tz), *p),
        _ => return None,
    };
    Some(call(f, vec![cast(expr.clone(), plain), digits(p)]))
}

/// `date_trunc('milliseconds', ..)`: PostgreSQL reads a unit in any of its spellings (plural,
/// abbreviated, any case); DataFusion only the singular one, which the literal is rewritten to.
pub(super) fn date_trunc_unit(f: &mut Function) {
    let FunctionArguments::List(list) = &mut f.args else { return };
    let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) = list.args.first_mut() else { return };
    let Value::SingleQuotedString(unit) = &mut v.value else { return };
    let canonical = match unit.trim().to_ascii_lowercase().as_str() {
        "microsecond" | "microseconds" | "us" | "usec" | "usecs" | "useconds" => "microsecond",
        "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" | "mseconds" => "millisecond",
        "second" | "seconds" | "s" | "sec" | "secs" => "second",
        "minute" | "minutes" | "m" | "min" | "mins" => "minute",
        "hour" | "hours" | "h" | "hr" | "hrs" => "hour",
        "day" | "days" | "d" => "day",
        "week" | "weeks" | "w" => "week",
        "month" | "months" | "mon" | "mons" => "month",
        "quarter" | "qtr" => "quarter",
        "year" | "years" | "y" | "yr" | "yrs" => "year",
        _ => return,
    };
    *unit = canonical.to_string();
}

/// A literal unit of `date_trunc` that is no unit at all is PostgreSQL's 22023, found while
/// planning (DataFusion's error came when rows were evaluated, so a view failed as a whole);
/// PostgreSQL's longer units are not supported yet.
pub(super) fn check_date_trunc_unit(f: &Function) -> eddy_common::Result<()> {
    use eddy_common::error::sqlstate;
    let FunctionArguments::List(list) = &f.args else { return Ok(()) };
    let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) = list.args.first() else { return Ok(()) };
    let Value::SingleQuotedString(unit) = &v.value else { return Ok(()) };
    match unit.as_str() {
        "microsecond" | "millisecond" | "second" | "minute" | "hour" | "day" | "week" | "month" | "quarter" | "year" => Ok(()),
        u if matches!(u.trim().to_ascii_lowercase().as_str(), "decade" | "decades" | "century" | "centuries" | "millennium" | "millennia") => {
            Err(eddy_common::user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "date_trunc to a {u} is not supported yet"))
        }
        u => Err(eddy_common::user_err!(sqlstate::INVALID_PARAMETER_VALUE, "unit \"{u}\" not recognized for type timestamp")),
    }
}

/// The arguments of `generate_series` in FROM, which DataFusion evaluates while planning,
/// before Eddy's text casts apply: timestamp text gets the seconds Arrow's parser wants
/// (`'2024-01-01 10:00'::timestamp`), and a step written as non-integer text (`'1 day'`) is the
/// interval PostgreSQL resolves it to (integer text, the integer).
pub(super) fn series_args(args: &mut [FunctionArg]) {
    let n = args.len();
    for (i, arg) in args.iter_mut().enumerate() {
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg else { continue };
        match e {
            Expr::Cast { expr, data_type: SqlType::Timestamp(..) | SqlType::Date, .. } => {
                if let Expr::Value(v) = expr.as_mut() {
                    if let Value::SingleQuotedString(text) = &mut v.value {
                        *text = eddy_common::text::normalize_timestamp_text(text).into_owned();
                    }
                }
            }
            Expr::Value(v) if i == 2 && n == 3 => {
                if let Value::SingleQuotedString(text) = &v.value {
                    *e = match text.trim().parse::<i64>() {
                        Ok(step) => Expr::value(Value::Number(step.to_string(), false)),
                        Err(_) => cast(e.clone(), SqlType::Interval { fields: None, precision: None }),
                    };
                }
            }
            _ => {}
        }
    }
}
