//! Event-time watermarks (docs/architecture.md, "Watermarks").
//!
//! A relation declared `WATERMARK FOR ts AS ts - INTERVAL '5' SECOND` (an append-only table or
//! a source) has a [`WatermarkGen`] in the actor that produces its rows (the table's actor, or
//! the source reader of a view). It admits rows one by one in arrival order: a row is *late*,
//! and dropped (counted, never stored or passed on), when its `ts` is NULL or below the
//! watermark `max(ts of the rows admitted before it) - delay`. The verdict depends only on the
//! rows before it, never on how they were cut into chunks or epochs, so a replay after a crash
//! admits exactly the same rows. The generator's state (largest `ts`, late rows) commits with
//! the epoch's other writes.
//!
//! Before each barrier the producer sends its current watermark downstream as
//! `Message::Watermark`: a promise that no later row has a smaller `ts`. A view maps
//! it through its operators once per epoch ((`Operator::on_watermarks` in the operator module)):
//! filters keep it, projections carry it to columns that are monotone in it (`window_start` of a
//! TUMBLE or HOP), a union keeps the minimum over its inputs, and an aggregation grouped by
//! such a column closes the groups below it (dropping their state, or emitting them once under
//! `EMIT ON WINDOW CLOSE`).

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Int64Type, TimeUnit};
use datafusion::scalar::ScalarValue;
use eddy_common::{internal_err, Result};

/// A promise about a stream: no row after it has a smaller value in column `col`.
#[derive(Debug, Clone, PartialEq)]
pub struct Watermark {
    /// Column index in the stream's rows.
    pub col: usize,
    /// The bound.
    pub value: ScalarValue,
}

impl Watermark {
    /// The smaller of two watermarks of the same column (`None` if they cannot be compared).
    pub fn min(a: &Watermark, b: &Watermark) -> Option<Watermark> {
        match a.value.partial_cmp(&b.value)? {
            std::cmp::Ordering::Greater => Some(b.clone()),
            _ => Some(a.clone()),
        }
    }
}

/// Records `w` among an input's latest watermarks `known` (a watermark only advances).
pub fn advance(known: &mut Vec<Watermark>, w: Watermark) {
    match known.iter_mut().find(|k| k.col == w.col) {
        Some(k) => {
            if w.value.partial_cmp(&k.value) == Some(std::cmp::Ordering::Greater) {
                *k = w;
            }
        }
        None => known.push(w),
    }
}

/// For each column, the minimum over `inputs` of their watermarks on it; a column missing
/// from any input has none (a union's output is only as far as its slowest input).
pub fn min_common(inputs: &[Vec<Watermark>]) -> Vec<Watermark> {
    let Some((first, rest)) = inputs.split_first() else { return vec![] };
    first
        .iter()
        .filter_map(|w| {
            rest.iter().try_fold(w.clone(), |acc, other| other.iter().find(|o| o.col == w.col).and_then(|o| Watermark::min(&acc, o)))
        })
        .collect()
}

/// The microseconds since the epoch of a timestamp column (with or without time zone).
pub fn timestamp_micros(column: &ArrayRef) -> Result<Int64Array> {
    let micros = match column.data_type() {
        DataType::Timestamp(TimeUnit::Microsecond, _) => arrow::compute::cast(column, &DataType::Int64)?,
        DataType::Timestamp(_, tz) => {
            let us = arrow::compute::cast(column, &DataType::Timestamp(TimeUnit::Microsecond, tz.clone()))?;
            arrow::compute::cast(&us, &DataType::Int64)?
        }
        other => return Err(internal_err!("event-time column has type {other}")),
    };
    Ok(micros.as_primitive::<Int64Type>().clone())
}

/// Generates a relation's watermark from its rows (see the module docs).
#[derive(Debug, Clone)]
pub struct WatermarkGen {
    /// The event-time column (index in the relation's rows).
    col: usize,
    /// Its type (a timestamp, with or without time zone).
    data_type: DataType,
    /// `ts - watermark`, in microseconds.
    delay_us: i64,
    /// The largest event time admitted so far (microseconds).
    max: Option<i64>,
    /// Rows dropped as late.
    late: u64,
    /// Changed since the state was last written.
    dirty: bool,
}

impl WatermarkGen {
    /// A generator for column `col` of type `data_type`, resuming from `state` (as
    /// [`WatermarkGen::encode_state`] wrote it) if there is one.
    pub fn try_new(col: usize, data_type: DataType, delay_us: i64, state: Option<&[u8]>) -> Result<Self> {
        if !matches!(data_type, DataType::Timestamp(_, _)) {
            return Err(internal_err!("watermark column has type {data_type}"));
        }
        let (max, late) = match state {
            None => (None, 0),
            Some(s) => {
                let bad = || internal_err!("corrupt watermark state ({} bytes)", s.len());
                let (flag, rest) = s.split_first().ok_or_else(bad)?;
                let max = i64::from_be_bytes(rest.get(..8).ok_or_else(bad)?.try_into().map_err(|_| bad())?);
                let late = u64::from_be_bytes(rest.get(8..16).ok_or_else(bad)?.try_into().map_err(|_| bad())?);
                ((*flag == 1).then_some(max), late)
            }
        };
        Ok(Self { col, data_type, delay_us, max, late, dirty: false })
    }

