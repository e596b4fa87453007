//! Views created in the background (`SET background_ddl = true`, as in RisingWave), and the
//! state a creation leaves.
//!
//! A background `CREATE MATERIALIZED VIEW` returns once the view's actors are subscribed. Its
//! creation record (`codec::creating_key`: the view's catalog entry and backfill settings)
//! commits before any of its state, and its actors commit their backfill positions with each
//! epoch's state. A task of the engine waits for the backfill and commits the catalog entry,
//! deleting the record and the positions in the same epoch. After a crash (or a graph rebuild)
//! [`Engine::resume_creating`] re-plans the view from its record with its state restored and
//! reads on from the committed positions, so nothing is read twice or missed.
//!
//! A foreground CREATE keeps no record: a crash is its failure, and what its backfill
//! committed is swept at the next start ([`Engine::sweep_orphans`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use eddy_common::codec::{backfill_prefix, creating_key, table_prefix, view_errors_prefix, CREATING_PREFIX};
use eddy_common::{internal_err, Epoch, Result};
use eddy_storage::{EpochBatch, ReadSnapshot};
use eddy_stream::{ActorId, Mutation, Target};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::views::BackfillStart;
use super::{clear_prefix, Engine, ViewPlanner};
use crate::catalog::{CatalogChange, TableCatalog};

/// What a creation record holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreatingRecord {
    /// The view's catalog entry, as it will commit.
    pub view: TableCatalog,
    /// Upstream rows read per epoch.
    pub rows_per_epoch: usize,
}

/// A view being created in the background, while this server runs it.
#[derive(Debug, Clone)]
pub struct Creating {
    pub schema: String,
    pub name: String,
    /// The relations it reads (which cannot be dropped under it).
    pub dependencies: Vec<u32>,
    /// Its actors (stopped if it is cancelled).
    pub actors: Vec<ActorId>,
    /// Its entry (its state tables and source readers).
    view: Arc<TableCatalog>,
    /// Which start of the view this is: a task that waited on an earlier one leaves it alone.
    token: u64,
}

/// The views being created in the background.
#[derive(Debug, Default)]
pub struct CreatingViews {
    views: Mutex<BTreeMap<u32, Creating>>,
    next_token: AtomicU64,
    /// Signalled whenever a creation ends.
    ended: tokio::sync::Notify,
}

impl CreatingViews {
    /// The id of the view named `schema.name` being created, if one is.
    pub fn named(&self, schema: &str, name: &str) -> Option<u32> {
        self.views.lock().iter().find(|(_, c)| c.schema == schema && c.name == name).map(|(id, _)| *id)
    }

    /// The views being created that read relation `id`.
    pub fn reading(&self, id: u32) -> Vec<(u32, String)> {
        self.views.lock().iter().filter(|(_, c)| c.dependencies.contains(&id)).map(|(v, c)| (*v, c.name.clone())).collect()
    }

    /// Names of every view being created.
    pub fn names(&self) -> Vec<String> {
        self.views.lock().values().map(|c| format!("{}.{}", c.schema, c.name)).collect()
    }

    /// Registers (or re-registers, after a rebuild) `view` as being created; the token names
    /// this start of it.
    fn register(&self, view: &TableCatalog, actors: Vec<ActorId>) -> u64 {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = Creating {
            schema: view.schema.clone(),
            name: view.name.clone(),
            dependencies: view.dependencies.clone(),
            actors,
            view: Arc::new(view.clone()),
            token,
        };
        self.views.lock().insert(view.id, entry);
        token
    }

    /// Ends the creation of `id` if `token` is still its current start (always, without a
    /// token); returns what it was.
    fn end(&self, id: u32, token: Option<u64>) -> Option<Creating> {
        let mut views = self.views.lock();
        if token.is_some_and(|t| views.get(&id).is_none_or(|c| c.token != t)) {
            return None;
        }
        let ended = views.remove(&id);
        drop(views);
        self.ended.notify_waiters();
        ended
    }

