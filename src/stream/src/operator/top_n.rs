//! `TopN`: `ORDER BY ... LIMIT n OFFSET m` in a view, over the whole input, in bounded memory.
//!
//! State: one state-table entry per input row, keyed `table | vnode | 0 | order key | row` (the
//! memcomparable ORDER BY values, then the whole encoded row), so the store holds the rows in
//! SQL order and the first rows of the order are one short range read. The value is the row's
//! count and the length of its order key.
//!
//! Memory: the operator caches the rows at the head of the order — every row whose key is at
//! most the last cached key (`boundary`) — and nothing past it. A change at or before the
//! boundary updates the cache; one past it is only written to the store (the input's rows are
//! distinct, since they carry the input's stream key, so an insert there makes the count 1
//! and a delete 0 without reading the store). Before a chunk is processed, the cache is
//! refilled from the store if the chunk's deletes could leave it with fewer rows than
//! `OFFSET + LIMIT`; at a barrier it is trimmed back to twice its capacity. A restart reads
//! the head only. The output at a barrier is the cached rows at positions `skip .. skip +
//! fetch`, diffed against what was emitted before.
//!
//! Reads past the boundary go to the committed snapshot, which lacks the open epoch and the
//! sealed epochs not yet committed: the open epoch's counts past the boundary (rows deleted
//! from the cache included, as deletes move the boundary back) are kept in `outside`, a sealed
//! epoch's writes and the rows trimmed out of the cache in `pending` until the snapshot holds
//! them, and both are laid over the read.
//!
//! Without a LIMIT, or over an input whose rows may repeat (no stream key), every row is
//! cached, as the output may reach any row.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows};
use async_trait::async_trait;
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr};
use eddy_common::codec::{table_prefix, vnode_of, KEY_PREFIX_LEN};
use eddy_common::{internal_err, Epoch, Op, Result, StreamChunk};
use eddy_storage::{EpochBatch, ReadSnapshot, StateStore};

use super::eval::{evaluate, RowErrors};
use super::Operator;

/// A row's place: (ORDER BY key, encoded row).
type Key = (Vec<u8>, Vec<u8>);

/// Fewest rows the cache keeps (more when `OFFSET + LIMIT` is larger).
const MIN_CACHE_ROWS: usize = 64;

/// Entries read from the store per batch when refilling.
const FILL_BATCH: usize = 1024;

/// Top-N over the whole input.
pub struct TopN {
    table_id: u32,
    skip: usize,
    fetch: Option<usize>,
    order_by: Vec<PhysicalSortExpr>,
    schema: SchemaRef,
    order_conv: Option<RowConverter>,
    rows: RowConverter,
    /// Only the head of the order is cached (see the module docs).
    bounded: bool,
    /// The head of the order, with counts.
    cache: BTreeMap<Key, i64>,
    /// The cache holds every row.
    complete: bool,
    /// The cache reflects the store (false after a restart until the first chunk loads it).
    loaded: bool,
    /// Rows changed in the open epoch.
    dirty: BTreeSet<Key>,
    /// Counts of rows past the boundary changed in the open epoch.
    outside: BTreeMap<Key, i64>,
    /// Counts past the boundary written by sealed epochs the snapshot may not hold yet.
    pending: VecDeque<(Epoch, BTreeMap<Key, i64>)>,
    /// Rows emitted, with counts.
    emitted: BTreeMap<Vec<u8>, i64>,
    /// Entries of an older layout (`table | vnode | 0 | row` → count) to delete at the next
    /// barrier, which writes their rows again in this layout.
    legacy: Vec<Vec<u8>>,
}

impl fmt::Display for TopN {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let order: Vec<String> = self.order_by.iter().map(|e| e.to_string()).collect();
        let limit = self.fetch.map_or("ALL".into(), |n| n.to_string());
        write!(f, "TopN offset={} limit={limit} order=[{}] state_table={}", self.skip, order.join(", "), self.table_id)
    }
}

