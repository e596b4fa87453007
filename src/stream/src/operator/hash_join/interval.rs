//! Interval joins: an inner join whose condition bounds one side's event time by the other's
//! (`a.ts BETWEEN b.ts - INTERVAL '1' HOUR AND b.ts`) lets go of the rows no later row can
//! match, and keeps a watermark on both time columns.
//!
//! A bound `other.t2 <= this.t1 + offset` holds for every matching pair. Once the other side's
//! watermark on `t2` passes `t1 + offset`, no row still to come on the other side matches a row
//! of this side with that `t1`, so the row leaves the state (its matches were emitted when
//! they arrived). A side whose rows may be retracted keeps them until its own watermark passes
//! them too: a retraction is never behind its side's watermark. Rows are found through an
//! in-memory index of their buckets by millisecond of `t1`, rebuilt by one scan after a
//! restore.
//!
//! The output keeps watermarks: every later pair has `this.t1 >= other.t2 - offset`, so its
//! `t1` is at least the smaller of this side's watermark and the other side's minus `offset`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::Array;
use arrow::datatypes::{DataType, TimeUnit};
use datafusion::scalar::ScalarValue;
use eddy_common::{internal_err, Result, StreamChunk};
use eddy_storage::{ReadSnapshot, StateStore};

use super::bucket::{bucket_prefix, idx, matchable, parse_entry_key};
use super::{HashJoin, JoinKind, JoinSpec, Side, SideState};
use crate::watermark::{timestamp_micros, Watermark};

/// A bound an inner join's condition puts on its matches: in every matching pair, the other
/// side's `other_col` is at most this side's `col` plus `offset_us` (timestamp columns, each
/// with a watermark on its side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalBound {
    pub side: Side,
    /// Columns of each side's rows.
    pub col: usize,
    pub other_col: usize,
    pub offset_us: i64,
    /// `col` in the join's output (the pair layout).
    pub out_col: usize,
    /// `side` may retract rows (it is not append-only).
    pub retracts: bool,
}

/// Rows of a side are indexed by the millisecond of their time.
const GRANULE_US: i64 = 1_000;

/// State cleanup of an interval join (see the module docs).
pub(super) struct IntervalCleanup {
    /// All bounds (each keeps an output watermark).
    all: Vec<IntervalBound>,
    /// The bound each side's rows leave by (the first of that side's).
    by_side: [Option<IntervalBound>; 2],
    /// Each side's latest watermarks (µs), by column.
    watermarks: [HashMap<usize, i64>; 2],
    /// Per side: the buckets holding rows, by the granule of the rows' bound column.
    index: [BTreeMap<i64, HashSet<Vec<u8>>>; 2],
    /// `index` knows every row in the state table (after a restore, one scan fills it).
    pub(super) complete: bool,
    /// The store, for evicted buckets and the scan after a restore.
    pub(super) store: Option<Arc<StateStore>>,
}

impl IntervalCleanup {
    /// The cleanup of `spec`'s join, if it is an inner join with bounds.
    pub(super) fn new(spec: &JoinSpec) -> Option<Self> {
        if spec.kind != JoinKind::Inner || spec.null_aware || spec.interval_bounds.is_empty() {
            return None;
        }
        let first = |s: Side| spec.interval_bounds.iter().find(|b| b.side == s).copied();
        Some(Self {
            all: spec.interval_bounds.clone(),
            by_side: [first(Side::Left), first(Side::Right)],
            watermarks: [HashMap::new(), HashMap::new()],
            index: [BTreeMap::new(), BTreeMap::new()],
            complete: true,
            store: None,
        })
    }

    /// Takes in both sides' watermarks; returns the output watermarks the bounds keep.
    pub(super) fn advance(&mut self, left: &[Watermark], right: &[Watermark], sides: [&SideState; 2]) -> Result<Vec<Watermark>> {
        for (i, ws) in [left, right].into_iter().enumerate() {
            for w in ws {
                if let Some(us) = scalar_micros(&w.value) {
                    let e = self.watermarks[i].entry(w.col).or_insert(us);
                    *e = (*e).max(us);
                }
            }
        }
        let mut out = Vec::new();
        for b in &self.all {
            let (this, other) = (idx(b.side), idx(b.side.other()));
            let (Some(&own), Some(&theirs)) = (self.watermarks[this].get(&b.col), self.watermarks[other].get(&b.other_col)) else {
                continue;
            };
            let us = own.min(theirs.saturating_sub(b.offset_us));
            let data_type = sides[this].schema.field(b.col).data_type();
            let DataType::Timestamp(_, tz) = data_type else { continue };
            let value = ScalarValue::TimestampMicrosecond(Some(us), tz.clone()).cast_to(data_type)?;
            out.push(Watermark { col: b.out_col, value });
        }
        Ok(out)
    }

    /// The time below which `side`'s rows can leave the state, once both watermarks are known.
    fn cutoff(&self, side: Side) -> Option<i64> {
        let b = self.by_side[idx(side)]?;
        let theirs = self.watermarks[idx(side.other())].get(&b.other_col)?.saturating_sub(b.offset_us);
        if !b.retracts {
            return Some(theirs);
        }
        Some(theirs.min(*self.watermarks[idx(side)].get(&b.col)?))
    }

