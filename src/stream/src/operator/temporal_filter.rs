//! `TemporalFilter`: `WHERE ts > now() - INTERVAL '1' HOUR` in a view (RisingWave's and
//! Materialize's temporal filters). Rows appear and expire as time passes.
//!
//! Each temporal conjunct compares an expression of the row with `now() + k`; together they
//! give every row an interval of times at which it is visible, `[start, end)` in microseconds
//! (`e > now() + k`: end `e - k`; `e >= now() + k`: end `e - k + 1`; `e < now() + k`: start
//! `e - k + 1`; `e <= now() + k`: start `e - k`; a NULL `e` is never visible). Visibility is a
//! function of the row and `now`, so the input's changes need no lookups: a change passes when
//! its row is visible at the operator's current `now`.
//!
//! `now` is the wall clock read at each barrier (never going back, and committed with the
//! epoch so a restart continues from it); the changes of an epoch are judged at the `now` of
//! the barrier before them. Rows whose visibility changes later are kept in the state table,
//! ordered by the time of their next change (`start` while pending, `end` while visible), so a
//! barrier reads only the rows due by its `now`: it inserts rows whose `start` came and
//! deletes rows whose `end` did. Entries written by epochs that have not committed yet are kept
//! in memory and merged over the committed snapshot.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type, SchemaRef, TimeUnit};
use arrow::row::RowConverter;
use async_trait::async_trait;
use datafusion::physical_expr::PhysicalExpr;
use eddy_common::codec::table_prefix;
use eddy_common::{internal_err, Epoch, Op, Result, StreamChunk};
use eddy_storage::{EpochBatch, ReadSnapshot, StateStore};

use super::eval::{evaluate, RowErrors};
use super::Operator;

/// How one conjunct bounds the times a row is visible.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeBound {
    /// `e > now() + k`: visible while `now < e - k`.
    Before,
    /// `e >= now() + k`: visible while `now <= e - k`.
    BeforeOrAt,
    /// `e < now() + k`: visible once `now > e - k`.
    After,
    /// `e <= now() + k`: visible once `now >= e - k`.
    AtOrAfter,
}

/// One temporal conjunct: `expr` (of the row, a timestamp) compared with `now() + shift_us`.
pub struct TemporalBound {
    pub expr: Arc<dyn PhysicalExpr>,
    pub shift_us: i64,
    pub bound: TimeBound,
}

/// Key space of the operator's table: vnode 0 holds the rows by next change, vnode 1 `now`.
const EVENTS: [u8; 2] = [0, 0];
const NOW: [u8; 2] = [0, 1];

/// A filter on the current time (see the module docs).
pub struct TemporalFilter {
    table_id: u32,
    bounds: Vec<TemporalBound>,
    /// Input (= output) schema.
    schema: SchemaRef,
    /// Encodes whole rows (the state keys' second part).
    rows: RowConverter,
    /// The time changes are judged at (microseconds since the epoch, UTC).
    now: i64,
    /// State entries written in the current epoch (`None`: deleted).
    current: BTreeMap<Vec<u8>, Option<()>>,
    /// State entries written by epochs not yet committed, with their epoch.
    recent: BTreeMap<Vec<u8>, (Epoch, Option<()>)>,
    /// The store (for the rows that come due).
    store: Option<Arc<StateStore>>,
    /// `now` has been written to the state table (a restore must find the time its state is
    /// as of).
    saved: bool,
}

impl fmt::Display for TemporalFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b: Vec<String> = self.bounds.iter().map(|b| format!("{} {:?} now()+{}us", b.expr, b.bound, b.shift_us)).collect();
        write!(f, "TemporalFilter [{}] state_table={}", b.join(" AND "), self.table_id)
    }
}

fn wall_clock_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// Order-preserving bytes of a signed time.
fn time_bytes(t: i64) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

fn time_of(bytes: &[u8]) -> Option<i64> {
    Some((u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?) ^ (1 << 63)) as i64)
}

