//! PostgreSQL's `to_char(value, template)` for timestamps, dates, times and intervals
//! ([`datetime`]) and for integers, floats and numerics ([`number`]): the templates and their
//! output are PostgreSQL's (in the C locale, time zone UTC), in queries and views alike.
//! DataFusion's `to_char` reads strftime patterns and no numbers.

mod datetime;
mod number;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type, IntervalMonthDayNanoType, IntervalUnit, TimeUnit, TimestampMicrosecondType};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{Signature, Volatility};
use datafusion::prelude::SessionContext;
use eddy_common::error::sqlstate;

use crate::pg::udf::user_error;
use crate::planner::udf::{columnar, register};

/// Registers `to_char` in place of DataFusion's.
pub fn register_to_char(ctx: &SessionContext) {
    register(ctx, "to_char", Signature::any(2, Volatility::Immutable), DataType::Utf8, Arc::new(|args, rows| columnar(args, rows, to_char)));
}

/// Reads a template's double-quoted text (`rest` is after the opening quote; a backslash
/// escapes the next character) into `text`, and returns what follows the closing quote.
fn quoted<'a>(rest: &'a str, text: &mut String) -> &'a str {
    let mut chars = rest.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        match c {
            '"' => break,
            '\\' if chars.peek().is_some() => {
                if let Some((_, n)) = chars.next() {
                    text.push(n);
                }
            }
            c => text.push(c),
        }
    }
    chars.peek().map_or("", |&(i, _)| &rest[i..])
}

/// What the first argument is formatted as.
enum Input {
    Timestamp { micros: ArrayRef, zone: bool },
    Interval(ArrayRef),
    Decimal { values: ArrayRef, scale: i32 },
    Integer(ArrayRef),
    Float { values: ArrayRef, digits: usize },
}

fn input(value: &ArrayRef) -> DfResult<Input> {
    let cast = |t: &DataType| arrow::compute::cast(value, t);
    Ok(match value.data_type() {
        DataType::Timestamp(_, tz) => {
            Input::Timestamp { micros: cast(&DataType::Timestamp(TimeUnit::Microsecond, None))?, zone: tz.is_some() }
        }
        // A date formats as the timestamp with time zone it casts to.
        DataType::Date32 | DataType::Date64 => Input::Timestamp { micros: cast(&DataType::Timestamp(TimeUnit::Microsecond, None))?, zone: true },
        // A time formats as the interval it casts to, as in PostgreSQL.
        DataType::Time32(_) | DataType::Time64(_) => {
            let nanos = cast(&DataType::Time64(TimeUnit::Nanosecond))?;
            let nanos = nanos.as_primitive::<arrow::datatypes::Time64NanosecondType>();
            let iv: arrow::array::IntervalMonthDayNanoArray =
                nanos.iter().map(|n| n.map(|n| arrow::datatypes::IntervalMonthDayNano::new(0, 0, n))).collect();
            Input::Interval(Arc::new(iv))
        }
        DataType::Interval(_) | DataType::Duration(_) => Input::Interval(cast(&DataType::Interval(IntervalUnit::MonthDayNano))?),
        DataType::Decimal128(_, s) | DataType::Decimal256(_, s) | DataType::Decimal64(_, s) | DataType::Decimal32(_, s) => {
            Input::Decimal { values: cast(&DataType::Decimal128(38, *s))?, scale: i32::from(*s) }
        }
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 | DataType::UInt8 | DataType::UInt16 | DataType::UInt32 => {
            Input::Integer(cast(&DataType::Int64)?)
        }
        // DBL_DIG and FLT_DIG: the significant digits PostgreSQL prints of each.
        DataType::Float64 => Input::Float { values: value.clone(), digits: 15 },
        DataType::Float32 | DataType::Float16 => Input::Float { values: cast(&DataType::Float64)?, digits: 6 },
        DataType::Null => Input::Integer(cast(&DataType::Int64)?),
        other => {
            return Err(user_error(
                sqlstate::UNDEFINED_FUNCTION,
                format!(
                    "function to_char({}, text) does not exist: it formats timestamps, dates, intervals and numbers",
                    eddy_common::ColumnType::from_arrow(other).map_or_else(|| other.to_string(), |t| t.pg_name())
                ),
            ))
        }
    })
}

