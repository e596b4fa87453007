//! `COPY ... FROM STDIN`: the statement's options, then the data as it arrives.
//!
//! The data is parsed in bounded batches ([`crate::frontend::copy_in`]); in autocommit mode each
//! batch is staged with the table's writer as soon as it is parsed (its conflicts decided then,
//! its rows invisible) and the whole COPY is applied in one epoch at the end, so the statement
//! stays atomic while memory stays bounded by the batch size. A failure (bad data, a key
//! conflict, CopyFail) drops everything staged; the error is reported when the client ends the
//! data (PostgreSQL reports it at once, then ignores the rest; the client sees the same result).
//! Inside a transaction block, the batches are recorded with the block's other writes.

use datafusion::sql::sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget};
use eddy_common::error::sqlstate;
use eddy_common::{internal_err, not_supported, user_err, Result};

use arrow::array::{Array, RecordBatch};
use eddy_common::{EddyError, StreamChunk};
use eddy_stream::TableWrite;

use crate::frontend::copy_in::{CopyFormat, CopyIn, CopyOptions, CopyParser};
use crate::frontend::dml::table_policy;
use crate::frontend::names::{normalize_ident, resolve_relation};
use crate::frontend::output::Output;
use crate::frontend::session::Session;
use crate::frontend::state::CopyState;

impl Session {
    pub(crate) fn copy(
        &mut self,
        source: &CopySource,
        to: bool,
        target: &CopyTarget,
        options: &[CopyOption],
        legacy: &[CopyLegacyOption],
    ) -> Result<Output> {
        if to {
            return Err(internal_err!("COPY TO is run by copy_to"));
        }
        if !matches!(target, CopyTarget::Stdin) {
            return Err(not_supported!("COPY FROM a file or program is not supported; use COPY ... FROM STDIN (psql: \\copy)"));
        }
        let CopySource::Table { table_name, columns } = source else {
            return Err(not_supported!("COPY (query) FROM is not valid"));
        };
        let (_, name, table) = resolve_relation(self, table_name)?;
        if table.kind != crate::catalog::RelationKind::Table {
            return Err(user_err!(sqlstate::WRONG_OBJECT_TYPE, "cannot copy to {} \"{name}\"", table.kind_name()));
        }
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
        let o = copy_options(options, legacy)?;
        let copy = CopyIn { table, columns: cols, format: o.format, delimiter: o.delimiter, null: o.null, header: o.header, quote: o.quote };
        let progress = self.engine.copies.start(format!("{}.{}", copy.table.schema, copy.table.name));
        let logged = std::time::Instant::now();
        self.copy = Some(CopyState { parser: CopyParser::new(copy.clone()), txn: self.engine.begin_txn(), staged: false, logged, error: None, progress });
        Ok(Output::CopyIn(copy))
    }

