//! `INSERT/UPDATE/DELETE ... RETURNING`: the statement runs without its RETURNING list; the
//! affected rows (new versions for INSERT and UPDATE, removed ones for DELETE) are then
//! projected through the list as a query over a one-off table named like the target.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::sql::sqlparser::ast::{FromTable, ObjectName, SelectItem, Statement, TableFactor, TableObject};
use eddy_common::Result;

use crate::catalog::TableCatalog;
use crate::frontend::names::resolve_relation;
use crate::frontend::session::Session;

/// `stmt` without its RETURNING list, and the list.
pub fn take_returning(stmt: &Statement) -> Option<(Statement, Vec<SelectItem>)> {
    let mut s = stmt.clone();
    let items = match &mut s {
        Statement::Insert(i) => i.returning.take(),
        Statement::Update(u) => u.returning.take(),
        Statement::Delete(d) => d.returning.take(),
        _ => None,
    }?;
    Some((s, items))
}

/// The table a DML statement writes.
fn target(stmt: &Statement) -> Option<&ObjectName> {
    match stmt {
        Statement::Insert(i) => match &i.table {
            TableObject::TableName(n) => Some(n),
            _ => None,
        },
        Statement::Update(u) => match &u.table.relation {
            TableFactor::Table { name, .. } => Some(name),
            _ => None,
        },
        Statement::Delete(d) => match &d.from {
            FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => match &t.first()?.relation {
                TableFactor::Table { name, .. } => Some(name),
                _ => None,
            },
        },
        _ => None,
    }
}

/// The alias `stmt` gives the table it writes (`UPDATE t AS a ... RETURNING a.x`).
pub(crate) fn target_alias(stmt: &Statement) -> Option<String> {
    let relation = match stmt {
        Statement::Update(u) => &u.table.relation,
        Statement::Delete(d) => match &d.from {
            FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => &t.first()?.relation,
        },
        _ => return None,
    };
    match relation {
        TableFactor::Table { alias: Some(a), .. } => Some(a.name.to_string()),
        _ => None,
    }
}

impl Session {
    /// The catalog entry of the table `stmt` writes.
    pub(crate) fn dml_target(&self, stmt: &Statement) -> Result<Arc<TableCatalog>> {
        let name = target(stmt).ok_or_else(|| eddy_common::not_supported!("RETURNING is not supported for this statement"))?;
        Ok(resolve_relation(self, name)?.2)
    }

    /// Evaluates a RETURNING list over `rows` of `table` (its user columns).
    pub(crate) async fn returning_rows(
        &self,
        table: &TableCatalog,
        rows: RecordBatch,
        items: &[SelectItem],
        alias: Option<&str>,
    ) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let ctx = self.scratch_context();
        ctx.register_batch(&table.name, rows)?;
        let list = items.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
        let alias = alias.map(|a| format!(" AS {a}")).unwrap_or_default();
        let sql = format!("SELECT {list} FROM \"{}\"{alias}", table.name.replace('"', "\"\""));
        crate::frontend::session::run_scratch(&ctx, &sql).await
    }

    /// The columns a RETURNING list produces for `stmt` (for Describe).
    pub(crate) async fn returning_schema(&self, stmt: &Statement, items: &[SelectItem]) -> Result<SchemaRef> {
        let table = self.dml_target(stmt)?;
        let empty = RecordBatch::new_empty(table.planning_schema(false));
        Ok(self.returning_rows(&table, empty, items, target_alias(stmt).as_deref()).await?.0)
    }
}
