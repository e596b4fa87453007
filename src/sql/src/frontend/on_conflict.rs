//! `INSERT ... ON CONFLICT [(key columns)] DO NOTHING | DO UPDATE SET ... [WHERE ...]`.
//!
//! The proposed rows are computed as for a plain INSERT; rows whose primary key already exists
//! (or repeats an earlier proposed row) are then resolved against the committed rows before
//! anything is written: dropped for DO NOTHING, or replaced by the updated version of the
//! existing row for DO UPDATE (`excluded` names the proposed row). A plain INSERT in Eddy
//! overwrites on a key conflict; ON CONFLICT gives PostgreSQL's choices explicitly.

use std::collections::HashSet;
use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::row::{RowConverter, SortField};
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, ConflictTarget, Ident, OnConflict, OnConflictAction, OnInsert, Statement,
};
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, Result};

use crate::catalog::TableCatalog;
use crate::frontend::session::Session;

/// What an INSERT does on a key conflict, taken out of the statement (DataFusion plans the
/// INSERT without it).
#[derive(Debug, Clone)]
pub struct Conflict {
    /// `DO NOTHING` / `DO UPDATE`.
    pub clause: OnConflict,
    /// The target's alias (`INSERT INTO t AS x`), by which DO UPDATE may name the existing row.
    pub alias: Option<String>,
}

/// `stmt` without its ON CONFLICT clause, and the clause.
pub fn take_on_conflict(stmt: &Statement) -> Result<Option<(Statement, Conflict)>> {
    let Statement::Insert(ins) = stmt else { return Ok(None) };
    match &ins.on {
        None => Ok(None),
        Some(OnInsert::OnConflict(clause)) => {
            let mut s = ins.clone();
            s.on = None;
            let alias = s.table_alias.take().map(|a| ident_name(&a.alias));
            Ok(Some((Statement::Insert(s), Conflict { clause: clause.clone(), alias })))
        }
        Some(_) => Err(not_supported!("ON DUPLICATE KEY UPDATE is MySQL syntax; use ON CONFLICT ... DO UPDATE")),
    }
}

fn ident_name(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Session {
    /// The rows to write for an INSERT with ON CONFLICT: `rows` (checked, as a plain INSERT
    /// would write them) resolved against the committed rows of `table`.
    pub(crate) async fn resolve_conflicts(&self, table: &TableCatalog, rows: RecordBatch, conflict: &Conflict) -> Result<RecordBatch> {
        let do_update = match &conflict.clause.action {
            OnConflictAction::DoNothing => None,
            OnConflictAction::DoUpdate(u) => Some(u),
        };
        let no_constraint = || {
            user_err!("42P10", "there is no unique or exclusion constraint matching the ON CONFLICT specification")
        };
        if table.pk.is_empty() {
            // Without a key nothing can conflict.
            return if do_update.is_some() { Err(no_constraint()) } else { Ok(rows) };
        }
        match &conflict.clause.conflict_target {
            Some(ConflictTarget::Columns(cols)) => {
                let named: HashSet<String> = cols.iter().map(ident_name).collect();
                let pk: HashSet<String> = table.pk.iter().map(|&i| table.columns[i].name.clone()).collect();
                if named != pk {
                    return Err(no_constraint());
                }
            }
            Some(ConflictTarget::OnConstraint(name)) => {
                let pk_name = format!("{}_pkey", table.name);
                if name.to_string().trim_matches('"') != pk_name {
                    return Err(user_err!(sqlstate::UNDEFINED_OBJECT, "constraint \"{name}\" for table \"{}\" does not exist", table.name));
                }
            }
            None if do_update.is_some() => {
                return Err(user_err!(sqlstate::SYNTAX_ERROR, "ON CONFLICT DO UPDATE requires inference specification or constraint name"));
            }
            None => {}
        }
        let keys = rows.project(&table.pk)?;
        let converter = RowConverter::new(keys.schema().fields().iter().map(|f| SortField::new(f.data_type().clone())).collect())?;
        let proposed = converter.convert_columns(keys.columns())?;
        let existing_rows = table.state_table()?.get_rows(&self.engine.store.snapshot(), &keys).await?;
        let existing_keys = existing_rows.project(&table.pk)?;
        let existing = converter.convert_columns(existing_keys.columns())?;
        let existing: HashSet<Vec<u8>> = existing.iter().map(|r| r.as_ref().to_vec()).collect();
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut fresh = Vec::with_capacity(rows.num_rows());
        let mut conflicting = Vec::with_capacity(rows.num_rows());
        for r in proposed.iter() {
            let k = r.as_ref();
            let repeat = !seen.insert(k.to_vec());
            if repeat && do_update.is_some() {
                return Err(user_err!(
                    "21000",
                    "ON CONFLICT DO UPDATE command cannot affect row a second time; ensure that no rows proposed for insertion within the same command have duplicate constrained values"
                ));
            }
            let clash = repeat || existing.contains(k);
            fresh.push(!clash);
            conflicting.push(clash && !repeat);
        }
        let inserted = filter_record_batch(&rows, &BooleanArray::from(fresh))?;
        let Some(update) = do_update else { return Ok(inserted) };
        let excluded = filter_record_batch(&rows, &BooleanArray::from(conflicting))?;
        if excluded.num_rows() == 0 {
            return Ok(inserted);
        }
        // The updated versions: each column's assignment, or the existing value.
        let target = conflict.alias.clone().unwrap_or_else(|| table.name.clone());
        let visible = table.planning_schema(false);
        let existing_visible = RecordBatch::try_new(visible.clone(), existing_rows.columns()[..visible.fields().len()].to_vec())?;
        let mut exprs: Vec<String> = table.columns.iter().filter(|c| !c.hidden).map(|c| format!("{}.{}", quoted(&target), quoted(&c.name))).collect();
        for a in &update.assignments {
            let AssignmentTarget::ColumnName(name) = &a.target else {
                return Err(not_supported!("tuple assignments in ON CONFLICT DO UPDATE are not supported"));
            };
            let col = name.0.last().map(|p| crate::frontend::names::normalize_ident(&p.to_string())).unwrap_or_default();
            let i = table.columns.iter().position(|c| c.name == col && !c.hidden).ok_or_else(|| {
                user_err!(sqlstate::UNDEFINED_COLUMN, "column \"{col}\" of relation \"{}\" does not exist", table.name)
            })?;
            if table.pk.contains(&i) {
                return Err(not_supported!("ON CONFLICT DO UPDATE cannot change key column \"{col}\""));
            }
            exprs[i] = format!("({})", a.value);
        }
        let on = table
            .pk
            .iter()
            .map(|&i| format!("{t}.{c} = excluded.{c}", t = quoted(&target), c = quoted(&table.columns[i].name)))
            .collect::<Vec<_>>()
            .join(" AND ");
        let filter = update.selection.as_ref().map(|w| format!(" WHERE {w}")).unwrap_or_default();
        let sql = format!("SELECT {} FROM {} JOIN excluded ON {on}{filter}", exprs.join(", "), quoted(&target));
        let ctx = self.scratch_context();
        ctx.register_batch(&target, existing_visible)?;
        ctx.register_batch("excluded", RecordBatch::try_new(visible.clone(), excluded.columns()[..visible.fields().len()].to_vec())?)?;
        let (_, updated) = crate::frontend::session::run_scratch(&ctx, &sql).await?;
        let schema = rows.schema();
        let mut out = vec![inserted];
        for b in crate::frontend::rows::rebind(&schema, updated)? {
            out.push(self.validate_rows(table, b)?);
        }
        Ok(arrow::compute::concat_batches(&schema, &out)?)
    }
}
