//! `to_timestamp(seconds)` as PostgreSQL computes it: a `timestamptz` of microseconds, NaN and
//! values past the type's range refused (22008). DataFusion's gives nanoseconds, which end in
//! 2262 and wrapped around silently (`to_timestamp(1e10)` was a day in 1702). Other forms
//! (`to_timestamp(text, template)`) stay DataFusion's.

use std::sync::Arc;

use arrow::array::{Array, AsArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, FieldRef, Float64Type, TimeUnit};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature};
use datafusion::prelude::SessionContext;
use eddy_common::error::sqlstate;

/// Microseconds since 1970 of PostgreSQL's end of timestamps (294277-01-01 UTC, exclusive):
/// past `i64`, whose end bounds them here.
const END_MICROS: f64 = 9_224_318_016_000_000_000.0;
/// Microseconds since 1970 of its first timestamp (4714-11-24 00:00:00 BC UTC).
const MIN_MICROS: f64 = -212_760_172_800_000_000.0;

#[derive(Debug, PartialEq, Eq, Hash)]
struct EpochToTimestamp {
    inner: ScalarUDF,
}

impl EpochToTimestamp {
    fn numeric(args: &[DataType]) -> bool {
        matches!(args, [t] if t.is_numeric())
    }
}

fn out_of_range(message: String) -> DataFusionError {
    DataFusionError::External(Box::new(eddy_common::user_err!(sqlstate::DATETIME_FIELD_OVERFLOW, "{message}")))
}

/// Microseconds since 1970 of `seconds`, as PostgreSQL rounds and bounds them.
fn micros(seconds: f64) -> DfResult<i64> {
    if seconds.is_nan() {
        return Err(out_of_range("timestamp cannot be NaN".into()));
    }
    let micros = (seconds * 1_000_000.0).round();
    if !(MIN_MICROS..END_MICROS).contains(&micros) || micros >= i64::MAX as f64 {
        return Err(out_of_range(format!("timestamp out of range: \"{seconds}\"")));
    }
    Ok(micros as i64)
}

impl ScalarUDFImpl for EpochToTimestamp {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn with_updated_config(&self, config: &datafusion::common::config::ConfigOptions) -> Option<ScalarUDF> {
        let inner = self.inner.inner().with_updated_config(config)?;
        Some(ScalarUDF::new_from_impl(EpochToTimestamp { inner }))
    }
    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.inner().coerce_types(args)
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        let inner = self.inner.return_type(args)?;
        Ok(match (Self::numeric(args), inner) {
            (true, DataType::Timestamp(_, tz)) => DataType::Timestamp(TimeUnit::Microsecond, tz),
            (_, other) => other,
        })
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let types: Vec<DataType> = args.arg_fields.iter().map(|f| f.data_type().clone()).collect();
        let field = self.inner.return_field_from_args(args)?;
        match (Self::numeric(&types), field.data_type()) {
            (true, DataType::Timestamp(_, tz)) => {
                let ty = DataType::Timestamp(TimeUnit::Microsecond, tz.clone());
                Ok(Arc::new(field.as_ref().clone().with_data_type(ty)))
            }
            _ => Ok(field),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let types: Vec<DataType> = args.arg_fields.iter().map(|f| f.data_type().clone()).collect();
        if !Self::numeric(&types) {
            // DataFusion's text form returns no zone for an array argument although it promised
            // the session's zone (the same instants: its values are UTC).
            let promised = args.return_field.data_type().clone();
            let out = self.inner.inner().invoke_with_args(args)?;
            return if out.data_type() == promised { Ok(out) } else { out.cast_to(&promised, None) };
        }
        let DataType::Timestamp(_, tz) = args.return_field.data_type().clone() else {
            return self.inner.invoke_with_args(args);
        };
        crate::planner::udf::columnar(&args.args, args.number_rows, |arrays, _| {
            let seconds = arrow::compute::cast(&arrays[0], &DataType::Float64)?;
            let seconds = seconds.as_primitive::<Float64Type>();
            let values = (0..seconds.len())
                .map(|i| if seconds.is_null(i) { Ok(None) } else { micros(seconds.value(i)).map(Some) })
                .collect::<DfResult<TimestampMicrosecondArray>>()?
                .with_timezone_opt(tz.clone());
            Ok(Arc::new(values) as Arc<dyn Array>)
        })
    }
}

/// Replaces DataFusion's `to_timestamp` on `ctx` by the checked, microsecond one for seconds.
pub fn install(ctx: &SessionContext) {
    if let Some(inner) = ctx.state().scalar_functions().get("to_timestamp") {
        ctx.register_udf(ScalarUDF::new_from_impl(EpochToTimestamp { inner: inner.as_ref().clone() }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_become_microseconds_within_postgres_range() {
        assert_eq!(micros(1.5).unwrap(), 1_500_000);
        assert_eq!(micros(1e10).unwrap(), 10_000_000_000_000_000);
        assert_eq!(micros(-1e10).unwrap(), -10_000_000_000_000_000);
        assert!(micros(f64::NAN).unwrap_err().to_string().contains("cannot be NaN"));
        assert!(micros(1e20).unwrap_err().to_string().contains("out of range"));
        assert!(micros(f64::INFINITY).is_err());
        assert!(micros(-1e13).unwrap_err().to_string().contains("out of range"));
    }
}
