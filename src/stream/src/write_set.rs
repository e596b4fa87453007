//! [`WriteSet`]: uncommitted key-value changes that stay readable by their writer: an
//! [`EpochBatch`] (which spills to runs in the state store when the shared write budget runs out) plus an index of the
//! keys still in memory and Bloom filters over the spilled keys, so reading a key back costs a
//! store lookup only where it may be. The table writer keeps one per open transaction and one
//! for the current epoch, so a COPY or an epoch of any size stays within bounded memory (the
//! write budget, plus filters of 2 to 4 bytes per spilled key up to the write budget again,
//! plus the first and last key of each filter).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use eddy_common::Result;
use eddy_storage::{EpochBatch, RunId, StateStore};

/// A key's hash, computed once per lookup and probed against every run's filter.
#[derive(Clone, Copy)]
struct KeyHash(u64);

impl KeyHash {
    fn of(key: &[u8]) -> Self {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        KeyHash(h.finish())
    }
}

/// Bits per block of a [`Bloom`]: one block is one cache line.
const BLOCK_BITS: u64 = 512;

/// Bits of a [`Bloom`] per key.
const BITS_PER_KEY: usize = 16;

/// Bits set per key (about `BITS_PER_KEY * ln 2`).
const PROBES: u64 = 11;

/// A filter over keys spilled into one run: their smallest and largest key (table keys start
/// with a vnode, a hash of the primary key, so this mostly tells tables apart) and a blocked
/// Bloom filter (16 bits and 11 probes per
/// key of capacity, all probes of a key in one 64-byte block: about 0.1% false positives and
/// one cache miss per probe). A false positive costs a point read of the store: at 10 bits per
/// key (1%) a 5M-row COPY spent a quarter of its CPU on such reads.
///
/// Spills fill a filter up to its capacity; the next one gets the capacity of all before it
/// (the run's total doubles), so a run of n keys in spills of s keys is probed through
/// O(log(n / s)) filters, not n / s (one cache miss each per key looked up: with a filter per
/// spill, 55 spills of a 5M-row COPY cost it a third more CPU), and holds at most twice the
/// bits its keys need (three times with twice the capacity of all before: 15 MB instead of
/// 10 for a 5M-row COPY).
#[derive(Debug)]
struct Bloom {
    bits: Vec<u64>,
    /// Keys the bits are sized for.
    capacity: usize,
    /// Keys added.
    len: usize,
    first: Vec<u8>,
    last: Vec<u8>,
    /// Folded to half its bits (see [`Bloom::fold`]).
    folded: bool,
}

impl Bloom {
    fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Bloom { bits: vec![0; Self::bytes_for(capacity) / 8], capacity, len: 0, first: Vec::new(), last: Vec::new(), folded: false }
    }

    /// Halves the bits, OR-ing each pair of adjacent blocks into one, when the filters of a set
    /// outgrow their budget. A key's block index is a multiply-shift of its hash by the block
    /// count, so with half the blocks it is half the index, and its probes keep their positions
    /// in the block: no key is lost. At 8 bits per key instead of 16, about 5% of absent keys
    /// pass instead of 0.1%. Once only: at 4 bits per key nearly half would. False if it
    /// cannot fold (again).
    fn fold(&mut self) -> bool {
        let words = BLOCK_BITS as usize / 64;
        let blocks = self.bits.len() / words;
        if self.folded || blocks < 2 || !blocks.is_multiple_of(2) {
            return false;
        }
        let mut bits = vec![0u64; blocks / 2 * words];
        for (i, w) in bits.iter_mut().enumerate() {
            let (block, word) = (i / words, i % words);
            *w = self.bits[2 * block * words + word] | self.bits[(2 * block + 1) * words + word];
        }
        self.bits = bits;
        self.folded = true;
        true
    }

    /// A filter of a key range only, with room for any number of keys: every key inside the
    /// range may be there (for spills past the set's filter budget, see [`WriteSet`]).
    fn range_only() -> Self {
        Bloom { bits: Vec::new(), capacity: usize::MAX, len: 0, first: Vec::new(), last: Vec::new(), folded: true }
    }

    /// Bytes of the bits of a filter for `capacity` keys: an even number of blocks, so it can
    /// fold.
    fn bytes_for(capacity: usize) -> usize {
        (capacity.max(1) * BITS_PER_KEY).div_ceil(2 * BLOCK_BITS as usize) * 2 * (BLOCK_BITS as usize / 8)
    }

    /// Bytes of its bits.
    fn bytes(&self) -> usize {
        self.bits.len() * 8
    }

    /// Room for `n` more keys.
    fn has_room(&self, n: usize) -> bool {
        self.len.saturating_add(n) <= self.capacity
    }

    fn add<'a>(&mut self, keys: impl Iterator<Item = &'a Vec<u8>>) {
        for k in keys {
            if self.len == 0 || k.as_slice() < self.first.as_slice() {
                self.first = k.clone();
            }
            if self.len == 0 || k.as_slice() > self.last.as_slice() {
                self.last = k.clone();
            }
            self.len += 1;
            if self.bits.is_empty() {
                continue;
            }
            for bit in self.probes(KeyHash::of(k)) {
                self.bits[bit / 64] |= 1 << (bit % 64);
            }
        }
    }

    /// The bit positions of a key: a block chosen by the hash's high half, [`PROBES`]
    /// positions in it by double hashing of the low half.
    fn probes(&self, hash: KeyHash) -> impl Iterator<Item = usize> {
        let blocks = self.bits.len() as u64 * 64 / BLOCK_BITS;
        let base = (((hash.0 >> 32) * blocks) >> 32) * BLOCK_BITS;
        let a = hash.0 & 0xffff_ffff;
        let b = (a.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) | 1;
        (0..PROBES).map(move |i| (base + (a.wrapping_add(i.wrapping_mul(b)) % BLOCK_BITS)) as usize)
    }

    fn may_contain(&self, key: &[u8], hash: KeyHash) -> bool {
        self.len > 0
            && key >= self.first.as_slice()
            && key <= self.last.as_slice()
            && (self.bits.is_empty() || self.probes(hash).all(|bit| self.bits[bit / 64] & (1 << (bit % 64)) != 0))
    }
}

