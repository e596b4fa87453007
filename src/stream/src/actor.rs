//! [`ViewActor`]: runs one materialized view over its upstreams' change streams with aligned
//! barriers, and reports each epoch. The view's operators form a tree: one chain per input
//! ("branch"), feeding [`Stage`]s — a stage starts with a join of its two inputs (or just
//! merges them, for UNION ALL) and continues with a chain — up to the root stage, whose chain
//! ends in `Materialize`. Stages are numbered children first, so the root is the last one.
//!
//! A new view first backfills: it waits for the epoch whose barrier subscribed it, reads each
//! upstream's rows from that epoch's snapshot as inserts, then continues with the changes of
//! later epochs (which queue up in its input channels meanwhile). Nothing is missed or seen
//! twice, because the subscription takes effect exactly at that barrier.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use eddy_common::codec::{decode_view_error, view_error_key, view_errors_prefix};
use eddy_common::{internal_err, Epoch, Result, StreamChunk};
use eddy_storage::{EpochBatch, StateStore, StateTable};
use futures::FutureExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::barrier::Collected;
use crate::merge::{Aligned, AlignedInputs};
use crate::message::{ActorId, Dispatcher, Message, Output};
use crate::operator::{BinaryOperator, Operator, RowErrors, Side};

/// Runs an actor's main loop; an error or panic becomes a failure report to the barrier
/// manager (which drops the actor from the graph) instead of taking the server down.
pub(crate) async fn run_reporting(
    id: ActorId,
    what: &str,
    collector: mpsc::UnboundedSender<Collected>,
    body: impl std::future::Future<Output = Result<()>>,
) {
    let error = match AssertUnwindSafe(body).catch_unwind().await {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e,
        Err(p) => {
            let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
            internal_err!("{what} {id} panicked: {}", msg.unwrap_or_default())
        }
    };
    tracing::error!("{what} {id} failed: {error}");
    // The manager is gone only at shutdown; then nobody waits for this report.
    let _ = collector.send(Collected::failed(id, error));
}

/// Where a new view reads its initial rows.
pub struct Backfill {
    /// The epoch at whose barrier the view subscribed (known once that barrier is cut).
    pub epoch: oneshot::Receiver<Epoch>,
    /// Committed state.
    pub store: Arc<StateStore>,
    /// Completed epochs.
    pub completed: watch::Receiver<Epoch>,
}

/// One input of a view: its channel, its own operators, and the upstream it backfills from.
pub struct Branch {
    /// Upstream changes.
    pub input: mpsc::Receiver<Message>,
    /// Operators applied to this input only.
    pub operators: Vec<Box<dyn Operator>>,
    /// The upstream's rows (for backfill).
    pub upstream: Arc<StateTable>,
    /// The stage this branch feeds, and as which input.
    pub parent: (usize, Side),
}

/// Where the inputs of a view meet: an optional join of its inputs, then a chain.
pub struct Stage {
    /// Joins the stage's two inputs; without one, the inputs' chunks are simply merged.
    pub join: Option<Box<dyn BinaryOperator>>,
    /// Operators after the inputs meet.
    pub operators: Vec<Box<dyn Operator>>,
    /// The stage this one feeds (`None` for the root, whose output is the view's).
    pub parent: Option<(usize, Side)>,
}

/// Where chunks enter the operator tree.
#[derive(Debug, Clone, Copy)]
enum At {
    /// Branch `.0`, at operator `.1`.
    Branch(usize, usize),
    /// Stage `.0`, at operator `.1` of its chain.
    Stage(usize, usize),
}

/// The actor of one materialized view.
pub struct ViewActor {
    /// Actor id (the view's relation id).
    id: ActorId,
    /// Per-input operator chains.
    branches: Vec<Vec<Box<dyn Operator>>>,
    /// The stage each branch feeds.
    branch_parents: Vec<(usize, Side)>,
    /// Upstream rows per branch (backfill).
    upstreams: Vec<Arc<StateTable>>,
    /// Inputs, read with aligned barriers.
    inputs: Option<AlignedInputs>,
    /// Where the branches meet, children first; the root's chain ends in `Materialize`.
    stages: Vec<Stage>,
    /// Views defined on this view.
    outputs: Dispatcher,
    /// Where epoch reports go.
    collector: mpsc::UnboundedSender<Collected>,
    /// Initial load, for a new view.
    backfill: Option<Backfill>,
    /// Committed state (the view's failing-row counts are read from it at recovery).
    store: Arc<StateStore>,
    /// Failing input rows counted in the current epoch (here and upstream).
    errors: RowErrors,
    /// The view's count of failing input rows, per (SQLSTATE, message).
    error_totals: BTreeMap<(String, String), i64>,
}

