//! Running one statement for a client: a panic becomes an `XX000` error for that statement
//! (logged once with the statement's text, see `panics`), and a statement that only reads is
//! interrupted with `57014` when the session's `statement_timeout` passes, both while it runs
//! and while its rows are produced. Writes run to completion once started: interrupting one
//! while it commits would leave the client unsure whether it happened.

use datafusion::scalar::ScalarValue;
use datafusion::sql::sqlparser::ast::Statement;
use eddy_common::Result;
use eddy_sql::{EddyStatement, Output, Session};

use crate::panics;

/// Runs `fut`, turning a panic into an internal error (logged once by [`panics::report`]).
pub(crate) async fn guarded<T>(fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    guarded_sql("(statement text unavailable)", fut).await
}

/// [`guarded`], naming the statement `sql` in the log if it panics.
pub(crate) async fn guarded_sql<T>(sql: &str, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    panics::guard(fut).await.unwrap_or_else(|p| Err(panics::report(p, sql)))
}

/// The source text of `stmt`, for logs.
pub(crate) fn statement_text(stmt: &EddyStatement) -> String {
    match stmt {
        EddyStatement::Sql(_, text) | EddyStatement::CreateSource(_, _, text) => text.clone(),
        other => format!("{other:?}"),
    }
}

/// Statements that only read: interrupting them at any point (statement_timeout) is safe.
/// Others run to completion once started (a write interrupted while it commits would leave
/// the client unsure whether it happened); only the rows they return can be interrupted.
pub(crate) fn read_only(stmt: &EddyStatement) -> bool {
    match stmt {
        EddyStatement::Sql(s, _) => matches!(
            s.as_ref(),
            Statement::Query(_) | Statement::Explain { .. } | Statement::ShowVariable { .. } | Statement::ShowVariables { .. }
        ),
        EddyStatement::Verify(_)
        | EddyStatement::ShowViews
        | EddyStatement::ExplainAnalyzeView(_)
        | EddyStatement::ShowCreateView(_)
        | EddyStatement::ShowSources
        | EddyStatement::ShowSinks
        | EddyStatement::Subscribe(_)
        | EddyStatement::Declare(_)
        | EddyStatement::Fetch(_)
        | EddyStatement::CopySubscribe(..)
        | EddyStatement::Close(_) => true,
        EddyStatement::Flush | EddyStatement::Wait | EddyStatement::CreateSource(..) | EddyStatement::DropSource(_) | EddyStatement::CreateSink(_) | EddyStatement::DropSink(_) => false,
    }
}

/// When the statement starting now must end, from the session's `statement_timeout`.
pub(crate) fn statement_deadline(session: &Session) -> Option<tokio::time::Instant> {
    let timeout = crate::limits::parse_timeout(&session.var("statement_timeout")?)?;
    Some(tokio::time::Instant::now() + timeout)
}

/// Executes one statement: guarded against panics, and, if it only reads, interrupted with
/// `57014` when `deadline` passes.
pub(crate) async fn run_statement(session: &mut Session, stmt: &EddyStatement, params: Vec<ScalarValue>, deadline: Option<tokio::time::Instant>) -> Result<Output> {
    let text = statement_text(stmt);
    let started = std::time::Instant::now();
    let run = guarded_sql(&text, session.execute(stmt, params));
    let result = match deadline.filter(|_| read_only(stmt)) {
        Some(d) => tokio::time::timeout_at(d, run).await.unwrap_or_else(|_| Err(crate::limits::statement_timeout_error())),
        None => run.await,
    };
    session.engine().statements.record(started.elapsed(), result.is_err());
    result
}

/// What the rows of a statement's output need to know about the statement.
pub(crate) struct RunContext {
    /// Its text, for the log if producing rows panics.
    pub(crate) sql: String,
    /// When producing rows must stop (`statement_timeout`).
    pub(crate) deadline: Option<tokio::time::Instant>,
    /// The server's engine, whose statement counters a failure while producing rows counts in.
    pub(crate) engine: std::sync::Arc<eddy_sql::Engine>,
}
