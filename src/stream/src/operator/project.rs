//! `Project`: evaluates expressions over each chunk; ops pass through unchanged.

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::physical_expr::PhysicalExpr;
use eddy_common::{Epoch, Result, StreamChunk};
use eddy_storage::EpochBatch;

use super::eval::{evaluate, RowErrors};
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
    fn process(&mut self, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        let (chunk, values) = evaluate(&self.exprs, chunk, errors)?;
        let n = chunk.len();
        let columns = values
            .into_iter()
            .zip(self.schema.fields())
            .map(|(arr, f)| if arr.data_type() == f.data_type() { Ok(arr) } else { Ok(arrow::compute::cast(&arr, f.data_type())?) })
            .collect::<Result<Vec<_>>>()?;
        let batch = RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        Ok(vec![StreamChunk::try_new(batch, chunk.ops)?])
    }

    async fn on_barrier(&mut self, _epoch: Epoch, _batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        Ok(vec![])
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use datafusion::logical_expr::Operator as BinOp;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column};

    use super::*;
    use eddy_common::Op;

    #[test]
    fn expressions_are_evaluated_per_chunk_and_ops_pass_through() {
        let sum = Arc::new(BinaryExpr::new(Arc::new(Column::new("c0", 0)), BinOp::Plus, Arc::new(Column::new("c1", 1))));
        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Int64, true)]));
        let mut p = Project::try_new(vec![sum], schema).unwrap();
        let out = p.process(StreamChunk::from_pretty(" I I\n + 1 2\n - 3 4").unwrap(), &mut RowErrors::default()).unwrap();
        assert_eq!(out[0].ops, vec![Op::Insert, Op::Delete]);
        assert_eq!(out[0].batch.column(0).as_primitive::<Int64Type>(), &Int64Array::from(vec![3, 7]));
    }
}
