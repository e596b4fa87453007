//! [`StateStore`]: SlateDB over `object_store`, committed one epoch at a time.
//!
//! Contract:
//! * [`StateStore::commit`] writes every change of an epoch as one atomic SlateDB write batch:
//!   the batch's in-memory tail on base keys, the list of live runs extended by the batch's
//!   spilled runs (see [`crate::runs`]), and the epoch's [`CommitRecord`]. It returns `Ok` only
//!   once that batch is durable in object storage. Epochs commit in strictly increasing order;
//!   the store refuses anything else.
//! * A commit that returns `Err` does not advance [`StateStore::committed_epoch`] and its changes
//!   are not visible to any snapshot of this process. The store then needs *recovery*: the next
//!   commit (or an explicit [`StateStore::recover`]) reopens SlateDB from object storage and
//!   resumes from the last durable commit record. One case stays ambiguous, as in every
//!   database whose commit acknowledgement can be lost: if object storage accepted the write
//!   but reported a failure that SlateDB could not tell apart from a real one, recovery finds
//!   that epoch committed, entirely (the record and the changes are in one atomic batch).
//!   Callers must read `committed_epoch()` after recovery rather than assume.
//! * [`StateStore::snapshot`] returns a view of exactly the last committed epoch: never a
//!   partially written one, since snapshots are taken between commits by the committer itself,
//!   and uncommitted data only ever lives in runs that are not live.
//! * Every wait on SlateDB is bounded ([`StoreTuning`]): SlateDB's own retries per object-store
//!   request are capped (its default is to retry forever, which would make a commit hang for as
//!   long as the store is down), and commits, opens and closes have deadlines.
//! * After a crash, [`StateStore::open`] finds the last epoch whose batch became durable; none
//!   of a later epoch's changes are visible. Each open durably bumps the generation before
//!   anything is minted from it.
//!
//! What SlateDB 0.18 does when object storage fails (pinned by `slatedb_behaviour.rs` tests):
//! * `Db::write` only appends to the in-memory WAL buffer and memtable; it succeeds while the
//!   store is down, and the written data is immediately visible to `Db::get`/`Db::scan` of that
//!   instance (but not to snapshots taken before). It fails at once when the instance is
//!   already dead.
//! * Every object-store request goes through SlateDB's retrying store: transient errors
//!   (anything but not-found, already-exists, precondition, not-implemented) are retried with
//!   exponential backoff (100 ms to 1 s, jittered). With `object_store_max_retries = None` (the
//!   default) a WAL flush retries forever: `Db::flush` hangs while the store is down and
//!   succeeds once it heals; the instance recovers on its own.
//! * With a retry cap, a WAL upload that exhausts its retries closes the WAL for good: that
//!   `flush` and every later one returns `Unavailable` ("wal unavailable"), even after the
//!   store heals, and the instance ends up closed (`DbStatus::close_reason` set). A background
//!   task (compactor, manifest poller) exhausting its retries kills the instance the same way,
//!   even with no write in flight. The instance never comes back; a new `Db` opened on the same
//!   path fences the old writer, replays the durable WAL and sees only durable writes.
//! * An ambiguous PUT (written, then reported failed) of a WAL file is resolved by SlateDB
//!   itself: the retry finds the object, recognises its own upload id and reports success.
//! * Snapshots of a closed instance return "db is closed".
//! * Opening is the expensive part of recovery: it lists and reads the manifest, fences the
//!   WAL (writing a file) and replays every WAL file since the last L0 flush, one GET each.
//!   Each failed open leaves its fence behind, so under a steadily unreliable store opens need
//!   ever more requests: with 30 % of requests failing and one retry, a store was seen to fail
//!   76 reopens in a row. Recovery is for a store that has healed, not a way to ride out a
//!   flaky one; the retry cap is the knob for that.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eddy_common::{internal_err, EddyError, Epoch, Result};
use object_store::ObjectStore;
use parking_lot::{Mutex, RwLock};
use slatedb::config::CloseOptions;
use slatedb::db_cache::DbCache;
use slatedb::{BlockCachePolicy, CacheTarget, Db, DbSnapshot, WriteBatch};

use crate::batch::EpochBatch;
use crate::background::Maintenance;
use crate::block_cache::BlockCache;
pub(crate) use crate::slate::{add_ops, bounded};
use crate::object_store_url;
use crate::protocol::{self, CommitRecord};
use crate::memory::MemoryBudget;
use crate::lsm_settings::lsm_settings;
use crate::runs::{self, KeyBounds, Op, RunId, COMMIT_RECORD_KEY, LIVE_RUNS_KEY};
use crate::scan::{storage_err, ReadSnapshot};

