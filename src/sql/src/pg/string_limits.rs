//! The string functions whose result length an argument chooses (`repeat`, `lpad`, `rpad`)
//! refuse a result that is too large with 54000 before building it. DataFusion built whatever
//! was asked: `SELECT lpad('a', 1000000000)` allocated a 1 GB string and sent it, and a few
//! such rows in one batch (or a `repeat` of a long column) would take the server's memory.
//!
//! One value is limited as PostgreSQL limits it (its largest field is 1 GB; `lpad` and `rpad`
//! reserve four bytes per character of the requested length, as PostgreSQL does under UTF-8),
//! and one call's values over a batch to [`MAX_CALL_BYTES`] together.

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarUDF};
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;
use eddy_common::error::sqlstate;

use super::series_check::{ArgumentCheck, Bounded};
use super::udf::user_error;

/// PostgreSQL's largest value, in bytes (`MaxAllocSize`).
const MAX_VALUE_BYTES: u64 = (1 << 30) - 1;

/// The most bytes one call may produce over one batch.
pub const MAX_CALL_BYTES: u64 = 1 << 30;

/// Bytes a UTF-8 character takes at most.
const MAX_CHAR_BYTES: u64 = 4;

/// One argument's values, read per row without expanding a constant to the batch.
enum Arg {
    Scalar(Option<i64>),
    Array(arrow::array::ArrayRef),
}

