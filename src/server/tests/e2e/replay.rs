//! Replays every statement real clients sent to PostgreSQL 15 (psql meta-commands, psycopg,
//! SQLAlchemy reflection, asyncpg, pgjdbc metadata, node-postgres, postgres.js,
//! tokio-postgres), captured in `e2e_test/clients/CLIENT_QUERIES.md`, against Eddy: each must
//! parse, plan, describe and run, with PostgreSQL-style result column names.

use std::path::PathBuf;

use crate::support::{connect, server};

/// One captured statement and the parameter values its Bind carried (as captured).
#[derive(Debug)]
struct Captured {
    section: String,
    sql: String,
    params: Vec<String>,
}

/// Statements Eddy does not support by design, with the SQLSTATE it must answer with (none
/// at present: keep the mechanism for captures of clients that use what Eddy lacks).
const UNSUPPORTED: &[(&str, &str)] = &[];

/// Known gaps, named by a fragment of the statement: they must fail (so a fix is noticed and
/// the entry removed), and they are reported.
const KNOWN_GAPS: &[&str] = &[];

fn is_message_line(l: &str) -> bool {
    let t = l.trim_start();
    l.starts_with("  ")
        && ["Bind", "Describe", "Execute", "Sync", "Flush", "Close", "Terminate", "SSLRequest"].iter().any(|m| t.starts_with(m))
}

fn parse_params(line: &str) -> Vec<String> {
    let Some(start) = line.find("params=[") else { return vec![] };
    let body = &line[start + 8..line.rfind(']').unwrap_or(line.len())];
    body.split(", ").map(|p| p.trim().trim_matches('\'').to_string()).filter(|p| !p.is_empty()).collect()
}

/// Extracts every statement from the capture file.
fn extract(text: &str) -> Vec<Captured> {
    let mut out: Vec<Captured> = Vec::new();
    let mut section = String::new();
    let mut current: Option<Captured> = None;
    let mut in_sql_block = false;
    for line in text.lines() {
        if line.starts_with("## ") || line.starts_with("### ") {
            section = line.trim_start_matches('#').trim().to_string();
            continue;
        }
        if line.starts_with("```sql") {
            in_sql_block = true;
            current = Some(Captured { section: section.clone(), sql: String::new(), params: vec![] });
            continue;
        }
        if line.starts_with("```") {
            in_sql_block = false;
            out.extend(current.take());
            continue;
        }
        if in_sql_block {
            if let Some(c) = current.as_mut() {
                c.sql.push_str(line);
                c.sql.push('\n');
            }
            continue;
        }
        let starts = line.strip_prefix("Query: ").or_else(|| line.starts_with("Parse[").then(|| line.split_once("]: ").map(|(_, s)| s)).flatten());
        if let Some(sql) = starts {
            out.extend(current.take());
            current = Some(Captured { section: section.clone(), sql: format!("{sql}\n"), params: vec![] });
        } else if is_message_line(line) || line.starts_with("StartupMessage") {
            if line.trim_start().starts_with("Bind") {
                if let Some(c) = current.as_mut() {
                    c.params = parse_params(line);
                }
            }
            out.extend(current.take());
        } else if let Some(c) = current.as_mut() {
            c.sql.push_str(line);
            c.sql.push('\n');
        }
    }
    out.extend(current);
    out.retain(|c| !c.sql.trim().is_empty());
    out
}

/// `$n` → the captured value (binary `0x..` as an integer, text quoted), or NULL when the
/// capture did not record it.
fn substitute(c: &Captured) -> String {
    let mut sql = c.sql.clone();
    for n in (1..=40).rev() {
        let key = format!("${n}");
        if !sql.contains(&key) {
            continue;
        }
        let value = match c.params.get(n - 1) {
            Some(p) if p.starts_with("0x") => i64::from_str_radix(&p[2..], 16).map(|v| v.to_string()).unwrap_or_else(|_| "NULL".into()),
            Some(p) => format!("'{}'", p.replace('\'', "''")),
            None => "NULL".into(),
        };
        sql = sql.replace(&key, &value);
    }
    sql
}

fn capture_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../e2e_test/clients/CLIENT_QUERIES.md")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_captured_client_statement_runs() {
    let text = std::fs::read_to_string(capture_file()).expect("capture file is in the repository");
    let statements = extract(&text);
    assert!(statements.len() > 80, "only {} statements extracted", statements.len());
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute("CREATE TABLE t1 (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2), ts TIMESTAMPTZ)").await.unwrap();
    c.batch_execute("INSERT INTO t1 VALUES (1, 'a', 1.50, '2024-01-01 00:00:00+00')").await.unwrap();
    c.batch_execute("CREATE MATERIALIZED VIEW m1 AS SELECT name, sum(amount) AS s FROM t1 GROUP BY name").await.unwrap();
    let mut ran = 0;
    let mut failures = Vec::new();
    for s in &statements {
        let sql = substitute(s);
        let lower = sql.trim().to_ascii_lowercase();
        if let Some((_, code)) = UNSUPPORTED.iter().find(|(p, _)| lower.starts_with(p)) {
            let e = c.simple_query(&sql).await.expect_err(&sql);
            assert_eq!(crate::support::sqlstate(&e), *code, "{sql}");
            continue;
        }
        // Queries go through Parse/Describe (column names and types) and then run; other
        // statements (SET, BEGIN, SHOW, ...) run through the simple protocol.
        let is_query = lower.starts_with("select") || lower.starts_with("with") || lower.starts_with("(select");
        if is_query {
            match c.prepare(&sql).await {
                Ok(stmt) => {
                    for col in stmt.columns() {
                        let name = col.name();
                        let rendered = ["Utf8(", "Int64(", "Int32(", "Boolean(", "Float64("].iter().any(|p| name.contains(p));
                        if name.is_empty() || rendered {
                            failures.push(format!("[{}] column name {name:?} is not PostgreSQL's: {sql}", s.section));
                        }
                    }
                    if let Err(e) = c.query(&stmt, &[]).await {
                        failures.push(format!("[{}] {e:?}: {sql}", s.section));
                    }
                }
                Err(e) => failures.push(format!("[{}] {}: {sql}", s.section, e.as_db_error().map(|d| d.message().to_string()).unwrap_or(e.to_string()))),
            }
        } else if let Err(e) = c.simple_query(&sql).await {
            failures.push(format!("[{}] {e:?}: {sql}", s.section));
        }
        ran += 1;
    }
    let (known, failures): (Vec<String>, Vec<String>) =
        failures.into_iter().partition(|f| KNOWN_GAPS.iter().any(|g| f.contains(g)));
    println!("replayed {ran} of {} captured client statements; {} known gaps", statements.len(), known.len());
    for k in &known {
        println!("known gap: {}", k.lines().next().unwrap_or_default());
    }
    assert!(failures.is_empty(), "{} of {ran} statements failed:\n{}", failures.len(), failures.join("\n\n"));
    srv.shutdown().await.unwrap();
}

#[test]
fn the_capture_parser_finds_statements_and_parameters() {
    let text = "## x\n```\nQuery: select 1\n  Terminate\nParse[s] param_oids=[0]: select $1::text\n  Bind[s] params=['a']\n  Sync\n```\n### y\n```sql\nSELECT 2;\n```\n";
    let st = extract(text);
    assert_eq!(st.len(), 3, "{st:?}");
    assert_eq!(substitute(&st[1]).trim(), "select 'a'::text");
    assert_eq!(st[2].sql.trim(), "SELECT 2;");
}
