//! [`ViewActor`]: runs one materialized view over its upstreams' change streams with aligned
//! barriers, and reports each epoch. The view's operators form a tree: one chain per input
//! ("branch"), feeding [`Stage`]s — a stage starts with a join of its two inputs (or just
//! merges them, for UNION ALL) and continues with a chain — up to the root stage, whose chain
//! ends in `Materialize`. Stages are numbered children first, so the root is the last one.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use eddy_common::codec::{decode_view_error, view_error_key, view_error_shard_prefix, view_errors_prefix};
use eddy_common::{internal_err, Result, StreamChunk};
use eddy_storage::{EpochBatch, StateStore, StateTable};
use futures::FutureExt;
use tokio::sync::mpsc;

use crate::barrier::Collected;
use crate::metrics::{Node, NodeKind, NodeStats, ViewMetrics};
use crate::merge::{Aligned, AlignedInputs};
use crate::message::{ActorId, Barrier, Dispatcher, Message, Target};
use crate::operator::{BinaryOperator, Operator, RowErrors, Side};
use crate::watermark::Watermark;

mod backfill;
pub use backfill::Backfill;

/// Runs an actor's main loop; an error or panic becomes a failure report to the barrier
/// manager (which drops the actor from the graph and records the failure as `owner`'s)
/// instead of taking the server down.
pub(crate) async fn run_reporting(
    id: ActorId,
    owner: ActorId,
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
    let _ = collector.send(Collected::failed(id, owner, error));
}

/// Most rows a stateful operator takes in one `prefetch`/`process` step: a statement's chunk
/// can be its whole input (`INSERT ... SELECT`), and an operator's cache is kept within its
/// budget between steps, not inside one.
pub const OPERATOR_CHUNK_ROWS: usize = 8192;

/// Upstream rows a backfilling view reads per epoch: bounds the epoch's state changes and
/// output, so a view over a big table never holds its whole backfill in one epoch.
pub const BACKFILL_EPOCH_ROWS: usize = 65_536;

/// One input of a view actor: its channels, its own operators, and the upstream it backfills
/// from.
pub struct Branch {
    /// Upstream changes: one channel from the upstream relation, or one per actor of the
    /// view's fragment that feeds this one through a hash exchange.
    pub inputs: Vec<mpsc::Receiver<Message>>,
    /// Operators applied to this input only.
    pub operators: Vec<Box<dyn Operator>>,
    /// The upstream relation's rows (for backfill); `None` for an input from another
    /// fragment of the same view, which backfills nothing itself.
    pub upstream: Option<Arc<StateTable>>,
    /// The stage this branch feeds, and as which input.
    pub parent: (usize, Side),
}

/// Where a view actor sits among the actors of its view (docs/architecture.md, "Parallel
/// fragments"). A view is one or more fragments joined by hash exchanges; each fragment runs
/// one or more actors, each owning a contiguous range of vnodes.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The actor's id (the view's own for the single actor of a view).
    pub actor: ActorId,
    /// The view (its failing-row counts are kept under its id).
    pub view: u32,
    /// This actor's index among the actors of the view's last fragment, which write the view's
    /// rows and its failing-row counts (each under its own shard of the counts' key space).
    pub shard: u16,
    /// The vnodes of its upstream relation it backfills (its exchange routes the upstream's
    /// changes of exactly these vnodes to it).
    pub vnodes: std::ops::Range<u16>,
    /// Writes the view's rows and failing-row counts (an actor of the last fragment); other
    /// actors pass their counts on to the next fragment.
    pub last: bool,
    /// The first actor of its fragment: it alone counts the upstream's failing rows (the
    /// exchange sends their changes to it only) and the backfill's total.
    pub first: bool,
    /// The fragment's index in its view (with `shard`, names the actor's backfill positions).
    pub fragment: u16,
}

