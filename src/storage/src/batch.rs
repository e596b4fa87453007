//! [`EpochBatch`]: the changes of one epoch, in memory and in spilled runs.
//!
//! Contract:
//! * Logical order inside one batch: its runs in list order, then its in-memory tail; a later
//!   op on the same key wins. [`EpochBatch::spill`] preserves that order: it moves the tail,
//!   sorted and with the last op per key, into the batch's newest run (a new one if it has
//!   none), where SlateDB's own ordering makes each key's later write replace the earlier one.
//!   So a batch of any size is one run (more only after [`EpochBatch::extend`]), and a reader
//!   merges one source per batch, not one per spill.
//! * Nothing a batch does is visible to readers before the state store's commit makes the batch's
//!   runs live and writes its tail, atomically. Spilling writes to SlateDB without waiting for
//!   durability: the commit's own flush makes the runs durable together with everything else.
//! * A batch that will never be committed (statement aborted) should hand its runs to
//!   [`EpochBatch::discard`]; runs forgotten anyway are deleted when the store next opens.
//! * [`EpochBatch::extend`] appends the other batch's runs and tail after this batch's. That
//!   reorders this batch's tail after the other's runs, which is only correct when the two
//!   batches touch disjoint keys. The barrier manager combines the batches of different
//!   actors, which own disjoint keys, exactly so.

use std::sync::Arc;

use bytes::Bytes;
use eddy_common::Result;

use crate::memory::MemoryBudget;
use crate::runs::{self, Op, RunId, RunStore};

/// Estimated per-op bookkeeping bytes on top of key and value (vector slots, allocations).
const OP_OVERHEAD_BYTES: usize = 48;

/// Largest number of entries one SlateDB write of a spill carries, so a huge spill reaches
/// SlateDB in pieces its backpressure can pace.
const SPILL_WRITE_ENTRIES: usize = 8192;

pub use crate::memory::MIN_SPILL_BYTES;

/// Changes of one epoch, applied in order (a later op on the same key wins).
#[derive(Debug, Default)]
pub struct EpochBatch {
    /// In-memory ops, in the order they were made.
    ops: Vec<Op>,
    /// Approximate heap bytes of `ops`.
    bytes: usize,
    /// Spilled runs, oldest first.
    runs: Vec<RunId>,
    /// Entries written to `runs` (after deduplication per run).
    spilled_entries: usize,
    /// The shared write budget this batch's in-memory bytes are charged to, and how many
    /// (see [`EpochBatch::spill_if_over_budget`]); released when the ops leave memory.
    charge: Option<(Arc<MemoryBudget>, usize)>,
}

impl Drop for EpochBatch {
    fn drop(&mut self) {
        self.release();
    }
}

