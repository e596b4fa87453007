//! The Iceberg sink (issue 15), read back by an independent reader: pyiceberg
//! (`e2e_test/clients/iceberg_read.py`) loads the table through pyiceberg's SQL catalog on
//! sqlite, or from the warehouse alone (storage catalog), on the local disk and on a real S3
//! server process (moto). Each test SIGKILLs Eddy mid-stream and checks the stated guarantee:
//! exactly once — after the restart the table holds every change once, and no snapshot
//! repeats or skips a range of the sink's log. Missing tooling fails under CI (`.ci/run`
//! installs it) and skips otherwise. Polled with generous deadlines; no timing asserted.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use crate::support::{connect, create_bucket, eventually, rows, spawn_eddy, sqlstate, start_s3_server, temp_dir};

const DEADLINE: Duration = Duration::from_secs(120);

/// Whether pyiceberg can be used (under CI it must be).
fn have_pyiceberg() -> bool {
    let ok = Command::new("python3").args(["-c", "import pyiceberg, pyarrow, sqlalchemy"]).status().map(|s| s.success()).unwrap_or(false);
    if !ok {
        assert!(std::env::var("CI").is_err(), "pyiceberg is required in CI (.ci/run installs it)");
        eprintln!("skipping iceberg test: pip install 'pyiceberg[sql-sqlite,pyarrow]'");
    }
    ok
}

/// The table as pyiceberg reads it (`None`: not created yet).
fn read(args: &[String]) -> Option<serde_json::Value> {
    let tool = format!("{}/../../e2e_test/clients/iceberg_read.py", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3").arg(tool).args(args).output().expect("python3 runs");
    assert!(out.status.success(), "iceberg_read.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    (v.get("missing").is_none()).then_some(v)
}

/// The live rows, each as text (to compare with Eddy's text results).
fn text_rows(v: &serde_json::Value, key: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = v[key]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|c| if let Some(s) = c.as_str() { s.to_string() } else { c.to_string() }).collect())
        .collect();
    out.sort();
    out
}

