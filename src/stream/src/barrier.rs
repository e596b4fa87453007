//! [`BarrierManager`]: cuts epochs, injects barriers into every source, collects every actor's
//! state changes for the epoch, and commits them as one durable write.
//!
//! Contract:
//! * A barrier for epoch E is injected into every registered source; every registered actor
//!   reports [`Collected`] for E exactly once, after writing all of its state changes of E into
//!   the report. E commits (one atomic, durable StateStore write holding every actor's changes,
//!   plus any writes handed to [`BarrierManager::commit_writes`]) only when all have reported.
//!   Epochs commit in order.
//! * A writer acknowledged through a collected waiter, or through `commit_writes`, hears back only
//!   after its epoch is durable ("acknowledged means durable", docs/architecture.md "Durable DML").
//! * Group commit: a waiting writer asks for an early barrier ([`BarrierManager::request`]);
//!   everything submitted before the barrier is cut shares its one commit.
//! * A barrier is cut every barrier interval while any actor exists, and early on request; an
//!   epoch without changes writes nothing, so an idle server does no I/O.
//! * Graph changes ride on barriers ([`Mutation`]): outputs added at E receive epoch E+1 onwards,
//!   actors registered with E report from E+1 on, stopped actors report E and leave.
//! * An actor that fails reports [`Collected::failed`]; it is dropped from the graph and no later
//!   epoch waits for it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use eddy_common::error::sqlstate;
use eddy_common::{EddyError, Epoch, Result};
use eddy_storage::{EpochBatch, StateStore};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch, Notify};

use crate::message::{ActorId, Barrier, Mutation};
use crate::table_write::{TableWrite, TxnId, WriteOutcome};

/// A writer waiting for the commit of the epoch that holds its changes.
pub type Waiter = oneshot::Sender<Result<Epoch>>;

/// What a table's source actor receives: DML writes and barriers, in one ordered channel.
#[derive(Debug)]
pub enum SourceMsg {
    /// A whole statement, applied atomically now: `decided` hears its outcome (or its error,
    /// with nothing applied) at once, `ack` the committed epoch that holds it.
    Write { write: TableWrite, decided: oneshot::Sender<Result<WriteOutcome>>, ack: Waiter },
    /// One part of transaction `txn`, resolved and staged but invisible until `Commit`; the
    /// table is reserved for `txn` until then.
    Stage { txn: TxnId, write: TableWrite, decided: oneshot::Sender<Result<WriteOutcome>> },
    /// Applies `txn`'s staged parts in the current epoch; `ack` hears the committed epoch.
    Commit { txn: TxnId, ack: Waiter },
    /// Drops `txn`'s staged parts.
    Abort { txn: TxnId },
    /// End of an epoch.
    Barrier(Barrier),
}

/// A failure the client should retry: 40001, which drivers and ORMs know to retry.
fn retry_error(what: &str) -> EddyError {
    EddyError { kind: eddy_common::ErrorKind::External, sqlstate: sqlstate::SERIALIZATION_FAILURE, message: format!("{what}; retry the statement") }
}

/// An actor's report for one epoch.
pub struct Collected {
    /// Reporting actor.
    pub actor: ActorId,
    /// The epoch (ignored for failures).
    pub epoch: Epoch,
    /// The actor's state changes of the epoch.
    pub batch: EpochBatch,
    /// Writers whose changes are in this epoch.
    pub waiters: Vec<Waiter>,
    /// Set when the actor failed and left the graph: the relation whose failure it is (the
    /// actor's own id, or for an actor of a parallel view the view's), and the error.
    pub failed: Option<(ActorId, EddyError)>,
}

impl Collected {
    /// A failure report of `actor`, a part of relation `owner`.
    pub fn failed(actor: ActorId, owner: ActorId, error: EddyError) -> Self {
        Self { actor, epoch: Epoch::ZERO, batch: EpochBatch::default(), waiters: vec![], failed: Some((owner, error)) }
    }
}

