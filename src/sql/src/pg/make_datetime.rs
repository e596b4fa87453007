//! PostgreSQL's date/time constructors: `make_date`, `make_time`, `make_timestamp`,
//! `make_timestamptz`, `make_interval` (named arguments are made positional by the SQL
//! rewrite), and `isfinite`. DataFusion has no `make_timestamp`/`make_interval`, and its
//! `make_time`/`make_date` take no fractional seconds and word their errors differently.
//!
//! Field checks and messages are PostgreSQL's (`date field value out of range: 2024-02-30`,
//! 22008); seconds are rounded to microseconds, and `23:59:60` is the next midnight.

use std::str::FromStr;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Date32Array, IntervalMonthDayNanoArray, Time64MicrosecondArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type, IntervalMonthDayNano, IntervalUnit, TimeUnit};
use chrono::NaiveDate;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{Signature, TypeSignature, Volatility};
use datafusion::prelude::SessionContext;
use eddy_common::error::sqlstate;

use super::udf::user_error;
use crate::planner::udf::{columnar, register};

const MICROS_PER_SECOND: f64 = 1_000_000.0;
const MICROS_PER_DAY: i64 = 86_400_000_000;

fn epoch() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default()
}

/// Integer arguments as i64, float ones as f64 (a bad cast is PostgreSQL's 22P02 upstream).
fn ints(a: &ArrayRef) -> DfResult<ArrayRef> {
    Ok(arrow::compute::cast(a, &DataType::Int64)?)
}

fn floats(a: &ArrayRef) -> DfResult<ArrayRef> {
    Ok(arrow::compute::cast(a, &DataType::Float64)?)
}

fn out_of_range(what: &str, shown: String) -> datafusion::error::DataFusionError {
    user_error(sqlstate::DATETIME_FIELD_OVERFLOW, format!("{what} field value out of range: {shown}"))
}

/// A date from PostgreSQL's year (negative is BC: -1 is 1 BC), month and day.
fn date_of(y: i64, m: i64, d: i64) -> DfResult<NaiveDate> {
    let shown = || format!("{y}-{m:02}-{d:02}");
    let year = if y < 0 { y + 1 } else { y };
    if y == 0 {
        return Err(out_of_range("date", shown()));
    }
    let (Ok(year), Ok(m), Ok(d)) = (i32::try_from(year), u32::try_from(m), u32::try_from(d)) else {
        return Err(out_of_range("date", shown()));
    };
    NaiveDate::from_ymd_opt(year, m, d).ok_or_else(|| out_of_range("date", shown()))
}

/// `%g` of PostgreSQL's messages for the seconds field (`00`, `12.5`, `-1`, `1e+20`).
fn seconds_text(s: f64) -> String {
    if s.fract() == 0.0 && (0.0..100.0).contains(&s) {
        format!("{s:02}")
    } else if s.abs() >= 1e6 {
        let t = format!("{s:e}");
        match t.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e:0>2}"),
            _ => t,
        }
    } else {
        format!("{s}")
    }
}

/// Microseconds since midnight of a time of day, with PostgreSQL's checks (up to 24:00:00).
fn time_of(h: i64, m: i64, s: f64) -> DfResult<i64> {
    let bad = || out_of_range("time", format!("{h}:{m:02}:{}", seconds_text(s)));
    if !(0..=24).contains(&h) || !(0..60).contains(&m) || !(0.0..=60.0).contains(&s) {
        return Err(bad());
    }
    let us = ((h * 60 + m) * 60) * 1_000_000 + (s * MICROS_PER_SECOND).round() as i64;
    if us > MICROS_PER_DAY {
        return Err(bad());
    }
    Ok(us)
}

fn make_date(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    let c: Vec<ArrayRef> = a.iter().map(ints).collect::<DfResult<_>>()?;
    let (y, m, d) = (c[0].as_primitive::<Int64Type>(), c[1].as_primitive::<Int64Type>(), c[2].as_primitive::<Int64Type>());
    let out = (0..n)
        .map(|i| {
            if y.is_null(i) || m.is_null(i) || d.is_null(i) {
                return Ok(None);
            }
            let date = date_of(y.value(i), m.value(i), d.value(i))?;
            Ok(Some((date - epoch()).num_days() as i32))
        })
        .collect::<DfResult<Date32Array>>()?;
    Ok(Arc::new(out))
}

