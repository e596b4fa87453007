//! `CREATE SOURCE`: a relation whose rows a connector produces (see `eddy_connector`). Its
//! catalog entry records the columns and the `WITH` options; nothing is stored and nothing runs
//! until a materialized view reads it, and then each view runs its own reader from the
//! source's beginning (RisingWave's non-shared sources). A source cannot be queried directly.

use datafusion::sql::sqlparser::ast::CreateTable;
use eddy_common::{not_supported, Result};

use crate::catalog::RelationKind;
use crate::frontend::ddl::new_relation;
use crate::frontend::names::resolve_name;
use crate::frontend::session::Session;
use crate::frontend::with_options::ConnectorClauses;

impl Session {
    /// `CREATE SOURCE name (columns) WITH (connector = ..., ...) [FORMAT .. ENCODE ..]`.
    pub(crate) async fn create_source(&mut self, ct: &CreateTable, clauses: &ConnectorClauses, sql: &str) -> Result<()> {
        let (schema, name) = resolve_name(self, &ct.name)?;
        let (columns, pk) = self.column_definitions(ct, &name)?;
        if !crate::frontend::checks::definitions(ct, &name).is_empty() {
            return Err(eddy_common::not_supported!("CHECK constraints on a source are not supported (source \"{name}\")"));
        }
        if !pk.is_empty() {
            return Err(not_supported!("a source has no primary key (source \"{name}\"); declare a table with a connector for keyed data"));
        }
        if let Some(c) = columns.iter().find(|c| c.default.is_some()) {
            return Err(not_supported!("source column \"{}\" cannot have a DEFAULT (nor be AS PROCTIME(); a table can)", c.name));
        }
        let options = crate::frontend::with_options::connector_options(clauses)?;
        let mut columns = columns;
        crate::frontend::with_options::add_included_columns(&mut columns, &options)?;
        let definition = sql.trim().trim_end_matches(';').to_string();
        let mut source = new_relation(schema, name, RelationKind::Source, columns, vec![], definition);
        source.with_options = options;
        source.watermark = crate::frontend::ddl::watermark_definition(sql, &source.columns)?;
        eddy_connector::validate(&eddy_connector::Options(source.with_options.clone()), &source.user_schema()).await?;
        self.commit_new_table(source, ct.if_not_exists).await?;
        Ok(())
    }
}
