//! Numeric division as PostgreSQL computes it (and products too wide for DataFusion's decimals,
//! [`numeric_mul_udf`]): to at least 16 significant digits (and no fewer
//! decimals than either operand shows), rounded half away from zero. DataFusion's decimal
//! division truncated at a scale fixed by the types (`sum(x) / sum(y)` of two `numeric(38, 4)`
//! sums kept 8 decimals, so a share of 0.0927534962... read 0.09275349).
//!
//! PostgreSQL picks the result's scale per row from the operands (`select_div_scale`); a column
//! has one scale, so the quotient is rounded to PostgreSQL's scale for its row and stored with
//! [`QUOTIENT_SCALE`] decimals in a type whose text drops the zeros past PostgreSQL's last
//! digit (`eddy_common::types::QUOTIENT_NUMERIC`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array};
use arrow::datatypes::{i256, DataType, Decimal128Type};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarUDF, Signature, Volatility};
use eddy_common::error::sqlstate;
use eddy_common::types::DEFAULT_NUMERIC;

use super::udf::{closure_udf, columnar, user_error};

/// Decimals of a numeric quotient.
pub const QUOTIENT_SCALE: i8 = eddy_common::types::QUOTIENT_NUMERIC.1;
/// The quotient's type, which prints with PostgreSQL's decimals for its magnitude.
pub const QUOTIENT: DataType = DataType::Decimal128(eddy_common::types::QUOTIENT_NUMERIC.0, QUOTIENT_SCALE);

/// Weight (power of 10000) and first base-10000 digit of `v` at `scale`, as PostgreSQL's
/// numeric stores it; `None` for zero.
fn weight_and_first_digit(v: i128, scale: i32) -> Option<(i32, i128)> {
    let mut m = v.unsigned_abs();
    if m == 0 {
        return None;
    }
    let digits = m.ilog10() as i32 + 1;
    // Power of ten of the leading digit, and its base-10000 group.
    let lead = digits - 1 - scale;
    let weight = lead.div_euclid(4);
    // The first group: the value divided by 10000^weight, as an integer.
    let shift = scale + 4 * weight;
    if shift >= 0 {
        m /= 10u128.pow(shift as u32);
    } else {
        m *= 10u128.pow((-shift) as u32);
    }
    Some((weight, m as i128))
}

/// The decimals a value at `scale` needs: its scale without its trailing zeros.
pub(crate) fn min_scale(v: i128, scale: i8) -> i32 {
    let (mut v, mut s) = (v, i32::from(scale.max(0)));
    while s > 0 && v % 10 == 0 {
        v /= 10;
        s -= 1;
    }
    s
}

/// The decimals PostgreSQL shows of a numeric of type `numeric(p, scale)`: an unconstrained
/// numeric shows those its value needs (Eddy stores it at a fixed scale).
pub(crate) fn display_scale(v: i128, p: u8, scale: i8) -> i32 {
    if (p, scale) == DEFAULT_NUMERIC {
        min_scale(v, scale)
    } else {
        i32::from(scale.max(0))
    }
}

/// `v * 10^e`, or numeric overflow.
fn shifted(v: i256, e: u32) -> DfResult<i256> {
    pow10(e).and_then(|p| v.checked_mul(p)).ok_or_else(out_of_range)
}

fn pow10(n: u32) -> Option<i256> {
    i256::from_i128(10).checked_pow(n)
}