/// Timings of one committed epoch (the most recent are kept for metrics and benchmarks).
#[derive(Debug, Clone, Copy)]
pub struct EpochStats {
    /// The epoch.
    pub epoch: Epoch,
    /// When the epoch began (the previous barrier was cut): a change made then became
    /// visible at `committed`.
    pub opened: std::time::Instant,
    /// When its barrier was cut.
    pub cut: std::time::Instant,
    /// When every actor had reported.
    pub collected: std::time::Instant,
    /// When the commit was durable.
    pub committed: std::time::Instant,
    /// State changes committed (in memory and spilled).
    pub ops: usize,
}

/// Cuts the barrier loop runs at once: one collecting while the one before commits.
const IN_FLIGHT_CUTS: u32 = 2;

/// Epochs whose stats are kept.
const RECENT_EPOCHS: usize = 4096;

/// What the next barrier carries besides actor reports.
#[derive(Default)]
struct Pending {
    /// Writes handed to `commit_writes` (catalog changes, ...).
    batch: EpochBatch,
    /// Their writers.
    waiters: Vec<Waiter>,
    /// Someone asked for a barrier.
    requested: bool,
}

/// The actors barriers flow through.
#[derive(Default)]
struct Graph {
    /// Source actors and their input channels.
    sources: BTreeMap<ActorId, mpsc::Sender<SourceMsg>>,
    /// Every actor that reports each epoch.
    actors: BTreeSet<ActorId>,
    /// Last injected epoch.
    injected: Epoch,
}

/// Cuts epochs and commits them to the [`StateStore`].
pub struct BarrierManager {
    /// Where epochs are committed.
    store: Arc<StateStore>,
    /// What the next barrier carries.
    pending: Mutex<Pending>,
    /// The graph; its lock is held while a barrier is cut, so graph changes land between epochs.
    graph: tokio::sync::Mutex<Graph>,
    /// Actor reports.
    collect_tx: mpsc::UnboundedSender<Collected>,
    /// Receiving end of the reports (used only while a barrier is cut).
    collect_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Collected>>,
    /// Last completed epoch (committed, or empty and skipped).
    completed: watch::Sender<Epoch>,
    /// Wakes the barrier loop for an early barrier.
    wake: Notify,
    /// Barrier interval in milliseconds.
    interval_ms: AtomicU64,
    /// Set once shutdown begins; later writes are refused.
    stopping: AtomicBool,
    /// Failure messages of actors that left the graph.
    failures: Mutex<HashMap<ActorId, EddyError>>,
    /// Held shared by a transaction while it sends its commits to several table actors, and
    /// exclusively while barriers are injected: a transaction's commits all land in one epoch.
    commit_gate: tokio::sync::RwLock<()>,
    /// Held by the cut whose epoch is committing: the next cut may collect meanwhile, but
    /// commits (and acknowledges, and advances `completed`) only after it, so epochs complete
    /// in order even when a later one is empty and needs no write.
    commit_order: tokio::sync::Mutex<()>,
    /// Set when a commit failed: no barrier is cut and writes are refused until the engine has
    /// rebuilt the graph from the last committed epoch ([`BarrierManager::reset`]).
    broken: watch::Sender<bool>,
    /// Timings of recent epochs, oldest first, and when the current epoch began.
    recent: Mutex<(std::collections::VecDeque<EpochStats>, std::time::Instant)>,
    /// Commit latencies and counts, for metrics.
    pub commits: crate::metrics::CommitMetrics,
    /// Cuts of the barrier loop in flight (at most two: one collecting, one committing).
    in_flight: Arc<tokio::sync::Semaphore>,
    /// Set while the graph is being started ([`BarrierManager::pause`]): no cut begins.
    paused: watch::Sender<bool>,
}

/// Holds barriers back while it lives (see [`BarrierManager::pause`]).
pub struct Paused<'a>(&'a BarrierManager);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.paused.send_replace(false);
    }
}

