//! [`WriteSet`]: uncommitted key-value changes that stay readable by their writer: an
//! [`EpochBatch`] (which spills to runs in the state store when it grows) plus an index of the
//! keys still in memory. The table writer keeps one per open transaction and one for the
//! current epoch, so a COPY or an epoch of any size stays within bounded memory.

use std::collections::HashMap;

use eddy_common::Result;
use eddy_storage::{EpochBatch, StateStore};

/// In-memory bytes after which a write set spills to a run.
pub const SPILL_BYTES: usize = 64 << 20;

/// Uncommitted changes and a way to read them back.
#[derive(Debug, Default)]
pub struct WriteSet {
    /// The changes, in order; spills to runs.
    batch: EpochBatch,
    /// Current value of every key changed since the last spill (`None` = deleted).
    index: HashMap<Vec<u8>, Option<Vec<u8>>>,
}

impl WriteSet {
    /// Records `key` = `value` (`None`: deleted).
    pub fn write(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        match &value {
            Some(v) => self.batch.put(key.clone(), v.clone()),
            None => self.batch.delete(key.clone()),
        }
        self.index.insert(key, value);
    }

    /// True without changes.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// The set's view of `key`: `None` if it does not change it, else its current value.
    pub async fn get(&self, store: &StateStore, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        if let Some(v) = self.index.get(key) {
            return Ok(Some(v.clone()));
        }
        for run in self.batch.runs().iter().rev() {
            if let Some(entry) = store.run_get(*run, key).await? {
                return Ok(Some(entry.map(|b| b.to_vec())));
            }
        }
        Ok(None)
    }

    /// Spills the in-memory changes to a run once they exceed [`SPILL_BYTES`].
    pub async fn spill_if_large(&mut self, store: &StateStore) -> Result<()> {
        if self.batch.approx_bytes() > SPILL_BYTES {
            self.batch.spill(store).await?;
            self.index.clear();
        }
        Ok(())
    }

    /// Appends `later`'s changes after this set's (a later write to a key wins).
    pub async fn absorb(&mut self, store: &StateStore, later: WriteSet) -> Result<()> {
        if !later.batch.runs().is_empty() && self.batch.in_memory_len() > 0 {
            // An EpochBatch orders its runs before its in-memory tail: move this set's tail
            // into a run first, so the later runs come after it.
            self.batch.spill(store).await?;
            self.index.clear();
        }
        if !later.batch.runs().is_empty() {
            // Keys of `later`'s runs may be in this index with older values.
            self.index.clear();
        }
        self.batch.extend(later.batch);
        self.index.extend(later.index);
        Ok(())
    }

    /// The changes, for the epoch's commit.
    pub fn into_batch(self) -> EpochBatch {
        self.batch
    }

    /// Drops the changes, deleting what was spilled.
    pub async fn discard(self, store: &StateStore) {
        if let Err(e) = self.batch.discard(store).await {
            // Runs left behind are deleted when the store next opens.
            tracing::warn!("could not delete the spilled runs of an aborted write: {e}");
        }
    }
}