fn out_of_range() -> datafusion::error::DataFusionError {
    user_error(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow".into())
}

/// `num / den` rounded half away from zero.
fn div_round(num: i256, den: i256) -> DfResult<i256> {
    let q = num.checked_div(den).ok_or_else(out_of_range)?;
    let r = num.checked_rem(den).ok_or_else(out_of_range)?;
    let twice = r.wrapping_abs().checked_mul(i256::from_i128(2)).ok_or_else(out_of_range)?;
    if twice >= den.wrapping_abs() {
        q.checked_add(num.signum() * den.signum()).ok_or_else(out_of_range)
    } else {
        Ok(q)
    }
}

/// `a / b` (values at scales `sa`, `sb`; `da`, `db` their display scales) at
/// [`QUOTIENT_SCALE`], rounded to PostgreSQL's scale for these operands.
fn divide(a: i128, sa: i32, da: i32, b: i128, sb: i32, db: i32) -> DfResult<i128> {
    let Some(rscale) = div_scale(i256::from_i128(a), sa, da, i256::from_i128(b), sb, db)? else { return Ok(0) };
    quotient_at(a, sa, b, sb, rscale)
}

/// PostgreSQL's `select_div_scale` for `a / b` (at scales `sa`, `sb`, display scales `da`,
/// `db`), capped at [`QUOTIENT_SCALE`]; `None` when `a` is zero.
fn div_scale(a: i256, sa: i32, da: i32, b: i256, sb: i32, db: i32) -> DfResult<Option<i32>> {
    let narrow = |v: i256| v.to_i128().ok_or_else(out_of_range);
    let (wb, fb) = weight_and_first_digit(narrow(b)?, sb).ok_or_else(|| user_error(sqlstate::DIVISION_BY_ZERO, "division by zero".into()))?;
    let Some((wa, fa)) = weight_and_first_digit(narrow(a)?, sa) else { return Ok(None) };
    let qweight = wa - wb - i32::from(fa <= fb);
    Ok(Some((16 - 4 * qweight).max(da).max(db).clamp(0, i32::from(QUOTIENT_SCALE))))
}

/// `a / b` rounded half away from zero at `rscale` decimals, stored at [`QUOTIENT_SCALE`].
fn quotient_at(a: i128, sa: i32, b: i128, sb: i32, rscale: i32) -> DfResult<i128> {
    // q = a * 10^(rscale + sb - sa) / b, rounded half away from zero.
    let e = rscale + sb - sa;
    let (mut num, mut den) = (i256::from_i128(a), i256::from_i128(b));
    if e >= 0 {
        num = shifted(num, e as u32)?;
    } else {
        den = shifted(den, (-e) as u32)?;
    }
    let q = div_round(num, den)?;
    let scaled = shifted(q, (i32::from(QUOTIENT_SCALE) - rscale) as u32)?;
    let v = scaled.to_i128().ok_or_else(out_of_range)?;
    if v.unsigned_abs() >= 10u128.pow(u32::from(eddy_common::types::QUOTIENT_NUMERIC.0)) {
        return Err(out_of_range());
    }
    Ok(v)
}

/// `eddy_numeric_div(a, b)` of two decimals (the analyzer rule rewrites `/` of numerics).
pub fn numeric_div_udf() -> Arc<ScalarUDF> {
    let f = |args: &[ArrayRef], n: usize| -> DfResult<ArrayRef> {
        let (a, b) = (&args[0], &args[1]);
        let decimal = |x: &ArrayRef| -> DfResult<(ArrayRef, u8, i8)> {
            Ok(match x.data_type() {
                DataType::Decimal128(p, s) => (x.clone(), *p, *s),
                _ => (arrow::compute::cast(x, &DataType::Decimal128(38, 0))?, 38, 0),
            })
        };
        let ((a, pa, sa), (b, pb, sb)) = (decimal(a)?, decimal(b)?);
        let (a, b) = (a.as_primitive::<Decimal128Type>(), b.as_primitive::<Decimal128Type>());
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            if a.is_null(i) || b.is_null(i) {
                out.push(None);
                continue;
            }
            let (x, y) = (a.value(i), b.value(i));
            out.push(Some(divide(x, i32::from(sa), display_scale(x, pa, sa), y, i32::from(sb), display_scale(y, pb, sb))?));
        }
        Ok(Arc::new(Decimal128Array::from(out).with_precision_and_scale(eddy_common::types::QUOTIENT_NUMERIC.0, QUOTIENT_SCALE)?) as ArrayRef)
    };
    let body = move |args: &[ColumnarValue], rows: usize| columnar(args, rows, f);
    Arc::new(closure_udf("eddy_numeric_div", Signature::any(2, Volatility::Immutable), QUOTIENT, Arc::new(body)))
}

/// The type of a numeric variance, and of a numeric standard deviation.
pub const VARIANCE: DataType = DataType::Decimal128(eddy_common::types::VARIANCE_NUMERIC.0, eddy_common::types::VARIANCE_NUMERIC.1);
pub const STDDEV: DataType = DataType::Decimal128(eddy_common::types::ROOT_QUOTIENT_NUMERIC.0, eddy_common::types::ROOT_QUOTIENT_NUMERIC.1);

/// The integer square root of `n >= 0` (Newton's method from a power of two above it).
fn isqrt(n: i256) -> i256 {
    if n <= i256::ZERO {
        return i256::ZERO;
    }
    let bits = 256 - n.leading_zeros();
    let two = i256::from_i128(2);
    let mut x = two.wrapping_pow(bits.div_ceil(2));
    loop {
        let y = x.wrapping_add(n.wrapping_div(x)).wrapping_div(two);
        if y >= x {
            return x;
        }
        x = y;
    }
}

