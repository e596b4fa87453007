//! `Materialize`: writes a view's changes into its state table (keyed by the view's stream
//! key) and passes them on to views defined on this one.

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use async_trait::async_trait;
use eddy_common::{Epoch, Result, StreamChunk};
use eddy_storage::{EpochBatch, StateStore, StateTable};

use super::eval::RowErrors;
use super::Operator;

/// The last operator of every view.
pub struct Materialize {
    /// Where the view's rows live.
    table: Arc<StateTable>,
    /// Changes of the current epoch, not yet handed to a barrier (spilled to runs when the
    /// store's write budget says so, so an epoch of any size stays within bounded memory).
    pending: EpochBatch,
}

impl Materialize {
    /// A materializer into `table`.
    pub fn new(table: Arc<StateTable>) -> Self {
        Self { table, pending: EpochBatch::default() }
    }
}

impl fmt::Display for Materialize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Materialize table={} key={:?}", self.table.table_id(), self.table.pk_indices())
    }
}

#[async_trait]
impl Operator for Materialize {
    /// Stateless, keyed by its input's key: runs wherever its input is.
    fn distribution(&self) -> super::Distribution {
        super::Distribution::Any
    }

    /// The view's change stream is its input's, in the stored types.
    fn on_watermarks(&mut self, input: &[crate::watermark::Watermark]) -> Result<Vec<crate::watermark::Watermark>> {
        let schema = self.table.schema().clone();
        let mut out = Vec::with_capacity(input.len());
        for w in input {
            let Some(f) = schema.fields().get(w.col) else { continue };
            let value = if w.value.data_type() == *f.data_type() { w.value.clone() } else { w.value.cast_to(f.data_type())? };
            out.push(crate::watermark::Watermark { col: w.col, value });
        }
        Ok(out)
    }

    async fn prefetch(&mut self, _chunk: &StreamChunk, store: &StateStore) -> Result<()> {
        store.spill_if_needed(&mut self.pending).await
    }

    fn process(&mut self, chunk: StreamChunk, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        // Cast to the stored types (e.g. an aggregate computed wider than the view's column).
        let schema = self.table.schema().clone();
        let cols = chunk
            .batch
            .columns()
            .iter()
            .zip(schema.fields())
            .map(|(c, f)| if c.data_type() == f.data_type() { Ok(c.clone()) } else { arrow::compute::cast(c, f.data_type()) })
            .collect::<Result<Vec<_>, _>>()?;
        let chunk = StreamChunk::try_new(RecordBatch::try_new(schema, cols)?, chunk.ops)?;
        self.table.write_chunk(&chunk, &mut self.pending)?;
        Ok(vec![chunk])
    }

    async fn on_barrier(&mut self, _epoch: Epoch, batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        batch.extend(std::mem::take(&mut self.pending));
        Ok(vec![])
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field, Schema};
    use eddy_storage::{StateStore, StoreOptions};

    use super::*;

    #[tokio::test]
    async fn rows_are_written_at_the_barrier_keyed_by_the_stream_key() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true), Field::new("v", DataType::Utf8, true)]));
        let table = Arc::new(StateTable::try_new(42, schema, vec![0]).unwrap());
        let mut m = Materialize::new(table.clone());
        m.process(StreamChunk::from_pretty(" I T\n + 1 a\n + 2 b\n - 1 a\n U- 2 b\n U+ 2 c").unwrap(), &mut RowErrors::default()).unwrap();
        let store = StateStore::open(&StoreOptions::default()).await.unwrap();
        let mut batch = EpochBatch::default();
        m.on_barrier(Epoch(1), &mut batch, &mut RowErrors::default()).await.unwrap();
        store.commit(Epoch(1), batch).await.unwrap();
        let rows = table.scan(&store.snapshot()).await.unwrap();
        assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
        assert_eq!(arrow::util::display::array_value_to_string(rows[0].column(1), 0).unwrap(), "c");
    }
}
