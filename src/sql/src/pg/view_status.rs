//! `eddy_materialized_views`: each materialized view's status — `running`, or `failed` with the
//! internal fault that stopped it — and its count of input rows that fail to evaluate (errors
//! kept as data) with the first such error. Resolvable unqualified or as `pg_catalog.` (like
//! RisingWave's `rw_catalog` relations, it is not listed in `pg_class`).

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::catalog::Relations;

/// The relation's name.
pub const NAME: &str = "eddy_materialized_views";

/// The provider of [`NAME`].
#[derive(Debug)]
pub struct ViewStatusTable {
    relations: Arc<dyn Relations>,
}

impl ViewStatusTable {
    pub fn new(relations: Arc<dyn Relations>) -> Arc<Self> {
        Arc::new(Self { relations })
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("schema_name", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("failure", DataType::Utf8, true),
        Field::new("error_rows", DataType::Int64, false),
        Field::new("first_error", DataType::Utf8, true),
    ]))
}

#[async_trait]
impl TableProvider for ViewStatusTable {
    fn schema(&self) -> SchemaRef {
        schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(&self, _state: &dyn Session, projection: Option<&Vec<usize>>, _filters: &[Expr], _limit: Option<usize>) -> DfResult<Arc<dyn ExecutionPlan>> {
        let catalog = self.relations.catalog();
        let snapshot = self.relations.snapshot();
        let mut views: Vec<_> = catalog.tables().filter(|t| t.is_view()).cloned().collect();
        views.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        let (mut schemas, mut names, mut statuses, mut failures, mut counts, mut firsts) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        for v in views {
            let failure = self.relations.view_failure(&v).map(|e| e.message);
            let sums = crate::planner::provider::view_error_counts(&v, &snapshot).await.map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            let (mut rows, mut first) = (0i64, None);
            for ((state, message), n) in sums.into_iter().filter(|(_, n)| *n > 0) {
                rows += n;
                first.get_or_insert(format!("{state}: {message}"));
            }
            schemas.push(v.schema.clone());
            names.push(v.name.clone());
            statuses.push(if failure.is_some() { "failed" } else { "running" }.to_string());
            failures.push(failure);
            counts.push(rows);
            firsts.push(first);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(schemas)),
            Arc::new(StringArray::from(names)),
            Arc::new(StringArray::from(statuses)),
            Arc::new(StringArray::from(failures)),
            Arc::new(Int64Array::from(counts)),
            Arc::new(StringArray::from(firsts)),
        ];
        let batch = RecordBatch::try_new(schema(), columns)?;
        Ok(MemorySourceConfig::try_new_exec(&[vec![batch]], schema(), projection.cloned())?)
    }
}
