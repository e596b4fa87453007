//! [`ViewActor`]: runs one materialized view — its chain of operators, ending in
//! `Materialize` — over its upstream's change stream, and reports each epoch.
//!
//! A new view first backfills: it waits for the epoch whose barrier subscribed it, reads the
//! upstream's rows from that epoch's snapshot as inserts, then continues with the changes of
//! later epochs (which queue up in its input channel meanwhile). Nothing is missed or seen
//! twice, because the subscription takes effect exactly at that barrier.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use eddy_common::{internal_err, Epoch, Result, StreamChunk};
use eddy_storage::{EpochBatch, StateStore, StateTable};
use futures::FutureExt;
use tokio::sync::{mpsc, watch};

use crate::barrier::Collected;
use crate::message::{ActorId, Dispatcher, Message, Output};
use crate::operator::Operator;

/// Where a new view reads its initial rows.
pub struct Backfill {
    /// The upstream relation's rows.
    pub upstream: Arc<StateTable>,
    /// The epoch at whose barrier the view subscribed (known once that barrier is cut).
    pub epoch: tokio::sync::oneshot::Receiver<Epoch>,
    /// Committed state.
    pub store: Arc<StateStore>,
    /// Completed epochs.
    pub completed: watch::Receiver<Epoch>,
}

/// The actor of one materialized view.
pub struct ViewActor {
    /// Actor id (the view's relation id).
    id: ActorId,
    /// Upstream changes.
    input: mpsc::Receiver<Message>,
    /// Operators, the last one being `Materialize`.
    operators: Vec<Box<dyn Operator>>,
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
        input: mpsc::Receiver<Message>,
        operators: Vec<Box<dyn Operator>>,
        outputs: Vec<Output>,
        collector: mpsc::UnboundedSender<Collected>,
        backfill: Option<Backfill>,
    ) -> Self {
        let mut dispatcher = Dispatcher::default();
        for o in outputs {
            dispatcher.add(o);
        }
        Self { id, input, operators, outputs: dispatcher, collector, backfill }
    }

    /// Runs until the view is dropped; failures and panics are reported, not propagated.
    pub async fn run(mut self) {
        let id = self.id;
        let collector = self.collector.clone();
        let result = AssertUnwindSafe(self.run_inner()).catch_unwind().await;
        let error = match result {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e,
            Err(p) => {
                let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
                internal_err!("view actor {id} panicked: {}", msg.unwrap_or_default())
            }
        };
        tracing::error!("materialized view {id} failed: {error}");
        let _ = collector.send(Collected::failed(id, error));
    }

    /// Pushes `chunk` through operators `from..` and sends what comes out downstream.
    async fn push(&mut self, from: usize, chunk: StreamChunk) -> Result<()> {
        let mut chunks = vec![chunk];
        for op in &mut self.operators[from..] {
            let mut next = Vec::new();
            for c in chunks {
                if !c.is_empty() {
                    next.extend(op.process(c)?);
                }
            }
            chunks = next;
        }
        for c in chunks {
            if !c.is_empty() {
                self.outputs.send(Message::Chunk(c)).await;
            }
        }
        Ok(())
    }

    async fn run_inner(&mut self) -> Result<()> {
        if let Some(mut bf) = self.backfill.take() {
            let epoch = bf.epoch.await.map_err(|_| internal_err!("view creation was abandoned"))?;
            let _ = bf.completed.wait_for(|e| *e >= epoch).await;
            let snapshot = bf.store.snapshot();
            for batch in bf.upstream.scan(&snapshot).await? {
                self.push(0, StreamChunk::inserts(batch)).await?;
            }
        }
        while let Some(msg) = self.input.recv().await {
            match msg {
                Message::Chunk(c) => self.push(0, c).await?,
                Message::Barrier(b) => {
                    let mut batch = EpochBatch::default();
                    for i in 0..self.operators.len() {
                        let out = self.operators[i].on_barrier(b.epoch, &mut batch).await?;
                        for c in out {
                            self.push(i + 1, c).await?;
                        }
                    }
                    let report = Collected { actor: self.id, epoch: b.epoch, batch, waiters: vec![], failed: None };
                    let _ = self.collector.send(report);
                    self.outputs.send_barrier(self.id, &b).await;
                    if b.stops(self.id) {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// One line per operator, for EXPLAIN.
    pub fn describe(operators: &[Box<dyn Operator>]) -> Vec<String> {
        operators.iter().map(|o| o.to_string()).collect()
    }
}
