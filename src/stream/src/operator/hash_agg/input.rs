//! A call's argument decoded once per chunk ([`ArgInput`]) and folded into a group's
//! accumulator row by row, and the totals computed from accumulators.

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::DataType;
use arrow::row::RowConverter;
use datafusion::scalar::ScalarValue;
use eddy_common::error::sqlstate;
use eddy_common::{internal_err, user_err, Result};

use super::{Acc, AggKind, DdSum, Fsum};

/// One call's argument for one chunk, decoded for fast per-row accumulation.
pub(super) enum ArgInput {
    /// `count(*)`: no argument.
    Star,
    /// Integers and decimals (unscaled), widened to i128.
    Int(ArrayRef),
    /// Floats, as f64.
    Float(arrow::array::Float64Array),
    /// `(y, x)` pairs as f64 (two-variable statistics).
    Pair(arrow::array::Float64Array, arrow::array::Float64Array),
    /// Booleans.
    Bool(arrow::array::BooleanArray),
    /// Intervals.
    Interval(arrow::array::IntervalMonthDayNanoArray),
    /// Encoded values for multiset accumulators, with the input's null mask.
    Encoded(arrow::row::Rows, ArrayRef),
    /// Anything else only needs its null mask (`count(x)`).
    Any(ArrayRef),
    /// Rows of (ORDER BY values..., x) for ordered calls, with `x` when rows whose `x` is NULL
    /// are left out (`string_agg`; `first_value`, `last_value` and `array_agg` keep them).
    Ordered(arrow::row::Rows, Option<ArrayRef>),
}

impl ArgInput {
    pub(super) fn decode(kind: &AggKind, arr: ArrayRef, conv: Option<&RowConverter>, ty: Option<&DataType>) -> Result<Self> {
        use arrow::array::AsArray;
        Ok(match (kind, conv) {
            (_, Some(c)) => ArgInput::Encoded(c.convert_columns(std::slice::from_ref(&arr))?, arr),
            (AggKind::Regr(_), None) => {
                let pair = arr.as_struct_opt().filter(|s| s.num_columns() == 2).ok_or_else(|| internal_err!("a two-variable aggregate's argument is not a (y, x) pair"))?;
                let f = |i: usize| -> Result<arrow::array::Float64Array> {
                    Ok(arrow::compute::cast(pair.column(i), &DataType::Float64)?.as_primitive::<arrow::datatypes::Float64Type>().clone())
                };
                ArgInput::Pair(f(0)?, f(1)?)
            }
            (AggKind::Variance { .. }, None) => {
                ArgInput::Float(arrow::compute::cast(&arr, &DataType::Float64)?.as_primitive::<arrow::datatypes::Float64Type>().clone())
            }
            (AggKind::Sum | AggKind::Avg, None) => match ty {
                Some(DataType::Interval(_)) => ArgInput::Interval(
                    arrow::compute::cast(&arr, &DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano))?
                        .as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>()
                        .clone(),
                ),
                Some(DataType::Float16 | DataType::Float32 | DataType::Float64) => {
                    ArgInput::Float(arrow::compute::cast(&arr, &DataType::Float64)?.as_primitive::<arrow::datatypes::Float64Type>().clone())
                }
                Some(DataType::Decimal128(_, _)) => ArgInput::Int(arr),
                _ => ArgInput::Int(arrow::compute::cast(&arr, &DataType::Int64)?),
            },
            (AggKind::BoolAnd | AggKind::BoolOr, None) => ArgInput::Bool(arr.as_boolean().clone()),
            (AggKind::Bit(_), None) => ArgInput::Int(arrow::compute::cast(&arr, &DataType::Int64)?),
            _ => ArgInput::Any(arr),
        })
    }

    pub(super) fn apply(&self, acc: &mut Acc, row: usize, sign: i64) -> Result<()> {
        use arrow::array::AsArray;
        use arrow::datatypes::{Decimal128Type, Int64Type};
        match (self, acc) {
            (ArgInput::Star, Acc::Count(c)) => *c += sign,
            (ArgInput::Any(a), Acc::Count(c)) | (ArgInput::Int(a), Acc::Count(c)) => {
                if a.is_valid(row) {
                    *c += sign;
                }
            }
            (ArgInput::Int(a), Acc::SumInt { sum, n }) => {
                if a.is_valid(row) {
                    let x = match a.data_type() {
                        DataType::Decimal128(_, _) => a.as_primitive::<Decimal128Type>().value(row),
                        _ => i128::from(a.as_primitive::<Int64Type>().value(row)),
                    };
                    *sum += i128::from(sign) * x;
                    *n += sign;
                }
            }
            (ArgInput::Float(a), Acc::SumFloat { sum, n, nan, pos_inf, neg_inf }) => {
                if a.is_valid(row) {
                    let x = a.value(row);
                    if *n == 0 {
                        // Start afresh: no rounding residue of retracted rows is carried on.
                        *sum = Fsum::default();
                    }
                    if x.is_nan() {
                        *nan += sign;
                    } else if x == f64::INFINITY {
                        *pos_inf += sign;
                    } else if x == f64::NEG_INFINITY {
                        *neg_inf += sign;
                    } else {
                        sum.add(sign as f64 * x);
                    }
                    *n += sign;
                }
            }
            (ArgInput::Float(a), Acc::Moments { n, shift, sum, sumsq }) => {
                if a.is_valid(row) {
                    let x = a.value(row);
                    if shift.is_nan() || *n == 0 {
                        (*shift, *sum, *sumsq) = (x, DdSum::default(), DdSum::default());
                    }
                    // Exact difference and square (double-double): retracting a value far
                    // from the others leaves their sums as if it had never been added.
                    let d = Fsum::diff(x, *shift);
                    sum.add(d, sign as f64);
                    sumsq.add(d.mul(d), sign as f64);
                    *n += sign;
                }
            }
            (ArgInput::Pair(ys, xs), Acc::CoMoments(m)) => {
                if ys.is_valid(row) && xs.is_valid(row) {
                    m.add(xs.value(row), ys.value(row), sign);
                }
            }
            (ArgInput::Int(a), Acc::Bits { n, ones }) => {
                if a.is_valid(row) {
                    let x = a.as_primitive::<Int64Type>().value(row) as u64;
                    for (bit, c) in ones.iter_mut().enumerate() {
                        if x & (1 << bit) != 0 {
                            *c += sign;
                        }
                    }
                    *n += sign;
                }
            }
            (ArgInput::Interval(a), Acc::SumInterval(sums)) => {
                if a.is_valid(row) {
                    sums.add(a.value(row), sign);
                }
            }
            (ArgInput::Bool(a), Acc::Bools { trues, falses }) => {
                if a.is_valid(row) {
                    if a.value(row) {
                        *trues += sign;
                    } else {
                        *falses += sign;
                    }
                }
            }
            (ArgInput::Encoded(rows, a), Acc::Values(m)) => {
                if a.is_valid(row) {
                    m.add(rows.row(row).as_ref(), sign);
                }
            }
            (ArgInput::Ordered(rows, skip_nulls), Acc::Values(m)) => {
                if skip_nulls.as_ref().is_some_and(|x| x.is_null(row)) {
                    return Ok(());
                }
                m.add(rows.row(row).as_ref(), sign);
            }
            (ArgInput::Encoded(_, a), Acc::Count(c)) => {
                if a.is_valid(row) {
                    *c += sign;
                }
            }
            (_, acc) => return Err(internal_err!("aggregate input does not fit accumulator {acc:?}")),
        }
        Ok(())
    }
}

