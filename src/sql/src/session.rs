//! [`Session`]: one client connection's view of the database — settings, transaction state,
//! and the dispatch of each SQL statement to DataFusion (queries, DML) or to Eddy (DDL, SET,
//! SHOW, COPY, FLUSH, transaction control).
//!
//! Transactions: Eddy runs every statement in autocommit mode. `BEGIN`/`COMMIT`/`ROLLBACK`/
//! `SAVEPOINT`/`RELEASE` are accepted so drivers work, and the wire status byte follows them,
//! but each statement is durable on its own when it returns and `ROLLBACK` undoes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ParamValues;
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SessionState;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::scalar::ScalarValue;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    CopySource, CopyTarget, CopyOption, CopyLegacyOption, CopyLegacyCsvOption, Expr as SqlExpr, Query, Set, Statement, Value,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, EddyError, Result};
use parking_lot::RwLock;

use crate::catalog::DATABASE_NAME;
use crate::copy::{CopyFormat, CopyIn};
use crate::ddl::{normalize_ident, resolve_name};
use crate::engine::Engine;
use crate::functions::{first_schema, register_session_functions, SessionInfo, PG_VERSION, PG_VERSION_NUM};
use crate::provider::{EddyCatalogList, QuerySnapshot};
use crate::split::split_statements;

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
    /// `VERIFY MATERIALIZED VIEW name`.
    Verify(String),
    /// `SHOW MATERIALIZED VIEWS`.
    ShowViews,
    /// `SHOW CREATE MATERIALIZED VIEW name`.
    ShowCreateView(String),
}

/// Splits off a case-insensitive keyword prefix (words separated by any whitespace).
fn strip_words<'a>(text: &'a str, words: &[&str]) -> Option<&'a str> {
    let mut rest = text.trim_start();
    for w in words {
        let n = w.len();
        if rest.len() < n || !rest[..n].eq_ignore_ascii_case(w) {
            return None;
        }
        rest = &rest[n..];
        if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
            return None;
        }
        rest = rest.trim_start();
    }
    Some(rest)
}

/// What a statement produced.
pub enum Output {
    /// Rows to stream to the client.
    Rows { schema: SchemaRef, stream: SendableRecordBatchStream },
    /// Rows of a DML statement's RETURNING list; `tag` is the command tag before the row
    /// count (`INSERT 0`, `UPDATE`, `DELETE`).
    Returned { tag: String, schema: SchemaRef, stream: SendableRecordBatchStream },
    /// A command tag such as `CREATE TABLE` or `INSERT` (with a row count).
    Command { tag: String, rows: Option<usize> },
    /// `BEGIN`: the connection is now in a transaction block.
    TransactionStart(String),
    /// `COMMIT`/`ROLLBACK`: the transaction block ended.
    TransactionEnd(String),
    /// COPY FROM STDIN is ready for data.
    CopyIn(CopyIn),
}

/// Parameter types and result schema of a prepared statement.
#[derive(Debug, Clone)]
pub struct Described {
    /// Types of `$1..$n` (`None`: unknown, sent as text).
    pub params: Vec<Option<DataType>>,
    /// PostgreSQL type OIDs of parameters the statement casts explicitly (`$1::oid[]`), which
    /// PostgreSQL reports as the parameter's type.
    pub declared: Vec<Option<u32>>,
    /// Result columns; `None` for statements that return no rows.
    pub schema: Option<SchemaRef>,
}

/// Settings reported to the client in ParameterStatus when they change.
const REPORTED: [&str; 8] =
    ["application_name", "client_encoding", "datestyle", "timezone", "intervalstyle", "standard_conforming_strings", "is_superuser", "server_version"];

/// PostgreSQL's spelling of a setting name in ParameterStatus.
pub fn display_var_name(name: &str) -> &str {
    match name {
        "datestyle" => "DateStyle",
        "timezone" => "TimeZone",
        "intervalstyle" => "IntervalStyle",
        other => other,
    }
}

/// Lower-cased setting name, with PostgreSQL's aliases resolved.
pub fn canonical_var(name: &str) -> String {
    let n = name.trim().to_ascii_lowercase().replace(' ', "_");
    match n.as_str() {
        "time_zone" => "timezone".into(),
        "transaction_isolation_level" => "transaction_isolation".into(),
        "session_authorization" => "session_authorization".into(),
        _ => n,
    }
}

/// Default settings of a new session.
pub fn default_vars(user: &str) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    for (k, val) in [
        ("application_name", ""),
        ("client_encoding", "UTF8"),
        ("server_encoding", "UTF8"),
        ("datestyle", "ISO, MDY"),
        ("timezone", "UTC"),
        ("intervalstyle", "postgres"),
        ("standard_conforming_strings", "on"),
        ("integer_datetimes", "on"),
        ("is_superuser", "on"),
        ("server_version", PG_VERSION),
        ("server_version_num", PG_VERSION_NUM),
        ("search_path", "\"$user\", public"),
        ("transaction_isolation", "read committed"),
        ("default_transaction_isolation", "read committed"),
        ("transaction_read_only", "off"),
        ("default_transaction_read_only", "off"),
        ("extra_float_digits", "1"),
        ("max_identifier_length", "63"),
        ("lc_collate", "C"),
        ("lc_ctype", "C"),
        ("lc_messages", "C"),
        ("lc_monetary", "C"),
        ("lc_numeric", "C"),
        ("lc_time", "C"),
        ("statement_timeout", "0"),
        ("lock_timeout", "0"),
        ("idle_in_transaction_session_timeout", "0"),
        ("bytea_output", "hex"),
        ("client_min_messages", "notice"),
        ("block_size", "8192"),
        ("max_connections", "100"),
        ("in_hot_standby", "off"),
        ("default_transaction_deferrable", "off"),
        ("row_security", "on"),
        ("synchronous_commit", "on"),
        ("jit", "off"),
        ("plan_cache_mode", "auto"),
        ("work_mem", "4MB"),
        ("default_table_access_method", "heap"),
        ("default_tablespace", ""),
        ("temp_tablespaces", ""),
        ("default_with_oids", "off"),
        ("escape_string_warning", "on"),
        ("wal_level", "replica"),
        ("max_index_keys", "32"),
        ("data_directory_mode", "0700"),
        ("barrier_interval", "250ms"),
    ] {
        v.insert(k.to_string(), val.to_string());
    }
    v.insert("session_authorization".into(), user.to_string());
    v
}