impl Placement {
    /// The single actor of view `view`.
    pub fn single(view: u32) -> Self {
        Self { actor: view, view, shard: 0, vnodes: 0..eddy_common::codec::VNODE_COUNT, last: true, first: true, fragment: 0 }
    }
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
    /// Actor id (the view's relation id for the first actor of its last fragment).
    id: ActorId,
    /// Where the actor sits in its view.
    placement: Placement,
    /// The branch each input channel feeds.
    input_branch: Vec<usize>,
    /// Per-input operator chains.
    branches: Vec<Vec<Box<dyn Operator>>>,
    /// The stage each branch feeds.
    branch_parents: Vec<(usize, Side)>,
    /// Upstream rows per branch (backfill; `None` for an exchange from another fragment).
    upstreams: Vec<Option<Arc<StateTable>>>,
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
    /// Writes of the actor itself (backfill positions) for the next barrier's batch.
    own_writes: Vec<(Vec<u8>, Vec<u8>)>,
    /// Committed state (the view's failing-row counts are read from it at recovery).
    store: Arc<StateStore>,
    /// Failing input rows counted in the current epoch (here and upstream).
    errors: RowErrors,
    /// The view's count of failing input rows, per (SQLSTATE, message).
    error_totals: BTreeMap<(String, String), i64>,
    /// Each input channel's latest watermarks (mapped through the tree at every barrier).
    watermarks: Vec<Vec<Watermark>>,
    /// Each node's cache figures at the last barrier (the node's counters sum the actors of
    /// a parallel fragment, so each adds what changed since its last report).
    reported_state: Vec<Option<crate::cache::CacheStats>>,
    /// Live counters, shared with whoever shows them.
    metrics: Arc<ViewMetrics>,
    /// Node of each branch's input and of each of its operators (indexes into `metrics`).
    branch_nodes: Vec<(usize, Vec<usize>)>,
    /// Node of each stage's join and of each of its operators.
    stage_nodes: Vec<(Option<usize>, Vec<usize>)>,
}

impl ViewActor {
    /// A view actor.
    pub fn new(
        placement: Placement,
        branches: Vec<Branch>,
        stages: Vec<Stage>,
        outputs: Vec<Target>,
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
        let mut branches = branches;
        let mut stages = stages;
        for op in branches.iter_mut().flat_map(|b| b.operators.iter_mut()).chain(stages.iter_mut().flat_map(|s| s.operators.iter_mut())) {
            op.attach_store(&store);
        }
        for join in stages.iter_mut().filter_map(|s| s.join.as_mut()) {
            join.attach_store(&store);
        }
        let id = placement.actor;
        let (metrics, branch_nodes, stage_nodes) = metric_nodes(id, &branches, &stages);
        if backfill.is_some() {
            metrics.backfill.pending.store(1, Relaxed);
        }
        let mut input_branch = Vec::new();
        for (i, b) in branches.into_iter().enumerate() {
            input_branch.extend(std::iter::repeat_n(i, b.inputs.len()));
            inputs.extend(b.inputs);
            chains.push(b.operators);
            upstreams.push(b.upstream);
            branch_parents.push(b.parent);
        }
        let watermarks = vec![Vec::new(); inputs.len()];
        let reported_state = vec![None; metrics.nodes.len()];
        Self {
            id,
            placement,
            input_branch,
            branches: chains,
            branch_parents,
            upstreams,
            inputs: Some(AlignedInputs::new(inputs)),
            stages,
            outputs: dispatcher,
            collector,
            backfill,
            own_writes: Vec::new(),
            store,
            errors: RowErrors::default(),
            error_totals: BTreeMap::new(),
            watermarks,
            reported_state,
            metrics,
            branch_nodes,
            stage_nodes,
        }
    }

    /// Shares `metrics`, the counters of the whole view, in which this actor's nodes start
    /// at `base` (see [`fragment_metrics`]).
    pub fn with_metrics(mut self, metrics: Arc<ViewMetrics>, base: usize) -> Self {
        for (input, ops) in &mut self.branch_nodes {
            *input += base;
            ops.iter_mut().for_each(|n| *n += base);
        }
        for (join, ops) in &mut self.stage_nodes {
            if let Some(j) = join {
                *j += base;
            }
            ops.iter_mut().for_each(|n| *n += base);
        }
        self.reported_state = vec![None; metrics.nodes.len()];
        self.metrics = metrics;
        self
    }