impl TopN {
    /// A top-N over rows of `schema`; `distinct_rows` when they carry a stream key.
    pub fn try_new(
        table_id: u32,
        skip: usize,
        fetch: Option<usize>,
        order_by: Vec<PhysicalSortExpr>,
        schema: SchemaRef,
        distinct_rows: bool,
    ) -> Result<Self> {
        let order_conv = super::order_converter(&order_by, &schema)?;
        let rows = super::row_converter(&schema)?;
        Ok(Self {
            table_id,
            skip,
            fetch,
            order_by,
            schema,
            order_conv,
            rows,
            bounded: distinct_rows && fetch.is_some(),
            cache: BTreeMap::new(),
            complete: true,
            loaded: true,
            dirty: BTreeSet::new(),
            outside: BTreeMap::new(),
            pending: VecDeque::new(),
            emitted: BTreeMap::new(),
            legacy: Vec::new(),
        })
    }

    /// Recovery: the head of the order loads with the first chunk.
    pub async fn restore(&mut self, snapshot: Option<&ReadSnapshot>) -> Result<()> {
        if snapshot.is_some() {
            self.loaded = false;
            self.complete = false;
        }
        Ok(())
    }

    /// Position after the last output row.
    fn end(&self) -> usize {
        self.fetch.map_or(usize::MAX, |f| self.skip.saturating_add(f))
    }

    /// Rows the cache keeps after a barrier (it is trimmed when it holds twice as many).
    fn capacity(&self) -> usize {
        self.end().saturating_mul(2).max(MIN_CACHE_ROWS)
    }

    fn prefix(&self) -> Vec<u8> {
        let mut k = Vec::with_capacity(KEY_PREFIX_LEN + 4);
        k.extend_from_slice(&table_prefix(self.table_id));
        k.extend_from_slice(&vnode_of(&[]).to_be_bytes());
        k.extend_from_slice(&0u32.to_be_bytes());
        k
    }

    fn state_key(&self, (order, row): &Key) -> Vec<u8> {
        let mut k = self.prefix();
        k.extend_from_slice(order);
        k.extend_from_slice(row);
        k
    }

    /// True if the cache holds `key`'s count (it is at or before the boundary).
    fn cached(&self, key: &Key) -> bool {
        self.complete || self.cache.last_key_value().is_some_and(|(last, _)| key <= last)
    }

    fn cached_rows(&self) -> usize {
        self.cache.values().map(|&c| usize::try_from(c).unwrap_or(0)).sum()
    }

    /// Order keys and encoded rows of `chunk` (rows whose order keys fail are counted, dropped).
    fn keyed(&self, chunk: StreamChunk, errors: &mut RowErrors) -> Result<(StreamChunk, Option<Rows>, Rows)> {
        let exprs: Vec<Arc<dyn PhysicalExpr>> = self.order_by.iter().map(|e| e.expr.clone()).collect();
        let (chunk, values) = evaluate(&exprs, chunk, errors)?;
        let orders = self.order_conv.as_ref().map(|c| c.convert_columns(&values)).transpose()?;
        let rows = self.rows.convert_columns(chunk.batch.columns())?;
        Ok((chunk, orders, rows))
    }

    /// Drops the pending counts the snapshot of `epoch` holds.
    fn forget_committed(&mut self, epoch: Epoch) {
        while self.pending.front().is_some_and(|(e, _)| *e <= epoch) {
            self.pending.pop_front();
        }
    }

    /// Reads rows past the boundary until the cache holds at least `want` rows or every row.
    async fn fill(&mut self, snapshot: &ReadSnapshot, want: usize) -> Result<()> {
        let prefix = self.prefix();
        let start = match self.cache.last_key_value() {
            Some((last, _)) => Bound::Excluded(self.state_key(last)),
            None => Bound::Included(prefix.clone()),
        };
        let (_, end) = eddy_storage::scan::prefix_bounds(&prefix);
        // What the snapshot may lack, newest last, past the boundary.
        let mut overlay: BTreeMap<Key, i64> = BTreeMap::new();
        for (_, counts) in &self.pending {
            overlay.extend(counts.iter().filter(|(k, _)| !self.cached(k)).map(|(k, c)| (k.clone(), *c)));
        }
        overlay.extend(self.outside.iter().filter(|(k, _)| !self.cached(k)).map(|(k, c)| (k.clone(), *c)));
        let mut overlay = overlay.into_iter().peekable();
        let mut have = self.cached_rows();
        let mut cursor = snapshot.scan_batches(start, end, FILL_BATCH).await?;
        while let Some(batch) = cursor.next_batch().await? {
            for (k, v) in batch {
                if v.len() == 8 {
                    return self.load_legacy(snapshot).await;
                }
                let suffix = k.get(prefix.len()..).unwrap_or_default();
                let (count, order_len) = decode_value(&v)?;
                let order = suffix.get(..order_len).ok_or_else(|| internal_err!("bad top-N state key"))?;
                let key: Key = (order.to_vec(), suffix[order_len..].to_vec());
                let mut stored = Some(count);
                while let Some((o, c)) = overlay.next_if(|(o, _)| *o <= key) {
                    if o == key {
                        // The overlay's count replaces the snapshot's.
                        stored = None;
                    }
                    have += self.admit(o, c);
                }
                if let Some(c) = stored {
                    have += self.admit(key, c);
                }
                if have >= want {
                    // Overlay keys past this one stay outside.
                    return Ok(());
                }
            }
        }
        // The store has no more rows: the rest of the overlay completes the cache.
        for (o, c) in overlay {
            self.admit(o, c);
        }
        self.complete = true;
        Ok(())
    }