pub use crate::scan::prefix_end;

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// `file://...`, `s3://bucket/prefix` or `memory://`.
    pub url: String,
    /// Bytes of the in-memory block cache (foyer).
    pub block_cache_bytes: u64,
    /// A local directory for the block cache's disk part (foyer's hybrid cache), and its
    /// size in bytes; `None`: memory only.
    pub cache_dir: Option<(std::path::PathBuf, u64)>,
    /// Tests: use this object store instead of resolving `url` (which then only names the
    /// store in logs), e.g. a [`crate::testing::FaultyStore`] under a whole server.
    pub object_store: Option<Arc<dyn ObjectStore>>,
    /// Failure and background knobs.
    pub tuning: StoreTuning,
    /// Bytes the operators' state caches may hold together ([`MemoryBudget`]).
    pub operator_cache_bytes: u64,
    /// Bytes of uncommitted writes (epoch batches, staged statements) held in memory
    /// together before the largest spill to runs ([`EpochBatch::spill_if_over_budget`]).
    pub write_buffer_bytes: u64,
    /// Bytes of writes SlateDB may hold before they reach L0 (memtables and the WAL queue;
    /// writers wait beyond it). L0 SSTs and compaction outputs are cut at half of it (outputs
    /// 8–32 MiB), so SlateDB's write-side memory follows this one figure ([`lsm_settings`](crate::lsm_settings::lsm_settings)).
    pub lsm_buffer_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            url: "memory://".into(),
            block_cache_bytes: 64 << 20,
            cache_dir: None,
            object_store: None,
            tuning: StoreTuning::default(),
            operator_cache_bytes: 512 << 20,
            // The server's shares of its default 1024 MiB budget.
            write_buffer_bytes: 16 << 20,
            lsm_buffer_bytes: 16 << 20,
        }
    }
}

/// Failure handling and background-work knobs (defaults suit production; tests shorten them).
#[derive(Debug, Clone)]
pub struct StoreTuning {
    /// Retries SlateDB makes per object-store request before it gives up and its instance
    /// dies (see the module docs). `None` is SlateDB's default, retry forever: then a down
    /// store surfaces only through `commit_timeout`.
    pub object_store_max_retries: Option<u32>,
    /// Longest a commit (write and flush) or a spill write may take before it fails.
    pub commit_timeout: Duration,
    /// Longest opening SlateDB (at startup or in recovery) may take.
    pub open_timeout: Duration,
    /// Longest closing SlateDB or stopping the background task may take.
    pub close_timeout: Duration,
    /// Run entries one fold step moves into base keys (bounds how long it holds the commit
    /// lock).
    pub fold_chunk_entries: usize,
    /// Whether `open` starts the background task that folds live runs and deletes garbage runs.
    pub background_maintenance: bool,
    /// How often the background task looks for work when not woken, and how long it backs
    /// off after an error.
    pub maintenance_interval: Duration,
}

impl Default for StoreTuning {
    fn default() -> Self {
        Self {
            // About 7.5 s of backoff before SlateDB gives up on a request.
            object_store_max_retries: Some(10),
            commit_timeout: Duration::from_secs(60),
            open_timeout: Duration::from_secs(60),
            close_timeout: Duration::from_secs(30),
            fold_chunk_entries: 4096,
            background_maintenance: true,
            maintenance_interval: Duration::from_secs(1),
        }
    }
}



/// The last committed epoch and a view of it; replaced after every commit and fold step.
pub(crate) struct Committed {
    /// Last committed epoch.
    pub(crate) epoch: Epoch,
    /// View of it, carrying the live runs.
    pub(crate) snapshot: ReadSnapshot,
}

/// One opened SlateDB instance and the generation it runs in.
pub(crate) struct Incarnation {
    /// The LSM.
    pub(crate) db: Db,
    /// Generation of this open (see [`CommitRecord::generation`]).
    pub(crate) generation: u64,
}

/// What opening SlateDB found.
struct Opened {
    /// The instance.
    incarnation: Incarnation,
    /// Last committed epoch.
    committed: Epoch,
    /// Runs live at that epoch.
    live: Vec<RunId>,
}

