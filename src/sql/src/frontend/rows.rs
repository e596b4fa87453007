//! Helpers over batches of rows shared by the statements that write them.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use eddy_common::{internal_err, Result};

/// Re-labels batches with `schema` (same column types; planner output names/nullability may
/// differ from the table's).
pub(crate) fn rebind(schema: &Arc<Schema>, batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>> {
    batches
        .into_iter()
        .map(|b| {
            if b.num_columns() != schema.fields().len() {
                return Err(internal_err!("DML input has {} columns, table has {}", b.num_columns(), schema.fields().len()));
            }
            let cols = b
                .columns()
                .iter()
                .zip(schema.fields())
                .map(|(c, f)| {
                    if c.data_type() == f.data_type() {
                        Ok(c.clone())
                    } else {
                        Ok(arrow::compute::cast(c, f.data_type())?)
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(RecordBatch::try_new(schema.clone(), cols)?)
        })
        .collect()
}
