//! `age(a, b)` and `age(a)`: the symbolic difference of two timestamps in years, months and
//! days, as PostgreSQL's `timestamp_age` forms it (field by field, borrowing from the next
//! larger field; a month borrowed is as long as the earlier timestamp's month). `age(a)` is
//! `age(today at midnight, a)`.

use std::sync::Arc;

use arrow::array::{Array, AsArray, IntervalMonthDayNanoArray};
use arrow::datatypes::{DataType, IntervalMonthDayNano, TimeUnit, TimestampMicrosecondType};
use chrono::{DateTime, Datelike, NaiveDateTime, Timelike};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarUDF, Signature, Volatility};

fn days_in_month(year: i32, month: u32) -> i64 {
    let next = if month == 12 { chrono::NaiveDate::from_ymd_opt(year + 1, 1, 1) } else { chrono::NaiveDate::from_ymd_opt(year, month + 1, 1) };
    let first = chrono::NaiveDate::from_ymd_opt(year, month, 1);
    match (first, next) {
        (Some(f), Some(n)) => (n - f).num_days(),
        _ => 30,
    }
}

/// `a - b` as PostgreSQL's age gives it.
pub fn age(a: NaiveDateTime, b: NaiveDateTime) -> IntervalMonthDayNano {
    let negative = a < b;
    let field = |x: &NaiveDateTime| [x.year() as i64, x.month() as i64, x.day() as i64, x.hour() as i64, x.minute() as i64, x.second() as i64, (x.nanosecond() / 1000) as i64];
    let (fa, fb) = (field(&a), field(&b));
    let sign = if negative { -1 } else { 1 };
    let [mut year, mut mon, mut mday, mut hour, mut min, mut sec, mut usec] = std::array::from_fn(|i| sign * (fa[i] - fb[i]));
    // A negative field borrows one of the next larger field, worth `unit` of it.
    fn borrow(field: &mut i64, larger: &mut i64, unit: i64) {
        while *field < 0 {
            *field += unit;
            *larger -= 1;
        }
    }
    borrow(&mut usec, &mut sec, 1_000_000);
    borrow(&mut sec, &mut min, 60);
    borrow(&mut min, &mut hour, 60);
    borrow(&mut hour, &mut mday, 24);
    let month_of = if negative { &a } else { &b };
    borrow(&mut mday, &mut mon, days_in_month(month_of.year(), month_of.month()));
    borrow(&mut mon, &mut year, 12);
    let months = sign * (year * 12 + mon);
    let days = sign * mday;
    let nanos = sign * (((hour * 60 + min) * 60 + sec) * 1_000_000 + usec) * 1000;
    IntervalMonthDayNano::new(months as i32, days as i32, nanos)
}

fn micros_to_datetime(us: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp_micros(us).map(|d| d.naive_utc())
}

/// The `age` function (one or two arguments).
pub fn udf() -> ScalarUDF {
    let body = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
        let arrays = args.iter().map(|a| arrow::compute::cast(&a.to_array(rows)?, &ts).map_err(Into::into)).collect::<DfResult<Vec<_>>>()?;
        let today = chrono::Utc::now().date_naive().and_hms_opt(0, 0, 0).unwrap_or_default();
        let out: IntervalMonthDayNanoArray = (0..rows)
            .map(|i| {
                let value = |k: usize| {
                    let a = arrays[k].as_primitive::<TimestampMicrosecondType>();
                    if a.is_null(i) { None } else { micros_to_datetime(a.value(i)) }
                };
                match arrays.len() {
                    1 => value(0).map(|b| age(today, b)),
                    _ => Some(age(value(0)?, value(1)?)),
                }
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    };
    crate::planner::udf::closure_udf("age", Signature::variadic_any(Volatility::Stable), DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano), Arc::new(body))
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDateTime;

    fn ts(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn ages_borrow_as_postgresql_does() {
        // PostgreSQL: age('2024-03-01', '2023-01-15') = 1 year 1 mon 17 days (-14 days borrow
        // January's 31: the earlier timestamp's month).
        let a = super::age(ts("2024-03-01 00:00:00"), ts("2023-01-15 00:00:00"));
        assert_eq!((a.months, a.days, a.nanoseconds), (13, 17, 0));
        let a = super::age(ts("2001-04-10 00:00:00"), ts("1957-06-13 00:00:00"));
        assert_eq!((a.months, a.days), (43 * 12 + 9, 27));
        let a = super::age(ts("2023-01-15 00:00:00"), ts("2024-03-01 12:00:00"));
        assert_eq!((a.months, a.days, a.nanoseconds), (-13, -17, -12 * 3600 * 1_000_000_000));
    }
}