/// `eddy_numeric_var_samp/var_pop/stddev_samp/stddev_pop(count, sum, sum_of_squares)`: a
/// variance (or its square root) of integers or numerics from the three sums, as PostgreSQL's
/// `numeric_stddev_internal` computes it: `(n * sumsq - sum^2) / (n * (n - 1))` (or `n * n`)
/// at the scale `select_div_scale` picks for those operands, 0 when that numerator is not
/// positive, and the square root at the same scale. The sums are exact, so a view's
/// retractions leave no error behind.
pub fn numeric_variance_udf(sample: bool, root: bool) -> Arc<ScalarUDF> {
    let f = move |args: &[ArrayRef], n: usize| -> DfResult<ArrayRef> {
        let count = arrow::compute::cast(&args[0], &DataType::Int64)?;
        let count = count.as_primitive::<arrow::datatypes::Int64Type>();
        let scale = |x: &ArrayRef| match x.data_type() {
            DataType::Decimal128(_, s) => i32::from(*s),
            _ => 0,
        };
        let (s, sq) = (scale(&args[1]), scale(&args[2]));
        let sum = arrow::compute::cast(&args[1], &DataType::Decimal128(38, s as i8))?;
        let sumsq = arrow::compute::cast(&args[2], &DataType::Decimal128(38, sq as i8))?;
        let (sum, sumsq) = (sum.as_primitive::<Decimal128Type>(), sumsq.as_primitive::<Decimal128Type>());
        let wide = |v: i128| i256::from_i128(v);
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let k = if count.is_null(i) { 0 } else { count.value(i) };
            if k == 0 || (sample && k == 1) || sum.is_null(i) || sumsq.is_null(i) {
                out.push(None);
                continue;
            }
            // n * sumsq - sum^2, at scale 2s (sumsq brought to it).
            let nsq = shifted(wide(sumsq.value(i)), (2 * s - sq).max(0) as u32)?.checked_mul(wide(i128::from(k))).ok_or_else(out_of_range)?;
            let num = nsq.checked_sub(wide(sum.value(i)).checked_mul(wide(sum.value(i))).ok_or_else(out_of_range)?).ok_or_else(out_of_range)?;
            if num <= i256::ZERO {
                out.push(Some(0));
                continue;
            }
            let den = i128::from(k) * i128::from(if sample { k - 1 } else { k });
            let rscale = div_scale(num, 2 * s, 2 * s, wide(den), 0, 0)?.unwrap_or(0);
            // The variance at rscale decimals, rounded half away from zero.
            let var = div_round(shifted(num, (rscale - 2 * s).max(0) as u32)?, wide(den))?;
            let value = if root {
                // sqrt(var / 10^r) * 10^r = sqrt(var * 10^r), one more digit for rounding.
                let r = isqrt(shifted(var, rscale as u32 + 2)?);
                r.wrapping_add(i256::from_i128(5)).wrapping_div(i256::from_i128(10))
            } else {
                var
            };
            let scaled = shifted(value, (i32::from(QUOTIENT_SCALE) - rscale) as u32)?;
            out.push(Some(scaled.to_i128().filter(|v| v.unsigned_abs() < 10u128.pow(35)).ok_or_else(out_of_range)?));
        }
        let (p, sc) = if root { eddy_common::types::ROOT_QUOTIENT_NUMERIC } else { eddy_common::types::VARIANCE_NUMERIC };
        Ok(Arc::new(Decimal128Array::from(out).with_precision_and_scale(p, sc)?) as ArrayRef)
    };
    let name = match (sample, root) {
        (true, false) => "eddy_numeric_var_samp",
        (false, false) => "eddy_numeric_var_pop",
        (true, true) => "eddy_numeric_stddev_samp",
        (false, true) => "eddy_numeric_stddev_pop",
    };
    let body = move |args: &[ColumnarValue], rows: usize| columnar(args, rows, f);
    Arc::new(closure_udf(name, Signature::any(3, Volatility::Immutable), if root { STDDEV } else { VARIANCE }, Arc::new(body)))
}

/// `trunc(x, n)` of a decimal at `scale` to `n` decimals (`n` below `scale`; a negative `n`
/// zeroes integer digits), typed with `max(n, 0)` decimals as PostgreSQL's result is
/// (DataFusion's `trunc` of a numeric was a double).
pub fn numeric_trunc_udf(precision: u8, scale: i8, n: i32) -> ScalarUDF {
    let to = n.max(0) as i8;
    let out_precision = (i32::from(precision) - i32::from(scale) + i32::from(to)).clamp(1, 38) as u8;
    let f = move |args: &[ArrayRef], rows: usize| -> DfResult<ArrayRef> {
        let x = args[0].as_primitive::<Decimal128Type>();
        let cut = 10i128.checked_pow((i32::from(scale) - n) as u32).ok_or_else(out_of_range)?;
        let back = 10i128.pow((i32::from(to) - n) as u32);
        let out: Decimal128Array = (0..rows).map(|i| x.is_valid(i).then(|| x.value(i) / cut * back)).collect();
        Ok(Arc::new(out.with_precision_and_scale(out_precision, to)?) as ArrayRef)
    };
    let body = move |args: &[ColumnarValue], rows: usize| columnar(args, rows, f);
    // Called with `n` as a second argument, so calls with different `n` differ.
    closure_udf("eddy_numeric_trunc", Signature::any(2, Volatility::Immutable), DataType::Decimal128(out_precision, to), Arc::new(body))
}