impl TemporalFilter {
    /// A temporal filter over rows of `schema`.
    pub fn try_new(table_id: u32, bounds: Vec<TemporalBound>, schema: SchemaRef) -> Result<Self> {
        let rows = super::row_converter(&schema)?;
        Ok(Self { table_id, bounds, schema, rows, now: wall_clock_us(), current: BTreeMap::new(), recent: BTreeMap::new(), store: None, saved: false })
    }

    fn key_prefix(&self, space: [u8; 2]) -> Vec<u8> {
        let mut k = table_prefix(self.table_id).to_vec();
        k.extend_from_slice(&space);
        k
    }

    fn event_key(&self, t: i64, row: &[u8]) -> Vec<u8> {
        let mut k = self.key_prefix(EVENTS);
        k.extend_from_slice(&time_bytes(t));
        k.extend_from_slice(row);
        k
    }

    /// Recovery: continues from the committed `now` (the state is as of that time; the next
    /// barrier advances it to the wall clock and applies what came due meanwhile).
    pub async fn restore(&mut self, snapshot: Option<&ReadSnapshot>) -> Result<()> {
        if let Some(s) = snapshot {
            if let Some(v) = s.get(&self.key_prefix(NOW)).await? {
                let t = i64::from_be_bytes(v.as_ref().try_into().map_err(|_| internal_err!("corrupt temporal filter time"))?);
                self.now = t;
                self.saved = true;
            }
        }
        Ok(())
    }

    /// Each row's visible interval `[start, end)` (`None`: never visible).
    fn intervals(&self, batch: &RecordBatch) -> Result<Vec<Option<(i64, i64)>>> {
        let n = batch.num_rows();
        let mut out = vec![Some((i64::MIN, i64::MAX)); n];
        for b in &self.bounds {
            let v = b.expr.evaluate(batch)?.into_array(n)?;
            let v = match v.data_type() {
                DataType::Timestamp(TimeUnit::Microsecond, _) => v,
                DataType::Timestamp(_, tz) => arrow::compute::cast(&v, &DataType::Timestamp(TimeUnit::Microsecond, tz.clone()))?,
                _ => arrow::compute::cast(&v, &DataType::Timestamp(TimeUnit::Microsecond, None))?,
            };
            let v = arrow::compute::cast(&v, &DataType::Int64)?;
            let v = v.as_primitive::<Int64Type>();
            for (i, slot) in out.iter_mut().enumerate() {
                let Some((start, end)) = slot.as_mut() else { continue };
                if v.is_null(i) {
                    *slot = None;
                    continue;
                }
                let t = v.value(i).saturating_sub(b.shift_us);
                match b.bound {
                    TimeBound::Before => *end = (*end).min(t),
                    TimeBound::BeforeOrAt => *end = (*end).min(t.saturating_add(1)),
                    TimeBound::After => *start = (*start).max(t.saturating_add(1)),
                    TimeBound::AtOrAfter => *start = (*start).max(t),
                }
                if *start >= *end {
                    *slot = None;
                }
            }
        }
        Ok(out)
    }

    fn write(&mut self, key: Vec<u8>, value: Option<()>) {
        self.current.insert(key, value);
    }