impl Arg {
    /// Integers as they are; strings as their lengths in bytes.
    fn of(v: &ColumnarValue) -> DfResult<Self> {
        let is_text = matches!(v.data_type(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        Ok(match v {
            ColumnarValue::Scalar(s) if is_text => {
                Arg::Scalar(match s {
                    ScalarValue::Utf8(t) | ScalarValue::LargeUtf8(t) | ScalarValue::Utf8View(t) => t.as_ref().map(|t| t.len() as i64),
                    _ => None,
                })
            }
            ColumnarValue::Scalar(s) => Arg::Scalar(match s.cast_to(&DataType::Int64)? {
                ScalarValue::Int64(v) => v,
                _ => None,
            }),
            ColumnarValue::Array(a) if is_text => Arg::Array(arrow::compute::cast(&arrow::compute::kernels::length::length(a)?, &DataType::Int64)?),
            ColumnarValue::Array(a) => Arg::Array(arrow::compute::cast(a, &DataType::Int64)?),
        })
    }

    fn at(&self, row: usize) -> Option<i64> {
        match self {
            Arg::Scalar(v) => *v,
            Arg::Array(a) => a.is_valid(row).then(|| a.as_primitive::<Int64Type>().value(row)),
        }
    }
}

fn too_large(what: String) -> datafusion::error::DataFusionError {
    user_error(sqlstate::PROGRAM_LIMIT_EXCEEDED, what)
}

/// Refuses rows whose value would exceed [`MAX_VALUE_BYTES`] (`reserved`: the bytes a value
/// reserves) and calls whose values would exceed [`MAX_CALL_BYTES`] (`bytes`: at least what a
/// value takes).
fn check_rows(args: &[ColumnarValue], rows: usize, name: &str, size: impl Fn(&[Arg], usize) -> (u64, u64)) -> DfResult<()> {
    let args = args.iter().map(Arg::of).collect::<DfResult<Vec<_>>>()?;
    // A call on constants is one value, whatever the batch's row count.
    let rows = if args.iter().all(|a| matches!(a, Arg::Scalar(_))) { rows.min(1) } else { rows };
    let mut total: u64 = 0;
    for row in 0..rows {
        let (reserved, bytes) = size(&args, row);
        if reserved > MAX_VALUE_BYTES {
            return Err(too_large("requested length too large".into()));
        }
        total = total.saturating_add(bytes);
        if total > MAX_CALL_BYTES {
            return Err(too_large(format!("{name}() would produce more than {MAX_CALL_BYTES} bytes for one batch of rows")));
        }
    }
    Ok(())
}

/// `repeat(text, n)`: the text's bytes `n` times.
fn check_repeat(args: &[ColumnarValue], rows: usize) -> DfResult<()> {
    check_rows(args, rows, "repeat", |a, row| {
        let bytes = match (a[0].at(row), a.get(1).and_then(|n| n.at(row))) {
            (Some(len), Some(n)) => (len.max(0) as u64).saturating_mul(n.max(0) as u64),
            _ => 0,
        };
        (bytes, bytes)
    })
}

/// `lpad`/`rpad(text, n [, fill])`: `n` characters.
fn check_pad(args: &[ColumnarValue], rows: usize) -> DfResult<()> {
    check_rows(args, rows, "lpad/rpad", |a, row| {
        let chars = a.get(1).and_then(|n| n.at(row)).map_or(0, |n| n.max(0) as u64);
        (chars.saturating_mul(MAX_CHAR_BYTES), chars)
    })
}

/// `chr(0)`: PostgreSQL's text holds no NUL character.
fn check_chr(args: &[ColumnarValue], rows: usize) -> DfResult<()> {
    let Some(code) = args.first().map(Arg::of).transpose()? else { return Ok(()) };
    let rows = if matches!(code, Arg::Scalar(_)) { rows.min(1) } else { rows };
    if (0..rows).any(|row| code.at(row) == Some(0)) {
        return Err(too_large("null character not permitted".into()));
    }
    Ok(())
}

/// Replaces `repeat`, `lpad`, `rpad` and `chr` on `ctx` with checked ones.
pub fn install(ctx: &SessionContext) {
    let state = ctx.state();
    let functions = state.scalar_functions();
    let checks: [(&str, ArgumentCheck); 4] = [("repeat", check_repeat), ("lpad", check_pad), ("rpad", check_pad), ("chr", check_chr)];
    for (name, check) in checks {
        if let Some(inner) = functions.get(name) {
            ctx.register_udf(ScalarUDF::new_from_impl(Bounded { inner: inner.clone(), check }));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use arrow::array::{Int64Array, StringArray};

    fn text(s: &str) -> ColumnarValue {
        ColumnarValue::Scalar(ScalarValue::Utf8(Some(s.into())))
    }

    fn int(n: i64) -> ColumnarValue {
        ColumnarValue::Scalar(ScalarValue::Int64(Some(n)))
    }

    fn code(r: DfResult<()>) -> Option<&'static str> {
        r.err().map(|e| eddy_common::EddyError::from(e).sqlstate)
    }

    #[test]
    fn results_past_a_gigabyte_are_refused_before_they_are_built() {
        assert_eq!(code(check_repeat(&[text("ab"), int(1000)], 8192)), None);
        assert_eq!(code(check_repeat(&[text("ab"), int(600_000_000)], 1)), Some("54000"));
        assert_eq!(code(check_pad(&[text("a"), int(1_000_000_000)], 1)), Some("54000"));
        assert_eq!(code(check_pad(&[text("a"), int(200_000_000), text("x")], 1)), None);
        assert_eq!(code(check_pad(&[text("a"), int(-5)], 1)), None);
        // Each row's value is allowed; the batch's values together are not.
        let lens = ColumnarValue::Array(Arc::new(Int64Array::from(vec![200_000_000; 8])));
        assert_eq!(code(check_pad(&[text("a"), lens.clone()], 8)), Some("54000"));
        let texts = ColumnarValue::Array(Arc::new(StringArray::from(vec![Some("abcd"), None, Some("xy")])));
        assert_eq!(code(check_repeat(&[texts, int(100_000_000)], 3)), None);
        assert_eq!(code(check_repeat(&[text("abcd"), lens], 8)), Some("54000"));
        assert_eq!(code(check_chr(&[int(0)], 5)), Some("54000"));
        assert_eq!(code(check_chr(&[int(65)], 5)), None);
    }
}
