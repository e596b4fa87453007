//! The PostgreSQL wire protocol, on top of the `pgwire` crate: startup (trust or SCRAM-SHA-256),
//! simple and extended query, COPY FROM STDIN, cancel. Each connection owns one
//! [`Session`]; every statement runs under `catch_unwind`, so a panic becomes an `XX000` error
//! for that statement and the connection and server carry on.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::atomic::AtomicI32;
use std::sync::Arc;

use arrow::datatypes::{Field, SchemaRef};
use async_trait::async_trait;
use bytes::{BufMut, BytesMut};
use datafusion::execution::SendableRecordBatchStream;
use eddy_common::error::sqlstate;
use eddy_common::{EddyError, Result};
use eddy_sql::frontend::copy_in::CopyIn;
use eddy_sql::frontend::cursor::FetchSpec;
use eddy_sql::frontend::statement::{in_failed_transaction, TxControl};
use eddy_sql::{Described, EddyStatement, Engine, Output, Session};
use futures::{Sink, SinkExt, StreamExt};
use pgwire::api::auth::sasl::scram::ScramAuth;
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::StartupHandler;
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{CopyResponse, FieldFormat, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::PortalStore;
use pgwire::api::stmt::StoredStatement;
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionManager, PgWireServerHandlers, Type, DEFAULT_NAME,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone};
use pgwire::messages::data::DataRow;
use pgwire::messages::extendedquery::{Parse, ParseComplete};
use pgwire::messages::response::{CommandComplete, NoticeResponse, TransactionStatus};
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::PgWireBackendMessage;
use datafusion::sql::sqlparser::ast::{DiscardObject, Statement};
use tokio::sync::Mutex;

use crate::auth::Credentials;
use crate::encode::{decode_param, pg_type_of, write_binary, write_text};
use eddy_sql::catalog::users::SCRAM_ITERATIONS;
use crate::panics;
use crate::respond::{error_info, to_pg};
use crate::run::{guarded, guarded_sql, run_statement, statement_deadline, statement_text, RunContext};

/// A connection's session, kept in pgwire's per-connection extensions.
type SessionSlot = Mutex<Session>;

/// Names of the connection's named prepared statements (for `DEALLOCATE ALL` / `DISCARD ALL`,
/// which pgwire's statement store cannot enumerate).
#[derive(Default)]
struct StatementNames(parking_lot::Mutex<BTreeSet<String>>);

/// The statement-store side of `DEALLOCATE name`, `DEALLOCATE ALL` and `DISCARD ALL`, applied
/// before the session runs the statement (which resets settings and returns the tag).
/// Deallocating an unknown name is `26000`, like PostgreSQL.
fn release_prepared<C>(client: &C, stmt: &EddyStatement) -> Result<()>
where
    C: ClientInfo + ClientPortalStore,
    C::PortalStore: PortalStore,
{
    let EddyStatement::Sql(sql, _) = stmt else { return Ok(()) };
    let names = client.session_extensions().get_or_insert_with(StatementNames::default);
    let all = match sql.as_ref() {
        Statement::Deallocate { name, .. } if name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all") => true,
        Statement::Discard { object_type: DiscardObject::ALL } => {
            client.portal_store().clear_portals();
            true
        }
        Statement::Deallocate { name, .. } => {
            // Unquoted names fold to lower case, as in PostgreSQL.
            let name = if name.quote_style.is_none() { name.value.to_lowercase() } else { name.value.clone() };
            if !names.0.lock().remove(&name) {
                return Err(EddyError::user(
                    sqlstate::UNDEFINED_PREPARED_STATEMENT,
                    format!("prepared statement \"{name}\" does not exist"),
                ));
            }
            client.portal_store().rm_statement(&name);
            return Ok(());
        }
        _ => return Ok(()),
    };
    if all {
        for name in std::mem::take(&mut *names.0.lock()) {
            client.portal_store().rm_statement(&name);
        }
    }
    Ok(())
}