    /// Caches `key` with count `c` (a count of 0 is an absent row); returns the rows added.
    fn admit(&mut self, key: Key, c: i64) -> usize {
        if c > 0 {
            self.cache.insert(key, c);
        }
        usize::try_from(c).unwrap_or(0)
    }

    /// Loads state of the older layout (rows not in order): every row, to be written again
    /// in this layout at the next barrier.
    async fn load_legacy(&mut self, snapshot: &ReadSnapshot) -> Result<()> {
        let prefix = self.prefix();
        let entries = snapshot.scan_prefix(&prefix).await?;
        self.cache.clear();
        let mut ignored = RowErrors::default();
        for piece in entries.chunks(8192) {
            let encoded: Vec<&[u8]> = piece.iter().map(|(k, _)| k.get(prefix.len()..).unwrap_or_default()).collect();
            let parser = self.rows.parser();
            let columns = eddy_common::codec::decode_rows(&self.rows, encoded.iter().map(|r| parser.parse(r)))?;
            let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
            let (chunk, orders, _) = self.keyed(StreamChunk::inserts(batch), &mut ignored)?;
            if chunk.len() != piece.len() {
                return Err(internal_err!("top-N state rows no longer evaluate their order"));
            }
            for (i, (k, v)) in piece.iter().enumerate() {
                let count = i64::from_be_bytes(v.as_ref().try_into().map_err(|_| internal_err!("bad top-N state value"))?);
                let key: Key = (orders.as_ref().map_or(&[][..], |o| o.row(i).data()).to_vec(), encoded[i].to_vec());
                self.legacy.push(k.to_vec());
                self.dirty.insert(key.clone());
                self.cache.insert(key, count);
            }
        }
        self.complete = true;
        Ok(())
    }

    /// The output rows as they are now.
    fn output(&self) -> Result<BTreeMap<Vec<u8>, i64>> {
        let end = self.end();
        if !self.complete && self.cached_rows() < end {
            return Err(internal_err!("top-N cache holds fewer rows than its output"));
        }
        let mut out = BTreeMap::new();
        let mut pos = 0usize;
        for ((_, row), &count) in &self.cache {
            if pos >= end {
                break;
            }
            let n = usize::try_from(count).unwrap_or(0);
            let (from, to) = (pos.max(self.skip), (pos + n).min(end));
            if to > from {
                *out.entry(row.clone()).or_insert(0) += (to - from) as i64;
            }
            pos += n;
        }
        Ok(out)
    }

    /// Keeps the first [`TopN::capacity`] rows when the cache holds twice as many; the rows
    /// trimmed are returned (the snapshot may not hold their latest counts yet).
    fn trim(&mut self) -> BTreeMap<Key, i64> {
        let cap = self.capacity();
        if !self.bounded || self.cache.len() <= cap.saturating_mul(2) {
            return BTreeMap::new();
        }
        let Some(first_out) = self.cache.keys().nth(cap).cloned() else { return BTreeMap::new() };
        self.complete = false;
        self.cache.split_off(&first_out)
    }
}

#[async_trait]
impl Operator for TopN {
    fn state_stats(&self) -> Option<crate::cache::CacheStats> {
        let bytes = self.cache.keys().map(|(o, r)| o.len() + r.len() + crate::cache::ENTRY_OVERHEAD_BYTES).sum::<usize>();
        Some(crate::cache::CacheStats { entries: self.cache.len() as u64, bytes: bytes as u64, hits: 0, misses: 0 })
    }