/// Type of a product too wide for DataFusion's decimal multiply.
pub const WIDE_PRODUCT: DataType = DataType::Decimal128(38, QUOTIENT_SCALE);

/// `eddy_numeric_mul(a, b)` of two decimals whose scales add past 38 (a quotient times a
/// quotient), which DataFusion refuses: the exact product rounded half away from zero to
/// [`QUOTIENT_SCALE`] decimals (PostgreSQL keeps all of them).
pub fn numeric_mul_udf() -> Arc<ScalarUDF> {
    let f = |args: &[ArrayRef], n: usize| -> DfResult<ArrayRef> {
        let (a, b) = (&args[0], &args[1]);
        let scale_of = |x: &ArrayRef| match x.data_type() {
            DataType::Decimal128(_, s) => i32::from(*s),
            _ => 0,
        };
        let (sa, sb) = (scale_of(a), scale_of(b));
        let (a, b) = (arrow::compute::cast(a, &DataType::Decimal128(38, sa as i8))?, arrow::compute::cast(b, &DataType::Decimal128(38, sb as i8))?);
        let (a, b) = (a.as_primitive::<Decimal128Type>(), b.as_primitive::<Decimal128Type>());
        let drop = (sa + sb - i32::from(QUOTIENT_SCALE)).max(0) as u32;
        let unit = pow10(drop).ok_or_else(out_of_range)?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            if a.is_null(i) || b.is_null(i) {
                out.push(None);
                continue;
            }
            let p = i256::from_i128(a.value(i)).checked_mul(i256::from_i128(b.value(i))).ok_or_else(out_of_range)?;
            let v = div_round(p, unit)?.to_i128().filter(|v| v.unsigned_abs() < 10u128.pow(38)).ok_or_else(out_of_range)?;
            out.push(Some(v));
        }
        Ok(Arc::new(Decimal128Array::from(out).with_precision_and_scale(38, QUOTIENT_SCALE)?) as ArrayRef)
    };
    let body = move |args: &[ColumnarValue], rows: usize| columnar(args, rows, f);
    Arc::new(closure_udf("eddy_numeric_mul", Signature::any(2, Volatility::Immutable), WIDE_PRODUCT, Arc::new(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_scale_counts_significant_decimals() {
        assert_eq!(min_scale(12300, 4), 2);
        assert_eq!(min_scale(1000, 3), 0);
        assert_eq!(min_scale(-15, 1), 1);
    }

    #[test]
    fn quotients_have_postgresql_digits() {
        // PostgreSQL 15: 1.5/1.2 = 1.25000000000000000000, 10::numeric/4 = 2.5000000000000000,
        // 100.00/7 = 14.2857142857142857, -7::numeric/3 = -2.3333333333333333,
        // 0.000001/3 = 0.000000333333333333333333 (past our 20 decimals).
        assert_eq!(divide(15, 1, 1, 12, 1, 1).unwrap(), 125_000_000_000_000_000_000);
        assert_eq!(divide(10, 0, 0, 4, 0, 0).unwrap(), 250_000_000_000_000_000_000);
        assert_eq!(divide(10000, 2, 2, 7, 0, 0).unwrap(), 1_428_571_428_571_428_570_000);
        assert_eq!(divide(-7, 0, 0, 3, 0, 0).unwrap(), -233_333_333_333_333_330_000);
        assert_eq!(divide(1, 6, 6, 3, 0, 0).unwrap(), 33_333_333_333_333);
        assert_eq!(divide(2, 0, 0, 3, 0, 0).unwrap(), 66_666_666_666_666_666_667);
        assert!(divide(1, 0, 0, 0, 0, 0).is_err());
    }

    #[test]
    fn integer_square_roots_are_floors() {
        for n in [0i128, 1, 2, 3, 4, 15, 16, 17, 10_i128.pow(30), 10_i128.pow(30) - 1, i128::MAX] {
            let r = isqrt(i256::from_i128(n)).to_i128().unwrap();
            assert!(r * r <= n && (r + 1).checked_mul(r + 1).is_none_or(|x| x > n), "{n}");
        }
    }
}