/// psycopg's server-side cursors describe a DECLAREd cursor as the portal of its name
/// (DescribePortal; psycopg declares through the extended protocol), as PostgreSQL keeps a
/// cursor as a portal: after `stmt` ran, a DECLARE
/// registers that portal (its Execute fetches the cursor's remaining rows) and a CLOSE drops it.
fn track_cursor_portal<C>(client: &C, session: &Session, stmt: &EddyStatement)
where
    C: ClientPortalStore,
    C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
{
    match stmt {
        EddyStatement::Declare(spec) => {
            let Ok(schema) = session.cursor_schema(&spec.name) else { return };
            let fetch = EddyStatement::Fetch(FetchSpec { name: spec.name.clone(), count: None, timeout: None });
            let described = Described { params: vec![], declared: vec![], schema: Some(schema) };
            let stored = StoredStatement::new(String::new(), Arc::new(Prepared { stmt: fetch, described }), vec![]);
            client.portal_store().put_portal(Arc::new(Portal::new_cursor(spec.name.clone(), Arc::new(stored))));
        }
        EddyStatement::Close(Some(name)) => client.portal_store().rm_portal(name),
        _ => {}
    }
}

/// What a prepared statement remembers.
#[derive(Debug)]
pub struct Prepared {
    /// The statement (`None` for an empty query).
    stmt: EddyStatement,
    /// Parameter and result types.
    described: Described,
}

/// Shared by every connection.
pub struct Handlers {
    /// The database.
    engine: Arc<Engine>,
    /// Cancel-request routing.
    manager: Arc<ConnectionManager>,
    /// Backend pid sequence.
    next_pid: AtomicI32,
}

impl Handlers {
    /// Handlers serving `engine`.
    pub fn new(engine: Arc<Engine>) -> Arc<Self> {
        Arc::new(Self { engine, manager: Arc::new(ConnectionManager::new()), next_pid: AtomicI32::new(1000) })
    }
}

/// Names the parameter in a decoding error, as PostgreSQL does.
fn param_error(mut e: EddyError, i: usize) -> EddyError {
    if e.kind == eddy_common::error::ErrorKind::User {
        e.message = format!("{} (bind parameter ${})", e.message, i + 1);
    }
    e
}


/// A setting of `client`'s session, if it has one and the session is not busy.
pub(crate) fn session_setting<C: ClientInfo>(client: &C, name: &str) -> Option<String> {
    let slot = client.session_extensions().get::<SessionSlot>()?;
    let session = slot.try_lock().ok()?;
    session.var(name)
}

/// The session of `client`, created on first use from the startup parameters.
fn session_of<C: ClientInfo>(engine: &Arc<Engine>, client: &C) -> Arc<SessionSlot> {
    client.session_extensions().get_or_insert_with(|| {
        let meta = client.metadata();
        let user = meta.get("user").cloned().unwrap_or_else(|| "root".into());
        let (pid, _) = client.pid_and_secret_key();
        let mut s = Session::new(engine.clone(), &user, pid);
        for (k, v) in meta {
            match k.as_str() {
                "user" | "database" | "options" | "replication" => {}
                "client_encoding" | "DateStyle" | "TimeZone" => {}
                other => s.set_startup_var(other, v),
            }
        }
        if let Some(tz) = meta.get("TimeZone") {
            s.set_startup_var("timezone", tz);
        }
        if let Some(opts) = meta.get("options") {
            for (k, v) in parse_options(opts) {
                s.set_startup_var(&k, &v);
            }
        }
        Mutex::new(s)
    })
}