    /// `COPY table [(columns)] TO STDOUT` and `COPY (query) TO STDOUT`: the rows as the query
    /// produces them, in text or CSV. `rows` replaces the query (`COPY (SUBSCRIBE ...) TO STDOUT`).
    pub(crate) async fn copy_to(
        &mut self,
        source: &CopySource,
        target: &CopyTarget,
        options: &[CopyOption],
        legacy: &[CopyLegacyOption],
        rows: Option<(arrow::datatypes::SchemaRef, datafusion::execution::SendableRecordBatchStream)>,
    ) -> Result<Output> {
        let format = check_copy_out(target, options, legacy)?;
        let (schema, stream) = match rows {
            Some(r) => r,
            None => {
                let query = match source {
                    CopySource::Table { table_name, columns } => {
                        let list = if columns.is_empty() { "*".to_string() } else { columns.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ") };
                        format!("SELECT {list} FROM {table_name}")
                    }
                    CopySource::Query(q) => q.to_string(),
                };
                let stmt = crate::planner::parse::parse_bounded(&query)?.pop().ok_or_else(|| internal_err!("COPY's query vanished"))?;
                self.query_rows(stmt, query, vec![]).await?
            }
        };
        Ok(Output::CopyOut { schema, stream, format })
    }

    /// A piece of the COPY's data. Errors are kept and reported by [`Session::copy_done`].
    pub async fn copy_data(&mut self, data: &[u8]) {
        let Some(state) = self.copy.as_mut() else { return };
        state.progress.received(data.len());
        if state.error.is_some() {
            return;
        }
        let result = match state.parser.feed(data) {
            Ok(()) => self.stage_full_batches(false).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            self.fail_copy(e).await;
        }
    }

    /// The end of the COPY's data: applies it (or reports why not); the row count.
    pub async fn copy_done(&mut self) -> Result<usize> {
        let Some(state) = self.copy.as_mut() else {
            return Err(user_err!(sqlstate::PROTOCOL_VIOLATION, "CopyDone without a COPY in progress"));
        };
        if state.error.is_none() {
            let result = match state.parser.finish() {
                Ok(()) => self.stage_full_batches(true).await,
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                self.fail_copy(e).await;
            }
        }
        let Some(state) = self.copy.take() else { return Ok(0) };
        if let Some(e) = state.error {
            return Err(e);
        }
        if state.staged {
            let table = state.parser.spec().table.id;
            self.engine.commit_txn(state.txn, &[table]).await?;
        }
        state.progress.succeeded();
        Ok(state.progress.rows() as usize)
    }

    /// CopyFail from the client: drops what was staged.
    pub async fn copy_fail(&mut self, message: &str) -> EddyError {
        let e = user_err!(sqlstate::QUERY_CANCELED, "COPY from stdin failed: {message}");
        self.fail_copy(e.clone()).await;
        self.copy = None;
        e
    }

    async fn fail_copy(&mut self, e: EddyError) {
        let Some(state) = self.copy.as_mut() else { return };
        if state.staged {
            let table = state.parser.spec().table.id;
            self.engine.abort_txn(state.txn, &[table]).await;
            state.staged = false;
        }
        state.error.get_or_insert(e);
    }

    /// Stages the parsed batches that are full (all of them at the end).
    async fn stage_full_batches(&mut self, all: bool) -> Result<()> {
        loop {
            let Some(state) = self.copy.as_mut() else { return Ok(()) };
            if !(state.parser.is_full() || all) {
                return Ok(());
            }
            let Some(text) = state.parser.take_text() else { return Ok(()) };
            let typed = state.parser.typed(&text)?;
            let table = state.parser.spec().table.clone();
            let n = text.first().map(|c| c.len()).unwrap_or(0);
            let mut columns = Vec::with_capacity(typed.len());
            for (i, c) in typed.into_iter().enumerate() {
                columns.push(match c {
                    Some(c) => c,
                    None => self.evaluate_default(&table, i, n)?,
                });
            }
            let rows = RecordBatch::try_new(table.planning_schema(false), columns)?;
            let rows = self.prepare_insert(&table, rows)?;
            let write = TableWrite { chunk: StreamChunk::inserts(rows), on_conflict: table_policy(&table), returning: false };
            let outcome = if self.block.is_some() {
                self.write(&table, write).await?
            } else {
                let txn = self.copy.as_ref().map(|s| s.txn).unwrap_or_default();
                let outcome = self.engine.stage(table.id, txn, write).await;
                if let Some(s) = self.copy.as_mut() {
                    s.staged = true;
                }
                outcome?
            };
            if let Some(s) = self.copy.as_mut() {
                s.progress.accepted(outcome.rows);
                if s.logged.elapsed() >= COPY_PROGRESS_INTERVAL {
                    s.logged = std::time::Instant::now();
                    let r = s.progress.progress.report();
                    tracing::info!("COPY into {}: {} rows so far in {:.0} s ({:.0} rows/s)", r.table, r.rows, r.elapsed_secs, r.rows_per_sec);
                }
            }
        }
    }
}



/// How often a long COPY FROM logs its progress.
pub const COPY_PROGRESS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// The format of a `COPY ... TO`, refusing targets other than STDOUT.
pub(crate) fn check_copy_out(target: &CopyTarget, options: &[CopyOption], legacy: &[CopyLegacyOption]) -> Result<CopyOptions> {
    if !matches!(target, CopyTarget::Stdout) {
        return Err(not_supported!("COPY TO a file or program is not supported; use COPY ... TO STDOUT (psql: \\copy)"));
    }
    copy_options(options, legacy)
}

/// The options of a COPY statement, PostgreSQL's defaults filled in.
fn copy_options(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> Result<CopyOptions> {
    let mut copy = CopyOptions { format: CopyFormat::Text, delimiter: '\t', null: "\\N".into(), header: false, quote: '"' };
    let mut delimiter = None;
    let mut null = None;
    let mut escape = None;
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
            // Accepted where they change nothing: the escape is the quote (CSV's default),
            // the data is UTF-8, FREEZE is a storage hint.
            CopyOption::Escape(e) => escape = Some(*e),
            CopyOption::Encoding(e) if matches!(e.to_ascii_lowercase().replace(['-', '_'], "").as_str(), "utf8" | "unicode") => {}
            CopyOption::Freeze(_) => {}
            other => return Err(not_supported!("COPY option {other} is not supported")),
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
    if escape.is_some_and(|e| e != copy.quote) {
        return Err(not_supported!("COPY ESCAPE other than the QUOTE character is not supported"));
    }
    if matches!(copy.delimiter, '\n' | '\r' | '\\') || (copy.format == CopyFormat::Csv && copy.delimiter == copy.quote) {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "COPY delimiter cannot be {:?}", copy.delimiter));
    }
    if copy.null.contains(copy.delimiter) {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "COPY delimiter character must not appear in the NULL specification"));
    }
    Ok(copy)
}
