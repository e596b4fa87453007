//! Background upkeep of spill runs: folding live runs into base keys and deleting garbage runs
//! (see [`crate::runs`] for the layout and invariants).
//!
//! Contract:
//! * [`StateStore::fold_step`] moves at most `max_entries` entries of the *oldest* live run into
//!   base keys in one atomic write, under the commit lock, reading the run from the current
//!   state of the database (which, under that lock, is the last committed epoch plus writes to
//!   runs that are not live). No read changes: snapshots before and after a step agree. The
//!   lock is released between steps, so commits wait for at most one bounded step.
//! * Fold steps are not flushed on their own: a later commit's flush makes them durable (the
//!   WAL is ordered), and losing unflushed steps in a crash loses no data, since each step is
//!   atomic and changes no read.
//! * [`StateStore::discard_run`] deletes a run that is not live, in bounded batches (SlateDB
//!   0.18 has no range delete). A discarded run can no longer be committed.
//! * [`StateStore::discard_garbage_runs`] discards every run of an older generation that is not
//!   live: such a run can never become live (a commit only accepts runs of the current
//!   generation). It runs in the background after every open and recovery.
//! * The background task holds only a weak reference to the store, and `StateStore::close`
//!   stops it before closing SlateDB.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use eddy_common::{internal_err, EddyError, Result};
use slatedb::WriteBatch;
use tokio::sync::watch;

use crate::background::FoldCursor;
use crate::runs::{self, RunId, RUN_PREFIX};
use crate::scan::{prefix_bounds, prefix_end, storage_err};
use crate::slate::{add_ops, bounded};
use crate::store::StateStore;

/// Run entries deleted per SlateDB write when discarding a run.
const DISCARD_CHUNK_ENTRIES: usize = 8192;



impl StateStore {
    /// Starts the background task (once).
    pub(crate) fn start_maintenance(self: &Arc<Self>) {
        let mut task = self.maintenance.task.lock();
        if task.is_some() {
            return;
        }
        let weak = Arc::downgrade(self);
        let stop = self.maintenance.stop.subscribe();
        *task = Some(tokio::spawn(maintenance_loop(weak, stop)));
    }

    /// Stops the background task and waits (bounded) for it to finish its current step.
    pub(crate) async fn stop_maintenance(&self) {
        // Fails only when the task already ended and dropped its receiver: nothing to stop.
        let _ = self.maintenance.stop.send(true);
        let task = self.maintenance.task.lock().take();
        if let Some(task) = task {
            if tokio::time::timeout(self.tuning.close_timeout, task).await.is_err() {
                tracing::warn!("state store maintenance did not stop within {:?}", self.tuning.close_timeout);
            }
        }
    }

    /// Moves up to `max_entries` entries of the oldest live run into base keys (see the module
    /// docs). Returns whether live runs remain.
    pub async fn fold_step(&self, max_entries: usize) -> Result<bool> {
        let max_entries = max_entries.max(1);
        let guard = self.commit_lock.lock().await;
        if self.needs_recovery() {
            return Err(EddyError::external("state store awaits recovery after a failed commit"));
        }
        let committed = self.committed_state();
        let live = committed.snapshot.live_runs().to_vec();
        let Some(&oldest) = live.first() else {
            return Ok(false);
        };
        let inc = self.incarnation();
        let (start, end) = prefix_bounds(&runs::run_prefix(oldest));
        let resume = self.maintenance.fold_cursor.lock().clone().filter(|c| c.generation == inc.generation && c.run == oldest);
        let start = match resume {
            Some(c) => Bound::Excluded(c.key),
            None => start.map(Bytes::from),
        };
        let mut iter = inc.db.scan((start, end.map(Bytes::from))).await.map_err(storage_err)?;
        let mut entries = Vec::new();
        let mut exhausted = true;
        while let Some(kv) = iter.next().await.map_err(storage_err)? {
            if entries.len() == max_entries {
                exhausted = false;
                break;
            }
            entries.push((kv.key, kv.value));
        }
        drop(iter);
        let (writes, next_live) = runs::fold_writes(oldest, &entries, exhausted, &live)?;
        let last = entries.last().map(|(k, _)| k.clone());
        let mut wb = WriteBatch::new();
        add_ops(&mut wb, writes);
        bounded(self.tuning.commit_timeout, "fold step", inc.db.write(wb)).await?;
        *self.maintenance.fold_cursor.lock() = match last {
            Some(key) if !exhausted => Some(FoldCursor { generation: inc.generation, run: oldest, key }),
            _ => None,
        };
        let snapshot = inc.db.snapshot().map_err(storage_err)?;
        let remaining = !next_live.is_empty();
        if exhausted {
            self.forget_run_bounds(oldest);
        }
        self.set_committed(committed.epoch, self.read_snapshot(committed.epoch, snapshot, next_live));
        drop(guard);
        Ok(remaining)
    }

