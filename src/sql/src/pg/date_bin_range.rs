//! `date_bin` (and so `TUMBLE`/`HOP` windows, which are written with it) refuses timestamps
//! its arithmetic cannot hold, with 22008 "timestamp out of range". DataFusion's computes in
//! nanoseconds: a microsecond timestamp past 2262 (or before 1677) overflowed while scaled —
//! a panic in a debug build (a view over such a row failed), a wrong window in a release one.
//! The bin it returns lies up to one stride before the source, so that must fit too.
//! DataFusion's function is wrapped as `series_check.rs` wraps `generate_series`.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, IntervalMonthDayNanoType, IntervalUnit, TimeUnit};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarUDF};
use datafusion::prelude::SessionContext;
use eddy_common::error::sqlstate;

use super::series_check::Bounded;
use super::udf::user_error;

/// Nanoseconds in one unit of `unit`.
fn nanos_per(unit: &TimeUnit) -> i128 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// The largest stride of `stride` in nanoseconds (months count as nothing: they are binned by
/// calendar, not by nanoseconds).
fn stride_nanos(stride: &ArrayRef) -> i128 {
    let Ok(s) = arrow::compute::cast(stride, &DataType::Interval(IntervalUnit::MonthDayNano)) else { return 0 };
    let s = s.as_primitive::<IntervalMonthDayNanoType>();
    (0..s.len()).filter(|&i| s.is_valid(i)).map(|i| (i128::from(s.value(i).days) * 86_400_000_000_000 + i128::from(s.value(i).nanoseconds)).abs()).max().unwrap_or(0)
}

/// Checks `date_bin(stride, source [, origin])`'s timestamps.
fn check_date_bin(args: &[ColumnarValue], rows: usize) -> DfResult<()> {
    let n = if args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) { 1 } else { rows };
    let arrays = args.iter().map(|a| a.to_array(n)).collect::<DfResult<Vec<ArrayRef>>>()?;
    let Some(stride) = arrays.first() else { return Ok(()) };
    let margin = stride_nanos(stride);
    for a in arrays.iter().skip(1) {
        let DataType::Timestamp(unit, _) = a.data_type() else { continue };
        let Ok(raw) = arrow::compute::cast(a, &DataType::Int64) else { continue };
        let raw = raw.as_primitive::<arrow::datatypes::Int64Type>();
        let limit = i128::from(i64::MAX) - margin;
        if (0..raw.len()).any(|i| raw.is_valid(i) && (i128::from(raw.value(i)) * nanos_per(unit)).abs() > limit) {
            return Err(user_error(sqlstate::DATETIME_FIELD_OVERFLOW, "timestamp out of range".into()));
        }
    }
    Ok(())
}

/// Replaces `date_bin` on `ctx` with the checked one.
pub fn install(ctx: &SessionContext) {
    let state = ctx.state();
    if let Some(inner) = state.scalar_functions().get("date_bin") {
        ctx.register_udf(ScalarUDF::new_from_impl(Bounded { inner: inner.clone(), check: check_date_bin }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::TimestampMicrosecondArray;
    use arrow::datatypes::IntervalMonthDayNano;
    use datafusion::scalar::ScalarValue;
    use std::sync::Arc;

    fn call(micros: i64) -> DfResult<()> {
        let stride = ColumnarValue::Scalar(ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(0, 1, 0))));
        let ts = ColumnarValue::Array(Arc::new(TimestampMicrosecondArray::from(vec![Some(0), None, Some(micros)])));
        check_date_bin(&[stride, ts], 3)
    }

    #[test]
    fn timestamps_nanoseconds_cannot_hold_are_refused() {
        assert!(call(0).is_ok());
        // 2200-01-01 and 1700-01-01 fit; 2300-01-01 and 1600-01-01 do not.
        assert!(call(7_258_118_400_000_000).is_ok());
        assert!(call(-8_520_336_000_000_000).is_ok());
        let e = call(10_413_792_000_000_000).unwrap_err().to_string();
        assert!(e.contains("timestamp out of range"), "{e}");
        assert!(call(-11_676_096_000_000_000).is_err());
    }
}