/// Runs one statement (see [`run_statement`]), passing the NOTICEs it sends while it runs
/// (progress of a long CREATE MATERIALIZED VIEW) straight to the client.
async fn run_with_notices<C>(
    client: &mut C,
    session: &mut Session,
    stmt: &EddyStatement,
    params: Vec<datafusion::scalar::ScalarValue>,
    deadline: Option<tokio::time::Instant>,
) -> PgWireResult<Result<Output>>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    session.set_live_notices(Some(tx));
    let result = {
        let run = run_statement(session, stmt, params, deadline);
        tokio::pin!(run);
        loop {
            tokio::select! {
                r = &mut run => break r,
                Some(n) = rx.recv() => {
                    let info = ErrorInfo::new("NOTICE".into(), "00000".into(), n);
                    client.send(PgWireBackendMessage::NoticeResponse(NoticeResponse::from(info))).await?;
                }
            }
        }
    };
    session.set_live_notices(None);
    Ok(result)
}

/// Sends the session's queued NOTICEs and changed settings.
async fn send_side_messages<C>(client: &mut C, session: &mut Session) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    for n in session.take_notices() {
        let info = ErrorInfo::new("NOTICE".into(), "00000".into(), n);
        client.feed(PgWireBackendMessage::NoticeResponse(NoticeResponse::from(info))).await?;
    }
    for (k, v) in session.take_changed_settings() {
        client.feed(PgWireBackendMessage::ParameterStatus(ParameterStatus::new(k, v))).await?;
    }
    Ok(())
}

/// Column `i`'s format; pgwire's `Format::format_for` indexes out of bounds when a client
/// sends fewer result formats than there are columns.
fn format_of(format: &Format, i: usize) -> FieldFormat {
    match format {
        Format::Individual(codes) => codes.get(i).map(|c| FieldFormat::from(*c)).unwrap_or(FieldFormat::Text),
        other => other.format_for(i),
    }
}

fn field_infos(schema: &SchemaRef, format: &Format) -> Vec<FieldInfo> {
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| FieldInfo::new(f.name().clone(), None, None, pg_type_of(f), format_of(format, i)))
        .collect()
}