    async fn prefetch(&mut self, chunk: &StreamChunk, store: &StateStore) -> Result<()> {
        self.forget_committed(store.committed_epoch());
        if self.complete {
            return Ok(());
        }
        let deletes = chunk.ops.iter().filter(|op| !op.is_insert()).count();
        let want = if !self.bounded {
            usize::MAX
        } else if self.loaded {
            self.end().saturating_add(deletes)
        } else {
            self.capacity().max(self.end().saturating_add(deletes))
        };
        if self.loaded && self.cached_rows() >= want {
            return Ok(());
        }
        let snapshot = store.snapshot();
        self.forget_committed(snapshot.epoch);
        // Read a capacity's worth past what is needed, so that refills stay rare.
        self.fill(&snapshot, want.saturating_add(self.capacity())).await?;
        if !self.loaded {
            self.loaded = true;
            self.emitted = self.output()?;
        }
        Ok(())
    }

    fn process(&mut self, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        if !self.loaded {
            return Err(internal_err!("top-N state was not loaded before a chunk"));
        }
        let (chunk, orders, rows) = self.keyed(chunk, errors)?;
        for i in 0..chunk.len() {
            let key: Key = (orders.as_ref().map_or(&[][..], |o| o.row(i).data()).to_vec(), rows.row(i).data().to_vec());
            let insert = chunk.ops[i].is_insert();
            if self.cached(&key) {
                let c = self.cache.entry(key.clone()).or_default();
                *c += if insert { 1 } else { -1 };
                if *c < 0 {
                    return Err(internal_err!("top-N retracted a row it never saw"));
                }
                if *c == 0 {
                    self.cache.remove(&key);
                    // A refill after the boundary moved back before this row must not read
                    // the row from the snapshot again.
                    self.outside.insert(key.clone(), 0);
                }
            } else {
                // Distinct rows: past the boundary a row is there once or not at all.
                self.outside.insert(key.clone(), i64::from(insert));
            }
            self.dirty.insert(key);
        }
        Ok(vec![])
    }

    async fn on_barrier(&mut self, epoch: Epoch, batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        for k in std::mem::take(&mut self.legacy) {
            batch.delete(k);
        }
        if self.dirty.is_empty() {
            return Ok(vec![]);
        }
        let dirty = std::mem::take(&mut self.dirty);
        let mut outside = std::mem::take(&mut self.outside);
        let mut written = BTreeMap::new();
        for key in dirty {
            let count = if self.cached(&key) { self.cache.get(&key).copied() } else { outside.remove(&key) }.unwrap_or(0);
            let k = self.state_key(&key);
            if count == 0 {
                batch.delete(k);
            } else {
                let mut v = count.to_be_bytes().to_vec();
                v.extend_from_slice(&u32::try_from(key.0.len()).unwrap_or(u32::MAX).to_be_bytes());
                batch.put(k, v);
            }
            written.insert(key, count);
        }
        let new = self.output()?;
        let old = std::mem::take(&mut self.emitted);
        let mut changes = Vec::new();
        for (row, &c) in &old {
            let n = c - new.get(row).copied().unwrap_or(0);
            changes.extend(std::iter::repeat_n((Op::Delete, row.clone()), usize::try_from(n).unwrap_or(0)));
        }
        for (row, &c) in &new {
            let n = c - old.get(row).copied().unwrap_or(0);
            changes.extend(std::iter::repeat_n((Op::Insert, row.clone()), usize::try_from(n).unwrap_or(0)));
        }
        self.emitted = new;
        // What later reads past the boundary (which deletes may move back before any of these
        // rows) must see until this epoch commits.
        let mut uncommitted = self.trim();
        uncommitted.extend(written);
        if !uncommitted.is_empty() {
            self.pending.push_back((epoch, uncommitted));
        }
        super::chunk_of_rows(&self.rows, &self.schema, changes)
    }
}

fn decode_value(v: &[u8]) -> Result<(i64, usize)> {
    let count = v.get(..8).and_then(|b| b.try_into().ok()).map(i64::from_be_bytes);
    let order_len = v.get(8..12).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes);
    match (count, order_len) {
        (Some(c), Some(o)) if v.len() == 12 => Ok((c, o as usize)),
        _ => Err(internal_err!("bad top-N state value")),
    }
}