    /// `flag (1: has max) | max (i64 BE) | late (u64 BE)`.
    pub fn encode_state(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(17);
        out.push(u8::from(self.max.is_some()));
        out.extend_from_slice(&self.max.unwrap_or(0).to_be_bytes());
        out.extend_from_slice(&self.late.to_be_bytes());
        out
    }

    /// Takes whether the state changed since the last call (then it must be written).
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Rows dropped as late so far.
    pub fn late_rows(&self) -> u64 {
        self.late
    }

    /// The current watermark in microseconds, once a row was admitted.
    pub fn watermark_us(&self) -> Option<i64> {
        self.max.map(|m| m.saturating_sub(self.delay_us))
    }

    /// The current watermark, as sent downstream.
    pub fn current(&self) -> Option<Watermark> {
        let v = self.watermark_us()?;
        let value = match &self.data_type {
            DataType::Timestamp(_, tz) => ScalarValue::TimestampMicrosecond(Some(v), tz.clone()),
            _ => return None,
        };
        Some(Watermark { col: self.col, value })
    }

    /// Admits the rows of `batch` in order: returns those that are not late.
    pub fn admit(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let ts = timestamp_micros(batch.column(self.col))?;
        let mut keep = Vec::with_capacity(ts.len());
        let mut max = self.max;
        let mut late = 0u64;
        for i in 0..ts.len() {
            let ok = ts.is_valid(i) && {
                let t = ts.value(i);
                let ok = max.is_none_or(|m| t >= m.saturating_sub(self.delay_us));
                if ok && max.is_none_or(|m| t > m) {
                    max = Some(t);
                }
                ok
            };
            late += u64::from(!ok);
            keep.push(ok);
        }
        if max != self.max || late > 0 {
            self.dirty = true;
        }
        self.max = max;
        self.late += late;
        if late == 0 {
            return Ok(batch);
        }
        Ok(arrow::compute::filter_record_batch(&batch, &BooleanArray::from(keep))?)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, TimestampMicrosecondArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    fn batch(ts: &[Option<i64>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            Field::new("n", DataType::Int64, false),
        ]));
        let n: Vec<i64> = (0..ts.len() as i64).collect();
        RecordBatch::try_new(schema, vec![Arc::new(TimestampMicrosecondArray::from(ts.to_vec())), Arc::new(Int64Array::from(n))]).unwrap()
    }

    fn kept(b: &RecordBatch) -> Vec<i64> {
        b.column(1).as_primitive::<Int64Type>().values().to_vec()
    }

    #[test]
    fn rows_behind_the_running_watermark_are_dropped_whatever_the_chunking() {
        let ts = [Some(100), Some(95), Some(200), Some(94), None, Some(150), Some(196), Some(300)];
        let mut whole = WatermarkGen::try_new(0, DataType::Timestamp(TimeUnit::Microsecond, None), 5, None).unwrap();
        let all = whole.admit(batch(&ts)).unwrap();
        // 94 is behind 100 - 5, NULL has no time, 150 is behind 200 - 5; 196 is not.
        assert_eq!(kept(&all), vec![0, 1, 2, 6, 7]);
        assert_eq!(whole.late_rows(), 3);
        assert_eq!(whole.watermark_us(), Some(295));
        // One row at a time, through the encoded state: the same verdicts.
        let mut state: Option<Vec<u8>> = None;
        let mut verdicts = Vec::new();
        for t in ts {
            let mut g = WatermarkGen::try_new(0, DataType::Timestamp(TimeUnit::Microsecond, None), 5, state.as_deref()).unwrap();
            verdicts.push(g.admit(batch(&[t])).unwrap().num_rows() == 1);
            state = Some(g.encode_state());
        }
        assert_eq!(verdicts, vec![true, true, true, false, false, false, true, true]);
        let g = WatermarkGen::try_new(0, DataType::Timestamp(TimeUnit::Microsecond, None), 5, state.as_deref()).unwrap();
        assert_eq!(g.late_rows(), 3);
        assert_eq!(g.current().unwrap().value, ScalarValue::TimestampMicrosecond(Some(295), None));
    }

    #[test]
    fn a_union_is_as_far_as_its_slowest_input() {
        let w = |col, v| Watermark { col, value: ScalarValue::Int64(Some(v)) };
        assert_eq!(min_common(&[vec![w(0, 5), w(1, 9)], vec![w(0, 3)]]), vec![w(0, 3)]);
        assert_eq!(min_common(&[vec![w(0, 5)], vec![]]), vec![]);
    }
}
