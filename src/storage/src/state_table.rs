//! [`StateTable`]: the typed view of one table's (or one operator's) rows in the state store.
//!
//! Contract: every row lives under `table_id | vnode | pk` (see `eddy_common::codec`), its value
//! the whole row. Writes go into the [`EpochBatch`] of the epoch they belong to and become
//! visible to readers only when that epoch commits. Within a batch, the last write to a key
//! wins, so an insert of an existing key overwrites it (upsert).
//!
//! Scans stream: [`StateTable::scan_stream`] and its range variants decode at most
//! `SCAN_BATCH_ROWS` rows at a time, so a table larger than memory can be read.

use std::ops::{Bound, Range};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use eddy_common::codec::{table_prefix, RowCodec};
use eddy_common::{Op, Result, StreamChunk};
use futures::Stream;

use crate::batch::EpochBatch;
use crate::scan::{prefix_bounds, ReadSnapshot, ScanCursor};

/// Rows per decoded batch when scanning.
pub const SCAN_BATCH_ROWS: usize = 8192;

/// One keyed table of rows in the state store.
#[derive(Debug)]
pub struct StateTable {
    /// Key-space id of this table.
    table_id: u32,
    /// Encoder for keys and values (shared with the table's scans).
    codec: Arc<RowCodec>,
}

impl StateTable {
    /// A state table with rows of `schema`, keyed by the columns at `pk_indices`.
    pub fn try_new(table_id: u32, schema: SchemaRef, pk_indices: Vec<usize>) -> Result<Self> {
        Ok(Self { table_id, codec: Arc::new(RowCodec::try_new(schema, pk_indices)?) })
    }

    /// The table's id.
    pub fn table_id(&self) -> u32 {
        self.table_id
    }

    /// Schema of stored rows.
    pub fn schema(&self) -> &SchemaRef {
        self.codec.schema()
    }

    /// Indices of the key columns.
    pub fn pk_indices(&self) -> &[usize] {
        self.codec.pk_indices()
    }

    /// The full keys (`table_id | vnode | pk`) of the rows of `batch` (this table's schema).
    pub fn keys_of(&self, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
        self.codec.encode_keys(self.table_id, batch)
    }

    /// The vnode of each row of `batch` (this table's schema): the one its key carries.
    pub fn vnodes(&self, batch: &RecordBatch) -> Result<Vec<u16>> {
        if self.codec.pk_indices().is_empty() {
            return Ok(vec![eddy_common::codec::vnode_of(&[]); batch.num_rows()]);
        }
        Ok(self.codec.encode_pks(batch)?.iter().map(|pk| eddy_common::codec::vnode_of(pk.as_ref())).collect())
    }

    /// Adds the changes of `chunk` to `batch`: inserts put the row, deletes remove its key.
    pub fn write_chunk(&self, chunk: &StreamChunk, batch: &mut EpochBatch) -> Result<()> {
        let keys = self.codec.encode_keys(self.table_id, &chunk.batch)?;
        let values = self.codec.encode_values(&chunk.batch)?;
        for (i, (key, op)) in keys.into_iter().zip(chunk.ops.iter()).enumerate() {
            match op {
                Op::Insert | Op::UpdateInsert => batch.put(key, values.row(i).data().to_vec()),
                Op::Delete | Op::UpdateDelete => batch.delete(key),
            }
        }
        Ok(())
    }

    /// Removes every row of the table (streaming over it, so only the deletes accumulate in
    /// `batch`, which its owner may spill).
    pub async fn clear(&self, snapshot: &ReadSnapshot, batch: &mut EpochBatch) -> Result<()> {
        let (start, end) = prefix_bounds(&table_prefix(self.table_id));
        let mut cursor = snapshot.scan_batches(start, end, SCAN_BATCH_ROWS).await?;
        while let Some(entries) = cursor.next_batch().await? {
            for (k, _) in entries {
                batch.delete(k.to_vec());
            }
        }
        Ok(())
    }

    /// The rows whose keys are those of the rows of `keys` (a batch with this table's schema;
    /// only its key columns are read), at `snapshot`.
    pub async fn get_rows(&self, snapshot: &ReadSnapshot, keys: &RecordBatch) -> Result<RecordBatch> {
        let mut values = Vec::new();
        for key in self.codec.encode_keys(self.table_id, keys)? {
            if let Some(v) = snapshot.get(&key).await? {
                values.push(v);
            }
        }
        self.codec.decode_values(values.iter().map(|v| v.as_ref()))
    }

