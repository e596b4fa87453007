//! `CREATE SINK ... WITH (connector = 'postgres', host, port, user, password, database, table
//! [, schema])` (or `connector = 'jdbc', jdbc.url = 'jdbc:postgresql://host:port/db?user=..',
//! table.name = ..`): a sink's changes applied to a table of a PostgreSQL server.
//!
//! `type = 'upsert'` (the default when the sink has a key): inserts and updates become
//! `INSERT ... ON CONFLICT (key) DO UPDATE`, deletes `DELETE ... WHERE key = ..`; applying a
//! chunk again gives the same table, so at-least-once delivery converges to exactly the
//! input's rows. `type = 'append-only'`: plain INSERTs of the inserted rows (for inputs that
//! only insert, or with `force_append_only`). Each delivered chunk is one transaction (one
//! simple-protocol round trip of batched statements); values travel as quoted text literals,
//! which PostgreSQL casts to the target columns' types.

use std::time::Duration;

use arrow::array::RecordBatch;
use async_trait::async_trait;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, EddyError, Op, Result, StreamChunk};
use eddy_stream::SinkTarget;

use crate::options::Options;
use crate::sink_spec::{SinkFormat, SinkSpec};

/// How long CREATE SINK and each connection attempt wait for the server.
const CONNECT_DEADLINE: Duration = Duration::from_secs(10);

/// Rows per statement at most.
const STATEMENT_ROWS: usize = 500;

/// Option keys a Postgres sink understands.
pub(crate) const POSTGRES_SINK_KEYS: &[&str] =
    &["connector", "host", "port", "user", "password", "database", "schema", "table", "jdbc.url", "table.name", "schema.name", "primary_key", "type", "force_append_only"];

/// `"name"` with embedded quotes doubled.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The connection settings of `options`.
fn config(options: &Options) -> Result<tokio_postgres::Config> {
    if let Some(url) = options.get("jdbc.url") {
        let url = url.strip_prefix("jdbc:").unwrap_or(url);
        if !url.starts_with("postgresql://") && !url.starts_with("postgres://") {
            return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "sink option 'jdbc.url' must be a postgresql:// URL, not '{url}'"));
        }
        let mut c: tokio_postgres::Config = url.parse().map_err(|e| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "sink option 'jdbc.url': {e}"))?;
        if let Some(u) = options.get("user") {
            c.user(u);
        }
        if let Some(p) = options.get("password") {
            c.password(p);
        }
        return Ok(c);
    }
    let mut c = tokio_postgres::Config::new();
    c.host(options.required("host")?);
    c.port(options.number("port", 5432u16)?);
    c.user(options.required("user")?);
    if let Some(p) = options.get("password") {
        c.password(p);
    }
    c.dbname(options.required("database")?);
    Ok(c)
}

/// The target table, schema-qualified and quoted.
fn table_name(options: &Options) -> Result<String> {
    let table = options
        .get("table")
        .or_else(|| options.get("table.name"))
        .ok_or_else(|| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "a postgres sink needs the option 'table'"))?;
    Ok(match options.get("schema").or_else(|| options.get("schema.name")) {
        Some(s) => format!("{}.{}", ident(s), ident(table)),
        None => ident(table),
    })
}

/// Where the server is, for messages.
fn server(options: &Options) -> String {
    match options.get("jdbc.url") {
        Some(u) => u.split('?').next().unwrap_or(u).to_string(),
        None => format!("{}:{}", options.get("host").unwrap_or("?"), options.get("port").unwrap_or("5432")),
    }
}

async fn connect(options: &Options) -> Result<tokio_postgres::Client> {
    let config = config(options)?;
    let where_ = server(options);
    let connected = tokio::time::timeout(CONNECT_DEADLINE, config.connect(tokio_postgres::NoTls))
        .await
        .map_err(|_| user_err!(sqlstate::CONNECTION_FAILURE, "postgres sink: no answer from {where_}"))?;
    let (client, connection) = connected.map_err(|e| user_err!(sqlstate::CONNECTION_FAILURE, "postgres sink: cannot connect to {where_}: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!("postgres sink connection ended: {e}");
        }
    });
    Ok(client)
}

/// The server's message of an error (the client's own text when the server sent none).
fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string())
}

/// Checks the options (at `CREATE SINK`, without connecting).
pub(crate) fn check_options(options: &Options) -> Result<()> {
    config(options)?;
    table_name(options)?;
    Ok(())
}

/// Connects and checks that the table takes the sink's rows (and, for upserts, that its key
/// can be a conflict target), by planning the statements the sink will send.
pub(crate) async fn prepare(spec: &SinkSpec) -> Result<()> {
    let client = connect(&spec.options).await?;
    let sink = PostgresSink::new(spec.clone());
    let probe = format!("EXPLAIN {}", sink.insert_sql(&[], true));
    client.batch_execute(&probe).await.map_err(|e| {
        let detail = db_message(&e);
        user_err!(sqlstate::INVALID_PARAMETER_VALUE, "postgres sink: table {} on {} does not take the sink's rows: {detail}", sink.table, server(&spec.options))
    })?;
    Ok(())
}

/// Applies a sink's changes to a PostgreSQL table.
pub struct PostgresSink {
    spec: SinkSpec,
    table: String,
    columns: Vec<String>,
    client: Option<tokio_postgres::Client>,
}

