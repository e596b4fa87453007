//! `EXTRACT(EPOCH FROM x)` and `EXTRACT(MILLISECOND FROM x)` as PostgreSQL computes them: exact
//! numerics with PostgreSQL's scale (6 decimals for an epoch of a timestamp, time or interval,
//! none for a date; 3 for milliseconds). DataFusion's are doubles (`3600` where PostgreSQL
//! shows `3600.000000`). The SQL rewrite turns those two fields into these functions (the
//! other fields already print as PostgreSQL's).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array};
use arrow::datatypes::{DataType, IntervalMonthDayNanoType, IntervalUnit, Time64MicrosecondType, TimeUnit, TimestampMicrosecondType};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use datafusion::prelude::SessionContext;
use eddy_common::error::sqlstate;

use super::udf::user_error;
use crate::planner::udf::columnar;

/// `EXTRACT(EPOCH FROM x)`.
pub const EXTRACT_EPOCH: &str = "eddy_extract_epoch";
/// `EXTRACT(MILLISECOND FROM x)`.
pub const EXTRACT_MILLISECOND: &str = "eddy_extract_millisecond";

const MICROS_PER_DAY: i128 = 86_400_000_000;
/// PostgreSQL counts a year of an interval as 365.25 days.
const MICROS_PER_YEAR: i128 = 31_557_600_000_000;

#[derive(Debug, PartialEq, Eq, Hash)]
struct Extract {
    millisecond: bool,
    signature: Signature,
}

impl Extract {
    /// The result's scale for an argument of type `t`.
    fn scale(&self, t: &DataType) -> i8 {
        match (self.millisecond, t) {
            (true, _) => 3,
            (false, DataType::Date32 | DataType::Date64) => 0,
            (false, _) => 6,
        }
    }
}

/// Each value of `x` in microseconds: since the epoch (timestamps, dates), since midnight
/// (times), or as an interval's length with PostgreSQL's 365.25-day years and 30-day months.
fn micros(x: &ArrayRef) -> DfResult<Vec<Option<i128>>> {
    Ok(match x.data_type() {
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => {
            let t = arrow::compute::cast(x, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
            t.as_primitive::<TimestampMicrosecondType>().iter().map(|v| v.map(i128::from)).collect()
        }
        DataType::Time32(_) | DataType::Time64(_) => {
            let t = arrow::compute::cast(x, &DataType::Time64(TimeUnit::Microsecond))?;
            t.as_primitive::<Time64MicrosecondType>().iter().map(|v| v.map(i128::from)).collect()
        }
        DataType::Interval(_) | DataType::Duration(_) => {
            let iv = arrow::compute::cast(x, &DataType::Interval(IntervalUnit::MonthDayNano))?;
            iv.as_primitive::<IntervalMonthDayNanoType>()
                .iter()
                .map(|v| {
                    v.map(|v| {
                        let months = i128::from(v.months);
                        (months / 12) * MICROS_PER_YEAR + (months % 12) * 30 * MICROS_PER_DAY + i128::from(v.days) * MICROS_PER_DAY + i128::from(v.nanoseconds / 1000)
                    })
                })
                .collect()
        }
        DataType::Null => vec![None; x.len()],
        other => return Err(user_error(sqlstate::UNDEFINED_FUNCTION, format!("EXTRACT does not take a value of type {other}"))),
    })
}

impl ScalarUDFImpl for Extract {
    fn name(&self) -> &str {
        if self.millisecond { EXTRACT_MILLISECOND } else { EXTRACT_EPOCH }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Decimal128(38, self.scale(args.first().unwrap_or(&DataType::Null))))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        columnar(&args.args, args.number_rows, |a, _| self.extract(&a[0]))
    }
}

impl Extract {
    /// The field of each value of `x`.
    fn extract(&self, x: &ArrayRef) -> DfResult<ArrayRef> {
        let date = matches!(x.data_type(), DataType::Date32 | DataType::Date64);
        let interval = matches!(x.data_type(), DataType::Interval(_) | DataType::Duration(_));
        let scale = self.scale(x.data_type());
        let values: Vec<Option<i128>> = micros(x)?
            .into_iter()
            .map(|v| {
                v.map(|us| match (self.millisecond, date) {
                    // Milliseconds of the minute, with their fraction: microseconds at scale 3.
                    (true, _) if interval => us % 60_000_000,
                    (true, _) => us.rem_euclid(60_000_000),
                    (false, true) => us / 1_000_000,
                    (false, false) => us,
                })
            })
            .collect();
        Ok(Arc::new(Decimal128Array::from(values).with_precision_and_scale(38, scale)?))
    }
}

/// Registers both functions on `ctx`.
pub fn register(ctx: &SessionContext) {
    for millisecond in [false, true] {
        ctx.register_udf(ScalarUDF::new_from_impl(Extract { millisecond, signature: Signature::any(1, Volatility::Immutable) }));
    }
}
