//! [`ChangeLog`]: the changes a transaction makes to one table, for the views downstream, held
//! until the transaction commits (a view must never see a change that is later rolled back).
//!
//! A statement of any size (a 10 GB COPY) must not hold its changes in memory until then. The
//! log keeps its newest chunks in memory, charged to the state store's shared write budget
//! (the same policy as an `EpochBatch`: it spills when it alone holds half the budget, or when
//! the budget is exhausted and it holds at least `MIN_SPILL_BYTES`), and appends older ones
//! to an Arrow IPC stream in an anonymous temporary file (`$TMPDIR`, unlinked from the start,
//! so a crash leaves nothing behind). The commit replays the file, one chunk at a time, then
//! the in-memory chunks: the same chunks in the same order. An abort drops the log and the file.
//!
//! The log is not state: it lives only between a statement's first chunk and its commit, is
//! never read by anyone but its table's actor, and a restart forgets uncommitted statements
//! anyway. So it goes to local disk, not through the LSM, where it would be written, compacted
//! and deleted again for nothing.

use std::fs::File;
use std::io::{BufReader, BufWriter, Seek, SeekFrom};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int8Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use eddy_common::{internal_err, EddyError, Op, Result, StreamChunk};
use eddy_storage::MemoryBudget;

/// Name of the column that carries each row's op in the spill file.
const OP_COLUMN: &str = "__eddy_op";

/// In-memory bytes of changes moved to spill files since the process started.
static SPILLED_BYTES: AtomicU64 = AtomicU64::new(0);

/// In-memory bytes of changes moved to spill files since the process started (all logs).
pub fn spilled_bytes() -> u64 {
    SPILLED_BYTES.load(Ordering::Relaxed)
}

/// A transaction's changes to one table, in order; see the module docs.
#[derive(Debug)]
pub struct ChangeLog {
    /// The table's storage schema: every chunk has it, and replayed chunks get it back.
    schema: SchemaRef,
    /// The newest chunks, in order.
    chunks: Vec<StreamChunk>,
    /// Bytes of `chunks`, charged to `budget`.
    bytes: usize,
    /// The shared write budget.
    budget: Arc<MemoryBudget>,
    /// The older chunks, if any spilled.
    file: Option<Spill>,
}

/// The spilled part of a log.
struct Spill {
    writer: StreamWriter<BufWriter<File>>,
    /// The file's schema (see [`file_schema`]).
    schema: SchemaRef,
    /// Chunks written.
    chunks: usize,
}

impl std::fmt::Debug for Spill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spill").field("chunks", &self.chunks).finish()
    }
}

impl ChangeLog {
    /// An empty log for a table of `schema`, charging its memory to `budget`.
    pub fn new(schema: SchemaRef, budget: Arc<MemoryBudget>) -> Self {
        Self { schema, chunks: Vec::new(), bytes: 0, budget, file: None }
    }

    /// True without changes.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.file.is_none()
    }

    /// Chunks written to the spill file so far.
    pub fn spilled_chunks(&self) -> usize {
        self.file.as_ref().map_or(0, |f| f.chunks)
    }

    /// Appends `chunk`; spills the log's in-memory chunks when the budget calls for it.
    pub fn push(&mut self, chunk: StreamChunk) -> Result<()> {
        let bytes = chunk.batch.get_array_memory_size() + chunk.ops.len();
        self.bytes += bytes;
        self.budget.grow(bytes);
        self.chunks.push(chunk);
        if self.budget.calls_for_spill(self.bytes) {
            self.spill()?;
        }
        Ok(())
    }

    /// Moves the in-memory chunks to the end of the spill file.
    fn spill(&mut self) -> Result<()> {
        if self.file.is_none() {
            let file = tempfile::tempfile().map_err(|e| spill_err("create", e))?;
            let schema = file_schema(&self.schema);
            let writer = StreamWriter::try_new(BufWriter::new(file), &schema)?;
            self.file = Some(Spill { writer, schema, chunks: 0 });
        }
        let Some(spill) = self.file.as_mut() else { return Err(internal_err!("change log spill file vanished")) };
        let file_schema = spill.schema.clone();
        for chunk in std::mem::take(&mut self.chunks) {
            let ops: ArrayRef = Arc::new(Int8Array::from_iter_values(chunk.ops.iter().map(|o| op_code(*o))));
            let mut columns = chunk.batch.columns().to_vec();
            columns.push(ops);
            spill.writer.write(&RecordBatch::try_new(file_schema.clone(), columns)?)?;
            spill.chunks += 1;
        }
        SPILLED_BYTES.fetch_add(self.bytes as u64, Ordering::Relaxed);
        self.budget.shrink(std::mem::take(&mut self.bytes));
        Ok(())
    }

    /// The logged chunks, in order: the spilled ones read back one at a time, then the
    /// in-memory ones. Consumes the log (its file goes when the replay is dropped).
    pub fn replay(mut self) -> Result<Replay> {
        let chunks = std::mem::take(&mut self.chunks);
        self.budget.shrink(std::mem::take(&mut self.bytes));
        let reader = match self.file.take() {
            None => None,
            Some(spill) => {
                let expected = spill.chunks;
                let mut writer = spill.writer;
                writer.finish()?;
                let mut file = writer.into_inner()?.into_inner().map_err(|e| spill_err("flush", e.into_error()))?;
                file.seek(SeekFrom::Start(0)).map_err(|e| spill_err("rewind", e))?;
                Some((StreamReader::try_new(BufReader::new(file), None)?, expected))
            }
        };
        Ok(Replay { schema: self.schema.clone(), reader, read: 0, chunks: chunks.into_iter() })
    }
}

