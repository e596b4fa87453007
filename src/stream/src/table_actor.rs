//! [`TableActor`]: the source of a table and its single writer. DML sends it whole statements
//! ([`SourceMsg::Write`]) or the parts of a transaction ([`SourceMsg::Stage`], then
//! [`SourceMsg::Commit`] or [`SourceMsg::Abort`]); it resolves key conflicts against current
//! state ([`crate::table_write::resolve`]), applies the result to the table's state and, when
//! views depend on the table, turns it into an exact change stream.
//!
//! Atomicity: a statement resolves completely or not at all. A transaction's staged parts are
//! invisible (to readers and to views) until its commit, which applies them in one epoch. While
//! a transaction has staged parts, the table is reserved for it: other writes wait in the actor
//! (in arrival order) until it commits or aborts, so its staged decisions stay valid. A session
//! stages the tables of a transaction in table-id order, so two transactions never wait for
//! each other in a cycle. Barriers never wait.
//!
//! A table declared with a connector (`CREATE TABLE ... WITH (connector = ...)`) is also fed
//! by the actor itself: between messages it reads the connector's splits ([`Ingest`]) and
//! applies their rows like autocommitted inserts (never while a transaction holds the table),
//! and at each barrier it writes the connector's position into the same epoch as the rows, so
//! a restart resumes exactly after the last committed row.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use eddy_common::codec::RowCodec;
use eddy_common::{internal_err, Epoch, EddyError, Result, StreamChunk};
use eddy_storage::{StateStore, StateTable};
use tokio::sync::{mpsc, watch};

use crate::barrier::{Collected, SourceMsg, Waiter};
use crate::change_log::ChangeLog;
use crate::source::{ReaderPosition, SplitReader};
use crate::message::{ActorId, Dispatcher, Message, Target};
use crate::table_write::{resolve, TableWrite, TxnId, WriteOutcome};
use crate::watermark::WatermarkGen;
use crate::write_set::WriteSet;

/// A transaction's staged, not yet visible, changes to this table.
struct Staged {
    /// Its transaction.
    txn: TxnId,
    /// Key-value changes, readable by the writer; spills when large.
    kv: WriteSet,
    /// Changes for downstream views, emitted at commit; spills to a file when large.
    changes: ChangeLog,
    /// The watermark generator as it will be once the transaction commits.
    watermark: Option<WatermarkGen>,
}

/// The staged changes of `txn` in `slot`, or of the transaction holding the table if another
/// one does (the caller checks).
fn staged_for<'a>(slot: &'a mut Option<Staged>, txn: TxnId, table: &StateTable, store: &StateStore) -> &'a mut Staged {
    slot.get_or_insert_with(|| Staged {
        txn,
        kv: WriteSet::default(),
        changes: ChangeLog::new(table.schema().clone(), store.write_memory().clone()),
        watermark: None,
    })
}

/// A connector feeding a table (see the module docs).
pub struct Ingest {
    /// The connector's splits, positioned.
    pub splits: Vec<Box<dyn SplitReader>>,
    /// Rows ingested so far (the next row's number).
    pub rows: u64,
    /// Splits with no more rows.
    exhausted: Vec<bool>,
    /// Split to read next.
    next: usize,
    /// Rows ingested in the current epoch (at most `SOURCE_EPOCH_ROWS`, as for readers).
    epoch_rows: u64,
    /// Asked for an early barrier when an epoch is full.
    barrier: Arc<crate::barrier::BarrierManager>,
}

impl Ingest {
    /// Ingestion from `splits`, `rows` rows in; `barrier` is asked for an early barrier when
    /// an epoch is full.
    pub fn new(splits: Vec<Box<dyn SplitReader>>, rows: u64, barrier: Arc<crate::barrier::BarrierManager>) -> Self {
        let exhausted = vec![false; splits.len()];
        Self { splits, rows, exhausted, next: 0, epoch_rows: 0, barrier }
    }

    /// The split to read now, or when one is next due (`Err(None)`: never again).
    fn due(&self) -> std::result::Result<usize, Option<tokio::time::Instant>> {
        if self.epoch_rows >= crate::source::SOURCE_EPOCH_ROWS {
            return Err(None);
        }
        crate::source::due_split(&self.splits, &self.exhausted, self.next)
    }

    fn position(&self) -> ReaderPosition {
        ReaderPosition { rows: self.rows, splits: self.splits.iter().map(|s| s.position()).collect() }
    }
}

