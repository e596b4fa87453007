//! Constant inputs of a view: `VALUES (...)`, and a query without FROM (`SELECT 1`, a CTE of
//! constants joined with a table), as PostgreSQL accepts them in a materialized view.
//!
//! A constant input is read like a source that no catalog lists: the view's own reader emits
//! its rows once, keyed by hidden row ids, and commits how many it emitted with the epoch, so a
//! restarted view emits none again (its rows are in the view's state already). The rows are
//! evaluated at planning, from the optimized plan's literals; re-planning at recovery gives the
//! same rows.

use std::sync::Arc;

use arrow::array::{new_empty_array, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Field, Schema};
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_expr::expressions::Column as PhysicalColumn;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::scalar::ScalarValue;
use eddy_common::{not_supported, ColumnType, Result};
use eddy_stream::operator::{Project, Side};

use super::{BranchPlan, Built, PlanCtx, TableIds, OPEN};
use crate::catalog::{ColumnCatalog, RelationKind, TableCatalog};

/// The rows of a `Values` or `EmptyRelation` node.
fn rows_of(plan: &LogicalPlan) -> Result<RecordBatch> {
    let schema = Arc::new(plan.schema().as_arrow().clone());
    match plan {
        LogicalPlan::Values(v) => {
            let mut columns = Vec::with_capacity(schema.fields().len());
            for (c, field) in schema.fields().iter().enumerate() {
                let values = v
                    .values
                    .iter()
                    .map(|row| match row.get(c) {
                        Some(Expr::Literal(value, _)) => Ok(value.clone()),
                        Some(other) => Err(not_supported!("VALUES whose value {other} is not a constant, in a materialized view")),
                        None => Err(eddy_common::internal_err!("a VALUES row without column {c}")),
                    })
                    .collect::<Result<Vec<_>>>()?;
                let column = match values.is_empty() {
                    true => new_empty_array(field.data_type()),
                    false => arrow::compute::cast(&ScalarValue::iter_to_array(values)?, field.data_type())?,
                };
                columns.push(column);
            }
            Ok(RecordBatch::try_new_with_options(schema, columns, &RecordBatchOptions::new().with_row_count(Some(v.values.len())))?)
        }
        LogicalPlan::EmptyRelation(e) => {
            let rows = usize::from(e.produce_one_row);
            if rows > 0 && !schema.fields().is_empty() {
                return Err(eddy_common::internal_err!("a one-row empty relation with columns"));
            }
            let columns = schema.fields().iter().map(|f| new_empty_array(f.data_type())).collect();
            Ok(RecordBatch::try_new_with_options(schema, columns, &RecordBatchOptions::new().with_row_count(Some(rows)))?)
        }
        other => Err(eddy_common::internal_err!("not a constant relation: {}", other.display())),
    }
}

/// Plans the constant input `plan` (a `Values` or `EmptyRelation` node).
pub(super) fn plan_constant(plan: &LogicalPlan, ids: &mut TableIds<'_>, internal: &mut PlanCtx) -> Result<Built> {
    let rows = rows_of(plan)?;
    // The reader's id keys its committed position; the rows' relation needs an id of its own,
    // whose key space stays empty (a backfill scans it and finds nothing).
    let reader = ids.next()?;
    internal.push(reader);
    let relation = ids.next()?;
    internal.push(relation);
    let columns = rows
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let ty = ColumnType::from_arrow_field(f).ok_or_else(|| not_supported!("a constant of type {} in a materialized view", f.data_type()))?;
            Ok(ColumnCatalog { name: f.name().clone(), ty, not_null: false, default: None, hidden: false })
        })
        .collect::<Result<Vec<_>>>()?;
    // Columns of NULLs only (`VALUES (1, NULL)`) are stored as the catalog's type for them.
    let fields: Vec<Field> = columns.iter().map(|c| c.ty.to_field(&c.name, true)).collect();
    let arrays = rows.columns().iter().zip(&fields).map(|(a, f)| Ok(arrow::compute::cast(a, f.data_type())?)).collect::<Result<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(rows.num_rows()));
    let rows = RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)?;
    let rel = Arc::new(TableCatalog { append_only: true, ..TableCatalog::unlisted(relation, "(constant rows)", RelationKind::Source, columns) });
    // The rows and their hidden row id, the input's key (as a scan of a source reads them).
    let storage = rel.storage_schema();
    let width = storage.fields().len();
    let exprs: Vec<Arc<dyn PhysicalExpr>> =
        (0..width).map(|c| Arc::new(PhysicalColumn::new(storage.field(c).name(), c)) as Arc<dyn PhysicalExpr>).collect();
    let fields: Vec<Field> = (0..width)
        .map(|c| {
            let f = storage.field(c);
            let name = if c + 1 < width { f.name().clone() } else { format!("_key{c}") };
            Field::new(name, f.data_type().clone(), true).with_metadata(f.metadata().clone())
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let project = Project::try_new(exprs, schema.clone())?;
    let branch = BranchPlan { operators: vec![Box::new(project)], upstream: rel, parent: (OPEN, Side::Left), reader: Some(reader), constant: Some(rows) };
    Ok(Built { branches: vec![branch], stages: vec![], join: None, ops: vec![], schema, key: vec![width - 1], watermarks: vec![], append_only: true })
}