    /// Adds the change of node `node`'s cache figures since this actor last reported them.
    fn report_state(&mut self, node: usize, now: Option<crate::cache::CacheStats>) {
        let Some(now) = now else { return };
        let before = self.reported_state.get_mut(node).and_then(|s| s.replace(now)).unwrap_or_default();
        self.metrics.nodes[node].stats.add_state(before, now);
    }

    /// The view's live counters.
    pub fn metrics(&self) -> Arc<ViewMetrics> {
        self.metrics.clone()
    }

    /// Records input channel `b`'s watermark (watermarks only advance).
    fn watermark(&mut self, b: usize, w: Watermark) {
        if let Some(known) = self.watermarks.get_mut(b) {
            crate::watermark::advance(known, w);
        }
    }

    /// Maps the inputs' watermarks through the tree, children first (see
    /// [`Operator::on_watermarks`]). A union stage is as far as its slowest input; a join stage
    /// asks its join.
    fn propagate_watermarks(&mut self) -> Result<Vec<Watermark>> {
        let mut into: Vec<Vec<(Side, Vec<Watermark>)>> = vec![Vec::new(); self.stages.len()];
        let mut root = Vec::new();
        for b in 0..self.branches.len() {
            // A branch fed by several channels is as far as its slowest one.
            let channels: Vec<Vec<Watermark>> =
                self.input_branch.iter().zip(&self.watermarks).filter(|(ib, _)| **ib == b).map(|(_, w)| w.clone()).collect();
            let mut wms = crate::watermark::min_common(&channels);
            for op in &mut self.branches[b] {
                wms = op.on_watermarks(&wms)?;
            }
            let (parent, side) = self.branch_parents[b];
            if let Some(slot) = into.get_mut(parent) {
                slot.push((side, wms));
            }
        }
        for s in 0..self.stages.len() {
            let inputs = std::mem::take(&mut into[s]);
            let mut wms = match &mut self.stages[s].join {
                Some(join) => {
                    let side = |want: Side| inputs.iter().find(|(s, _)| *s == want).map(|(_, w)| w.clone()).unwrap_or_default();
                    join.on_watermarks(&side(Side::Left), &side(Side::Right))?
                }
                None => crate::watermark::min_common(&inputs.into_iter().map(|(_, w)| w).collect::<Vec<_>>()),
            };
            for op in &mut self.stages[s].operators {
                wms = op.on_watermarks(&wms)?;
            }
            match self.stages[s].parent {
                Some((p, side)) => {
                    if let Some(slot) = into.get_mut(p) {
                        slot.push((side, wms));
                    }
                }
                None => root = wms,
            }
        }
        Ok(root)
    }

    /// Runs until the view is dropped; failures and panics are reported, not propagated.
    pub async fn run(mut self) {
        let (id, collector) = (self.id, self.collector.clone());
        let owner = self.placement.view;
        run_reporting(id, owner, "materialized view", collector, self.run_inner()).await;
    }

    /// Runs `chunks` through `ops` (whose metric nodes are `nodes`).
    async fn apply(
        ops: &mut [Box<dyn Operator>],
        nodes: &[usize],
        metrics: &ViewMetrics,
        chunks: Vec<StreamChunk>,
        errors: &mut RowErrors,
        store: &StateStore,
    ) -> Result<Vec<StreamChunk>> {
        let mut chunks = chunks;
        for (op, node) in ops.iter_mut().zip(nodes) {
            let start = Instant::now();
            let (mut n, mut rows) = (0, 0);
            let mut next = Vec::new();
            for c in chunks.into_iter().flat_map(|c| c.split_rows(OPERATOR_CHUNK_ROWS)) {
                if !c.is_empty() {
                    n += 1;
                    rows += c.len();
                    op.prefetch(&c, store).await?;
                    next.extend(op.process(c, errors)?);
                }
            }
            metrics.nodes[*node].stats.record(n, rows, rows_of(&next), start);
            chunks = next;
        }
        Ok(chunks)
    }

    /// Adds the failing-row counts of `relation` (a view; tables have none) at `snapshot`.
    /// The failing-row counts this actor committed (recovery).
    async fn restore_error_totals(&mut self, snapshot: &eddy_storage::ReadSnapshot) -> Result<()> {
        let prefix = view_error_shard_prefix(self.placement.view, self.placement.shard);
        for (k, v) in snapshot.scan_prefix(&prefix).await? {
            if let Some((state, message, n)) = decode_view_error(&k, &v) {
                self.error_totals.insert((state, message), n);
            }
        }
        Ok(())
    }

