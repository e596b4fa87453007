//! PostgreSQL's text output for Arrow values (`t`/`f`, shortest floats with exponents past
//! 1e15, ISO timestamps, `1 year 2 mons 3 days 04:05:06` intervals, `\\x` bytea, `{a,b}` arrays,
//! `(1,a)` records): what the wire layer sends and what `::text` casts produce.

use std::fmt::Write;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::*;
use chrono::{DateTime, NaiveDate, NaiveTime};

use crate::types::NUMERIC_UNCONSTRAINED_KEY as NUMERIC_UNCONSTRAINED;
use crate::Result;

/// Writes value `row` of `array` in text format; `false` if it is NULL.
pub fn write_text(array: &ArrayRef, row: usize, field: &Field, out: &mut String) -> Result<bool> {
    if array.is_null(row) {
        return Ok(false);
    }
    match array.data_type() {
        DataType::Null => return Ok(false),
        DataType::Boolean => out.push(if array.as_boolean().value(row) { 't' } else { 'f' }),
        // Here and below, `write!` to a String cannot fail.
        DataType::Int8 => write!(out, "{}", array.as_primitive::<Int8Type>().value(row)).ok().unwrap_or(()),
        DataType::Int16 => write!(out, "{}", array.as_primitive::<Int16Type>().value(row)).ok().unwrap_or(()),
        DataType::Int32 => write!(out, "{}", array.as_primitive::<Int32Type>().value(row)).ok().unwrap_or(()),
        DataType::Int64 => write!(out, "{}", array.as_primitive::<Int64Type>().value(row)).ok().unwrap_or(()),
        DataType::UInt8 => write!(out, "{}", array.as_primitive::<UInt8Type>().value(row)).ok().unwrap_or(()),
        DataType::UInt16 => write!(out, "{}", array.as_primitive::<UInt16Type>().value(row)).ok().unwrap_or(()),
        DataType::UInt32 => write!(out, "{}", array.as_primitive::<UInt32Type>().value(row)).ok().unwrap_or(()),
        DataType::UInt64 => write!(out, "{}", array.as_primitive::<UInt64Type>().value(row)).ok().unwrap_or(()),
        DataType::Float16 => write_float(f64::from(array.as_primitive::<Float16Type>().value(row).to_f32()), 6, out),
        DataType::Float32 => write_float32(array.as_primitive::<Float32Type>().value(row), out),
        DataType::Float64 => write_float(array.as_primitive::<Float64Type>().value(row), 15, out),
        DataType::Decimal128(p, s) => {
            let v = array.as_primitive::<Decimal128Type>().value(row);
            let text = format_decimal(v, *s);
            // Unconstrained numeric (a column, or a `::numeric` cast / arithmetic on one, which
            // keep Eddy's default precision and scale) prints without padding zeros.
            let default = (*p, *s) == crate::types::DEFAULT_NUMERIC;
            if default || field.metadata().contains_key(NUMERIC_UNCONSTRAINED) {
                out.push_str(trim_decimal(&text));
            } else if (*p, *s) == crate::types::QUOTIENT_NUMERIC {
                out.push_str(trim_quotient(&text));
            } else if (*p, *s) == crate::types::VARIANCE_NUMERIC {
                out.push_str(trim_variance(&text));
            } else if (*p, *s) == crate::types::ROOT_QUOTIENT_NUMERIC {
                out.push_str(trim_root_quotient(&text));
            } else {
                out.push_str(&text);
            }
        }
        DataType::Decimal256(_, _) | DataType::Decimal64(_, _) | DataType::Decimal32(_, _) => {
            out.push_str(&arrow::util::display::array_value_to_string(array, row)?)
        }
        DataType::Utf8 => out.push_str(array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => out.push_str(array.as_string::<i64>().value(row)),
        DataType::Utf8View => out.push_str(array.as_string_view().value(row)),
        DataType::Binary => write_bytea(array.as_binary::<i32>().value(row), out),
        DataType::LargeBinary => write_bytea(array.as_binary::<i64>().value(row), out),
        DataType::BinaryView => write_bytea(array.as_binary_view().value(row), out),
        DataType::FixedSizeBinary(_) => write_bytea(array.as_fixed_size_binary().value(row), out),
        DataType::Date32 => write_date(array.as_primitive::<Date32Type>().value(row), out),
        DataType::Date64 => write_date((array.as_primitive::<Date64Type>().value(row) / 86_400_000) as i32, out),
        DataType::Time32(_) | DataType::Time64(_) => write_time(time_micros(array, row), out),
        DataType::Timestamp(_, tz) => {
            let us = timestamp_micros(array, row);
            write_timestamp(us, out);
            if tz.is_some() {
                out.push_str("+00");
            }
            write_timestamp_era(us, out);
        }
        DataType::Interval(_) | DataType::Duration(_) => {
            let (m, d, us) = interval_parts(array, row);
            write_interval(m, d, us, out);
        }
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _) => write_list(array, row, out)?,
        DataType::Struct(_) => write_record(array, row, out)?,
        DataType::Dictionary(_, _) => {
            let v = arrow::compute::cast(&array.slice(row, 1), &DataType::Utf8)?;
            out.push_str(v.as_string::<i32>().value(0));
        }
        _ => out.push_str(&arrow::util::display::array_value_to_string(array, row)?),
    }
    Ok(true)
}