impl Drop for ChangeLog {
    fn drop(&mut self) {
        self.budget.shrink(self.bytes);
    }
}

/// The chunks of a [`ChangeLog`], in order (see [`ChangeLog::replay`]).
pub struct Replay {
    schema: SchemaRef,
    /// The spill file, and how many chunks it holds.
    reader: Option<(StreamReader<BufReader<File>>, usize)>,
    /// Chunks read from the file.
    read: usize,
    chunks: std::vec::IntoIter<StreamChunk>,
}

impl Iterator for Replay {
    type Item = Result<StreamChunk>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some((reader, expected)) = &mut self.reader {
            // A local file read of one chunk (a few hundred KB): short enough not to matter to
            // the runtime, as for DataFusion's spill files.
            match reader.next() {
                Some(batch) => {
                    self.read += 1;
                    return Some(batch.map_err(EddyError::from).and_then(|b| chunk_from_file(&self.schema, b)));
                }
                None if self.read != *expected => {
                    let e = internal_err!("change log spill file holds {} of its {expected} chunks", self.read);
                    self.reader = None;
                    return Some(Err(e));
                }
                None => self.reader = None,
            }
        }
        self.chunks.next().map(Ok)
    }
}

/// The spill file's schema: the table's, plus the ops.
fn file_schema(schema: &Schema) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(OP_COLUMN, DataType::Int8, false));
    Arc::new(Schema::new(fields))
}

fn chunk_from_file(schema: &SchemaRef, batch: RecordBatch) -> Result<StreamChunk> {
    let n = batch.num_columns();
    let Some(ops) = batch.column(n - 1).as_any().downcast_ref::<Int8Array>() else {
        return Err(internal_err!("change log spill file has no op column"));
    };
    let ops = ops.values().iter().map(|c| op_from_code(*c)).collect::<Result<Vec<_>>>()?;
    let columns = batch.columns()[..n - 1].to_vec();
    StreamChunk::try_new(RecordBatch::try_new(schema.clone(), columns)?, ops)
}

fn op_code(op: Op) -> i8 {
    match op {
        Op::Insert => 0,
        Op::Delete => 1,
        Op::UpdateDelete => 2,
        Op::UpdateInsert => 3,
    }
}

fn op_from_code(code: i8) -> Result<Op> {
    Ok(match code {
        0 => Op::Insert,
        1 => Op::Delete,
        2 => Op::UpdateDelete,
        3 => Op::UpdateInsert,
        _ => return Err(internal_err!("change log spill file has op code {code}")),
    })
}

fn spill_err(what: &str, e: std::io::Error) -> EddyError {
    EddyError::external(format!("could not {what} the temporary file of a statement's changes for views: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("s", DataType::Utf8, true)]))
    }

    fn chunk(i: i64) -> StreamChunk {
        let ids = Int64Array::from_iter_values(i * 100..i * 100 + 100);
        let s = StringArray::from_iter((0..100).map(|j| (j % 3 != 0).then(|| format!("row {i}/{j}"))));
        let batch = RecordBatch::try_new(schema(), vec![Arc::new(ids), Arc::new(s)]).unwrap();
        let ops = (0..100).map(|j| [Op::Insert, Op::Delete, Op::UpdateDelete, Op::UpdateInsert][(j + i as usize) % 4]).collect();
        StreamChunk::try_new(batch, ops).unwrap()
    }

    #[test]
    fn a_log_past_its_budget_spills_and_replays_the_same_chunks_in_order() {
        // A budget of 64 KB: each chunk is several KB, so most go to the file.
        let budget = Arc::new(MemoryBudget::new(64 << 10));
        let mut log = ChangeLog::new(schema(), budget.clone());
        let written: Vec<StreamChunk> = (0..200).map(chunk).collect();
        for c in &written {
            log.push(c.clone()).unwrap();
        }
        assert!(log.spilled_chunks() > 150, "{} of 200 chunks spilled", log.spilled_chunks());
        assert!(budget.used() <= 32 << 10, "{} bytes still charged", budget.used());
        let replayed: Vec<StreamChunk> = log.replay().unwrap().collect::<Result<_>>().unwrap();
        assert_eq!(replayed.len(), written.len());
        for (a, b) in replayed.iter().zip(&written) {
            assert_eq!(a.ops, b.ops);
            assert_eq!(a.batch, b.batch);
        }
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_small_log_stays_in_memory_and_a_dropped_one_releases_its_budget() {
        let budget = Arc::new(MemoryBudget::new(64 << 20));
        let mut log = ChangeLog::new(schema(), budget.clone());
        log.push(chunk(1)).unwrap();
        assert_eq!(log.spilled_chunks(), 0);
        assert!(budget.used() > 0);
        drop(log);
        assert_eq!(budget.used(), 0);
    }
}