    async fn inherit_errors(&mut self, relation: u32, snapshot: &eddy_storage::ReadSnapshot) -> Result<()> {
        let prefix = view_errors_prefix(relation);
        for (k, v) in snapshot.scan_prefix(&prefix).await? {
            if let Some((state, message, n)) = decode_view_error(&k, &v) {
                self.errors.add_delta(&state, &message, n);
            }
        }
        Ok(())
    }

    /// Writes the epoch's changes to the failing-row counts into `batch` and passes them on to
    /// the views defined on this one (or, from an earlier fragment, to the next one).
    async fn flush_errors(&mut self, batch: &mut EpochBatch) -> Result<()> {
        if self.errors.is_empty() {
            return Ok(());
        }
        let deltas = self.errors.take();
        for d in deltas.iter().filter(|_| self.placement.last) {
            let key = (d.sqlstate.clone(), d.message.clone());
            let total = self.error_totals.entry(key).or_default();
            *total += d.delta;
            let k = view_error_key(self.placement.view, self.placement.shard, &d.sqlstate, &d.message);
            if *total == 0 {
                self.error_totals.remove(&(d.sqlstate.clone(), d.message.clone()));
                batch.delete(k);
            } else {
                batch.put(k, total.to_be_bytes().to_vec());
            }
        }
        self.outputs.send(Message::Errors(deltas)).await
    }

    /// Pushes chunks into the tree at `at`, up to the root, and sends the root's output on.
    async fn push(&mut self, at: At, chunks: Vec<StreamChunk>) -> Result<()> {
        if chunks.iter().all(StreamChunk::is_empty) {
            return Ok(());
        }
        let metrics = self.metrics.clone();
        let (mut chunks, mut parent) = match at {
            At::Branch(b, from) => {
                let (input, nodes) = &self.branch_nodes[b];
                if from == 0 {
                    let rows = rows_of(&chunks);
                    metrics.nodes[*input].stats.record(chunks.len() as u64, rows, rows, Instant::now());
                }
                let out = Self::apply(&mut self.branches[b][from..], &nodes[from..], &metrics, chunks, &mut self.errors, &self.store).await?;
                (out, Some(self.branch_parents[b]))
            }
            At::Stage(s, from) => {
                let stage = self.stages.get_mut(s).ok_or_else(|| internal_err!("no stage {s}"))?;
                let nodes = &self.stage_nodes[s].1;
                (Self::apply(&mut stage.operators[from..], &nodes[from..], &metrics, chunks, &mut self.errors, &self.store).await?, stage.parent)
            }
        };
        while let Some((s, side)) = parent {
            if chunks.is_empty() {
                return Ok(());
            }
            let stage = self.stages.get_mut(s).ok_or_else(|| internal_err!("no stage {s}"))?;
            let (join_node, nodes) = &self.stage_nodes[s];
            if let Some(join) = &mut stage.join {
                let start = Instant::now();
                let (mut n, mut rows) = (0, 0);
                let mut joined = Vec::new();
                for c in chunks.into_iter().flat_map(|c| c.split_rows(OPERATOR_CHUNK_ROWS)) {
                    if !c.is_empty() {
                        n += 1;
                        rows += c.len();
                        join.prefetch(side, &c, &self.store).await?;
                        joined.extend(join.process(side, c, &mut self.errors)?);
                    }
                }
                if let Some(j) = join_node {
                    metrics.nodes[*j].stats.record(n, rows, rows_of(&joined), start);
                }
                chunks = joined;
            }
            chunks = Self::apply(&mut stage.operators, nodes, &metrics, chunks, &mut self.errors, &self.store).await?;
            parent = stage.parent;
        }
        let start = Instant::now();
        for c in chunks {
            if !c.is_empty() {
                self.outputs.send(Message::Chunk(c)).await?;
            }
        }
        metrics.output_wait_nanos.fetch_add(start.elapsed().as_nanos() as u64, Relaxed);
        Ok(())
    }