    /// Waits until no view is being created (`WAIT`).
    pub async fn wait_all(&self) {
        loop {
            let ended = self.ended.notified();
            if self.views.lock().is_empty() {
                return;
            }
            ended.await;
        }
    }
}

/// The epoch a view's state became complete in: the last of its backfilling actors' (an error
/// if one of them ended without completing).
pub async fn backfill_done(done: Vec<oneshot::Receiver<Epoch>>) -> std::result::Result<Epoch, oneshot::error::RecvError> {
    let mut last = Epoch::ZERO;
    for rx in done {
        last = last.max(rx.await?);
    }
    Ok(last)
}

impl Engine {
    /// Deletes of all of `rel`'s state: its rows, its operators' tables, its failing-row
    /// counts, its recorded failure, and (a view created in the background) its creation
    /// record and backfill positions.
    pub async fn state_deletes(&self, rel: &TableCatalog) -> Result<EpochBatch> {
        let snapshot = self.store.snapshot();
        let mut batch = EpochBatch::default();
        for id in std::iter::once(rel.id).chain(rel.internal_tables.iter().copied()) {
            clear_prefix(&self.store, &snapshot, &table_prefix(id), &mut batch).await?;
        }
        clear_prefix(&self.store, &snapshot, &view_errors_prefix(rel.id), &mut batch).await?;
        clear_prefix(&self.store, &snapshot, &backfill_prefix(rel.id), &mut batch).await?;
        batch.delete(eddy_common::codec::failure_key(rel.id));
        batch.delete(eddy_common::codec::ingest_position_key(rel.id));
        batch.delete(eddy_common::codec::watermark_key(rel.id));
        batch.delete(creating_key(rel.id));
        Ok(batch)
    }

    /// Removes what a view that failed (or was cancelled) while being created committed.
    /// Should that fail, the state stays under ids that are never reused.
    pub async fn discard_view_state(&self, view: &TableCatalog) {
        let result = async {
            let batch = self.state_deletes(view).await?;
            self.barrier.commit_writes(batch).await
        }
        .await;
        if let Err(e) = result {
            tracing::warn!("state of abandoned materialized view {} was not removed: {e}", view.name);
        }
        self.barrier.forget_failure(view.id);
    }

    /// Stops the actors (and source readers, among its internal tables) of a view that will
    /// not be completed.
    pub async fn stop_view_actors(&self, view: &TableCatalog, actors: &[ActorId]) {
        self.forget_view_metrics(view.id);
        let stop = std::iter::once(view.id).chain(actors.iter().copied()).chain(view.internal_tables.iter().copied()).collect();
        if let Err(e) = self.barrier.inject(Mutation { stop, ..Default::default() }, vec![]).await {
            tracing::warn!("cannot stop the actors of abandoned view {}: {e}", view.name);
        }
        self.forget_view_actors(view.id);
        self.forget_readers(&view.internal_tables);
    }

    /// A background CREATE (or a resumed one): registers the view as being created and
    /// spawns the task that commits its catalog entry once every actor's backfill is done.
    pub fn complete_in_background(self: &Arc<Self>, view: TableCatalog, actors: Vec<ActorId>, done: Vec<oneshot::Receiver<Epoch>>) {
        let token = self.creating.register(&view, actors.clone());
        let engine = Arc::downgrade(self);
        tokio::spawn(async move {
            let done = backfill_done(done).await;
            let Some(engine) = engine.upgrade() else { return };
            engine.finish_creating(view, token, done.ok(), &actors).await;
        });
    }