/// Each snapshot's `eddy.next-seq`, in commit order: strictly increasing, or a range of the
/// log was committed twice.
fn check_positions(v: &serde_json::Value) {
    let seqs: Vec<u64> = v["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["summary"]["eddy.next-seq"].as_str().map(|x| x.parse().unwrap()))
        .collect();
    assert!(!seqs.is_empty(), "no snapshot records the sink's position: {v}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "a range of the sink's log was committed twice: {seqs:?}");
}

async fn sorted(c: &tokio_postgres::Client, sql: &str) -> Vec<Vec<String>> {
    let mut r = rows(c, sql).await.unwrap();
    r.sort();
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_upsert_sink_on_a_sql_catalog_equals_the_view_across_sigkill() {
    if !have_pyiceberg() {
        return;
    }
    let dir = temp_dir("iceberg-upsert");
    let state = format!("file://{}", dir.join("state").display());
    let warehouse = dir.join("warehouse");
    let catalog = dir.join("catalog.db");
    let reader = vec!["sql".to_string(), catalog.display().to_string(), "eddy".into(), format!("file://{}", warehouse.display()), "db.per_g".into()];
    let (proc, addr) = spawn_eddy(&state);
    let c = connect(addr).await;
    c.batch_execute("CREATE TABLE ev (id INT PRIMARY KEY, g INT, tag TEXT)").await.unwrap();
    c.batch_execute("INSERT INTO ev SELECT i, i % 5, 'x' || (i % 3) FROM generate_series(1, 300) i").await.unwrap();
    c.batch_execute("CREATE MATERIALIZED VIEW per_g AS SELECT g::bigint AS g, count(*) AS n, sum(id)::bigint AS s, max(tag) AS top FROM ev GROUP BY g").await.unwrap();
    let with = |extra: &str| {
        format!(
            "connector = 'iceberg', type = 'upsert', primary_key = 'g', warehouse.path = 'file://{}', database.name = 'db', table.name = 'per_g', \
             catalog.type = 'sql', catalog.uri = 'sqlite://{}', catalog.name = 'eddy', commit_checkpoint_interval = '1'{extra}",
            warehouse.display(),
            catalog.display()
        )
    };
    // Bad options name the problem and create nothing.
    for (extra, code, needle) in [
        ("", "42P01", "does not exist"),
        (", colour = 'red'", "22023", "colour"),
        (", create_table_if_not_exists = 'true', catalog.type = 'rest'", "0A000", "rest"),
        (", create_table_if_not_exists = 'true', commit_checkpoint_interval = 'often'", "22023", "commit_checkpoint_interval"),
    ] {
        let err = c.batch_execute(&format!("CREATE SINK bad FROM per_g WITH ({})", with(extra))).await.unwrap_err();
        assert_eq!(sqlstate(&err), code, "{extra}: {err:?}");
        assert!(err.as_db_error().unwrap().message().contains(needle), "{extra}: {err:?}");
    }
    c.batch_execute(&format!("CREATE SINK ice FROM per_g WITH ({})", with(", create_table_if_not_exists = 'true'"))).await.unwrap();
    let view = "SELECT g, n, s, top FROM per_g";
    eventually(DEADLINE, || async {
        let want = sorted(&c, view).await;
        read(&reader).filter(|v| text_rows(v, "rows") == want).map(|_| ())
    })
    .await;
    let shown = rows(&c, "SHOW SINKS").await.unwrap();
    assert!(shown.iter().any(|r| r[0] == "ice" && r[1] == "iceberg" && r[2] == "db.per_g"), "{shown:?}");

    // Updates, a group that disappears and one that appears, then a SIGKILL right after.
    c.batch_execute("UPDATE ev SET g = 7 WHERE g = 3").await.unwrap();
    c.batch_execute("DELETE FROM ev WHERE g = 4").await.unwrap();
    c.batch_execute("INSERT INTO ev SELECT i, i % 3, 'y' FROM generate_series(301, 600) i").await.unwrap();
    drop(c);
    drop(proc);
    let (_proc, addr) = spawn_eddy(&state);
    let c = connect(addr).await;
    c.batch_execute("UPDATE ev SET g = 1 WHERE id % 10 = 0").await.unwrap();
    c.batch_execute("DELETE FROM ev WHERE g = 0").await.unwrap();
    let want = sorted(&c, view).await;
    let got = eventually(DEADLINE, || async { read(&reader).filter(|v| text_rows(v, "rows") == want) }).await;
    check_positions(&got);
    assert_eq!(text_rows(&got, "rows").len(), 3, "groups 1, 2 and 7 are left");
    assert_eq!(got["columns"], serde_json::json!(["g", "n", "s", "top"]));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_append_only_sink_on_s3_writes_each_row_exactly_once_across_sigkill() {
    if !have_pyiceberg() {
        return;
    }
    let Some((_s3, port)) = start_s3_server() else { return };
    create_bucket(port, "lake").await;
    let dir = temp_dir("iceberg-s3");
    let state = format!("file://{}", dir.join("state").display());
    let endpoint = format!("http://127.0.0.1:{port}");
    let reader = vec!["storage".to_string(), "s3://lake/wh/db/events".to_string(), endpoint.clone()];
    let (proc, addr) = spawn_eddy(&state);
    let c = connect(addr).await;
    c.batch_execute("CREATE TABLE events (id INT PRIMARY KEY, v TEXT, at TIMESTAMP)").await.unwrap();
    c.batch_execute(&format!(
        "CREATE SINK lake AS SELECT id, v, at FROM events WITH (connector = 'iceberg', type = 'append-only', force_append_only = 'true', \
         warehouse.path = 's3://lake/wh', s3.endpoint = '{endpoint}', s3.region = 'us-east-1', s3.access.key = 'test', s3.secret.key = 'test', \
         database.name = 'db', table.name = 'events', create_table_if_not_exists = 'true', commit_checkpoint_interval = '1')"
    ))
    .await
    .unwrap();
    // A writer inserting small batches until Eddy is killed under it.
    let writer = tokio::spawn(async move {
        let mut acked = 0i32;
        for b in 0..1000i32 {
            let sql = format!("INSERT INTO events SELECT i, 'v' || i, TIMESTAMP '2026-01-01 00:00:00' + i * INTERVAL '1 second' FROM generate_series({}, {}) i", b * 10 + 1, b * 10 + 10);
            if c.batch_execute(&sql).await.is_err() {
                break;
            }
            acked = b * 10 + 10;
        }
        acked
    });
    // Kill once some rows have reached the lake.
    eventually(DEADLINE, || async { read(&reader).filter(|v| v["rows"].as_array().is_some_and(|r| r.len() >= 200)).map(|_| ()) }).await;
    drop(proc);
    let acked = writer.await.unwrap();
    assert!(acked >= 200, "the writer saw {acked} rows acknowledged");

    let (_proc, addr) = spawn_eddy(&state);
    let c = connect(addr).await;
    let survived: i64 = rows(&c, "SELECT count(*) FROM events").await.unwrap()[0][0].parse().unwrap();
    assert!(survived >= acked as i64, "acknowledged rows survive the SIGKILL");
    c.batch_execute(&format!("INSERT INTO events SELECT i, 'v' || i, NULL FROM generate_series({}, {}) i", survived + 1, survived + 100)).await.unwrap();
    let want = sorted(&c, "SELECT id, v, at FROM events").await;
    let got = eventually(DEADLINE, || async {
        read(&reader).filter(|v| v["rows"].as_array().map(|r| r.len()) >= Some(want.len()))
    })
    .await;
    let ids: Vec<i64> = got["rows"].as_array().unwrap().iter().map(|r| r[0].as_i64().unwrap()).collect();
    let distinct: BTreeSet<i64> = ids.iter().copied().collect();
    assert_eq!(ids.len(), distinct.len(), "a row was written twice");
    assert_eq!(ids.len(), want.len(), "every row once");
    // pyiceberg's own scan agrees with the files read by the spec's rules.
    assert_eq!(text_rows(&got, "scan"), text_rows(&got, "rows"));
    assert_eq!(text_rows(&got, "rows").iter().map(|r| r[1].clone()).collect::<BTreeSet<_>>(), want.iter().map(|r| r[1].clone()).collect());
    check_positions(&got);
    let _ = std::fs::remove_dir_all(dir);
}

/// The ids in the table, checking none is there twice.
fn ids_once(v: &serde_json::Value) -> BTreeSet<i64> {
    let ids: Vec<i64> = v["rows"].as_array().unwrap().iter().map(|r| r[0].as_i64().unwrap()).collect();
    let set: BTreeSet<i64> = ids.iter().copied().collect();
    assert_eq!(ids.len(), set.len(), "a row was written twice");
    set
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_sink_commits_over_another_writers_snapshot_and_rides_out_a_locked_catalog() {
    use std::io::BufRead;
    if !have_pyiceberg() {
        return;
    }
    let dir = temp_dir("iceberg-conflict");
    let state = format!("file://{}", dir.join("state").display());
    let warehouse = format!("file://{}", dir.join("warehouse").display());
    let catalog = dir.join("catalog.db").display().to_string();
    let table = vec!["sql".to_string(), catalog.clone(), "eddy".into(), warehouse.clone(), "db.t".into()];
    let (_proc, addr) = spawn_eddy(&state);
    let c = connect(addr).await;
    c.batch_execute("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)").await.unwrap();
    c.batch_execute("INSERT INTO t SELECT i, 'e' || i FROM generate_series(1, 50) i").await.unwrap();
    c.batch_execute(&format!(
        "CREATE SINK ts FROM t WITH (connector = 'iceberg', type = 'append-only', force_append_only = 'true', warehouse.path = '{warehouse}', \
         database.name = 'db', table.name = 't', catalog.type = 'sql', catalog.uri = 'sqlite://{catalog}', catalog.name = 'eddy', \
         create_table_if_not_exists = 'true', commit_checkpoint_interval = '1')"
    ))
    .await
    .unwrap();
    let count = |n: usize| {
        let table = table.clone();
        move || {
            let table = table.clone();
            async move { read(&table).filter(|v| v["rows"].as_array().is_some_and(|r| r.len() >= n)) }
        }
    };
    eventually(DEADLINE, count(50)).await;

    // Another writer commits through pyiceberg: Eddy's next commit starts from a stale
    // metadata file, is refused by the catalog, and is made again on top of the other's.
    let mut args = vec!["append".to_string(), "1001".into(), "20".into()];
    args.extend(table.iter().cloned());
    read(&args);
    c.batch_execute("INSERT INTO t SELECT i, 'e' || i FROM generate_series(51, 100) i").await.unwrap();
    let got = eventually(DEADLINE, count(120)).await;
    let want: BTreeSet<i64> = (1..=100).chain(1001..=1020).collect();
    assert_eq!(ids_once(&got), want);

    // A catalog locked by someone else: the sink says so in SHOW SINKS and retries; once the
    // lock is gone every change arrives, once.
    let mut lock = Command::new("python3")
        .args(["-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()", &catalog])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(lock.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "locked");
    c.batch_execute("INSERT INTO t SELECT i, 'e' || i FROM generate_series(101, 150) i").await.unwrap();
    let state_of = || async {
        let shown = rows(&c, "SHOW SINKS").await.unwrap();
        shown.into_iter().find(|r| r[0] == "ts").map(|r| r[3].clone()).unwrap()
    };
    let retrying = eventually(DEADLINE, || async { Some(state_of().await).filter(|s| s.starts_with("retrying")) }).await;
    assert!(retrying.contains("catalog"), "{retrying}");
    drop(lock.stdin.take());
    lock.wait().unwrap();
    let got = eventually(DEADLINE, count(170)).await;
    let want: BTreeSet<i64> = (1..=150).chain(1001..=1020).collect();
    assert_eq!(ids_once(&got), want);
    eventually(DEADLINE, || async { Some(state_of().await).filter(|s| s == "running") }).await;
    let _ = std::fs::remove_dir_all(dir);
}
