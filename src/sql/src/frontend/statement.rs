//! Statements as the frontend sees them: [`EddyStatement`] (sqlparser's statements plus Eddy's
//! own: `FLUSH`, `VERIFY`, `SHOW MATERIALIZED VIEWS`, ...), their role in a transaction block,
//! and the splitting and parsing of a query string.

use datafusion::sql::sqlparser::ast::Statement;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, EddyError, Result};

use crate::frontend::session::Session;
use crate::frontend::split::{split_statements, take_append_only, take_table_conflict_clause};
use crate::planner::parse::{parse_bounded, too_complex, MAX_STATEMENT_DEPTH};

/// How a statement acts on a transaction block that has failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxControl {
    /// `COMMIT`: ends the failed block, reported as ROLLBACK.
    Commit,
    /// `ROLLBACK`.
    Rollback,
    /// `ROLLBACK TO SAVEPOINT`: the block is usable again.
    RollbackTo,
    /// Anything else: refused with 25P02 while the block has failed.
    Other,
}

impl EddyStatement {
    /// The statement's transaction-control role.
    pub fn tx_control(&self) -> TxControl {
        match self {
            EddyStatement::Sql(s, _) => match s.as_ref() {
                Statement::Commit { .. } => TxControl::Commit,
                Statement::Rollback { savepoint: Some(_), .. } => TxControl::RollbackTo,
                Statement::Rollback { .. } => TxControl::Rollback,
                _ => TxControl::Other,
            },
            _ => TxControl::Other,
        }
    }
}

/// The error for a statement sent in a transaction block that has failed.
pub fn in_failed_transaction() -> EddyError {
    user_err!(
        sqlstate::IN_FAILED_SQL_TRANSACTION,
        "current transaction is aborted, commands ignored until end of transaction block"
    )
}

/// One parsed statement.
#[derive(Debug, Clone)]
pub enum EddyStatement {
    /// A statement sqlparser understands, with its source text.
    Sql(Box<Statement>, String),
    /// `FLUSH`: wait for the next epoch commit.
    Flush,
    /// `WAIT`: wait until every view being created in the background is (RisingWave's).
    Wait,
    /// `VERIFY MATERIALIZED VIEW name`.
    Verify(String),
    /// `SHOW MATERIALIZED VIEWS`.
    ShowViews,
    /// `EXPLAIN ANALYZE MATERIALIZED VIEW name`: the running view's operators with live counters.
    ExplainAnalyzeView(String),
    /// `SHOW CREATE MATERIALIZED VIEW name`.
    ShowCreateView(String),
    /// `CREATE SOURCE name (columns) WITH (connector = ..., ...) [FORMAT .. ENCODE ..]`: the
    /// column list parsed as a `CREATE TABLE`, the connector clauses, the source text.
    CreateSource(Box<Statement>, crate::frontend::with_options::ConnectorClauses, String),
    /// `DROP SOURCE [IF EXISTS] names [CASCADE]` (parsed as a `DROP TABLE`).
    DropSource(Box<Statement>),
    /// `SHOW SOURCES`.
    ShowSources,
    /// `SUBSCRIBE [TO] relation [WITH (...)]`.
    Subscribe(crate::frontend::subscribe::SubscribeSpec),
    /// `DECLARE name CURSOR FOR ...`.
    Declare(Box<crate::frontend::cursor::DeclareSpec>),
    /// `FETCH ... name`.
    Fetch(crate::frontend::cursor::FetchSpec),
    /// `COPY (SUBSCRIBE ...) TO STDOUT [WITH (...)]`: the subscription, and the COPY with
    /// `(SELECT 1)` in its place (for its options).
    CopySubscribe(crate::frontend::subscribe::SubscribeSpec, Box<Statement>),
    /// `CLOSE name` (`None`: `CLOSE ALL`).
    Close(Option<String>),
    /// `CREATE SINK name FROM relation | AS query WITH (...) [FORMAT .. ENCODE ..]`.
    CreateSink(Box<crate::frontend::sink::CreateSinkSpec>),
    /// `DROP SINK [IF EXISTS] names` (parsed as a `DROP TABLE`).
    DropSink(Box<Statement>),
    /// `SHOW SINKS`.
    ShowSinks,
}


