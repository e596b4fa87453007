//! Real client drivers against an in-process server: the Python drivers (psycopg 3,
//! psycopg2, SQLAlchemy, asyncpg) run `e2e_test/clients/python_drivers.py`. A missing
//! interpreter or package fails under CI (env `CI`) and is skipped with a message otherwise;
//! `.ci/run` installs them.

use std::path::PathBuf;
use std::process::Command;

use crate::support::server;

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../e2e_test/clients")
}

/// Runs the Python driver script for `driver`; `false` when it had to be skipped.
async fn run_python(driver: &'static str) -> bool {
    let srv = server("memory://").await;
    let addr = srv.addr;
    let script = clients_dir().join("python_drivers.py");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3").arg(script).arg(addr.ip().to_string()).arg(addr.port().to_string()).arg(driver).output()
    })
    .await
    .unwrap();
    srv.shutdown().await.unwrap();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            assert!(std::env::var("CI").is_err(), "python3 is required in CI: {e}");
            eprintln!("skipping {driver}: python3 not available ({e})");
            return false;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(3) {
        assert!(std::env::var("CI").is_err(), "{driver} is required in CI: {stdout}");
        eprintln!("skipping {driver}: {stdout} (.ci/run installs it)");
        return false;
    }
    assert!(out.status.success(), "{driver} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("{driver} ok")), "{stdout}");
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psycopg3_with_binary_parameters_and_prepared_statements() {
    run_python("psycopg").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psycopg2_round_trip() {
    run_python("psycopg2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlalchemy_inspector_lists_schemas_tables_and_primary_keys() {
    run_python("sqlalchemy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asyncpg_with_binary_results() {
    run_python("asyncpg").await;
}