impl ViewActor {
    /// A view actor.
    pub fn new(
        id: ActorId,
        branches: Vec<Branch>,
        stages: Vec<Stage>,
        outputs: Vec<Output>,
        collector: mpsc::UnboundedSender<Collected>,
        store: Arc<StateStore>,
        backfill: Option<Backfill>,
    ) -> Self {
        let mut dispatcher = Dispatcher::default();
        for o in outputs {
            dispatcher.add(o);
        }
        let mut inputs = Vec::new();
        let mut chains = Vec::new();
        let mut upstreams = Vec::new();
        let mut branch_parents = Vec::new();
        for b in branches {
            inputs.push(b.input);
            chains.push(b.operators);
            upstreams.push(b.upstream);
            branch_parents.push(b.parent);
        }
        Self {
            id,
            branches: chains,
            branch_parents,
            upstreams,
            inputs: Some(AlignedInputs::new(inputs)),
            stages,
            outputs: dispatcher,
            collector,
            backfill,
            store,
            errors: RowErrors::default(),
            error_totals: BTreeMap::new(),
        }
    }

    /// Runs until the view is dropped; failures and panics are reported, not propagated.
    pub async fn run(mut self) {
        let (id, collector) = (self.id, self.collector.clone());
        run_reporting(id, "materialized view", collector, self.run_inner()).await;
    }

    fn apply(ops: &mut [Box<dyn Operator>], chunks: Vec<StreamChunk>, errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        let mut chunks = chunks;
        for op in ops {
            let mut next = Vec::new();
            for c in chunks {
                if !c.is_empty() {
                    next.extend(op.process(c, errors)?);
                }
            }
            chunks = next;
        }
        Ok(chunks)
    }

    /// Adds the failing-row counts of `relation` (a view; tables have none) at `snapshot`.
    async fn inherit_errors(&mut self, relation: u32, snapshot: &eddy_storage::ReadSnapshot) -> Result<()> {
        let prefix = view_errors_prefix(relation);
        for (k, v) in snapshot.scan_prefix(&prefix).await? {
            if let Some((state, message, n)) = decode_view_error(prefix.len(), &k, &v) {
                self.errors.add_delta(&state, &message, n);
            }
        }
        Ok(())
    }

    /// Writes the epoch's changes to the failing-row counts into `batch` and passes them on to
    /// the views defined on this one.
    async fn flush_errors(&mut self, batch: &mut EpochBatch) {
        if self.errors.is_empty() {
            return;
        }
        let deltas = self.errors.take();
        for d in &deltas {
            let key = (d.sqlstate.clone(), d.message.clone());
            let total = self.error_totals.entry(key).or_default();
            *total += d.delta;
            let k = view_error_key(self.id, &d.sqlstate, &d.message);
            if *total == 0 {
                self.error_totals.remove(&(d.sqlstate.clone(), d.message.clone()));
                batch.delete(k);
            } else {
                batch.put(k, total.to_be_bytes().to_vec());
            }
        }
        self.outputs.send(Message::Errors(deltas)).await;
    }

