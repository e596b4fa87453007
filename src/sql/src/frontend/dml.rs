//! INSERT, UPDATE and DELETE. DataFusion plans them (casts, defaults, placeholders, joins in
//! `UPDATE ... FROM`); Eddy executes the plan's input over the statement's snapshot, turns the
//! result into a [`StreamChunk`] of changes for the table and commits it through the barrier
//! manager. The statement returns only when its epoch is durable.
//!
//! Semantics worth knowing: statements run in autocommit mode; an INSERT of an existing primary
//! key overwrites that row (upsert); concurrent UPDATEs of the same row are last-writer-wins.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Schema};
use datafusion::datasource::source_as_provider;
use datafusion::execution::SessionState;
use datafusion::logical_expr::{col, DmlStatement, Expr, LogicalPlan, Projection, WriteOp};
use datafusion::physical_plan::collect;
use eddy_common::error::sqlstate;
use eddy_common::{internal_err, user_err, ColumnType, Op, Result, StreamChunk};

use crate::catalog::TableCatalog;
use crate::planner::provider::EddyTable;
use crate::frontend::rows::rebind;
use crate::frontend::session::Session;

/// Prefix of the extra columns carrying a row's old key through an UPDATE.
const OLD_KEY_PREFIX: &str = "__eddy_old_";

async fn run(state: &SessionState, plan: &LogicalPlan) -> Result<Vec<RecordBatch>> {
    let physical = state.create_physical_plan(plan).await?;
    Ok(collect(physical, state.task_ctx()).await?)
}

fn concat(schema: &Arc<Schema>, batches: &[RecordBatch]) -> Result<RecordBatch> {
    Ok(concat_batches(schema, batches)?)
}

impl Session {
    /// Executes a planned DML statement; returns the affected row count, and with
    /// `want_rows` the affected rows' user columns (new versions for INSERT/UPDATE, old for
    /// DELETE) for `RETURNING`.
    pub(crate) async fn execute_dml(
        &mut self,
        state: &SessionState,
        dml: DmlStatement,
        want_rows: bool,
        conflict: Option<&crate::frontend::on_conflict::Conflict>,
    ) -> Result<(usize, Option<(Arc<TableCatalog>, RecordBatch)>)> {
        let provider = source_as_provider(&dml.target)?;
        let table = provider
            .downcast_ref::<EddyTable>()
            .ok_or_else(|| user_err!(sqlstate::WRONG_OBJECT_TYPE, "cannot modify \"{}\": it is not a table", dml.table_name))?;
        let catalog = table.catalog.clone();
        if catalog.kind != crate::catalog::RelationKind::Table {
            return Err(user_err!(sqlstate::WRONG_OBJECT_TYPE, "cannot change {} \"{}\"", catalog.kind_name(), catalog.name));
        }
        let mut changes: Vec<StreamChunk> = Vec::new();
        let mut affected: Vec<RecordBatch> = Vec::new();
        let count = match &dml.op {
            WriteOp::Insert(_) => {
                let rows = run(state, &dml.input).await?;
                let schema = catalog.planning_schema(false);
                let rows = concat(&schema, &rebind(&schema, rows)?)?;
                let rows = self.prepare_insert(&catalog, rows)?;
                let rows = match conflict {
                    Some(c) => self.resolve_conflicts(&catalog, rows, c).await?,
                    None => rows,
                };
                let n = rows.num_rows();
                if want_rows {
                    affected.push(rows.clone());
                }
                changes.push(StreamChunk::inserts(rows));
                n
            }
            WriteOp::Delete => {
                let rows = run(state, &dml.input).await?;
                let schema = catalog.planning_schema(true);
                let rows = concat(&schema, &rebind(&schema, rows)?)?;
                let n = rows.num_rows();
                if want_rows {
                    affected.push(rows.clone());
                }
                changes.push(StreamChunk::deletes(rows));
                n
            }
            WriteOp::Update => {
                let input = with_old_keys(&dml.input, &catalog)?;
                let out = run(state, &input).await?;
                let schema = catalog.planning_schema(true);
                let width = schema.fields().len();
                let mut n = 0;
                for b in out {
                    n += b.num_rows();
                    let new_rows = RecordBatch::try_new(schema.clone(), b.columns()[..width].to_vec())?;
                    let new_rows = self.validate_rows(&catalog, new_rows)?;
                    // Rows keyed by their old key, to delete before writing the new versions.
                    let mut old_cols: Vec<ArrayRef> = new_rows.columns().to_vec();
                    for (i, &k) in catalog.storage_pk().iter().enumerate() {
                        old_cols[k] = b.column(width + i).clone();
                    }
                    let old_rows = RecordBatch::try_new(schema.clone(), old_cols)?;
                    let ops = vec![Op::Delete; old_rows.num_rows()];
                    changes.push(StreamChunk::try_new(old_rows, ops)?);
                    if want_rows {
                        affected.push(new_rows.clone());
                    }
                    changes.push(StreamChunk::inserts(new_rows));
                }
                n
            }
            other => return Err(eddy_common::not_supported!("{other} is not supported")),
        };
        let changes: Vec<StreamChunk> = changes.into_iter().filter(|c| !c.is_empty()).collect();
        if !changes.is_empty() {
            let batch = concat(&catalog.planning_schema(true), &changes.iter().map(|c| c.batch.clone()).collect::<Vec<_>>())?;
            let ops = changes.into_iter().flat_map(|c| c.ops).collect();
            self.engine.write_table(catalog.id, StreamChunk::try_new(batch, ops)?).await?;
        }
        if !want_rows {
            return Ok((count, None));
        }
        // The user-visible columns, whatever hidden ones the rows carried.
        let visible = catalog.planning_schema(false);
        let width = visible.fields().len();
        let projected = affected
            .iter()
            .map(|b| Ok(RecordBatch::try_new(visible.clone(), b.columns()[..width].to_vec())?))
            .collect::<Result<Vec<_>>>()?;
        let rows = concat(&visible, &projected)?;
        Ok((count, Some((catalog, rows))))
    }

