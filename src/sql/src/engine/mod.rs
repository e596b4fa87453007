//! [`Engine`]: the process-wide database — state store, barrier manager and catalog — that
//! sessions share (layer 2 of the SQL crate). Nothing here is global: tests run several engines
//! in one process.
//!
//! Recovery starts every table's source actor and every view's actor from committed state. The
//! engine cannot plan SQL itself (planning sits above it); it asks a [`ViewPlanner`], which the
//! frontend provides, for each view's operators.

pub mod background;
pub mod copies;
pub mod fragments;
pub mod views;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use async_trait::async_trait;
use eddy_common::{EddyError, Result};
use eddy_storage::{EpochBatch, ReadSnapshot, StateStore, StoreOptions};
use eddy_stream::operator::{Operator, Side};
use eddy_stream::BarrierManager;
use eddy_stream::{Branch, Output, ReaderPosition, SourceMsg, SourceReader, Stage, TableActor, TableWrite, Target, TxnId, WriteOutcome, CHANNEL_CAPACITY};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

use crate::catalog::sequence::Sequences;
use crate::catalog::{Catalog, CatalogChange, Relations, TableCatalog};

/// The operators of one materialized view, as its planner built them.
pub struct ViewOperators {
    /// One chain per input: the relation it reads, the operators applied to it alone, and
    /// the stage it feeds.
    pub branches: Vec<ViewBranch>,
    /// Where the inputs meet (joins, unions), children first; the root's chain ends in the
    /// view's `Materialize`.
    pub stages: Vec<Stage>,
}

/// One input of a view: the relation it reads, the operators applied to it alone, and the
/// stage it feeds (as which input).
pub struct ViewBranch {
    /// The relation read.
    pub upstream: Arc<TableCatalog>,
    /// Operators, starting at the upstream's rows.
    pub operators: Vec<Box<dyn Operator>>,
    /// The stage this input feeds, and as which input.
    pub parent: (usize, Side),
    /// For an input reading a source: the id of the view's own reader of it (also the key
    /// space of the reader's committed position).
    pub reader: Option<u32>,
    /// For a constant input (`VALUES`, a query without FROM): its rows, which its reader emits
    /// once (`upstream` then describes them: a source that no catalog lists).
    pub constant: Option<RecordBatch>,
}

/// A view's readers while it is wired, by reader id: what each reads (a source, or the
/// constant rows it describes) and the view inputs it feeds.
pub(crate) type ReaderInputs = std::collections::BTreeMap<u32, (Arc<TableCatalog>, Option<RecordBatch>, Vec<Target>)>;

/// One source reader of a view (see [`Engine::source_readers`]).
#[derive(Debug, Clone)]
pub struct SourceReaderInfo {
    /// The view it feeds.
    pub view: u32,
    /// The source's name.
    pub source: String,
    /// Its progress.
    pub stats: Arc<eddy_stream::ReaderStats>,
}

/// Re-plans a view at recovery. Implemented above the engine (the frontend plans SQL).
///
/// Implementers must build exactly the operators the view was created with, reusing its
/// recorded state-table ids and restoring operator state from `snapshot`.
#[async_trait]
pub trait ViewPlanner: Send + Sync {
    /// The operators of `view`, with state restored from `snapshot`.
    async fn view_operators(&self, view: &TableCatalog, snapshot: &ReadSnapshot) -> Result<ViewOperators>;
}

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Where state lives.
    pub store: StoreOptions,
    /// Time between barriers when no DML asks for one early.
    pub barrier_interval: Duration,
    /// Register test-only functions (`eddy_test_panic()`); off outside tests.
    pub test_functions: bool,
    /// Memory one query's operators may hold (each session's DataFusion memory pool); beyond
    /// it operators spill where DataFusion can, else the query fails with `53200`.
    pub query_memory_bytes: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            store: StoreOptions::default(),
            barrier_interval: Duration::from_millis(250),
            test_functions: false,
            query_memory_bytes: 512 << 20,
        }
    }
}