fn make_time(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    let (h, m, s) = (ints(&a[0])?, ints(&a[1])?, floats(&a[2])?);
    let (h, m, s) = (h.as_primitive::<Int64Type>(), m.as_primitive::<Int64Type>(), s.as_primitive::<Float64Type>());
    let out = (0..n)
        .map(|i| if h.is_null(i) || m.is_null(i) || s.is_null(i) { Ok(None) } else { time_of(h.value(i), m.value(i), s.value(i)).map(Some) })
        .collect::<DfResult<Time64MicrosecondArray>>()?;
    Ok(Arc::new(out))
}

/// The local timestamps (µs since the epoch) of `make_timestamp`'s six fields.
fn local_timestamps(a: &[ArrayRef], n: usize) -> DfResult<Vec<Option<i64>>> {
    let c: Vec<ArrayRef> = a[..5].iter().map(ints).collect::<DfResult<_>>()?;
    let c: Vec<&arrow::array::Int64Array> = c.iter().map(|x| x.as_primitive::<Int64Type>()).collect();
    let s = floats(&a[5])?;
    let s = s.as_primitive::<Float64Type>();
    (0..n)
        .map(|i| {
            if c.iter().any(|x| x.is_null(i)) || s.is_null(i) {
                return Ok(None);
            }
            let date = date_of(c[0].value(i), c[1].value(i), c[2].value(i))?;
            let time = time_of(c[3].value(i), c[4].value(i), s.value(i))?;
            let days = (date - epoch()).num_days();
            days.checked_mul(MICROS_PER_DAY)
                .and_then(|d| d.checked_add(time))
                .map(Some)
                .ok_or_else(|| user_error(sqlstate::DATETIME_FIELD_OVERFLOW, "timestamp out of range".into()))
        })
        .collect()
}

fn make_timestamp(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    Ok(Arc::new(TimestampMicrosecondArray::from(local_timestamps(a, n)?)))
}

/// `make_timestamptz(y, m, d, h, mi, s [, zone])`: the local time in `zone` (the session's,
/// UTC, without it) as an instant.
fn make_timestamptz(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    // Six fields and an optional zone: other counts name no function, as in PostgreSQL.
    if !(6..=7).contains(&a.len()) {
        let types = vec!["unknown"; a.len()].join(", ");
        return Err(user_error(sqlstate::UNDEFINED_FUNCTION, format!("function make_timestamptz({types}) does not exist")));
    }
    let local = local_timestamps(a, n)?;
    let zones = a.get(6).map(|z| arrow::compute::cast(z, &DataType::Utf8)).transpose()?;
    let zones = zones.as_ref().map(|z| z.as_string::<i32>());
    let out = (0..n)
        .map(|i| {
            let Some(us) = local[i] else { return Ok(None) };
            let Some(zones) = zones else { return Ok(Some(us)) };
            if zones.is_null(i) {
                return Ok(None);
            }
            let name = zones.value(i);
            let zone = arrow::array::timezone::Tz::from_str(&pg_offset(name))
                .map_err(|_| user_error(sqlstate::INVALID_PARAMETER_VALUE, format!("time zone \"{name}\" not recognized")))?;
            super::time_zones::wall_time_instant(us, &zone)
                .map(Some)
                .ok_or_else(|| user_error(sqlstate::DATETIME_FIELD_OVERFLOW, "timestamp out of range".into()))
        })
        .collect::<DfResult<Vec<_>>>()?;
    Ok(Arc::new(TimestampMicrosecondArray::from(out).with_timezone(eddy_common::types::UTC)))
}

/// A zone as arrow's parser reads it: PostgreSQL's `+02`/`-5` offsets become `+02:00`/`-05:00`
/// (ISO sign: east of Greenwich is positive); names and `UTC` pass as they are.
fn pg_offset(zone: &str) -> String {
    let z = zone.trim();
    let (sign, digits) = match z.as_bytes().first() {
        Some(b'+') => ('+', &z[1..]),
        Some(b'-') => ('-', &z[1..]),
        _ => return if z.eq_ignore_ascii_case("utc") || z.eq_ignore_ascii_case("gmt") || z.eq_ignore_ascii_case("z") { "+00:00".into() } else { z.into() },
    };
    let (h, m) = digits.split_once(':').unwrap_or((digits, "0"));
    match (h.parse::<u32>(), m.parse::<u32>()) {
        (Ok(h), Ok(m)) if h <= 15 && m < 60 => format!("{sign}{h:02}:{m:02}"),
        _ => z.into(),
    }
}