    /// Checks user rows and adds the hidden row id: the rows to store for an INSERT.
    pub(crate) fn prepare_insert(&self, catalog: &TableCatalog, rows: RecordBatch) -> Result<RecordBatch> {
        let rows = self.validate_rows(catalog, rows)?;
        // Explicit values in a serial column move its counter past them.
        for (i, c) in catalog.columns.iter().enumerate() {
            if c.default.as_deref().is_some_and(crate::catalog::sequence::is_serial_default) {
                if let Some(m) = crate::catalog::sequence::column_max(rows.column(i).as_ref()) {
                    self.engine.sequences.advance_past(catalog.id, i, m);
                }
            }
        }
        if !catalog.has_row_id() {
            return Ok(rows);
        }
        let ids = self.engine.allocate_row_ids(rows.num_rows());
        let mut cols = rows.columns().to_vec();
        cols.push(Arc::new(Int64Array::from_iter_values(ids)));
        Ok(RecordBatch::try_new(catalog.storage_schema(), cols)?)
    }

    /// Enforces NOT NULL and `varchar(n)`, and normalizes `jsonb` text.
    pub(crate) fn validate_rows(&self, catalog: &TableCatalog, rows: RecordBatch) -> Result<RecordBatch> {
        let mut cols = rows.columns().to_vec();
        for (i, c) in catalog.columns.iter().enumerate() {
            let arr = &cols[i];
            if c.not_null && arr.null_count() > 0 {
                return Err(user_err!(
                    sqlstate::NOT_NULL_VIOLATION,
                    "null value in column \"{}\" of relation \"{}\" violates not-null constraint",
                    c.name,
                    catalog.name
                ));
            }
            match &c.ty {
                ColumnType::Varchar(Some(n)) => {
                    let s = arr.as_string::<i32>();
                    if s.iter().flatten().any(|v| v.chars().count() > *n as usize) {
                        return Err(user_err!(
                            sqlstate::STRING_DATA_RIGHT_TRUNCATION,
                            "value too long for type character varying({n})"
                        ));
                    }
                }
                ColumnType::Jsonb => {
                    let s = arr.as_string::<i32>();
                    let normalized: StringArray = s
                        .iter()
                        .map(|v| v.map(crate::planner::jsonb::normalize).transpose())
                        .collect::<Result<_>>()?;
                    cols[i] = Arc::new(normalized);
                }
                _ => {}
            }
        }
        Ok(RecordBatch::try_new(rows.schema(), cols)?)
    }
}

/// Extends an UPDATE's projection with the old values of the key columns.
fn with_old_keys(input: &LogicalPlan, catalog: &TableCatalog) -> Result<LogicalPlan> {
    let LogicalPlan::Projection(p) = input else {
        return Err(internal_err!("unexpected UPDATE plan shape: {}", input.display()));
    };
    let storage = catalog.storage_schema();
    let mut exprs = p.expr.clone();
    for (i, &k) in catalog.storage_pk().iter().enumerate() {
        let name = storage.field(k).name();
        let source_schema = p.input.schema();
        let (qualifier, _) = source_schema
            .qualified_field_with_unqualified_name(name)
            .map(|(q, f)| (q, f.as_ref()))
            .or_else(|_| {
                source_schema
                    .iter()
                    .find(|(q, f)| f.name() == name && q.map(|q| q.table() == catalog.name).unwrap_or(false))
                    .map(|(q, f)| (q, f.as_ref()))
                    .map(|(q, f)| (q, f))
                    .ok_or_else(|| internal_err!("UPDATE source lacks key column {name}"))
            })?;
        let column = match qualifier {
            Some(q) => Expr::Column(datafusion::common::Column::new(Some(q.clone()), name)),
            None => col(name),
        };
        exprs.push(column.alias(format!("{OLD_KEY_PREFIX}{i}")));
    }
    let _ = DataType::Null;
    Ok(LogicalPlan::Projection(Projection::try_new(exprs, p.input.clone())?))
}