/// `sum` (or `avg`) of the distinct values `arr` (`n` of them): exact for integers and
/// decimals (as a 38-digit decimal), IEEE for floats. A decimal `avg` is computed at the scale
/// of `output` and truncated, as the batch engine computes it; the caller casts to `output`.
pub(super) fn distinct_sum(arr: &ArrayRef, avg: bool, n: usize, output: &DataType) -> Result<ScalarValue> {
    use arrow::array::AsArray;
    match arr.data_type() {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let f = arrow::compute::cast(arr, &DataType::Float64)?;
            let total: f64 = f.as_primitive::<arrow::datatypes::Float64Type>().iter().flatten().sum();
            Ok(ScalarValue::Float64(Some(if avg { total / n as f64 } else { total })))
        }
        dt => {
            let scale = match dt {
                DataType::Decimal128(_, s) => *s,
                _ => 0,
            };
            let d = arrow::compute::cast(arr, &DataType::Decimal128(38, scale))?;
            let mut total: i128 = 0;
            for v in d.as_primitive::<arrow::datatypes::Decimal128Type>().iter().flatten() {
                total = total.checked_add(v).ok_or_else(|| user_err!(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "sum out of range"))?;
            }
            if !avg {
                return Ok(ScalarValue::Decimal128(Some(total), 38, scale));
            }
            match output {
                DataType::Decimal128(p, s_out) if *s_out >= scale => {
                    let shift = 10i128.checked_pow((*s_out - scale) as u32).ok_or_else(|| internal_err!("avg scale"))?;
                    let scaled = total.checked_mul(shift).ok_or_else(|| user_err!(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "avg out of range"))?;
                    Ok(ScalarValue::Decimal128(Some(scaled / n as i128), *p, *s_out))
                }
                _ => Ok(ScalarValue::Float64(Some(total as f64 / 10f64.powi(i32::from(scale)) / n as f64))),
            }
        }
    }
}

/// A float sum from its finite part and its counts of NaN, +Infinity and -Infinity (IEEE:
/// any NaN, or both infinities, make NaN).
pub(super) fn float_total(sum: f64, nan: i64, pos_inf: i64, neg_inf: i64) -> f64 {
    if nan > 0 || (pos_inf > 0 && neg_inf > 0) {
        f64::NAN
    } else if pos_inf > 0 {
        f64::INFINITY
    } else if neg_inf > 0 {
        f64::NEG_INFINITY
    } else {
        sum
    }
}