    /// Indexes the buckets `chunk`'s inserted rows (of `side`) go to.
    pub(super) fn record(&mut self, side: Side, chunk: &StreamChunk, buckets: &[Vec<u8>]) -> Result<()> {
        let Some(b) = self.by_side[idx(side)] else { return Ok(()) };
        let ts = timestamp_micros(chunk.batch.column(b.col))?;
        let index = &mut self.index[idx(side)];
        for (i, bucket) in buckets.iter().enumerate() {
            if chunk.ops[i].is_insert() && ts.is_valid(i) && matchable(bucket) {
                let set = index.entry(ts.value(i).div_euclid(GRANULE_US)).or_default();
                if !set.contains(bucket) {
                    set.insert(bucket.clone());
                }
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for IntervalCleanup {
    /// `expires=[right.2 < left.0 + 3600000000us, ...]`: the rows each side lets go of.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |s: Side| if s == Side::Left { "left" } else { "right" };
        let parts: Vec<String> = self
            .by_side
            .iter()
            .flatten()
            .map(|b| format!("{}.{} after {}.{} - {}us", name(b.side), b.col, name(b.side.other()), b.other_col, b.offset_us))
            .collect();
        write!(f, "expires=[{}]", parts.join(", "))
    }
}

/// The microseconds of a timestamp value.
fn scalar_micros(v: &ScalarValue) -> Option<i64> {
    let us = v.cast_to(&DataType::Timestamp(TimeUnit::Microsecond, None)).ok()?;
    match us {
        ScalarValue::TimestampMicrosecond(v, _) => v,
        _ => None,
    }
}

impl HashJoin {
    /// Removes the rows below each side's cutoff from the state (see the module docs); their
    /// deletes are written with the epoch's other changes.
    pub(super) async fn expire_intervals(&mut self) -> Result<()> {
        let Some(c) = self.intervals.as_ref() else { return Ok(()) };
        let cutoffs = [c.cutoff(Side::Left), c.cutoff(Side::Right)];
        if cutoffs.iter().all(Option::is_none) {
            return Ok(());
        }
        let store = c.store.clone().ok_or_else(|| internal_err!("an interval join without its store"))?;
        let snapshot = store.snapshot();
        if !c.complete {
            self.rebuild_interval_index(&snapshot).await?;
        }
        for side in [Side::Left, Side::Right] {
            let Some(cutoff) = cutoffs[idx(side)] else { continue };
            let c = self.intervals.as_mut().ok_or_else(|| internal_err!("interval cleanup vanished"))?;
            let Some(bound) = c.by_side[idx(side)] else { continue };
            let index = &mut c.index[idx(side)];
            let rest = index.split_off(&cutoff.div_euclid(GRANULE_US));
            let below = std::mem::replace(index, rest);
            let mut buckets: Vec<Vec<u8>> = below.into_values().flatten().collect();
            if buckets.is_empty() {
                continue;
            }
            buckets.sort_unstable();
            buckets.dedup();
            let missing: Vec<Vec<u8>> = buckets.iter().filter(|b| !self.state.knows(b)).cloned().collect();
            if !missing.is_empty() {
                let mut entries = Vec::new();
                for b in &missing {
                    entries.extend(snapshot.scan_prefix_cached(&bucket_prefix(self.table_id, b)).await?);
                }
                self.load_entries(entries, missing)?;
            }
            let rows: Vec<(&Vec<u8>, Vec<u8>, i64)> = buckets
                .iter()
                .filter_map(|b| self.state.get(b).map(|p| (b, p)))
                .flat_map(|(b, p)| p.sides[idx(side)].iter().map(move |(r, e)| (b, r.clone(), e.count)))
                .collect();
            let mut expired: Vec<(Vec<u8>, Vec<u8>, i64)> = Vec::new();
            for part in rows.chunks(4096) {
                let s = self.side(side);
                let cols = s.columns(&part.iter().map(|(_, r, _)| r.as_slice()).collect::<Vec<_>>())?;
                let ts = timestamp_micros(&cols[bound.col])?;
                for (i, (b, r, count)) in part.iter().enumerate() {
                    if ts.is_valid(i) && ts.value(i) < cutoff {
                        expired.push(((*b).clone(), r.clone(), *count));
                    }
                }
            }
            for (bucket, row, count) in expired {
                self.apply(side, &bucket, &row, -count, 0)?;
            }
        }
        Ok(())
    }

    /// Fills the index from the committed state (after a restore).
    async fn rebuild_interval_index(&mut self, snapshot: &ReadSnapshot) -> Result<()> {
        let (start, end) = eddy_storage::scan::vnode_bounds(self.table_id, &self.vnodes);
        let mut cursor = snapshot.scan_batches(start, end, 4096).await?;
        let mut found: [Vec<(i64, Vec<u8>)>; 2] = [Vec::new(), Vec::new()];
        let by_side = self.intervals.as_ref().ok_or_else(|| internal_err!("interval cleanup vanished"))?.by_side;
        while let Some(entries) = cursor.next_batch().await? {
            let mut rows: [Vec<(&[u8], &[u8])>; 2] = [Vec::new(), Vec::new()];
            for (k, _) in &entries {
                let (bucket, side, row) = parse_entry_key(k)?;
                if matchable(bucket) && by_side[side].is_some() {
                    rows[side].push((bucket, row));
                }
            }
            for side in [Side::Left, Side::Right] {
                let (Some(b), part) = (by_side[idx(side)], &rows[idx(side)]) else { continue };
                if part.is_empty() {
                    continue;
                }
                let cols = self.side(side).columns(&part.iter().map(|(_, r)| *r).collect::<Vec<_>>())?;
                let ts = timestamp_micros(&cols[b.col])?;
                for (i, (bucket, _)) in part.iter().enumerate() {
                    if ts.is_valid(i) {
                        found[idx(side)].push((ts.value(i).div_euclid(GRANULE_US), bucket.to_vec()));
                    }
                }
            }
        }
        let c = self.intervals.as_mut().ok_or_else(|| internal_err!("interval cleanup vanished"))?;
        for (i, rows) in found.into_iter().enumerate() {
            for (g, bucket) in rows {
                c.index[i].entry(g).or_default().insert(bucket);
            }
        }
        c.complete = true;
        Ok(())
    }
}