pub fn write_float32(v: f32, out: &mut String) {
    if v.is_finite() {
        // Shortest text that round-trips as f32, laid out like PostgreSQL's float4out.
        let shortest = format!("{v:e}");
        layout_float(&shortest, 6, out);
    } else {
        write_float(f64::from(v), 6, out);
    }
}

/// PostgreSQL float output: shortest round-trip digits; scientific notation when the decimal
/// exponent is < -4 or >= `precision` (15 for float8, 6 for float4).
pub fn write_float(v: f64, precision: i32, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
    } else if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0" } else { "0" });
    } else {
        layout_float(&format!("{v:e}"), precision, out);
    }
}

pub fn layout_float(sci: &str, precision: i32, out: &mut String) {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    if negative {
        out.push('-');
    }
    if exp < -4 || exp >= precision {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs()); // writing to a String cannot fail
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
}

pub fn format_decimal(v: i128, scale: i8) -> String {
    if scale <= 0 {
        let mut s = v.to_string();
        if v != 0 {
            for _ in 0..(-scale) {
                s.push('0');
            }
        }
        return s;
    }
    let neg = v < 0;
    let digits = v.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = if digits.len() <= scale { format!("{}{}", "0".repeat(scale + 1 - digits.len()), digits) } else { digits };
    let (i, f) = padded.split_at(padded.len() - scale);
    format!("{}{}.{}", if neg { "-" } else { "" }, i, f)
}

pub fn trim_decimal(s: &str) -> &str {
    if !s.contains('.') {
        return s;
    }
    let t = s.trim_end_matches('0');
    t.strip_suffix('.').unwrap_or(t)
}

/// A quotient's text with PostgreSQL's decimals for its magnitude: at least 16 significant
/// digits, counted in base-10000 groups (`16 - 4 * weight` decimals: 20 below 1, 16 up to
/// 9999, 12 up to 99999999, ...); zeros past those are dropped. PostgreSQL picks the scale
/// from the operands, which agrees but where their leading groups tie: always for a quotient
/// of exactly 1 (shown with 20 decimals here too), and for some others below 2 (`1.5 / 1.2`
/// shows 20 decimals there, 16 here).
pub fn trim_quotient(s: &str) -> &str {
    trim_to_weight(s, quotient_weight(s))
}

/// The base-10000 weight of the quotient `s` (a decimal's text) as PostgreSQL's division
/// chooses its scale: that of its first significant group, and -1 for exactly 1 (equal
/// operands' leading groups tie).
fn quotient_weight(s: &str) -> i32 {
    let Some(dot) = s.find('.') else { return 0 };
    let int = s[..dot].trim_start_matches('-');
    let weight = if int.trim_start_matches('0').is_empty() {
        // Below 1: the first nonzero decimal's group (0.0001..0.9999 is weight -1).
        match s[dot + 1..].find(|c: char| c != '0') {
            Some(i) => -(i as i32 / 4) - 1,
            None => -1,
        }
    } else {
        (int.trim_start_matches('0').len() as i32 - 1) / 4
    };
    // A quotient of exactly 1 has equal operands, whose leading groups tie: all 20 decimals.
    let one = int.trim_start_matches('0') == "1" && s[dot + 1..].bytes().all(|b| b == b'0');
    if one {
        -1
    } else {
        weight
    }
}

