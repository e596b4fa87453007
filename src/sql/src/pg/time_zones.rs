//! `AT TIME ZONE` as PostgreSQL reads it. DataFusion plans `x AT TIME ZONE 'z'` as a cast to a
//! timestamp labelled `z`, which is right for a timestamp without time zone (its wall time is
//! read in `z`: a timestamptz) but only relabels a timestamptz, whose answer in PostgreSQL is
//! the wall time in `z` (a timestamp without time zone): `timestamptz '2024-03-05 10:00+02' AT
//! TIME ZONE 'America/New_York'` is `2024-03-05 03:00:00`, not `08:00:00+00`.

use std::str::FromStr;
use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{ArrayRef, AsArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use chrono::{DateTime, TimeZone};
use datafusion::common::DFSchema;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{Cast, ColumnarValue, Expr, ExprSchemable, ScalarUDF, Signature, Volatility};
use datafusion::scalar::ScalarValue;
use eddy_common::error::sqlstate;
use eddy_common::types::UTC;

use super::udf::user_error;

/// `(timestamptz, zone)` → the wall time in that zone.
pub const LOCAL_TIME: &str = "eddy_local_time";
/// `(timestamp, zone)` → the instant of that wall time in that zone.
pub const ZONE_INSTANT: &str = "eddy_zone_instant";

fn timestamptz() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from(UTC)))
}

/// The wall time of `micros` (an instant) in `zone`.
fn wall_time(micros: i64, zone: &Tz) -> Option<i64> {
    let instant = DateTime::from_timestamp_micros(micros)?;
    Some(zone.from_utc_datetime(&instant.naive_utc()).naive_local().and_utc().timestamp_micros())
}

/// The instant (microseconds) of wall time `micros` in `zone`, as PostgreSQL resolves one a
/// clock change skips or repeats: a skipped time is read with the offset before the change,
/// a repeated one with the offset after it (standard time, for daylight saving time), so
/// `2024-03-10 02:30` in New York is 07:30 UTC and `2024-11-03 01:30` is 06:30 UTC.
pub(crate) fn wall_time_instant(micros: i64, zone: &Tz) -> Option<i64> {
    let wall = DateTime::from_timestamp_micros(micros)?.naive_utc();
    let instant = match zone.from_local_datetime(&wall) {
        chrono::LocalResult::Single(t) => t,
        chrono::LocalResult::Ambiguous(_, later) => later,
        chrono::LocalResult::None => {
            // In a gap: the offset in force a little before it (gaps are at most hours).
            let before = wall.checked_sub_signed(chrono::TimeDelta::hours(3))?;
            let offset = zone.offset_from_local_datetime(&before).earliest()?;
            return Some((wall - chrono::TimeDelta::seconds(i64::from(chrono::Offset::fix(&offset).local_minus_utc()))).and_utc().timestamp_micros());
        }
    };
    Some(instant.timestamp_micros())
}

/// A numeric zone (`'+05'`, `'-03:30'`, `'UTC+5'`) as PostgreSQL reads it, POSIX-style:
/// positive offsets are west of Greenwich (`'+05'` is five hours behind UTC), the opposite of
/// ISO 8601's sign, which Arrow's zone parser takes. `None` for a zone name.
fn posix_offset(name: &str) -> Option<String> {
    let upper = name.trim().to_ascii_uppercase();
    let rest = upper.strip_prefix("UTC").or_else(|| upper.strip_prefix("GMT")).unwrap_or(&upper);
    let (sign, digits) = match rest.chars().next()? {
        '+' => ('-', &rest[1..]),
        '-' => ('+', &rest[1..]),
        _ => return None,
    };
    let (h, m) = digits.split_once(':').unwrap_or((digits, "0"));
    let valid = |p: &str| !p.is_empty() && p.len() <= 2 && p.chars().all(|c| c.is_ascii_digit());
    if !valid(h) || !valid(m) {
        return None;
    }
    Some(format!("{sign}{:02}:{:02}", h.parse::<u32>().ok()?, m.parse::<u32>().ok()?))
}

fn parse_zone(name: &str) -> DfResult<Tz> {
    let posix = posix_offset(name);
    Tz::from_str(posix.as_deref().unwrap_or(name)).map_err(|_| user_error(sqlstate::INVALID_PARAMETER_VALUE, format!("time zone \"{name}\" not recognized")))
}

/// The zone argument: a text literal, as [`at_time_zone`] plans it.
fn zone_name(arg: &ColumnarValue) -> DfResult<String> {
    match arg {
        ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))) => Ok(name.clone()),
        _ => Err(user_error(sqlstate::FEATURE_NOT_SUPPORTED, "AT TIME ZONE takes a time zone name literal".into())),
    }
}

