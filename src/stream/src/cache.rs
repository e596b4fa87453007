//! [`StateCache`]: an operator's bounded cache of its state-table entries.
//!
//! The state store is the truth; the cache holds the entries the operator touched recently.
//! Before an operator processes a chunk it loads the entries the chunk will touch
//! (`Operator::prefetch`: one read per distinct key the cache does not know), so processing
//! itself never waits for I/O. Changes mark entries dirty; the operator writes its dirty entries
//! into the epoch's batch at the barrier and tells the cache which epoch wrote them.
//!
//! Eviction keeps the cache correct without a layer of sealed-but-uncommitted batches: an entry
//! may leave only when it is clean and the epoch that last wrote it has committed, so the
//! committed snapshot a later miss reads from holds exactly the entry's current value. Entries
//! deleted in an uncommitted epoch stay as tombstones for the same reason. When the shared
//! [`MemoryBudget`] is exceeded, the cache that notices sheds a quarter of its bytes, least
//! recently used first.
//!
//! One epoch may touch more entries than the budget holds (a statement is one epoch). Then the
//! cache asks its operator to *flush* ([`StateCache::flush_due`]): the operator writes its dirty
//! entries into a batch of its own for the open epoch (spilled to a run, and readable by the
//! operator before a miss goes to the snapshot) and reports them with
//! [`StateCache::flushed`]; they are clean then and may leave. At the barrier the operator hands
//! that batch to the epoch ([`StateCache::seal`]); if entries of the epoch left the cache, the
//! next miss first waits until the epoch has committed ([`StateCache::commit_to_wait_for`]),
//! since only then does the snapshot hold them.
//!
//! A cache created for a new operator starts *complete* (every entry of its table is in it, so
//! a miss means absent and costs no read) and stays so until its first eviction.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use eddy_common::{internal_err, Epoch, Result};
use eddy_storage::{MemoryBudget, StateStore};

/// Estimated bytes of a cached entry beyond its key and value (map slot, allocations).
pub const ENTRY_OVERHEAD_BYTES: usize = 96;

