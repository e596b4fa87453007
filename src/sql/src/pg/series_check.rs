//! The list-valued `generate_series` and `range` (a set-returning call in a select list, or a
//! view's, is one list per row that is then unnested) refuse a series longer than
//! [`MAX_LIST_SERIES`] with 54000 before building it. DataFusion built it whole: a series of
//! 2^31 values is a 16 GiB allocation the query's memory pool never sees, and constant folding
//! did it at planning time — `SELECT generate_series(1, 2147483647)` took the server down.
//! `generate_series` in FROM streams any length (`series.rs`). DataFusion's functions are
//! wrapped, as `math.rs` wraps the math functions: the check runs first, then theirs.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, FieldRef, Int64Type, IntervalMonthDayNanoType, TimeUnit};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature};
use datafusion::prelude::SessionContext;
use eddy_common::error::sqlstate;

use super::series::series_len;
use super::udf::user_error;

/// Most values one `generate_series` call in a select list may produce (80 MB of bigints).
pub const MAX_LIST_SERIES: u64 = 10_000_000;

/// Values of each row's series: integers exactly, timestamps and dates by the step's length in
/// microseconds (a month as 30 days: this only bounds the length).
fn lengths(a: &[ArrayRef], n: usize) -> DfResult<Vec<Option<u64>>> {
    if a.iter().take(2).all(|x| x.data_type().is_integer()) {
        let ints: Vec<ArrayRef> = a.iter().map(|x| arrow::compute::cast(x, &DataType::Int64)).collect::<Result<_, _>>()?;
        let v = |k: usize, i: usize| ints.get(k).map_or(Some(1), |x| x.is_valid(i).then(|| x.as_primitive::<Int64Type>().value(i)));
        // DataFusion's one-argument form counts from 0 to it.
        let one = ints.len() == 1;
        let start = |i: usize| if one { Some(0) } else { v(0, i) };
        return Ok((0..n).map(|i| Some(series_len(start(i)?, v(usize::from(!one), i)?, v(2, i)?))).collect());
    }
    if a.len() < 2 {
        return Ok(vec![None; n]);
    }
    let micros = DataType::Timestamp(TimeUnit::Microsecond, None);
    let (Ok(start), Ok(stop)) = (arrow::compute::cast(&a[0], &micros), arrow::compute::cast(&a[1], &micros)) else { return Ok(vec![None; n]) };
    let step = a.get(2).filter(|s| matches!(s.data_type(), DataType::Interval(_))).map(|s| arrow::compute::cast(s, &DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano))).transpose()?;
    let (start, stop) = (start.as_primitive::<arrow::datatypes::TimestampMicrosecondType>(), stop.as_primitive::<arrow::datatypes::TimestampMicrosecondType>());
    Ok((0..n)
        .map(|i| {
            let s = step.as_ref().filter(|s| s.is_valid(i)).map(|s| s.as_primitive::<IntervalMonthDayNanoType>().value(i))?;
            let step_us = i128::from(s.months) * 30 * 86_400_000_000 + i128::from(s.days) * 86_400_000_000 + i128::from(s.nanoseconds / 1000);
            if !start.is_valid(i) || !stop.is_valid(i) || step_us == 0 {
                return None;
            }
            let span = i128::from(stop.value(i)) - i128::from(start.value(i));
            Some(if span != 0 && (span > 0) != (step_us > 0) { 0 } else { (span / step_us + 1).min(i128::from(u64::MAX)) as u64 })
        })
        .collect())
}

/// Refuses any row's series longer than [`MAX_LIST_SERIES`].
fn check(a: &[ArrayRef], n: usize) -> DfResult<()> {
    for len in lengths(a, n)?.into_iter().flatten() {
        if len > MAX_LIST_SERIES {
            return Err(user_error(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "generate_series in a select list would produce {len} rows from one call, more than {MAX_LIST_SERIES}; generate_series in FROM produces any number (it streams)"
                ),
            ));
        }
    }
    Ok(())
}

/// A DataFusion function whose arguments `check` sees first: it refuses a call whose result
/// would be too large before the function builds it.
/// A check of a call's arguments (and the batch's row count) before the call.
pub(crate) type ArgumentCheck = fn(&[ColumnarValue], usize) -> DfResult<()>;

#[derive(Debug)]
pub(crate) struct Bounded {
    pub(crate) inner: Arc<ScalarUDF>,
    pub(crate) check: ArgumentCheck,
}

// One function has one check: the wrapped function tells them apart.
impl PartialEq for Bounded {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl Eq for Bounded {}

impl std::hash::Hash for Bounded {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.hash(state);
    }
}

impl ScalarUDFImpl for Bounded {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(args)
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.inner.return_field_from_args(args)
    }
    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(args)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        (self.check)(&args.args, args.number_rows)?;
        self.inner.invoke_with_args(args)
    }
}

/// [`check`] of a series function's arguments.
fn check_series(args: &[ColumnarValue], n: usize) -> DfResult<()> {
    let arrays = args.iter().map(|a| a.to_array(n)).collect::<DfResult<Vec<ArrayRef>>>()?;
    if arrays.is_empty() {
        return Ok(());
    }
    check(&arrays, n)
}

/// Replaces the list-valued `generate_series` and `range` on `ctx` with bounded ones.
pub fn install(ctx: &SessionContext) {
    let state = ctx.state();
    let functions = state.scalar_functions();
    for name in ["generate_series", "range"] {
        if let Some(inner) = functions.get(name) {
            ctx.register_udf(ScalarUDF::new_from_impl(Bounded { inner: inner.clone(), check: check_series }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;

    #[test]
    fn long_series_are_refused_before_they_are_built() {
        let ints = |v: i64| -> ArrayRef { Arc::new(Int64Array::from(vec![v])) };
        assert!(check(&[ints(1), ints(1000)], 1).is_ok());
        let e = check(&[ints(1), ints(2_147_483_647)], 1).unwrap_err().to_string();
        assert!(e.contains("2147483647 rows"), "{e}");
        assert!(check(&[ints(1), ints(2_147_483_647), ints(1000)], 1).is_ok());
        // DataFusion's one-argument form, 0 to n.
        assert!(check(&[ints(2_147_483_647)], 1).is_err());
        assert!(check(&[ints(1000)], 1).is_ok());
    }
}
