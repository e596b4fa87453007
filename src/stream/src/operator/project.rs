//! `Project`: evaluates expressions over each chunk; ops pass through unchanged.

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::physical_expr::PhysicalExpr;
use eddy_common::{Epoch, Result, StreamChunk};
use eddy_storage::EpochBatch;

use super::Operator;

/// Computes output columns from input columns.
pub struct Project {
    /// One expression per output column, over the input schema.
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// Output schema.
    schema: SchemaRef,
}

impl Project {
    /// A projection producing `schema` from `exprs`.
    pub fn try_new(exprs: Vec<Arc<dyn PhysicalExpr>>, schema: SchemaRef) -> Result<Self> {
        if exprs.len() != schema.fields().len() {
            return Err(eddy_common::internal_err!("project has {} exprs for {} columns", exprs.len(), schema.fields().len()));
        }
        Ok(Self { exprs, schema })
    }
}

impl fmt::Display for Project {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let exprs: Vec<String> = self.exprs.iter().map(|e| e.to_string()).collect();
        write!(f, "Project [{}]", exprs.join(", "))
    }
}

#[async_trait]
impl Operator for Project {
    fn process(&mut self, chunk: StreamChunk) -> Result<Vec<StreamChunk>> {
        let n = chunk.batch.num_rows();
        let columns = self
            .exprs
            .iter()
            .zip(self.schema.fields())
            .map(|(e, f)| {
                let arr = e.evaluate(&chunk.batch)?.into_array(n)?;
                if arr.data_type() == f.data_type() {
                    Ok(arr)
                } else {
                    Ok(arrow::compute::cast(&arr, f.data_type())?)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let batch = RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        Ok(vec![StreamChunk::try_new(batch, chunk.ops)?])
    }

    async fn on_barrier(&mut self, _epoch: Epoch, _batch: &mut EpochBatch) -> Result<Vec<StreamChunk>> {
        Ok(vec![])
    }
}