/// Streams query results as DataRows in the formats the client asked for, ending with `57014`
/// if `deadline` passes first.
fn rows_response(schema: SchemaRef, stream: SendableRecordBatchStream, format: &Format, ctx: &RunContext) -> QueryResponse {
    let fields = Arc::new(field_infos(&schema, format));
    let meta: Arc<Vec<(Field, Type, FieldFormat)>> = Arc::new(
        schema.fields().iter().zip(fields.iter()).map(|(f, fi)| (f.as_ref().clone(), fi.datatype().clone(), fi.format())).collect(),
    );
    let stream = crate::limits::with_deadline(stream, ctx.deadline);
    let (sql, engine) = (ctx.sql.clone(), ctx.engine.clone());
    let rows = panics::guard_stream(stream).flat_map(move |item| {
        let out: Vec<PgWireResult<DataRow>> = match item {
            Err(p) => vec![Err(to_pg(panics::report(p, &sql)))],
            Ok(Err(e)) => vec![Err(to_pg(e.into()))],
            Ok(Ok(batch)) => encode_batch(&batch, &meta),
        };
        // The statement ends with this error (its run counted as a success when it started).
        if out.last().is_some_and(Result::is_err) {
            engine.statements.errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        futures::stream::iter(out)
    });
    QueryResponse::new(fields, rows)
}

fn encode_batch(batch: &arrow::array::RecordBatch, meta: &[(Field, Type, FieldFormat)]) -> Vec<PgWireResult<DataRow>> {
    let mut rows = Vec::with_capacity(batch.num_rows());
    let mut text = String::new();
    for r in 0..batch.num_rows() {
        let mut buf = BytesMut::with_capacity(16 * meta.len());
        for (c, (field, ty, fmt)) in meta.iter().enumerate() {
            let col = batch.column(c);
            let len_at = buf.len();
            buf.put_i32(-1);
            let present = match fmt {
                FieldFormat::Text => {
                    text.clear();
                    match write_text(col, r, field, &mut text) {
                        Ok(true) => {
                            buf.put_slice(text.as_bytes());
                            true
                        }
                        Ok(false) => false,
                        Err(e) => return vec![Err(to_pg(e))],
                    }
                }
                FieldFormat::Binary => match write_binary(col, r, ty, field, &mut buf) {
                    Ok(p) => p,
                    Err(e) => return vec![Err(to_pg(e))],
                },
            };
            if present {
                let n = (buf.len() - len_at - 4) as i32;
                buf[len_at..len_at + 4].copy_from_slice(&n.to_be_bytes());
            }
        }
        rows.push(Ok(DataRow::new(buf, meta.len() as i16)));
    }
    rows
}

fn copy_response(copy: &CopyIn) -> CopyResponse {
    let n = copy.columns.len();
    CopyResponse::new(0, n, futures::stream::empty::<PgWireResult<CopyData>>())
}

/// Turns a statement's output into a wire response (and remembers COPY state).
fn respond(output: Output, format: &Format, ctx: &RunContext) -> Response {
    match output {
        Output::Rows { schema, stream } => Response::Query(rows_response(schema, stream, format, ctx)),
        Output::Returned { tag, schema, stream } => {
            let mut q = rows_response(schema, stream, format, ctx);
            q.set_command_tag(&tag);
            Response::Query(q)
        }
        Output::Command { tag, rows } => {
            let t = Tag::new(&tag);
            let t = match (tag.as_str(), rows) {
                ("INSERT", Some(n)) => t.with_oid(0).with_rows(n),
                (_, Some(n)) => t.with_rows(n),
                _ => t,
            };
            Response::Execution(t)
        }
        Output::TransactionStart(tag) => Response::TransactionStart(Tag::new(&tag)),
        Output::TransactionEnd(tag) => Response::TransactionEnd(Tag::new(&tag)),
        // The session holds the COPY's state; the data arrives through the CopyHandler.
        Output::CopyIn(copy) => Response::CopyIn(copy_response(&copy)),
        Output::CopyOut { schema, stream, format } => {
            let stream = crate::limits::with_deadline(stream, ctx.deadline);
            Response::CopyOut(crate::copy_out::copy_out_response(schema, stream, format, ctx.sql.clone()))
        }
    }
}

#[async_trait]
impl SimpleQueryHandler for Handlers {
    /// `ROLLBACK TO SAVEPOINT` in a failed transaction block returns it to "in transaction";
    /// pgwire derives the ReadyForQuery status from the status before the query, so it is
    /// restored before the query runs (an unknown savepoint fails and marks the block failed
    /// again).
    async fn on_query<C>(&self, client: &mut C, query: pgwire::messages::simplequery::Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if client.transaction_status() == TransactionStatus::Error {
            let slot = session_of(&self.engine, client);
            // Only a ROLLBACK TO leaves the failed state; text that does not parse is not one,
            // and its parse error is reported when the query is handled below.
            let first = slot.lock().await.parse(&query.query).ok().and_then(|s| s.into_iter().next());
            if first.is_some_and(|s| s.tx_control() == TxControl::RollbackTo) {
                client.set_transaction_status(TransactionStatus::Transaction);
            }
        }
        crate::respond::on_query(self, client, query).await
    }

    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let slot = session_of(&self.engine, client);
        let mut session = slot.lock().await;
        let stmts = match session.parse(query) {
            Ok(s) => s,
            Err(e) => return Ok(vec![Response::Error(Box::new(error_info(e)))]),
        };
        if stmts.is_empty() {
            return Ok(vec![Response::EmptyQuery]);
        }
        let mut responses = Vec::with_capacity(stmts.len());
        let mut status = client.transaction_status();
        for stmt in &stmts {
            if status == TransactionStatus::Error {
                match stmt.tx_control() {
                    TxControl::Other => {
                        responses.push(Response::Error(Box::new(error_info(in_failed_transaction()))));
                        break;
                    }
                    TxControl::Commit => {
                        session.end_transaction();
                        responses.push(Response::TransactionEnd(Tag::new("ROLLBACK")));
                        status = TransactionStatus::Idle;
                        continue;
                    }
                    TxControl::Rollback | TxControl::RollbackTo => {}
                }
            }
            if let Err(e) = release_prepared(client, stmt) {
                responses.push(Response::Error(Box::new(error_info(e))));
                break;
            }
            let ctx = RunContext { sql: statement_text(stmt), deadline: statement_deadline(&session), engine: session.engine().clone() };
            let result = run_with_notices(client, &mut session, stmt, vec![], ctx.deadline).await?;
            send_side_messages(client, &mut session).await?;
            match result {
                Ok(output) => {
                    let is_copy = matches!(output, Output::CopyIn(_));
                    status = match (&output, stmt.tx_control()) {
                        (Output::TransactionStart(_), _) if status == TransactionStatus::Idle => TransactionStatus::Transaction,
                        (Output::TransactionEnd(_), _) => TransactionStatus::Idle,
                        (_, TxControl::RollbackTo) => TransactionStatus::Transaction,
                        _ => status,
                    };
                    responses.push(respond(output, &Format::UnifiedText, &ctx));
                    if is_copy {
                        break;
                    }
                }
                Err(e) => {
                    responses.push(Response::Error(Box::new(error_info(e))));
                    break;
                }
            }
        }
        Ok(responses)
    }
}