/// A client session.
pub struct Session {
    /// The shared database.
    pub(crate) engine: Arc<Engine>,
    /// DataFusion context for queries and INSERT.
    ctx: SessionContext,
    /// DataFusion context whose tables show hidden row ids (UPDATE, DELETE).
    dml_ctx: SessionContext,
    /// Settings (lower-case names).
    vars: Arc<RwLock<BTreeMap<String, String>>>,
    /// Connected user.
    user: String,
    /// NOTICE messages for the client, drained by the wire layer.
    notices: Vec<String>,
    /// Settings changed by the last statement, to report as ParameterStatus.
    changed: Vec<(String, String)>,
    /// Inside `BEGIN ... COMMIT`.
    in_transaction: bool,
    /// Savepoints of the open transaction block, oldest first.
    savepoints: Vec<String>,
}

fn value_text(e: &SqlExpr) -> String {
    match e {
        SqlExpr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) | Value::EscapedStringLiteral(s) => s.clone(),
            other => other.to_string(),
        },
        SqlExpr::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    }
}

fn text_rows(columns: &[&str], rows: Vec<Vec<String>>) -> Result<Output> {
    let schema = Arc::new(Schema::new(columns.iter().map(|c| Field::new(*c, DataType::Utf8, true)).collect::<Vec<_>>()));
    let arrays = (0..columns.len())
        .map(|i| Arc::new(rows.iter().map(|r| Some(r[i].clone())).collect::<StringArray>()) as _)
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    let stream = RecordBatchStreamAdapter::new(schema.clone(), futures::stream::iter(vec![Ok(batch)]));
    Ok(Output::Rows { schema, stream: Box::pin(stream) })
}

impl Session {
    /// A new session for `user`.
    pub fn new(engine: Arc<Engine>, user: &str, pid: i32) -> Self {
        let vars = Arc::new(RwLock::new(default_vars(user)));
        let info = SessionInfo { user: user.to_string(), vars: vars.clone(), pid };
        let make = |expose: bool| {
            let config = SessionConfig::new()
                .with_default_catalog_and_schema(DATABASE_NAME, "public")
                .with_information_schema(false)
                .with_create_default_catalog_and_schema(false);
            let mut config = config;
            config.options_mut().sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
            config.options_mut().execution.time_zone = Some("+00:00".to_string());
            // PostgreSQL semantics: `1.5` is numeric, and strings are text (not Utf8View).
            config.options_mut().sql_parser.parse_float_as_decimal = true;
            config.options_mut().sql_parser.map_string_types_to_utf8view = false;
            let state = datafusion::execution::SessionStateBuilder::new()
                .with_config(config)
                .with_default_features()
                .with_catalog_list(Arc::new(EddyCatalogList::new(engine.clone(), expose)))
                .with_physical_optimizer_rule(Arc::new(crate::overflow::CheckedArithmetic))
                .with_analyzer_rule(Arc::new(crate::text_cast::PgTextCasts))
                .build();
            let ctx = SessionContext::new_with_state(state);
            register_session_functions(&ctx, &info);
            ctx.register_udf(crate::enums::enum_value_udf());
            crate::pg::install(&ctx, &engine, &info);
            if engine.config.test_functions {
                crate::functions::register_test_functions(&ctx);
            }
            ctx
        };
        Self {
            ctx: make(false),
            dml_ctx: make(true),
            engine,
            vars,
            user: user.to_string(),
            notices: Vec::new(),
            changed: Vec::new(),
            in_transaction: false,
            savepoints: Vec::new(),
        }
    }

    /// The connected user.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// True inside `BEGIN ... COMMIT`.
    pub fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    /// Leaves the transaction block (COMMIT, ROLLBACK, or COMMIT of a failed block).
    pub fn end_transaction(&mut self) {
        self.in_transaction = false;
        self.savepoints.clear();
    }

    /// Position of the newest savepoint called `name`.
    fn savepoint_index(&self, name: &datafusion::sql::sqlparser::ast::Ident, what: &str) -> Result<usize> {
        if !self.in_transaction {
            return Err(user_err!(sqlstate::NO_ACTIVE_SQL_TRANSACTION, "{what} can only be used in transaction blocks"));
        }
        let name = ident_name(name);
        self.savepoints
            .iter()
            .rposition(|s| *s == name)
            .ok_or_else(|| user_err!(sqlstate::INVALID_SAVEPOINT_SPECIFICATION, "savepoint \"{name}\" does not exist"))
    }

    /// The schema unqualified names resolve to.
    pub fn default_schema(&self) -> String {
        let first = first_schema(&self.vars.read());
        if self.engine.catalog().schema(&first).is_some() {
            first
        } else {
            "public".into()
        }
    }