/// Entries flushed before their barrier since the process started (all caches).
static FLUSHED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Entries operators flushed before their barrier since the process started (see the module
/// docs), for tests and metrics.
pub fn flushed_entries() -> u64 {
    FLUSHED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Fewest dirty entries worth a flush (fewer cannot be what exceeds the budget).
const MIN_FLUSH_ENTRIES: usize = 1024;

/// What a cache holds and how often it answered without a read ([`StateCache::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub entries: u64,
    pub bytes: u64,
    pub hits: u64,
    pub misses: u64,
}

impl CacheStats {
    /// Sums two operators' caches (a node with several).
    pub fn plus(self, o: CacheStats) -> CacheStats {
        CacheStats { entries: self.entries + o.entries, bytes: self.bytes + o.bytes, hits: self.hits + o.hits, misses: self.misses + o.misses }
    }
}

/// Which batch last wrote an entry.
#[derive(Debug, Clone, Copy)]
enum Written {
    /// Read from the store (or created) and not written since.
    Never,
    /// An epoch's batch, at its barrier.
    Epoch(Epoch),
    /// The operator's own batch of the open epoch or a later-sealed one, by generation
    /// (the number of epochs the cache had sealed when the entry was flushed).
    Flushed(u64),
}

/// One cached entry.
struct Slot<V> {
    /// The value; `None`: deleted by an epoch that may not have committed yet.
    value: Option<V>,
    /// Estimated bytes (key included).
    bytes: usize,
    /// The batch that last wrote the entry.
    written: Written,
    /// Recency (the cache's tick at the last access).
    tick: u64,
}

/// A bounded cache of an operator's state entries, keyed by encoded key.
pub struct StateCache<V> {
    entries: HashMap<Vec<u8>, Slot<V>>,
    /// Keys changed since the last barrier.
    dirty: HashSet<Vec<u8>>,
    /// Estimated bytes of all entries.
    bytes: usize,
    /// Advanced once per prefetched chunk.
    tick: u64,
    /// Every entry of the table is cached: a miss means the key is absent.
    complete: bool,
    /// Estimated bytes of a value created by [`StateCache::get_or_insert_with`] (its owner
    /// knows what a fresh value grows to; see [`StateCache::set_fresh_value_bytes`]).
    fresh_bytes: usize,
    /// The budget shared with the other caches (known from the first prefetch on).
    budget: Option<Arc<MemoryBudget>>,
    /// `bytes` and `tick` after the last eviction: the next waits until the cache has grown by
    /// an eighth or 16 chunks went by (entries that may not leave yet would otherwise make every
    /// chunk sort the cache).
    bytes_after_evict: usize,
    tick_of_evict: u64,
    /// Lookups answered without a read (cached, or absent in a complete cache).
    hits: u64,
    /// Lookups that had to read the store.
    misses: u64,
    /// Generation of the open epoch (epochs sealed so far).
    generation: u64,
    /// Sealed generations whose epoch may not have committed yet, oldest first.
    sealed: std::collections::VecDeque<(u64, Epoch)>,
    /// Entries flushed in the open epoch have left the cache (so reads must wait for its
    /// commit once it is sealed).
    open_evicted: bool,
    /// The newest sealed epoch some of whose entries left before it committed.
    wait_for: Option<Epoch>,
    /// The budget stayed exceeded although every clean entry that may leave was shed: the
    /// operator should flush its dirty entries (operators that cannot flush ignore it).
    flush: bool,
    /// Entries were flushed since the last eviction: the next [`StateCache::begin`] sheds
    /// without waiting for the cache to grow.
    flushed_since_evict: bool,
}

impl<V> StateCache<V> {
    /// An empty cache; `complete` if the table is known to be empty (a new operator).
    pub fn new(complete: bool) -> Self {
        Self {
            entries: HashMap::new(),
            dirty: HashSet::new(),
            bytes: 0,
            tick: 0,
            complete,
            fresh_bytes: 0,
            budget: None,
            bytes_after_evict: 0,
            tick_of_evict: 0,
            hits: 0,
            misses: 0,
            generation: 0,
            sealed: Default::default(),
            open_evicted: false,
            wait_for: None,
            flush: false,
            flushed_since_evict: false,
        }
    }

    /// Starts a chunk: joins the store's budget and, if it is exceeded, sheds entries.
    pub fn begin(&mut self, store: &StateStore) {
        self.tick += 1;
        if self.budget.is_none() {
            let budget = store.operator_memory().clone();
            budget.grow(self.bytes);
            self.budget = Some(budget);
        }
        let due = self.bytes > self.bytes_after_evict + self.bytes_after_evict / 8 || self.tick >= self.tick_of_evict + 16;
        let over = |b: &Option<Arc<MemoryBudget>>| b.as_ref().is_some_and(|b| b.is_over());
        let evicted = (due || self.flushed_since_evict) && over(&self.budget);
        if evicted {
            self.flushed_since_evict = false;
            self.evict(store.committed_epoch());
            self.bytes_after_evict = self.bytes;
            self.tick_of_evict = self.tick;
        }
        // Still over after shedding what may leave: dirty entries hold the memory.
        self.flush = evicted && over(&self.budget) && self.dirty.len() >= MIN_FLUSH_ENTRIES;
    }

    /// Sets the estimated bytes of a value created by [`StateCache::get_or_insert_with`], until
    /// it is written (and measured) at a barrier or flush.
    pub fn set_fresh_value_bytes(&mut self, bytes: usize) {
        self.fresh_bytes = bytes;
    }

    /// True when the operator should flush its dirty entries (see the module docs), as decided
    /// by the last [`StateCache::begin`].
    pub fn flush_due(&self) -> bool {
        self.flush
    }

    /// `key` was written (`value_bytes` of value; `None`: deleted) into the operator's own
    /// batch of the open epoch, which is spilled before the next [`StateCache::begin`] and
    /// read before the snapshot on a miss: the entry may leave from then on.
    pub fn flushed(&mut self, key: &[u8], value_bytes: Option<usize>) {
        FLUSHED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.flushed_since_evict = true;
        let mark = Written::Flushed(self.generation);
        match value_bytes {
            Some(b) => self.mark_written(key, mark, b),
            None => self.mark_deleted(key, mark),
        }
    }

    /// The operator's batch of the open epoch became `epoch`'s (at its barrier).
    pub fn seal(&mut self, epoch: Epoch) {
        if std::mem::take(&mut self.open_evicted) {
            self.wait_for = Some(epoch);
        }
        self.sealed.push_back((self.generation, epoch));
        self.generation += 1;
    }

    /// Forgets sealed generations whose epoch has committed by `committed`.
    fn prune_sealed(&mut self, committed: Epoch) {
        while self.sealed.front().is_some_and(|(_, e)| *e <= committed) {
            self.sealed.pop_front();
        }
    }

    /// An epoch to wait for before reading a miss from the committed snapshot (see the module
    /// docs), given the last committed one; `None` when the snapshot is current.
    pub fn commit_to_wait_for(&mut self, committed: Epoch) -> Option<Epoch> {
        self.prune_sealed(committed);
        match self.wait_for {
            Some(e) if e > committed => Some(e),
            _ => {
                self.wait_for = None;
                None
            }
        }
    }

    /// True if the cache knows `key`'s state (cached, or absent because the cache is complete);
    /// marks a cached key as just used. A false answer means: load it before processing.
    pub fn knows(&mut self, key: &[u8]) -> bool {
        let known = match self.entries.get_mut(key) {
            Some(slot) => {
                slot.tick = self.tick;
                true
            }
            None => self.complete,
        };
        if known {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        known
    }

    /// Counts `n` lookups a complete cache answered without [`knows`](Self::knows) being asked.
    pub fn answered(&mut self, n: usize) {
        self.hits += n as u64;
    }

    /// Entries, bytes and lookups so far, for metrics.
    pub fn stats(&self) -> CacheStats {
        CacheStats { entries: self.entries.len() as u64, bytes: self.bytes as u64, hits: self.hits, misses: self.misses }
    }

    /// Adds an entry read from the store (`None`: absent there).
    pub fn load(&mut self, key: Vec<u8>, value: Option<V>, value_bytes: usize) {
        let bytes = key.len() + value_bytes + ENTRY_OVERHEAD_BYTES;
        let slot = Slot { value, bytes, written: Written::Never, tick: self.tick };
        self.account(bytes, 0);
        if let Some(old) = self.entries.insert(key, slot) {
            self.account(0, old.bytes);
        }
    }

    /// The value of `key`, if cached and not deleted.
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        self.entries.get(key).and_then(|s| s.value.as_ref())
    }

    /// The value of `key` to change, inserted by `new` if absent; marks it dirty. Errs if the
    /// key's state was never loaded (a missing prefetch would otherwise lose state).
    pub fn get_or_insert_with(&mut self, key: &[u8], new: impl FnOnce() -> V) -> Result<&mut V> {
        if !self.dirty.contains(key) {
            self.dirty.insert(key.to_vec());
        }
        if !self.entries.contains_key(key) {
            if !self.complete {
                return Err(internal_err!("operator state of a key was used before it was loaded"));
            }
            let bytes = key.len() + ENTRY_OVERHEAD_BYTES;
            self.account(bytes, 0);
            self.entries.insert(key.to_vec(), Slot { value: None, bytes, written: Written::Never, tick: self.tick });
        }
        // A value created here (the key was absent, or loaded as absent) is counted as fresh.
        let fresh = if self.entries.get(key).is_some_and(|s| s.value.is_none()) { self.fresh_bytes } else { 0 };
        self.account(fresh, 0);
        let slot = self.entries.get_mut(key).ok_or_else(|| internal_err!("cache entry vanished"))?;
        slot.tick = self.tick;
        slot.bytes += fresh;
        Ok(slot.value.get_or_insert_with(new))
    }

    /// The value of `key` to change without marking it dirty (e.g. output bookkeeping that is
    /// written with the entry anyway).
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        self.entries.get_mut(key).and_then(|s| s.value.as_mut())
    }

    /// Keys changed since the last call, which the caller writes into the epoch's batch
    /// (reporting each with [`StateCache::written`] or [`StateCache::deleted`]).
    pub fn take_dirty(&mut self) -> Vec<Vec<u8>> {
        self.dirty.drain().collect()
    }

    /// `key` was written by `epoch`'s batch; its value now takes about `value_bytes`.
    pub fn written(&mut self, key: &[u8], epoch: Epoch, value_bytes: usize) {
        self.mark_written(key, Written::Epoch(epoch), value_bytes);
    }

    /// `key` was deleted by `epoch`'s batch: a tombstone until that epoch commits.
    pub fn deleted(&mut self, key: &[u8], epoch: Epoch) {
        self.mark_deleted(key, Written::Epoch(epoch));
    }

    fn mark_written(&mut self, key: &[u8], mark: Written, value_bytes: usize) {
        let bytes = key.len() + value_bytes + ENTRY_OVERHEAD_BYTES;
        let Some(slot) = self.entries.get_mut(key) else { return };
        let old = std::mem::replace(&mut slot.bytes, bytes);
        slot.written = mark;
        self.account(bytes, old);
    }

    fn mark_deleted(&mut self, key: &[u8], mark: Written) {
        let bytes = key.len() + ENTRY_OVERHEAD_BYTES;
        let Some(slot) = self.entries.get_mut(key) else { return };
        slot.value = None;
        let old = std::mem::replace(&mut slot.bytes, bytes);
        slot.written = mark;
        self.account(bytes, old);
    }

    /// Whether an entry last written so may leave: its batch is committed by `committed`, or
    /// is the operator's batch of the open epoch (read back on a miss).
    fn may_leave(&self, written: Written, committed: Epoch) -> bool {
        match written {
            Written::Never => true,
            Written::Epoch(e) => e <= committed,
            Written::Flushed(g) if g == self.generation => true,
            // Sealed generations leave `sealed` only once committed.
            Written::Flushed(g) => self.sealed.iter().find(|(s, _)| *s == g).is_none_or(|(_, e)| *e <= committed),
        }
    }

    /// Cached values (all of the table's while [`StateCache::is_complete`]).
    pub fn values(&self) -> impl Iterator<Item = (&Vec<u8>, &V)> {
        self.entries.iter().filter_map(|(k, s)| s.value.as_ref().map(|v| (k, v)))
    }

    /// Estimated bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Number of cached entries (tombstones included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True without entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// True while every entry of the table is cached.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Marks the cache complete (its owner loaded the whole table).
    pub fn set_complete(&mut self) {
        self.complete = true;
    }

    fn account(&mut self, added: usize, removed: usize) {
        self.bytes = (self.bytes + added).saturating_sub(removed);
        if let Some(b) = &self.budget {
            b.grow(added);
            b.shrink(removed);
        }
    }

    /// Sheds a quarter of the cache's bytes, or as much as the shared budget is over its limit
    /// if that is more: clean entries that may leave (see [`StateCache::may_leave`]), least
    /// recently used first.
    pub fn evict(&mut self, committed: Epoch) {
        let excess = self.budget.as_ref().map_or(0, |b| b.used().saturating_sub(b.limit()));
        let goal = (self.bytes / 4).max(excess).min(self.bytes);
        if goal == 0 {
            return;
        }
        self.prune_sealed(committed);
        let mut candidates: Vec<(u64, &Vec<u8>, usize)> = self
            .entries
            .iter()
            .filter(|(k, s)| self.may_leave(s.written, committed) && !self.dirty.contains(*k))
            .map(|(k, s)| (s.tick, k, s.bytes))
            .collect();
        candidates.sort_unstable_by_key(|c| c.0);
        let mut freed = 0;
        let mut victims = Vec::new();
        for (_, k, bytes) in candidates {
            if freed >= goal {
                break;
            }
            freed += bytes;
            victims.push(k.clone());
        }
        if victims.is_empty() {
            return;
        }
        for k in victims {
            if let Some(slot) = self.entries.remove(&k) {
                self.open_evicted |= matches!(slot.written, Written::Flushed(g) if g == self.generation);
                self.account(0, slot.bytes);
            }
        }
        self.complete = false;
    }
}

