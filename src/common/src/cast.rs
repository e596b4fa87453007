//! Casts with PostgreSQL's semantics: a value that does not fit the target type is an error
//! (`22003 numeric value out of range`, or `22P02` for unparseable text), never a silent NULL
//! as Arrow's default "safe" cast makes it.

use arrow::array::{Array, ArrayRef};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::DataType;
use arrow::util::display::FormatOptions;

use crate::error::sqlstate;
use crate::{EddyError, Result};

/// `array` cast to `to`; values that do not fit are an error.
pub fn cast_checked(array: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    if array.data_type() == to {
        return Ok(array.clone());
    }
    let options = CastOptions { safe: false, format_options: FormatOptions::default() };
    cast_with_options(array.as_ref(), to, &options).map_err(|e| {
        let from = array.data_type();
        let text = matches!(from, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        let code = if text { sqlstate::INVALID_TEXT_REPRESENTATION } else { sqlstate::NUMERIC_VALUE_OUT_OF_RANGE };
        EddyError::user(code, format!("value out of range for type {to}: {e}"))
    })
}

/// [`cast_checked`] that also keeps `array` as it is when it has no rows.
pub fn cast_column(array: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    if array.is_empty() {
        return Ok(arrow::array::new_empty_array(to));
    }
    cast_checked(array, to)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;

    use super::*;

    #[test]
    fn overflow_is_an_error_not_a_null() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![1, i64::MAX]));
        let e = cast_checked(&a, &DataType::Int32).unwrap_err();
        assert_eq!(e.sqlstate, sqlstate::NUMERIC_VALUE_OUT_OF_RANGE);
        assert_eq!(cast_checked(&a.slice(0, 1), &DataType::Int32).unwrap().len(), 1);
    }
}
