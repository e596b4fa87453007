//! Sinks: a sink is a view whose root chain ends in [`SinkLog`] instead of `Materialize`.
//! The log makes delivery at-least-once across crashes without holding anything in memory:
//!
//! * [`SinkLog`] appends every change it receives to the sink's log (its own key space:
//!   `log table | vnode 0 | seq`, values the op and the row), in the epoch's state changes, so
//!   a change is in the log exactly when the epoch that produced it is committed. The next
//!   sequence number commits with it (under vnode `0xFFFF`).
//! * A delivery task reads the log from the last committed snapshot, in order, and hands it to
//!   the [`SinkTarget`] (Kafka, ...). Only committed changes are ever delivered. A target
//!   error is retried with exponential backoff (up to [`MAX_BACKOFF`]); the log keeps
//!   growing in the store meanwhile, never in memory, and the view upstream never waits.
//! * What was delivered is deleted from the log with the next barrier's changes. After a crash
//!   or a recovery the new task starts at the first row left in the log: the rows delivered
//!   since the last commit are delivered again (duplicates only of the changes delivered in the
//!   last, uncommitted epoch), and nothing committed is skipped.

use std::fmt;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, ArrayRef, AsArray, Int16Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int16Type, Schema, SchemaRef};
use async_trait::async_trait;
use eddy_common::codec::{table_prefix, RowCodec};
use eddy_common::{internal_err, Epoch, Op, Result, StreamChunk};
use eddy_storage::{EpochBatch, ReadSnapshot, StateStore};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::operator::{Operator, RowErrors};

/// The longest wait between two delivery attempts to a failing target.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// How long one delivery may take before it counts as failed (and is retried).
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// Log rows read from the store per delivery.
const DELIVERY_ROWS: usize = 4096;

/// Where a sink's changes go.
///
/// A target either makes each delivered chunk durable at once (Kafka, PostgreSQL: `deliver`
/// returns the end of the chunk's sequence numbers) or stages chunks and commits them in
/// batches (Iceberg: `deliver` returns `None` until a commit, `flush` commits when due). Only
/// what a target reports durable is deleted from the log.
#[async_trait]
pub trait SinkTarget: Send + 'static {
    /// The sequence number after the last change the target holds, where it records that with
    /// its data (an exactly-once target); `None`: it keeps no record, and delivery starts at
    /// the first change left in the log.
    async fn resume(&mut self) -> Result<Option<u64>> {
        Ok(None)
    }

    /// Delivers (or stages) `chunk`, the log's changes `seqs` (rows in the sink's columns).
    /// Returns the sequence number up to which everything delivered is now durable in the
    /// target (`None`: nothing more is). On `Err` the target is told to [`discard`] what it
    /// staged, and the changes from the first one not durable are offered again later, so a
    /// target must tolerate changes it partly delivered coming back.
    ///
    /// [`discard`]: SinkTarget::discard
    async fn deliver(&mut self, chunk: &StreamChunk, seqs: std::ops::Range<u64>) -> Result<Option<u64>>;

    /// Called once delivery has caught up with the committed log, and at each commit after
    /// while anything is staged (`epoch`: the last committed one): commits what is staged if
    /// it is due. Returns what `deliver` does.
    async fn flush(&mut self, _epoch: Epoch) -> Result<Option<u64>> {
        Ok(None)
    }

    /// Forgets whatever is staged and not durable (after an error).
    fn discard(&mut self) {}
}

/// What a sink has done, for `SHOW SINKS` and system views.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Changes delivered since the server started.
    pub delivered: AtomicU64,
    /// Changes logged (committed or not) and not yet delivered.
    pub pending: AtomicU64,
    /// The target's last error while it keeps failing (`None`: delivering).
    pub error: Mutex<Option<String>>,
}

/// The op of a change as stored in the log.
fn op_code(op: Op) -> i16 {
    match op {
        Op::Insert => 0,
        Op::Delete => 1,
        Op::UpdateDelete => 2,
        Op::UpdateInsert => 3,
    }
}

