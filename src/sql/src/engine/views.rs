//! Starting a materialized view's actors (docs/architecture.md, "Parallel fragments"): one
//! actor running the view's whole operator tree, or fragments of parallel actors joined by hash
//! exchanges.
//!
//! A parallel view of `n` actors per fragment is planned `n` times (one build per actor index,
//! state-table ids shared), and each build is cut into the same fragments
//! ([`super::fragments::cut`]). Actor `i` of every fragment owns vnodes `codec::vnodes_of(i, n)`:
//! * an input read from an upstream relation is routed by the upstream's own key, and each
//!   actor backfills only its vnodes of the upstream;
//! * an input from another fragment receives from every actor of that fragment, routed by the
//!   vnode its first operator's state keys carry (a grouping's key, a join's key), so each
//!   actor owns its state;
//! * the actors of the last fragment write the view's rows (a row's key follows the
//!   fragment's distribution) and keep their own share of the view's failing-row counts; a
//!   [`Merger`] joins their outputs into the one change stream views on this one,
//!   subscriptions and sinks read.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use eddy_common::codec::vnodes_of;
use eddy_common::{internal_err, Epoch, Result};
use eddy_storage::ReadSnapshot;
use eddy_stream::exchange::{Merger, TableRouter};
use eddy_stream::{
    fragment_metrics, ActorId, Backfill, Branch, HashOutput, Message, Output, Placement, Stage, Target, ViewActor, ViewMetrics, CHANNEL_CAPACITY,
};
use tokio::sync::{mpsc, oneshot};

use super::fragments::{can_cut, cut, Fragment, Source};
use super::{Engine, ViewOperators};
use crate::catalog::TableCatalog;

/// Actor ids of the actors of parallel views start here (relation ids count up from 1, the
/// ids of subscriptions down from `u32::MAX`).
pub const FIRST_ACTOR_ID: u32 = 1 << 30;

/// How a view's actors backfill: rows read per epoch, and whether they read on from committed
/// positions (recovery of a view created in the background) or from the start.
#[derive(Debug, Clone, Copy)]
pub struct BackfillStart {
    pub rows_per_epoch: usize,
    pub resume: bool,
    pub record_positions: bool,
}

/// A new view's backfills: each backfilling actor is told the epoch that subscribed it, and
/// tells the epoch with which its share of the view became complete.
pub struct BackfillHandles {
    pub epochs: Vec<oneshot::Sender<Epoch>>,
    pub done: Vec<oneshot::Receiver<Epoch>>,
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A view's actors, wired and ready to run.
pub struct StartedView {
    /// What each upstream relation must add to its outputs (by the upstream's id).
    pub upstream_outputs: Vec<(u32, Target)>,
    /// The actors that report to the barrier manager.
    pub actors: Vec<ActorId>,
    /// The view's counters.
    pub metrics: Arc<ViewMetrics>,
    /// For a new view: its backfills.
    pub backfill: Option<BackfillHandles>,
    /// The actors' tasks (and the merger's), to spawn once they are registered.
    tasks: Vec<Task>,
}

impl StartedView {
    /// Spawns the actors (after they were registered with the barrier manager).
    pub fn spawn(self, engine: &Engine) {
        for t in self.tasks {
            engine.spawn_actor(t);
        }
    }
}

/// True if a view planned as `ops` can run as parallel fragments (see [`super::fragments::can_cut`]).
pub fn can_run_parallel(ops: &ViewOperators) -> bool {
    can_cut(&ops.branches, &ops.stages)
}

/// [`can_run_parallel`] of a plan's parts.
pub fn chain_can_run_parallel(branches: &[super::ViewBranch], stages: &[Stage]) -> bool {
    can_cut(branches, stages)
}

impl Engine {
    /// The actors of view `id` (stopped together when it is dropped).
    pub fn view_actors(&self, id: u32) -> Vec<ActorId> {
        self.view_actors.lock().get(&id).cloned().unwrap_or_else(|| vec![id])
    }

    /// Forgets the actors of a dropped view.
    pub fn forget_view_actors(&self, id: u32) {
        self.view_actors.lock().remove(&id);
    }

