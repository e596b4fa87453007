//! Real client drivers against an in-process server: the Python drivers (psycopg 3,
//! psycopg2, SQLAlchemy, asyncpg) run `e2e_test/clients/python_drivers.py`, pgjdbc (Debian's
//! `libpostgresql-jdbc-java`) runs `e2e_test/clients/jdbc/JdbcDriver.java`, and node-postgres
//! runs `e2e_test/clients/node/node_pg.js`. Each creates a table and a materialized view,
//! inserts, and reads both back with type checks. `e2e_test/clients/python_transactions.py`
//! runs transaction blocks through psycopg 3 and SQLAlchemy sessions. A missing interpreter, JDK, jar or package
//! fails under CI (env `CI`) and is skipped with a message otherwise; `.ci/run` installs them.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::support::server;

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../e2e_test/clients")
}

/// Skips (or, under CI, fails) a client test whose tooling is missing.
fn skip(label: &str, why: &str) -> bool {
    assert!(std::env::var("CI").is_err(), "{label} is required in CI: {why}");
    eprintln!("skipping {label}: {why} (.ci/run installs it)");
    false
}

/// Starts a server, runs `program args... HOST PORT extra...` against it, and checks that it
/// printed `expect`. Exit status 3 means "a module is missing". `false` when skipped.
async fn run_client(label: &str, program: &str, args: Vec<String>, extra: Vec<String>, expect: &str) -> bool {
    let srv = server("memory://").await;
    let addr = srv.addr;
    let program_owned = program.to_string();
    let out: std::io::Result<Output> = tokio::task::spawn_blocking(move || {
        Command::new(program_owned)
            .args(args)
            .arg(addr.ip().to_string())
            .arg(addr.port().to_string())
            .args(extra)
            .current_dir(clients_dir())
            .output()
    })
    .await
    .unwrap();
    srv.shutdown().await.unwrap();
    let out = match out {
        Ok(o) => o,
        Err(e) => return skip(label, &format!("{program} not available ({e})")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(3) {
        return skip(label, &stdout);
    }
    assert!(out.status.success(), "{label} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(expect), "{stdout}");
    true
}

/// Runs the Python driver script for `driver`.
async fn run_python(driver: &'static str) -> bool {
    let script = clients_dir().join("python_drivers.py").display().to_string();
    run_client(driver, "python3", vec![script], vec![driver.to_string()], &format!("{driver} ok")).await
}

/// Runs `e2e_test/clients/python_transactions.py` for `driver`.
async fn run_python_transactions(driver: &'static str) -> bool {
    let script = clients_dir().join("python_transactions.py").display().to_string();
    run_client(driver, "python3", vec![script], vec![driver.to_string()], &format!("{driver} transactions ok")).await
}

/// psycopg 3: COMMIT, ROLLBACK, SAVEPOINT / ROLLBACK TO / RELEASE, failed blocks (an error then
/// ROLLBACK, COMMIT of a failed block), `with conn.transaction()` committing and rolling back
/// on database and application errors, nested `transaction()` savepoints; two materialized
/// views over the table equal exactly the committed writes after every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psycopg3_transactions_commit_roll_back_and_fail_as_on_postgres_with_views_following_commits() {
    run_python_transactions("psycopg").await;
}

/// SQLAlchemy ORM sessions: commit, `rollback()` of flushed changes, rollback after an
/// IntegrityError, `with session.begin()` on success and on an exception, `begin_nested()`
/// savepoints; the views follow the committed writes only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlalchemy_session_transactions_commit_and_roll_back_as_on_postgres_with_views_following_commits() {
    run_python_transactions("sqlalchemy").await;
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

/// pgjdbc: PreparedStatement insert/select with type checks, fetch-size portals, and
/// DatabaseMetaData getSchemas/getTables/getColumns/getPrimaryKeys. The jar is Debian's
/// (`EDDY_PGJDBC_JAR` overrides the path); `java` runs the single source file directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgjdbc_prepared_statements_and_database_metadata() {
    let jar = std::env::var("EDDY_PGJDBC_JAR").unwrap_or_else(|_| "/usr/share/java/postgresql.jar".into());
    if !std::path::Path::new(&jar).exists() {
        skip("pgjdbc", &format!("{jar} is missing (apt-get install libpostgresql-jdbc-java)"));
        return;
    }
    let source = clients_dir().join("jdbc/JdbcDriver.java").display().to_string();
    run_client("pgjdbc", "java", vec!["-cp".into(), jar, source], vec![], "jdbc ok").await;
}

/// node-postgres from `e2e_test/clients/node` (`npm ci` there installs it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_postgres_parameters_and_materialized_views() {
    let script = clients_dir().join("node/node_pg.js").display().to_string();
    run_client("node-postgres", "node", vec![script], vec![], "node-postgres ok").await;
}

/// Protocol details through psycopg 3: the ReadyForQuery status byte (I/T/E, E after an error
/// inside BEGIN until ROLLBACK), DEALLOCATE name/ALL (26000 for an unknown name), DISCARD ALL,
/// RESET ALL, LISTEN/UNLISTEN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_status_byte_deallocate_discard_reset_listen() {
    run_python("protocol").await;
}

/// psycopg 3 following a view with `DECLARE c CURSOR FOR SUBSCRIBE ...` / `FETCH ... WITH
/// (timeout)` and with `cursor.stream("SUBSCRIBE ...")` (closed early: psycopg cancels it), and
/// psycopg's server-side cursors (`conn.cursor(name=...)`, which describe the cursor's portal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psycopg3_follows_a_view_with_subscribe() {
    let script = clients_dir().join("python_subscribe.py").display().to_string();
    run_client("psycopg subscribe", "python3", vec![script], vec![], "psycopg subscribe ok").await;
}
