//! Runs every `e2e_test/**/*.slt` file against an in-process server over tokio-postgres.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use sqllogictest::{DBOutput, DefaultColumnType};
use tokio_postgres::SimpleQueryMessage;

use crate::support::{connect, server, temp_dir};

/// An error as the `.slt` files match it: `SQLSTATE: message`.
#[derive(Debug)]
pub struct SltError(String);

impl std::fmt::Display for SltError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl std::error::Error for SltError {}

struct Db {
    client: tokio_postgres::Client,
}

#[async_trait]
impl sqllogictest::AsyncDB for Db {
    type Error = SltError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SltError> {
        let msgs = self.client.simple_query(sql).await.map_err(|e| {
            SltError(match e.as_db_error() {
                Some(d) => format!("{}: {}", d.code().code(), d.message()),
                None => e.to_string(),
            })
        })?;
        let mut rows = Vec::new();
        let mut width = None;
        let mut count = 0;
        for m in msgs {
            match m {
                SimpleQueryMessage::RowDescription(cols) => width = Some(cols.len()),
                SimpleQueryMessage::Row(r) => {
                    width = Some(r.len());
                    rows.push(
                        (0..r.len())
                            .map(|i| match r.get(i) {
                                None => "NULL".to_string(),
                                Some("") => "(empty)".to_string(),
                                Some(v) => v.to_string(),
                            })
                            .collect(),
                    );
                }
                SimpleQueryMessage::CommandComplete(n) => count = n,
                _ => {}
            }
        }
        match width {
            Some(w) => Ok(DBOutput::Rows { types: vec![DefaultColumnType::Any; w], rows }),
            None => Ok(DBOutput::StatementComplete(count)),
        }
    }

    async fn shutdown(&mut self) {}

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await;
    }
}

fn slt_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            slt_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "slt") {
            out.push(p);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slt_suite() {
    // SLT_DIR runs another directory of .slt files (e.g. another engine's corpus) instead.
    let root = match std::env::var("SLT_DIR") {
        Ok(d) => std::path::PathBuf::from(d),
        Err(_) => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e_test"),
    };
    let mut files = Vec::new();
    slt_files(&root, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no .slt files under {}", root.display());
    let filter = std::env::var("SLT_FILTER").ok();
    let mut failures = Vec::new();
    let mut ran = 0;
    for file in &files {
        if filter.as_ref().is_some_and(|f| !file.to_string_lossy().contains(f.as_str())) {
            continue;
        }
        // Every file gets its own server and state directory: files are independent.
        let dir = temp_dir("slt");
        let srv = server(&format!("file://{}", dir.display())).await;
        let addr = srv.addr;
        let mut runner = sqllogictest::Runner::new(move || async move { Ok(Db { client: connect(addr).await }) });
        runner.with_column_validator(sqllogictest::default_column_validator);
        ran += 1;
        // SLT_OVERRIDE=1 rewrites the expected results with the actual ones (review the diff).
        if std::env::var("SLT_OVERRIDE").is_ok() {
            let r = runner
                .update_test_file(
                    file,
                    " ",
                    sqllogictest::default_validator,
                    sqllogictest::default_normalizer,
                    sqllogictest::default_column_validator,
                )
                .await;
            if let Err(e) = r {
                failures.push(format!("{}: {e}", file.display()));
            }
        } else if let Err(e) = runner.run_file_async(file).await {
            failures.push(format!("{}: {e}", file.display()));
        }
        srv.shutdown().await.unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }
    println!("ran {ran} slt files, {} failed", failures.len());
    assert!(failures.is_empty(), "slt failures:\n{}", failures.join("\n\n"));
}

/// `VERIFY MATERIALIZED VIEW` prints `OK` or the differences; as a `statement ok` its output
/// would go unchecked and a mismatch would pass. Every one must be a `query` expecting `OK`.
#[test]
fn every_verify_in_the_slt_files_is_a_query_expecting_ok() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e_test");
    let mut files = Vec::new();
    slt_files(&root, &mut files);
    let mut unchecked = Vec::new();
    let mut verifies = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.trim_start().to_ascii_uppercase().starts_with("VERIFY MATERIALIZED VIEW") {
                continue;
            }
            verifies += 1;
            let header = i.checked_sub(1).map(|h| lines[h].trim()).unwrap_or_default();
            let checked = header.starts_with("query") && lines.get(i + 1).map(|l| l.trim()) == Some("----") && lines.get(i + 2).map(|l| l.trim()) == Some("OK");
            if !checked {
                unchecked.push(format!("{}:{}: {line}", file.display(), i + 1));
            }
        }
    }
    assert!(verifies > 0, "no VERIFY in the .slt files");
    assert!(unchecked.is_empty(), "VERIFY whose OK is not checked:\n{}", unchecked.join("\n"));
}