/// Uncommitted changes and a way to read them back.
#[derive(Debug, Default)]
pub struct WriteSet {
    /// The changes, in order; spills to runs.
    batch: EpochBatch,
    /// Position in the batch's in-memory ops of the last write of every indexed key.
    index: HashMap<Vec<u8>, usize>,
    /// In-memory ops before this position are in `index`; later ones are indexed only when
    /// the set is first read ([`WriteSet::ensure_indexed`]), so a bulk load that never reads
    /// its own writes back (COPY into a table keyed by fresh row ids) builds no index.
    indexed: usize,
    /// Filters over the spilled keys, oldest first, each with the run its keys went into (a
    /// batch spills into its newest run, so one run's filters are adjacent); see [`Bloom`].
    blooms: Vec<(RunId, Bloom)>,
    /// Bytes the filters' bits may take (default: the state store's write budget, 16 MiB at
    /// the default `--memory-mb`: 8M keys at 16 bits). When a new filter would not fit, the
    /// filters fold to 8 bits per key ([`Bloom::fold`], 16M keys); spills past that get
    /// range-only filters. So a statement of any size holds bounded filters, and past 16M
    /// keys its lookups read the run (a SlateDB point read each).
    filter_limit: Option<usize>,
}

impl WriteSet {
    /// Records `key` = `value` (`None`: deleted).
    pub fn write(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        match value {
            Some(v) => self.batch.put(key, v),
            None => self.batch.delete(key),
        }
    }

    /// True without changes.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// The changes, for an owner that writes them in bulk (and reads them back only after a
    /// [`WriteSet::spill_now`], so no index is kept).
    pub fn batch_mut(&mut self) -> &mut EpochBatch {
        &mut self.batch
    }

    /// Changes not spilled yet.
    pub fn in_memory_len(&self) -> usize {
        self.batch.in_memory_len()
    }

    /// Moves the in-memory changes into the set's run (with a filter over their keys).
    pub async fn spill_now(&mut self, store: &StateStore) -> Result<()> {
        self.spill(store).await
    }

    /// The changes, filters dropped (for an owner that merges them into an epoch's batch).
    pub fn into_batch(self) -> EpochBatch {
        self.batch
    }

    /// Indexes the writes made since the last read; call before [`WriteSet::get`].
    pub fn ensure_indexed(&mut self) {
        let ops = self.batch.in_memory_ops();
        for (i, (k, _)) in ops.iter().enumerate().skip(self.indexed) {
            match self.index.get_mut(k.as_slice()) {
                Some(pos) => *pos = i,
                None => {
                    self.index.insert(k.clone(), i);
                }
            }
        }
        self.indexed = ops.len();
    }

    /// The set's view of `key`: `None` if it does not change it, else its current value.
    /// Sees the writes indexed by the last [`WriteSet::ensure_indexed`].
    pub async fn get(&self, store: &StateStore, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        if let Some(&pos) = self.index.get(key) {
            let v = self.batch.in_memory_ops().get(pos).map(|(_, v)| v.clone());
            return Ok(v);
        }
        let hash = KeyHash::of(key);
        // A run holds its newest spilled version of a key, so one read answers for all of the
        // run's spills.
        let mut read: Option<RunId> = None;
        for (run, bloom) in self.blooms.iter().rev() {
            if read == Some(*run) || !bloom.may_contain(key, hash) {
                continue;
            }
            if let Some(entry) = store.run_get(*run, key).await? {
                return Ok(Some(entry.map(|b| b.to_vec())));
            }
            read = Some(*run);
        }
        Ok(None)
    }