    /// All rows at `snapshot`, as batches of at most `SCAN_BATCH_ROWS` rows. Collects the
    /// table; prefer [`StateTable::scan_stream`].
    pub async fn scan(&self, snapshot: &ReadSnapshot) -> Result<Vec<RecordBatch>> {
        let mut scan = self.scan_stream(snapshot).await?;
        let mut out = Vec::new();
        while let Some(batch) = scan.next_batch().await? {
            out.push(batch);
        }
        Ok(out)
    }

    /// All rows at `snapshot`, decoded lazily in key order.
    pub async fn scan_stream(&self, snapshot: &ReadSnapshot) -> Result<TableScan> {
        let (start, end) = prefix_bounds(&table_prefix(self.table_id));
        self.scan_stream_keys(snapshot, start, end).await
    }

    /// The rows of the vnodes in `vnodes` at `snapshot` (an actor's share of a table).
    pub async fn scan_stream_vnodes(&self, snapshot: &ReadSnapshot, vnodes: Range<u16>) -> Result<TableScan> {
        let bound = |vnode: u16| {
            let mut k = table_prefix(self.table_id).to_vec();
            k.extend_from_slice(&vnode.to_be_bytes());
            k
        };
        self.scan_stream_keys(snapshot, Bound::Included(bound(vnodes.start)), Bound::Excluded(bound(vnodes.end))).await
    }

    /// The rows with full keys (`table_id | vnode | pk`) in (`start`, `end`), clamped to this
    /// table's key space.
    pub async fn scan_stream_keys(&self, snapshot: &ReadSnapshot, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Result<TableScan> {
        self.scan_stream_keys_by(snapshot, start, end, SCAN_BATCH_ROWS).await
    }

    /// [`StateTable::scan_stream_keys`] in batches of at most `batch_rows` rows.
    pub async fn scan_stream_keys_by(
        &self,
        snapshot: &ReadSnapshot,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        batch_rows: usize,
    ) -> Result<TableScan> {
        let (table_start, table_end) = prefix_bounds(&table_prefix(self.table_id));
        let start = match (start, &table_start) {
            (Bound::Unbounded, _) => table_start.clone(),
            (Bound::Included(k), Bound::Included(t)) | (Bound::Excluded(k), Bound::Included(t)) if k < *t => table_start.clone(),
            (b, _) => b,
        };
        let end = match (end, &table_end) {
            (Bound::Unbounded, _) => table_end.clone(),
            (Bound::Included(k), Bound::Excluded(t)) | (Bound::Excluded(k), Bound::Excluded(t)) if k >= *t => table_end.clone(),
            (b, _) => b,
        };
        let cursor = snapshot.scan_batches(start, end, batch_rows).await?;
        Ok(TableScan { cursor, codec: self.codec.clone() })
    }
}

/// A streaming scan of a [`StateTable`]: decoded batches of at most `SCAN_BATCH_ROWS` rows.
#[derive(Debug)]
pub struct TableScan {
    /// Merged entries of the scanned range.
    cursor: ScanCursor,
    /// Decoder of the table's values.
    codec: Arc<RowCodec>,
}

impl TableScan {
    /// The next batch of rows in key order, or `None` at the end (never an empty batch).
    pub async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        match self.cursor.next_batch().await? {
            Some(entries) => Ok(Some(self.codec.decode_values(entries.iter().map(|(_, v)| v.as_ref()))?)),
            None => Ok(None),
        }
    }

    /// The number of rows of the next batch, without decoding them (`count(*)`), or `None` at
    /// the end.
    pub async fn next_len(&mut self) -> Result<Option<usize>> {
        Ok(self.cursor.next_batch().await?.map(|entries| entries.len()))
    }

    /// Like [`TableScan::next_batch`], with the full key of the batch's last row (where a scan
    /// that stopped here resumes).
    pub async fn next_batch_with_last_key(&mut self) -> Result<Option<(RecordBatch, Vec<u8>)>> {
        let Some(entries) = self.cursor.next_batch().await? else { return Ok(None) };
        let last = entries.last().map(|(k, _)| k.to_vec()).unwrap_or_default();
        Ok(Some((self.codec.decode_values(entries.iter().map(|(_, v)| v.as_ref()))?, last)))
    }

    /// The scan as a stream of batches (for DataFusion's `RecordBatchStream`s).
    pub fn into_stream(self) -> impl Stream<Item = Result<RecordBatch>> + Send {
        futures::stream::try_unfold(self, |mut scan| async move { Ok(scan.next_batch().await?.map(|b| (b, scan))) })
    }
}