impl<V> Drop for StateCache<V> {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.shrink(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use eddy_storage::StoreOptions;

    use super::*;

    #[tokio::test]
    async fn only_clean_committed_entries_leave_and_the_cache_then_asks_for_loads() {
        let store = StateStore::open(&StoreOptions { operator_cache_bytes: 1, ..Default::default() }).await.unwrap();
        let mut c: StateCache<i64> = StateCache::new(true);
        c.begin(&store);
        assert!(c.knows(b"a"), "a complete cache knows absent keys");
        *c.get_or_insert_with(b"a", || 0).unwrap() += 1;
        *c.get_or_insert_with(b"b", || 0).unwrap() += 2;
        // Dirty entries never leave.
        c.evict(Epoch(100));
        assert_eq!(c.len(), 2);
        let mut dirty = c.take_dirty();
        dirty.sort();
        assert_eq!(dirty, vec![b"a".to_vec(), b"b".to_vec()]);
        c.written(b"a", Epoch(5), 8);
        c.deleted(b"b", Epoch(5));
        // Written by an epoch that has not committed: still not.
        c.evict(Epoch(4));
        assert_eq!(c.len(), 2);
        c.evict(Epoch(5));
        assert!(c.len() < 2, "committed clean entries are shed");
        assert!(!c.is_complete());
        assert!(!c.knows(b"zz"), "after an eviction a miss must be loaded");
        assert!(c.get_or_insert_with(b"zz", || 0).is_err(), "unloaded state is never invented");
        c.load(b"zz".to_vec(), Some(7), 8);
        assert_eq!(c.get(b"zz"), Some(&7));
    }

    #[tokio::test]
    async fn the_shared_budget_sees_every_cache() {
        let store = StateStore::open(&StoreOptions { operator_cache_bytes: 1 << 20, ..Default::default() }).await.unwrap();
        let budget = store.operator_memory().clone();
        {
            let mut c: StateCache<i64> = StateCache::new(true);
            c.begin(&store);
            c.load(vec![1; 100], Some(1), 8);
            assert_eq!(budget.used(), c.bytes());
            assert!(c.bytes() >= 108);
        }
        assert_eq!(budget.used(), 0, "a dropped cache returns its bytes");
    }
}
