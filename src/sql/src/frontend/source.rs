//! `CREATE SOURCE`: a relation whose rows a connector produces (see `eddy_connector`). Its
//! catalog entry records the columns and the `WITH` options; nothing is stored and nothing runs
//! until a materialized view reads it, and then each view runs its own reader from the
//! source's beginning (RisingWave's non-shared sources). A source cannot be queried directly.

use datafusion::sql::sqlparser::ast::CreateTable;
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, Result};

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
        if !pk.is_empty() {
            return Err(not_supported!("a source has no primary key (source \"{name}\"); declare a table with a connector for keyed data"));
        }
        if let Some(c) = columns.iter().find(|c| c.default.is_some()) {
            return Err(not_supported!("source column \"{}\" cannot have a DEFAULT", c.name));
        }
        let mut options: std::collections::BTreeMap<String, String> = clauses.options.iter().cloned().collect();
        if !options.contains_key("connector") {
            return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "CREATE SOURCE needs the option connector = '...'"));
        }
        if let Some((format, encode)) = &clauses.format {
            // Sources are append-only streams of rows: only the plain format means anything.
            if format != "PLAIN" {
                return Err(not_supported!("FORMAT {format} for a {} source (only FORMAT PLAIN)", options["connector"]));
            }
            options.insert("format".into(), format.clone());
            options.insert("encode".into(), encode.clone());
        }
        for (k, v) in &clauses.encode_options {
            options.insert(format!("encode.{k}"), v.clone());
        }
        // Generated timestamps count from the source's creation, the same on every replay.
        let now_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0);
        options.entry(eddy_connector::datagen::BASE_TIME_OPTION.to_string()).or_insert_with(|| now_us.to_string());
        let definition = sql.trim().trim_end_matches(';').to_string();
        let mut source = new_relation(schema, name, RelationKind::Source, columns, vec![], definition);
        source.with_options = options;
        eddy_connector::validate(&eddy_connector::Options(source.with_options.clone()), &source.user_schema())?;
        self.commit_new_table(source, ct.if_not_exists).await?;
        Ok(())
    }
}
