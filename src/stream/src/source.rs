//! [`SourceReader`]: the actor that reads a connector (a generator, later files and Kafka) for
//! one materialized view, as RisingWave does for non-shared sources: every view reading a
//! source gets its own reader, which starts at the source's beginning.
//!
//! Contract:
//! * The reader takes part in barriers like a table's source actor (the barrier manager sends
//!   it [`SourceMsg::Barrier`]s). Until the barrier whose [`Mutation::start`] names it, it only
//!   reports empty epochs and forwards nothing: the view it feeds subscribes at that barrier
//!   and expects its first rows in the following epoch.
//! * Every row sent before barrier E belongs to epoch E. At each barrier the reader writes its
//!   position (rows emitted so far and each split's own position) into its epoch report, so the
//!   position commits atomically with the view state built from those rows. A reader restarted
//!   from a committed position emits exactly the rows after it: nothing is lost or counted
//!   twice (splits must be deterministic from their position, as generators are).
//! * Each row carries a hidden row id, `reader id << 40 | row number`, unique and identical on
//!   replay, which is the view's key for the source's rows.
//! * Rows are produced only while the view consumes them (bounded channel), and never faster
//!   than a split's rate limit ([`SplitReader::ready_at`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use eddy_common::codec::make_key;
use eddy_common::{internal_err, Result, StreamChunk};
use eddy_storage::EpochBatch;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::barrier::{Collected, SourceMsg};
use crate::message::{ActorId, Barrier, Dispatcher, Message, Target};
use crate::watermark::WatermarkGen;

/// Rows a reader emits per chunk at most.
pub const SOURCE_CHUNK_ROWS: usize = 4096;

/// Rows a reader emits per epoch at most. Once there, it waits for the next barrier (and asks
/// for it early): an epoch's state changes, and the memory that building and committing them
/// takes, stay bounded however fast the source could produce.
pub const SOURCE_EPOCH_ROWS: u64 = 65_536;

/// One split of a source: a deterministic stream of rows that can resume from a position.
pub trait SplitReader: Send {
    /// The next rows (at most `max_rows`, in the source's user columns), `Ok(None)` once the
    /// split is exhausted. Only called when [`SplitReader::ready_at`] is not in the future.
    fn next_batch(&mut self, max_rows: usize) -> Result<Option<RecordBatch>>;
    /// Where the split stands after the rows returned so far (opaque to the reader).
    fn position(&self) -> Vec<u8>;
    /// The earliest time the next rows may be read (a rate limit), `None`: now.
    fn ready_at(&self) -> Option<Instant> {
        None
    }
    /// Messages waiting upstream that the split has not handed out (Kafka: the partition's
    /// high watermark minus the next offset), if the split knows.
    fn backlog(&self) -> Option<u64> {
        None
    }
}

/// The one split of a constant input (`VALUES`, a query without FROM): its rows, once. Its
/// position is how many it has handed out, so a restarted reader emits none again.
pub struct ConstantSplit {
    rows: RecordBatch,
    next: usize,
}

impl ConstantSplit {
    /// `rows`, of which the first `position` says were emitted already (`None`: none).
    pub fn new(rows: RecordBatch, position: Option<&[u8]>) -> Self {
        let next = position.and_then(|p| <[u8; 8]>::try_from(p).ok()).map_or(0, |b| u64::from_be_bytes(b) as usize);
        Self { rows, next }
    }
}

impl SplitReader for ConstantSplit {
    fn next_batch(&mut self, max_rows: usize) -> Result<Option<RecordBatch>> {
        let left = self.rows.num_rows().saturating_sub(self.next);
        if left == 0 {
            return Ok(None);
        }
        let n = left.min(max_rows.max(1));
        let out = self.rows.slice(self.next, n);
        self.next += n;
        Ok(Some(out))
    }

    fn position(&self) -> Vec<u8> {
        (self.next as u64).to_be_bytes().to_vec()
    }
}