/// The shared database state.
pub struct Engine {
    /// Durable state.
    pub store: Arc<StateStore>,
    /// Epoch commits.
    pub barrier: Arc<BarrierManager>,
    /// The catalog as of the last committed DDL; replaced (not changed) by each DDL.
    catalog: RwLock<Arc<Catalog>>,
    /// Serializes DDL so catalog changes commit in the order they were decided.
    ddl_lock: tokio::sync::Mutex<()>,
    /// Next hidden row id: `generation << 40 | counter`, unique across restarts.
    next_row_id: AtomicU64,
    /// Next transaction id (only unique within this process: staged state never survives it).
    next_txn: AtomicU64,
    /// Input channels of the tables' source actors.
    sources: Mutex<HashMap<u32, mpsc::Sender<SourceMsg>>>,
    /// Counters of serial columns.
    pub sequences: Arc<Sequences>,
    /// Engine settings.
    pub config: EngineConfig,
    /// The running actors, aborted when the graph is rebuilt after a failed commit.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Re-plans views for recovery (set by [`Engine::recover`]).
    planner: std::sync::OnceLock<Arc<dyn ViewPlanner>>,
    /// Source readers of views, by reader id.
    readers: Mutex<std::collections::BTreeMap<u32, SourceReaderInfo>>,
    /// What each running sink has delivered (by sink id).
    sinks: Mutex<std::collections::BTreeMap<u32, Arc<eddy_stream::SinkStats>>>,
    /// The live counters of each running view actor (by view id; replaced when the graph is
    /// rebuilt, removed when the view is dropped).
    view_metrics: Mutex<std::collections::BTreeMap<u32, (String, Arc<eddy_stream::ViewMetrics>)>>,
    /// Next actor id of a subscription (counting down from `u32::MAX`, far from relation ids).
    next_subscriber: std::sync::atomic::AtomicU32,
    /// Next actor id of an actor of a parallel view (counting up from [`views::FIRST_ACTOR_ID`],
    /// far from relation ids; only unique within this process, like the actors).
    next_actor: std::sync::atomic::AtomicU32,
    /// The actors of each running view (stopped together when it is dropped).
    view_actors: Mutex<HashMap<u32, Vec<eddy_stream::ActorId>>>,
    /// Running and recent `COPY ... FROM STDIN` statements.
    pub copies: copies::Copies,
    /// Views being created in the background.
    pub creating: background::CreatingViews,
    /// How long this server's statements take and how many fail.
    pub statements: StatementMetrics,
}

/// Counters of the statements one server ran (for `/metrics`).
#[derive(Debug, Default)]
pub struct StatementMetrics {
    /// Statement run times.
    pub durations: eddy_stream::metrics::Histogram,
    /// Statements that ended with an error.
    pub errors: AtomicU64,
}

impl StatementMetrics {
    /// Records one statement.
    pub fn record(&self, took: Duration, failed: bool) {
        self.durations.observe(took);
        if failed {
            self.errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("store", &self.store.description()).finish()
    }
}

impl Engine {
    /// Opens the store, recovers the catalog and starts the barrier loop. The dataflow graph
    /// is started by [`Engine::recover`].
    pub async fn open(config: EngineConfig) -> Result<Arc<Self>> {
        let store = StateStore::open(&config.store).await?;
        let mut catalog = Catalog::load(&store.snapshot()).await?;
        let barrier = BarrierManager::start(store.clone(), config.barrier_interval);
        let bootstrap = catalog.missing_builtin_schemas();
        let generation = store.generation();
        let engine = Arc::new(Self {
            store,
            barrier,
            catalog: RwLock::new(Arc::new(catalog)),
            ddl_lock: tokio::sync::Mutex::new(()),
            next_row_id: AtomicU64::new(generation << 40),
            next_txn: AtomicU64::new(1),
            sources: Mutex::new(HashMap::new()),
            sequences: Arc::new(Sequences::default()),
            config,
            tasks: Mutex::new(Vec::new()),
            planner: std::sync::OnceLock::new(),
            readers: Mutex::new(Default::default()),
            sinks: Mutex::new(Default::default()),
            view_metrics: Mutex::new(Default::default()),
            next_subscriber: std::sync::atomic::AtomicU32::new(u32::MAX),
            next_actor: std::sync::atomic::AtomicU32::new(views::FIRST_ACTOR_ID),
            view_actors: Mutex::new(HashMap::new()),
            copies: Default::default(),
            creating: Default::default(),
            statements: Default::default(),
        });
        if !bootstrap.is_empty() {
            engine.commit_catalog(bootstrap, EpochBatch::default()).await?;
        }
        Ok(engine)
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().clone()
    }

