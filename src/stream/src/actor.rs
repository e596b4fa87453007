//! [`ViewActor`]: runs one materialized view — one operator chain per input ("branch", more
//! than one for UNION ALL), then a shared chain ending in `Materialize` — over its upstreams'
//! change streams with aligned barriers, and reports each epoch.
//!
//! A new view first backfills: it waits for the epoch whose barrier subscribed it, reads each
//! upstream's rows from that epoch's snapshot as inserts, then continues with the changes of
//! later epochs (which queue up in its input channels meanwhile). Nothing is missed or seen
//! twice, because the subscription takes effect exactly at that barrier.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use eddy_common::{internal_err, Epoch, Result, StreamChunk};
use eddy_storage::{EpochBatch, StateStore, StateTable};
use futures::FutureExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::barrier::Collected;
use crate::merge::{Aligned, AlignedInputs};
use crate::message::{ActorId, Dispatcher, Message, Output};
use crate::operator::Operator;

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
}

/// The actor of one materialized view.
pub struct ViewActor {
    /// Actor id (the view's relation id).
    id: ActorId,
    /// Per-input operator chains.
    branches: Vec<Vec<Box<dyn Operator>>>,
    /// Upstream rows per branch (backfill).
    upstreams: Vec<Arc<StateTable>>,
    /// Inputs, read with aligned barriers.
    inputs: Option<AlignedInputs>,
    /// Operators after the branches meet; the last one is `Materialize`.
    tail: Vec<Box<dyn Operator>>,
    /// Views defined on this view.
    outputs: Dispatcher,
    /// Where epoch reports go.
    collector: mpsc::UnboundedSender<Collected>,
    /// Initial load, for a new view.
    backfill: Option<Backfill>,
}

impl ViewActor {
    /// A view actor.
    pub fn new(
        id: ActorId,
        branches: Vec<Branch>,
        tail: Vec<Box<dyn Operator>>,
        outputs: Vec<Output>,
        collector: mpsc::UnboundedSender<Collected>,
        backfill: Option<Backfill>,
    ) -> Self {
        let mut dispatcher = Dispatcher::default();
        for o in outputs {
            dispatcher.add(o);
        }
        let mut inputs = Vec::new();
        let mut chains = Vec::new();
        let mut upstreams = Vec::new();
        for b in branches {
            inputs.push(b.input);
            chains.push(b.operators);
            upstreams.push(b.upstream);
        }
        Self {
            id,
            branches: chains,
            upstreams,
            inputs: Some(AlignedInputs::new(inputs)),
            tail,
            outputs: dispatcher,
            collector,
            backfill,
        }
    }

    /// Runs until the view is dropped; failures and panics are reported, not propagated.
    pub async fn run(mut self) {
        let (id, collector) = (self.id, self.collector.clone());
        run_reporting(id, "materialized view", collector, self.run_inner()).await;
    }

    fn apply(ops: &mut [Box<dyn Operator>], chunks: Vec<StreamChunk>) -> Result<Vec<StreamChunk>> {
        let mut chunks = chunks;
        for op in ops {
            let mut next = Vec::new();
            for c in chunks {
                if !c.is_empty() {
                    next.extend(op.process(c)?);
                }
            }
            chunks = next;
        }
        Ok(chunks)
    }

    /// Pushes chunks through branch `branch` from operator `from`, then the tail from `tail_from`.
    async fn push(&mut self, branch: Option<(usize, usize)>, tail_from: usize, chunks: Vec<StreamChunk>) -> Result<()> {
        let mut chunks = chunks;
        if let Some((b, from)) = branch {
            chunks = Self::apply(&mut self.branches[b][from..], chunks)?;
        }
        let chunks = Self::apply(&mut self.tail[tail_from..], chunks)?;
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
                for batch in upstream.scan(&snapshot).await? {
                    self.push(Some((b, 0)), 0, vec![StreamChunk::inserts(batch)]).await?;
                }
            }
        }
        let mut inputs = self.inputs.take().ok_or_else(|| internal_err!("view actor started twice"))?;
        while let Some(item) = inputs.next().await? {
            match item {
                Aligned::Chunk(b, c) => self.push(Some((b, 0)), 0, vec![c]).await?,
                Aligned::Barrier(barrier) => {
                    let mut batch = EpochBatch::default();
                    for b in 0..self.branches.len() {
                        for i in 0..self.branches[b].len() {
                            let out = self.branches[b][i].on_barrier(barrier.epoch, &mut batch).await?;
                            self.push(Some((b, i + 1)), 0, out).await?;
                        }
                    }
                    for i in 0..self.tail.len() {
                        let out = self.tail[i].on_barrier(barrier.epoch, &mut batch).await?;
                        self.push(None, i + 1, out).await?;
                    }
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