    /// Deletes every entry of `run`, which must not be live, and makes it uncommittable.
    /// Returns the number of entries deleted.
    pub async fn discard_run(&self, run: RunId) -> Result<usize> {
        {
            // Under the commit lock, so no commit can make the run live in between.
            let _state = self.commit_lock.lock().await;
            if self.snapshot().live_runs().contains(&run) {
                return Err(internal_err!("run {run:#x} is live and cannot be discarded"));
            }
            self.discarded.lock().insert(run);
            self.forget_run_bounds(run);
        }
        let (start, end) = prefix_bounds(&runs::run_prefix(run));
        let mut deleted = 0;
        loop {
            let inc = self.incarnation();
            let mut iter =
                inc.db.scan((start.clone().map(Bytes::from), end.clone().map(Bytes::from))).await.map_err(storage_err)?;
            let mut wb = WriteBatch::new();
            let mut n = 0;
            while n < DISCARD_CHUNK_ENTRIES {
                let Some(kv) = iter.next().await.map_err(storage_err)? else { break };
                wb.delete(kv.key);
                n += 1;
            }
            drop(iter);
            if n == 0 {
                return Ok(deleted);
            }
            bounded(self.tuning.commit_timeout, "discard run", inc.db.write(wb)).await?;
            deleted += n;
        }
    }

    /// Discards every run of an older generation that is not live. Returns how many runs.
    pub async fn discard_garbage_runs(&self) -> Result<usize> {
        let generation = self.generation();
        let end = prefix_end(RUN_PREFIX).map(Bytes::from).map_or(Bound::Unbounded, Bound::Excluded);
        let mut from = RUN_PREFIX.to_vec();
        let mut discarded = 0;
        loop {
            let inc = self.incarnation();
            let mut iter =
                inc.db.scan((Bound::Included(Bytes::from(from.clone())), end.clone())).await.map_err(storage_err)?;
            let Some(kv) = iter.next().await.map_err(storage_err)? else { return Ok(discarded) };
            drop(iter);
            let Some((run, _)) = runs::split_run_key(&kv.key) else {
                return Err(internal_err!("malformed run key {:?}", kv.key));
            };
            if runs::run_generation(run) >= generation {
                return Ok(discarded);
            }
            if !self.snapshot().live_runs().contains(&run) {
                self.discard_run(run).await?;
                discarded += 1;
            }
            from = runs::run_prefix(run + 1);
        }
    }
}

/// The background task: collects garbage when asked, folds while live runs remain, otherwise
/// sleeps until woken, stopped, or `maintenance_interval` passes.
async fn maintenance_loop(store: Weak<StateStore>, mut stop: watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            return;
        }
        let Some(s) = store.upgrade() else { return };
        // Fenced by another process (noticed here even while no commit runs): this process
        // writes nothing more.
        if s.note_if_fenced(&s.incarnation().db) {
            return;
        }
        let mut busy = false;
        if s.maintenance.gc_pending.swap(false, Ordering::SeqCst) {
            match s.discard_garbage_runs().await {
                Ok(n) if n > 0 => tracing::info!("state store discarded {n} uncommitted runs"),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("state store garbage collection failed (will retry): {}", e.message);
                    s.maintenance.gc_pending.store(true, Ordering::SeqCst);
                }
            }
        }
        // A store awaiting recovery cannot fold; the next commit (or `recover`) fixes that.
        if !s.needs_recovery() {
            match s.fold_step(s.tuning.fold_chunk_entries).await {
                Ok(more) => busy = more,
                Err(e) => tracing::warn!("state store fold step failed (will retry): {}", e.message),
            }
        }
        let wake = s.maintenance.wake.clone();
        let interval = s.tuning.maintenance_interval;
        drop(s);
        if busy {
            tokio::task::yield_now().await;
            continue;
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = stop.changed() => {}
            _ = tokio::time::sleep(interval) => {}
        }
    }
}