    /// The set's changes to keys starting with `prefix`, in key order (`None`: deleted), the
    /// newest of each key: its runs' entries, oldest run first, then the in-memory ones.
    pub async fn scan_prefix(&self, store: &StateStore, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Option<Vec<u8>>)>> {
        let mut changes: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> = Default::default();
        for &run in self.batch.runs() {
            for (k, v) in store.run_scan_prefix(run, prefix).await? {
                changes.insert(k, v.map(|b| b.to_vec()));
            }
        }
        for (k, v) in self.batch.in_memory_ops().iter().filter(|(k, _)| k.starts_with(prefix)) {
            changes.insert(k.clone(), v.clone());
        }
        Ok(changes.into_iter().collect())
    }

    /// Moves the in-memory changes into the batch's run.
    async fn spill(&mut self, store: &StateStore) -> Result<()> {
        if self.batch.in_memory_len() == 0 {
            return Ok(());
        }
        let n = self.batch.in_memory_len();
        let keys = || self.batch.in_memory_ops().iter().map(|(k, _)| k);
        let run = self.batch.runs().last().copied();
        match self.blooms.last_mut() {
            Some((r, bloom)) if Some(*r) == run && bloom.has_room(n) => bloom.add(keys()),
            _ => {
                let before: usize = self.blooms.iter().filter(|(r, _)| Some(*r) == run).map(|(_, b)| b.capacity).sum();
                let want = n.max(before);
                let limit = self.filter_limit.unwrap_or_else(|| store.write_memory().limit());
                // Keys the budget has room for at full resolution.
                let room = |blooms: &[(RunId, Bloom)]| {
                    let used: usize = blooms.iter().map(|(_, b)| b.bytes()).sum();
                    (limit.saturating_sub(used) / Bloom::bytes_for(1)) * (Bloom::bytes_for(1) * 8 / BITS_PER_KEY)
                };
                if room(&self.blooms) < want {
                    for (_, b) in &mut self.blooms {
                        b.fold();
                    }
                }
                let room = room(&self.blooms);
                let mut bloom = if room >= n { Bloom::with_capacity(want.min(room)) } else { Bloom::range_only() };
                bloom.add(keys());
                // Tagged with the run once the spill names it (a batch without runs mints one).
                self.blooms.push((run.unwrap_or_default(), bloom));
            }
        }
        // On error the keys stay in memory (and in the index); the filter only over-approximates.
        self.batch.spill(store).await?;
        let Some(&run) = self.batch.runs().last() else {
            return Err(eddy_common::internal_err!("a spill left its batch without a run"));
        };
        if let Some(last) = self.blooms.last_mut() {
            last.0 = run;
        }
        self.index.clear();
        self.indexed = 0;
        Ok(())
    }

    /// Spills the in-memory changes to a run when the store's shared write budget calls for
    /// it (see `EpochBatch::spill_if_over_budget`).
    pub async fn spill_if_large(&mut self, store: &StateStore) -> Result<()> {
        if self.batch.charge_to(store.write_memory()) {
            self.spill(store).await?;
        }
        Ok(())
    }

    /// Appends `later`'s changes after this set's (a later write to a key wins).
    pub async fn absorb(&mut self, store: &StateStore, later: WriteSet) -> Result<()> {
        if !later.batch.runs().is_empty() {
            // An EpochBatch orders its runs before its in-memory tail: this set's tail goes into
            // a run first, so the later runs come after it.
            self.spill(store).await?;
        }
        // `later`'s in-memory ops land after this set's: they are indexed on the next read.
        self.batch.extend(later.batch);
        self.blooms.extend(later.blooms);
        Ok(())
    }

    /// The changes, for the epoch's commit. A set that spilled also spills its tail, so the
    /// commit only makes runs live instead of writing the tail over them.
    pub async fn seal(mut self, store: &StateStore) -> Result<EpochBatch> {
        if !self.batch.runs().is_empty() {
            self.spill(store).await?;
        }
        Ok(self.batch)
    }