/// A standard deviation's text (numeric `ROOT_QUOTIENT_NUMERIC`) with PostgreSQL's decimals:
/// it takes the square root at the scale of the variance, a quotient, so the decimals follow
/// the weight of its square.
pub fn trim_root_quotient(s: &str) -> &str {
    let square = s.parse::<f64>().map(|v| v * v).unwrap_or(0.0);
    if square <= 0.0 {
        return trim_decimal(s);
    }
    let weight = if quotient_weight(s) == -1 && square == 1.0 { -1 } else { (square.log10().floor() as i32).div_euclid(4) };
    trim_to_weight(s, weight)
}

/// A variance's text (numeric `VARIANCE_NUMERIC`): a quotient's decimals, and `0` for zero
/// (PostgreSQL's variance of equal values is a plain zero, not a zero quotient).
pub fn trim_variance(s: &str) -> &str {
    if s.trim_start_matches('-').bytes().all(|b| b == b'0' || b == b'.') {
        return trim_decimal(s);
    }
    trim_quotient(s)
}

/// `s` without the zeros past `16 - 4 * weight` decimals.
fn trim_to_weight(s: &str, weight: i32) -> &str {
    let Some(dot) = s.find('.') else { return s };
    let keep = (16 - 4 * weight).clamp(0, (s.len() - dot - 1) as i32) as usize;
    let min_end = dot + 1 + keep;
    let trimmed = s.trim_end_matches('0').len().max(min_end);
    let t = &s[..trimmed];
    t.strip_suffix('.').unwrap_or(t)
}

pub fn write_bytea(b: &[u8], out: &mut String) {
    out.push_str("\\x");
    for byte in b {
        let _ = write!(out, "{byte:02x}"); // writing to a String cannot fail
    }
}

pub fn write_date(days: i32, out: &mut String) {
    match NaiveDate::from_num_days_from_ce_opt(days + 719_163) {
        Some(d) => {
            write_ymd(d, out);
            write_era(d, out);
        }
        None => out.push_str("infinity"),
    }
}

/// A date as PostgreSQL writes it: years before 1 AD counted back (year 0 is 1 BC) and
/// marked ` BC` by the caller.
fn write_ymd(d: NaiveDate, out: &mut String) {
    use chrono::Datelike;
    let y = d.year();
    let shown = if y <= 0 { 1 - i64::from(y) } else { i64::from(y) };
    let _ = write!(out, "{shown:04}-{:02}-{:02}", d.month(), d.day()); // writing to a String cannot fail
}

/// ` BC` after a date before 1 AD.
fn write_era(d: NaiveDate, out: &mut String) {
    if chrono::Datelike::year(&d) <= 0 {
        out.push_str(" BC");
    }
}

pub fn time_micros(array: &ArrayRef, row: usize) -> i64 {
    match array.data_type() {
        DataType::Time32(TimeUnit::Second) => i64::from(array.as_primitive::<Time32SecondType>().value(row)) * 1_000_000,
        DataType::Time32(_) => i64::from(array.as_primitive::<Time32MillisecondType>().value(row)) * 1_000,
        DataType::Time64(TimeUnit::Nanosecond) => array.as_primitive::<Time64NanosecondType>().value(row) / 1_000,
        _ => array.as_primitive::<Time64MicrosecondType>().value(row),
    }
}

