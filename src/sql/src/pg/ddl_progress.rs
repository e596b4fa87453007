//! `eddy_ddl_progress`: the backfill of every materialized view created since the server
//! started — running ones first, with rows read, rows to read (once counted), percent, rate
//! and an estimate of the time left. A view being created appears here before it is in the
//! catalog. Resolvable unqualified or as `pg_catalog.`, like [`super::view_status`].

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::catalog::Relations;

/// The relation's name.
pub const NAME: &str = "eddy_ddl_progress";

/// The provider of [`NAME`].
#[derive(Debug)]
pub struct DdlProgressTable {
    relations: Arc<dyn Relations>,
}

impl DdlProgressTable {
    pub fn new(relations: Arc<dyn Relations>) -> Arc<Self> {
        Arc::new(Self { relations })
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("view", DataType::Utf8, false),
        Field::new("state", DataType::Utf8, false),
        Field::new("rows_done", DataType::Int64, false),
        Field::new("rows_total", DataType::Int64, true),
        Field::new("percent", DataType::Float64, true),
        Field::new("rows_per_sec", DataType::Float64, false),
        Field::new("elapsed_secs", DataType::Float64, false),
        Field::new("eta_secs", DataType::Float64, true),
        Field::new("started_at", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), false),
    ]))
}

#[async_trait]
impl TableProvider for DdlProgressTable {
    fn schema(&self) -> SchemaRef {
        schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(&self, _state: &dyn Session, projection: Option<&Vec<usize>>, _filters: &[Expr], _limit: Option<usize>) -> DfResult<Arc<dyn ExecutionPlan>> {
        let mut reports: Vec<_> = self
            .relations
            .view_metrics()
            .into_iter()
            .map(|(name, m)| (name, m.backfill.report()))
            .filter(|(_, r)| r.started_ms > 0)
            .collect();
        reports.sort_by(|a, b| (a.1.state != "running", &a.0).cmp(&(b.1.state != "running", &b.0)));
        let col = |f: &dyn Fn(&eddy_stream::metrics::ProgressReport) -> Option<f64>| Float64Array::from(reports.iter().map(|(_, r)| f(r)).collect::<Vec<_>>());
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(reports.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>())),
            Arc::new(StringArray::from(reports.iter().map(|(_, r)| r.state).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(reports.iter().map(|(_, r)| r.rows_done as i64).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(reports.iter().map(|(_, r)| r.rows_total.map(|t| t as i64)).collect::<Vec<_>>())),
            Arc::new(col(&|r| r.percent)),
            Arc::new(col(&|r| Some(r.rows_per_sec))),
            Arc::new(col(&|r| Some(r.elapsed_secs))),
            Arc::new(col(&|r| r.eta_secs)),
            Arc::new(
                TimestampMicrosecondArray::from(reports.iter().map(|(_, r)| r.started_ms as i64 * 1000).collect::<Vec<_>>()).with_timezone("+00:00"),
            ),
        ];
        let batch = RecordBatch::try_new(schema(), columns)?;
        Ok(MemorySourceConfig::try_new_exec(&[vec![batch]], schema(), projection.cloned())?)
    }
}