impl Session {
    /// Splits and parses a query string into statements.
    pub fn parse(&self, sql: &str) -> Result<Vec<EddyStatement>> {
        let mut out = Vec::new();
        for piece in split_statements(sql) {
            let words = piece.words.len();
            if piece.starts_with(&["FLUSH"]) && words == 1 && piece.rest_after(1).is_empty() {
                out.push(EddyStatement::Flush);
                continue;
            }
            if piece.starts_with(&["WAIT"]) && words == 1 && piece.rest_after(1).is_empty() {
                out.push(EddyStatement::Wait);
                continue;
            }
            if piece.starts_with(&["VERIFY", "MATERIALIZED", "VIEW"]) {
                out.push(EddyStatement::Verify(piece.rest_after(3).to_string()));
                continue;
            }
            if piece.starts_with(&["EXPLAIN", "ANALYZE", "MATERIALIZED", "VIEW"]) {
                out.push(EddyStatement::ExplainAnalyzeView(piece.rest_after(4).to_string()));
                continue;
            }
            if piece.starts_with(&["SHOW", "MATERIALIZED", "VIEWS"]) && piece.rest_after(3).is_empty() {
                out.push(EddyStatement::ShowViews);
                continue;
            }
            if piece.starts_with(&["SHOW", "CREATE", "MATERIALIZED", "VIEW"]) {
                out.push(EddyStatement::ShowCreateView(piece.rest_after(4).to_string()));
                continue;
            }
            if piece.starts_with(&["SHOW", "SOURCES"]) && piece.rest_after(2).is_empty() {
                out.push(EddyStatement::ShowSources);
                continue;
            }
            if piece.starts_with(&["CREATE", "SOURCE"]) {
                let clauses = crate::frontend::with_options::take_connector_clauses(&piece.text)?
                    .ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "CREATE SOURCE needs WITH (connector = '...', ...)"))?;
                let as_table = format!("CREATE TABLE {}", rest_after_words(&clauses.text, 2));
                let as_table = crate::frontend::split::take_watermark(&as_table).map(|(t, _, _)| t).unwrap_or(as_table);
                let mut stmts = parse_bounded(&as_table)?;
                let stmt = stmts.pop().filter(|_| stmts.is_empty()).ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "syntax error in CREATE SOURCE"))?;
                out.push(EddyStatement::CreateSource(Box::new(stmt), clauses, piece.text.clone()));
                continue;
            }
            if piece.starts_with(&["SHOW", "SINKS"]) && piece.rest_after(2).is_empty() {
                out.push(EddyStatement::ShowSinks);
                continue;
            }
            if piece.starts_with(&["CREATE", "SINK"]) {
                if piece.depth > MAX_STATEMENT_DEPTH {
                    return Err(too_complex(piece.depth));
                }
                out.push(EddyStatement::CreateSink(Box::new(crate::frontend::sink::parse_create_sink(&piece.text)?)));
                continue;
            }
            if piece.starts_with(&["DROP", "SINK"]) {
                let mut stmts = parse_bounded(&format!("DROP TABLE {}", piece.rest_after(2)))?;
                let stmt = stmts.pop().filter(|_| stmts.is_empty()).ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "syntax error in DROP SINK"))?;
                out.push(EddyStatement::DropSink(Box::new(stmt)));
                continue;
            }
            if piece.starts_with(&["DROP", "SOURCE"]) {
                let mut stmts = parse_bounded(&format!("DROP TABLE {}", piece.rest_after(2)))?;
                let stmt = stmts.pop().filter(|_| stmts.is_empty()).ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "syntax error in DROP SOURCE"))?;
                out.push(EddyStatement::DropSource(Box::new(stmt)));
                continue;
            }
            if piece.starts_with(&["SUBSCRIBE"]) {
                out.push(EddyStatement::Subscribe(crate::frontend::subscribe::parse_subscribe(&piece.text)?));
                continue;
            }
            if piece.starts_with(&["COPY"]) {
                if let Some((spec, copy)) = crate::frontend::subscribe::take_copy_subscribe(&piece.text)? {
                    let mut stmts = parse_bounded(&copy)?;
                    let stmt = stmts.pop().filter(|_| stmts.is_empty()).ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "syntax error in COPY (SUBSCRIBE ...)"))?;
                    out.push(EddyStatement::CopySubscribe(spec, Box::new(stmt)));
                    continue;
                }
            }
            if piece.starts_with(&["DECLARE"]) {
                if piece.depth > MAX_STATEMENT_DEPTH {
                    return Err(too_complex(piece.depth));
                }
                out.push(EddyStatement::Declare(Box::new(crate::frontend::cursor::parse_declare(&piece.text, parse_bounded)?)));
                continue;
            }
            if piece.starts_with(&["FETCH"]) {
                out.push(EddyStatement::Fetch(crate::frontend::cursor::parse_fetch(&piece.text)?));
                continue;
            }
            if piece.starts_with(&["CLOSE"]) {
                out.push(EddyStatement::Close(crate::frontend::cursor::parse_close(&piece.text)?));
                continue;
            }
            if piece.depth > MAX_STATEMENT_DEPTH {
                return Err(too_complex(piece.depth));
            }
            // sqlparser reads `CREATE USER` / `ALTER USER` in Snowflake's syntax; PostgreSQL's
            // is its `CREATE ROLE` / `ALTER ROLE` (execution tells users from roles by the text).
            let stmts = if piece.starts_with(&["CREATE", "USER"]) || piece.starts_with(&["ALTER", "USER"]) {
                parse_bounded(&format!("{} ROLE {}", piece.words[0], piece.rest_after(2)))?
            } else if piece.starts_with(&["CREATE", "TABLE"]) {
                // RisingWave's table-level ON CONFLICT and connector clauses are read by CREATE
                // TABLE from the text.
                let text = match crate::frontend::with_options::take_connector_clauses(&piece.text)? {
                    Some(c) if c.options.iter().any(|(k, _)| k == "connector") => c.text,
                    _ => piece.text.clone(),
                };
                let text = take_table_conflict_clause(&text).map(|(t, _)| t).unwrap_or(text);
                let text = crate::frontend::split::take_watermark(&text).map(|(t, _, _)| t).unwrap_or(text);
                parse_bounded(&take_append_only(&text).unwrap_or(text))?
            } else if piece.starts_with(&["CREATE", "MATERIALIZED", "VIEW"]) {
                // RisingWave's EMIT ON WINDOW CLOSE is read by CREATE from the text.
                let text = crate::frontend::split::take_emit_on_window_close(&piece.text).unwrap_or_else(|| piece.text.clone());
                parse_bounded(&text)?
            } else if piece.starts_with(&["EXPLAIN", "CREATE", "MATERIALIZED", "VIEW"]) {
                let create = crate::frontend::split::take_emit_on_window_close(piece.rest_after(1));
                parse_bounded(&create.map(|c| format!("EXPLAIN {c}")).unwrap_or_else(|| piece.text.clone()))?
            } else {
                parse_bounded(&piece.text)?
            };
            for s in stmts {
                out.push(EddyStatement::Sql(Box::new(s), piece.text.clone()));
            }
        }
        Ok(out)
    }
}

/// `text` after its first `n` words (whitespace and comments skipped).
fn rest_after_words(text: &str, n: usize) -> String {
    split_statements(text).into_iter().next().map(|p| p.rest_after(n).to_string()).unwrap_or_default()
}

/// An identifier as PostgreSQL stores it: folded to lower case unless quoted.
pub(crate) fn ident_name(i: &datafusion::sql::sqlparser::ast::Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}
