//! Reads of one committed epoch: [`ReadSnapshot`] and its streaming [`ScanCursor`].
//!
//! Contract:
//! * A snapshot shows exactly one committed epoch: the base keys of a SlateDB snapshot taken
//!   right after that epoch's commit (or after a fold step, which changes no read), merged with
//!   the runs that were live at that moment ([`crate::runs`], invariant 2): live runs newest
//!   first, then the base. Runs that were not live then (uncommitted, or committed later) are
//!   never read.
//! * Scans return keys in ascending order, each once, with its newest committed value; deleted
//!   keys are skipped. Run entries themselves (the `RUN_PREFIX` key space) never appear in
//!   results.
//! * A [`ScanCursor`] holds at most `max_entries` merged entries in memory (plus one pending
//!   entry per source), whatever the size of the range.
//! * A snapshot stays readable while its SlateDB instance is open; after the store recovers
//!   from a failure (see `StateStore::recover`) old snapshots return errors and callers take a
//!   new one.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use eddy_common::{EddyError, Epoch, Result};
use futures::Stream;
use slatedb::config::ScanOptions;
use slatedb::{DbIterator, DbSnapshot};

use crate::runs::{self, KeyBounds, RunId, RUN_KEY_HEADER_LEN, RUN_PREFIX};

/// Bytes SlateDB reads ahead per request while a scan walks SSTs.
const SCAN_READ_AHEAD_BYTES: usize = 256 << 10;

/// Converts a SlateDB error into an (external, retryable) Eddy error.
pub(crate) fn storage_err(e: slatedb::Error) -> EddyError {
    EddyError::external(format!("state store: {e}"))
}

/// The exclusive upper bound of all keys starting with `prefix`, if any.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The `[start, end)` bounds of all keys starting with `prefix`.
pub fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let end = match prefix_end(prefix) {
        Some(e) => Bound::Excluded(e),
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix.to_vec()), end)
}

/// Key bounds of the entries of table `table_id` under `vnodes` (a range of one parallel
/// actor's vnodes; the whole table for `0..VNODE_COUNT`).
pub fn vnode_bounds(table_id: u32, vnodes: &std::ops::Range<u16>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let at = |v: u16| {
        let mut k = eddy_common::codec::table_prefix(table_id).to_vec();
        k.extend_from_slice(&v.to_be_bytes());
        k
    };
    let end = if vnodes.end >= eddy_common::codec::VNODE_COUNT { prefix_bounds(&eddy_common::codec::table_prefix(table_id)).1 } else { Bound::Excluded(at(vnodes.end)) };
    (Bound::Included(at(vnodes.start)), end)
}

/// True if no key lies between `start` and `end` (SlateDB panics on such ranges).
fn is_empty_range(start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        (Bound::Unbounded, Bound::Excluded(e)) => e.is_empty(),
        _ => false,
    }
}

/// A read view of one committed epoch.
#[derive(Clone)]
pub struct ReadSnapshot {
    /// The epoch this snapshot shows.
    pub epoch: Epoch,
    /// SlateDB snapshot taken after the commit (or fold step) this view reflects.
    inner: Arc<DbSnapshot>,
    /// Runs live at that moment, oldest first.
    live_runs: Arc<[RunId]>,
    /// The key bounds of each of `live_runs` where known: reads skip runs that cannot hold
    /// the key or range.
    run_bounds: Arc<[Option<Arc<KeyBounds>>]>,
}

impl std::fmt::Debug for ReadSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadSnapshot").field("epoch", &self.epoch).field("live_runs", &self.live_runs.len()).finish()
    }
}

impl ReadSnapshot {
    /// A view of `epoch` over a SlateDB snapshot and the runs live in it.
    pub(crate) fn new(epoch: Epoch, inner: Arc<DbSnapshot>, live_runs: Arc<[RunId]>, run_bounds: Arc<[Option<Arc<KeyBounds>>]>) -> Self {
        debug_assert_eq!(live_runs.len(), run_bounds.len());
        Self { epoch, inner, live_runs, run_bounds }
    }

    /// The live runs, oldest first, with their key bounds where known.
    fn runs_with_bounds(&self) -> impl DoubleEndedIterator<Item = (RunId, Option<&KeyBounds>)> {
        self.live_runs.iter().enumerate().map(|(i, r)| (*r, self.run_bounds.get(i).and_then(|b| b.as_deref())))
    }

    /// Runs live in this snapshot, oldest first.
    pub fn live_runs(&self) -> &[RunId] {
        &self.live_runs
    }