    /// Drops the changes, deleting what was spilled.
    pub async fn discard(self, store: &StateStore) {
        if let Err(e) = self.batch.discard(store).await {
            // Runs left behind are deleted when the store next opens.
            tracing::warn!("could not delete the spilled runs of an aborted write: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys 0, 2, ..., 19,998 (as big-endian u32) and a filter holding them.
    fn filter_of_even_keys() -> (Vec<Vec<u8>>, Bloom) {
        let keys: Vec<Vec<u8>> = (0..10_000u32).map(|i| (2 * i).to_be_bytes().to_vec()).collect();
        let mut b = Bloom::with_capacity(keys.len());
        b.add(keys.iter());
        (keys, b)
    }

    /// How many of the 10,000 odd keys (inside the filter's key range, none in it) `b` passes.
    fn odd_false_positives(b: &Bloom) -> usize {
        (0..10_000u32).map(|i| (2 * i + 1).to_be_bytes()).filter(|k| b.may_contain(k, KeyHash::of(k))).count()
    }

    #[test]
    fn a_bloom_filter_has_no_false_negatives_and_few_false_positives() {
        let (keys, b) = filter_of_even_keys();
        assert!(keys.iter().all(|k| b.may_contain(k, KeyHash::of(k))));
        let false_positives = odd_false_positives(&b);
        assert!(false_positives < 50, "{false_positives} false positives in 10,000");
    }

    #[tokio::test]
    async fn many_spills_go_into_one_run_through_few_filters_and_read_back_their_newest_values() {
        use eddy_storage::StoreOptions;
        let store = StateStore::open(&StoreOptions::default()).await.unwrap();
        let key = |i: u32| [&[0, 0, 0, 7][..], &i.to_be_bytes()].concat();
        let mut set = WriteSet::default();
        for spill in 0..40u32 {
            // Each spill rewrites the keys of the ones before and adds 100 new ones: 82,000 keys
            // added to filters in 40 spills, through filters of 100, 200, 300, 600, 1,200, ...
            // keys (each new one as large as all before it): 11, where one per spill made 40.
            for i in 0..100 * (spill + 1) {
                set.write(key(i), Some(spill.to_be_bytes().to_vec()));
            }
            set.spill(&store).await.unwrap();
        }
        set.write(key(5), None);
        set.ensure_indexed();
        assert_eq!(set.batch.runs().len(), 1);
        assert!(set.blooms.len() <= 12, "{} filters for 40 spills", set.blooms.len());
        assert_eq!(set.get(&store, &key(5)).await.unwrap(), Some(None));
        for i in [0, 99, 100, 3999] {
            assert_eq!(set.get(&store, &key(i)).await.unwrap(), Some(Some(39u32.to_be_bytes().to_vec())), "key {i}");
        }
        assert_eq!(set.get(&store, &key(4000)).await.unwrap(), None);
    }

    #[tokio::test]
    async fn filters_stay_within_their_budget_and_keys_past_it_still_read_back() {
        use eddy_storage::StoreOptions;
        let store = StateStore::open(&StoreOptions::default()).await.unwrap();
        let key = |i: u32| [&[0, 0, 0, 7][..], &(i.wrapping_mul(2_654_435_761)).to_be_bytes()].concat();
        // Room for the bits of 2,048 keys; 20 spills of 1,000 random keys each.
        let limit = Bloom::bytes_for(2048);
        let mut set = WriteSet { filter_limit: Some(limit), ..WriteSet::default() };
        for spill in 0..20u32 {
            for i in spill * 1000..(spill + 1) * 1000 {
                set.write(key(i), Some(i.to_be_bytes().to_vec()));
            }
            set.spill(&store).await.unwrap();
        }
        let bytes: usize = set.blooms.iter().map(|(_, b)| b.bytes()).sum();
        assert!(bytes <= limit, "filters hold {bytes} bytes, over their {limit}");
        assert!(set.blooms.iter().any(|(_, b)| b.bits.is_empty()), "no spill went past the budget");
        set.ensure_indexed();
        for i in (0..20_000u32).step_by(97) {
            assert_eq!(set.get(&store, &key(i)).await.unwrap(), Some(Some(i.to_be_bytes().to_vec())), "key {i}");
        }
        assert_eq!(set.get(&store, &key(20_001)).await.unwrap(), None);
    }

    #[test]
    fn a_folded_filter_keeps_every_key_and_passes_few_absent_ones() {
        let (keys, mut b) = filter_of_even_keys();
        let bytes = b.bytes();
        assert!(b.fold() && !b.fold());
        assert_eq!(b.bytes(), bytes / 2);
        assert!(keys.iter().all(|k| b.may_contain(k, KeyHash::of(k))));
        let false_positives = odd_false_positives(&b);
        assert!(false_positives < 800, "{false_positives} false positives in 10,000");
    }

    #[test]
    fn keys_outside_a_runs_range_are_not_probed() {
        let keys: Vec<Vec<u8>> = (100..200u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let mut b = Bloom::with_capacity(keys.len());
        b.add(keys.iter());
        // Every bit set: only the range can answer no.
        b.bits.fill(u64::MAX);
        let probe = |i: u32| b.may_contain(&i.to_be_bytes(), KeyHash::of(&i.to_be_bytes()));
        assert!(!probe(99) && !probe(200));
        assert!(probe(100) && probe(150) && probe(199));
    }
}
