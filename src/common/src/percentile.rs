//! PostgreSQL's ordered-set aggregates by position, shared by the query engine and views:
//! which of a group's `n` sorted non-null values `percentile_cont(p)`, `percentile_disc(p)` and
//! `mode()` pick, computed exactly as PostgreSQL computes them (so both sides agree with it to
//! the last bit).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::DataType;
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::scalar::ScalarValue;

use crate::error::sqlstate;
use crate::{user_err, Result};


/// Checks a fraction as PostgreSQL does: between 0 and 1.
pub fn check_fraction(p: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(user_err!(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "percentile value {p} is not between 0 and 1"))
    }
}

/// `percentile_cont(p)` over `n > 0` values: the (0-based) rows to interpolate between and the
/// weight of the second.
pub fn cont_rows(p: f64, n: usize) -> (usize, usize, f64) {
    let at = p * (n - 1) as f64;
    let (lo, hi) = (at.floor(), at.ceil());
    (lo as usize, hi as usize, at - lo)
}

/// PostgreSQL's `float8_lerp`.
pub fn lerp(lo: f64, hi: f64, weight: f64) -> f64 {
    lo + weight * (hi - lo)
}

/// `percentile_disc(p)` over `n > 0` values: the first row whose cumulative share reaches `p`.
pub fn disc_row(p: f64, n: usize) -> usize {
    ((p * n as f64).ceil() as usize).clamp(1, n) - 1
}

/// Which ordered-set aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrderedSet {
    /// `percentile_cont`: interpolated, over `double precision`.
    Cont,
    /// `percentile_disc`: the first value at or past the fraction, of the input's type.
    Disc,
    /// `mode()`: the most frequent value (ties: the first in the order).
    Mode,
}

impl OrderedSet {
    pub fn name(self) -> &'static str {
        match self {
            OrderedSet::Cont => "percentile_cont",
            OrderedSet::Disc => "percentile_disc",
            OrderedSet::Mode => "mode",
        }
    }

    /// The kind called `name`, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        [OrderedSet::Cont, OrderedSet::Disc, OrderedSet::Mode].into_iter().find(|k| k.name() == name)
    }
}

/// The direct argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Fractions {
    /// `mode()`.
    None,
    /// `percentile_x(p)`; `None` for a NULL `p` (the result is NULL).
    One(Option<f64>),
    /// `percentile_x(ARRAY[p, ...])`: one result per element (NULL for a NULL element).
    Many(Option<Vec<Option<f64>>>),
}

impl Fractions {
    /// Reads a constant direct argument, checking each fraction.
    pub fn from_scalar(v: &ScalarValue) -> Result<Self> {
        let check = |v: &ScalarValue| -> Result<Option<f64>> {
            if v.is_null() {
                return Ok(None);
            }
            match v.cast_to(&DataType::Float64)? {
                ScalarValue::Float64(Some(p)) => Ok(Some(check_fraction(p)?)),
                _ => Ok(None),
            }
        };
        Ok(match v {
            ScalarValue::List(l) if l.is_null(0) => Fractions::Many(None),
            ScalarValue::List(l) => {
                let items = l.value(0);
                let items = (0..items.len()).map(|i| check(&ScalarValue::try_from_array(&items, i)?)).collect::<Result<_>>()?;
                Fractions::Many(Some(items))
            }
            other => Fractions::One(check(other)?),
        })
    }
}

/// The result of `kind` over `sorted` (the group's non-null values in the call's order),
/// as a value of `output`.
pub fn ordered_set_result(kind: OrderedSet, fractions: &Fractions, sorted: &ArrayRef, output: &DataType) -> Result<ScalarValue> {
    let value_type = match output {
        DataType::List(f) => f.data_type().clone(),
        t => t.clone(),
    };
    if sorted.is_empty() {
        return Ok(ScalarValue::try_from(output)?);
    }
    let n = sorted.len();
    let pick = |p: Option<f64>| -> Result<ScalarValue> {
        let Some(p) = p else { return Ok(ScalarValue::try_from(&value_type)?) };
        let v = match kind {
            OrderedSet::Disc => ScalarValue::try_from_array(sorted, disc_row(p, n))?,
            OrderedSet::Cont => {
                let (lo, hi, w) = cont_rows(p, n);
                let at = |i: usize| -> Result<f64> {
                    match ScalarValue::try_from_array(sorted, i)?.cast_to(&DataType::Float64)? {
                        ScalarValue::Float64(Some(x)) => Ok(x),
                        _ => Ok(f64::NAN),
                    }
                };
                let lo_v = at(lo)?;
                ScalarValue::Float64(Some(if hi > lo { lerp(lo_v, at(hi)?, w) } else { lo_v }))
            }
            // mode() takes no fraction; given one, it is still the mode.
            OrderedSet::Mode => mode(sorted)?,
        };
        Ok(if v.data_type() == value_type { v } else { v.cast_to(&value_type)? })
    };
    match fractions {
        Fractions::None => mode(sorted),
        Fractions::One(p) => pick(*p),
        Fractions::Many(None) => Ok(ScalarValue::try_from(output)?),
        Fractions::Many(Some(ps)) => {
            let values = ps.iter().map(|p| pick(*p)).collect::<Result<Vec<_>>>()?;
            let array = if values.is_empty() { arrow::array::new_empty_array(&value_type) } else { ScalarValue::iter_to_array(values)? };
            Ok(ScalarValue::List(Arc::new(SingleRowListArrayBuilder::new(array).with_nullable(true).build_list_array())))
        }
    }
}

/// The most frequent of `sorted`'s (non-empty) values, the first in order among equals.
fn mode(sorted: &ArrayRef) -> Result<ScalarValue> {
    let conv = arrow::row::RowConverter::new(vec![arrow::row::SortField::new(sorted.data_type().clone())])?;
    let rows = conv.convert_columns(std::slice::from_ref(sorted))?;
    let (mut best, mut best_n, mut start) = (0, 0, 0);
    for i in 1..=rows.num_rows() {
        if i == rows.num_rows() || rows.row(i) != rows.row(start) {
            if i - start > best_n {
                (best, best_n) = (start, i - start);
            }
            start = i;
        }
    }
    Ok(ScalarValue::try_from_array(sorted, best)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_match_postgres() {
        // SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY x) FROM generate_series(1, 10) x → 9.1
        let values: Vec<f64> = (1..=10).map(f64::from).collect();
        let (lo, hi, w) = cont_rows(0.9, 10);
        assert_eq!(lerp(values[lo], values[hi], w), 9.1);
        assert_eq!(cont_rows(0.5, 4), (1, 2, 0.5));
        assert_eq!(disc_row(0.5, 4), 1);
        assert_eq!(disc_row(0.0, 4), 0);
        assert_eq!(disc_row(1.0, 4), 3);
        assert!(check_fraction(1.5).is_err());
        assert!(check_fraction(f64::NAN).is_err());
    }
}
