//! Starting a materialized view's actors (docs/architecture.md, "Parallel fragments"): one
//! actor running the view's whole operator tree, or — for a chain of operators that can be
//! split by key — fragments of parallel actors joined by hash exchanges.
//!
//! A parallel view of `n` actors per fragment is planned `n` times (one build per actor
//! index, state-table ids shared), and each build's chain is cut before every operator that
//! needs an exchange ([`eddy_stream::exchange::split_chain`]). Actor `i` of every fragment owns
//! vnodes `codec::vnodes_of(i, n)`:
//! * the first fragment reads the upstream relation: the upstream routes its changes by the
//!   vnode its own state keys carry, and each actor backfills only its vnodes of the upstream;
//! * each later fragment receives from every actor of the one before, routed by the vnode its
//!   first operator's state keys carry (a grouping's key), so each actor owns its state;
//! * the actors of the last fragment write the view's rows (each row is produced by one actor,
//!   its key following the fragment's distribution) and keep their own share of the view's
//!   failing-row counts; a [`Merger`] joins their outputs into the one change stream views on
//!   this one, subscriptions and sinks read.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use eddy_common::codec::vnodes_of;
use eddy_common::{internal_err, Epoch, Result};
use eddy_storage::ReadSnapshot;
use eddy_stream::exchange::{parallelizable, split_chain, Merger, TableRouter};
use eddy_stream::operator::{Distribution, Side};
use eddy_stream::{
    fragment_metrics, ActorId, Backfill, Branch, HashOutput, Message, Output, Placement, Stage, Target, ViewActor, ViewMetrics, CHANNEL_CAPACITY,
};
use tokio::sync::{mpsc, oneshot};

use super::{Engine, ViewOperators};
use crate::catalog::TableCatalog;

/// Actor ids of the actors of parallel views start here (relation ids count up from 1, the
/// ids of subscriptions down from `u32::MAX`).
pub const FIRST_ACTOR_ID: u32 = 1 << 30;

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

/// True if a view planned as `ops` can run as parallel fragments: no join, every operator
/// either stateless or partitioned by key, and with several inputs (a UNION ALL, a HOP
/// window) the exchanges only after they meet.
pub fn can_run_parallel(ops: &ViewOperators) -> bool {
    chain_can_run_parallel(&ops.branches, &ops.stages)
}

