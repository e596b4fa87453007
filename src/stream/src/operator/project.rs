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
    /// Output columns monotone (non-decreasing) in one input column: `(output, input)`. A
    /// watermark on the input column becomes one on the output column, the expression's value
    /// at it.
    watermark_map: Vec<(usize, usize)>,
    /// Input schema (for evaluating an expression at a watermark).
    input_schema: Option<SchemaRef>,
}

impl Project {
    /// A projection producing `schema` from `exprs`.
    pub fn try_new(exprs: Vec<Arc<dyn PhysicalExpr>>, schema: SchemaRef) -> Result<Self> {
        if exprs.len() != schema.fields().len() {
            return Err(eddy_common::internal_err!("project has {} exprs for {} columns", exprs.len(), schema.fields().len()));
        }
        Ok(Self { exprs, schema, watermark_map: vec![], input_schema: None })
    }

    /// Carries watermarks of input columns to the output columns `map` names (`(output,
    /// input)`; the planner checked that each such expression is monotone in its input column).
    pub fn with_watermarks(mut self, map: Vec<(usize, usize)>, input_schema: SchemaRef) -> Self {
        self.watermark_map = map;
        self.input_schema = Some(input_schema);
        self
    }

    /// The value of output column `out` for an input row whose column `col` is `value` (every
    /// other column NULL: the expression depends on `col` only).
    fn value_at(&self, out: usize, col: usize, value: &datafusion::scalar::ScalarValue) -> Result<datafusion::scalar::ScalarValue> {
        let input = self.input_schema.as_ref().ok_or_else(|| eddy_common::internal_err!("project without an input schema"))?;
        let fields: Vec<arrow::datatypes::Field> =
            input.fields().iter().map(|f| arrow::datatypes::Field::new(f.name(), f.data_type().clone(), true)).collect();
        let columns = input
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                if i != col {
                    return Ok(arrow::array::new_null_array(f.data_type(), 1));
                }
                let v = value.to_array_of_size(1)?;
                Ok(if v.data_type() == f.data_type() { v } else { arrow::compute::cast(&v, f.data_type())? })
            })
            .collect::<Result<Vec<_>>>()?;
        let batch = RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)?;
        let v = self.exprs[out].evaluate(&batch)?.into_array(1)?;
        let v = if v.data_type() == self.schema.field(out).data_type() { v } else { arrow::compute::cast(&v, self.schema.field(out).data_type())? };
        Ok(datafusion::scalar::ScalarValue::try_from_array(&v, 0)?)
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
    /// Stateless, keyed by its input's key: runs wherever its input is.
    fn distribution(&self) -> super::Distribution {
        super::Distribution::Any
    }

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

    fn on_watermarks(&mut self, input: &[crate::watermark::Watermark]) -> Result<Vec<crate::watermark::Watermark>> {
        let mut out = Vec::new();
        for &(o, i) in &self.watermark_map {
            if let Some(w) = input.iter().find(|w| w.col == i) {
                let value = self.value_at(o, i, &w.value)?;
                if !value.is_null() {
                    out.push(crate::watermark::Watermark { col: o, value });
                }
            }
        }
        Ok(out)
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
