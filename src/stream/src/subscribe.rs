//! [`Subscription`]: one client following a relation's change stream (`SUBSCRIBE`), handed
//! each epoch's changes only once that epoch is durably committed.
//!
//! A subscription is an extra output of the relation's actor, added by a barrier's
//! [`crate::Mutation::add_outputs`] like a new view's input, so its channel carries exactly the
//! changes of the epochs after that barrier. It takes part in no barrier: a drain task empties
//! the channel as fast as the actor fills it, whatever the client does, and seals each epoch's
//! changes at its barrier; [`Subscription::next`] waits for the sealed epoch's commit before
//! returning it. So a client that stops reading never slows the graph down: its sealed epochs
//! queue up to a byte limit, past which the subscription ends with `53400`. Epochs up to
//! [`Subscription::skip_through`] (the epoch of the snapshot the caller read first) are
//! dropped: the snapshot holds them. A recovery from a failed commit ends the subscription
//! (`40001`): the uncommitted changes it holds were discarded with the graph.
//!
//! Dropping the subscription stops its drain task, which drops the channel; the actor's
//! dispatcher forgets an output whose receiver is gone at its next send.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use eddy_common::error::sqlstate;
use eddy_common::{EddyError, Epoch, Result, StreamChunk};
use tokio::sync::{mpsc, watch};

use crate::barrier::BarrierManager;
use crate::message::{ActorId, Message};
use crate::operator::ErrorDelta;

/// One epoch's changes to the followed relation.
#[derive(Debug, Default)]
pub struct Sealed {
    /// The epoch (committed when [`Subscription::next`] returns it).
    pub epoch: Epoch,
    /// Its changes, in the order the relation produced them.
    pub chunks: Vec<StreamChunk>,
    /// Changes to the relation's count of input rows that fail to evaluate.
    pub errors: Vec<ErrorDelta>,
}

/// What the drain task hands the reader.
enum Drained {
    Epoch(Sealed, usize),
    /// The relation's actor is gone: a barrier stopped it (the relation was dropped), or it
    /// failed, or the graph was rebuilt.
    Closed { stopped: bool },
    Failed(EddyError),
}

/// A relation's committed changes, epoch by epoch (see the module comment).
pub struct Subscription {
    rx: mpsc::UnboundedReceiver<Drained>,
    completed: watch::Receiver<Epoch>,
    broken: watch::Receiver<bool>,
    /// Bytes of sealed epochs not yet returned (shared with the drain task).
    queued: Arc<AtomicUsize>,
    /// Epochs up to this one are skipped.
    skip_through: Epoch,
    /// The relation's actor was stopped by a barrier (the relation was dropped).
    stopped: bool,
    /// An epoch received and waiting for its commit.
    held: Option<Sealed>,
}

impl Subscription {
    /// Follows `input`, the channel of an output about to be added to the actor `relation`;
    /// at most `limit` bytes of changes wait for the reader.
    pub fn start(relation: ActorId, input: mpsc::Receiver<Message>, barrier: &BarrierManager, limit: usize) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        tokio::spawn(drain(relation, input, tx, queued.clone(), limit));
        Self { rx, completed: barrier.completed(), broken: barrier.broken(), queued, skip_through: Epoch::ZERO, stopped: false, held: None }
    }

    /// After [`Subscription::next`] returned `None`: whether a barrier stopped the relation's
    /// actor (it was dropped), rather than the actor failing or the graph being rebuilt.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Skips the epochs up to `epoch` (a snapshot the caller read holds their changes).
    pub fn skip_through(&mut self, epoch: Epoch) {
        self.skip_through = self.skip_through.max(epoch);
        if self.held.as_ref().is_some_and(|s| s.epoch <= self.skip_through) {
            self.held = None;
        }
    }

    /// The next committed epoch after the skipped ones (possibly without changes), or `None`
    /// once the relation's actor is gone and every epoch it sealed was returned. Cancel-safe:
    /// an epoch received while waiting for its commit is kept for the next call.
    pub async fn next(&mut self) -> Result<Option<Sealed>> {
        loop {
            let epoch = match &self.held {
                Some(s) => s.epoch,
                None => {
                    match self.rx.recv().await {
                        Some(Drained::Epoch(s, bytes)) => {
                            self.queued.fetch_sub(bytes, Ordering::Relaxed);
                            if s.epoch > self.skip_through {
                                self.held = Some(s);
                            }
                        }
                        Some(Drained::Failed(e)) => return Err(e),
                        Some(Drained::Closed { stopped }) => {
                            self.stopped = stopped;
                            return Ok(None);
                        }
                        None => return Ok(None),
                    }
                    continue;
                }
            };
            tokio::select! {
                done = self.completed.wait_for(|e| *e >= epoch) => {
                    if done.is_err() {
                        return Err(eddy_common::internal_err!("the barrier manager stopped"));
                    }
                }
                _ = self.broken.changed() => return Err(recovered()),
            }
            // A recovery in between reuses epoch numbers: this epoch's changes were discarded.
            if self.broken.has_changed().unwrap_or(true) {
                return Err(recovered());
            }
            return Ok(self.held.take());
        }
    }
}