    /// The rows due by `now` (next change at or before it): committed entries merged with the
    /// uncommitted ones, as (event time, encoded row).
    async fn due(&self, now: i64) -> Result<Vec<(i64, Vec<u8>)>> {
        let prefix = self.key_prefix(EVENTS);
        let start = prefix.clone();
        let mut end = prefix.clone();
        end.extend_from_slice(&time_bytes(now.saturating_add(1)));
        let mut found: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
        if let Some(store) = &self.store {
            let snapshot = store.snapshot();
            let mut cursor = snapshot.scan_batches(Bound::Included(start.clone()), Bound::Excluded(end.clone()), 4096).await?;
            while let Some(entries) = cursor.next_batch().await? {
                for (k, _) in entries {
                    found.insert(k.to_vec(), true);
                }
            }
        }
        let range = (Bound::Included(start), Bound::Excluded(end));
        for (k, (_, v)) in self.recent.range::<Vec<u8>, _>(range.clone()) {
            found.insert(k.clone(), v.is_some());
        }
        for (k, v) in self.current.range::<Vec<u8>, _>(range) {
            found.insert(k.clone(), v.is_some());
        }
        let mut out = Vec::new();
        for (k, live) in found {
            if !live {
                continue;
            }
            let t = time_of(&k[prefix.len()..]).ok_or_else(|| internal_err!("corrupt temporal filter key"))?;
            out.push((t, k[prefix.len() + 8..].to_vec()));
        }
        Ok(out)
    }
}

#[async_trait]
impl Operator for TemporalFilter {
    fn process(&mut self, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        let exprs: Vec<Arc<dyn PhysicalExpr>> = self.bounds.iter().map(|b| b.expr.clone()).collect();
        // Rows whose time expression fails are counted as errors and left out.
        let (chunk, _) = evaluate(&exprs, chunk, errors)?;
        let intervals = self.intervals(&chunk.batch)?;
        let encoded = self.rows.convert_columns(chunk.batch.columns())?;
        let now = self.now;
        let mut keep = Vec::with_capacity(chunk.len());
        for (i, interval) in intervals.iter().enumerate() {
            let insert = chunk.ops[i].is_insert();
            let visible = interval.is_some_and(|(s, e)| s <= now && now < e);
            keep.push(visible);
            // The next change of the row's visibility, if it is still to come.
            let next = match interval {
                Some((s, _)) if *s > now => Some(*s),
                Some((_, e)) if *e > now && *e != i64::MAX => Some(*e),
                _ => None,
            };
            if let Some(t) = next {
                let key = self.event_key(t, encoded.row(i).as_ref());
                self.write(key, insert.then_some(()));
            }
        }
        Ok(vec![chunk.filter_plain(&arrow::array::BooleanArray::from(keep))?])
    }

    async fn on_barrier(&mut self, epoch: Epoch, batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        if let Some(store) = &self.store {
            let committed = store.committed_epoch();
            self.recent.retain(|_, (e, _)| *e > committed);
        }
        let before = self.now;
        let now = before.max(wall_clock_us());
        let due = self.due(now).await?;
        let mut out_rows: Vec<(Op, Vec<u8>)> = Vec::new();
        if !due.is_empty() {
            let parser = self.rows.parser();
            let columns = eddy_common::codec::decode_rows(&self.rows, due.iter().map(|(_, r)| parser.parse(r)))?;
            let rows = RecordBatch::try_new(self.schema.clone(), columns)?;
            let intervals = self.intervals(&rows)?;
            for ((t, row), interval) in due.into_iter().zip(intervals) {
                let key = self.event_key(t, &row);
                self.write(key, None);
                let Some((start, end)) = interval else { continue };
                if start <= before {
                    // It was visible; its end came.
                    out_rows.push((Op::Delete, row));
                } else if end > now {
                    // Its start came.
                    if end != i64::MAX {
                        let key = self.event_key(end, &row);
                        self.write(key, Some(()));
                    }
                    out_rows.push((Op::Insert, row));
                }
            }
        }
        self.now = now;
        if now != before || !self.saved {
            batch.put(self.key_prefix(NOW), now.to_be_bytes().to_vec());
            self.saved = true;
        }
        for (k, v) in std::mem::take(&mut self.current) {
            match v {
                Some(()) => batch.put(k.clone(), Vec::new()),
                None => batch.delete(k.clone()),
            }
            self.recent.insert(k, (epoch, v));
        }
        super::chunk_of_rows(&self.rows, &self.schema, out_rows)
    }

    fn attach_store(&mut self, store: &Arc<StateStore>) {
        self.store = Some(store.clone());
    }
}