/// Row ids of ingested rows: `1 << 62 | table << 40 | row number`, apart from the ids DML
/// allocates, and the same on every replay.
fn ingest_row_id(table: u32, row: u64) -> i64 {
    ((1u64 << 62) | (u64::from(table) << 40) | row) as i64
}

/// The source actor of one table.
pub struct TableActor {
    /// Actor id (the table's relation id).
    id: ActorId,
    /// Table name, for error messages.
    name: String,
    /// The table's rows.
    table: Arc<StateTable>,
    /// Row encoding (same as `table`'s).
    codec: RowCodec,
    /// Keys are fresh hidden row ids: inserts can never conflict.
    append_only_keys: bool,
    /// DML writes and barriers.
    rx: mpsc::Receiver<SourceMsg>,
    /// Writes waiting for a transaction's reservation to end.
    deferred: VecDeque<SourceMsg>,
    /// The transaction holding the table, with its staged changes.
    staged: Option<Staged>,
    /// Downstream views.
    outputs: Dispatcher,
    /// Where epoch reports go.
    collector: mpsc::UnboundedSender<Collected>,
    /// Committed state (for looking up current rows).
    store: Arc<StateStore>,
    /// Last completed epoch.
    completed: watch::Receiver<Epoch>,
    /// Writes of the current epoch, readable by the writer; spills when large.
    pending: WriteSet,
    /// Writers in the current epoch.
    waiters: Vec<Waiter>,
    /// The epoch the next barrier closes.
    epoch: Epoch,
    /// Whether the committed table was empty at this epoch's first lookup (then only this
    /// epoch's own writes can conflict); `None` until checked.
    committed_empty: Option<bool>,
    /// The connector feeding the table, if it has one.
    ingest: Option<Ingest>,
    /// The table's event-time watermark (`WATERMARK FOR`), if it has one.
    watermark: Option<WatermarkGen>,
}

impl TableActor {
    /// An actor for `table`, starting after committed epoch `last`.
    #[allow(clippy::too_many_arguments)]
    pub fn try_new(
        id: ActorId,
        name: String,
        table: Arc<StateTable>,
        append_only_keys: bool,
        rx: mpsc::Receiver<SourceMsg>,
        outputs: Vec<Target>,
        collector: mpsc::UnboundedSender<Collected>,
        store: Arc<StateStore>,
        completed: watch::Receiver<Epoch>,
    ) -> Result<Self> {
        let codec = RowCodec::try_new(table.schema().clone(), table.pk_indices().to_vec())?;
        let epoch = completed.borrow().next();
        let mut dispatcher = Dispatcher::default();
        for o in outputs {
            dispatcher.add(o);
        }
        Ok(Self {
            id,
            name,
            table,
            codec,
            append_only_keys,
            rx,
            deferred: VecDeque::new(),
            staged: None,
            outputs: dispatcher,
            collector,
            store,
            completed,
            pending: WriteSet::default(),
            waiters: Vec::new(),
            epoch,
            committed_empty: None,
            ingest: None,
            watermark: None,
        })
    }

    /// Drops late rows and sends the table's watermark downstream (see [`crate::watermark`]).
    pub fn with_watermark(mut self, watermark: WatermarkGen) -> Self {
        self.watermark = Some(watermark);
        self
    }

    /// Feeds the table from a connector as well (see [`Ingest`]).
    pub fn with_ingest(mut self, ingest: Ingest) -> Self {
        self.ingest = Some(ingest);
        self
    }

    /// Reads and applies the next rows of the connector, if a split is due now.
    async fn ingest_some(&mut self) -> Result<()> {
        let Some(ingest) = self.ingest.as_mut() else { return Ok(()) };
        let Ok(i) = ingest.due() else { return Ok(()) };
        ingest.next = (i + 1) % ingest.splits.len().max(1);
        let Some(batch) = ingest.splits[i].next_batch(crate::source::SOURCE_CHUNK_ROWS)? else {
            ingest.exhausted[i] = true;
            return Ok(());
        };
        let n = batch.num_rows() as u64;
        if n == 0 {
            return Ok(());
        }
        let mut columns = batch.columns().to_vec();
        // A table keyed by hidden row ids gets fresh ones; a keyed table takes the newest row
        // of a key (upsert), as RisingWave does for connector tables.
        let on_conflict = if self.append_only_keys {
            columns.push(Arc::new(arrow::array::Int64Array::from_iter_values((0..n).map(|k| ingest_row_id(self.id, ingest.rows + k)))));
            Default::default()
        } else {
            crate::table_write::OnConflict::Overwrite
        };
        ingest.rows += n;
        ingest.epoch_rows += n;
        if ingest.epoch_rows >= crate::source::SOURCE_EPOCH_ROWS {
            ingest.barrier.request_barrier();
        }
        let rows = arrow::array::RecordBatch::try_new(self.table.schema().clone(), columns)?;
        let write = TableWrite { chunk: StreamChunk::inserts(rows), on_conflict, returning: false };
        let txn = TxnId::MAX;
        self.stage(txn, write).await?;
        self.commit(txn).await
    }