impl EpochBatch {
    /// Sets `key` to `value`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.bytes += key.len() + value.len() + OP_OVERHEAD_BYTES;
        self.ops.push((key, Some(value)));
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        self.bytes += key.len() + OP_OVERHEAD_BYTES;
        self.ops.push((key, None));
    }

    /// Appends all of `other`'s runs and ops after this batch's. The two batches are expected
    /// to touch disjoint keys (see the module docs).
    pub fn extend(&mut self, mut other: EpochBatch) {
        other.release();
        self.ops.append(&mut other.ops);
        self.bytes += std::mem::take(&mut other.bytes);
        self.runs.append(&mut other.runs);
        self.spilled_entries += std::mem::take(&mut other.spilled_entries);
    }

    /// The in-memory ops, in order.
    pub fn in_memory_ops(&self) -> &[Op] {
        &self.ops
    }

    /// Returns the bytes charged to the write budget.
    fn release(&mut self) {
        if let Some((budget, bytes)) = self.charge.take() {
            budget.shrink(bytes);
        }
    }

    /// Number of ops: in memory plus spilled (spilled ops counted once per key and spill).
    pub fn len(&self) -> usize {
        self.ops.len() + self.spilled_entries
    }

    /// True if the batch holds no ops, in memory or spilled.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.runs.is_empty()
    }

    /// Approximate bytes of memory the in-memory ops use.
    pub fn approx_bytes(&self) -> usize {
        self.bytes
    }

    /// Number of ops held in memory.
    pub fn in_memory_len(&self) -> usize {
        self.ops.len()
    }

    /// Spilled runs, oldest first.
    pub fn runs(&self) -> &[RunId] {
        &self.runs
    }

    /// The in-memory ops, in order (what the commit writes on base keys).
    pub(crate) fn into_parts(mut self) -> (Vec<Op>, Vec<RunId>) {
        self.release();
        (std::mem::take(&mut self.ops), std::mem::take(&mut self.runs))
    }

    /// Charges the in-memory ops to `budget` (the state store's shared write budget) and
    /// spills them when this batch alone holds half of it, or when the budget is exhausted and
    /// the batch holds at least [`MIN_SPILL_BYTES`]. So the epochs of ordinary statements stay
    /// in memory and commit straight onto base keys, while all unspilled batches together stay
    /// within about the budget (plus `MIN_SPILL_BYTES` per batch).
    pub async fn spill_if_over_budget(&mut self, store: &impl RunStore, budget: &Arc<MemoryBudget>) -> Result<()> {
        if self.charge_to(budget) {
            self.spill(store).await?;
        }
        Ok(())
    }

    /// Charges the in-memory ops to `budget` and says whether they should spill now (the
    /// policy of [`EpochBatch::spill_if_over_budget`], for owners that spill themselves).
    pub fn charge_to(&mut self, budget: &Arc<MemoryBudget>) -> bool {
        let charged = match &mut self.charge {
            Some((b, charged)) if Arc::ptr_eq(b, budget) => charged,
            _ => {
                self.release();
                &mut self.charge.insert((budget.clone(), 0)).1
            }
        };
        if self.bytes >= *charged {
            budget.grow(self.bytes - *charged);
        } else {
            budget.shrink(*charged - self.bytes);
        }
        *charged = self.bytes;
        budget.calls_for_spill(self.bytes)
    }

    /// Spills the in-memory ops to a new run if they take more than `limit_bytes`.
    pub async fn spill_if_over(&mut self, store: &impl RunStore, limit_bytes: usize) -> Result<()> {
        if self.bytes > limit_bytes {
            self.spill(store).await?;
        }
        Ok(())
    }

    /// Writes the in-memory ops (sorted, last op per key) into the batch's newest run, or a
    /// new run, and clears them. A no-op when nothing is in memory. On error the ops stay in
    /// memory: a partly written new run is garbage (deleted on the next open); entries partly
    /// written into an existing run are the newest versions of keys whose ops are still in
    /// memory, so they are written again (a later spill) or overwritten and deleted from the
    /// run by the commit (see `runs::commit_writes`).
    pub async fn spill(&mut self, store: &impl RunStore) -> Result<()> {
        self.spill_into(store, self.runs.last().copied()).await
    }

    /// Like [`EpochBatch::spill`], but always into a new run, which becomes the batch's newest
    /// (so the ops keep their place after the batch's other runs). The state store's commit
    /// writes a large tail so: a run of its own keeps its key bounds apart from the others'.
    pub(crate) async fn spill_to_new_run(&mut self, store: &impl RunStore) -> Result<()> {
        self.spill_into(store, None).await
    }

    /// Spills into `newest` (the batch's newest run) or, if `None`, a new run.
    async fn spill_into(&mut self, store: &impl RunStore, newest: Option<RunId>) -> Result<()> {
        if self.ops.is_empty() {
            return Ok(());
        }
        for (key, _) in &self.ops {
            runs::check_user_key(key)?;
        }
        // Sorted with the last op per key is equivalent to the ops in batch order, so on error
        // the sorted ops go back into memory instead of a copy kept just in case.
        let sorted = runs::sort_last_wins(std::mem::take(&mut self.ops));
        let written = async {
            let run = match newest {
                Some(run) => run,
                None => store.mint_run_id()?,
            };
            for chunk in sorted.chunks(SPILL_WRITE_ENTRIES) {
                store.write_run_entries(run, chunk).await?;
            }
            Ok::<_, eddy_common::EddyError>(run)
        }
        .await;
        let run = match written {
            Ok(run) => run,
            Err(e) => {
                self.ops = sorted;
                return Err(e);
            }
        };
        self.spilled_entries += sorted.len();
        if newest != Some(run) {
            self.runs.push(run);
        }
        self.ops.clear();
        self.bytes = 0;
        self.release();
        Ok(())
    }

    /// This batch's own (uncommitted) view of `key`: `None` if the batch does not touch it,
    /// `Some(None)` if it deletes it, `Some(Some(v))` if it sets it to `v`.
    pub async fn lookup(&self, store: &impl RunStore, key: &[u8]) -> Result<Option<Option<Bytes>>> {
        if let Some((_, v)) = self.ops.iter().rev().find(|(k, _)| k.as_slice() == key) {
            return Ok(Some(v.clone().map(Bytes::from)));
        }
        for run in self.runs.iter().rev() {
            if let Some(entry) = store.run_get(*run, key).await? {
                return Ok(Some(entry));
            }
        }
        Ok(None)
    }

    /// Drops the batch, deleting its spilled runs (for a batch that will never commit).
    pub async fn discard(mut self, store: &impl RunStore) -> Result<()> {
        self.release();
        for run in std::mem::take(&mut self.runs) {
            store.discard_run(run).await?;
        }
        Ok(())
    }
}
