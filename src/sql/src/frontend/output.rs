//! What a statement produces ([`Output`]) and what Describe reports ([`Described`]), with
//! helpers for small text results.

use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use eddy_common::Result;

use crate::frontend::copy_in::CopyIn;

/// What a statement produced.
pub enum Output {
    /// Rows to stream to the client.
    Rows { schema: SchemaRef, stream: SendableRecordBatchStream },
    /// Rows of a DML statement's RETURNING list; `tag` is the command tag before the row
    /// count (`INSERT 0`, `UPDATE`, `DELETE`).
    Returned { tag: String, schema: SchemaRef, stream: SendableRecordBatchStream },
    /// A command tag such as `CREATE TABLE` or `INSERT` (with a row count).
    Command { tag: String, rows: Option<usize> },
    /// `BEGIN`: the connection is now in a transaction block.
    TransactionStart(String),
    /// `COMMIT`/`ROLLBACK`: the transaction block ended.
    TransactionEnd(String),
    /// COPY FROM STDIN is ready for data.
    CopyIn(CopyIn),
    /// COPY TO STDOUT: rows to write in `format` as they are produced.
    CopyOut { schema: SchemaRef, stream: SendableRecordBatchStream, format: crate::frontend::copy_in::CopyOptions },
}

/// Parameter types and result schema of a prepared statement.
#[derive(Debug, Clone)]
pub struct Described {
    /// Types of `$1..$n` (`None`: unknown, sent as text).
    pub params: Vec<Option<DataType>>,
    /// PostgreSQL type OIDs of parameters the statement casts explicitly (`$1::oid[]`), which
    /// PostgreSQL reports as the parameter's type.
    pub declared: Vec<Option<u32>>,
    /// Result columns; `None` for statements that return no rows.
    pub schema: Option<SchemaRef>,
}

pub(crate) fn text_rows(columns: &[&str], rows: Vec<Vec<String>>) -> Result<Output> {
    let schema = Arc::new(Schema::new(columns.iter().map(|c| Field::new(*c, DataType::Utf8, true)).collect::<Vec<_>>()));
    let arrays = (0..columns.len())
        .map(|i| Arc::new(rows.iter().map(|r| Some(r[i].clone())).collect::<StringArray>()) as _)
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    let stream = RecordBatchStreamAdapter::new(schema.clone(), futures::stream::iter(vec![Ok(batch)]));
    Ok(Output::Rows { schema, stream: Box::pin(stream) })
}

pub(crate) fn text_schema(columns: &[&str]) -> SchemaRef {
    Arc::new(Schema::new(columns.iter().map(|c| Field::new(*c, DataType::Utf8, true)).collect::<Vec<_>>()))
}

pub(crate) fn command(tag: &str) -> Output {
    Output::Command { tag: tag.to_string(), rows: None }
}