    /// Ends a background creation: commits the view (`done`: the epoch its state became
    /// complete in) or, if its backfill failed, removes it. A backfill that ended because the
    /// graph was rebuilt (or cancelled) is left to its new start (or to the cancel).
    async fn finish_creating(&self, view: TableCatalog, token: u64, done: Option<Epoch>, actors: &[ActorId]) {
        let Some(epoch) = done else {
            // The actor's failure report reaches the barrier manager with the next barrier.
            if let Err(e) = self.barrier.flush().await {
                tracing::warn!("no barrier after the backfill of {} ended: {e}", view.name);
            }
            if self.view_failure(&view).is_none() || self.creating.end(view.id, Some(token)).is_none() {
                return;
            }
            tracing::error!("the background creation of materialized view {} failed; it is removed", view.name);
            self.stop_view_actors(&view, actors).await;
            self.discard_view_state(&view).await;
            return;
        };
        // Why the catalog refused the view (the commit's own errors leave it to its next start).
        let mut refused = false;
        let committed = async {
            // Its last positions are in the epoch the backfill ended with.
            self.store.committed_through(epoch).await?;
            let snapshot = self.store.snapshot();
            let mut extra = EpochBatch::default();
            clear_prefix(&self.store, &snapshot, &backfill_prefix(view.id), &mut extra).await?;
            extra.delete(creating_key(view.id));
            let failure = self.view_failure(&view);
            self.ddl(|cat| {
                let check = || {
                    if let Some(e) = failure {
                        return Err(e);
                    }
                    cat.require_schema(&view.schema)?;
                    if cat.table(&view.schema, &view.name).is_some() {
                        return Err(internal_err!("a relation named \"{}\" was created meanwhile", view.name));
                    }
                    if view.dependencies.iter().any(|d| cat.by_id(*d).is_none()) {
                        return Err(internal_err!("a relation it reads was dropped"));
                    }
                    if self.creating.views.lock().get(&view.id).is_none_or(|c| c.token != token) {
                        return Err(internal_err!("its creation was cancelled"));
                    }
                    Ok(())
                };
                check().inspect_err(|_| refused = true)?;
                Ok((vec![CatalogChange::CreateTable(view.clone())], extra))
            })
            .await
        }
        .await;
        match committed {
            Ok(()) => tracing::info!("materialized view {} created in the background", view.name),
            // A failed commit rebuilds the graph, which starts the view again from its record.
            Err(e) if !refused => return tracing::warn!("materialized view {} was not committed yet: {e}", view.name),
            Err(e) => {
                if self.creating.end(view.id, Some(token)).is_none() {
                    return;
                }
                tracing::error!("materialized view {} could not be created in the background: {e}", view.name);
                self.stop_view_actors(&view, actors).await;
                self.discard_view_state(&view).await;
                return;
            }
        }
        self.creating.end(view.id, Some(token));
    }

    /// `DROP` of a view being created in the background: stops it and removes its state.
    pub async fn cancel_creating(&self, id: u32) -> Result<()> {
        let Some(c) = self.creating.end(id, None) else { return Ok(()) };
        self.stop_view_actors(&c.view, &c.actors).await;
        self.discard_view_state(&c.view).await;
        Ok(())
    }

    /// The committed creation records, by view id.
    pub async fn creating_records(&self, snapshot: &ReadSnapshot) -> Result<BTreeMap<u32, CreatingRecord>> {
        let mut records = BTreeMap::new();
        for (_, v) in snapshot.scan_prefix(CREATING_PREFIX).await? {
            let r: CreatingRecord = serde_json::from_slice(&v).map_err(|e| internal_err!("corrupt creation record: {e}"))?;
            records.insert(r.view.id, r);
        }
        Ok(records)
    }