/// The durable, epoch-committed key-value store all Eddy state lives in.
pub struct StateStore {
    /// Current SlateDB instance; replaced by recovery.
    current: RwLock<Arc<Incarnation>>,
    /// Last committed epoch and a snapshot of it.
    committed: RwLock<Arc<Committed>>,
    /// The last committed epoch, for those who wait for one ([`StateStore::committed_through`]).
    committed_watch: tokio::sync::watch::Sender<Epoch>,
    /// Serializes commits (epoch order), fold steps and recovery without blocking readers.
    pub(crate) commit_lock: tokio::sync::Mutex<()>,
    /// A commit failed: reopen before anything else is written. Changed only under
    /// `commit_lock`; read anywhere.
    pub(crate) failed: AtomicBool,
    /// Another process opened the same store and fenced this one's SlateDB writer: nothing
    /// more may be written here, and recovery must not reopen (that would fence the other
    /// process in turn, and both would write). Set once, never cleared.
    fenced: tokio::sync::watch::Sender<bool>,
    /// Next run id to mint (`generation << 32 | counter`).
    next_run_id: AtomicU64,
    /// Runs of this generation deleted by `discard_run`; a commit refuses them.
    pub(crate) discarded: Mutex<HashSet<RunId>>,
    /// Key bounds of the runs this process wrote, until they are folded or discarded (see
    /// [`runs::KeyBounds`]); runs not listed may hold any key.
    run_bounds: Mutex<HashMap<RunId, Arc<KeyBounds>>>,
    /// Where the data lives.
    object_store: Arc<dyn ObjectStore>,
    /// Path of the database inside `object_store`.
    path: String,
    /// Block cache, shared by every incarnation.
    cache: Arc<dyn DbCache>,
    /// Failure and background knobs.
    pub(crate) tuning: StoreTuning,
    /// Background folding and garbage collection.
    pub(crate) maintenance: Maintenance,
    /// Printable location.
    description: String,
    /// Shared by the operators' state caches.
    operator_memory: Arc<MemoryBudget>,
    /// Shared by the uncommitted writes held in memory.
    write_memory: Arc<MemoryBudget>,
    /// Requests, bytes and errors of `object_store`.
    object_stats: Arc<crate::metered::ObjectStoreStats>,
    /// The block cache itself (a clone of what `cache` wraps), for its usage.
    blocks: BlockCache,
    /// SlateDB's metrics (every incarnation records into it).
    lsm_metrics: Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
    /// [`StoreOptions::lsm_buffer_bytes`], for every incarnation.
    lsm_buffer_bytes: usize,
}

impl StateStore {
    /// Opens (or creates) the store at `options.url` (or in `options.object_store`) and
    /// recovers its last committed epoch.
    pub async fn open(options: &StoreOptions) -> Result<Arc<Self>> {
        if let Some(store) = &options.object_store {
            return Self::open_with(store.clone(), "eddy", options, options.tuning.clone()).await;
        }
        let resolved = object_store_url::resolve(&options.url)?;
        Self::open_inner(resolved.store, resolved.path, resolved.description, options, options.tuning.clone()).await
    }

    /// Opens (or creates) a store at `path` inside `object_store` (`options.url` only names it
    /// in logs): the way to run a store over a wrapped object store such as
    /// [`crate::testing::FaultyStore`], or with non-default `tuning`.
    pub async fn open_with(
        object_store: Arc<dyn ObjectStore>,
        path: &str,
        options: &StoreOptions,
        tuning: StoreTuning,
    ) -> Result<Arc<Self>> {
        let description = format!("{} ({path})", options.url);
        Self::open_inner(object_store, path.to_string(), description, options, tuning).await
    }