    /// Runs `decide` under the DDL lock with a copy of the catalog, then commits the changes it
    /// returns (plus `extra` data changes) durably and applies them in memory.
    pub async fn ddl<F>(&self, decide: F) -> Result<()>
    where
        F: FnOnce(&mut Catalog) -> Result<(Vec<CatalogChange>, EpochBatch)>,
    {
        let _guard = self.ddl_lock.lock().await;
        let mut scratch = Catalog::clone(&self.catalog.read());
        let (changes, extra) = decide(&mut scratch)?;
        self.commit_catalog(changes, extra).await
    }

    async fn commit_catalog(&self, changes: Vec<CatalogChange>, mut batch: EpochBatch) -> Result<()> {
        for c in &changes {
            Catalog::persist(c, &mut batch)?;
        }
        self.barrier.commit_writes(batch).await?;
        let mut cat = self.catalog.write();
        let next = Arc::make_mut(&mut cat);
        for c in changes {
            if let CatalogChange::DropTable(t) = &c {
                self.sequences.drop_table(t.id);
            }
            next.apply(c);
        }
        Ok(())
    }

    /// Spawns an actor's task; it is aborted if the graph is rebuilt.
    pub fn spawn_actor(&self, actor: impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(actor);
        let mut tasks = self.tasks.lock();
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle.abort_handle());
    }