    /// Queues a NOTICE for the client.
    pub(crate) fn notice(&mut self, msg: &str) {
        self.notices.push(msg.to_string());
    }

    /// Takes the queued NOTICEs.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Takes the settings to report as ParameterStatus.
    pub fn take_changed_settings(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.changed)
    }

    /// Sets a setting from the connection's startup packet or `options` (`-c name=value`).
    pub fn set_startup_var(&mut self, name: &str, value: &str) {
        let key = canonical_var(name);
        let value = value.trim_matches('\'').to_string();
        self.vars.write().insert(key, value);
    }

    /// Current value of setting `name`.
    pub fn var(&self, name: &str) -> Option<String> {
        self.vars.read().get(&canonical_var(name)).cloned()
    }

    /// Splits and parses a query string into statements.
    pub fn parse(&self, sql: &str) -> Result<Vec<EddyStatement>> {
        let mut out = Vec::new();
        for piece in split_statements(sql) {
            let trimmed = piece.trim();
            if trimmed.eq_ignore_ascii_case("flush") {
                out.push(EddyStatement::Flush);
                continue;
            }
            if let Some(name) = strip_words(trimmed, &["verify", "materialized", "view"]) {
                out.push(EddyStatement::Verify(name.trim().to_string()));
                continue;
            }
            if strip_words(trimmed, &["show", "materialized", "views"]).is_some_and(|r| r.is_empty()) {
                out.push(EddyStatement::ShowViews);
                continue;
            }
            if let Some(name) = strip_words(trimmed, &["show", "create", "materialized", "view"]) {
                out.push(EddyStatement::ShowCreateView(name.trim().to_string()));
                continue;
            }
            let stmts = Parser::parse_sql(&PostgreSqlDialect {}, &piece)
                .map_err(|e| user_err!(sqlstate::SYNTAX_ERROR, "{}", e.to_string().trim_start_matches("sql parser error: ")))?;
            for s in stmts {
                out.push(EddyStatement::Sql(Box::new(s), piece.clone()));
            }
        }
        Ok(out)
    }

    fn state(&self, dml: bool) -> SessionState {
        let mut state = if dml { self.dml_ctx.state() } else { self.ctx.state() };
        state.config_mut().set_extension(Arc::new(QuerySnapshot(self.engine.store.snapshot())));
        let schema = self.default_schema();
        state.config_mut().options_mut().catalog.default_schema = schema;
        state
    }

    pub(crate) async fn plan(&self, stmt: &Statement, dml: bool) -> Result<(SessionState, LogicalPlan)> {
        let state = self.state(dml);
        let mut stmt = stmt.clone();
        self.expand_views_in(&mut stmt)?;
        if let Statement::Query(q) = &mut stmt {
            if let Some(applied) = self.apply_correlated(q).await {
                **q = applied;
            }
        }
        crate::rewrite::rewrite_statement(&mut stmt)?;
        // After the PostgreSQL rewrites, which name the column after the cast's type.
        self.rewrite_enum_casts(&mut stmt);
        let plan = state.statement_to_plan(DFStatement::Statement(Box::new(stmt))).await?;
        let plan = crate::rewrite::rewrite_plan(plan)?;
        Ok((state, plan))
    }

    /// `q` with the correlated subqueries DataFusion cannot decorrelate evaluated per outer
    /// value (see [`crate::pg::apply`]); `None` when there are none or one cannot be evaluated
    /// (planning then reports why).
    async fn apply_correlated(&self, q: &Query) -> Option<Query> {
        use crate::pg::apply;
        if !apply::may_have_site(q) {
            return None;
        }
        let mut q = q.clone();
        let mut changed = false;
        for _ in 0..16 {
            let Some(site) = apply::find_site(&mut q) else { break };
            let (key_schema, keys) = self.run_query(&site.keys_query).await.ok()?;
            if keys.iter().map(|b| b.num_rows()).sum::<usize>() > apply::MAX_KEYS {
                return None;
            }
            let mut types: Vec<String> = key_schema.fields().iter().map(|f| sql_type_name(f)).collect::<Option<_>>()?;
            let mut rows = Vec::new();
            let mut value_type: Option<String> = None;
            for batch in &keys {
                for r in 0..batch.num_rows() {
                    let literals = (0..batch.num_columns()).map(|c| sql_literal(batch.column(c), r)).collect::<Option<Vec<String>>>()?;
                    let exprs = literals.iter().zip(&types).map(|(l, t)| parse_sql_expr(&format!("CAST({l} AS {t})"))).collect::<Option<Vec<_>>>()?;
                    let one = apply::substitute(&site.subquery, &site.keys, &exprs);
                    let (schema, out) = self.run_query(&apply::value_query(&one)).await.ok()?;
                    let batch_out = out.iter().find(|b| b.num_rows() > 0);
                    value_type.get_or_insert(sql_type_name(schema.field(0))?);
                    let value = match batch_out {
                        Some(b) => sql_literal(b.column(0), 0)?,
                        None => "NULL".to_string(),
                    };
                    rows.push(literals.into_iter().chain([value]).collect::<Vec<_>>());
                }
            }
            let value_type = match value_type {
                Some(t) => t,
                None => {
                    // No outer row reaches the subquery: plan it once for its type.
                    let nulls = types.iter().map(|t| parse_sql_expr(&format!("CAST(NULL AS {t})"))).collect::<Option<Vec<_>>>()?;
                    let one = apply::substitute(&site.subquery, &site.keys, &nulls);
                    let stmt = Parser::parse_sql(&PostgreSqlDialect {}, &apply::value_query(&one)).ok()?.pop()?;
                    let (_, plan) = Box::pin(self.plan(&stmt, false)).await.ok()?;
                    sql_type_name(plan.schema().field(0))?
                }
            };
            types.push(value_type);
            let replacement = apply::lookup(&site.subquery, &site.keys, &rows, &types)?;
            apply::fill_slot(&mut q, replacement);
            changed = true;
        }
        changed.then_some(q)
    }

    /// A context for queries over in-memory tables (RETURNING, ON CONFLICT): the session's
    /// settings and functions, with a default catalog to register tables in.
    pub(crate) fn scratch_context(&self) -> SessionContext {
        let mut config = SessionConfig::new();
        config.options_mut().sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
        config.options_mut().execution.time_zone = Some("+00:00".to_string());
        config.options_mut().sql_parser.parse_float_as_decimal = true;
        config.options_mut().sql_parser.map_string_types_to_utf8view = false;
        let ctx = SessionContext::new_with_config(config);
        for udf in self.ctx.state().scalar_functions().values() {
            ctx.register_udf(udf.as_ref().clone());
        }
        ctx
    }

    /// Plans and runs a query statement given as text, collecting its rows.
    async fn run_query(&self, sql: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let stmt = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .map_err(|e| user_err!(sqlstate::SYNTAX_ERROR, "{e}"))?
            .pop()
            .ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "empty query"))?;
        let (state, plan) = Box::pin(self.plan(&stmt, false)).await?;
        let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
        Ok((schema, DataFrame::new(state, plan).collect().await?))
    }

    /// Parameter and result types of a statement (extended protocol Describe).
    pub async fn describe(&mut self, stmt: &EddyStatement) -> Result<Described> {
        let stmt = match stmt {
            EddyStatement::Sql(stmt, _) => stmt,
            EddyStatement::Verify(_) => return Ok(Described { params: vec![], declared: vec![], schema: Some(text_schema(&["verify"])) }),
            EddyStatement::ShowViews => return Ok(Described { params: vec![], declared: vec![], schema: Some(text_schema(&["Name"])) }),
            EddyStatement::ShowCreateView(_) => {
                return Ok(Described { params: vec![], declared: vec![], schema: Some(text_schema(&["Name", "Create Sql"])) })
            }
            EddyStatement::Flush => return Ok(Described { params: vec![], declared: vec![], schema: None }),
        };
        match stmt.as_ref() {
            Statement::Query(_) | Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Explain { .. } => {
                let dml = matches!(stmt.as_ref(), Statement::Update(_) | Statement::Delete(_));
                let conflict = crate::on_conflict::take_on_conflict(stmt)?;
                let stmt = conflict.as_ref().map(|(s, _)| s).unwrap_or(stmt);
                let returning = crate::returning::take_returning(stmt);
                let stmt = returning.as_ref().map(|(s, _)| s).unwrap_or(stmt);
                let (_, plan) = self.plan(stmt, dml).await?;
                let types = plan.get_parameter_types()?;
                let mut params = vec![None; types.len()];
                for (id, ty) in types {
                    if let Some(i) = id.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                        if i >= 1 {
                            if i > params.len() {
                                params.resize(i, None);
                            }
                            params[i - 1] = ty;
                        }
                    }
                }
                let schema = match (plan, &returning) {
                    (LogicalPlan::Dml(_), Some((s, items))) => Some(self.returning_schema(s, items).await?),
                    (LogicalPlan::Dml(_), None) => None,
                    (p, _) => Some(client_schema(p.schema().as_arrow())),
                };
                let declared = declared_param_types(stmt, params.len());
                Ok(Described { params, declared, schema })
            }
            Statement::ShowVariable { variable } => {
                let name = show_column_name(variable);
                Ok(Described { params: vec![], declared: vec![], schema: Some(Arc::new(Schema::new(vec![Field::new(name, DataType::Utf8, true)]))) })
            }
            _ => Ok(Described { params: vec![], declared: vec![], schema: None }),
        }
    }

    /// Executes one statement with positional parameter values.
    pub async fn execute(&mut self, stmt: &EddyStatement, params: Vec<ScalarValue>) -> Result<Output> {
        let (stmt, sql) = match stmt {
            EddyStatement::Flush => {
                self.engine.barrier.flush().await?;
                return Ok(command("FLUSH"));
            }
            EddyStatement::Verify(name) => {
                let lines = self.verify_mview(name).await?;
                return text_rows(&["verify"], lines.into_iter().map(|l| vec![l]).collect());
            }
            EddyStatement::ShowViews => {
                let schema = self.default_schema();
                let rows = self.engine.catalog().tables_in(&schema).into_iter().filter(|t| t.is_view()).map(|t| vec![t.name.clone()]).collect();
                return text_rows(&["Name"], rows);
            }
            EddyStatement::ShowCreateView(name) => {
                let v = self.lookup_view(name)?;
                return text_rows(&["Name", "Create Sql"], vec![vec![format!("{}.{}", v.schema, v.name), v.definition.clone()]]);
            }
            EddyStatement::Sql(s, sql) => (s.as_ref(), sql.as_str()),
        };
        match stmt {
            Statement::Explain { statement, .. } if matches!(statement.as_ref(), Statement::CreateView(cv) if cv.materialized) => {
                let Statement::CreateView(cv) = statement.as_ref() else { unreachable!("matched above") };
                let lines = self.explain_mview(&cv.query).await?;
                text_rows(&["QUERY PLAN"], lines.into_iter().map(|l| vec![l]).collect())
            }
            Statement::CreateView(cv) => {
                if !cv.materialized {
                    self.create_view(&cv.name, &cv.columns.iter().map(|c| c.name.clone()).collect::<Vec<_>>(), &cv.query, cv.or_replace, cv.if_not_exists, sql).await?;
                    return Ok(command("CREATE VIEW"));
                }
                if cv.or_replace || !cv.columns.is_empty() {
                    return Err(not_supported!("CREATE OR REPLACE and column lists are not supported for materialized views yet"));
                }
                self.create_mview(&cv.name, &cv.query, cv.if_not_exists, sql).await?;
                Ok(command("CREATE_MATERIALIZED_VIEW"))
            }
            Statement::Query(_) | Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Explain { .. } => {
                if let Statement::Insert(ins) = stmt {
                    if let datafusion::sql::sqlparser::ast::TableObject::TableName(name) = &ins.table {
                        self.require_table(name)?;
                    }
                }
                let dml = matches!(stmt, Statement::Update(_) | Statement::Delete(_));
                let conflict = crate::on_conflict::take_on_conflict(stmt)?;
                let stmt = conflict.as_ref().map(|(s, _)| s).unwrap_or(stmt);
                let conflict = conflict.as_ref().map(|(_, c)| c);
                let returning = crate::returning::take_returning(stmt);
                let stmt = returning.as_ref().map(|(s, _)| s).unwrap_or(stmt);
                let (state, plan) = self.plan(stmt, dml).await?;
                let plan = if params.is_empty() {
                    plan
                } else {
                    let plan_types = plan.get_parameter_types()?;
                    let values = params
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| match plan_types.get(&format!("${}", i + 1)) {
                            Some(Some(t)) if &v.data_type() != t => v.cast_to(t).map_err(EddyError::from),
                            _ => Ok(v),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    plan.with_param_values(ParamValues::List(values.into_iter().map(Into::into).collect()))?
                };
                match plan {
                    LogicalPlan::Dml(dml_stmt) => {
                        let tag = match stmt {
                            Statement::Insert(_) => "INSERT",
                            Statement::Update(_) => "UPDATE",
                            _ => "DELETE",
                        };
                        let (n, rows) = self.execute_dml(&state, dml_stmt, returning.is_some(), conflict).await?;
                        match (returning, rows) {
                            (Some((_, items)), Some((table, rows))) => {
                                let (schema, batches) = self.returning_rows(&table, rows, &items).await?;
                                // The wire layer appends the row count (one returned row per affected row).
                                let tag = if tag == "INSERT" { "INSERT 0".to_string() } else { tag.to_string() };
                                let stream = Box::pin(RecordBatchStreamAdapter::new(
                                    schema.clone(),
                                    futures::stream::iter(batches.into_iter().map(Ok)),
                                ));
                                Ok(Output::Returned { tag, schema, stream })
                            }
                            _ => Ok(Output::Command { tag: tag.into(), rows: Some(n) }),
                        }
                    }
                    LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) | LogicalPlan::Copy(_) => {
                        Err(not_supported!("statement is not supported: {sql}"))
                    }
                    plan => {
                        let df = DataFrame::new(state, plan);
                        let schema: SchemaRef = client_schema(df.schema().as_arrow());
                        let stream = df.execute_stream().await?;
                        Ok(Output::Rows { schema, stream })
                    }
                }
            }
            Statement::CreateTable(ct) => {
                self.create_table(ct, sql).await?;
                Ok(command("CREATE TABLE"))
            }
            Statement::CreateSchema { schema_name, if_not_exists, .. } => {
                self.create_schema(&schema_name.to_string(), *if_not_exists).await?;
                Ok(command("CREATE SCHEMA"))
            }
            Statement::Drop { object_type, if_exists, names, cascade, .. } => {
                let tag = self.drop_objects(*object_type, names, *if_exists, *cascade).await?;
                Ok(command(tag))
            }
            Statement::Set(set) => self.set(set),
            Statement::ShowVariable { variable } => self.show(variable),
            Statement::ShowTables { .. } => {
                let schema = self.default_schema();
                let rows = self.engine.catalog().tables_in(&schema).into_iter().filter(|t| t.kind == crate::catalog::RelationKind::Table).map(|t| vec![t.name.clone()]).collect();
                text_rows(&["Name"], rows)
            }
            Statement::Reset(r) => {
                let text = format!("{r}").to_ascii_lowercase();
                let name = text.trim_start_matches("reset").trim();
                let defaults = default_vars(&self.user);
                if name == "all" {
                    *self.vars.write() = defaults;
                } else {
                    let key = canonical_var(name);
                    if let Some(v) = defaults.get(&key) {
                        self.set_var(&key, v.clone());
                    } else {
                        self.vars.write().remove(&key);
                    }
                }
                Ok(command("RESET"))
            }
            Statement::StartTransaction { .. } => {
                if self.in_transaction {
                    self.notice("there is already a transaction in progress");
                }
                self.in_transaction = true;
                Ok(Output::TransactionStart("BEGIN".into()))
            }
            Statement::Commit { .. } => {
                if !self.in_transaction {
                    self.notice("there is no transaction in progress");
                }
                self.end_transaction();
                Ok(Output::TransactionEnd("COMMIT".into()))
            }
            Statement::Rollback { savepoint: Some(name), .. } => {
                let at = self.savepoint_index(name, "ROLLBACK TO SAVEPOINT")?;
                self.savepoints.truncate(at + 1);
                Ok(command("ROLLBACK"))
            }
            Statement::Rollback { .. } => {
                if !self.in_transaction {
                    self.notice("there is no transaction in progress");
                }
                self.end_transaction();
                Ok(Output::TransactionEnd("ROLLBACK".into()))
            }
            Statement::CreateType { name, representation } => match representation {
                Some(datafusion::sql::sqlparser::ast::UserDefinedTypeRepresentation::Enum { labels }) => {
                    self.create_enum(name, labels).await?;
                    Ok(command("CREATE TYPE"))
                }
                _ => Err(not_supported!("only enum types can be created (CREATE TYPE name AS ENUM (...))")),
            },
            Statement::AlterTable(at) => {
                self.alter_relation(at).await?;
                Ok(command(if at.table_type.is_some() { "ALTER" } else { "ALTER TABLE" }))
            }
            Statement::ShowDatabases { .. } => text_rows(&["Name"], vec![vec![DATABASE_NAME.to_string()]]),
            Statement::ShowSchemas { .. } => {
                let mut names: Vec<String> = self.engine.catalog().schemas().map(|s| s.name.clone()).collect();
                names.sort();
                text_rows(&["Name"], names.into_iter().map(|n| vec![n]).collect())
            }
            Statement::ExplainTable { table_name, .. } => self.describe_relation(table_name),
            Statement::ShowColumns { show_options, .. } => {
                let name = show_options
                    .show_in
                    .as_ref()
                    .and_then(|i| i.parent_name.clone())
                    .ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "SHOW COLUMNS needs FROM <relation>"))?;
                self.describe_relation(&name)
            }
            Statement::Comment { object_type, object_name, comment, if_exists } => {
                self.comment_on(*object_type, object_name, comment.clone(), *if_exists).await?;
                Ok(command("COMMENT"))
            }
            Statement::Truncate(t) => {
                // Every row goes through the table's source actor as a delete, so views see it.
                for target in &t.table_names {
                    self.require_table(&target.name)?;
                    let sql = format!("DELETE FROM {}", target.name);
                    let stmt = Parser::parse_sql(&PostgreSqlDialect {}, &sql).map_err(|e| user_err!(sqlstate::SYNTAX_ERROR, "{e}"))?.remove(0);
                    Box::pin(self.execute(&EddyStatement::Sql(Box::new(stmt), sql), vec![])).await?;
                }
                Ok(command("TRUNCATE TABLE"))
            }
            Statement::Savepoint { name } => {
                if !self.in_transaction {
                    return Err(user_err!(sqlstate::NO_ACTIVE_SQL_TRANSACTION, "SAVEPOINT can only be used in transaction blocks"));
                }
                self.savepoints.push(ident_name(name));
                Ok(command("SAVEPOINT"))
            }
            Statement::ReleaseSavepoint { name } => {
                let at = self.savepoint_index(name, "RELEASE SAVEPOINT")?;
                self.savepoints.truncate(at);
                Ok(command("RELEASE"))
            }
            Statement::Discard { .. } => {
                *self.vars.write() = default_vars(&self.user);
                Ok(command("DISCARD ALL"))
            }
            Statement::Deallocate { name, .. } => {
                let all = name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all");
                Ok(command(if all { "DEALLOCATE ALL" } else { "DEALLOCATE" }))
            }
            Statement::LISTEN { .. } => Ok(command("LISTEN")),
            Statement::UNLISTEN { .. } => Ok(command("UNLISTEN")),
            Statement::Copy { source, to, target, options, legacy_options, .. } => {
                self.copy(source, *to, target, options, legacy_options)
            }
            other => Err(not_supported!("statement is not supported: {}", first_words(&other.to_string()))),
        }
    }

    fn set_var(&mut self, key: &str, value: String) {
        if key == "search_path" {
            let schema = value.split(',').map(|s| s.trim().trim_matches('"')).find(|s| *s != "$user" && !s.is_empty());
            if let Some(s) = schema {
                if self.engine.catalog().schema(s).is_none() {
                    self.notice(&format!("schema \"{s}\" does not exist"));
                }
            }
        }
        self.vars.write().insert(key.to_string(), value.clone());
        if REPORTED.contains(&key) {
            self.changed.push((display_var_name(key).to_string(), value));
        }
    }

    fn set(&mut self, set: &Set) -> Result<Output> {
        match set {
            Set::SingleAssignment { variable, values, .. } => {
                let key = canonical_var(&variable.to_string());
                let value = values.iter().map(value_text).collect::<Vec<_>>().join(", ");
                let value = if value.eq_ignore_ascii_case("default") {
                    default_vars(&self.user).get(&key).cloned().unwrap_or_default()
                } else {
                    value
                };
                let value = match key.as_str() {
                    "timezone" => normalize_timezone(&value)?,
                    "barrier_interval" | "barrier_interval_ms" => {
                        let ms = parse_millis(&value)?;
                        self.engine.barrier.set_interval(std::time::Duration::from_millis(ms));
                        format!("{ms}ms")
                    }
                    "client_encoding" => {
                        let v = value.to_ascii_uppercase().replace('-', "");
                        if v != "UTF8" && v != "UNICODE" {
                            return Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "client encoding \"{value}\" is not supported; Eddy speaks UTF8"));
                        }
                        "UTF8".to_string()
                    }
                    _ => value,
                };
                self.set_var(&key, value);
                Ok(command("SET"))
            }
            Set::SetTimeZone { value, .. } => {
                let v = normalize_timezone(&value_text(value))?;
                self.set_var("timezone", v);
                Ok(command("SET"))
            }
            _ => Ok(command("SET")),
        }
    }

    fn show(&mut self, variable: &[datafusion::sql::sqlparser::ast::Ident]) -> Result<Output> {
        let name = show_column_name(variable);
        if name == "all" {
            let rows = self.vars.read().iter().map(|(k, v)| vec![display_var_name(k).to_string(), v.clone(), String::new()]).collect();
            return text_rows(&["name", "setting", "description"], rows);
        }
        let value = self
            .var(&name)
            .ok_or_else(|| user_err!(sqlstate::UNDEFINED_OBJECT, "unrecognized configuration parameter \"{name}\""))?;
        text_rows(&[display_var_name(&canonical_var(&name))], vec![vec![value]])
    }

    fn copy(
        &mut self,
        source: &CopySource,
        to: bool,
        target: &CopyTarget,
        options: &[CopyOption],
        legacy: &[CopyLegacyOption],
    ) -> Result<Output> {
        if to || !matches!(target, CopyTarget::Stdin) {
            return Err(not_supported!("only COPY ... FROM STDIN is supported"));
        }
        let CopySource::Table { table_name, columns } = source else {
            return Err(not_supported!("COPY (query) FROM is not valid"));
        };
        let (schema, name) = resolve_name(self, table_name)?;
        let table = self
            .engine
            .catalog()
            .table(&schema, &name)
            .cloned()
            .ok_or_else(|| user_err!(sqlstate::UNDEFINED_TABLE, "relation \"{name}\" does not exist"))?;
        let cols = if columns.is_empty() {
            (0..table.columns.len()).collect()
        } else {
            columns
                .iter()
                .map(|c| {
                    let n = normalize_ident(&c.to_string());
                    table.columns.iter().position(|tc| tc.name == n).ok_or_else(|| {
                        user_err!(sqlstate::UNDEFINED_COLUMN, "column \"{n}\" of relation \"{name}\" does not exist")
                    })
                })
                .collect::<Result<Vec<_>>>()?
        };
        let mut copy = CopyIn { table, columns: cols, format: CopyFormat::Text, delimiter: '\t', null: "\\N".into(), header: false, quote: '"' };
        let mut delimiter = None;
        let mut null = None;
        for o in options {
            match o {
                CopyOption::Format(f) => match f.value.to_ascii_lowercase().as_str() {
                    "csv" => copy.format = CopyFormat::Csv,
                    "text" => copy.format = CopyFormat::Text,
                    other => return Err(not_supported!("COPY format \"{other}\" is not supported")),
                },
                CopyOption::Delimiter(c) => delimiter = Some(*c),
                CopyOption::Null(s) => null = Some(s.clone()),
                CopyOption::Header(h) => copy.header = *h,
                CopyOption::Quote(q) => copy.quote = *q,
                _ => {}
            }
        }
        for o in legacy {
            match o {
                CopyLegacyOption::Csv(csv_opts) => {
                    copy.format = CopyFormat::Csv;
                    for c in csv_opts {
                        match c {
                            CopyLegacyCsvOption::Header => copy.header = true,
                            CopyLegacyCsvOption::Quote(q) => copy.quote = *q,
                            _ => {}
                        }
                    }
                }
                CopyLegacyOption::Delimiter(c) => delimiter = Some(*c),
                CopyLegacyOption::Null(s) => null = Some(s.clone()),
                CopyLegacyOption::Header => copy.header = true,
                _ => {}
            }
        }
        if copy.format == CopyFormat::Csv {
            copy.delimiter = ',';
            copy.null = String::new();
        }
        if let Some(d) = delimiter {
            copy.delimiter = d;
        }
        if let Some(n) = null {
            copy.null = n;
        }
        Ok(Output::CopyIn(copy))
    }

    /// `DESCRIBE name` / `SHOW COLUMNS FROM name`: each visible column's name, type and comment.
    fn describe_relation(&self, name: &datafusion::sql::sqlparser::ast::ObjectName) -> Result<Output> {
        let (schema, rel) = resolve_name(self, name)?;
        let entry = self
            .engine
            .catalog()
            .table(&schema, &rel)
            .cloned()
            .ok_or_else(|| user_err!(sqlstate::UNDEFINED_TABLE, "relation \"{rel}\" does not exist"))?;
        let rows = entry
            .columns
            .iter()
            .filter(|c| !c.hidden)
            .map(|c| vec![c.name.clone(), c.ty.pg_name(), entry.comments.columns.get(&c.name).cloned().unwrap_or_default()])
            .collect();
        text_rows(&["Name", "Type", "Description"], rows)
    }

    /// Evaluates column `col`'s DEFAULT for `n` rows.
    pub(crate) fn evaluate_default(&self, table: &crate::catalog::TableCatalog, col: usize, n: usize) -> Result<arrow::array::ArrayRef> {
        let defaults = self.engine.column_defaults(table);
        let Some(expr) = defaults.get(&table.columns[col].name) else {
            return Ok(arrow::array::new_null_array(&table.columns[col].ty.to_arrow(), n));
        };
        let state = self.ctx.state();
        let df_schema = datafusion::common::DFSchema::empty();
        let physical = state.create_physical_expr(expr.clone(), &df_schema)?;
        let batch = RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            vec![],
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        let arr = physical.evaluate(&batch)?.into_array(n)?;
        Ok(arrow::compute::cast(&arr, &table.columns[col].ty.to_arrow())?)
    }
}