/// `%.*e` as C writes it (at least two exponent digits, with a sign), after the value's sign
/// or a blank.
fn c_exponent(value: f64, post: usize) -> String {
    let s = format!("{:.*e}", post, value.abs());
    let lead = if value < 0.0 { '-' } else { ' ' };
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
            format!("{lead}{mantissa}e{sign}{digits:0>2}")
        }
        None => format!("{lead}{s}"),
    }
}

fn to_char(args: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    let values = &args[0];
    let templates = arrow::compute::cast(&args[1], &DataType::Utf8)?;
    let templates = templates.as_string::<i32>();
    let input = input(values)?;
    let mut out = StringBuilder::with_capacity(n, n * 16);
    // The template parsed for the row before (most are one constant).
    let mut parsed_date: Option<(String, Vec<datetime::Node>)> = None;
    let mut parsed_number: Option<(String, number::Template)> = None;
    let mut text = String::new();
    for row in 0..n {
        if values.is_null(row) || templates.is_null(row) {
            out.append_null();
            continue;
        }
        let template = templates.value(row);
        text.clear();
        match &input {
            Input::Timestamp { .. } | Input::Interval(_) => {
                if parsed_date.as_ref().is_none_or(|(t, _)| t != template) {
                    parsed_date = Some((template.to_string(), datetime::parse(template)));
                }
                let nodes = parsed_date.as_ref().map(|(_, n)| n.as_slice()).unwrap_or_default();
                let tm = match &input {
                    Input::Timestamp { micros, zone } => {
                        datetime::Tm::timestamp(micros.as_primitive::<TimestampMicrosecondType>().value(row), zone.then_some("UTC"))
                    }
                    Input::Interval(iv) => {
                        let v = iv.as_primitive::<IntervalMonthDayNanoType>().value(row);
                        datetime::Tm::interval(i64::from(v.months), i64::from(v.days), v.nanoseconds / 1000)
                    }
                    _ => unreachable!("a date/time input"),
                };
                datetime::format(nodes, &tm, &mut text)?;
            }
            _ => {
                if parsed_number.as_ref().is_none_or(|(t, _)| t != template) {
                    parsed_number = Some((template.to_string(), number::parse(template)?));
                }
                let Some((_, t)) = parsed_number.as_ref() else { continue };
                format_number(&input, row, t, &mut text);
            }
        }
        out.append_value(&text);
    }
    Ok(Arc::new(out.finish()))
}

fn format_number(input: &Input, row: usize, t: &number::Template, text: &mut String) {
    let shift = t.shift as i32;
    let (digits, as_f64) = match input {
        Input::Decimal { values, scale } => {
            let v = values.as_primitive::<Decimal128Type>().value(row);
            (number::Digits::decimal(v, scale - shift, t.post), v as f64 / 10f64.powi(*scale))
        }
        Input::Integer(values) => {
            let v = values.as_primitive::<Int64Type>().value(row);
            (number::Digits::decimal(i128::from(v), -shift, t.post), v as f64)
        }
        Input::Float { values, digits } => {
            let v = values.as_primitive::<Float64Type>().value(row) * 10f64.powi(shift);
            // As PostgreSQL: no more decimals than the type's significant digits allow.
            let int_len = format!("{:.0}", v.abs()).len();
            let post = if int_len >= *digits { 0 } else { t.post.min(digits - int_len) };
            (number::Digits::float(v, post), v)
        }
        _ => return,
    };
    let exponent = t.exponent.then(|| c_exponent(as_f64, t.post));
    // `RN` rounds a float half to even (C's rint), a numeric half away from zero.
    let integer = Some(if matches!(input, Input::Float { .. }) { as_f64.round_ties_even() } else { as_f64.round() } as i64);
    number::format(t, &digits, exponent.as_deref(), integer, text);
}