/// Parses statements for the extended protocol.
pub struct EddyQueryParser {
    engine: Arc<Engine>,
}

/// Parameter `i`'s type as reported to clients: the type it is cast to in the statement
/// (`$1::oid[]`), else the type Eddy inferred.
fn described_param_type(d: &eddy_sql::Described, i: usize) -> Type {
    d.declared.get(i).copied().flatten().and_then(Type::from_oid).unwrap_or_else(|| pg_param_type(&d.params[i]))
}

fn pg_param_type(t: &Option<arrow::datatypes::DataType>) -> Type {
    match t {
        Some(dt) => pg_type_of(&Field::new("", dt.clone(), true)),
        None => Type::TEXT,
    }
}

#[async_trait]
impl QueryParser for EddyQueryParser {
    type Statement = Arc<Prepared>;

    async fn parse_sql<C>(&self, client: &C, sql: &str, types: &[Option<Type>]) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let slot = session_of(&self.engine, client);
        let mut session = slot.lock().await;
        let mut stmts = session.parse(sql).map_err(to_pg)?;
        if stmts.len() > 1 {
            return Err(to_pg(EddyError::user(
                sqlstate::SYNTAX_ERROR,
                "cannot insert multiple commands into a prepared statement",
            )));
        }
        let Some(mut stmt) = stmts.pop() else { return Ok(None) };
        let oids: Vec<Option<u32>> = types.iter().map(|t| t.as_ref().map(Type::oid)).collect();
        eddy_sql::frontend::param_types::declare_parameter_types(&mut stmt, &oids);
        let described = guarded_sql(sql, session.describe(&stmt)).await.map_err(to_pg)?;
        Ok(Some(Arc::new(Prepared { stmt, described })))
    }

    fn get_parameter_types(&self, stmt: &Self::Statement) -> PgWireResult<Vec<Type>> {
        Ok((0..stmt.described.params.len()).map(|i| described_param_type(&stmt.described, i)).collect())
    }

    fn get_result_schema(&self, stmt: &Self::Statement, column_format: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
        Ok(match &stmt.described.schema {
            Some(s) => field_infos(s, column_format.unwrap_or(&Format::UnifiedText)),
            None => vec![],
        })
    }
}

