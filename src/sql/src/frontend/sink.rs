//! `CREATE SINK name FROM relation | AS query WITH (connector = 'kafka', ...) FORMAT ...
//! ENCODE JSON`, `DROP SINK`, `SHOW SINKS`.
//!
//! A sink is maintained exactly like a materialized view (planned, backfilled from a snapshot,
//! recovered from committed state; see `mview.rs`), but its root ends in the sink's log
//! ([`eddy_stream::sink`]) instead of a state table: each committed change is delivered to the
//! connector at least once, in order. `FROM v` sinks `SELECT * FROM v`: the first delivery
//! is the relation's current rows, then every change.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::sql::sqlparser::ast::{ObjectName, Query, Statement};
use datafusion::sql::sqlparser::tokenizer::Token;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

use crate::catalog::{RelationKind, TableCatalog};
use crate::frontend::output::{text_rows, text_schema, Output};
use crate::frontend::session::Session;
use crate::frontend::split::tokens_with_offsets;

/// A parsed `CREATE SINK`.
#[derive(Debug, Clone)]
pub struct CreateSinkSpec {
    pub name: ObjectName,
    pub if_not_exists: bool,
    /// What it sends (`SELECT * FROM relation` for `FROM relation`).
    pub query: Query,
    /// `WITH` options, with `format`/`encode`.
    pub options: std::collections::BTreeMap<String, String>,
    /// The statement as written.
    pub sql: String,
}

/// Parses `CREATE SINK [IF NOT EXISTS] name FROM relation | AS query WITH (...) [FORMAT x
/// ENCODE y [(...)]]`.
pub fn parse_create_sink(sql: &str) -> Result<CreateSinkSpec> {
    let clauses = crate::frontend::with_options::take_connector_clauses(sql)?
        .filter(|c| c.options.iter().any(|(k, _)| k == "connector"))
        .ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "CREATE SINK needs WITH (connector = '...', ...)"))?;
    let text = clauses.text.trim().trim_end_matches(';');
    let bad = || user_err!(sqlstate::SYNTAX_ERROR, "syntax error in CREATE SINK: expected CREATE SINK name FROM relation or CREATE SINK name AS query");
    let tokens = tokens_with_offsets(text).ok_or_else(bad)?;
    let code: Vec<&(Token, usize)> = tokens.iter().filter(|(t, _)| !matches!(t, Token::Whitespace(_))).collect();
    let word = |i: usize, w: &str| matches!(code.get(i).map(|(t, _)| t), Some(Token::Word(x)) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    if !(word(0, "CREATE") && word(1, "SINK")) {
        return Err(bad());
    }
    let mut i = 2;
    let if_not_exists = word(2, "IF") && word(3, "NOT") && word(4, "EXISTS");
    if if_not_exists {
        i = 5;
    }
    let name_start = code.get(i).map(|(_, o)| *o).ok_or_else(bad)?;
    // The name runs up to FROM or AS.
    let mut j = i;
    while j < code.len() && !(word(j, "FROM") || word(j, "AS")) {
        j += 1;
    }
    let (kw_start, after) = match (code.get(j), code.get(j + 1)) {
        (Some((_, k)), Some((_, a))) => (*k, *a),
        _ => return Err(bad()),
    };
    let name_text = text[name_start..kw_start].trim();
    let rest = text[after..].trim();
    let query_text = if word(j, "FROM") { format!("SELECT * FROM {rest}") } else { rest.to_string() };
    let mut stmts = crate::planner::parse::parse_bounded(&format!("CREATE MATERIALIZED VIEW {name_text} AS {query_text}"))?;
    let Some(Statement::CreateView(cv)) = stmts.pop().filter(|_| stmts.is_empty()) else { return Err(bad()) };
    Ok(CreateSinkSpec {
        name: cv.name,
        if_not_exists,
        query: *cv.query,
        options: crate::frontend::with_options::sink_options(&clauses),
        sql: sql.trim().trim_end_matches(';').to_string(),
    })
}

/// The option under which a sink keeps the identity it records in its target (set at
/// `CREATE SINK`, random, so a sink dropped and created again is never taken for the old one).
const SINK_UID_OPTION: &str = "eddy.sink.uid";

/// The connector's view of sink `sink` (an entry of the catalog, or one being created).
pub(crate) fn sink_spec(sink: &TableCatalog, append_only: bool) -> Result<eddy_connector::sink::SinkSpec> {
    let schema: SchemaRef = sink.user_schema();
    let visible = sink.visible_indices();
    // The input's key, where the sink's columns include all of it.
    let default_key: Option<Vec<usize>> = sink.pk.iter().map(|k| visible.iter().position(|v| v == k)).collect();
    let mut options = sink.with_options.clone();
    let uid = options.remove(SINK_UID_OPTION).unwrap_or_else(|| sink.id.to_string());
    eddy_connector::sink::check(&eddy_connector::Options(options), &schema, default_key, append_only, uid)
}