/// Of `splits` (not `exhausted`), the first from `start` on (round robin) that may be read now,
/// or when the earliest one will be (`Err(None)`: none ever again).
pub(crate) fn due_split(splits: &[Box<dyn SplitReader>], exhausted: &[bool], start: usize) -> std::result::Result<usize, Option<Instant>> {
    let n = splits.len();
    let now = Instant::now();
    let mut earliest: Option<Instant> = None;
    for k in 0..n {
        let i = (start + k) % n;
        if exhausted[i] {
            continue;
        }
        match splits[i].ready_at() {
            Some(t) if t > now => earliest = Some(earliest.map_or(t, |e| e.min(t))),
            _ => return Ok(i),
        }
    }
    Err(earliest)
}

/// A reader's progress, shared with whoever watches it (system views, benchmarks).
#[derive(Debug, Default)]
pub struct ReaderStats {
    /// Rows emitted so far (committed or not).
    pub rows: AtomicU64,
    /// The first epoch reported after every split was exhausted (0: not yet): once it has
    /// committed, the view has consumed the whole source.
    pub finished_epoch: AtomicU64,
    /// Messages waiting upstream, summed over the splits that know theirs, at the last
    /// barrier; meaningful once `backlog_known`.
    pub backlog: AtomicU64,
    pub backlog_known: std::sync::atomic::AtomicBool,
}

impl ReaderStats {
    /// The source's lag in messages, if its splits report one.
    pub fn backlog(&self) -> Option<u64> {
        self.backlog_known.load(Ordering::Relaxed).then(|| self.backlog.load(Ordering::Relaxed))
    }
}

/// Key of a reader's committed position in its own key space (`table_prefix(reader id)`).
pub fn position_key(reader: ActorId) -> Vec<u8> {
    make_key(reader, b"position")
}

/// Key of a reader's watermark generator state (next to its position).
pub fn watermark_state_key(reader: ActorId) -> Vec<u8> {
    make_key(reader, b"watermark")
}

/// A reader's position: rows emitted so far and each split's position.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReaderPosition {
    /// Rows emitted (the next row's number).
    pub rows: u64,
    /// Per split, in split order.
    pub splits: Vec<Vec<u8>>,
}

impl ReaderPosition {
    /// `rows (u64 BE) | n (u32 BE) | n × (len u32 BE | bytes)`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.splits.iter().map(|s| s.len() + 4).sum::<usize>());
        out.extend_from_slice(&self.rows.to_be_bytes());
        out.extend_from_slice(&(self.splits.len() as u32).to_be_bytes());
        for s in &self.splits {
            out.extend_from_slice(&(s.len() as u32).to_be_bytes());
            out.extend_from_slice(s);
        }
        out
    }

    /// The inverse of [`ReaderPosition::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let bad = || internal_err!("corrupt source position ({} bytes)", bytes.len());
        let take = |at: &mut usize, n: usize| -> Result<&[u8]> {
            let s = bytes.get(*at..*at + n).ok_or_else(bad)?;
            *at += n;
            Ok(s)
        };
        let mut at = 0;
        let rows = u64::from_be_bytes(take(&mut at, 8)?.try_into().map_err(|_| bad())?);
        let n = u32::from_be_bytes(take(&mut at, 4)?.try_into().map_err(|_| bad())?);
        let mut splits = Vec::new();
        for _ in 0..n {
            let len = u32::from_be_bytes(take(&mut at, 4)?.try_into().map_err(|_| bad())?) as usize;
            splits.push(take(&mut at, len)?.to_vec());
        }
        Ok(Self { rows, splits })
    }
}