    /// Shared body of the constructors.
    async fn open_inner(
        object_store: Arc<dyn ObjectStore>,
        path: String,
        description: String,
        options: &StoreOptions,
        tuning: StoreTuning,
    ) -> Result<Arc<Self>> {
        let metered = crate::metered::MeteredStore::new(object_store);
        let object_stats = metered.stats().clone();
        let object_store: Arc<dyn ObjectStore> = Arc::new(metered);
        let disk = options.cache_dir.as_ref().map(|(dir, bytes)| (dir.as_path(), *bytes));
        let (blocks, cache) = BlockCache::build(options.block_cache_bytes, disk).await?;
        let lsm_metrics = Arc::new(slatedb_common::metrics::DefaultMetricsRecorder::new());
        let lsm_buffer_bytes = usize::try_from(options.lsm_buffer_bytes).unwrap_or(usize::MAX);
        let opened = Self::open_incarnation(&object_store, &path, &cache, &lsm_metrics, &tuning, lsm_buffer_bytes)
            .await
            .map_err(|e| EddyError::external(format!("cannot open state store {description}: {}", e.message)))?;
        // No bounds are known for runs found live on open.
        let unknown = vec![None; opened.live.len()];
        let snapshot =
            ReadSnapshot::new(opened.committed, opened.incarnation.db.snapshot().map_err(storage_err)?, opened.live.into(), unknown.into());
        let first_run = runs::make_run_id(opened.incarnation.generation, 0)
            .ok_or_else(|| internal_err!("state store generation {} is out of range", opened.incarnation.generation))?;
        let store = Arc::new(Self {
            current: RwLock::new(Arc::new(opened.incarnation)),
            committed: RwLock::new(Arc::new(Committed { epoch: opened.committed, snapshot })),
            committed_watch: tokio::sync::watch::Sender::new(opened.committed),
            commit_lock: tokio::sync::Mutex::new(()),
            failed: AtomicBool::new(false),
            fenced: tokio::sync::watch::Sender::new(false),
            next_run_id: AtomicU64::new(first_run),
            discarded: Mutex::new(HashSet::new()),
            run_bounds: Mutex::new(HashMap::new()),
            object_store,
            path,
            cache,
            maintenance: Maintenance::new(),
            tuning,
            description,
            operator_memory: Arc::new(MemoryBudget::new(usize::try_from(options.operator_cache_bytes).unwrap_or(usize::MAX))),
            write_memory: Arc::new(MemoryBudget::new(usize::try_from(options.write_buffer_bytes).unwrap_or(usize::MAX))),
            object_stats,
            blocks,
            lsm_metrics,
            lsm_buffer_bytes,
        });
        if store.tuning.background_maintenance {
            store.start_maintenance();
        }
        Ok(store)
    }

    /// Opens SlateDB, reads the commit record and live runs, and durably records the new
    /// generation, all within `tuning.open_timeout`.
    async fn open_incarnation(
        object_store: &Arc<dyn ObjectStore>,
        path: &str,
        cache: &Arc<dyn DbCache>,
        lsm_metrics: &Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
        tuning: &StoreTuning,
        lsm_buffer_bytes: usize,
    ) -> Result<Opened> {
        let settings = lsm_settings(tuning.object_store_max_retries, lsm_buffer_bytes);
        let build = Db::builder(path.to_string(), object_store.clone())
            .with_settings(settings)
            .with_db_cache(cache.clone(), 1)
            // A flushed L0 SST's data blocks are not cached: a bulk load would fill the cache
            // with rows nobody reads yet (and push out what readers use); reads cache what they
            // read, and index and filters, which every read needs, are still cached.
            .with_block_cache_policy(BlockCachePolicy::default().with_flush_targets(&[CacheTarget::Index, CacheTarget::Filters]))
            .with_metrics_recorder(lsm_metrics.clone())
            .build();
        let db = bounded(tuning.open_timeout, "open", build).await?;
        let read = async {
            let stored = bounded(tuning.open_timeout, "read commit record", db.get(COMMIT_RECORD_KEY)).await?;
            let recovered = protocol::recover(stored.as_deref())?;
            let live = match bounded(tuning.open_timeout, "read live runs", db.get(LIVE_RUNS_KEY)).await? {
                Some(bytes) => runs::decode_live_runs(&bytes)?,
                None => Vec::new(),
            };
            // Make the generation durable before anything is minted from it, so that a crash
            // before the first commit cannot hand the same run ids to the next open.
            let record = protocol::record_at_open(&recovered);
            bounded(tuning.open_timeout, "record generation", async {
                db.put(COMMIT_RECORD_KEY, record.encode()).await?;
                db.flush().await
            })
            .await?;
            Ok::<_, EddyError>((recovered, live))
        };
        match read.await {
            Ok((recovered, live)) => Ok(Opened {
                incarnation: Incarnation { db, generation: recovered.generation },
                committed: recovered.committed,
                live,
            }),
            Err(e) => {
                Self::abandon(&db, tuning).await;
                Err(e)
            }
        }
    }