fn op_of(code: i16) -> Result<Op> {
    Ok(match code {
        0 => Op::Insert,
        1 => Op::Delete,
        2 => Op::UpdateDelete,
        3 => Op::UpdateInsert,
        other => return Err(internal_err!("corrupt sink log op {other}")),
    })
}

/// Key of log row `seq` of log table `table`.
fn row_key(table: u32, seq: u64) -> Vec<u8> {
    let mut k = table_prefix(table).to_vec();
    k.extend_from_slice(&[0, 0]);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// Key of the next sequence number of log table `table`.
pub fn next_seq_key(table: u32) -> Vec<u8> {
    let mut k = table_prefix(table).to_vec();
    k.extend_from_slice(&[0xFF, 0xFF]);
    k.extend_from_slice(b"next");
    k
}

/// The next sequence number of log `table` at `snapshot` (0 for a new sink).
pub async fn restored_next_seq(table: u32, snapshot: &ReadSnapshot) -> Result<u64> {
    match snapshot.get(&next_seq_key(table)).await? {
        Some(v) => Ok(u64::from_be_bytes(v.as_ref().try_into().map_err(|_| internal_err!("corrupt sink log counter"))?)),
        None => Ok(0),
    }
}

/// State shared by a [`SinkLog`] and its delivery task.
struct Shared {
    /// Sequence numbers delivered and not yet deleted from the log.
    delivered: Mutex<Vec<std::ops::Range<u64>>>,
    /// The next sequence number as of the last barrier (the task reads up to it once its epoch
    /// has committed).
    logged: watch::Sender<u64>,
    stats: Arc<SinkStats>,
}

/// The last operator of a sink (see the module comment).
pub struct SinkLog {
    /// The log's key space.
    table: u32,
    /// The sink's columns (the changes are cast to them; hidden key columns are left out).
    schema: SchemaRef,
    /// Indices of the sink's columns in the input.
    columns: Vec<usize>,
    /// Encodes the op and the row.
    codec: Arc<RowCodec>,
    next_seq: u64,
    /// Log rows of the current epoch (spilled when the store's write budget says so).
    pending: EpochBatch,
    shared: Arc<Shared>,
    /// Started by `attach_store`.
    target: Option<Box<dyn SinkTarget>>,
    completed: watch::Receiver<Epoch>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for SinkLog {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// The schema of log values: the op, then the sink's columns.
fn log_schema(schema: &SchemaRef) -> SchemaRef {
    let mut fields = vec![Arc::new(Field::new("__op", DataType::Int16, false))];
    fields.extend(schema.fields().iter().cloned());
    Arc::new(Schema::new(fields))
}

impl SinkLog {
    /// The log of a sink with columns `schema` (taken from input columns `columns`), stored in
    /// key space `table` from sequence number `next_seq` on, delivering to `target` as epochs
    /// complete (`completed`: the barrier manager's).
    pub fn new(
        table: u32,
        schema: SchemaRef,
        columns: Vec<usize>,
        next_seq: u64,
        target: Box<dyn SinkTarget>,
        completed: watch::Receiver<Epoch>,
        stats: Arc<SinkStats>,
    ) -> Result<Self> {
        let codec = Arc::new(RowCodec::try_new(log_schema(&schema), vec![])?);
        let (logged, _) = watch::channel(next_seq);
        let shared = Arc::new(Shared { delivered: Mutex::new(Vec::new()), logged, stats });
        Ok(Self { table, schema, columns, codec, next_seq, pending: EpochBatch::default(), shared, target: Some(target), completed, task: None })
    }
}

impl fmt::Display for SinkLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SinkLog table={}", self.table)
    }
}

#[async_trait]
impl Operator for SinkLog {
    async fn prefetch(&mut self, _chunk: &StreamChunk, store: &StateStore) -> Result<()> {
        store.spill_if_needed(&mut self.pending).await
    }

    fn process(&mut self, chunk: StreamChunk, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        let n = chunk.ops.len();
        if n == 0 {
            return Ok(vec![]);
        }
        let ops: ArrayRef = Arc::new(Int16Array::from_iter_values(chunk.ops.iter().map(|o| op_code(*o))));
        let mut cols = vec![ops];
        for (&i, f) in self.columns.iter().zip(self.schema.fields()) {
            let c = chunk.batch.column(i);
            cols.push(if c.data_type() == f.data_type() { c.clone() } else { arrow::compute::cast(c, f.data_type())? });
        }
        let rows = RecordBatch::try_new(self.codec.schema().clone(), cols)?;
        let values = self.codec.encode_values(&rows)?;
        for i in 0..n {
            self.pending.put(row_key(self.table, self.next_seq), values.row(i).data().to_vec());
            self.next_seq += 1;
        }
        self.shared.stats.pending.fetch_add(n as u64, Ordering::Relaxed);
        Ok(vec![])
    }

    async fn on_barrier(&mut self, _epoch: Epoch, batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        let logged = !self.pending.is_empty();
        batch.extend(std::mem::take(&mut self.pending));
        for range in std::mem::take(&mut *self.shared.delivered.lock()) {
            for seq in range {
                batch.delete(row_key(self.table, seq));
            }
        }
        if logged {
            batch.put(next_seq_key(self.table), self.next_seq.to_be_bytes().to_vec());
            self.shared.logged.send_replace(self.next_seq);
        }
        Ok(vec![])
    }

    fn attach_store(&mut self, store: &Arc<StateStore>) {
        let Some(target) = self.target.take() else { return };
        let delivery = Delivery { table: self.table, codec: self.codec.clone(), store: store.clone(), shared: self.shared.clone(), target, next: 0, durable: 0 };
        self.task = Some(tokio::spawn(delivery.run(self.shared.logged.subscribe(), self.completed.clone())));
    }
}

/// The delivery task of one sink.
struct Delivery {
    table: u32,
    codec: Arc<RowCodec>,
    store: Arc<StateStore>,
    shared: Arc<Shared>,
    target: Box<dyn SinkTarget>,
    /// The next log row to deliver.
    next: u64,
    /// Everything before it is durable in the target (and due for deletion from the log).
    durable: u64,
}

impl Delivery {
    async fn run(mut self, mut logged: watch::Receiver<u64>, mut completed: watch::Receiver<Epoch>) {
        if self.start().await.is_none() {
            return;
        }
        let mut known = true;
        loop {
            let staged = self.next > self.durable;
            if !known && !staged && *logged.borrow_and_update() <= self.next {
                if logged.changed().await.is_err() {
                    return;
                }
                continue;
            }
            // Mark the commit seen before taking the snapshot: one landing in between makes
            // the wait below return at once instead of being missed until the next.
            let epoch = *completed.borrow_and_update();
            let snapshot = self.store.snapshot();
            match self.catch_up(&snapshot, epoch).await {
                Some(true) => {}
                Some(false) => {
                    // Nothing new committed (or a staged batch not yet due): wait for the next
                    // commit.
                    known = false;
                    if completed.changed().await.is_err() {
                        return;
                    }
                }
                None => return,
            }
        }
    }

    /// Finds where delivery starts: the first row left in the log (or, in an empty log, the
    /// next one to be logged), or after what the target says it already holds. `None`: the
    /// sink was dropped meanwhile.
    async fn start(&mut self) -> Option<()> {
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.try_start().await {
                Ok(()) => return Some(()),
                Err(e) => {
                    self.report(e);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    async fn try_start(&mut self) -> Result<()> {
        let snapshot = self.store.snapshot();
        let end = row_key(self.table, u64::MAX);
        let mut cursor = snapshot.scan_batches(Bound::Included(row_key(self.table, 0)), Bound::Included(end), 1).await?;
        let logged = restored_next_seq(self.table, &snapshot).await?;
        let first = match cursor.next_batch().await?.and_then(|e| e.first().map(|(k, _)| k.to_vec())) {
            Some(k) => seq_of(&k)?,
            None => logged,
        };
        let held = self.target.resume().await?.unwrap_or(0);
        self.next = first.max(held.min(logged));
        if self.next > first {
            // Delivered before a crash, not yet deleted from the log.
            self.shared.delivered.lock().push(first..self.next);
            let _ = self.shared.stats.pending.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| Some(p.saturating_sub(self.next - first)));
        }
        self.durable = self.next;
        *self.shared.stats.error.lock() = None;
        Ok(())
    }

    fn report(&self, e: eddy_common::EddyError) {
        let message = e.to_string();
        let first = self.shared.stats.error.lock().replace(message.clone()).is_none();
        if first {
            tracing::warn!("sink delivery failed: {message}; retrying with backoff");
        }
    }

    /// Records that everything before `seq` is durable in the target.
    fn mark_durable(&mut self, seq: Option<u64>) {
        let Some(seq) = seq.filter(|s| *s > self.durable) else { return };
        let n = seq - self.durable;
        self.shared.delivered.lock().push(self.durable..seq);
        self.shared.stats.delivered.fetch_add(n, Ordering::Relaxed);
        let _ = self.shared.stats.pending.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| Some(p.saturating_sub(n)));
        self.durable = seq;
    }

    /// Delivers the committed log rows from `next` on, then lets the target commit what it
    /// staged; whether anything moved (`None`: the sink was dropped while waiting).
    async fn catch_up(&mut self, snapshot: &ReadSnapshot, epoch: Epoch) -> Option<bool> {
        let mut backoff = Duration::from_millis(100);
        loop {
            let (next, durable) = (self.next, self.durable);
            match self.try_catch_up(snapshot, epoch).await {
                Ok(()) => {
                    *self.shared.stats.error.lock() = None;
                    return Some(self.next > next || self.durable > durable);
                }
                Err(e) => {
                    self.report(e);
                    self.target.discard();
                    self.next = self.durable;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    async fn try_catch_up(&mut self, snapshot: &ReadSnapshot, epoch: Epoch) -> Result<()> {
        while let Some(chunk) = self.read(snapshot, self.next).await? {
            let (chunk, seqs) = chunk;
            let durable = tokio::time::timeout(DELIVERY_TIMEOUT, self.target.deliver(&chunk, seqs.clone()))
                .await
                .map_err(|_| eddy_common::EddyError::external(format!("the sink's target did not answer within {DELIVERY_TIMEOUT:?}")))??;
            self.next = seqs.end;
            self.mark_durable(durable);
        }
        if self.next > self.durable {
            let durable = tokio::time::timeout(DELIVERY_TIMEOUT, self.target.flush(epoch))
                .await
                .map_err(|_| eddy_common::EddyError::external(format!("the sink's target did not commit within {DELIVERY_TIMEOUT:?}")))??;
            self.mark_durable(durable);
        }
        Ok(())
    }

    /// One batch of committed log rows from `from` on, with their sequence numbers (`None`:
    /// the log has no rows from `from` on).
    async fn read(&mut self, snapshot: &ReadSnapshot, from: u64) -> Result<Option<(StreamChunk, std::ops::Range<u64>)>> {
        let end = row_key(self.table, u64::MAX);
        let mut cursor = snapshot.scan_batches(Bound::Included(row_key(self.table, from)), Bound::Included(end), DELIVERY_ROWS).await?;
        let Some(entries) = cursor.next_batch().await? else { return Ok(None) };
        let (Some((first, _)), Some((last, _))) = (entries.first(), entries.last()) else { return Ok(None) };
        let seqs = seq_of(first)?..seq_of(last)? + 1;
        let rows = self.codec.decode_values(entries.iter().map(|(_, v)| v.as_ref()))?;
        let ops = rows.column(0).as_primitive::<Int16Type>();
        let ops: Vec<Op> = (0..ops.len()).map(|i| op_of(ops.value(i))).collect::<Result<_>>()?;
        let data = rows.project(&(1..rows.num_columns()).collect::<Vec<_>>())?;
        Ok(Some((StreamChunk::try_new(data, ops)?, seqs)))
    }
}

/// The sequence number of a log row's key.
fn seq_of(key: &[u8]) -> Result<u64> {
    key.get(6..14).and_then(|s| s.try_into().ok()).map(u64::from_be_bytes).ok_or_else(|| internal_err!("corrupt sink log key"))
}