impl PostgresSink {
    /// A sink for `spec` (connects when it first delivers).
    pub fn new(spec: SinkSpec) -> Self {
        let table = table_name(&spec.options).unwrap_or_default();
        let columns = spec.schema.fields().iter().map(|f| ident(f.name())).collect();
        Self { spec, table, columns, client: None }
    }

    fn upsert(&self) -> bool {
        !matches!(self.spec.format, SinkFormat::Plain { .. })
    }

    /// `INSERT` of `rows` (literal tuples); with no rows, one that selects nothing (a probe).
    fn insert_sql(&self, rows: &[String], probe: bool) -> String {
        let mut sql = format!("INSERT INTO {} ({}) ", self.table, self.columns.join(", "));
        if probe {
            let nulls: Vec<String> = self.spec.schema.fields().iter().map(|_| "NULL".to_string()).collect();
            sql.push_str(&format!("SELECT {} WHERE false", nulls.join(", ")));
        } else {
            sql.push_str("VALUES ");
            sql.push_str(&rows.join(", "));
        }
        if self.upsert() {
            let key: Vec<&str> = self.spec.key.iter().map(|&k| self.columns[k].as_str()).collect();
            let rest: Vec<String> =
                (0..self.columns.len()).filter(|i| !self.spec.key.contains(i)).map(|i| format!("{c} = EXCLUDED.{c}", c = self.columns[i])).collect();
            if rest.is_empty() {
                sql.push_str(&format!(" ON CONFLICT ({}) DO NOTHING", key.join(", ")));
            } else {
                sql.push_str(&format!(" ON CONFLICT ({}) DO UPDATE SET {}", key.join(", "), rest.join(", ")));
            }
        }
        sql
    }

    /// The statements that apply `chunk`, in order.
    fn statements(&self, chunk: &StreamChunk) -> Result<Vec<String>> {
        let batch: &RecordBatch = &chunk.batch;
        let literal = |row: usize, col: usize| -> Result<String> {
            let mut text = String::new();
            let field = batch.schema().field(col).clone();
            if !eddy_common::text_out::write_text(batch.column(col), row, &field, &mut text)? {
                return Ok("NULL".to_string());
            }
            Ok(format!("'{}'", text.replace('\'', "''")))
        };
        let tuple = |row: usize, cols: &[usize]| -> Result<String> { Ok(format!("({})", cols.iter().map(|&c| literal(row, c)).collect::<Result<Vec<_>>>()?.join(", "))) };
        let all: Vec<usize> = (0..batch.num_columns()).collect();
        let key_of = |row: usize| -> Result<String> { tuple(row, &self.spec.key) };
        let mut out = Vec::new();
        let (mut inserts, mut deletes): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        let n = chunk.ops.len();
        let mut i = 0;
        while i < n {
            let op = chunk.ops[i];
            if op.is_insert() {
                if !deletes.is_empty() {
                    out.push(self.delete_sql(&std::mem::take(&mut deletes)));
                }
                inserts.push(tuple(i, &all)?);
                if inserts.len() >= STATEMENT_ROWS {
                    out.push(self.insert_sql(&std::mem::take(&mut inserts), false));
                }
            } else if self.upsert() {
                // An update that keeps its key is the upsert of its new row alone.
                let same_key_update = op == Op::UpdateDelete && i + 1 < n && chunk.ops[i + 1] == Op::UpdateInsert && key_of(i)? == key_of(i + 1)?;
                if !same_key_update {
                    if !inserts.is_empty() {
                        out.push(self.insert_sql(&std::mem::take(&mut inserts), false));
                    }
                    deletes.push(key_of(i)?);
                    if deletes.len() >= STATEMENT_ROWS {
                        out.push(self.delete_sql(&std::mem::take(&mut deletes)));
                    }
                }
            }
            i += 1;
        }
        if !inserts.is_empty() {
            out.push(self.insert_sql(&inserts, false));
        }
        if !deletes.is_empty() {
            out.push(self.delete_sql(&deletes));
        }
        Ok(out)
    }

    fn delete_sql(&self, keys: &[String]) -> String {
        let key: Vec<&str> = self.spec.key.iter().map(|&k| self.columns[k].as_str()).collect();
        format!("DELETE FROM {} WHERE ({}) IN ({})", self.table, key.join(", "), keys.join(", "))
    }
}

#[async_trait]
impl SinkTarget for PostgresSink {
    async fn deliver(&mut self, chunk: &StreamChunk, seqs: std::ops::Range<u64>) -> Result<Option<u64>> {
        self.send(chunk).await?;
        Ok(Some(seqs.end))
    }
}

impl PostgresSink {
    /// Delivers `chunk`, durably once this returns.
    async fn send(&mut self, chunk: &StreamChunk) -> Result<()> {
        let statements = self.statements(chunk)?;
        if statements.is_empty() {
            return Ok(());
        }
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            self.client = Some(connect(&self.spec.options).await?);
        }
        let Some(client) = self.client.as_ref() else { return Ok(()) };
        // One simple-protocol message: PostgreSQL runs it as one transaction.
        let sql = format!("BEGIN; {}; COMMIT", statements.join("; "));
        if let Err(e) = client.batch_execute(&sql).await {
            let detail = db_message(&e);
            self.client = None;
            return Err(EddyError::external(format!("postgres sink into {} on {}: {detail}", self.table, server(&self.spec.options))));
        }
        Ok(())
    }
}
