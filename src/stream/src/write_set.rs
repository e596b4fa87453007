//! [`WriteSet`]: uncommitted key-value changes that stay readable by their writer: an
//! [`EpochBatch`] (which spills to runs in the state store when the shared write budget runs out) plus an index of the
//! keys still in memory and a Bloom filter per spilled run, so reading a key back costs a
//! store lookup only where it may be. The table writer keeps one per open transaction and one
//! for the current epoch, so a COPY or an epoch of any size stays within bounded memory (the
//! write budget plus 1.25 bytes per spilled key).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use eddy_common::Result;
use eddy_storage::{EpochBatch, StateStore};

/// A Bloom filter over the keys of one spilled run (10 bits and 7 probes per key: about 1%
/// false positives).
#[derive(Debug)]
struct Bloom {
    bits: Vec<u64>,
}

impl Bloom {
    fn new<'a>(keys: impl ExactSizeIterator<Item = &'a Vec<u8>>) -> Self {
        let n = keys.len().max(1);
        let words = (n * 10).div_ceil(64);
        let mut b = Bloom { bits: vec![0; words] };
        for k in keys {
            for bit in b.probes(k) {
                b.bits[bit / 64] |= 1 << (bit % 64);
            }
        }
        b
    }

    fn probes(&self, key: &[u8]) -> impl Iterator<Item = usize> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        let h1 = h.finish();
        let h2 = h1.rotate_left(32) | 1;
        let m = (self.bits.len() * 64) as u64;
        (0..7u64).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % m) as usize)
    }

    fn may_contain(&self, key: &[u8]) -> bool {
        self.probes(key).all(|bit| self.bits[bit / 64] & (1 << (bit % 64)) != 0)
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
    /// One filter per spilled run of `batch`, in the same order.
    blooms: Vec<Bloom>,
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
        for (run, bloom) in self.batch.runs().iter().zip(&self.blooms).rev() {
            if !bloom.may_contain(key) {
                continue;
            }
            if let Some(entry) = store.run_get(*run, key).await? {
                return Ok(Some(entry.map(|b| b.to_vec())));
            }
        }
        Ok(None)
    }

    /// Moves the in-memory changes into a new run.
    async fn spill(&mut self, store: &StateStore) -> Result<()> {
        if self.batch.in_memory_len() == 0 {
            return Ok(());
        }
        let bloom = Bloom::new(self.batch.in_memory_ops().iter().map(|(k, _)| k));
        self.batch.spill(store).await?;
        self.blooms.push(bloom);
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

    #[test]
    fn a_bloom_filter_has_no_false_negatives_and_few_false_positives() {
        let keys: Vec<Vec<u8>> = (0..10_000u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let b = Bloom::new(keys.iter());
        assert!(keys.iter().all(|k| b.may_contain(k)));
        let false_positives = (10_000..20_000u32).filter(|i| b.may_contain(&i.to_be_bytes())).count();
        assert!(false_positives < 300, "{false_positives} false positives in 10,000");
    }
}