/// `(timestamp, zone)`: the timestamps as `from`, converted by `convert`, returned as `ret`.
fn in_zone(args: &[ColumnarValue], rows: usize, from: DataType, ret: DataType, convert: impl Fn(&ArrayRef, &str) -> DfResult<ArrayRef>) -> DfResult<ColumnarValue> {
    let name = zone_name(&args[1])?;
    parse_zone(&name)?;
    let scalar = matches!(args[0], ColumnarValue::Scalar(_));
    let at = arrow::compute::cast(&args[0].to_array(if scalar { 1 } else { rows })?, &from)?;
    let out = arrow::compute::cast(&convert(&at, &name)?, &ret)?;
    Ok(if scalar { ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?) } else { ColumnarValue::Array(out) })
}

fn out_of_range() -> datafusion::error::DataFusionError {
    user_error(sqlstate::DATETIME_FIELD_OVERFLOW, "timestamp out of range".into())
}

fn local_time(args: &[ColumnarValue], rows: usize) -> DfResult<ColumnarValue> {
    in_zone(args, rows, timestamptz(), naive(), |at, name| {
        let zone = parse_zone(name)?;
        let walls = at.as_primitive::<TimestampMicrosecondType>().iter().map(|v| v.map(|m| wall_time(m, &zone).ok_or_else(out_of_range)).transpose());
        Ok(Arc::new(walls.collect::<DfResult<TimestampMicrosecondArray>>()?) as ArrayRef)
    })
}

/// The instant of a wall time in a zone ([`wall_time_instant`]), as Eddy's timestamptz.
fn zone_instant(args: &[ColumnarValue], rows: usize) -> DfResult<ColumnarValue> {
    in_zone(args, rows, naive(), timestamptz(), |at, name| {
        let zone = parse_zone(name)?;
        let instants = at.as_primitive::<TimestampMicrosecondType>().iter().map(|v| v.map(|m| wall_time_instant(m, &zone).ok_or_else(out_of_range)).transpose());
        Ok(Arc::new(instants.collect::<DfResult<TimestampMicrosecondArray>>()?.with_timezone(UTC)) as ArrayRef)
    })
}

fn naive() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, None)
}

struct ZoneFunctions {
    local_time: Arc<ScalarUDF>,
    zone_instant: Arc<ScalarUDF>,
}

fn functions() -> &'static ZoneFunctions {
    static UDFS: std::sync::OnceLock<ZoneFunctions> = std::sync::OnceLock::new();
    UDFS.get_or_init(|| {
        let udf = |name: &str, ret: DataType, body: Arc<crate::planner::udf::Body>| Arc::new(crate::planner::udf::closure_udf(name, Signature::any(2, Volatility::Immutable), ret, body));
        ZoneFunctions { local_time: udf(LOCAL_TIME, naive(), Arc::new(local_time)), zone_instant: udf(ZONE_INSTANT, timestamptz(), Arc::new(zone_instant)) }
    })
}

/// PostgreSQL's `AT TIME ZONE` for DataFusion's plan of it (a cast to a zone-labelled
/// timestamp): a timestamptz becomes its wall time in the zone; a timestamp without time zone
/// becomes the instant of its wall time in the zone, as a microsecond timestamptz (the type
/// Eddy stores, not a nanosecond one labelled with the zone).
pub fn at_time_zone(cast: &Cast, schema: &DFSchema) -> Option<Expr> {
    let DataType::Timestamp(_, Some(zone)) = cast.field.data_type() else { return None };
    if zone.as_ref() == UTC {
        return None;
    }
    let f = match cast.expr.get_type(schema).ok()? {
        DataType::Timestamp(_, Some(_)) => &functions().local_time,
        DataType::Timestamp(_, None) => &functions().zone_instant,
        _ => return None,
    };
    Some(f.call(vec![cast.expr.as_ref().clone(), Expr::Literal(ScalarValue::Utf8(Some(zone.to_string())), None)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_time_follows_the_zone_rules() {
        let ny = parse_zone("America/New_York").unwrap();
        // 2024-03-05 08:00 UTC is 03:00 in New York (EST, -5); 2024-07-05 08:00 UTC is 04:00 (EDT).
        let (march, july) = (1_709_625_600_000_000, 1_720_166_400_000_000);
        assert_eq!(wall_time(march, &ny), Some(march - 5 * 3_600_000_000));
        assert_eq!(wall_time(july, &ny), Some(july - 4 * 3_600_000_000));
        assert!(parse_zone("Not/AZone").is_err());
    }

    #[test]
    fn wall_times_a_clock_change_skips_or_repeats_resolve_as_postgresql_does() {
        let at = |s: &str| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap().and_utc().timestamp_micros();
        let ny = parse_zone("America/New_York").unwrap();
        let berlin = parse_zone("Europe/Berlin").unwrap();
        // PostgreSQL 15's answers.
        assert_eq!(wall_time_instant(at("2024-03-10 02:30"), &ny), Some(at("2024-03-10 07:30")));
        assert_eq!(wall_time_instant(at("2024-11-03 01:30"), &ny), Some(at("2024-11-03 06:30")));
        assert_eq!(wall_time_instant(at("2024-03-31 02:30"), &berlin), Some(at("2024-03-31 01:30")));
        assert_eq!(wall_time_instant(at("2024-07-01 12:00"), &berlin), Some(at("2024-07-01 10:00")));
    }
}