fn text_schema(columns: &[&str]) -> SchemaRef {
    Arc::new(Schema::new(columns.iter().map(|c| Field::new(*c, DataType::Utf8, true)).collect::<Vec<_>>()))
}

fn command(tag: &str) -> Output {
    Output::Command { tag: tag.to_string(), rows: None }
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn show_column_name(variable: &[datafusion::sql::sqlparser::ast::Ident]) -> String {
    let joined = variable.iter().map(|i| i.value.to_ascii_lowercase()).collect::<Vec<_>>().join(" ");
    match joined.as_str() {
        "transaction isolation level" => "transaction_isolation".into(),
        "time zone" => "timezone".into(),
        other => other.replace(' ', "_"),
    }
}

/// Parses `250`, `250ms` or `1s` as milliseconds.
fn parse_millis(v: &str) -> Result<u64> {
    let t = v.trim().to_ascii_lowercase();
    let (num, mul) = if let Some(n) = t.strip_suffix("ms") {
        (n.trim(), 1)
    } else if let Some(n) = t.strip_suffix('s') {
        (n.trim(), 1000)
    } else {
        (t.as_str(), 1)
    };
    match num.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n * mul),
        _ => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "invalid value for barrier_interval: \"{v}\" (use e.g. 250ms or 1s)")),
    }
}