    /// The value of `key` at this epoch.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        for (run, bounds) in self.runs_with_bounds().rev() {
            if !runs::may_hold(bounds, key) {
                continue;
            }
            if let Some(raw) = self.inner.get(runs::run_key(run, key)).await.map_err(storage_err)? {
                return runs::decode_run_value(&raw);
            }
        }
        self.inner.get(key).await.map_err(storage_err)
    }

    /// True if no key starts with `prefix`.
    pub async fn is_prefix_empty(&self, prefix: &[u8]) -> Result<bool> {
        let (start, end) = prefix_bounds(prefix);
        let mut cursor = self.scan_batches_with(start, end, 1, &cached_scan()).await?;
        Ok(cursor.next_batch().await?.is_none())
    }

    /// All entries whose key starts with `prefix`, for a prefix read again and again (a view's
    /// failing-row counts, read by every query of the view; a join key's bucket): no read-ahead,
    /// and the blocks it reads stay in the block cache, so a repeated read touches no file.
    /// Whole tables go through [`ReadSnapshot::scan_batches`], which streams past the cache.
    pub async fn scan_prefix_cached(&self, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        self.collect_prefix(prefix, &cached_scan()).await
    }

    /// All entries whose key starts with `prefix`, in key order. Collects the whole range; use
    /// [`ReadSnapshot::scan_batches`] for ranges that may not fit in memory.
    pub async fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        self.collect_prefix(prefix, &streaming_scan()).await
    }

    async fn collect_prefix(&self, prefix: &[u8], options: &ScanOptions) -> Result<Vec<(Bytes, Bytes)>> {
        let (start, end) = prefix_bounds(prefix);
        let mut cursor = self.scan_batches_with(start, end, 4096, options).await?;
        let mut out = Vec::new();
        while let Some(batch) = cursor.next_batch().await? {
            out.extend(batch);
        }
        Ok(out)
    }

    /// A cursor over the entries with keys in (`start`, `end`), in key order, handing them out
    /// in batches of at most `max_entries` (at least 1).
    pub async fn scan_batches(&self, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>, max_entries: usize) -> Result<ScanCursor> {
        self.scan_batches_with(start, end, max_entries, &streaming_scan()).await
    }

    async fn scan_batches_with(&self, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>, max_entries: usize, options: &ScanOptions) -> Result<ScanCursor> {
        let max_entries = max_entries.max(1);
        if is_empty_range(&start, &end) {
            return Ok(ScanCursor { sources: Vec::new(), max_entries, primed: true });
        }
        let mut sources = Vec::with_capacity(1 + self.live_runs.len());
        let base_range = (start.clone().map(Bytes::from), end.clone().map(Bytes::from));
        let base_end = base_range.1.clone();
        let iter = self.inner.scan_with_options(base_range, options).await.map_err(storage_err)?;
        sources.push(Source { iter, run: None, end: base_end, head: None });
        for (run, bounds) in self.runs_with_bounds() {
            if bounds.is_some_and(|b| !b.overlaps(&start, &end)) {
                continue;
            }
            let header = runs::run_prefix(run);
            let with_header = |k: &Vec<u8>| {
                let mut full = header.clone();
                full.extend_from_slice(k);
                Bytes::from(full)
            };
            let run_start = match &start {
                Bound::Included(k) => Bound::Included(with_header(k)),
                Bound::Excluded(k) => Bound::Excluded(with_header(k)),
                Bound::Unbounded => Bound::Included(Bytes::from(header.clone())),
            };
            let run_end = match &end {
                Bound::Included(k) => Bound::Included(with_header(k)),
                Bound::Excluded(k) => Bound::Excluded(with_header(k)),
                Bound::Unbounded => match prefix_end(&header) {
                    Some(e) => Bound::Excluded(Bytes::from(e)),
                    None => Bound::Unbounded,
                },
            };
            let iter = self.inner.scan_with_options((run_start, run_end.clone()), options).await.map_err(storage_err)?;
            sources.push(Source { iter, run: Some(run), end: run_end, head: None });
        }
        Ok(ScanCursor { sources, max_entries, primed: false })
    }
}

/// Options of a scan streaming a large range: read ahead, past the block cache.
fn streaming_scan() -> ScanOptions {
    ScanOptions { read_ahead_bytes: SCAN_READ_AHEAD_BYTES, ..ScanOptions::default() }
}

/// Options of a scan over a range read again and again: one block at a time, cached.
fn cached_scan() -> ScanOptions {
    ScanOptions { cache_blocks: true, ..ScanOptions::default() }
}

