//! Array containment, `a @> b` and `a <@ b` over arrays (the SQL rewrite sends both operators
//! to `eddy_jsonb_contains`, which comes here when an operand is an array): every element of
//! `b` equals some element of `a`, duplicates aside; a NULL element equals nothing, as in
//! PostgreSQL. A text operand is read as an array literal of the other's type (`'{1,2}'`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::compute::SortOptions;
use arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result as DfResult};

/// True when `t` is an array type.
pub(crate) fn is_array(t: &DataType) -> bool {
    matches!(t, DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..))
}

/// `a` as a list array of type `like`'s (text parsed as array literals, other lists cast).
fn as_list_like(a: &ArrayRef, like: &DataType) -> DfResult<ArrayRef> {
    let a = if is_array(a.data_type()) { Arc::clone(a) } else { crate::planner::text_cast::text_arrays(a)? };
    let target = match like {
        DataType::List(_) => like.clone(),
        DataType::LargeList(f) | DataType::FixedSizeList(f, _) => DataType::List(Arc::clone(f)),
        _ => return Err(DataFusionError::Internal(format!("array containment over {like}"))),
    };
    Ok(arrow::compute::cast(&a, &target)?)
}

/// `a @> b` row by row.
pub(crate) fn contains(a: &ArrayRef, b: &ArrayRef) -> DfResult<BooleanArray> {
    let like = if is_array(a.data_type()) { a.data_type().clone() } else { b.data_type().clone() };
    let (a, b) = (as_list_like(a, &like)?, as_list_like(b, &like)?);
    let (a, b) = (a.as_list::<i32>(), b.as_list::<i32>());
    let compare = arrow::array::make_comparator(a.values().as_ref(), b.values().as_ref(), SortOptions::default())?;
    let (a_offsets, b_offsets) = (a.value_offsets(), b.value_offsets());
    let (a_values, b_values) = (a.values(), b.values());
    Ok((0..a.len())
        .map(|row| {
            if a.is_null(row) || b.is_null(row) {
                return None;
            }
            let haystack = a_offsets[row] as usize..a_offsets[row + 1] as usize;
            let all = (b_offsets[row] as usize..b_offsets[row + 1] as usize).all(|j| {
                b_values.is_valid(j) && haystack.clone().any(|i| a_values.is_valid(i) && compare(i, j).is_eq())
            });
            Some(all)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ListArray, StringArray};
    use arrow::datatypes::Int32Type;

    #[test]
    fn containment_ignores_duplicates_and_never_matches_null() {
        let a: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            Some(vec![Some(1), None]),
            Some(vec![]),
            None,
        ]));
        let b: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(2), Some(2), Some(1)]),
            Some(vec![None]),
            Some(vec![]),
            Some(vec![Some(1)]),
        ]));
        let out = contains(&a, &b).unwrap();
        assert_eq!(out.iter().collect::<Vec<_>>(), vec![Some(true), Some(false), Some(true), None]);
    }

    #[test]
    fn text_is_read_as_an_array_of_the_other_side() {
        let a: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1), Some(2)])]));
        let b: ArrayRef = Arc::new(StringArray::from(vec!["{2}"]));
        assert!(contains(&a, &b).unwrap().value(0));
        assert!(!contains(&b, &a).unwrap().value(0));
    }
}