#[async_trait]
impl ExtendedQueryHandler for Handlers {
    type Statement = Arc<Prepared>;
    type QueryParser = EddyQueryParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        Arc::new(EddyQueryParser { engine: self.engine.clone() })
    }

    /// As for the simple protocol: `ROLLBACK TO SAVEPOINT` makes a failed block usable again.
    async fn on_execute<C>(&self, client: &mut C, message: pgwire::messages::extendedquery::Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if client.transaction_status() == TransactionStatus::Error {
            let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
            if let Some(pgwire::api::store::Entry::Value(portal)) = client.portal_store().get_portal(name) {
                if portal.statement.statement.stmt.tx_control() == TxControl::RollbackTo {
                    client.set_transaction_status(TransactionStatus::Transaction);
                }
            }
        }
        crate::respond::on_execute(self, client, message).await
    }

    /// pgwire's default Bind handling, except that BindComplete is queued, not flushed: it goes
    /// out with the Execute's rows at the next flush (a Sync or Flush, as PostgreSQL does), one
    /// write per prepared query instead of two.
    async fn on_bind<C>(&self, client: &mut C, message: pgwire::messages::extendedquery::Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statement_name = message.statement_name.as_deref().unwrap_or(DEFAULT_NAME);
        let portal_name = message.portal_name.as_deref().unwrap_or(DEFAULT_NAME);
        match client.portal_store().get_statement(statement_name) {
            Some(pgwire::api::store::Entry::Value(statement)) => {
                let portal = Portal::try_new(&message, statement)?;
                client.portal_store().put_portal(Arc::new(portal));
            }
            Some(pgwire::api::store::Entry::Empty) => {
                if !message.parameters.is_empty() {
                    return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                        "ERROR".to_owned(),
                        "08P01".to_owned(),
                        format!("bind message supplies {} parameters, but prepared statement {statement_name:?} requires 0", message.parameters.len()),
                    ))));
                }
                client.portal_store().put_empty_portal(portal_name);
            }
            None => return Err(PgWireError::StatementNotFound(statement_name.to_owned())),
        }
        client.feed(PgWireBackendMessage::BindComplete(pgwire::messages::extendedquery::BindComplete::new())).await?;
        Ok(())
    }

    /// pgwire's default Parse handling, plus remembering the statement's name for
    /// `DEALLOCATE ALL` / `DISCARD ALL`.
    async fn on_parse<C>(&self, client: &mut C, message: Parse) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| DEFAULT_NAME.to_owned());
        match StoredStatement::parse(client, &message, self.query_parser()).await? {
            Some(stmt) => client.portal_store().put_statement(Arc::new(stmt)),
            None => client.portal_store().put_empty_statement(&name),
        }
        if name != DEFAULT_NAME {
            client.session_extensions().get_or_insert_with(StatementNames::default).0.lock().insert(name);
        }
        client.feed(PgWireBackendMessage::ParseComplete(ParseComplete::new())).await?;
        Ok(())
    }

    async fn do_query<C>(&self, client: &mut C, portal: &Portal<Self::Statement>, _max_rows: usize) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let prepared = &portal.statement.statement;
        if client.transaction_status() == TransactionStatus::Error {
            match prepared.stmt.tx_control() {
                TxControl::Other => return Err(to_pg(in_failed_transaction())),
                TxControl::Commit => {
                    let slot = session_of(&self.engine, client);
                    slot.lock().await.end_transaction();
                    return Ok(Response::TransactionEnd(Tag::new("ROLLBACK")));
                }
                TxControl::Rollback | TxControl::RollbackTo => {}
            }
        }
        let inferred = &prepared.described.params;
        if portal.parameters.len() != inferred.len() {
            return Err(to_pg(EddyError::user(
                sqlstate::PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but prepared statement \"{}\" requires {}",
                    portal.parameters.len(),
                    portal.statement.id,
                    inferred.len()
                ),
            )));
        }
        if let (Format::Individual(codes), Some(schema)) = (&portal.result_column_format, &prepared.described.schema) {
            if codes.len() != schema.fields().len() {
                return Err(to_pg(EddyError::user(
                    sqlstate::PROTOCOL_VIOLATION,
                    format!("bind message has {} result formats but query has {} columns", codes.len(), schema.fields().len()),
                )));
            }
        }
        let text = statement_text(&prepared.stmt);
        let mut params = Vec::with_capacity(portal.parameters.len());
        for (i, p) in portal.parameters.iter().enumerate() {
            let declared = portal.statement.parameter_types.get(i).cloned().flatten().filter(|t| t.oid() != 0);
            let ty = declared.unwrap_or_else(|| described_param_type(&prepared.described, i));
            let binary = matches!(format_of(&portal.parameter_format, i), FieldFormat::Binary);
            // A malformed value must not take the connection down, even if decoding panics.
            let decoded = panics::run(|| decode_param(p.as_deref(), binary, &ty, inferred[i].as_ref()))
                .unwrap_or_else(|p| Err(panics::report(p, &format!("decoding parameter ${} of {text}", i + 1))))
                .map_err(|e| param_error(e, i));
            params.push(decoded.map_err(to_pg)?);
        }
        release_prepared(client, &prepared.stmt).map_err(to_pg)?;
        let slot = session_of(&self.engine, client);
        let mut session = slot.lock().await;
        let ctx = RunContext { sql: text, deadline: statement_deadline(&session), engine: session.engine().clone() };
        let result = run_with_notices(client, &mut session, &prepared.stmt, params, ctx.deadline).await?;
        send_side_messages(client, &mut session).await?;
        if result.is_ok() {
            track_cursor_portal(client, &session, &prepared.stmt);
        }
        match result {
            Ok(output) => Ok(respond(output, &portal.result_column_format, &ctx)),
            Err(e) => Err(to_pg(e)),
        }
    }
}