/// The reader of one source for one view.
pub struct SourceReader {
    /// Actor id (also the key space of its position).
    id: ActorId,
    /// Source name, for logs.
    name: String,
    /// Barriers.
    rx: mpsc::Receiver<SourceMsg>,
    /// The source's splits, positioned.
    splits: Vec<Box<dyn SplitReader>>,
    /// Splits that have no more rows.
    exhausted: Vec<bool>,
    /// The split to read next (round robin).
    next_split: usize,
    /// Rows emitted so far.
    rows: u64,
    /// Rows as the view reads them: the source's columns, then the row id.
    schema: SchemaRef,
    /// The view's inputs that read this source (one per scan of it in the view's query).
    outputs: Dispatcher,
    /// Where epoch reports go.
    collector: mpsc::UnboundedSender<Collected>,
    /// Rows flow only after the subscribing barrier.
    started: bool,
    /// Progress, for watchers.
    stats: Arc<ReaderStats>,
    /// Rows emitted in the current epoch.
    epoch_rows: u64,
    /// Asks for the next barrier early (when an epoch is full).
    barrier: Option<Arc<crate::barrier::BarrierManager>>,
    /// The source's event-time watermark (`WATERMARK FOR`), if it has one.
    watermark: Option<WatermarkGen>,
}