impl BarrierManager {
    /// Starts the barrier loop.
    pub fn start(store: Arc<StateStore>, interval: Duration) -> Arc<Self> {
        let (collect_tx, collect_rx) = mpsc::unbounded_channel();
        let committed = store.committed_epoch();
        let (completed, _) = watch::channel(committed);
        let mgr = Arc::new(Self {
            store,
            pending: Mutex::new(Pending::default()),
            graph: tokio::sync::Mutex::new(Graph { injected: committed, ..Default::default() }),
            collect_tx,
            collect_rx: tokio::sync::Mutex::new(collect_rx),
            completed,
            wake: Notify::new(),
            interval_ms: AtomicU64::new(interval.as_millis().max(1) as u64),
            stopping: AtomicBool::new(false),
            failures: Mutex::new(HashMap::new()),
            commit_gate: tokio::sync::RwLock::new(()),
            commit_order: tokio::sync::Mutex::new(()),
            broken: watch::channel(false).0,
            recent: Mutex::new((std::collections::VecDeque::new(), std::time::Instant::now())),
            commits: Default::default(),
            in_flight: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT_CUTS as usize)),
            paused: watch::channel(false).0,
        });
        let weak = Arc::downgrade(&mgr);
        // Epochs are pipelined: while one commits, the next is cut and collected (its cut
        // waits for the graph, which the committing one released; commits stay in epoch order
        // through `commit_order`). Two cuts in flight at most: one collecting, one committing.
        let in_flight = mgr.in_flight.clone();
        tokio::spawn(async move {
            loop {
                let Some(mgr) = weak.upgrade() else { break };
                let wait = Duration::from_millis(mgr.interval_ms.load(Ordering::Relaxed));
                let ticked = tokio::select! {
                    _ = tokio::time::sleep(wait) => true,
                    _ = mgr.wake.notified() => false,
                };
                // A tick cuts a barrier whenever there are actors for it to flow through; an
                // epoch without changes writes nothing, so an idle server stays I/O-free.
                let has_actors = ticked && mgr.graph.try_lock().map(|g| !g.actors.is_empty()).unwrap_or(false);
                if mgr.stopping.load(Ordering::SeqCst) {
                    break;
                }
                if (mgr.pending.lock().requested || has_actors) && !*mgr.broken.borrow() {
                    // Closed at shutdown, once the cuts in flight are done.
                    let Ok(permit) = in_flight.clone().acquire_owned().await else { break };
                    tokio::spawn(async move {
                        // A failure is logged and answered to its waiters inside.
                        let _ = mgr.cut_and_commit(None).await;
                        drop(permit);
                    });
                }
            }
        });
        mgr
    }

    /// Timings of the most recent committed epochs, oldest first.
    pub fn recent_epochs(&self) -> Vec<EpochStats> {
        self.recent.lock().0.iter().copied().collect()
    }

    /// The store epochs are committed to.
    pub fn store(&self) -> &Arc<StateStore> {
        &self.store
    }

    /// Where actors send their reports.
    pub fn collector(&self) -> mpsc::UnboundedSender<Collected> {
        self.collect_tx.clone()
    }

    /// Watches the last completed epoch.
    pub fn completed(&self) -> watch::Receiver<Epoch> {
        self.completed.subscribe()
    }

    /// Changes the barrier interval.
    pub fn set_interval(&self, interval: Duration) {
        self.interval_ms.store(interval.as_millis().max(1) as u64, Ordering::Relaxed);
    }

    /// The current barrier interval.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms.load(Ordering::Relaxed))
    }

    /// Why `actor` left the graph, if it failed.
    pub fn failure(&self, actor: ActorId) -> Option<EddyError> {
        self.failures.lock().get(&actor).cloned()
    }

    /// Records failures found in committed state (recovery): those actors are not started.
    pub fn restore_failure(&self, actor: ActorId, error: EddyError) {
        self.failures.lock().insert(actor, error);
    }

    /// Forgets a failure (the failed relation was dropped).
    pub fn forget_failure(&self, actor: ActorId) {
        self.failures.lock().remove(&actor);
    }

    /// Asks for an early barrier.
    pub fn request(&self) {
        self.pending.lock().requested = true;
        self.wake.notify_one();
    }

    fn refuse_if_stopping(&self) -> Result<()> {
        if self.stopping.load(Ordering::SeqCst) {
            return Err(EddyError::user(sqlstate::ADMIN_SHUTDOWN, "the server is shutting down"));
        }
        self.refuse_if_broken()
    }

    /// Refuses work while the graph is being rebuilt after a failed commit.
    pub fn refuse_if_broken(&self) -> Result<()> {
        if *self.broken.borrow() {
            return Err(retry_error("the server is recovering from a failed commit of the state store"));
        }
        Ok(())
    }

    /// Watches the broken flag (set when a commit fails, cleared by [`BarrierManager::reset`]).
    pub fn broken(&self) -> watch::Receiver<bool> {
        self.broken.subscribe()
    }

    /// After recovery: forgets the graph (its actors are gone), continues after `committed`,
    /// and accepts work again. Graph changes and sources must be registered anew.
    pub async fn reset(&self, committed: Epoch) {
        let mut graph = self.graph.lock().await;
        *graph = Graph { injected: committed, ..Default::default() };
        // Reports of the old actors still queued must not be taken for the new graph's.
        let mut rx = self.collect_rx.lock().await;
        while rx.try_recv().is_ok() {}
        let pending = std::mem::take(&mut *self.pending.lock());
        for w in pending.waiters {
            // The writer may have given up already; nothing else to tell.
            let _ = w.send(Err(retry_error("the server recovered from a failed commit before this write was applied")));
        }
        self.completed.send_replace(committed);
        self.broken.send_replace(false);
    }

    /// Registers a source actor; it receives (and reports) every barrier from the next one on.
    pub async fn add_source(&self, actor: ActorId, tx: mpsc::Sender<SourceMsg>) {
        let mut g = self.graph.lock().await;
        g.sources.insert(actor, tx);
        g.actors.insert(actor);
    }

    /// Registers a non-source actor that already receives barriers (used at startup, before the
    /// first barrier flows).
    pub async fn add_actor(&self, actor: ActorId) {
        self.graph.lock().await.actors.insert(actor);
    }

    /// Cuts a barrier now, carrying `mutation`; `new_actors` report from the next epoch on.
    /// Returns once that epoch has completed. The cut runs in a task of its own, so a caller
    /// that goes away (a cancelled statement, a statement timeout) cannot abandon it half
    /// way: a barrier sent whose epoch is never collected would lose that epoch's changes.
    pub async fn inject(self: &Arc<Self>, mutation: Mutation, new_actors: Vec<ActorId>) -> Result<Epoch> {
        self.refuse_if_stopping()?;
        self.pending.lock().requested = true;
        let this = self.clone();
        tokio::spawn(async move { this.cut_and_commit(Some((mutation, new_actors))).await })
            .await
            .map_err(|e| EddyError::internal(format!("a barrier cut failed: {e}")))?
    }

    /// Asks for a barrier soon instead of at the next tick (a backfilling view ends a full
    /// epoch early, so the epoch stays bounded without slowing the backfill).
    pub fn request_barrier(&self) {
        self.pending.lock().requested = true;
        self.wake.notify_one();
    }

    /// Holds back barriers while the caller sends one transaction's commits to its table
    /// actors, so that they all belong to the same epoch.
    pub async fn commit_gate(&self) -> tokio::sync::RwLockReadGuard<'_, ()> {
        self.commit_gate.read().await
    }

    /// Holds back every cut until the returned guard drops: while the graph is being started
    /// (recovery), a cut would wait for reports of actors registered but not yet running, with
    /// the graph locked, and the registration of the rest would wait for it.
    pub fn pause(&self) -> Paused<'_> {
        self.paused.send_replace(true);
        Paused(self)
    }

    /// Cuts a barrier: injects it, collects every actor's report, commits.
    async fn cut_and_commit(&self, mutation: Option<(Mutation, Vec<ActorId>)>) -> Result<Epoch> {
        // The sender lives as long as the manager.
        let _ = self.paused.subscribe().wait_for(|p| !*p).await;
        let mut graph = self.graph.lock().await;
        let cut = std::time::Instant::now();
        let opened = std::mem::replace(&mut self.recent.lock().1, cut);
        let gate = self.commit_gate.write().await;
        let Pending { batch: extra, waiters: mut all_waiters, .. } = std::mem::take(&mut *self.pending.lock());
        let epoch = graph.injected.next();
        graph.injected = epoch;
        let expected: BTreeSet<ActorId> = graph.actors.clone();
        let (mutation, new_actors) = match mutation {
            Some((m, a)) => (Some(Arc::new(m)), a),
            None => (None, vec![]),
        };
        let barrier = Barrier { epoch, mutation: mutation.clone() };
        let mut dead_sources = Vec::new();
        for (id, tx) in &graph.sources {
            if tx.send(SourceMsg::Barrier(barrier.clone())).await.is_err() {
                dead_sources.push(*id);
            }
        }
        drop(gate);
        let mut waiting = expected;
        for id in dead_sources {
            graph.sources.remove(&id);
            graph.actors.remove(&id);
            waiting.remove(&id);
        }
        if let Some(m) = &mutation {
            for a in &m.stop {
                graph.sources.remove(a);
                graph.actors.remove(a);
            }
        }
        graph.actors.extend(new_actors);
        let mut batches: BTreeMap<ActorId, EpochBatch> = BTreeMap::new();
        let mut failed = EpochBatch::default();
        {
            let mut rx = self.collect_rx.lock().await;
            while !waiting.is_empty() {
                let Some(c) = rx.recv().await else { break };
                if let Some((owner, err)) = c.failed {
                    tracing::error!("actor {} failed and left the graph: {err}", c.actor);
                    waiting.remove(&c.actor);
                    graph.actors.remove(&c.actor);
                    graph.sources.remove(&c.actor);
                    // Recorded with this epoch, so the failure outlives a restart. The other
                    // actors of a parallel view fail after the first (their inputs close):
                    // the first error is the one that tells what happened.
                    let mut failures = self.failures.lock();
                    if let std::collections::hash_map::Entry::Vacant(e) = failures.entry(owner) {
                        failed.put(eddy_common::codec::failure_key(owner), err.message.clone().into_bytes());
                        e.insert(err);
                    }
                    continue;
                }
                if c.epoch != epoch {
                    tracing::error!("actor {} reported epoch {} while collecting {epoch}", c.actor, c.epoch);
                    continue;
                }
                waiting.remove(&c.actor);
                batches.insert(c.actor, c.batch);
                all_waiters.extend(c.waiters);
            }
        }
        // Taken before the graph is released, so the next cut queues behind this one.
        let _order = self.commit_order.lock().await;
        drop(graph);
        if *self.broken.borrow() {
            // The epoch before failed to commit, and this one was computed on top of its
            // changes: nothing of it may become durable. The engine rebuilds the graph from the
            // last committed epoch.
            let err = retry_error(&format!("epoch {epoch} followed an epoch the state store failed to commit; the statement was not applied"));
            for w in all_waiters {
                // A writer that gave up needs no answer.
                let _ = w.send(Err(err.clone()));
            }
            return Err(err);
        }
        let collected = std::time::Instant::now();
        let mut batch = extra;
        batch.extend(failed);
        for (_, b) in batches {
            batch.extend(b);
        }
        let ops = batch.len();
        let result = if batch.is_empty() { Ok(epoch) } else { self.store.commit(epoch, batch).await.map(|_| epoch) };
        let result = match result {
            Ok(e) => {
                let stats = EpochStats { epoch, opened, cut, collected, committed: std::time::Instant::now(), ops };
                self.commits.barrier_latency.observe(stats.committed.duration_since(cut));
                self.commits.commit_latency.observe(stats.committed.duration_since(collected));
                self.commits.epochs.fetch_add(1, Ordering::Relaxed);
                self.commits.ops.fetch_add(ops as u64, Ordering::Relaxed);
                let mut recent = self.recent.lock();
                if recent.0.len() == RECENT_EPOCHS {
                    recent.0.pop_front();
                }
                recent.0.push_back(stats);
                drop(recent);
                self.completed.send_if_modified(|c| {
                    let newer = epoch > *c;
                    if newer {
                        *c = epoch;
                    }
                    newer
                });
                Ok(e)
            }
            Err(e) => {
                // Nobody is acknowledged and `completed` stays behind: actors hold changes of an
                // epoch that is not durable, so the engine rebuilds them from committed state.
                tracing::error!("epoch {epoch} failed to commit: {e}");
                self.commits.failures.fetch_add(1, Ordering::Relaxed);
                self.broken.send_replace(true);
                Err(retry_error(&format!("the state store failed to commit epoch {epoch}: {}; the statement was not applied", e.message)))
            }
        };
        for w in all_waiters {
            // A writer that gave up (its session ended) needs no answer.
            let _ = w.send(result.clone());
        }
        result
    }

    /// Submits `batch` for the next epoch and waits until that epoch is durably committed.
    pub async fn commit_writes(&self, batch: EpochBatch) -> Result<Epoch> {
        self.refuse_if_stopping()?;
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.pending.lock();
            p.batch.extend(batch);
            p.waiters.push(tx);
            p.requested = true;
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
        self.stopping.store(true, Ordering::SeqCst);
        self.pending.lock().requested = true;
        // A failed commit is logged by cut_and_commit and answered to its waiters.
        let _ = self.cut_and_commit(None).await;
        // The barrier loop's cuts still in flight finish before the store may close; then it
        // cuts no more.
        if let Ok(all) = self.in_flight.acquire_many(IN_FLIGHT_CUTS).await {
            drop(all);
        }
        self.in_flight.close();
    }

    /// True once shutdown began.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
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

    /// Injected cuts race the barrier loop's; an empty epoch must still complete after the
    /// non-empty one before it (it once completed first, moving `completed` backwards, and
    /// a table writer waiting for the earlier epoch hung).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn epochs_complete_in_order_when_cuts_race() {
        let mgr = manager(Duration::from_millis(1)).await;
        let mut completed = mgr.completed();
        let seen = tokio::spawn(async move {
            let mut last = Epoch::ZERO;
            while completed.changed().await.is_ok() {
                let now = *completed.borrow_and_update();
                assert!(now > last, "completed went from {last} to {now}");
                last = now;
            }
        });
        let mut tasks = Vec::new();
        for i in 0..40u32 {
            let m = mgr.clone();
            tasks.push(tokio::spawn(async move {
                if i % 2 == 0 {
                    m.commit_writes(batch_with(&i.to_be_bytes())).await.map(|_| ())
                } else {
                    m.inject(Mutation::default(), vec![]).await.map(|_| ())
                }
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        drop(mgr);
        // The watcher ends with the manager; a panic in it (an epoch out of order) fails here.
        if let Ok(ended) = tokio::time::timeout(Duration::from_secs(5), seen).await {
            ended.unwrap();
        }
    }

    /// While the graph is being started (recovery), no barrier may be cut: a cut would wait,
    /// with the graph locked, for actors registered but not yet running, and registering the
    /// rest needs the graph (a restart hung this way when a tick came mid-recovery).
    #[tokio::test]
    async fn no_barrier_is_cut_while_the_graph_is_paused() {
        let mgr = manager(Duration::from_millis(1)).await;
        let paused = mgr.pause();
        let (tx, mut rx) = mpsc::channel(4);
        mgr.add_source(7, tx).await;
        mgr.add_actor(8).await;
        // Ticks and an injected cut: neither may begin while paused.
        let injected = tokio::spawn({
            let m = mgr.clone();
            async move { m.inject(Mutation::default(), vec![]).await }
        });
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(matches!(rx.try_recv(), Err(mpsc::error::TryRecvError::Empty)), "a barrier went out while paused");
        // Registering more still works (it needs the graph, which no cut holds).
        mgr.add_actor(9).await;
        drop(paused);
        // Now cuts flow: answer every barrier for the three actors until the injected cut is done.
        let collector = mgr.collector();
        while !injected.is_finished() {
            let Some(SourceMsg::Barrier(b)) = rx.recv().await else { panic!("the source channel closed") };
            for actor in [7, 8, 9] {
                collector.send(Collected { actor, epoch: b.epoch, batch: EpochBatch::default(), waiters: vec![], failed: None }).unwrap();
            }
            tokio::task::yield_now().await;
        }
        injected.await.unwrap().unwrap();
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
        for h in handles {
            let e = h.await.unwrap().unwrap();
            assert!(e <= mgr.store().committed_epoch());
        }
        assert_eq!(mgr.store().snapshot().scan_prefix(&[0, 0, 0, 9]).await.unwrap().len(), 32);
    }

    #[tokio::test]
    async fn an_idle_manager_commits_nothing() {
        let mgr = manager(Duration::from_millis(5)).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(mgr.store().committed_epoch(), Epoch::ZERO);
    }

    #[tokio::test]
    async fn flush_completes_an_epoch_without_writing() {
        let mgr = manager(Duration::from_secs(3600)).await;
        let e = mgr.flush().await.unwrap();
        assert_eq!(*mgr.completed().borrow(), e);
        assert_eq!(mgr.store().committed_epoch(), Epoch::ZERO);
    }

    #[tokio::test]
    async fn writes_after_shutdown_are_refused() {
        let mgr = manager(Duration::from_secs(3600)).await;
        mgr.shutdown().await;
        assert!(mgr.commit_writes(batch_with(b"\0\0\0\x09z")).await.is_err());
    }

    #[tokio::test]
    async fn an_epoch_waits_for_every_actor_and_commits_their_changes_together() {
        let mgr = manager(Duration::from_secs(3600)).await;
        let (tx, mut rx) = mpsc::channel(4);
        mgr.add_source(7, tx).await;
        let collector = mgr.collector();
        let actor = tokio::spawn(async move {
            while let Some(SourceMsg::Barrier(b)) = rx.recv().await {
                let mut batch = EpochBatch::default();
                batch.put(vec![0, 0, 0, 7, b.epoch.0 as u8], b"x".to_vec());
                let _ = collector.send(Collected { actor: 7, epoch: b.epoch, batch, waiters: vec![], failed: None });
            }
        });
        let e = mgr.commit_writes(batch_with(b"\0\0\0\x09k")).await.unwrap();
        let snap = mgr.store().snapshot();
        assert!(snap.get(b"\0\0\0\x09k").await.unwrap().is_some());
        assert!(snap.get(&[0, 0, 0, 7, e.0 as u8]).await.unwrap().is_some());
        drop(mgr);
        actor.abort();
    }

    #[tokio::test]
    async fn barriers_flow_every_interval_while_actors_exist_without_writing() {
        let mgr = manager(Duration::from_millis(10)).await;
        let (tx, mut rx) = mpsc::channel(4);
        mgr.add_source(5, tx).await;
        let collector = mgr.collector();
        tokio::spawn(async move {
            while let Some(SourceMsg::Barrier(b)) = rx.recv().await {
                let _ = collector.send(Collected { actor: 5, epoch: b.epoch, batch: EpochBatch::default(), waiters: vec![], failed: None });
            }
        });
        let mut completed = mgr.completed();
        tokio::time::timeout(Duration::from_secs(30), completed.wait_for(|e| *e >= Epoch(3))).await.unwrap().unwrap();
        assert_eq!(mgr.store().committed_epoch(), Epoch::ZERO, "empty epochs write nothing");
    }

    #[tokio::test]
    async fn a_failed_actor_no_longer_holds_up_epochs() {
        let mgr = manager(Duration::from_secs(3600)).await;
        let (tx, _rx) = mpsc::channel(4);
        mgr.add_source(8, tx).await;
        mgr.collector().send(Collected::failed(8, 8, EddyError::internal("boom"))).unwrap();
        mgr.commit_writes(batch_with(b"\0\0\0\x09f")).await.unwrap();
        assert!(mgr.failure(8).is_some());
    }
}