/// One input of a merge: the base keys or one live run.
struct Source {
    /// SlateDB iterator over the source's key range.
    iter: DbIterator,
    /// The run this source reads, `None` for the base keys.
    run: Option<RunId>,
    /// End of the scanned range (base source: to know whether a seek stays inside it).
    end: Bound<Bytes>,
    /// Next entry: original key and value (`None` = deleted by this source).
    head: Option<(Bytes, Option<Bytes>)>,
}

impl Source {
    /// Moves `head` to the source's next entry (or `None` at its end).
    async fn advance(&mut self) -> Result<()> {
        loop {
            let Some(kv) = self.iter.next().await.map_err(storage_err)? else {
                self.head = None;
                return Ok(());
            };
            if self.run.is_some() {
                let key = kv.key.slice(RUN_KEY_HEADER_LEN..);
                self.head = Some((key, runs::decode_run_value(&kv.value)?));
                return Ok(());
            }
            if kv.key.starts_with(RUN_PREFIX) {
                // Run entries are not base data: jump over the whole run key space.
                // SlateDB refuses to seek past the scan's end: then the scan is over.
                let skip_to = prefix_end(RUN_PREFIX).unwrap_or_default();
                let in_range = match &self.end {
                    Bound::Included(e) => skip_to.as_slice() <= e.as_ref(),
                    Bound::Excluded(e) => skip_to.as_slice() < e.as_ref(),
                    Bound::Unbounded => true,
                };
                if !in_range {
                    self.head = None;
                    return Ok(());
                }
                self.iter.seek(skip_to).await.map_err(storage_err)?;
                continue;
            }
            self.head = Some((kv.key, Some(kv.value)));
            return Ok(());
        }
    }
}

/// A streaming, merged scan of one snapshot (see [`ReadSnapshot::scan_batches`]).
pub struct ScanCursor {
    /// Base first, then live runs oldest to newest: a higher index wins on equal keys.
    sources: Vec<Source>,
    /// Most entries per batch.
    max_entries: usize,
    /// True once every source's head was loaded.
    primed: bool,
}

impl std::fmt::Debug for ScanCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanCursor").field("sources", &self.sources.len()).field("max_entries", &self.max_entries).finish()
    }
}

impl ScanCursor {
    /// The next at most `max_entries` entries in key order, or `None` when the range is
    /// exhausted (never an empty batch).
    pub async fn next_batch(&mut self) -> Result<Option<Vec<(Bytes, Bytes)>>> {
        if !self.primed {
            for s in &mut self.sources {
                s.advance().await?;
            }
            self.primed = true;
        }
        let mut out = Vec::new();
        while out.len() < self.max_entries {
            // The smallest pending key; the newest source holding it decides.
            let mut winner: Option<usize> = None;
            for (i, s) in self.sources.iter().enumerate() {
                let Some((key, _)) = &s.head else { continue };
                winner = match winner {
                    Some(w) => match self.sources[w].head.as_ref().map(|(k, _)| key.cmp(k)) {
                        Some(std::cmp::Ordering::Greater) => Some(w),
                        _ => Some(i),
                    },
                    None => Some(i),
                };
            }
            let Some(w) = winner else { break };
            let Some((key, value)) = self.sources[w].head.clone() else { break };
            for s in &mut self.sources {
                if s.head.as_ref().is_some_and(|(k, _)| *k == key) {
                    s.advance().await?;
                }
            }
            if let Some(v) = value {
                out.push((key, v));
            }
        }
        Ok((!out.is_empty()).then_some(out))
    }

    /// The cursor as a stream of batches.
    pub fn into_stream(self) -> impl Stream<Item = Result<Vec<(Bytes, Bytes)>>> + Send {
        futures::stream::try_unfold(self, |mut cursor| async move {
            Ok(cursor.next_batch().await?.map(|batch| (batch, cursor)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_carries_over_0xff() {
        assert_eq!(prefix_end(&[0, 0xff]), Some(vec![1]));
        assert_eq!(prefix_end(&[0xff]), None);
    }

    #[test]
    fn empty_ranges_are_recognised() {
        let inc = |v: &[u8]| Bound::Included(v.to_vec());
        let exc = |v: &[u8]| Bound::Excluded(v.to_vec());
        assert!(is_empty_range(&inc(b"b"), &exc(b"b")));
        assert!(is_empty_range(&inc(b"c"), &inc(b"b")));
        assert!(!is_empty_range(&inc(b"b"), &inc(b"b")));
        assert!(!is_empty_range(&Bound::Unbounded, &exc(b"a")));
        assert!(is_empty_range(&Bound::Unbounded, &exc(b"")));
    }
}