    /// Ends an epoch: flushes every operator's state into the epoch's batch, reports it and
    /// passes the barrier on. True if the barrier stops this actor.
    async fn barrier(&mut self, barrier: &Barrier) -> Result<bool> {
        let began = Instant::now();
        let watermarks = self.propagate_watermarks()?;
        let mut batch = EpochBatch::default();
        for (k, v) in self.own_writes.drain(..) {
            batch.put(k, v);
        }
        let metrics = self.metrics.clone();
        for b in 0..self.branches.len() {
            for i in 0..self.branches[b].len() {
                let start = Instant::now();
                let out = self.branches[b][i].on_barrier(barrier.epoch, &mut batch, &mut self.errors).await?;
                let node = self.branch_nodes[b].1[i];
                metrics.nodes[node].stats.record(0, 0, rows_of(&out), start);
                self.report_state(node, self.branches[b][i].state_stats());
                self.push(At::Branch(b, i + 1), out).await?;
            }
        }
        // Children before parents: a stage's barrier comes after its inputs' output.
        for s in 0..self.stages.len() {
            if let Some(join) = &mut self.stages[s].join {
                let start = Instant::now();
                let out = join.on_barrier(barrier.epoch, &mut batch, &mut self.errors).await?;
                let state = join.state_stats();
                if let Some(j) = self.stage_nodes[s].0 {
                    metrics.nodes[j].stats.record(0, 0, rows_of(&out), start);
                    self.report_state(j, state);
                }
                self.push(At::Stage(s, 0), out).await?;
            }
            for i in 0..self.stages[s].operators.len() {
                let start = Instant::now();
                let out = self.stages[s].operators[i].on_barrier(barrier.epoch, &mut batch, &mut self.errors).await?;
                let node = self.stage_nodes[s].1[i];
                metrics.nodes[node].stats.record(0, 0, rows_of(&out), start);
                self.report_state(node, self.stages[s].operators[i].state_stats());
                self.push(At::Stage(s, i + 1), out).await?;
            }
        }
        self.flush_errors(&mut batch).await?;
        metrics.epochs.fetch_add(1, Relaxed);
        metrics.barrier_nanos.fetch_add(began.elapsed().as_nanos() as u64, Relaxed);
        let report = Collected { actor: self.id, epoch: barrier.epoch, batch, waiters: vec![], failed: None };
        // The manager is gone only at shutdown; then nobody waits for this report.
        let _ = self.collector.send(report);
        // After the epoch's output: views on this one see the rows a watermark covers first.
        for w in watermarks {
            self.outputs.send(Message::Watermark(w)).await?;
        }
        self.outputs.send_barrier(self.id, barrier).await;
        Ok(barrier.stops(self.id))
    }