pub fn write_time(us: i64, out: &mut String) {
    // PostgreSQL's times run up to and including 24:00:00.
    if us == 86_400_000_000 {
        out.push_str("24:00:00");
        return;
    }
    let secs = us.div_euclid(1_000_000);
    let frac = us.rem_euclid(1_000_000);
    let t = NaiveTime::from_num_seconds_from_midnight_opt(secs as u32 % 86_400, 0).unwrap_or(NaiveTime::MIN);
    let _ = write!(out, "{}", t.format("%H:%M:%S")); // writing to a String cannot fail
    write_fraction(frac, out);
}

pub fn write_fraction(frac_us: i64, out: &mut String) {
    if frac_us != 0 {
        let f = format!("{frac_us:06}");
        out.push('.');
        out.push_str(f.trim_end_matches('0'));
    }
}

pub fn timestamp_micros(array: &ArrayRef, row: usize) -> i64 {
    match array.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => array.as_primitive::<TimestampSecondType>().value(row).saturating_mul(1_000_000),
        DataType::Timestamp(TimeUnit::Millisecond, _) => array.as_primitive::<TimestampMillisecondType>().value(row).saturating_mul(1_000),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => array.as_primitive::<TimestampNanosecondType>().value(row) / 1_000,
        _ => array.as_primitive::<TimestampMicrosecondType>().value(row),
    }
}

pub fn write_timestamp(us: i64, out: &mut String) {
    let secs = us.div_euclid(1_000_000);
    let frac = us.rem_euclid(1_000_000);
    match DateTime::from_timestamp(secs, 0) {
        Some(dt) => {
            write_ymd(dt.date_naive(), out);
            let _ = write!(out, " {}", dt.naive_utc().format("%H:%M:%S")); // writing to a String cannot fail
            write_fraction(frac, out);
        }
        None => out.push_str("infinity"),
    }
}

/// ` BC` after a timestamp (and its zone) before 1 AD.
pub fn write_timestamp_era(us: i64, out: &mut String) {
    if let Some(dt) = DateTime::from_timestamp(us.div_euclid(1_000_000), 0) {
        write_era(dt.date_naive(), out);
    }
}

pub fn interval_parts(array: &ArrayRef, row: usize) -> (i32, i32, i64) {
    match array.data_type() {
        DataType::Interval(IntervalUnit::YearMonth) => (array.as_primitive::<IntervalYearMonthType>().value(row), 0, 0),
        DataType::Interval(IntervalUnit::DayTime) => {
            let v = array.as_primitive::<IntervalDayTimeType>().value(row);
            (0, v.days, i64::from(v.milliseconds) * 1_000)
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let v = array.as_primitive::<IntervalMonthDayNanoType>().value(row);
            (v.months, v.days, v.nanoseconds / 1_000)
        }
        DataType::Duration(unit) => {
            let us = match unit {
                TimeUnit::Second => array.as_primitive::<DurationSecondType>().value(row) * 1_000_000,
                TimeUnit::Millisecond => array.as_primitive::<DurationMillisecondType>().value(row) * 1_000,
                TimeUnit::Microsecond => array.as_primitive::<DurationMicrosecondType>().value(row),
                TimeUnit::Nanosecond => array.as_primitive::<DurationNanosecondType>().value(row) / 1_000,
            };
            (0, 0, us)
        }
        _ => (0, 0, 0),
    }
}

/// PostgreSQL's `postgres` IntervalStyle.
pub fn write_interval(months: i32, days: i32, us: i64, out: &mut String) {
    let mut parts: Vec<String> = Vec::new();
    let years = months / 12;
    let mons = months % 12;
    // A positive field after a negative one shows its sign (`-1 days +02:00:00`).
    let mut after_negative = false;
    let mut unit = |n: i64, one: &str, many: &str| {
        let sign = if after_negative && n > 0 { "+" } else { "" };
        after_negative = n < 0;
        format!("{sign}{n} {}", if n == 1 { one } else { many })
    };
    if years != 0 {
        parts.push(unit(i64::from(years), "year", "years"));
    }
    if mons != 0 {
        parts.push(unit(i64::from(mons), "mon", "mons"));
    }
    if days != 0 {
        parts.push(unit(i64::from(days), "day", "days"));
    }
    if us != 0 || parts.is_empty() {
        let neg = us < 0;
        let a = us.unsigned_abs() as i64;
        let (h, m, s, f) = (a / 3_600_000_000, (a / 60_000_000) % 60, (a / 1_000_000) % 60, a % 1_000_000);
        let sign = if neg { "-" } else if after_negative { "+" } else { "" };
        let mut t = format!("{sign}{h:02}:{m:02}:{s:02}");
        write_fraction(f, &mut t);
        parts.push(t);
    }
    out.push_str(&parts.join(" "));
}

