//! `eddy_state_tables`: the state of each materialized view — its own rows (`role = 'rows'`)
//! and each operator's state table (`role = 'operator'`, in plan order) — with the number of
//! entries and their bytes (keys and values) at the last committed epoch. Counting reads the
//! tables (streamed in batches, so memory stays bounded); it is meant for inspection, e.g. to
//! see a watermark drop the state of closed windows. Resolvable unqualified or as `pg_catalog.`.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::catalog::Relations;

/// The relation's name.
pub const NAME: &str = "eddy_state_tables";

/// The provider of [`NAME`].
#[derive(Debug)]
pub struct StateTablesTable {
    relations: Arc<dyn Relations>,
}

impl StateTablesTable {
    pub fn new(relations: Arc<dyn Relations>) -> Arc<Self> {
        Arc::new(Self { relations })
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("schema_name", DataType::Utf8, false),
        Field::new("view", DataType::Utf8, false),
        Field::new("state_table", DataType::Int64, false),
        Field::new("role", DataType::Utf8, false),
        Field::new("entries", DataType::Int64, false),
        Field::new("bytes", DataType::Int64, false),
    ]))
}

#[async_trait]
impl TableProvider for StateTablesTable {
    fn schema(&self) -> SchemaRef {
        schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(&self, _state: &dyn Session, projection: Option<&Vec<usize>>, _filters: &[Expr], _limit: Option<usize>) -> DfResult<Arc<dyn ExecutionPlan>> {
        let catalog = self.relations.catalog();
        let snapshot = self.relations.snapshot();
        let ext = |e: eddy_common::EddyError| DataFusionError::External(Box::new(e));
        let mut views: Vec<_> = catalog.tables().filter(|t| t.is_view()).cloned().collect();
        views.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        let (mut schemas, mut names, mut ids, mut roles, mut entries, mut bytes) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        for v in views {
            let tables = std::iter::once((v.id, "rows")).chain(v.internal_tables.iter().map(|t| (*t, "operator")));
            for (t, role) in tables {
                let prefix = eddy_common::codec::table_prefix(t);
                let (start, end) = eddy_storage::scan::prefix_bounds(&prefix);
                let mut cursor = snapshot.scan_batches(start, end, 4096).await.map_err(ext)?;
                let (mut n, mut b) = (0i64, 0i64);
                while let Some(batch) = cursor.next_batch().await.map_err(ext)? {
                    n += batch.len() as i64;
                    b += batch.iter().map(|(k, v)| (k.len() + v.len()) as i64).sum::<i64>();
                }
                schemas.push(v.schema.clone());
                names.push(v.name.clone());
                ids.push(i64::from(t));
                roles.push(role.to_string());
                entries.push(n);
                bytes.push(b);
            }
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(schemas)),
            Arc::new(StringArray::from(names)),
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(roles)),
            Arc::new(Int64Array::from(entries)),
            Arc::new(Int64Array::from(bytes)),
        ];
        let batch = RecordBatch::try_new(schema(), columns)?;
        Ok(MemorySourceConfig::try_new_exec(&[vec![batch]], schema(), projection.cloned())?)
    }
}