fn normalize_timezone(v: &str) -> Result<String> {
    let t = v.trim().trim_matches('\'');
    let upper = t.to_ascii_uppercase();
    if ["UTC", "ETC/UTC", "GMT", "Z", "ZULU", "UCT", "LOCAL", "DEFAULT", "ETC/GMT", "+00:00", "0"].contains(&upper.as_str()) {
        return Ok(if upper == "ETC/UTC" { "Etc/UTC".into() } else { "UTC".into() });
    }
    Err(user_err!(
        sqlstate::FEATURE_NOT_SUPPORTED,
        "time zone \"{t}\" is not supported yet; Eddy sessions run in UTC"
    ))
}

/// The SQL type name of a column (`None` for types without one, e.g. arrays).
fn sql_type_name(f: &Field) -> Option<String> {
    if f.data_type() == &DataType::UInt32 {
        return Some("oid".to_string());
    }
    eddy_common::types::ColumnType::from_arrow_field(f).map(|t| t.pg_name())
}

/// Value `row` of `col` as a quoted SQL text literal (`NULL` when null).
fn sql_literal(col: &arrow::array::ArrayRef, row: usize) -> Option<String> {
    if col.is_null(row) {
        return Some("NULL".to_string());
    }
    let text = arrow::compute::cast(&col.slice(row, 1), &DataType::Utf8).ok()?;
    let text = text.as_any().downcast_ref::<StringArray>()?.value(0).to_string();
    Some(format!("'{}'", text.replace('\'', "''")))
}

