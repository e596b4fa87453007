//! Casts of text to `date` and `timestamp` read PostgreSQL's other date forms as the ISO text
//! they name (`eddy_common::date_text`; the time of day after it kept for timestamps); other
//! text is left to the cast and its errors.

use std::sync::Arc;

use arrow::array::{AsArray, StringArray};
use arrow::datatypes::DataType;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarUDF, Signature, Volatility};

/// `eddy_date_input(text)`: `iso_date_text` of each value, else the value trimmed.
/// The reading function for a cast to a date (`date_only`), a timestamp without time zone
/// (`naive`) or a timestamptz: one instance of each, so two casts of one column are one
/// expression (a closure function's instances compare by identity).
pub(crate) fn date_input_udf(date_only: bool, naive: bool) -> &'static ScalarUDF {
    static UDFS: std::sync::OnceLock<[ScalarUDF; 3]> = std::sync::OnceLock::new();
    let [date, timestamp, timestamptz] = UDFS.get_or_init(|| [reading(true, false), reading(false, true), reading(false, false)]);
    match (date_only, naive) {
        (true, _) => date,
        (false, true) => timestamp,
        (false, false) => timestamptz,
    }
}

fn reading(date_only: bool, naive: bool) -> ScalarUDF {
    let body = move |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        let a = arrow::compute::cast(&args[0].to_array(rows)?, &DataType::Utf8)?;
        let read = |t: &str| {
            let iso = eddy_common::date_text::iso_date_text(t, date_only).unwrap_or_else(|| t.trim().to_string());
            // A timestamp without time zone ignores a zone in its text.
            if naive { eddy_common::date_text::without_zone(&iso).unwrap_or(iso) } else { iso }
        };
        let out: StringArray = a.as_string::<i32>().iter().map(|v| v.map(read)).collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    };
    let name = match (date_only, naive) {
        (true, _) => "eddy_date_input",
        (false, true) => "eddy_timestamp_input",
        (false, false) => "eddy_timestamptz_input",
    };
    crate::planner::udf::closure_udf(name, Signature::any(1, Volatility::Immutable), DataType::Utf8, Arc::new(body))
}
