//! `eddy_watermarks`: every event-time watermark (`WATERMARK FOR`) and the rows it dropped as
//! late — one row per table with a watermark, and one per view reading a source with one (each
//! view reads a source through its own reader, with its own watermark). Resolvable unqualified
//! or as `pg_catalog.`, like [`super::view_status`].

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::catalog::{Relations, TableCatalog};

/// The relation's name.
pub const NAME: &str = "eddy_watermarks";

/// The provider of [`NAME`].
#[derive(Debug)]
pub struct WatermarksTable {
    relations: Arc<dyn Relations>,
}

impl WatermarksTable {
    pub fn new(relations: Arc<dyn Relations>) -> Arc<Self> {
        Arc::new(Self { relations })
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("schema_name", DataType::Utf8, false),
        Field::new("relation", DataType::Utf8, false),
        Field::new("view", DataType::Utf8, true),
        Field::new("column_name", DataType::Utf8, false),
        Field::new("watermark", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("late_rows", DataType::Int64, false),
    ]))
}

/// (largest event time, late rows) from a generator's committed state
/// (`eddy_stream::WatermarkGen::encode_state`).
fn decode(state: &[u8]) -> Option<(Option<i64>, i64)> {
    let max = i64::from_be_bytes(state.get(1..9)?.try_into().ok()?);
    let late = u64::from_be_bytes(state.get(9..17)?.try_into().ok()?);
    Some(((state.first() == Some(&1)).then_some(max), late as i64))
}

#[derive(Default)]
struct Rows {
    schemas: Vec<String>,
    relations: Vec<String>,
    views: Vec<Option<String>>,
    columns: Vec<String>,
    watermarks: Vec<Option<i64>>,
    late: Vec<i64>,
}

impl Rows {
    fn push(&mut self, rel: &TableCatalog, view: Option<&TableCatalog>, state: Option<&[u8]>) {
        let Some(def) = &rel.watermark else { return };
        let (max, late) = state.and_then(decode).unwrap_or((None, 0));
        self.schemas.push(rel.schema.clone());
        self.relations.push(rel.name.clone());
        self.views.push(view.map(|v| v.name.clone()));
        self.columns.push(def.column.clone());
        self.watermarks.push(max.map(|m| m.saturating_sub(def.delay_us)));
        self.late.push(late);
    }
}

#[async_trait]
impl TableProvider for WatermarksTable {
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
        let mut rels: Vec<&TableCatalog> = catalog.tables().map(|t| t.as_ref()).collect();
        rels.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        let readers = self.relations.source_readers();
        let mut rows = Rows::default();
        for rel in &rels {
            if rel.watermark.is_some() && rel.kind == crate::catalog::RelationKind::Table {
                let state = snapshot.get(&eddy_common::codec::watermark_key(rel.id)).await.map_err(ext)?;
                rows.push(rel, None, state.as_deref());
            }
            if !rel.is_view() {
                continue;
            }
            // Each reader of a source with a watermark that feeds this view.
            let mut readers: Vec<(u32, String)> = readers.iter().filter(|(_, v, _)| *v == rel.id).map(|(r, _, s)| (*r, s.clone())).collect();
            readers.sort();
            for (reader, source) in readers {
                let Some(src) = rels.iter().find(|s| s.kind == crate::catalog::RelationKind::Source && s.name == source) else { continue };
                let state = snapshot.get(&eddy_stream::source::watermark_state_key(reader)).await.map_err(ext)?;
                rows.push(src, Some(rel), state.as_deref());
            }
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(rows.schemas)),
            Arc::new(StringArray::from(rows.relations)),
            Arc::new(StringArray::from(rows.views)),
            Arc::new(StringArray::from(rows.columns)),
            Arc::new(TimestampMicrosecondArray::from(rows.watermarks)),
            Arc::new(Int64Array::from(rows.late)),
        ];
        let batch = RecordBatch::try_new(schema(), columns)?;
        Ok(MemorySourceConfig::try_new_exec(&[vec![batch]], schema(), projection.cloned())?)
    }
}