fn parse_sql_expr(sql: &str) -> Option<datafusion::sql::sqlparser::ast::Expr> {
    let mut parser = Parser::new(&PostgreSqlDialect {}).try_with_sql(sql).ok()?;
    parser.parse_expr().ok()
}

/// The type OIDs of `$n` placeholders cast explicitly in `stmt` (`$1::oid[]`).
fn declared_param_types(stmt: &Statement, n: usize) -> Vec<Option<u32>> {
    use datafusion::sql::sqlparser::ast::visit_expressions;
    let mut out = vec![None; n];
    let _ = visit_expressions(stmt, |e| {
        if let SqlExpr::Cast { expr, data_type, .. } = e {
            if let SqlExpr::Value(v) = expr.as_ref() {
                if let Value::Placeholder(p) = &v.value {
                    let i = p.strip_prefix('$').and_then(|d| d.parse::<usize>().ok()).filter(|i| (1..=n).contains(i));
                    if let Some(i) = i {
                        if out[i - 1].is_none() {
                            out[i - 1] = crate::pg::types::type_oid_by_name(&data_type.to_string());
                        }
                    }
                }
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    out
}

/// An identifier as PostgreSQL stores it: folded to lower case unless quoted.
fn ident_name(i: &datafusion::sql::sqlparser::ast::Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

/// `schema` with the output names clients see (repeated names unmarked, see
/// [`crate::pg::colnames::DUPLICATE_MARK`]).
pub(crate) fn client_schema(schema: &Schema) -> SchemaRef {
    use crate::pg::colnames::output_name;
    if !schema.fields().iter().any(|f| output_name(f.name()) != f.name()) {
        return Arc::new(schema.clone());
    }
    let fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone().with_name(output_name(f.name()))).collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// Refuses a relation definition whose columns repeat a name (PostgreSQL's 42701).
pub(crate) fn unique_column_names<'a>(names: impl Iterator<Item = &'a str>) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(user_err!(sqlstate::DUPLICATE_COLUMN, "column \"{n}\" specified more than once"));
        }
    }
    Ok(())
}

/// Plans `sql` (with the PostgreSQL rewrites) in a scratch context holding in-memory tables and
/// runs it: the client-visible schema and the rows.
pub(crate) async fn run_scratch(ctx: &SessionContext, sql: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let mut stmt = Parser::parse_sql(&PostgreSqlDialect {}, sql)
        .map_err(|e| user_err!(sqlstate::SYNTAX_ERROR, "{e}"))?
        .pop()
        .ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "empty statement"))?;
    crate::rewrite::rewrite_statement(&mut stmt)?;
    let state = ctx.state();
    let plan = state.statement_to_plan(DFStatement::Statement(Box::new(stmt))).await?;
    let plan = crate::rewrite::rewrite_plan(plan)?;
    let schema = client_schema(plan.schema().as_arrow());
    Ok((schema, DataFrame::new(state, plan).collect().await?))
}