    /// Recovery: starts the graph from committed state with `planner`, and from then on rebuilds
    /// it whenever a commit fails (in-memory operator state is discarded; actors restart from the
    /// last committed epoch once the store is reachable again).
    pub async fn recover(self: &Arc<Self>, planner: Arc<dyn ViewPlanner>) -> Result<()> {
        self.start_graph(planner.as_ref()).await?;
        match self.sweep_orphans().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!("removed the state of {n} relations no catalog entry owns (a CREATE interrupted by a crash)"),
            // Harmless to keep: the ids are never reused; the next start tries again.
            Err(e) => tracing::warn!("could not remove orphaned state: {e}"),
        }
        if self.planner.set(planner).is_ok() {
            let weak = Arc::downgrade(self);
            let mut broken = self.barrier.broken();
            tokio::spawn(async move {
                loop {
                    if broken.wait_for(|b| *b).await.is_err() {
                        return;
                    }
                    let Some(engine) = weak.upgrade() else { return };
                    // A commit failing after shutdown began (its store is closing) is no cause
                    // to reopen the store: another process may own it by now.
                    if engine.barrier.stopping() {
                        return;
                    }
                    engine.rebuild().await;
                }
            });
        }
        Ok(())
    }

    /// Rebuilds the graph after a failed commit: stops every actor, reopens the store (retrying
    /// with backoff while it is unreachable), reloads the catalog and starts the graph again.
    async fn rebuild(self: &Arc<Self>) {
        tracing::warn!("a commit failed: rebuilding the dataflow graph from the last committed epoch");
        for t in std::mem::take(&mut *self.tasks.lock()) {
            t.abort();
        }
        self.sources.lock().clear();
        self.readers.lock().clear();
        let mut delay = std::time::Duration::from_millis(200);
        loop {
            let attempt = async {
                self.store.recover().await?;
                let catalog = Catalog::load(&self.store.snapshot()).await?;
                *self.catalog.write() = Arc::new(catalog);
                self.barrier.reset(self.store.committed_epoch()).await;
                let planner = self.planner.get().cloned().ok_or_else(|| EddyError::internal("no view planner"))?;
                self.start_graph(planner.as_ref()).await
            };
            match attempt.await {
                Ok(()) => break,
                // Reopening would fence the process that fenced this one.
                Err(e) if self.store.is_fenced() => return tracing::error!("not recovering: {e}"),
                Err(e) => {
                    tracing::error!("recovery failed, retrying in {delay:?}: {e}");
                    for t in std::mem::take(&mut *self.tasks.lock()) {
                        t.abort();
                    }
                    self.sources.lock().clear();
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_secs(5));
                }
            }
        }
        tracing::warn!("recovered at epoch {}", self.store.committed_epoch());
    }

    /// Starts every table's source actor and every view's actor from committed state, wired to
    /// each other, before the first barrier flows.
    async fn start_graph(self: &Arc<Self>, planner: &dyn ViewPlanner) -> Result<()> {
        // No barrier until every actor runs (see `BarrierManager::pause`).
        let paused = self.barrier.pause();
        let mut relations: Vec<Arc<TableCatalog>> = self.catalog().tables().cloned().collect();
        // A view's id is larger than its upstreams' (they exist when it is created).
        relations.sort_by_key(|t| t.id);
        let snapshot = self.store.snapshot();
        // Failed views stay failed (and are not started) until they are dropped.
        let mut failed: HashMap<u32, String> = HashMap::new();
        for (k, v) in snapshot.scan_prefix(eddy_common::codec::FAILURES_PREFIX).await? {
            let id = k.get(eddy_common::codec::FAILURES_PREFIX.len()..).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes);
            if let Some(id) = id {
                let message = String::from_utf8_lossy(&v).into_owned();
                self.barrier.restore_failure(id, EddyError::internal(message.clone()));
                failed.insert(id, message);
            }
        }
        let mut newly_failed = EpochBatch::default();
        let mut outputs: HashMap<u32, Vec<Target>> = HashMap::new();
        let mut views = Vec::new();
        for v in relations.iter().filter(|t| t.is_maintained()) {
            if failed.contains_key(&v.id) {
                continue;
            }
            let reason = match v.dependencies.iter().find(|d| failed.contains_key(d)) {
                Some(d) => Err(format!("a relation it reads (id {d}) failed")),
                None => planner.view_operators(v, &snapshot).await.map_err(|e| format!("it could not be planned again at start-up: {}", e.message)),
            };
            let planned = match reason {
                Ok(p) => p,
                Err(message) => {
                    tracing::error!("materialized view {} is marked failed: {message}", v.name);
                    newly_failed.put(eddy_common::codec::failure_key(v.id), message.clone().into_bytes());
                    self.barrier.restore_failure(v.id, EddyError::internal(message.clone()));
                    failed.insert(v.id, message);
                    continue;
                }
            };
            let mut builds = vec![planned];
            for _ in 1..v.parallelism.max(1) {
                builds.push(planner.view_operators(v, &snapshot).await?);
            }
            views.push((v.clone(), builds));
        }
        // Views being created first: nothing reads them.
        self.resume_creating(planner, &snapshot, &failed, &mut outputs).await?;
        // Downstream views first: each view's actors need the outputs of the views on it.
        for (v, builds) in views.into_iter().rev() {
            let mut started = self.start_view(&v, builds, outputs.remove(&v.id).unwrap_or_default(), None, Some(&snapshot)).await?;
            for (upstream, o) in std::mem::take(&mut started.upstream_outputs) {
                outputs.entry(upstream).or_default().push(o);
            }
            for a in &started.actors {
                self.barrier.add_actor(*a).await;
            }
            started.spawn(self);
        }
        for t in relations.iter().filter(|t| t.kind == crate::catalog::RelationKind::Table) {
            self.resume_sequences(t, &snapshot).await?;
            self.start_table_actor(t, outputs.remove(&t.id).unwrap_or_default()).await?;
        }
        // The failures found commit with the first barrier, which the pause would hold back:
        // committing them under it never returned, and the server never started.
        drop(paused);
        if !newly_failed.is_empty() {
            self.barrier.commit_writes(newly_failed).await?;
        }
        Ok(())
    }

    /// Wires the inputs of view `view`: a channel per input, and either the output each
    /// upstream relation must add (returned with the upstream's id, for the caller to register
    /// at the right barrier) or, for scans of a source, the view's own reader of it (one per
    /// source, feeding every scan of it), spawned and registered with the barrier manager. A
    /// reader restored at recovery (`restore` is the committed snapshot) resumes at its
    /// committed position and produces at once; a new one starts at the source's beginning
    /// once the barrier that subscribes the view names it in `Mutation::start`.
    pub async fn wire_branches(
        &self,
        view: u32,
        branches: Vec<ViewBranch>,
        restore: Option<&eddy_storage::ReadSnapshot>,
    ) -> Result<(Vec<Branch>, Vec<(u32, Target)>)> {
        let mut wired = Vec::new();
        let mut upstream_outputs = Vec::new();
        let mut readers = ReaderInputs::default();
        for branch in branches {
            let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
            let upstream = branch.upstream.clone();
            // An input read by the view's own reader (a source, or constant rows) has nothing to
            // backfill: the reader starts at the beginning, and a backfilling input drops the
            // changes beyond its scan, which would be all of them.
            let backfill = if branch.reader.is_some() { None } else { Some(upstream.state_table()?) };
            wired.push(Branch { inputs: vec![rx], operators: branch.operators, upstream: backfill, parent: branch.parent });
            let output = Target::One(Output { actor: view, tx });
            match branch.reader {
                Some(r) => readers.entry(r).or_insert_with(|| (upstream, branch.constant, Vec::new())).2.push(output),
                None => upstream_outputs.push((upstream.id, output)),
            }
        }
        for (reader, (source, constant, outputs)) in readers {
            self.start_reader(view, reader, &source, constant, outputs, restore).await?;
        }
        Ok((wired, upstream_outputs))
    }

    /// Starts reader `reader` of `source` (or of the `constant` rows `source` describes) for
    /// `view` (see [`Engine::wire_branches`]).
    async fn start_reader(
        &self,
        view: u32,
        reader: u32,
        source: &TableCatalog,
        constant: Option<RecordBatch>,
        outputs: Vec<Target>,
        restore: Option<&eddy_storage::ReadSnapshot>,
    ) -> Result<()> {
        let position = match restore {
            Some(snapshot) => match snapshot.get(&eddy_stream::source::position_key(reader)).await? {
                Some(bytes) => Some(ReaderPosition::decode(&bytes)?),
                None => None,
            },
            None => None,
        };
        let splits = match constant {
            Some(rows) => {
                let done = position.as_ref().and_then(|p| p.splits.first()).map(Vec::as_slice);
                vec![Box::new(eddy_stream::ConstantSplit::new(rows, done)) as Box<dyn eddy_stream::SplitReader>]
            }
            None => {
                let options = eddy_connector::Options(source.with_options.clone());
                eddy_connector::open_splits(&options, &source.user_schema(), position.as_ref()).await?
            }
        };
        let (source_tx, source_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let stats = Arc::new(eddy_stream::ReaderStats::default());
        self.readers.lock().insert(reader, SourceReaderInfo { view, source: source.name.clone(), stats: stats.clone() });
        let actor = SourceReader::new(
            reader,
            source.name.clone(),
            source_rx,
            splits,
            &position.unwrap_or_default(),
            source.storage_schema(),
            outputs,
            self.barrier.collector(),
            restore.is_some(),
            stats,
        )
        .with_barrier_requests(self.barrier.clone());
        let state = match restore {
            Some(snapshot) => snapshot.get(&eddy_stream::source::watermark_state_key(reader)).await?,
            None => None,
        };
        let actor = match watermark_gen(source, state.as_deref())? {
            Some(w) => actor.with_watermark(w),
            None => actor,
        };
        self.barrier.add_source(reader, source_tx).await;
        self.spawn_actor(actor.run());
        Ok(())
    }

    /// The running source readers: reader id → what it reads for which view, and its progress.
    pub fn source_readers(&self) -> Vec<(u32, SourceReaderInfo)> {
        self.readers.lock().iter().map(|(k, v)| (*k, v.clone())).collect()
    }

    /// The delivery counters of sink `id`, created on first use (they live as long as the
    /// server, across recoveries of the sink's actor).
    pub fn sink_stats(&self, id: u32) -> Arc<eddy_stream::SinkStats> {
        self.sinks.lock().entry(id).or_default().clone()
    }

    /// Records the live counters of a view actor just built, under the view's qualified name
    /// (a view being created is not in the catalog until its backfill is done).
    pub fn register_view_metrics(&self, name: String, m: Arc<eddy_stream::ViewMetrics>) {
        self.view_metrics.lock().insert(m.id, (name, m));
    }

    /// The live counters of view `id`'s actor, if it runs.
    pub fn view_metrics(&self, id: u32) -> Option<Arc<eddy_stream::ViewMetrics>> {
        self.view_metrics.lock().get(&id).map(|(_, m)| m.clone())
    }

    /// The live counters of every running view actor, with the view's qualified name.
    pub fn all_view_metrics(&self) -> Vec<(String, Arc<eddy_stream::ViewMetrics>)> {
        self.view_metrics.lock().values().cloned().collect()
    }

    /// Forgets the counters of a dropped view.
    pub fn forget_view_metrics(&self, id: u32) {
        self.view_metrics.lock().remove(&id);
    }

    /// The counters of every sink that ran since the server started.
    pub fn all_sink_stats(&self) -> std::collections::BTreeMap<u32, Arc<eddy_stream::SinkStats>> {
        self.sinks.lock().clone()
    }

    /// Forgets the readers of a dropped view.
    pub fn forget_readers(&self, ids: &[u32]) {
        let mut r = self.readers.lock();
        for id in ids {
            r.remove(id);
        }
    }

    /// Recovery: each serial column of `table` continues after its largest value.
    async fn resume_sequences(&self, table: &TableCatalog, snapshot: &eddy_storage::ReadSnapshot) -> Result<()> {
        let serial: Vec<usize> = table
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.default.as_deref().is_some_and(crate::catalog::sequence::is_serial_default))
            .map(|(i, _)| i)
            .collect();
        if serial.is_empty() {
            return Ok(());
        }
        let mut scan = table.state_table()?.scan_stream(snapshot).await?;
        while let Some(batch) = scan.next_batch().await? {
            for &i in &serial {
                if let Some(m) = crate::catalog::sequence::column_max(batch.column(i).as_ref()) {
                    self.sequences.advance_past(table.id, i, m);
                }
            }
        }
        Ok(())
    }

    /// Starts the source actor of `table`; it takes part in barriers from the next one on.
    pub async fn start_table_actor(&self, table: &TableCatalog, outputs: Vec<Target>) -> Result<()> {
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        let actor = TableActor::try_new(
            table.id,
            table.name.clone(),
            table.state_table()?,
            table.has_row_id(),
            rx,
            outputs,
            self.barrier.collector(),
            self.store.clone(),
            self.barrier.completed(),
        )?;
        // A table with a connector is fed by its actor from the committed position on.
        let actor = if table.with_options.contains_key("connector") {
            let position = match self.store.snapshot().get(&eddy_common::codec::ingest_position_key(table.id)).await? {
                Some(bytes) => Some(ReaderPosition::decode(&bytes)?),
                None => None,
            };
            let options = eddy_connector::Options(table.with_options.clone());
            let splits = eddy_connector::open_splits(&options, &table.user_schema(), position.as_ref()).await?;
            actor.with_ingest(eddy_stream::Ingest::new(splits, position.map_or(0, |p| p.rows), self.barrier.clone()))
        } else {
            actor
        };
        let actor = if table.watermark.is_some() {
            let state = self.store.snapshot().get(&eddy_common::codec::watermark_key(table.id)).await?;
            match watermark_gen(table, state.as_deref())? {
                Some(w) => actor.with_watermark(w),
                None => actor,
            }
        } else {
            actor
        };
        self.barrier.add_source(table.id, tx.clone()).await;
        self.sources.lock().insert(table.id, tx);
        self.spawn_actor(actor.run());
        Ok(())
    }

    /// Forgets a table's source actor (after it was stopped).
    pub fn remove_source(&self, table_id: u32) {
        self.sources.lock().remove(&table_id);
    }

    fn source(&self, table_id: u32) -> Result<mpsc::Sender<SourceMsg>> {
        let tx = self.sources.lock().get(&table_id).cloned();
        tx.ok_or_else(|| eddy_common::user_err!(eddy_common::error::sqlstate::UNDEFINED_TABLE, "table {table_id} is being dropped"))
    }

    /// Applies one statement's `write` to table `table_id` through its source actor, which
    /// decides key conflicts against current state; returns once the epoch holding the change
    /// is durably committed. On error nothing was applied.
    pub async fn write_table(&self, table_id: u32, write: TableWrite) -> Result<WriteOutcome> {
        self.barrier.refuse_if_broken()?;
        let tx = self.source(table_id)?;
        let (decided_tx, decided) = oneshot::channel();
        let (ack, done) = oneshot::channel();
        tx.send(SourceMsg::Write { write, decided: decided_tx, ack })
            .await
            .map_err(|_| dropped_write())?;
        let outcome = decided.await.map_err(|_| dropped_write())??;
        self.barrier.request();
        done.await.map_err(|_| dropped_write())??;
        Ok(outcome)
    }

    /// A fresh transaction id.
    pub fn begin_txn(&self) -> TxnId {
        self.next_txn.fetch_add(1, Ordering::Relaxed)
    }

    /// Stages one part of transaction `txn` at table `table_id`: resolved against current state
    /// and reserved, but invisible until [`Engine::commit_txn`]. Stage the tables of one
    /// transaction in increasing id order (so transactions never wait for each other in a cycle).
    pub async fn stage(&self, table_id: u32, txn: TxnId, write: TableWrite) -> Result<WriteOutcome> {
        self.barrier.refuse_if_broken()?;
        let tx = self.source(table_id)?;
        let (decided_tx, decided) = oneshot::channel();
        tx.send(SourceMsg::Stage { txn, write, decided: decided_tx })
            .await
            .map_err(|_| dropped_write())?;
        decided.await.map_err(|_| dropped_write())?
    }

    /// Applies every staged part of `txn` (at `tables`) in one epoch; returns once it is durable.
    pub async fn commit_txn(&self, txn: TxnId, tables: &[u32]) -> Result<()> {
        let mut acks = Vec::with_capacity(tables.len());
        {
            let _gate = self.barrier.commit_gate().await;
            for &t in tables {
                let tx = self.source(t)?;
                let (ack, done) = oneshot::channel();
                tx.send(SourceMsg::Commit { txn, ack }).await.map_err(|_| dropped_write())?;
                acks.push(done);
            }
        }
        self.barrier.request();
        for done in acks {
            done.await.map_err(|_| dropped_write())??;
        }
        Ok(())
    }

    /// Drops every staged part of `txn` (at `tables`).
    pub async fn abort_txn(&self, txn: TxnId, tables: &[u32]) {
        for &t in tables {
            if let Ok(tx) = self.source(t) {
                // An actor that is gone has nothing staged to drop.
                let _ = tx.send(SourceMsg::Abort { txn }).await;
            }
        }
    }

    /// An actor id for a subscription's output (never a relation's: subscriptions are not
    /// stopped by id, they end by dropping their channel).
    pub fn subscriber_id(&self) -> u32 {
        self.next_subscriber.fetch_sub(1, Ordering::Relaxed)
    }

    /// A fresh object id.
    pub fn allocate_id(&self) -> u32 {
        Arc::make_mut(&mut self.catalog.write()).allocate_id()
    }

    /// Why a materialized view stopped being maintained, if it did.
    pub fn view_failure(&self, table: &TableCatalog) -> Option<EddyError> {
        if !table.is_maintained() {
            return None;
        }
        self.barrier.failure(table.id).map(|e| {
            eddy_common::user_err!(
                eddy_common::error::sqlstate::INTERNAL_ERROR,
                "{} \"{}\" stopped being maintained: {}",
                table.kind_name(),
                table.name,
                e.message
            )
        })
    }

    /// `n` fresh hidden row ids.
    pub fn allocate_row_ids(&self, n: usize) -> std::ops::Range<i64> {
        let start = self.next_row_id.fetch_add(n as u64, Ordering::Relaxed) as i64;
        start..start + n as i64
    }

    /// Commits what is pending and stops accepting writes.
    pub async fn shutdown(&self) -> Result<()> {
        self.barrier.shutdown().await;
        self.store.close().await
    }
}

