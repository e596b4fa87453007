//! [`StateTable`]: the typed view of one table's (or one operator's) rows in the state store.
//!
//! Contract: every row lives under `table_id | vnode | pk` (see `eddy_common::codec`), its value
//! the whole row. Writes go into the [`EpochBatch`] of the epoch they belong to and become
//! visible to readers only when that epoch commits. Within a batch, the last write to a key
//! wins, so an insert of an existing key overwrites it (upsert).

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use eddy_common::codec::{table_prefix, RowCodec};
use eddy_common::{Op, Result, StreamChunk};

use crate::store::{EpochBatch, ReadSnapshot};

/// Rows per decoded batch when scanning.
const SCAN_BATCH_ROWS: usize = 8192;

/// One keyed table of rows in the state store.
#[derive(Debug)]
pub struct StateTable {
    /// Key-space id of this table.
    table_id: u32,
    /// Encoder for keys and values.
    codec: RowCodec,
}

impl StateTable {
    /// A state table with rows of `schema`, keyed by the columns at `pk_indices`.
    pub fn try_new(table_id: u32, schema: SchemaRef, pk_indices: Vec<usize>) -> Result<Self> {
        Ok(Self { table_id, codec: RowCodec::try_new(schema, pk_indices)? })
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

    /// Removes every row of the table.
    pub async fn clear(&self, snapshot: &ReadSnapshot, batch: &mut EpochBatch) -> Result<()> {
        for (k, _) in snapshot.scan_prefix(&table_prefix(self.table_id)).await? {
            batch.delete(k.to_vec());
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

    /// All rows at `snapshot`, as batches of at most `SCAN_BATCH_ROWS` rows.
    pub async fn scan(&self, snapshot: &ReadSnapshot) -> Result<Vec<RecordBatch>> {
        let entries = snapshot.scan_prefix(&table_prefix(self.table_id)).await?;
        entries
            .chunks(SCAN_BATCH_ROWS)
            .map(|chunk| self.codec.decode_values(chunk.iter().map(|(_, v)| v.as_ref())))
            .collect()
    }
}
