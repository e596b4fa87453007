//! `EowcBuffer`: `EMIT ON WINDOW CLOSE` of an append-only query without an aggregation
//! (RisingWave's `SELECT tm, foo FROM t EMIT ON WINDOW CLOSE`): each row is held until the
//! watermark of its event-time column passes it, then emitted once. The view only ever shows
//! rows the watermark has passed.
//!
//! State: the held rows, one entry each (key: the table, the encoded event time's length and
//! bytes, the encoded row; value: the row's count), written at each barrier and deleted when
//! the row is emitted; a restore reads them all back (they are at most one watermark delay's
//! worth of input).

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use async_trait::async_trait;
use eddy_common::codec::table_prefix;
use eddy_common::{internal_err, Epoch, Op, Result, StreamChunk};
use eddy_storage::{EpochBatch, ReadSnapshot};

use super::eval::RowErrors;
use super::Operator;
use crate::watermark::Watermark;

/// Holds rows until the watermark passes them (see the module docs).
pub struct EowcBuffer {
    table_id: u32,
    /// The event-time column.
    col: usize,
    schema: SchemaRef,
    /// Encodes whole rows.
    rows: RowConverter,
    /// Encodes the event time (order-preserving).
    times: RowConverter,
    /// Held rows by (encoded time, encoded row), with their counts.
    held: BTreeMap<(Vec<u8>, Vec<u8>), i64>,
    /// Rows held since the last barrier (not yet written).
    fresh: HashSet<(Vec<u8>, Vec<u8>)>,
    /// The latest watermark of `col`, encoded.
    watermark: Option<Vec<u8>>,
}

impl EowcBuffer {
    /// A buffer of rows of `schema` by column `col`, keeping its state in table `table_id`.
    pub fn try_new(table_id: u32, col: usize, schema: SchemaRef) -> Result<Self> {
        let rows = super::row_converter(&schema)?;
        let times = RowConverter::new(vec![SortField::new(schema.field(col).data_type().clone())])?;
        Ok(Self { table_id, col, schema, rows, times, held: BTreeMap::new(), fresh: HashSet::new(), watermark: None })
    }

    fn key(&self, time: &[u8], row: &[u8]) -> Vec<u8> {
        let mut k = table_prefix(self.table_id).to_vec();
        k.extend_from_slice(&[0, 0]);
        k.extend_from_slice(&u32::try_from(time.len()).unwrap_or(u32::MAX).to_be_bytes());
        k.extend_from_slice(time);
        k.extend_from_slice(row);
        k
    }

    /// Recovery: the held rows.
    pub async fn restore(&mut self, snapshot: Option<&ReadSnapshot>) -> Result<()> {
        let Some(snapshot) = snapshot else { return Ok(()) };
        let prefix = table_prefix(self.table_id);
        let bad = || internal_err!("malformed EMIT ON WINDOW CLOSE buffer entry");
        for (k, v) in snapshot.scan_prefix(&prefix).await? {
            let body = k.get(6..).ok_or_else(bad)?;
            let (len, body) = body.split_first_chunk::<4>().ok_or_else(bad)?;
            let len = u32::from_be_bytes(*len) as usize;
            let (time, row) = (body.get(..len).ok_or_else(bad)?, body.get(len..).ok_or_else(bad)?);
            let count = i64::from_be_bytes(v.as_ref().try_into().map_err(|_| bad())?);
            self.held.insert((time.to_vec(), row.to_vec()), count);
        }
        Ok(())
    }
}

impl fmt::Display for EowcBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EowcBuffer time=#{} state_table={}", self.col, self.table_id)
    }
}

#[async_trait]
impl Operator for EowcBuffer {
    fn process(&mut self, chunk: StreamChunk, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        if chunk.ops.iter().any(|op| !op.is_insert()) {
            return Err(internal_err!("EMIT ON WINDOW CLOSE buffer got a retraction from an append-only input"));
        }
        let rows = self.rows.convert_columns(chunk.batch.columns())?;
        let times = self.times.convert_columns(&[chunk.batch.column(self.col).clone()])?;
        for i in 0..chunk.len() {
            let key = (times.row(i).as_ref().to_vec(), rows.row(i).as_ref().to_vec());
            *self.held.entry(key.clone()).or_insert(0) += 1;
            self.fresh.insert(key);
        }
        Ok(vec![])
    }

    fn on_watermarks(&mut self, input: &[Watermark]) -> Result<Vec<Watermark>> {
        let Some(w) = input.iter().find(|w| w.col == self.col) else { return Ok(vec![]) };
        let t = self.schema.field(self.col).data_type();
        let v = w.value.to_array_of_size(1)?;
        let v = if v.data_type() == t { v } else { arrow::compute::cast(&v, t)? };
        let encoded = self.times.convert_columns(&[v])?.row(0).as_ref().to_vec();
        if self.watermark.as_ref().is_none_or(|old| encoded > *old) {
            self.watermark = Some(encoded);
        }
        Ok(vec![w.clone()])
    }

    async fn on_barrier(&mut self, _epoch: Epoch, batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        // Rows below the watermark are final: out they go, in time order.
        let closed = match &self.watermark {
            Some(w) => {
                let rest = self.held.split_off(&(w.clone(), Vec::new()));
                std::mem::replace(&mut self.held, rest)
            }
            None => BTreeMap::new(),
        };
        let fresh = std::mem::take(&mut self.fresh);
        for key in &fresh {
            if let Some(count) = self.held.get(key) {
                batch.put(self.key(&key.0, &key.1), count.to_be_bytes().to_vec());
            }
        }
        if closed.is_empty() {
            return Ok(vec![]);
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        for (key, count) in closed {
            if !fresh.contains(&key) {
                batch.delete(self.key(&key.0, &key.1));
            }
            out.extend(std::iter::repeat_n(key.1, usize::try_from(count).unwrap_or(0)));
        }
        let parser = self.rows.parser();
        let columns = eddy_common::codec::decode_rows(&self.rows, out.iter().map(|r| parser.parse(r)))?;
        let chunk = StreamChunk::try_new(RecordBatch::try_new(self.schema.clone(), columns)?, vec![Op::Insert; out.len()])?;
        Ok(vec![chunk])
    }
}