/// A table actor went away with a write (the graph was rebuilt after a failed commit, or the
/// table was dropped): the write was not applied.
fn dropped_write() -> EddyError {
    EddyError {
        kind: eddy_common::ErrorKind::External,
        sqlstate: eddy_common::error::sqlstate::SERIALIZATION_FAILURE,
        message: "the table's writer stopped before the statement was applied (the server is recovering, or the table was dropped); retry the statement".into(),
    }
}

impl Relations for Engine {
    fn catalog(&self) -> Arc<Catalog> {
        Engine::catalog(self)
    }

    fn snapshot(&self) -> ReadSnapshot {
        self.store.snapshot()
    }

    fn view_failure(&self, table: &TableCatalog) -> Option<EddyError> {
        Engine::view_failure(self, table)
    }

    fn sequences(&self) -> &Arc<Sequences> {
        &self.sequences
    }

    fn source_readers(&self) -> Vec<(u32, u32, String)> {
        self.readers.lock().iter().map(|(id, r)| (*id, r.view, r.source.clone())).collect()
    }

    fn view_metrics(&self) -> Vec<(String, Arc<eddy_stream::ViewMetrics>)> {
        self.all_view_metrics()
    }
}

/// Adds deletes of every entry under `prefix` to `batch`, which spills to the store as it grows
/// (a table of any size is dropped within bounded memory, and atomically with its catalog entry).
pub(crate) async fn clear_prefix(store: &StateStore, snapshot: &ReadSnapshot, prefix: &[u8], batch: &mut EpochBatch) -> Result<()> {
    let start = std::ops::Bound::Included(prefix.to_vec());
    let end = match eddy_storage::store::prefix_end(prefix) {
        Some(e) => std::ops::Bound::Excluded(e),
        None => std::ops::Bound::Unbounded,
    };
    let mut cursor = snapshot.scan_batches(start, end, 4096).await?;
    while let Some(entries) = cursor.next_batch().await? {
        for (k, _) in entries {
            batch.delete(k.to_vec());
        }
        store.spill_if_needed(batch).await?;
    }
    Ok(())
}

/// The watermark generator of `rel` (a table or source declared with `WATERMARK FOR`), resumed
/// from its committed `state`.
fn watermark_gen(rel: &TableCatalog, state: Option<&[u8]>) -> Result<Option<eddy_stream::WatermarkGen>> {
    let Some(def) = &rel.watermark else { return Ok(None) };
    let schema = rel.storage_schema();
    let col = schema.index_of(&def.column).map_err(|_| eddy_common::internal_err!("watermark column {} of {} is gone", def.column, rel.name))?;
    Ok(Some(eddy_stream::WatermarkGen::try_new(col, schema.field(col).data_type().clone(), def.delay_us, state)?))
}