    /// Runs until the table is dropped; failures are reported to the barrier manager.
    pub async fn run(mut self) {
        let (id, collector) = (self.id, self.collector.clone());
        crate::actor::run_reporting(id, id, "table source", collector, self.run_inner()).await;
    }

    /// True if `msg` must wait for the transaction holding the table.
    fn must_wait(&self, msg: &SourceMsg) -> bool {
        let Some(staged) = &self.staged else { return false };
        match msg {
            SourceMsg::Write { .. } => true,
            SourceMsg::Stage { txn, .. } => *txn != staged.txn,
            SourceMsg::Commit { .. } | SourceMsg::Abort { .. } | SourceMsg::Barrier(_) => false,
        }
    }

    async fn run_inner(&mut self) -> Result<()> {
        loop {
            let msg = match self.staged.is_none().then(|| self.deferred.pop_front()).flatten() {
                Some(m) => m,
                None => {
                    // Ingest only while no transaction holds the table.
                    let due = match (&self.ingest, self.staged.is_none()) {
                        (Some(i), true) => i.due(),
                        _ => Err(None),
                    };
                    let (now, at) = match due {
                        Ok(_) => (true, None),
                        Err(at) => (false, at),
                    };
                    tokio::select! {
                        biased;
                        m = self.rx.recv() => match m {
                            Some(m) => m,
                            None => break,
                        },
                        _ = tokio::time::sleep_until(at.unwrap_or_else(tokio::time::Instant::now)), if at.is_some() => continue,
                        _ = std::future::ready(()), if now => {
                            self.ingest_some().await?;
                            continue;
                        }
                    }
                }
            };
            if self.must_wait(&msg) {
                self.deferred.push_back(msg);
                continue;
            }
            match msg {
                SourceMsg::Write { write, decided, ack } => {
                    let txn = TxnId::MAX;
                    match self.stage(txn, write).await {
                        Ok(outcome) => {
                            self.commit(txn).await?;
                            // A session that went away no longer waits for the outcome.
                            let _ = decided.send(Ok(outcome));
                            self.waiters.push(ack);
                        }
                        Err(e) => {
                            if let Some(s) = self.staged.take() {
                                s.kv.discard(&self.store).await;
                            }
                            // A session that went away no longer waits for the outcome.
                            let _ = decided.send(Err(e));
                        }
                    }
                }
                SourceMsg::Stage { txn, write, decided } => {
                    let r = self.stage(txn, write).await;
                    if r.is_err() && self.staged.as_ref().is_some_and(|s| s.txn == txn && s.kv.is_empty() && s.changes.is_empty()) {
                        self.staged = None;
                    }
                    // A session that went away no longer waits for the outcome.
                    let _ = decided.send(r);
                }
                SourceMsg::Commit { txn, ack } => {
                    if self.staged.as_ref().is_some_and(|s| s.txn == txn) {
                        self.commit(txn).await?;
                        self.waiters.push(ack);
                    } else {
                        // Nothing staged here (every part of it was empty): nothing to apply.
                        self.waiters.push(ack);
                    }
                }
                SourceMsg::Abort { txn } => {
                    if self.staged.as_ref().is_some_and(|s| s.txn == txn) {
                        if let Some(s) = self.staged.take() {
                            s.kv.discard(&self.store).await;
                        }
                    }
                }
                SourceMsg::Barrier(b) => {
                    if let Some(w) = &mut self.watermark {
                        if w.take_dirty() {
                            self.pending.write(eddy_common::codec::watermark_key(self.id), Some(w.encode_state()));
                        }
                    }
                    if let Some(ingest) = &mut self.ingest {
                        self.pending.write(eddy_common::codec::ingest_position_key(self.id), Some(ingest.position().encode()));
                        ingest.epoch_rows = 0;
                    }
                    let report = Collected {
                        actor: self.id,
                        epoch: b.epoch,
                        batch: std::mem::take(&mut self.pending).seal(&self.store).await?,
                        waiters: std::mem::take(&mut self.waiters),
                        failed: None,
                    };
                    // The manager may be gone at shutdown; then nothing waits for this report.
                    let _ = self.collector.send(report);
                    if let Some(w) = self.watermark.as_ref().and_then(WatermarkGen::current) {
                        self.outputs.send(Message::Watermark(w)).await?;
                    }
                    self.outputs.send_barrier(self.id, &b).await;
                    self.committed_empty = None;
                    self.epoch = b.epoch.next();
                    if b.stops(self.id) {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Resolves `write` against current state plus `txn`'s earlier parts and stages it.
    async fn stage(&mut self, txn: TxnId, mut write: TableWrite) -> Result<WriteOutcome> {
        if let Some(w) = &self.watermark {
            // Late rows are dropped as the transaction's generator sees them (its earlier parts
            // count); the generator takes effect at commit.
            let staged = staged_for(&mut self.staged, txn, &self.table, &self.store);
            if staged.txn == txn {
                let gen = staged.watermark.get_or_insert_with(|| w.clone());
                let n = write.chunk.len();
                let kept = gen.admit(write.chunk.batch)?;
                if kept.num_rows() != n {
                    write.chunk = StreamChunk::inserts(kept);
                } else {
                    write.chunk = StreamChunk::try_new(kept, write.chunk.ops)?;
                }
            }
        }
        let keys = self.codec.encode_keys(self.table.table_id(), &write.chunk.batch)?;
        let current = self.current_values(txn, &keys, &write).await?;
        let resolved = resolve(&write, &keys, &current, &self.codec, &self.name, self.append_only_keys)?;
        let has_outputs = !self.outputs.is_empty();
        let staged = staged_for(&mut self.staged, txn, &self.table, &self.store);
        if staged.txn != txn {
            return Err(internal_err!("table {} is staged by another transaction", self.name));
        }
        for (k, v) in resolved.kv {
            staged.kv.write(k, v);
        }
        if let Some(c) = resolved.changes {
            if has_outputs {
                staged.changes.push(c)?;
            }
        }
        staged.kv.spill_if_large(&self.store).await?;
        Ok(resolved.outcome)
    }

    /// Applies `txn`'s staged changes to the current epoch and sends them downstream.
    async fn commit(&mut self, txn: TxnId) -> Result<()> {
        let Some(staged) = self.staged.take() else { return Ok(()) };
        if staged.txn != txn {
            self.staged = Some(staged);
            return Err(internal_err!("commit of a transaction that does not hold table {}", self.name));
        }
        if staged.watermark.is_some() {
            self.watermark = staged.watermark;
        }
        self.pending.absorb(&self.store, staged.kv).await?;
        self.pending.spill_if_large(&self.store).await?;
        for c in staged.changes.replay()? {
            self.outputs.send(Message::Chunk(c?)).await?;
        }
        Ok(())
    }

    /// The current value of each key `write` touches: the transaction's staged value, this
    /// epoch's, or the committed one. Inserts into tables keyed by fresh row ids need none.
    async fn current_values(&mut self, txn: TxnId, keys: &[Vec<u8>], write: &TableWrite) -> Result<HashMap<Vec<u8>, Option<Vec<u8>>>> {
        let mut out = HashMap::new();
        let only_inserts = write.chunk.ops.iter().all(|o| *o == eddy_common::Op::Insert);
        if self.append_only_keys && only_inserts {
            return Ok(out);
        }
        // Lookups read the committed state plus this epoch's writes: wait for earlier epochs.
        let before = Epoch(self.epoch.0.saturating_sub(1));
        if self.completed.wait_for(|e| *e >= before).await.is_err() {
            return Err(EddyError::external("the barrier manager stopped"));
        }
        let snapshot = self.store.snapshot();
        let committed_empty = match self.committed_empty {
            Some(e) => e,
            None => {
                let e = snapshot.is_prefix_empty(&eddy_common::codec::table_prefix(self.table.table_id())).await?;
                self.committed_empty = Some(e);
                e
            }
        };
        self.pending.ensure_indexed();
        if let Some(s) = self.staged.as_mut().filter(|s| s.txn == txn) {
            s.kv.ensure_indexed();
        }
        let staged = self.staged.as_ref().filter(|s| s.txn == txn);
        for k in keys {
            if out.contains_key(k) {
                continue;
            }
            let mut v = match staged {
                Some(s) => s.kv.get(&self.store, k).await?,
                None => None,
            };
            if v.is_none() {
                v = self.pending.get(&self.store, k).await?;
            }
            let v = match v {
                Some(v) => v,
                None if committed_empty => None,
                None => snapshot.get(k).await?.map(|b| b.to_vec()),
            };
            out.insert(k.clone(), v);
        }
        Ok(out)
    }
}