    fn next_actor_id(&self) -> ActorId {
        self.next_actor.fetch_add(1, Ordering::Relaxed)
    }

    /// Wires the actors of `view` from `builds` (one per actor index: one build runs the view
    /// in one actor, `n` run it as fragments of `n` actors each), sending the view's changes to
    /// `outputs`. A new view backfills `rows_per_epoch` upstream rows per epoch; a restored
    /// one (`restore`: the committed snapshot) resumes its source readers where they were.
    pub async fn start_view(
        &self,
        view: &TableCatalog,
        builds: Vec<ViewOperators>,
        outputs: Vec<Target>,
        backfill: Option<BackfillStart>,
        restore: Option<&ReadSnapshot>,
    ) -> Result<StartedView> {
        let n = builds.len();
        let name = format!("{}.{}", view.schema, view.name);
        let mut handles = backfill.map(|_| BackfillHandles { epochs: Vec::new(), done: Vec::new() });
        let mut backfill = || -> Option<Backfill> {
            let (BackfillStart { rows_per_epoch, resume, record_positions }, h) = (backfill?, handles.as_mut()?);
            let (epoch_tx, epoch) = oneshot::channel();
            let (done, done_rx) = oneshot::channel();
            h.epochs.push(epoch_tx);
            h.done.push(done_rx);
            Some(Backfill { epoch, barrier: self.barrier.clone(), done, rows_per_epoch, resume, record_positions })
        };
        if n == 1 {
            let ops = builds.into_iter().next().ok_or_else(|| internal_err!("a view without operators"))?;
            let (branches, upstream_outputs) = self.wire_branches(view.id, ops.branches, restore).await?;
            let bf = backfill();
            let actor = ViewActor::new(Placement::single(view.id), branches, ops.stages, outputs, self.barrier.collector(), self.store.clone(), bf);
            let metrics = actor.metrics();
            self.register_view_metrics(name, metrics.clone());
            self.view_actors.lock().insert(view.id, vec![view.id]);
            return Ok(StartedView { upstream_outputs, actors: vec![view.id], metrics, backfill: handles, tasks: vec![Box::pin(actor.run())] });
        }
        // Each build cut into the same fragments: cuts[i][f] is actor i of fragment f.
        let mut cuts: Vec<Vec<Fragment>> = Vec::with_capacity(n);
        for ops in builds {
            if !can_run_parallel(&ops) {
                return Err(internal_err!("materialized view {name} cannot run in parallel"));
            }
            cuts.push(cut(ops)?);
        }
        let fragments = cuts[0].len();
        let ids: Vec<Vec<ActorId>> = (0..fragments).map(|_| (0..n).map(|_| self.next_actor_id()).collect()).collect();
        // Channels: inputs[f][j][k] feed input k of actor j of fragment f; the sending ends go
        // to the upstream of an input read from a relation, or to the actors of the fragment
        // an exchange comes from (feeds[f]: the consumer's input and the exchange's router).
        let mut inputs: Vec<Vec<Vec<Vec<mpsc::Receiver<Message>>>>> =
            cuts[0].iter().map(|fr| (0..n).map(|_| fr.inputs.iter().map(|_| Vec::new()).collect()).collect()).collect();
        let mut producer_outputs: Vec<Vec<Vec<Output>>> = (0..fragments).map(|_| (0..n).map(|_| Vec::new()).collect()).collect();
        let mut feeds: Vec<Option<Arc<dyn eddy_stream::Router>>> = vec![None; fragments];
        let mut links: Vec<Option<(usize, usize)>> = vec![None; fragments];
        let mut upstream_outputs = Vec::new();
        let mut readers = super::ReaderInputs::default();
        for (g, fragment) in cuts[0].iter().enumerate() {
            for (k, input) in fragment.inputs.iter().enumerate() {
                match &input.source {
                    Source::Upstream(branch) => {
                        let mut outs = Vec::new();
                        for j in 0..n {
                            let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
                            inputs[g][j][k].push(rx);
                            outs.push(Output { actor: ids[g][j], tx });
                        }
                        let entry = Target::Hash(HashOutput { outputs: outs, router: Arc::new(TableRouter(branch.upstream.state_table()?)) });
                        match branch.reader {
                            Some(r) => readers.entry(r).or_insert_with(|| (branch.upstream.clone(), branch.constant.clone(), Vec::new())).2.push(entry),
                            None => upstream_outputs.push((branch.upstream.id, entry)),
                        }
                    }
                    Source::Exchange(f, router) => {
                        for outputs in producer_outputs[*f].iter_mut() {
                            for j in 0..n {
                                let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
                                inputs[g][j][k].push(rx);
                                outputs.push(Output { actor: ids[g][j], tx });
                            }
                        }
                        feeds[*f] = Some(router.clone());
                        links[*f] = Some((g, k));
                    }
                }
            }
        }
        for (reader, (source, constant, entries)) in readers {
            self.start_reader(view.id, reader, &source, constant, entries, restore).await?;
        }
        // The last fragment's actors send to the merger.
        let mut merged = Vec::new();
        let mut to_merger = Vec::new();
        for _ in 0..n {
            let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
            merged.push(rx);
            to_merger.push(Target::One(Output { actor: view.id, tx }));
        }
        let mut actors: Vec<Vec<ViewActor>> = (0..fragments).map(|_| Vec::new()).collect();
        let mut backfills = 0;
        for (i, cut) in cuts.into_iter().enumerate() {
            let vnodes = vnodes_of(i, n);
            for (f, fragment) in cut.into_iter().enumerate() {
                let out = match feeds[f].clone() {
                    Some(router) => vec![Target::Hash(HashOutput { outputs: std::mem::take(&mut producer_outputs[f][i]), router })],
                    None => vec![to_merger.remove(0)],
                };
                let reads_upstream = fragment.inputs.iter().any(|inp| matches!(inp.source, Source::Upstream(_)));
                let mut branches = Vec::with_capacity(fragment.inputs.len());
                for (k, input) in fragment.inputs.into_iter().enumerate() {
                    // An input read by the view's own reader has nothing to backfill (see
                    // `Engine::wire_branches`).
                    let upstream = match &input.source {
                        Source::Upstream(b) if b.reader.is_none() => Some(b.upstream.state_table()?),
                        Source::Upstream(_) | Source::Exchange(..) => None,
                    };
                    let mut operators = input.operators;
                    for op in &mut operators {
                        op.own_vnodes(vnodes.clone());
                    }
                    branches.push(Branch { inputs: std::mem::take(&mut inputs[f][i][k]), operators, upstream, parent: input.parent });
                }
                let mut stages = fragment.stages;
                for st in &mut stages {
                    st.operators.iter_mut().for_each(|op| op.own_vnodes(vnodes.clone()));
                    if let Some(j) = st.join.as_mut() {
                        j.own_vnodes(vnodes.clone());
                    }
                }
                let placement = Placement { actor: ids[f][i], view: view.id, shard: i as u16, vnodes: vnodes.clone(), last: f + 1 == fragments, first: i == 0, fragment: f as u16 };
                let bf = if reads_upstream { backfill() } else { None };
                backfills += u64::from(bf.is_some());
                actors[f].push(ViewActor::new(placement, branches, stages, out, self.barrier.collector(), self.store.clone(), bf));
            }
        }
        let firsts: Vec<&ViewActor> = actors.iter().filter_map(|a| a.first()).collect();
        let (metrics, bases) = fragment_metrics(view.id, &firsts, &links, backfills);
        let mut tasks: Vec<Task> = Vec::new();
        for (f, fragment) in actors.into_iter().enumerate() {
            for a in fragment {
                tasks.push(Box::pin(a.with_metrics(metrics.clone(), bases[f]).run()));
            }
        }
        tasks.push(Box::pin(Merger::new(view.id, merged, outputs).run()));
        self.register_view_metrics(name, metrics.clone());
        let all: Vec<ActorId> = ids.into_iter().flatten().collect();
        self.view_actors.lock().insert(view.id, all.clone());
        Ok(StartedView { upstream_outputs, actors: all, metrics, backfill: handles, tasks })
    }
}