/// [`can_run_parallel`] of a plan's parts.
pub fn chain_can_run_parallel(branches: &[super::ViewBranch], stages: &[Stage]) -> bool {
    let [root] = stages else { return false };
    let stateless = |b: &super::ViewBranch| b.operators.iter().all(|op| matches!(op.distribution(), Distribution::Any));
    let inputs_ok = match branches {
        [b] => parallelizable(&b.operators),
        bs => !bs.is_empty() && bs.iter().all(stateless),
    };
    root.join.is_none() && root.parent.is_none() && inputs_ok && parallelizable(&root.operators)
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
        rows_per_epoch: Option<usize>,
        restore: Option<&ReadSnapshot>,
    ) -> Result<StartedView> {
        let n = builds.len();
        let name = format!("{}.{}", view.schema, view.name);
        let mut handles = rows_per_epoch.map(|_| BackfillHandles { epochs: Vec::new(), done: Vec::new() });
        let mut backfill = || -> Option<Backfill> {
            let (rows_per_epoch, h) = (rows_per_epoch?, handles.as_mut()?);
            let (epoch_tx, epoch) = oneshot::channel();
            let (done, done_rx) = oneshot::channel();
            h.epochs.push(epoch_tx);
            h.done.push(done_rx);
            Some(Backfill { epoch, barrier: self.barrier.clone(), done, rows_per_epoch })
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
        // Each build cut into fragments: the first reads the view's inputs (its branches, and
        // the root's operators up to the first exchange), the others continue the root's chain.
        let mut leaves: Vec<Vec<super::ViewBranch>> = Vec::with_capacity(n);
        let mut chains = Vec::with_capacity(n);
        for ops in builds {
            if !can_run_parallel(&ops) {
                return Err(internal_err!("materialized view {name} cannot run in parallel"));
            }
            let (mut branches, mut stages) = (ops.branches, ops.stages);
            let root = stages.pop().ok_or_else(|| internal_err!("a view without a root stage"))?;
            let chain = match branches.as_mut_slice() {
                // A lone input's chain may hold exchanges of its own.
                [b] => {
                    let mut chain = split_chain(std::mem::take(&mut b.operators).into_iter().chain(root.operators).collect())?;
                    b.operators = std::mem::take(&mut chain[0].operators);
                    chain
                }
                _ => split_chain(root.operators)?,
            };
            leaves.push(branches);
            chains.push(chain);
        }
        let fragments = chains[0].len();
        let inputs_per_leaf = leaves[0].len();
        let routers: Vec<_> = chains[0].iter().map(|f| f.router.clone()).collect();
        let ids: Vec<Vec<ActorId>> = (0..fragments).map(|_| (0..n).map(|_| self.next_actor_id()).collect()).collect();
        // Channels into each actor: inputs[f][j] are actor j of fragment f's, senders[f][j] the
        // matching ends. Fragment 0 has one per branch (from its upstream), the others one per
        // actor of the fragment before.
        let mut inputs: Vec<Vec<Vec<mpsc::Receiver<Message>>>> = (0..fragments).map(|_| (0..n).map(|_| Vec::new()).collect()).collect();
        let mut senders: Vec<Vec<Vec<Output>>> = (0..fragments).map(|_| (0..n).map(|_| Vec::new()).collect()).collect();
        for f in 0..fragments {
            let from = if f == 0 { inputs_per_leaf } else { n };
            for j in 0..n {
                for _ in 0..from {
                    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
                    inputs[f][j].push(rx);
                    senders[f][j].push(Output { actor: ids[f][j], tx });
                }
            }
        }
        // Each input's upstream (or the view's source reader) routes by its own key to the
        // actors of fragment 0.
        let mut upstream_outputs = Vec::new();
        let mut readers: std::collections::BTreeMap<u32, (Arc<TableCatalog>, Vec<Target>)> = Default::default();
        for (k, branch) in leaves[0].iter().enumerate() {
            let entry = Target::Hash(HashOutput {
                outputs: senders[0].iter_mut().map(|s| s[k].clone()).collect(),
                router: Arc::new(TableRouter(branch.upstream.state_table()?)),
            });
            match branch.reader {
                Some(r) => readers.entry(r).or_insert_with(|| (branch.upstream.clone(), Vec::new())).1.push(entry),
                None => upstream_outputs.push((branch.upstream.id, entry)),
            }
        }
        for (reader, (source, entries)) in readers {
            self.start_reader(view.id, reader, &source, entries, restore).await?;
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
        for (i, (chain, leaf)) in chains.into_iter().zip(leaves).enumerate() {
            let vnodes = vnodes_of(i, n);
            let mut leaf = Some(leaf);
            for (f, fragment) in chain.into_iter().enumerate() {
                let out = if f + 1 < fragments {
                    let router = routers[f + 1].clone().ok_or_else(|| internal_err!("an exchange without a router"))?;
                    vec![Target::Hash(HashOutput { outputs: (0..n).map(|j| senders[f + 1][j].remove(0)).collect(), router })]
                } else {
                    vec![to_merger.remove(0)]
                };
                let mut channels = std::mem::take(&mut inputs[f][i]).into_iter();
                let (mut branches, root_ops) = match leaf.take() {
                    // Fragment 0: the view's inputs, each read by vnode range, meeting in the root.
                    Some(leaf) => {
                        let mut branches = Vec::with_capacity(leaf.len());
                        for b in leaf {
                            let input = channels.next().ok_or_else(|| internal_err!("an input without a channel"))?;
                            branches.push(Branch { inputs: vec![input], operators: b.operators, upstream: Some(b.upstream.state_table()?), parent: b.parent });
                        }
                        (branches, fragment.operators)
                    }
                    None => (vec![Branch { inputs: channels.collect(), operators: fragment.operators, upstream: None, parent: (0, Side::Left) }], Vec::new()),
                };
                for op in branches.iter_mut().flat_map(|b| b.operators.iter_mut()) {
                    op.own_vnodes(vnodes.clone());
                }
                let mut root = Stage { join: None, operators: root_ops, parent: None };
                for op in &mut root.operators {
                    op.own_vnodes(vnodes.clone());
                }
                let placement = Placement { actor: ids[f][i], view: view.id, shard: i as u16, vnodes: vnodes.clone(), last: f + 1 == fragments, first: i == 0 };
                let bf = if f == 0 { backfill() } else { None };
                backfills += u64::from(bf.is_some());
                actors[f].push(ViewActor::new(placement, branches, vec![root], out, self.barrier.collector(), self.store.clone(), bf));
            }
        }
        let firsts: Vec<&ViewActor> = actors.iter().filter_map(|a| a.first()).collect();
        let (metrics, bases) = fragment_metrics(view.id, &firsts, backfills);
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