    /// Recovery: restarts the background creations that were under way, reading on from
    /// their committed positions. Each one's actors are added to `outputs` of the relations
    /// they read; a creation that cannot start again (a relation it reads failed or is gone,
    /// or it no longer plans) is removed. Called before the catalog's views start (nothing
    /// reads a view being created, so its actors come first).
    pub(super) async fn resume_creating(
        self: &Arc<Self>,
        planner: &dyn ViewPlanner,
        snapshot: &ReadSnapshot,
        failed: &HashMap<u32, String>,
        outputs: &mut HashMap<u32, Vec<Target>>,
    ) -> Result<()> {
        for (id, record) in self.creating_records(snapshot).await? {
            let view = record.view;
            let catalog = self.catalog();
            let reason = if failed.contains_key(&id) {
                Some("its backfill failed".to_string())
            } else {
                let gone = view.dependencies.iter().find(|d| catalog.by_id(**d).is_none() || failed.contains_key(d));
                gone.map(|d| format!("a relation it reads (id {d}) failed or was dropped"))
            };
            let builds = match reason {
                Some(r) => Err(r),
                None => {
                    let mut builds = Vec::new();
                    for _ in 0..view.parallelism.max(1) {
                        builds.push(planner.view_operators(&view, snapshot).await);
                    }
                    builds.into_iter().collect::<Result<Vec<_>>>().map_err(|e| format!("it could not be planned again: {}", e.message))
                }
            };
            let builds = match builds {
                Ok(b) => b,
                Err(reason) => {
                    self.abandon_at_start(&view, &reason).await?;
                    continue;
                }
            };
            let start = BackfillStart { rows_per_epoch: record.rows_per_epoch, resume: true, record_positions: true };
            let mut started = self.start_view(&view, builds, vec![], Some(start), Some(snapshot)).await?;
            for (upstream, o) in std::mem::take(&mut started.upstream_outputs) {
                outputs.entry(upstream).or_default().push(o);
            }
            for a in &started.actors {
                self.barrier.add_actor(*a).await;
            }
            let handles = started.backfill.take().ok_or_else(|| internal_err!("a resumed view without a backfill"))?;
            let committed = self.store.committed_epoch();
            for tx in handles.epochs {
                let _ = tx.send(committed);
            }
            let actors = started.actors.clone();
            started.spawn(self);
            tracing::info!("resuming the background creation of materialized view {}", view.name);
            self.complete_in_background(view, actors, handles.done);
        }
        Ok(())
    }

    /// Removes a background creation that cannot start again.
    async fn abandon_at_start(&self, view: &TableCatalog, reason: &str) -> Result<()> {
        tracing::error!("the background creation of materialized view {} is abandoned: {reason}", view.name);
        let batch = self.state_deletes(view).await?;
        self.barrier.commit_writes(batch).await?;
        self.barrier.forget_failure(view.id);
        Ok(())
    }

    /// Deletes state under ids no catalog entry or creation record owns — what a foreground
    /// CREATE MATERIALIZED VIEW that crashed mid-backfill committed — and returns how many ids
    /// it cleared. Run at startup only, before any session can start a CREATE of its own.
    pub(super) async fn sweep_orphans(&self) -> Result<usize> {
        let snapshot = self.store.snapshot();
        let creating = self.creating_records(&snapshot).await?;
        let catalog = self.catalog();
        let owned: HashSet<u32> = catalog
            .tables()
            .map(|t| &**t)
            .chain(creating.values().map(|r| &r.view))
            .flat_map(|t| std::iter::once(t.id).chain(t.internal_tables.iter().copied()))
            .collect();
        let mut batch = EpochBatch::default();
        let (mut next, mut swept) = (1u32, 0usize);
        loop {
            // The first key at or after `next` names the next id that has state.
            let start = std::ops::Bound::Included(table_prefix(next).to_vec());
            let mut cursor = snapshot.scan_batches(start, std::ops::Bound::Unbounded, 1).await?;
            let Some(first) = cursor.next_batch().await? else { break };
            let Some(id) = first.first().and_then(|(k, _)| k.get(..4)).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes) else {
                break;
            };
            if !owned.contains(&id) {
                clear_prefix(&self.store, &snapshot, &table_prefix(id), &mut batch).await?;
                clear_prefix(&self.store, &snapshot, &view_errors_prefix(id), &mut batch).await?;
                batch.delete(eddy_common::codec::failure_key(id));
                swept += 1;
            }
            let Some(after) = id.checked_add(1) else { break };
            next = after;
        }
        if swept > 0 {
            self.barrier.commit_writes(batch).await?;
        }
        Ok(swept)
    }
}