impl SourceReader {
    /// A reader with `splits` positioned at `position`; `started` for a reader restored at
    /// recovery (a new one waits for the barrier that starts it).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: ActorId,
        name: String,
        rx: mpsc::Receiver<SourceMsg>,
        splits: Vec<Box<dyn SplitReader>>,
        position: &ReaderPosition,
        schema: SchemaRef,
        outputs: Vec<Target>,
        collector: mpsc::UnboundedSender<Collected>,
        started: bool,
        stats: Arc<ReaderStats>,
    ) -> Self {
        let mut dispatcher = Dispatcher::default();
        for o in outputs {
            dispatcher.add(o);
        }
        let outputs = dispatcher;
        let exhausted = vec![false; splits.len()];
        stats.rows.store(position.rows, Ordering::Relaxed);
        Self { id, name, rx, splits, exhausted, next_split: 0, rows: position.rows, schema, outputs, collector, started, stats, epoch_rows: 0, barrier: None, watermark: None }
    }

    /// Asks `barrier` for an early barrier whenever an epoch is full ([`SOURCE_EPOCH_ROWS`]).
    pub fn with_barrier_requests(mut self, barrier: Arc<crate::barrier::BarrierManager>) -> Self {
        self.barrier = Some(barrier);
        self
    }

    /// Drops late rows and sends the source's watermark to the view (see [`crate::watermark`]);
    /// its state commits under [`watermark_state_key`] with the position.
    pub fn with_watermark(mut self, watermark: WatermarkGen) -> Self {
        self.watermark = Some(watermark);
        self
    }

    /// Runs until stopped; failures are reported to the barrier manager.
    pub async fn run(mut self) {
        let (id, collector) = (self.id, self.collector.clone());
        crate::actor::run_reporting(id, id, "source reader", collector, self.run_inner()).await;
    }

    fn position(&self) -> ReaderPosition {
        ReaderPosition { rows: self.rows, splits: self.splits.iter().map(|s| s.position()).collect() }
    }

    /// The split to read now, or when the next one is due (`Err(None)`: none ever again).
    fn due(&mut self) -> std::result::Result<usize, Option<Instant>> {
        due_split(&self.splits, &self.exhausted, self.next_split)
    }

    async fn run_inner(&mut self) -> Result<()> {
        loop {
            let full = self.epoch_rows >= SOURCE_EPOCH_ROWS;
            let due = if self.started && !self.outputs.is_empty() && !full { self.due() } else { Err(None) };
            let (now, at) = match due {
                Ok(i) => (Some(i), None),
                Err(at) => (None, at),
            };
            tokio::select! {
                biased;
                msg = self.rx.recv() => match msg {
                    None => return Ok(()),
                    Some(SourceMsg::Barrier(b)) => {
                        if self.barrier(&b).await? {
                            return Ok(());
                        }
                    }
                    Some(_) => return Err(internal_err!("source {} received a write", self.name)),
                },
                _ = tokio::time::sleep_until(at.unwrap_or_else(Instant::now)), if at.is_some() => {}
                _ = std::future::ready(()), if now.is_some() => {
                    let i = now.unwrap_or_default();
                    self.next_split = (i + 1) % self.splits.len().max(1);
                    match self.splits[i].next_batch(SOURCE_CHUNK_ROWS)? {
                        Some(batch) if batch.num_rows() > 0 => {
                            self.epoch_rows += batch.num_rows() as u64;
                            let batch = match &mut self.watermark {
                                Some(w) => w.admit(batch)?,
                                None => batch,
                            };
                            if batch.num_rows() > 0 {
                                let chunk = self.with_row_ids(batch)?;
                                self.outputs.send(Message::Chunk(chunk)).await?;
                            }
                            if self.epoch_rows >= SOURCE_EPOCH_ROWS {
                                if let Some(b) = &self.barrier {
                                    b.request_barrier();
                                }
                            }
                        }
                        Some(_) => {}
                        None => {
                            self.exhausted[i] = true;
                            // The last rows need not wait for the next tick to commit.
                            if self.exhausted.iter().all(|e| *e) {
                                if let Some(b) = &self.barrier {
                                    b.request_barrier();
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Appends the hidden row ids to a batch of the source's columns.
    fn with_row_ids(&mut self, batch: RecordBatch) -> Result<StreamChunk> {
        let n = batch.num_rows() as u64;
        let base = (i64::from(self.id) << 40) + self.rows as i64;
        self.rows += n;
        self.stats.rows.store(self.rows, Ordering::Relaxed);
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n as i64).map(|k| base + k)));
        let mut columns = batch.columns().to_vec();
        columns.push(ids);
        Ok(StreamChunk::inserts(RecordBatch::try_new(self.schema.clone(), columns)?))
    }

    /// Reports the epoch (with the position once started) and forwards the barrier. True if
    /// the barrier stops this reader.
    async fn barrier(&mut self, b: &Barrier) -> Result<bool> {
        self.epoch_rows = 0;
        let backlogs: Vec<u64> = self.splits.iter().filter_map(|s| s.backlog()).collect();
        if !backlogs.is_empty() {
            self.stats.backlog.store(backlogs.iter().sum(), Ordering::Relaxed);
            self.stats.backlog_known.store(true, Ordering::Relaxed);
        }
        let mut batch = EpochBatch::default();
        let starts_now = b.mutation.as_ref().is_some_and(|m| m.start.contains(&self.id));
        if self.started {
            batch.put(position_key(self.id), self.position().encode());
            if let Some(w) = &mut self.watermark {
                if w.take_dirty() {
                    batch.put(watermark_state_key(self.id), w.encode_state());
                }
            }
            if self.exhausted.iter().all(|e| *e) {
                // Only the first such epoch counts; a later one finds it set and changes nothing.
                let _ = self.stats.finished_epoch.compare_exchange(0, b.epoch.0, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
        // The manager is gone only at shutdown; then nobody waits for this report.
        let _ = self.collector.send(Collected { actor: self.id, epoch: b.epoch, batch, waiters: vec![], failed: None });
        if self.started {
            if let Some(w) = self.watermark.as_ref().and_then(WatermarkGen::current) {
                self.outputs.send(Message::Watermark(w)).await?;
            }
            self.outputs.send_barrier(self.id, b).await;
        }
        if starts_now {
            self.started = true;
        }
        Ok(b.stops(self.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_and_garbage_is_refused() {
        let p = ReaderPosition { rows: 12345, splits: vec![vec![1, 2, 3], vec![], vec![9; 40]] };
        assert_eq!(ReaderPosition::decode(&p.encode()).unwrap(), p);
        assert!(ReaderPosition::decode(&[0, 1]).is_err());
        let mut truncated = p.encode();
        truncated.pop();
        assert!(ReaderPosition::decode(&truncated).is_err());
    }
}
