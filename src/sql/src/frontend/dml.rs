//! INSERT, UPDATE and DELETE. DataFusion plans them (casts, defaults, placeholders, joins in
//! `UPDATE ... FROM`); Eddy executes the plan's input over the statement's snapshot, turns the
//! result into a [`StreamChunk`] of changes for the table and commits it through the barrier
//! manager. The statement returns only when its epoch is durable.
//!
//! Semantics worth knowing: the table's writer decides key conflicts against its current rows
//! (an INSERT of an existing primary key is 23505 unless the table or the statement says
//! otherwise); a statement applies all of its rows or none; an UPDATE or DELETE of a row another
//! statement removed meanwhile skips it, and concurrent UPDATEs of one row are last-writer-wins.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::Schema;
use datafusion::datasource::source_as_provider;
use datafusion::execution::SessionState;
use datafusion::logical_expr::{col, DmlStatement, Expr, LogicalPlan, Projection, WriteOp};
use datafusion::physical_plan::collect;
use eddy_common::error::sqlstate;
use eddy_common::{internal_err, user_err, ColumnType, Op, Result, StreamChunk};

use eddy_stream::{OnConflict, TableWrite};

use crate::catalog::{ConflictPolicy, TableCatalog};
use crate::planner::provider::EddyTable;
use crate::frontend::rows::rebind;
use crate::frontend::session::Session;

/// Prefix of the extra columns carrying a row's old key through an UPDATE.
const OLD_KEY_PREFIX: &str = "__eddy_old_";

async fn run(state: &SessionState, plan: &LogicalPlan) -> Result<Vec<RecordBatch>> {
    let physical = crate::frontend::session::off_worker(state.create_physical_plan(plan)).await?;
    Ok(collect(physical, state.task_ctx()).await?)
}

fn concat(schema: &Arc<Schema>, batches: &[RecordBatch]) -> Result<RecordBatch> {
    Ok(concat_batches(schema, batches)?)
}

impl Session {
    /// Executes a planned DML statement; returns the affected row count, and with
    /// `want_rows` the affected rows' user columns (new versions for INSERT/UPDATE, old for
    /// DELETE) for `RETURNING`. The table's writer decides key conflicts (under the table's
    /// policy, or the statement's `ON CONFLICT` clause) against its current rows.
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
        let storage = catalog.storage_schema();
        let mut on_conflict = table_policy(&catalog);
        let chunk = match &dml.op {
            WriteOp::Insert(_) => {
                let rows = run(state, &dml.input).await?;
                let schema = catalog.planning_schema(false);
                let rows = concat(&schema, &rebind(&schema, rows)?)?;
                let rows = self.prepare_insert(&catalog, rows)?;
                if let Some(c) = conflict {
                    on_conflict = self.conflict_action(&catalog, c)?;
                }
                StreamChunk::inserts(rows)
            }
            WriteOp::Delete => {
                let rows = run(state, &dml.input).await?;
                let schema = catalog.planning_schema(true);
                let rows = concat(&schema, &rebind(&schema, rows)?)?;
                StreamChunk::deletes(RecordBatch::try_new(storage.clone(), rows.columns().to_vec())?)
            }
            WriteOp::Update => {
                // Evaluated by the writer on current rows when possible (no lost updates).
                if let Some(update) = crate::frontend::writer_update::writer_update(state, &dml.input, &catalog)? {
                    on_conflict = OnConflict::UpdateExisting(update);
                }
                // `UPDATE ... FROM` rows carry their old keys already (`update_from`).
                let carried = has_old_keys(&dml.input);
                let input = if carried { dml.input.as_ref().clone() } else { with_old_keys(&dml.input, &catalog)? };
                let mut out = run(state, &input).await?;
                let schema = catalog.planning_schema(true);
                let width = schema.fields().len();
                if carried {
                    out = first_per_key(out, width)?;
                }
                let mut batches = Vec::new();
                let mut ops = Vec::new();
                for b in out {
                    // `SET v = 5` on a bigint column yields an int32 literal: coerce each new
                    // value to its column's type as PostgreSQL does (out of range is 22003).
                    let new_cols = b.columns()[..width]
                        .iter()
                        .zip(schema.fields())
                        .map(|(c, f)| eddy_common::cast::cast_column(c, f.data_type()))
                        .collect::<Result<Vec<ArrayRef>>>()?;
                    let new_rows = RecordBatch::try_new(schema.clone(), new_cols)?;
                    let new_rows = self.validate_rows(&catalog, new_rows)?;
                    // Each row's old key (the rest of the old row is looked up by the writer).
                    let mut old_cols: Vec<ArrayRef> = new_rows.columns().to_vec();
                    for (i, &k) in catalog.storage_pk().iter().enumerate() {
                        old_cols[k] = b.column(width + i).clone();
                    }
                    let old_rows = RecordBatch::try_new(storage.clone(), old_cols)?;
                    let new_rows = RecordBatch::try_new(storage.clone(), new_rows.columns().to_vec())?;
                    // Old and new versions interleaved as update pairs.
                    let n = new_rows.num_rows();
                    let idx: Vec<(usize, usize)> = (0..n).flat_map(|i| [(0, i), (1, i)]).collect();
                    let cols = (0..storage.fields().len())
                        .map(|c| Ok(arrow::compute::interleave(&[old_rows.column(c).as_ref(), new_rows.column(c).as_ref()], &idx)?))
                        .collect::<Result<Vec<ArrayRef>>>()?;
                    if matches!(on_conflict, OnConflict::UpdateExisting(_)) {
                        // The rows to update, by key; the writer computes their new versions.
                        batches.push(new_rows);
                        ops.extend((0..n).map(|_| Op::Insert));
                        continue;
                    }
                    batches.push(RecordBatch::try_new(storage.clone(), cols)?);
                    ops.extend((0..n).flat_map(|_| [Op::UpdateDelete, Op::UpdateInsert]));
                }
                StreamChunk::try_new(concat(&storage, &batches)?, ops)?
            }
            other => return Err(eddy_common::not_supported!("{other} is not supported")),
        };
        if chunk.is_empty() {
            let rows = want_rows.then(|| (catalog.clone(), RecordBatch::new_empty(catalog.planning_schema(false))));
            return Ok((0, rows));
        }
        let write = TableWrite { chunk, on_conflict, returning: want_rows };
        let outcome = self.write(&catalog, write).await?;
        let Some(returned) = outcome.returned.filter(|_| want_rows) else { return Ok((outcome.rows, None)) };
        // The user-visible columns, whatever hidden ones the rows carry.
        let visible = catalog.planning_schema(false);
        let rows = RecordBatch::try_new(visible.clone(), returned.columns()[..visible.fields().len()].to_vec())?;
        Ok((outcome.rows, Some((catalog, rows))))
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

