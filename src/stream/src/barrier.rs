//! [`BarrierManager`]: assigns epochs and commits them.
//!
//! Contract:
//! * A writer hands its changes to [`BarrierManager::commit_writes`] and gets back the epoch
//!   that contains them, only after that epoch is durably committed ("acknowledged means
//!   durable", DESIGN.md "Durable DML").
//! * Group commit: a waiting writer asks for an early barrier; every write submitted before
//!   that barrier is cut shares its single commit. Writes submitted while a commit is in flight
//!   go into the next epoch.
//! * Without writers, a barrier is cut every `interval`; an epoch with no changes is not
//!   written, so an idle server does no I/O.
//! * If a commit fails, every writer in it gets the error and none of its changes is visible.

use std::sync::Arc;
use std::time::Duration;

use eddy_common::{EddyError, Epoch, Result};
use eddy_storage::{EpochBatch, StateStore};
use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};

/// Changes and waiters collected for the next epoch.
#[derive(Default)]
struct Pending {
    /// All changes submitted since the last barrier, in submission order.
    batch: EpochBatch,
    /// Writers waiting for the epoch that will contain their changes.
    waiters: Vec<oneshot::Sender<Result<Epoch>>>,
}

/// Cuts epochs and commits them to the [`StateStore`].
pub struct BarrierManager {
    /// Where epochs are committed.
    store: Arc<StateStore>,
    /// What the next barrier will commit.
    pending: Mutex<Pending>,
    /// Wakes the barrier loop for an early barrier.
    wake: Notify,
    /// Set once shutdown begins; later writes are refused.
    stopping: std::sync::atomic::AtomicBool,
    /// Held while cutting a barrier, so the loop and shutdown never cut the same epoch.
    cutting: tokio::sync::Mutex<()>,
}

impl BarrierManager {
    /// Starts the barrier loop, cutting a barrier every `interval` and on demand.
    pub fn start(store: Arc<StateStore>, interval: Duration) -> Arc<Self> {
        let mgr = Arc::new(Self {
            store,
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
            stopping: std::sync::atomic::AtomicBool::new(false),
            cutting: tokio::sync::Mutex::new(()),
        });
        let weak = Arc::downgrade(&mgr);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let Some(mgr) = weak.upgrade() else { break };
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = mgr.wake.notified() => {}
                }
                mgr.cut_and_commit().await;
            }
        });
        mgr
    }

    /// The store epochs are committed to.
    pub fn store(&self) -> &Arc<StateStore> {
        &self.store
    }

    /// Cuts a barrier: takes everything pending and commits it as the next epoch.
    async fn cut_and_commit(&self) {
        let _cutting = self.cutting.lock().await;
        let Pending { batch, waiters } = std::mem::take(&mut *self.pending.lock());
        if batch.is_empty() && waiters.is_empty() {
            return;
        }
        let epoch = self.store.committed_epoch().next();
        let result = if batch.is_empty() {
            Ok(self.store.committed_epoch())
        } else {
            self.store.commit(epoch, batch).await.map(|_| epoch)
        };
        if let Err(e) = &result {
            tracing::error!("epoch {epoch} failed to commit: {e}");
        }
        for w in waiters {
            let _ = w.send(result.clone());
        }
    }

    /// Submits `batch` for the next epoch and waits until that epoch is durably committed.
    pub async fn commit_writes(&self, batch: EpochBatch) -> Result<Epoch> {
        if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(EddyError::user(eddy_common::error::sqlstate::ADMIN_SHUTDOWN, "the server is shutting down"));
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.pending.lock();
            p.batch.extend(batch);
            p.waiters.push(tx);
        }
        self.wake.notify_one();
        rx.await.map_err(|_| EddyError::internal("barrier loop stopped before committing"))?
    }

    /// Waits for the next barrier (`FLUSH`): everything submitted before the call is committed.
    pub async fn flush(&self) -> Result<Epoch> {
        self.commit_writes(EpochBatch::default()).await
    }

    /// Commits what is pending, then refuses further writes.
    pub async fn shutdown(&self) {
        self.stopping.store(true, std::sync::atomic::Ordering::SeqCst);
        self.cut_and_commit().await;
    }
}

#[cfg(test)]
mod tests {
    use eddy_storage::StoreOptions;

    use super::*;

    async fn manager(interval: Duration) -> Arc<BarrierManager> {
        let store = StateStore::open(&StoreOptions::default()).await.unwrap();
        BarrierManager::start(store, interval)
    }

    fn batch_with(key: &[u8]) -> EpochBatch {
        let mut b = EpochBatch::default();
        b.put(key.to_vec(), b"v".to_vec());
        b
    }

    #[tokio::test]
    async fn a_write_returns_only_after_its_epoch_is_committed_and_visible() {
        // A one-hour interval: only the early barrier can commit this write.
        let mgr = manager(Duration::from_secs(3600)).await;
        let epoch = mgr.commit_writes(batch_with(b"\0\0\0\x09a")).await.unwrap();
        assert_eq!(mgr.store().committed_epoch(), epoch);
        assert!(mgr.store().snapshot().get(b"\0\0\0\x09a").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn concurrent_writers_each_get_a_committed_epoch_in_order() {
        let mgr = manager(Duration::from_secs(3600)).await;
        let mut handles = Vec::new();
        for i in 0..32u8 {
            let mgr = mgr.clone();
            handles.push(tokio::spawn(async move { mgr.commit_writes(batch_with(&[0, 0, 0, 9, i])).await }));
        }
        let mut epochs = Vec::new();
        for h in handles {
            epochs.push(h.await.unwrap().unwrap());
        }
        let last = mgr.store().committed_epoch();
        assert!(epochs.iter().all(|e| *e <= last));
        assert_eq!(mgr.store().snapshot().scan_prefix(&[0, 0, 0, 9]).await.unwrap().len(), 32);
    }

    #[tokio::test]
    async fn an_idle_manager_commits_nothing() {
        let mgr = manager(Duration::from_millis(5)).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(mgr.store().committed_epoch(), Epoch::ZERO);
    }

    #[tokio::test]
    async fn flush_waits_for_a_barrier_even_without_changes() {
        let mgr = manager(Duration::from_secs(3600)).await;
        assert_eq!(mgr.flush().await.unwrap(), Epoch::ZERO);
    }

    #[tokio::test]
    async fn writes_after_shutdown_are_refused() {
        let mgr = manager(Duration::from_secs(3600)).await;
        mgr.shutdown().await;
        assert!(mgr.commit_writes(batch_with(b"\0\0\0\x09z")).await.is_err());
    }
}