/// What a sink writes to, for `SHOW SINKS`: its topic or table.
fn sink_target(options: &std::collections::BTreeMap<String, String>) -> String {
    let get = |k: &str| options.get(k).cloned();
    match (get("database.name"), get("table.name")) {
        (Some(db), Some(t)) if get("connector").is_some_and(|c| c.eq_ignore_ascii_case("iceberg")) => format!("{db}.{t}"),
        _ => ["topic", "table", "table.name"].iter().find_map(|k| get(k)).unwrap_or_default(),
    }
}

/// Columns of `SHOW SINKS`.
pub(crate) fn show_sinks_schema() -> SchemaRef {
    text_schema(&["Name", "Connector", "Target", "State", "Delivered", "Pending"])
}

impl Session {
    /// `CREATE SINK`.
    pub(crate) async fn create_sink(&mut self, spec: &CreateSinkSpec) -> Result<()> {
        let mut options = spec.options.clone();
        options.insert(SINK_UID_OPTION.to_string(), format!("{:016x}", rand::random::<u64>()));
        self.create_mview(&spec.name, &[], &spec.query, spec.if_not_exists, &spec.sql, Some(options)).await
    }

    /// The last operator of sink `sink`: its log, delivering to the connector from sequence
    /// number `next_seq` on.
    pub(crate) fn sink_log(&self, sink: &TableCatalog, append_only: bool, next_seq: u64) -> Result<Box<dyn eddy_stream::operator::Operator>> {
        let spec = sink_spec(sink, append_only)?;
        let log = *sink.internal_tables.last().ok_or_else(|| eddy_common::internal_err!("sink {} has no log", sink.name))?;
        let target = eddy_connector::sink::open(spec)?;
        Ok(Box::new(eddy_stream::SinkLog::new(
            log,
            sink.user_schema(),
            sink.visible_indices(),
            next_seq,
            target,
            self.engine.barrier.completed(),
            self.engine.sink_stats(sink.id),
        )?))
    }

    /// `SHOW SINKS`: the sinks of the current schema with their delivery state.
    pub(crate) fn show_sinks(&self) -> Result<Output> {
        let schema = self.default_schema();
        let stats = self.engine.all_sink_stats();
        let rows = self
            .engine
            .catalog()
            .tables_in(&schema)
            .into_iter()
            .filter(|t| t.kind == RelationKind::Sink)
            .map(|t: Arc<TableCatalog>| {
                let s = stats.get(&t.id);
                let state = match (self.engine.view_failure(&t), s.and_then(|s| s.error.lock().clone())) {
                    (Some(e), _) => format!("failed: {}", e.message),
                    (None, Some(e)) => format!("retrying: {e}"),
                    (None, None) => "running".to_string(),
                };
                let count = |f: fn(&eddy_stream::SinkStats) -> u64| s.map(|s| f(s)).unwrap_or(0).to_string();
                vec![
                    t.name.clone(),
                    t.with_options.get("connector").cloned().unwrap_or_default(),
                    sink_target(&t.with_options),
                    state,
                    count(|s| s.delivered.load(std::sync::atomic::Ordering::Relaxed)),
                    count(|s| s.pending.load(std::sync::atomic::Ordering::Relaxed)),
                ]
            })
            .collect();
        text_rows(&["Name", "Connector", "Target", "State", "Delivered", "Pending"], rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_sink_statements_parse() {
        let s = parse_create_sink("CREATE SINK k FROM v WITH (connector = 'kafka', topic = 't', properties.bootstrap.server = 'h:1') FORMAT UPSERT ENCODE JSON").unwrap();
        assert_eq!(s.name.to_string(), "k");
        assert!(!s.if_not_exists);
        assert_eq!(s.query.to_string(), "SELECT * FROM v");
        assert_eq!(s.options.get("format").map(String::as_str), Some("UPSERT"));
        assert_eq!(s.options.get("properties.bootstrap.server").map(String::as_str), Some("h:1"));
        let s = parse_create_sink("create sink if not exists s.\"K\" as select a, count(*) as n from t group by a with (connector='kafka', topic='x')").unwrap();
        assert!(s.if_not_exists);
        assert_eq!(s.name.to_string(), "s.\"K\"");
        assert!(s.query.to_string().contains("GROUP BY a"));
        let s = parse_create_sink("CREATE SINK k AS WITH w AS (SELECT 1 AS a) SELECT a FROM w WITH (connector='kafka', topic='x')").unwrap();
        assert!(s.query.to_string().starts_with("WITH w AS"));
        for bad in ["CREATE SINK k FROM v", "CREATE SINK WITH (connector='kafka')", "CREATE SINK k TO v WITH (connector='kafka')"] {
            assert_eq!(parse_create_sink(bad).unwrap_err().sqlstate, sqlstate::SYNTAX_ERROR, "{bad}");
        }
    }
}
