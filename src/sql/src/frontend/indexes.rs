//! `CREATE INDEX` and `DROP INDEX`. Every relation is already stored and read by its key, and
//! views are maintained; an index changes no result, so Eddy records it (it can be listed in
//! `pg_indexes`-style tooling later, dropped, and survives restarts) without building anything.
//! A `UNIQUE` index would promise a constraint that is not enforced, so it is refused.

use datafusion::sql::sqlparser::ast::{CreateIndex, Expr, ObjectName};
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, Result};
use eddy_storage::EpochBatch;

use crate::catalog::{CatalogChange, IndexCatalog};
use crate::frontend::names::{resolve_name, resolve_relation};
use crate::frontend::session::Session;

impl Session {
    /// `CREATE INDEX [IF NOT EXISTS] [name] ON table (columns)`.
    pub(crate) async fn create_index(&mut self, ci: &CreateIndex) -> Result<()> {
        if ci.unique {
            return Err(not_supported!("UNIQUE indexes are not supported: their constraint would not be enforced (declare a PRIMARY KEY instead)"));
        }
        let (schema, table_name, table) = resolve_relation(self, &ci.table_name)?;
        let mut columns = Vec::new();
        for c in &ci.columns {
            match &c.column.expr {
                Expr::Identifier(i) => {
                    let name = i.value.to_lowercase();
                    let name = if i.quote_style.is_some() { i.value.clone() } else { name };
                    if !table.columns.iter().any(|col| !col.hidden && col.name == name) {
                        return Err(user_err!(sqlstate::UNDEFINED_COLUMN, "column \"{name}\" does not exist"));
                    }
                    columns.push(name);
                }
                other => columns.push(other.to_string()),
            }
        }
        let name = match &ci.name {
            Some(n) => resolve_name(self, n)?.1,
            None => format!("{table_name}_{}_idx", columns.first().map(String::as_str).unwrap_or("expr")),
        };
        let if_not_exists = ci.if_not_exists;
        let mut skipped = false;
        self.engine
            .ddl(|cat| {
                if cat.index(&schema, &name).is_some() || cat.table(&schema, &name).is_some() {
                    if if_not_exists {
                        skipped = true;
                        return Ok((vec![], EpochBatch::default()));
                    }
                    return Err(user_err!(sqlstate::DUPLICATE_TABLE, "relation \"{name}\" already exists"));
                }
                let index = IndexCatalog { id: cat.allocate_id(), schema: schema.clone(), name: name.clone(), table_id: table.id, columns: columns.clone() };
                Ok((vec![CatalogChange::CreateIndex(index)], EpochBatch::default()))
            })
            .await?;
        if skipped {
            self.notice(&format!("relation \"{name}\" already exists, skipping"));
        }
        Ok(())
    }

    /// `DROP INDEX [IF EXISTS] name, ...`.
    pub(crate) async fn drop_indexes(&mut self, names: &[ObjectName], if_exists: bool) -> Result<()> {
        for n in names {
            let (schema, name) = resolve_name(self, n)?;
            let existing = self.engine.catalog().index(&schema, &name).cloned();
            let Some(index) = existing else {
                if if_exists {
                    self.notice(&format!("index \"{name}\" does not exist, skipping"));
                    continue;
                }
                return Err(user_err!(sqlstate::UNDEFINED_OBJECT, "index \"{name}\" does not exist"));
            };
            self.engine.ddl(|_| Ok((vec![CatalogChange::DropIndex(index.clone())], EpochBatch::default()))).await?;
        }
        Ok(())
    }
}