/// `s` between two `quote` characters, each `quote` and backslash in it doubled (a quoted
/// record field; with `'`, the body of an escape-string literal).
pub fn push_quoted(s: &str, quote: char, out: &mut String) {
    out.push(quote);
    for c in s.chars() {
        if c == quote || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push(quote);
}

/// A composite value as PostgreSQL prints a record: `(1,a,"b c",)` (empty for NULL fields).
pub fn write_record(array: &ArrayRef, row: usize, out: &mut String) -> Result<()> {
    let s = array.as_struct();
    out.push('(');
    for (i, (col, field)) in s.columns().iter().zip(s.fields()).enumerate() {
        if i > 0 {
            out.push(',');
        }
        let mut v = String::new();
        if !write_text(col, row, field, &mut v)? {
            continue;
        }
        let quote = v.is_empty() || v.chars().any(|c| matches!(c, '(' | ')' | ',' | '"' | '\\') || c.is_whitespace());
        if quote {
            push_quoted(&v, '"', out);
        } else {
            out.push_str(&v);
        }
    }
    out.push(')');
    Ok(())
}

pub fn write_list(array: &ArrayRef, row: usize, out: &mut String) -> Result<()> {
    let values: ArrayRef = match array.data_type() {
        DataType::List(_) => array.as_list::<i32>().value(row),
        DataType::LargeList(_) => array.as_list::<i64>().value(row),
        _ => array.as_fixed_size_list().value(row),
    };
    let field = Field::new("item", values.data_type().clone(), true);
    // A list of lists is a multidimensional array, `{{1,2},{3,4}}`: inner arrays are written
    // as they are, never quoted (quoting them escaped every level again, so the text doubled
    // with each level of nesting).
    let nested = matches!(values.data_type(), DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..));
    out.push('{');
    for i in 0..values.len() {
        if i > 0 {
            out.push(',');
        }
        if nested {
            if values.is_null(i) {
                out.push_str("NULL");
            } else {
                write_list(&values, i, out)?;
            }
            continue;
        }
        let mut s = String::new();
        if !write_text(&values, i, &field, &mut s)? {
            out.push_str("NULL");
            continue;
        }
        let needs_quotes = s.is_empty()
            || s.eq_ignore_ascii_case("null")
            || s.chars().any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_whitespace());
        if needs_quotes {
            out.push('"');
            for c in s.chars() {
                if c == '"' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
        } else {
            out.push_str(&s);
        }
    }
    out.push('}');
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotients_keep_postgresql_decimals_for_their_magnitude() {
        // Each is PostgreSQL 15's text of the same quotient.
        assert_eq!(super::trim_quotient("2.50000000000000000000"), "2.5000000000000000");
        assert_eq!(super::trim_quotient("0.33333333333333333333"), "0.33333333333333333333");
        assert_eq!(super::trim_quotient("0.50000000000000000000"), "0.50000000000000000000");
        assert_eq!(super::trim_quotient("603453.97428571428600000000"), "603453.974285714286");
        assert_eq!(super::trim_quotient("-2.33333333333333330000"), "-2.3333333333333333");
        assert_eq!(super::trim_quotient("3333333333.33333333000000000000"), "3333333333.33333333");
        assert_eq!(super::trim_quotient("0.00000033333333333333"), "0.00000033333333333333");
        assert_eq!(super::trim_quotient("1.00000000000000000000"), "1.00000000000000000000");
        assert_eq!(super::trim_quotient("-1.00000000000000000000"), "-1.00000000000000000000");
        assert_eq!(super::trim_quotient("1.50000000000000000000"), "1.5000000000000000");
    }
}