    async fn run_inner(&mut self) -> Result<()> {
        let mut inputs = self.inputs.take().ok_or_else(|| internal_err!("view actor started twice"))?;
        if let Some(bf) = self.backfill.take() {
            if !self.backfill(bf, &mut inputs).await? {
                return Ok(());
            }
        } else {
            // Recovery: the counts this actor committed so far.
            let snapshot = self.store.snapshot();
            self.restore_error_totals(&snapshot).await?;
        }
        loop {
            // Inputs close only when the relations they come from stopped without this view
            // being dropped first, i.e. failed: this view fails too (ending quietly would leave
            // the barrier manager waiting for its report forever).
            let Some(item) = inputs.next().await? else {
                return Err(internal_err!("the relation this view reads failed"));
            };
            match item {
                Aligned::Chunk(i, c) => self.push(At::Branch(self.input_branch[i], 0), vec![c]).await?,
                Aligned::Errors(_, d) => self.errors.merge(&d),
                Aligned::Watermark(b, w) => self.watermark(b, w),
                Aligned::Barrier(barrier) => {
                    if self.barrier(&barrier).await? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Rows (changes) in `chunks`.
fn rows_of(chunks: &[StreamChunk]) -> usize {
    chunks.iter().map(StreamChunk::len).sum()
}

/// Node ids of a branch: its input node and one per operator.
type BranchNodes = (usize, Vec<usize>);
/// Node ids of a stage: its join's (if any) and one per operator.
type StageNodes = (Option<usize>, Vec<usize>);

/// The metric nodes of a view's tree (see [`crate::metrics`]): an input node and the chain of
/// every branch, then the join and chain of every stage, each pointing at where its output goes.
fn metric_nodes(id: ActorId, branches: &[Branch], stages: &[Stage]) -> (Arc<ViewMetrics>, Vec<BranchNodes>, Vec<StageNodes>) {
    let mut nodes: Vec<Node> = Vec::new();
    let mut add = |kind, label: String, relation| {
        nodes.push(Node { kind, label, relation, parent: None, fragment: 0, stats: NodeStats::default() });
        nodes.len() - 1
    };
    let branch_nodes: Vec<BranchNodes> = branches
        .iter()
        .map(|b| {
            let input = match &b.upstream {
                Some(u) => add(NodeKind::Input, format!("Input {}", u.table_id()), Some(u.table_id())),
                None => add(NodeKind::Input, "Exchange".to_string(), None),
            };
            (input, b.operators.iter().map(|op| add(NodeKind::Operator, op.to_string(), None)).collect())
        })
        .collect();
    let stage_nodes: Vec<StageNodes> = stages
        .iter()
        .map(|s| {
            let join = s.join.as_ref().map(|j| add(NodeKind::Join, j.to_string(), None));
            (join, s.operators.iter().map(|op| add(NodeKind::Operator, op.to_string(), None)).collect())
        })
        .collect();
    // Where a stage's input goes first: its join, else its chain, else (an empty stage) on.
    fn entry(s: usize, stages: &[Stage], stage_nodes: &[StageNodes]) -> Option<usize> {
        let (join, ops) = stage_nodes.get(s)?;
        join.or_else(|| ops.first().copied()).or_else(|| stages[s].parent.and_then(|(p, _)| entry(p, stages, stage_nodes)))
    }
    // A chain: each node feeds the next, the last feeds `after`.
    let mut link = |chain: Vec<usize>, after: Option<usize>| {
        for w in chain.windows(2) {
            nodes[w[0]].parent = Some(w[1]);
        }
        if let Some(last) = chain.last() {
            nodes[*last].parent = after;
        }
    };
    for (b, (input, ops)) in branch_nodes.iter().enumerate() {
        let after = entry(branches[b].parent.0, stages, &stage_nodes);
        link(std::iter::once(*input).chain(ops.iter().copied()).collect(), after);
    }
    for (s, (join, ops)) in stage_nodes.iter().enumerate() {
        let after = stages[s].parent.and_then(|(p, _)| entry(p, stages, &stage_nodes));
        link(join.iter().copied().chain(ops.iter().copied()).collect(), after);
    }
    (Arc::new(ViewMetrics::new(id, nodes)), branch_nodes, stage_nodes)
}

/// One set of counters for a view run as fragments (`actors[f]` is an actor of fragment `f`;
/// `links[f]` the fragment and input its output goes to through an exchange, `None` for the
/// last): the nodes of every fragment in order, each fragment's output pointing at the input
/// node of the one it feeds. Returns the metrics and where each fragment's nodes start; give
/// every actor of fragment `f` the metrics with [`ViewActor::with_metrics`] at that base.
/// `backfills`: the number of actors that backfill (the view's is done when all of theirs are).
pub fn fragment_metrics(view: ActorId, actors: &[&ViewActor], links: &[Option<(usize, usize)>], backfills: u64) -> (Arc<ViewMetrics>, Vec<usize>) {
    let mut bases = Vec::new();
    let mut base = 0;
    for a in actors {
        bases.push(base);
        base += a.metrics.nodes.len();
    }
    let mut nodes = Vec::new();
    for (f, a) in actors.iter().enumerate() {
        let next = links.get(f).copied().flatten().and_then(|(g, k)| Some(bases[g] + actors.get(g)?.branch_nodes.get(k)?.0));
        for n in &a.metrics.nodes {
            let parent = n.parent.map(|p| p + bases[f]).or(next);
            nodes.push(Node { kind: n.kind, label: n.label.clone(), relation: n.relation, parent, fragment: f, stats: NodeStats::default() });
        }
    }
    let metrics = ViewMetrics::new(view, nodes);
    metrics.backfill.pending.store(backfills, Relaxed);
    (Arc::new(metrics), bases)
}