    /// Pushes chunks into the tree at `at`, up to the root, and sends the root's output on.
    async fn push(&mut self, at: At, chunks: Vec<StreamChunk>) -> Result<()> {
        if chunks.iter().all(StreamChunk::is_empty) {
            return Ok(());
        }
        let (mut chunks, mut parent) = match at {
            At::Branch(b, from) => (Self::apply(&mut self.branches[b][from..], chunks, &mut self.errors)?, Some(self.branch_parents[b])),
            At::Stage(s, from) => {
                let stage = self.stages.get_mut(s).ok_or_else(|| internal_err!("no stage {s}"))?;
                (Self::apply(&mut stage.operators[from..], chunks, &mut self.errors)?, stage.parent)
            }
        };
        while let Some((s, side)) = parent {
            if chunks.is_empty() {
                return Ok(());
            }
            let stage = self.stages.get_mut(s).ok_or_else(|| internal_err!("no stage {s}"))?;
            if let Some(join) = &mut stage.join {
                let mut joined = Vec::new();
                for c in chunks {
                    if !c.is_empty() {
                        joined.extend(join.process(side, c, &mut self.errors)?);
                    }
                }
                chunks = joined;
            }
            chunks = Self::apply(&mut stage.operators, chunks, &mut self.errors)?;
            parent = stage.parent;
        }
        for c in chunks {
            if !c.is_empty() {
                self.outputs.send(Message::Chunk(c)).await;
            }
        }
        Ok(())
    }

    async fn run_inner(&mut self) -> Result<()> {
        if let Some(bf) = self.backfill.take() {
            let epoch = bf.epoch.await.map_err(|_| internal_err!("view creation was abandoned"))?;
            let mut completed = bf.completed;
            completed
                .wait_for(|e| *e >= epoch)
                .await
                .map_err(|_| internal_err!("barrier manager stopped before epoch {epoch} completed"))?;
            let snapshot = bf.store.snapshot();
            for b in 0..self.upstreams.len() {
                let upstream = self.upstreams[b].clone();
                self.inherit_errors(upstream.table_id(), &snapshot).await?;
                let mut scan = upstream.scan_stream(&snapshot).await?;
                while let Some(batch) = scan.next_batch().await? {
                    self.push(At::Branch(b, 0), vec![StreamChunk::inserts(batch)]).await?;
                }
            }
        } else {
            // Recovery: the counts committed so far.
            let snapshot = self.store.snapshot();
            let prefix = view_errors_prefix(self.id);
            for (k, v) in snapshot.scan_prefix(&prefix).await? {
                if let Some((state, message, n)) = decode_view_error(prefix.len(), &k, &v) {
                    self.error_totals.insert((state, message), n);
                }
            }
        }
        let mut inputs = self.inputs.take().ok_or_else(|| internal_err!("view actor started twice"))?;
        loop {
            // Inputs close only when the relations they come from stopped without this view
            // being dropped first, i.e. failed: this view fails too (ending quietly would leave
            // the barrier manager waiting for its report forever).
            let Some(item) = inputs.next().await? else {
                return Err(internal_err!("the relation this view reads failed"));
            };
            match item {
                Aligned::Chunk(b, c) => self.push(At::Branch(b, 0), vec![c]).await?,
                Aligned::Errors(_, d) => self.errors.merge(&d),
                Aligned::Barrier(barrier) => {
                    let mut batch = EpochBatch::default();
                    for b in 0..self.branches.len() {
                        for i in 0..self.branches[b].len() {
                            let out = self.branches[b][i].on_barrier(barrier.epoch, &mut batch, &mut self.errors).await?;
                            self.push(At::Branch(b, i + 1), out).await?;
                        }
                    }
                    // Children before parents: a stage's barrier comes after its inputs' output.
                    for s in 0..self.stages.len() {
                        if let Some(join) = &mut self.stages[s].join {
                            let out = join.on_barrier(barrier.epoch, &mut batch, &mut self.errors).await?;
                            self.push(At::Stage(s, 0), out).await?;
                        }
                        for i in 0..self.stages[s].operators.len() {
                            let out = self.stages[s].operators[i].on_barrier(barrier.epoch, &mut batch, &mut self.errors).await?;
                            self.push(At::Stage(s, i + 1), out).await?;
                        }
                    }
                    self.flush_errors(&mut batch).await;
                    let report = Collected { actor: self.id, epoch: barrier.epoch, batch, waiters: vec![], failed: None };
                    // The manager is gone only at shutdown; then nobody waits for this report.
                    let _ = self.collector.send(report);
                    self.outputs.send_barrier(self.id, &barrier).await;
                    if barrier.stops(self.id) {
                        break;
                    }
                }
            }
        }
        Ok(())
    }
}
