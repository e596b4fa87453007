//! The output value of each aggregate call from its accumulator.

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::DataType;
use datafusion::scalar::ScalarValue;
use eddy_common::error::sqlstate;
use eddy_common::percentile::ordered_set_result;
use eddy_common::{internal_err, user_err, Result};

use super::input::{distinct_sum, float_total};
use super::{Acc, AggKind, BitOp, HashAgg, RegrFn};

impl HashAgg {
    /// The output value of call `i` for `group`.
    pub(super) fn output_value(&self, i: usize, acc: &Acc) -> Result<ScalarValue> {
        let call = &self.calls[i];
        let null = || ScalarValue::try_from(&call.output).unwrap_or(ScalarValue::Null);
        let v = match (&call.kind, acc) {
            (AggKind::CountStar | AggKind::Count, Acc::Count(c)) => ScalarValue::Int64(Some(*c)),
            (AggKind::CountDistinct, Acc::Values(m)) => ScalarValue::Int64(Some(m.len() as i64)),
            (_, Acc::SumInt { n: 0, .. } | Acc::SumFloat { n: 0, .. }) => null(),
            (AggKind::Sum | AggKind::Avg, Acc::SumInterval(sums)) => ScalarValue::IntervalMonthDayNano(sums.value(call.kind == AggKind::Avg)?),
            (AggKind::Sum, &Acc::SumFloat { sum, nan, pos_inf, neg_inf, .. }) => ScalarValue::Float64(Some(float_total(sum.value(), nan, pos_inf, neg_inf))),
            (AggKind::Avg, &Acc::SumFloat { sum, n, nan, pos_inf, neg_inf }) => {
                ScalarValue::Float64(Some(float_total(sum.value(), nan, pos_inf, neg_inf) / n as f64))
            }
            (AggKind::Sum, Acc::SumInt { sum, .. }) => match &self.arg_types[i] {
                Some(DataType::Decimal128(_, s)) => ScalarValue::Decimal128(Some(*sum), 38, *s),
                _ => {
                    let v = i64::try_from(*sum)
                        .map_err(|_| user_err!(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "sum out of range for bigint"))?;
                    ScalarValue::Int64(Some(v))
                }
            },
            (AggKind::Avg, Acc::SumInt { sum, n }) => match (&self.arg_types[i], &call.output) {
                (Some(DataType::Decimal128(_, s_in)), DataType::Decimal128(p_out, s_out)) => {
                    let shift = u32::try_from(i32::from(*s_out) - i32::from(*s_in)).unwrap_or(0);
                    let scaled = sum.checked_mul(10i128.pow(shift)).ok_or_else(|| internal_err!("avg overflow"))?;
                    ScalarValue::Decimal128(Some(scaled / i128::from(*n)), *p_out, *s_out)
                }
                _ => ScalarValue::Float64(Some(*sum as f64 / *n as f64)),
            },
            (AggKind::Variance { sample, sqrt }, &Acc::Moments { n, sum, sumsq, .. }) => {
                let denominator = if *sample { n - 1 } else { n };
                if denominator <= 0 {
                    null()
                } else {
                    // In double-double: the centred sum of squares is a small difference of
                    // large sums when the values are far from the group's first one.
                    let (sum, sumsq) = (sum.total(), sumsq.total());
                    let centred = sumsq.sub(sum.mul(sum).div(n as f64)).value();
                    let var = (centred / denominator as f64).max(0.0);
                    ScalarValue::Float64(Some(if *sqrt { var.sqrt() } else { var }))
                }
            }
            (AggKind::Regr(RegrFn::Count), Acc::CoMoments(m)) => ScalarValue::Int64(Some(m.n)),
            (AggKind::Regr(f), Acc::CoMoments(m)) => ScalarValue::Float64(m.value(*f)),
            (AggKind::Bit(op), Acc::Bits { n, ones }) => {
                if *n == 0 {
                    null()
                } else {
                    let mut v = 0u64;
                    for (bit, c) in ones.iter().enumerate() {
                        let set = match op {
                            BitOp::And => c == n,
                            BitOp::Or => *c > 0,
                            BitOp::Xor => c % 2 != 0,
                        };
                        if set {
                            v |= 1 << bit;
                        }
                    }
                    ScalarValue::Int64(Some(v as i64))
                }
            }
            (AggKind::SumDistinct { avg }, Acc::Values(m)) => {
                if m.is_empty() {
                    return Ok(null());
                }
                let conv = self.value_converters[i].as_ref().ok_or_else(|| internal_err!("missing value converter"))?;
                let parser = conv.parser();
                let arr = eddy_common::codec::decode_rows(conv, m.keys().map(|k| parser.parse(k)))?.pop().ok_or_else(|| internal_err!("empty value row"))?;
                distinct_sum(&arr, *avg, m.len(), &call.output)?
            }
            (AggKind::BoolAnd, Acc::Bools { trues, falses }) => {
                if trues + falses == 0 { null() } else { ScalarValue::Boolean(Some(*falses == 0)) }
            }
            (AggKind::BoolOr, Acc::Bools { trues, falses }) => {
                if trues + falses == 0 { null() } else { ScalarValue::Boolean(Some(*trues > 0)) }
            }
            (
                AggKind::Min
                | AggKind::Max
                | AggKind::StringAgg { .. }
                | AggKind::ArrayAgg { .. }
                | AggKind::Percentile { .. }
                | AggKind::FirstValue
                | AggKind::LastValue,
                Acc::Values(m),
            ) => {
                let conv = self.value_converters[i].as_ref().ok_or_else(|| internal_err!("missing value converter"))?;
                let picked: Vec<(&Vec<u8>, i64)> = match call.kind {
                    AggKind::Min | AggKind::FirstValue => m.iter().next().map(|(k, _)| (k, 1)).into_iter().collect(),
                    AggKind::Max | AggKind::LastValue => m.iter().next_back().map(|(k, _)| (k, 1)).into_iter().collect(),
                    AggKind::StringAgg { distinct: true, .. } | AggKind::ArrayAgg { distinct: true } => m.keys().map(|k| (k, 1)).collect(),
                    _ => m.iter().map(|(k, c)| (k, *c)).collect(),
                };
                if picked.is_empty() && !matches!(call.kind, AggKind::Percentile { .. }) {
                    return Ok(null());
                }
                let parser = conv.parser();
                // The value is the last column (first/last rows start with their order keys).
                let arr = eddy_common::codec::decode_rows(conv, picked.iter().map(|(k, _)| parser.parse(k)))?.pop().ok_or_else(|| internal_err!("empty value row"))?;
                // Each value as often as it occurs.
                let all_values = || -> Result<ArrayRef> {
                    let take: Vec<u32> = picked.iter().enumerate().flat_map(|(j, (_, c))| std::iter::repeat_n(j as u32, *c as usize)).collect();
                    Ok(arrow::compute::take(&arr, &arrow::array::UInt32Array::from(take), None)?)
                };
                match &call.kind {
                    AggKind::ArrayAgg { .. } => {
                        let list = datafusion::common::utils::SingleRowListArrayBuilder::new(all_values()?).with_nullable(true).build_list_array();
                        ScalarValue::List(Arc::new(list))
                    }
                    AggKind::Percentile { kind, fractions } => ordered_set_result(*kind, fractions, &all_values()?, &call.output)?,
                    AggKind::StringAgg { sep, .. } => {
                        let arr = arrow::compute::cast(&arr, &DataType::Utf8)?;
                        let s = arr.as_any().downcast_ref::<arrow::array::StringArray>().ok_or_else(|| internal_err!("string_agg input"))?;
                        let mut out = String::new();
                        let mut first = true;
                        for (j, (_, count)) in picked.iter().enumerate() {
                            for _ in 0..*count {
                                if !first {
                                    out.push_str(sep);
                                }
                                first = false;
                                out.push_str(s.value(j));
                            }
                        }
                        ScalarValue::Utf8(Some(out))
                    }
                    _ => ScalarValue::try_from_array(&arr, 0)?,
                }
            }
            (k, a) => return Err(internal_err!("aggregate {k:?} has state {a:?}")),
        };
        if v.data_type() == call.output || v.is_null() && matches!(v, ScalarValue::Null) {
            Ok(v)
        } else {
            Ok(v.cast_to(&call.output)?)
        }
    }
}