/// `make_interval(years, months, weeks, days, hours, mins, secs)`, each defaulting to 0.
fn make_interval(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    if a.len() > 7 {
        return Err(user_error(sqlstate::UNDEFINED_FUNCTION, format!("function make_interval takes at most 7 arguments, not {}", a.len())));
    }
    let parts: Vec<ArrayRef> = a.iter().enumerate().map(|(k, x)| if k == 6 { floats(x) } else { ints(x) }).collect::<DfResult<_>>()?;
    let range = || user_error(sqlstate::DATETIME_FIELD_OVERFLOW, "interval out of range".into());
    let out = (0..n)
        .map(|i| {
            if parts.iter().any(|p| p.is_null(i)) {
                return Ok(None);
            }
            let int = |k: usize| parts.get(k).map_or(0, |p| p.as_primitive::<Int64Type>().value(i));
            let secs = parts.get(6).map_or(0.0, |p| p.as_primitive::<Float64Type>().value(i));
            let months = int(0).checked_mul(12).and_then(|y| y.checked_add(int(1))).and_then(|m| i32::try_from(m).ok());
            let days = int(2).checked_mul(7).and_then(|w| w.checked_add(int(3))).and_then(|d| i32::try_from(d).ok());
            let micros = (int(4) as f64 * 3600.0 + int(5) as f64 * 60.0 + secs) * MICROS_PER_SECOND;
            if !micros.is_finite() || micros.abs() >= i64::MAX as f64 / 1000.0 {
                return Err(range());
            }
            let (Some(months), Some(days)) = (months, days) else { return Err(range()) };
            Ok(Some(IntervalMonthDayNano::new(months, days, micros.round() as i64 * 1000)))
        })
        .collect::<DfResult<IntervalMonthDayNanoArray>>()?;
    Ok(Arc::new(out))
}

/// `isfinite(date | timestamp | interval)`: Eddy's values are all finite (it has no
/// `infinity` dates or timestamps), so true for every non-NULL value.
fn isfinite(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    Ok(Arc::new((0..n).map(|i| a[0].is_valid(i).then_some(true)).collect::<BooleanArray>()))
}

/// Registers the functions on `ctx`.
pub fn register_make_datetime(ctx: &SessionContext) {
    type F = fn(&[ArrayRef], usize) -> DfResult<ArrayRef>;
    let timestamptz = DataType::Timestamp(TimeUnit::Microsecond, Some(eddy_common::types::UTC.into()));
    let functions: [(&str, Signature, DataType, F); 6] = [
        ("make_date", Signature::any(3, Volatility::Immutable), DataType::Date32, make_date),
        ("make_time", Signature::any(3, Volatility::Immutable), DataType::Time64(TimeUnit::Microsecond), make_time),
        ("make_timestamp", Signature::any(6, Volatility::Immutable), DataType::Timestamp(TimeUnit::Microsecond, None), make_timestamp),
        ("make_timestamptz", Signature::variadic_any(Volatility::Stable), timestamptz, make_timestamptz),
        ("make_interval", Signature::one_of(vec![TypeSignature::Nullary, TypeSignature::VariadicAny], Volatility::Immutable), DataType::Interval(IntervalUnit::MonthDayNano), make_interval),
        ("isfinite", Signature::any(1, Volatility::Immutable), DataType::Boolean, isfinite),
    ];
    for (name, signature, ret, f) in functions {
        register(ctx, name, signature, ret, Arc::new(move |args, rows| columnar(args, rows, f)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_checked_as_postgresql_checks_them() {
        assert!(date_of(2024, 2, 29).is_ok());
        assert!(date_of(2024, 2, 30).unwrap_err().to_string().contains("2024-02-30"));
        assert!(date_of(0, 3, 15).unwrap_err().to_string().contains("0-03-15"));
        assert_eq!(date_of(-44, 3, 15).map(|d| chrono::Datelike::year(&d)).ok(), Some(-43));
        assert_eq!(time_of(23, 59, 60.0).ok(), Some(MICROS_PER_DAY));
        assert_eq!(time_of(24, 0, 0.0).ok(), Some(MICROS_PER_DAY));
        assert!(time_of(24, 0, 0.5).is_err());
        assert!(time_of(1, 2, -1.0).unwrap_err().to_string().contains("1:02:-1"));
        assert!(time_of(0, 0, 1e20).unwrap_err().to_string().contains("0:00:1e+20"));
        assert_eq!(pg_offset("+02"), "+02:00");
        assert_eq!(pg_offset("-5:30"), "-05:30");
        assert_eq!(pg_offset("UTC"), "+00:00");
    }

    #[test]
    fn make_timestamptz_needs_six_or_seven_arguments() {
        let two: Vec<ArrayRef> = vec![Arc::new(arrow::array::Int64Array::from(vec![2024])), Arc::new(arrow::array::StringArray::from(vec!["999"]))];
        let e = make_timestamptz(&two, 1).unwrap_err().to_string();
        assert!(e.contains("make_timestamptz(unknown, unknown) does not exist"), "{e}");
    }
}
