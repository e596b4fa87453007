//! [`Engine`]: the process-wide database — state store, barrier manager and catalog — that
//! sessions share (layer 2 of the SQL crate). Nothing here is global: tests run several engines
//! in one process.
//!
//! Recovery starts every table's source actor and every view's actor from committed state. The
//! engine cannot plan SQL itself (planning sits above it); it asks a [`ViewPlanner`], which the
//! frontend provides, for each view's operators.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use eddy_common::{EddyError, Result, StreamChunk};
use eddy_storage::{EpochBatch, ReadSnapshot, StateStore, StoreOptions};
use eddy_stream::operator::Operator;
use eddy_stream::BarrierManager;
use eddy_stream::{Branch, Output, SourceMsg, TableActor, ViewActor, CHANNEL_CAPACITY};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

use crate::catalog::sequence::Sequences;
use crate::catalog::{Catalog, CatalogChange, Relations, TableCatalog};

/// The operators of one materialized view, as its planner built them.
pub struct ViewOperators {
    /// One chain per input: the relation it reads and the operators applied to it alone.
    pub branches: Vec<(Arc<TableCatalog>, Vec<Box<dyn Operator>>)>,
    /// Operators after the inputs meet, ending in the view's `Materialize`.
    pub tail: Vec<Box<dyn Operator>>,
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
    /// Input channels of the tables' source actors.
    sources: Mutex<HashMap<u32, mpsc::Sender<SourceMsg>>>,
    /// Counters of serial columns.
    pub sequences: Arc<Sequences>,
    /// Engine settings.
    pub config: EngineConfig,
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
            sources: Mutex::new(HashMap::new()),
            sequences: Arc::new(Sequences::default()),
            config,
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

    /// Recovery: starts every table's source actor and every view's actor from committed state,
    /// wired to each other, before the first barrier flows.
    pub async fn recover(&self, planner: &dyn ViewPlanner) -> Result<()> {
        let mut relations: Vec<Arc<TableCatalog>> = self.catalog().tables().cloned().collect();
        // A view's id is larger than its upstreams' (they exist when it is created).
        relations.sort_by_key(|t| t.id);
        let snapshot = self.store.snapshot();
        let mut outputs: HashMap<u32, Vec<Output>> = HashMap::new();
        let mut views = Vec::new();
        for v in relations.iter().filter(|t| t.is_view()) {
            let planned = planner.view_operators(v, &snapshot).await?;
            let mut branches = Vec::new();
            for (upstream, operators) in planned.branches {
                let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
                outputs.entry(upstream.id).or_default().push(Output { actor: v.id, tx });
                branches.push(Branch { input: rx, operators, upstream: upstream.state_table()? });
            }
            views.push((v.id, branches, planned.tail));
        }
        for (id, branches, tail) in views.into_iter().rev() {
            let actor = ViewActor::new(id, branches, tail, outputs.remove(&id).unwrap_or_default(), self.barrier.collector(), None);
            self.barrier.add_actor(id).await;
            tokio::spawn(actor.run());
        }
        for t in relations.iter().filter(|t| t.kind == crate::catalog::RelationKind::Table) {
            self.resume_sequences(t, &snapshot).await?;
            self.start_table_actor(t, outputs.remove(&t.id).unwrap_or_default()).await?;
        }
        Ok(())
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
        for batch in table.state_table()?.scan(snapshot).await? {
            for &i in &serial {
                if let Some(m) = crate::catalog::sequence::column_max(batch.column(i).as_ref()) {
                    self.sequences.advance_past(table.id, i, m);
                }
            }
        }
        Ok(())
    }

    /// Starts the source actor of `table`; it takes part in barriers from the next one on.
    pub async fn start_table_actor(&self, table: &TableCatalog, outputs: Vec<Output>) -> Result<()> {
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        let actor = TableActor::try_new(
            table.id,
            table.state_table()?,
            table.has_row_id(),
            rx,
            outputs,
            self.barrier.collector(),
            self.store.clone(),
            self.barrier.completed(),
        )?;
        self.barrier.add_source(table.id, tx.clone()).await;
        self.sources.lock().insert(table.id, tx);
        tokio::spawn(actor.run());
        Ok(())
    }

    /// Forgets a table's source actor (after it was stopped).
    pub fn remove_source(&self, table_id: u32) {
        self.sources.lock().remove(&table_id);
    }

    /// Applies `chunk` to table `table_id` through its source actor; returns once the epoch
    /// holding the change is durably committed.
    pub async fn write_table(&self, table_id: u32, chunk: StreamChunk) -> Result<()> {
        let tx = self.sources.lock().get(&table_id).cloned();
        let tx = tx.ok_or_else(|| eddy_common::user_err!(eddy_common::error::sqlstate::UNDEFINED_TABLE, "table {table_id} is being dropped"))?;
        let (ack, done) = oneshot::channel();
        tx.send(SourceMsg::Write { chunk, ack })
            .await
            .map_err(|_| EddyError::internal("table source actor stopped"))?;
        self.barrier.request();
        done.await.map_err(|_| EddyError::internal("table source actor dropped a write"))??;
        Ok(())
    }

    /// A fresh object id.
    pub fn allocate_id(&self) -> u32 {
        Arc::make_mut(&mut self.catalog.write()).allocate_id()
    }

    /// Why a materialized view stopped being maintained, if it did.
    pub fn view_failure(&self, table: &TableCatalog) -> Option<EddyError> {
        if !table.is_view() {
            return None;
        }
        self.barrier.failure(table.id).map(|e| {
            eddy_common::user_err!(
                eddy_common::error::sqlstate::INTERNAL_ERROR,
                "materialized view \"{}\" stopped being maintained: {}",
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
}