    /// Enforces NOT NULL, `varchar(n)` and CHECK constraints, and normalizes `jsonb` and `uuid`
    /// text.
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
                ColumnType::Uuid => {
                    let s = arr.as_string::<i32>();
                    let canonical: StringArray = s.iter().map(|v| v.map(eddy_common::text::parse_uuid).transpose()).collect::<Result<_>>()?;
                    cols[i] = Arc::new(canonical);
                }
                _ => {}
            }
        }
        let rows = RecordBatch::try_new(rows.schema(), cols)?;
        self.enforce_checks(catalog, &rows)?;
        Ok(rows)
    }
}

/// The name of the extra column carrying key column `i`'s old value through an UPDATE.
pub(crate) fn old_key_name(i: usize) -> String {
    format!("{OLD_KEY_PREFIX}{i}")
}

/// True if the UPDATE's rows already carry their old keys (`UPDATE ... FROM`, planned as a
/// query by `update_from`).
fn has_old_keys(input: &LogicalPlan) -> bool {
    input.schema().fields().iter().any(|f| f.name().starts_with(OLD_KEY_PREFIX))
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
                    .ok_or_else(|| internal_err!("UPDATE source lacks key column {name}"))
            })?;
        let column = match qualifier {
            Some(q) => Expr::Column(datafusion::common::Column::new(Some(q.clone()), name)),
            None => col(name),
        };
        exprs.push(column.alias(old_key_name(i)));
    }
    Ok(LogicalPlan::Projection(Projection::try_new(exprs, p.input.clone())?))
}

/// The rows of `batches` (new row, then old key columns from `width` on) keeping the first
/// row of each old key: an `UPDATE ... FROM` whose join matches a target row several times
/// updates it once.
fn first_per_key(batches: Vec<RecordBatch>, width: usize) -> Result<Vec<RecordBatch>> {
    let Some(first) = batches.first() else { return Ok(batches) };
    let fields = first.schema().fields()[width..].iter().map(|f| arrow::row::SortField::new(f.data_type().clone())).collect();
    let converter = arrow::row::RowConverter::new(fields)?;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        let keys = converter.convert_columns(&b.columns()[width..])?;
        let keep: arrow::array::BooleanArray = keys.iter().map(|k| Some(seen.insert(k.owned()))).collect();
        out.push(arrow::compute::filter_record_batch(&b, &keep)?);
    }
    Ok(out)
}

/// The conflict behaviour of plain INSERTs into `table`.
pub(crate) fn table_policy(table: &TableCatalog) -> OnConflict {
    match table.on_conflict {
        ConflictPolicy::Error => OnConflict::Error,
        ConflictPolicy::Overwrite => OnConflict::Overwrite,
        ConflictPolicy::Ignore => OnConflict::Ignore,
        ConflictPolicy::UpdateIfNotNull => OnConflict::UpdateIfNotNull,
    }
}