#[async_trait]
impl CopyHandler for Handlers {
    /// Each piece of data is parsed and staged as it arrives (bounded memory); errors are kept
    /// by the session and reported at CopyDone.
    async fn on_copy_data<C>(&self, client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let slot = session_of(&self.engine, client);
        let mut session = slot.lock().await;
        let fed = guarded(async {
            session.copy_data(&copy_data.data).await;
            Ok(())
        })
        .await;
        if let Err(e) = fed {
            // A panic while parsing: the COPY fails with it at CopyDone.
            session.copy_fail(&e.message).await;
        }
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let slot = session_of(&self.engine, client);
        let mut session = slot.lock().await;
        let n = guarded(session.copy_done()).await.map_err(to_pg)?;
        let tag: CommandComplete = Tag::new("COPY").with_rows(n).into();
        client.send(PgWireBackendMessage::CommandComplete(tag)).await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: pgwire::messages::copy::CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let slot = session_of(&self.engine, client);
        let mut session = slot.lock().await;
        to_pg(session.copy_fail(&fail.message).await)
    }
}

/// The handler set given to `pgwire::tokio::process_socket` for each connection.
pub struct Factory {
    handlers: Arc<Handlers>,
    startup: Arc<Startup>,
    cancel: Arc<DefaultCancelHandler>,
}

impl Factory {
    /// The concrete handlers, for the connection loop (`conn`).
    pub(crate) fn parts(&self) -> (Arc<Startup>, Arc<Handlers>, Arc<DefaultCancelHandler>) {
        (self.startup.clone(), self.handlers.clone(), self.cancel.clone())
    }

    /// Handlers for `engine`; with `credentials`, clients must authenticate with SCRAM-SHA-256.
    pub fn new(engine: Arc<Engine>, credentials: Option<Arc<Credentials>>) -> Self {
        let handlers = Handlers::new(engine);
        let startup = match credentials {
            None => Startup::Trust(handlers.clone()),
            Some(credentials) => {
                let mut scram = ScramAuth::new(credentials);
                scram.set_iterations(SCRAM_ITERATIONS as usize);
                Startup::Scram(
                    SASLAuthStartupHandler::new(Arc::new(EddyParameters))
                        .with_scram(scram)
                        .with_connection_manager(handlers.manager.clone()),
                )
            }
        };
        let cancel = Arc::new(DefaultCancelHandler::new(handlers.manager.clone()));
        Self { handlers, startup: Arc::new(startup), cancel }
    }
}

impl PgWireServerHandlers for Factory {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.handlers.clone()
    }
    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.handlers.clone()
    }
    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }
    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.handlers.clone()
    }
    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        self.cancel.clone()
    }
}

mod startup;
pub use startup::{EddyParameters, Startup};
use startup::parse_options;