    /// Closes an instance without flushing anything it still buffers, within the close
    /// deadline, ignoring errors: used on instances that failed.
    async fn abandon(db: &Db, tuning: &StoreTuning) {
        let close = db.close_with_options(CloseOptions::default().with_flush_type(None));
        match tokio::time::timeout(tuning.close_timeout, close).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!("abandoned state store instance closed with: {e}"),
            Err(_) => tracing::warn!("abandoned state store instance did not close within {:?}", tuning.close_timeout),
        }
    }

    /// True once another process opened this store and fenced this one (see [`Self::fenced`]).
    pub fn is_fenced(&self) -> bool {
        *self.fenced.borrow()
    }

    /// Returns once another process has opened this store and fenced this one. Commits fail
    /// from then on and recovery refuses; the server should stop.
    pub async fn fenced(&self) {
        let mut rx = self.fenced.subscribe();
        let _ = rx.wait_for(|f| *f).await;
    }

    /// Records that SlateDB says this instance was fenced (its writer or compactor lost to a
    /// newer one on the same path). Returns whether it was.
    pub(crate) fn note_if_fenced(&self, db: &slatedb::Db) -> bool {
        if db.status().close_reason == Some(slatedb::CloseReason::Fenced) {
            self.mark_fenced();
        }
        self.is_fenced()
    }

    /// Records (once, with a log line) that this instance was fenced.
    fn mark_fenced(&self) {
        if !self.fenced.send_replace(true) {
            tracing::error!(
                "state store {}: another process opened it and fenced this one; this server stops writing to it",
                self.description
            );
        }
    }

    /// The error of every commit and recovery once fenced.
    fn fenced_error(&self) -> EddyError {
        EddyError::user(
            eddy_common::error::sqlstate::ADMIN_SHUTDOWN,
            format!(
                "state store {} was opened by another eddy process, which fenced this one: this server no longer writes to it",
                self.description
            ),
        )
    }

    /// The current SlateDB instance.
    pub(crate) fn incarnation(&self) -> Arc<Incarnation> {
        self.current.read().clone()
    }

    /// The last committed epoch and its view.
    pub(crate) fn committed_state(&self) -> Arc<Committed> {
        self.committed.read().clone()
    }

    /// Replaces the committed view (after a commit or a fold step).
    pub(crate) fn set_committed(&self, epoch: Epoch, snapshot: ReadSnapshot) {
        *self.committed.write() = Arc::new(Committed { epoch, snapshot });
        self.committed_watch.send_if_modified(|e| std::mem::replace(e, epoch) != epoch);
    }

    /// Returns once `epoch` has committed. Errs if this instance was fenced first (it will
    /// commit nothing more); a commit that fails leads to recovery, which rebuilds whoever waits.
    pub async fn committed_through(&self, epoch: Epoch) -> Result<()> {
        let mut rx = self.committed_watch.subscribe();
        tokio::select! {
            r = rx.wait_for(|e| *e >= epoch) => r.map(|_| ()).map_err(|_| internal_err!("state store closed before epoch {epoch} committed")),
            () = self.fenced() => Err(self.fenced_error()),
        }
    }

    /// Requests, bytes and errors of the object store underneath.
    pub fn object_store_stats(&self) -> &Arc<crate::metered::ObjectStoreStats> {
        &self.object_stats
    }

    /// SlateDB's own counters and gauges now (L0 SSTs, sorted runs, block-cache hits and
    /// misses per kind, compactions, ...). Histograms are left out.
    pub fn lsm_metrics(&self) -> Vec<LsmMetric> {
        use slatedb_common::metrics::MetricValue;
        self.lsm_metrics
            .snapshot()
            .all()
            .iter()
            .filter_map(|m| {
                let (counter, v) = match &m.value {
                    MetricValue::Counter(v) => (true, *v as f64),
                    MetricValue::Gauge(v) => (false, *v as f64),
                    MetricValue::UpDownCounter(v) => (false, *v as f64),
                    _ => return None,
                };
                Some(LsmMetric { name: m.name.clone(), labels: m.labels.clone(), counter, value: v })
            })
            .collect()
    }

    /// Capacity of the block cache (`--block-cache-mb`).
    pub fn block_cache_bytes(&self) -> u64 {
        self.blocks.capacity() as u64
    }

    /// Bytes of blocks, indexes and filters the block cache holds now.
    pub fn block_cache_used(&self) -> u64 {
        self.blocks.usage() as u64
    }

    /// The objects under the store's path, summed by their first directory (SlateDB's `wal`,
    /// `compacted` SSTs, `manifest`, ...): (directory, objects, bytes). Lists every object.
    pub async fn object_usage(&self) -> Result<Vec<(String, u64, u64)>> {
        use futures::StreamExt;
        let root = object_store::path::Path::from(self.path.as_str());
        let mut by_dir: std::collections::BTreeMap<String, (u64, u64)> = std::collections::BTreeMap::new();
        let mut list = self.object_store.list(Some(&root));
        while let Some(meta) = list.next().await {
            let meta = meta.map_err(|e| EddyError::external(format!("cannot list the state store: {e}")))?;
            let dir = meta.location.prefix_match(&root).and_then(|mut parts| parts.next()).map(|p| p.as_ref().to_string()).unwrap_or_default();
            let e = by_dir.entry(dir).or_default();
            e.0 += 1;
            e.1 += meta.size;
        }
        Ok(by_dir.into_iter().map(|(d, (n, b))| (d, n, b)).collect())
    }

    /// Where the store lives, for logs.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Generation of this open (bumped by recovery); unique and increasing across restarts.
    pub fn generation(&self) -> u64 {
        self.current.read().generation
    }

    /// The budget the operators' state caches share.
    pub fn operator_memory(&self) -> &Arc<MemoryBudget> {
        &self.operator_memory
    }

    /// The budget uncommitted in-memory writes share.
    pub fn write_memory(&self) -> &Arc<MemoryBudget> {
        &self.write_memory
    }

    /// Spills `batch` to runs if the shared write budget calls for it (see
    /// [`EpochBatch::spill_if_over_budget`]).
    pub async fn spill_if_needed(&self, batch: &mut EpochBatch) -> Result<()> {
        batch.spill_if_over_budget(self, &self.write_memory).await
    }

    /// A read view of `epoch` over SlateDB snapshot `inner` with `live` runs, carrying the
    /// runs' key bounds where known.
    pub(crate) fn read_snapshot(&self, epoch: Epoch, inner: Arc<DbSnapshot>, live: Vec<RunId>) -> ReadSnapshot {
        let bounds: Vec<Option<Arc<KeyBounds>>> = {
            let known = self.run_bounds.lock();
            live.iter().map(|r| known.get(r).cloned()).collect()
        };
        ReadSnapshot::new(epoch, inner, live.into(), bounds.into())
    }

    /// Forgets the key bounds of `run`, whose entries are gone (folded or discarded).
    pub(crate) fn forget_run_bounds(&self, run: RunId) {
        self.run_bounds.lock().remove(&run);
    }

    /// The last committed epoch.
    pub fn committed_epoch(&self) -> Epoch {
        self.committed.read().epoch
    }

    /// A snapshot of the last committed epoch.
    pub fn snapshot(&self) -> ReadSnapshot {
        self.committed.read().snapshot.clone()
    }

    /// Mints a run id of the current generation.
    pub(crate) fn mint_run_id(&self) -> Result<RunId> {
        let id = self.next_run_id.fetch_add(1, Ordering::SeqCst);
        if runs::run_generation(id) != self.generation() {
            return Err(EddyError::external(
                "state store was recovered while a batch was being spilled (or run ids of this generation are exhausted)",
            ));
        }
        Ok(id)
    }

    /// Writes `ops` (sorted, one per key) as entries of `run`, without waiting for durability.
    pub(crate) async fn write_run_entries(&self, run: RunId, ops: &[Op]) -> Result<()> {
        // Recorded before the write: if it fails halfway, the bounds still cover what landed.
        if let Some(b) = KeyBounds::of_sorted(ops) {
            match self.run_bounds.lock().entry(run) {
                Entry::Occupied(mut e) => Arc::make_mut(e.get_mut()).widen(b),
                Entry::Vacant(e) => {
                    e.insert(Arc::new(b));
                }
            }
        }
        let mut wb = WriteBatch::new();
        for (k, v) in ops {
            wb.put_bytes(Bytes::from(runs::run_key(run, k)), Bytes::from(runs::encode_run_value(v.as_deref())));
        }
        let inc = self.incarnation();
        bounded(self.tuning.commit_timeout, "spill", inc.db.write(wb)).await.map(|_| ())
    }

    /// One entry of a run, committed or not, as the current instance holds it: `None` if the
    /// run has no entry for `key`, `Some(None)` if it deletes `key`, `Some(Some(v))` if it sets
    /// it. Lets an actor read its own spilled, uncommitted writes.
    pub async fn run_get(&self, run: RunId, key: &[u8]) -> Result<Option<Option<Bytes>>> {
        let inc = self.incarnation();
        // A run is read back by key only where its writer's filter says maybe (mostly false
        // positives) or a statement rewrites a key it spilled: caching those data blocks filled
        // the block cache with a bulk load's runs.
        let options = slatedb::config::ReadOptions { cache_blocks: false, ..Default::default() };
        match inc.db.get_with_options(runs::run_key(run, key), &options).await.map_err(storage_err)? {
            Some(raw) => Ok(Some(runs::decode_run_value(&raw)?)),
            None => Ok(None),
        }
    }

    /// The entries of `run` whose keys start with `prefix`, in key order, as [`StateStore::run_get`]
    /// reads one: `None` where the run deletes the key. Lets an actor read back a range of its
    /// own spilled, uncommitted writes.
    pub async fn run_scan_prefix(&self, run: RunId, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Option<Bytes>)>> {
        let (lo, hi) = crate::scan::prefix_bounds(prefix);
        if self.run_bounds.lock().get(&run).is_some_and(|b| !b.overlaps(&lo, &hi)) {
            return Ok(Vec::new());
        }
        let inc = self.incarnation();
        let (start, end) = crate::scan::prefix_bounds(&runs::run_key(run, prefix));
        let range = (start.map(Bytes::from), end.map(Bytes::from));
        let options = slatedb::config::ScanOptions { cache_blocks: false, ..Default::default() };
        let mut iter = inc.db.scan_with_options(range, &options).await.map_err(storage_err)?;
        let mut out = Vec::new();
        while let Some(kv) = iter.next().await.map_err(storage_err)? {
            let (_, key) = runs::split_run_key(&kv.key).ok_or_else(|| internal_err!("a run scan left its run"))?;
            out.push((key.to_vec(), runs::decode_run_value(&kv.value)?));
        }
        Ok(out)
    }

    /// Commits `batch` as epoch `epoch`: atomically, durably, in epoch order. Returns once the
    /// batch is durable and later snapshots show it. If the store needs recovery (an earlier
    /// commit failed, or SlateDB died in the background), recovers first.
    pub async fn commit(&self, epoch: Epoch, mut batch: EpochBatch) -> Result<()> {
        let _guard = self.commit_lock.lock().await;
        // (A fenced instance is closed, or marked failed: recovery refuses it.)
        if self.needs_recovery() {
            self.reopen_locked().await?;
        }
        let record: CommitRecord = protocol::decide_commit(self.committed_epoch(), epoch, self.generation())?;
        // SlateDB holds one write whole, several times over (its batch, the WAL queue, the
        // memtable), past its own backpressure: a large tail goes in first as the epoch's
        // newest run, in paced pieces, and the commit's atomic write only makes it live.
        if batch.approx_bytes() > self.lsm_buffer_bytes / 4 {
            batch.spill_to_new_run(self).await?;
        }
        let (tail, new_runs) = batch.into_parts();
        for (k, _) in &tail {
            runs::check_user_key(k)?;
        }
        let live = self.snapshot().live_runs().to_vec();
        runs::check_new_runs(self.generation(), &live, &new_runs)?;
        if let Some(r) = new_runs.iter().find(|r| self.discarded.lock().contains(r)) {
            return Err(internal_err!("epoch batch commits run {r:#x}, which was discarded"));
        }
        let (writes, next_live) = {
            let bounds = self.run_bounds.lock();
            runs::commit_writes(tail, &live, &new_runs, |r| bounds.get(&r).map(|b| KeyBounds::clone(b)))
        };
        let mut wb = WriteBatch::new();
        add_ops(&mut wb, writes);
        wb.put(COMMIT_RECORD_KEY, record.encode());
        let inc = self.incarnation();
        let durable = bounded(self.tuning.commit_timeout, &format!("commit of epoch {epoch}"), async {
            inc.db.write(wb).await?;
            // Force the WAL out now instead of waiting for the flush timer: a DML is waiting.
            inc.db.flush().await
        })
        .await;
        let snapshot = durable.and_then(|_| inc.db.snapshot().map_err(storage_err));
        match snapshot {
            Ok(snapshot) => {
                self.set_committed(epoch, self.read_snapshot(epoch, snapshot, next_live));
                if !new_runs.is_empty() {
                    self.maintenance.wake();
                }
                Ok(())
            }
            Err(e) => {
                // The instance may hold (and might still upload) the failed batch: it must not
                // serve another snapshot or write. Recovery replaces it, unless another process
                // fenced this one.
                self.failed.store(true, Ordering::SeqCst);
                if e.message.contains("detected newer DB client") {
                    self.mark_fenced();
                }
                if self.note_if_fenced(&inc.db) {
                    return Err(self.fenced_error());
                }
                Err(e)
            }
        }
    }

    /// Reopens SlateDB from object storage and resumes from the last durable commit record,
    /// in a new generation. Returns the committed epoch found, which is the one before the
    /// failed commit, except for an ambiguous failure (see the module docs). Snapshots taken
    /// before are invalid afterwards; batches holding runs spilled before cannot commit.
    pub async fn recover(&self) -> Result<Epoch> {
        let _guard = self.commit_lock.lock().await;
        self.reopen_locked().await?;
        Ok(self.committed_epoch())
    }

    /// True if the next commit will first recover (a commit failed or SlateDB died).
    pub fn needs_recovery(&self) -> bool {
        self.failed.load(Ordering::SeqCst) || self.incarnation().db.status().close_reason.is_some()
    }

    /// Recovery; the caller holds the commit lock.
    async fn reopen_locked(&self) -> Result<()> {
        let old = self.incarnation();
        if self.note_if_fenced(&old.db) {
            return Err(self.fenced_error());
        }
        // Stop the old instance without a final flush: what it still buffers belongs to a
        // failed commit and must not become durable now. If it does not stop in time, the new
        // instance fences it anyway.
        Self::abandon(&old.db, &self.tuning).await;
        self.failed.store(true, Ordering::SeqCst);
        let opened = Self::open_incarnation(&self.object_store, &self.path, &self.cache, &self.lsm_metrics, &self.tuning, self.lsm_buffer_bytes)
            .await?;
        let snapshot = self.read_snapshot(opened.committed, opened.incarnation.db.snapshot().map_err(storage_err)?, opened.live);
        let generation = opened.incarnation.generation;
        let first_run = runs::make_run_id(generation, 0)
            .ok_or_else(|| internal_err!("state store generation {generation} is out of range"))?;
        *self.current.write() = Arc::new(opened.incarnation);
        self.next_run_id.store(first_run, Ordering::SeqCst);
        self.discarded.lock().clear();
        self.set_committed(opened.committed, snapshot);
        self.failed.store(false, Ordering::SeqCst);
        tracing::info!(
            "state store {} recovered at epoch {} (generation {generation})",
            self.description,
            opened.committed
        );
        // Runs of the failed commit (and of any batch spilled before) are garbage now.
        self.maintenance.request_gc();
        Ok(())
    }

    /// Stops background work, then flushes and closes the LSM (without flushing if a commit
    /// failed since the last recovery: that data must not become durable).
    pub async fn close(&self) -> Result<()> {
        self.stop_maintenance().await;
        let _guard = self.commit_lock.lock().await;
        let inc = self.incarnation();
        if self.needs_recovery() {
            Self::abandon(&inc.db, &self.tuning).await;
            self.blocks.close().await;
            return Ok(());
        }
        let closed = bounded(self.tuning.close_timeout, "close", inc.db.close()).await;
        self.blocks.close().await;
        closed
    }
}

/// One of SlateDB's counters or gauges, as [`StateStore::lsm_metrics`] reads it.
#[derive(Debug, Clone)]
pub struct LsmMetric {
    /// SlateDB's dotted name (`slatedb.db.l0_sst_count`, ...).
    pub name: String,
    pub labels: Vec<(String, String)>,
    /// A counter (only grows) rather than a gauge.
    pub counter: bool,
    pub value: f64,
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateStore")
            .field("description", &self.description)
            .field("committed", &self.committed_epoch())
            .field("generation", &self.generation())
            .finish()
    }
}
impl crate::runs::RunStore for StateStore {
    fn mint_run_id(&self) -> Result<RunId> {
        StateStore::mint_run_id(self)
    }

    async fn write_run_entries(&self, run: RunId, ops: &[Op]) -> Result<()> {
        StateStore::write_run_entries(self, run, ops).await
    }

    async fn run_get(&self, run: RunId, key: &[u8]) -> Result<Option<Option<Bytes>>> {
        StateStore::run_get(self, run, key).await
    }

    async fn discard_run(&self, run: RunId) -> Result<usize> {
        StateStore::discard_run(self, run).await
    }
}