fn recovered() -> EddyError {
    EddyError::user(
        sqlstate::SERIALIZATION_FAILURE,
        "the server recovered from a failed commit; the subscription's uncommitted changes were discarded; subscribe again",
    )
}

/// Empties `input` into sealed epochs for the reader until the reader or the relation goes away.
async fn drain(relation: ActorId, mut input: mpsc::Receiver<Message>, tx: mpsc::UnboundedSender<Drained>, queued: Arc<AtomicUsize>, limit: usize) {
    let mut open = Sealed::default();
    let mut bytes = 0usize;
    let mut stopped = false;
    loop {
        let msg = tokio::select! {
            m = input.recv() => m,
            _ = tx.closed() => return,
        };
        match msg {
            None => {
                let _ = tx.send(Drained::Closed { stopped });
                return;
            }
            Some(Message::Chunk(c)) => {
                bytes += c.batch.get_array_memory_size() + c.ops.len();
                open.chunks.push(c);
            }
            Some(Message::Errors(d)) => open.errors.extend(d),
            Some(Message::Watermark(_)) => {}
            Some(Message::Barrier(b)) => {
                stopped |= b.stops(relation);
                open.epoch = b.epoch;
                let sealed = std::mem::take(&mut open);
                let size = std::mem::take(&mut bytes);
                queued.fetch_add(size, Ordering::Relaxed);
                if tx.send(Drained::Epoch(sealed, size)).is_err() {
                    return;
                }
            }
        }
        if queued.load(Ordering::Relaxed) + bytes > limit {
            let _ = tx.send(Drained::Failed(EddyError::user(
                sqlstate::INSUFFICIENT_RESOURCES,
                format!("the subscription fell more than {} MiB of changes behind its relation; read faster, or subscribe again", limit >> 20),
            )));
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use arrow::array::Int64Array;
    use eddy_common::codec;
    use eddy_storage::{EpochBatch, StateStore, StoreOptions};

    use super::*;
    use crate::message::Barrier;

    fn chunk(v: i64) -> StreamChunk {
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new("v", arrow::datatypes::DataType::Int64, false)]));
        StreamChunk::inserts(arrow::array::RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![v]))]).unwrap())
    }

    fn barrier(e: u64) -> Message {
        Message::Barrier(Barrier { epoch: Epoch(e), mutation: None })
    }

    #[tokio::test]
    async fn epochs_come_out_only_once_committed_and_skipped_ones_never() {
        let store = StateStore::open(&StoreOptions::default()).await.unwrap();
        let manager = BarrierManager::start(store, Duration::from_secs(3600));
        let (tx, rx) = mpsc::channel(4);
        let mut sub = Subscription::start(7, rx, &manager, 1 << 20);
        let committed = manager.completed().borrow().0;
        // Epoch `committed + 1` is held by the snapshot; the next two follow.
        for e in 1..=3 {
            tx.send(Message::Chunk(chunk(e as i64))).await.unwrap();
            tx.send(barrier(committed + e)).await.unwrap();
        }
        sub.skip_through(Epoch(committed + 1));
        // Nothing is committed yet: the reader waits.
        assert!(tokio::time::timeout(Duration::from_millis(50), sub.next()).await.is_err());
        let mut batch = EpochBatch::default();
        batch.put(codec::table_prefix(7).to_vec(), vec![1]);
        manager.commit_writes(batch).await.unwrap();
        manager.flush().await.unwrap();
        manager.flush().await.unwrap();
        let got = sub.next().await.unwrap().unwrap();
        assert_eq!(got.epoch, Epoch(committed + 2));
        assert_eq!(got.chunks.len(), 1);
        let got = sub.next().await.unwrap().unwrap();
        assert_eq!(got.epoch, Epoch(committed + 3));
        drop(tx);
        assert!(sub.next().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_reader_that_falls_behind_ends_instead_of_blocking_the_relation() {
        let store = StateStore::open(&StoreOptions::default()).await.unwrap();
        let manager = BarrierManager::start(store, Duration::from_secs(3600));
        let (tx, rx) = mpsc::channel(4);
        let mut sub = Subscription::start(7, rx, &manager, 4096);
        // Every epoch is skipped, so only the error can come out.
        sub.skip_through(Epoch(u64::MAX));
        // The relation keeps sending although nobody reads: the drain never blocks it.
        for e in 1..=200u64 {
            if tx.send(Message::Chunk(chunk(e as i64))).await.is_err() {
                break;
            }
            let _ = tx.send(barrier(1000 + e)).await;
        }
        loop {
            match sub.next().await {
                Err(e) => {
                    assert_eq!(e.sqlstate, sqlstate::INSUFFICIENT_RESOURCES, "{e}");
                    break;
                }
                Ok(Some(_)) => continue,
                Ok(None) => panic!("ended without the error"),
            }
        }
    }
}
