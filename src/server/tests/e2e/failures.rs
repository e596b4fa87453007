//! Internal faults in views (issue 9, "one bad row never breaks ... nothing stalls"): a view
//! whose expression panics (`eddy_test_panic()`, triggered by one row) fails with the views
//! that read it, and nothing else does. After each failure: other views and DML keep working
//! within deadlines, a restart on the same state still reports the failure and serves the
//! rest, and DROP removes the failed views and every key they owned.

use std::time::Duration;

use tokio_postgres::Client;

use crate::support::{bounded, connect, eventually, rows, server, temp_dir, verify, Census};

/// Longest any single step may take; a hang fails the test instead of stalling CI.
const STEP: Duration = Duration::from_secs(60);

/// A view expression that panics on a row with `v = 13` and passes every other row through.
const PANIC_ON_13: &str = "v + eddy_test_panic_if(v = 13)";

/// Waits until reading `view` fails with an internal error (XX000) saying it stopped.
async fn wait_failed(c: &Client, view: &str) -> String {
    eventually(STEP, || async move {
        match rows(c, &format!("SELECT * FROM {view}")).await {
            Err(e) if e.starts_with("XX000") && e.contains("stopped being maintained") => Some(e),
            _ => None,
        }
    })
    .await
}

/// Runs `sql`, panicking with the statement and error on failure.
async fn exec(c: &Client, sql: &str) {
    bounded(STEP, sql, c.batch_execute(sql)).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

/// The single value `sql` returns.
async fn one(c: &Client, sql: &str) -> String {
    let r = bounded(STEP, sql, rows(c, sql)).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert_eq!(r.len(), 1, "{sql}: {r:?}");
    r[0][0].clone()
}

/// Checks that the server is healthy apart from the failed views: DML on `table`, FLUSH, a
/// new view, and VERIFY of every view in `healthy`.
async fn everything_else_works(c: &Client, table: &str, healthy: &[&str], round: i32) {
    let base = 1_000_000 + 1000 * round;
    exec(c, &format!("INSERT INTO {table} VALUES ({base}, 1), ({}, 2)", base + 1)).await;
    exec(c, &format!("UPDATE {table} SET v = v + 1 WHERE id = {base}")).await;
    exec(c, &format!("DELETE FROM {table} WHERE id = {}", base + 1)).await;
    exec(c, "FLUSH").await;
    let fresh = format!("fresh_{round}");
    exec(c, &format!("CREATE MATERIALIZED VIEW {fresh} AS SELECT count(*) AS n FROM {table}")).await;
    for v in healthy.iter().copied().chain([fresh.as_str()]) {
        bounded(STEP, "VERIFY", verify(c, v)).await.unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
    exec(c, &format!("DROP MATERIALIZED VIEW {fresh}")).await;
}

/// Restarts the server on `url` within the deadline and connects to it.
async fn restart(srv: eddy_server::ServerHandle, url: &str) -> (eddy_server::ServerHandle, Client) {
    bounded(STEP, "shutdown", srv.shutdown()).await.expect("shutdown");
    let srv = bounded(STEP, "restart", server(url)).await;
    let c = connect(srv.addr).await;
    (srv, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_view_fails_with_its_dependents_two_levels_deep_and_nothing_else_stops() {
    let dir = temp_dir("fail-deps");
    let url = format!("file://{}", dir.display());
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    exec(
        &c,
        &format!(
            "CREATE TABLE t (id INT PRIMARY KEY, v INT); CREATE TABLE other (id INT PRIMARY KEY, v INT); \
             INSERT INTO t VALUES (1, 1), (2, 2); INSERT INTO other VALUES (1, 10); \
             CREATE MATERIALIZED VIEW bad AS SELECT id, {PANIC_ON_13} AS w FROM t; \
             CREATE MATERIALIZED VIEW bad_agg AS SELECT count(*) AS n, sum(w) AS s FROM bad; \
             CREATE MATERIALIZED VIEW bad_agg2 AS SELECT n * 2 AS n2 FROM bad_agg; \
             CREATE MATERIALIZED VIEW good AS SELECT count(*) AS n, sum(v) AS s FROM t; \
             CREATE MATERIALIZED VIEW other_sum AS SELECT sum(v) AS s FROM other"
        ),
    )
    .await;
    assert_eq!(one(&c, "SELECT n2 FROM bad_agg2").await, "4");
    // The row that makes `bad` panic is an accepted write like any other.
    exec(&c, "INSERT INTO t VALUES (3, 13)").await;
    for v in ["bad", "bad_agg", "bad_agg2"] {
        let e = wait_failed(&c, v).await;
        assert!(e.contains(&format!("\"{v}\"")), "{v}: {e}");
    }
    assert_eq!(one(&c, "SELECT n FROM good").await, "3");
    everything_else_works(&c, "t", &["good", "other_sum"], 1).await;
    everything_else_works(&c, "other", &["good", "other_sum"], 2).await;

    // A restart keeps the failures (nothing resumes from stale state) and serves the rest.
    let (srv, c) = restart(srv, &url).await;
    for v in ["bad", "bad_agg", "bad_agg2"] {
        wait_failed(&c, v).await;
    }
    everything_else_works(&c, "t", &["good", "other_sum"], 3).await;
    let (srv, c) = restart(srv, &url).await;
    drop(c);
    bounded(STEP, "shutdown", srv.shutdown()).await.unwrap();
    let before = Census::open(&url).await;
    let failed_ids: Vec<u32> = ["bad", "bad_agg", "bad_agg2"].iter().flat_map(|v| before.ids(v).expect(v)).collect();
    assert!(before.keys_under(&failed_ids) > 0, "the failed views' state and failure records exist until DROP");

    // DROP ... CASCADE removes all three and everything they owned.
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    exec(&c, "DROP MATERIALIZED VIEW bad CASCADE").await;
    let e = rows(&c, "SELECT * FROM bad_agg2").await.expect_err("dropped");
    assert!(e.starts_with("42P01"), "{e}");
    everything_else_works(&c, "t", &["good", "other_sum"], 4).await;
    // The name is free again.
    exec(&c, "CREATE MATERIALIZED VIEW bad AS SELECT id, v FROM t").await;
    verify(&c, "bad").await.unwrap();
    exec(&c, "DROP MATERIALIZED VIEW bad").await;
    drop(c);
    bounded(STEP, "shutdown", srv.shutdown()).await.unwrap();
    let after = Census::open(&url).await;
    assert_eq!(after.keys_under(&failed_ids), 0, "state left behind by DROP: {after:?}");
    assert_eq!(after.orphans(), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_union_view_with_one_panicking_input_fails_and_its_other_input_keeps_serving() {
    let dir = temp_dir("fail-union");
    let url = format!("file://{}", dir.display());
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    exec(
        &c,
        &format!(
            "CREATE TABLE a (id INT PRIMARY KEY, v INT); CREATE TABLE b (id INT PRIMARY KEY, v INT); \
             INSERT INTO a VALUES (1, 1); INSERT INTO b VALUES (1, 2); \
             CREATE MATERIALIZED VIEW u AS SELECT id, v FROM a UNION ALL SELECT id, {PANIC_ON_13} FROM b; \
             CREATE MATERIALIZED VIEW u_count AS SELECT count(*) AS n FROM u; \
             CREATE MATERIALIZED VIEW a_only AS SELECT id, v FROM a; \
             CREATE MATERIALIZED VIEW b_only AS SELECT count(*) AS n FROM b"
        ),
    )
    .await;
    assert_eq!(one(&c, "SELECT n FROM u_count").await, "2");
    exec(&c, "INSERT INTO b VALUES (2, 13)").await;
    wait_failed(&c, "u").await;
    wait_failed(&c, "u_count").await;
    everything_else_works(&c, "a", &["a_only", "b_only"], 1).await;
    everything_else_works(&c, "b", &["a_only", "b_only"], 2).await;

    let (srv, c) = restart(srv, &url).await;
    wait_failed(&c, "u").await;
    wait_failed(&c, "u_count").await;
    everything_else_works(&c, "a", &["a_only", "b_only"], 3).await;
    drop(c);
    bounded(STEP, "shutdown", srv.shutdown()).await.unwrap();
    let before = Census::open(&url).await;
    let failed_ids: Vec<u32> = ["u", "u_count"].iter().flat_map(|v| before.ids(v).expect(v)).collect();

    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    exec(&c, "DROP MATERIALIZED VIEW u CASCADE").await;
    everything_else_works(&c, "b", &["a_only", "b_only"], 4).await;
    drop(c);
    bounded(STEP, "shutdown", srv.shutdown()).await.unwrap();
    let after = Census::open(&url).await;
    assert_eq!(after.keys_under(&failed_ids), 0, "state left behind by DROP: {after:?}");
    assert_eq!(after.orphans(), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_whose_backfill_panics_is_refused_and_leaves_nothing_behind() {
    let dir = temp_dir("fail-backfill");
    let url = format!("file://{}", dir.display());
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    exec(
        &c,
        "CREATE TABLE t (id INT PRIMARY KEY, v INT); \
         INSERT INTO t SELECT i, i % 100 FROM generate_series(1, 2000) AS s(i); \
         CREATE MATERIALIZED VIEW good AS SELECT v, count(*) AS n FROM t GROUP BY v",
    )
    .await;
    let ids_before = srv.engine.catalog().tables().map(|t| t.id).max().unwrap();
    // Rows with v = 13 already exist: the panic happens while the view backfills.
    let create = format!("CREATE MATERIALIZED VIEW bad AS SELECT v, sum({PANIC_ON_13}) AS s FROM t GROUP BY v");
    let e = bounded(STEP, "CREATE", c.batch_execute(&create)).await.expect_err("the backfill panics");
    assert_eq!(crate::support::sqlstate(&e), "XX000", "{e:?}");
    // As in PostgreSQL, a CREATE that failed created nothing: the name is free.
    let e = rows(&c, "SELECT * FROM bad").await.expect_err("no view");
    assert!(e.starts_with("42P01"), "{e}");
    everything_else_works(&c, "t", &["good"], 1).await;
    exec(&c, "CREATE MATERIALIZED VIEW bad AS SELECT v, sum(v) AS s FROM t GROUP BY v").await;
    verify(&c, "bad").await.unwrap();

    let (srv, c) = restart(srv, &url).await;
    everything_else_works(&c, "t", &["good", "bad"], 2).await;
    exec(&c, "DROP MATERIALIZED VIEW bad").await;
    drop(c);
    bounded(STEP, "shutdown", srv.shutdown()).await.unwrap();
    let after = Census::open(&url).await;
    assert_eq!(after.orphans(), Vec::<String>::new());
    let newer: Vec<u32> = after.keys.keys().copied().filter(|id| *id > ids_before).collect();
    let live: Vec<u32> = after.catalog.tables().flat_map(|t| std::iter::once(t.id).chain(t.internal_tables.clone())).collect();
    assert!(newer.iter().all(|id| live.contains(id)), "keys of the failed CREATE remain: {newer:?}, live {live:?}");
    assert!(after.failures.is_empty(), "failure records remain: {:?}", after.failures);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_that_cannot_be_planned_at_start_up_fails_alone_and_the_server_starts() {
    let dir = temp_dir("fail-replan");
    let url = format!("file://{}", dir.display());
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    exec(
        &c,
        &format!(
            "CREATE TABLE t (id INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 1), (2, 2); \
             CREATE MATERIALIZED VIEW needs_fn AS SELECT id, {PANIC_ON_13} AS w FROM t; \
             CREATE MATERIALIZED VIEW on_needs_fn AS SELECT count(*) AS n FROM needs_fn; \
             CREATE MATERIALIZED VIEW good AS SELECT count(*) AS n, sum(v) AS s FROM t"
        ),
    )
    .await;
    drop(c);
    bounded(STEP, "shutdown", srv.shutdown()).await.expect("shutdown");
    // Without the test functions `needs_fn` no longer plans: it (and the view on it) is marked
    // failed at start-up, and the server starts and serves the rest. Starting used to hang.
    for round in 1..=2 {
        let url = url.clone();
        let srv = bounded(STEP, "start without the view's function", crate::support::server_with(move |cfg| {
            cfg.state_store = url;
            cfg.test_functions = false;
        }))
        .await;
        let c = connect(srv.addr).await;
        for v in ["needs_fn", "on_needs_fn"] {
            let e = bounded(STEP, "read a failed view", rows(&c, &format!("SELECT * FROM {v}"))).await.expect_err("failed");
            assert!(e.starts_with("XX000"), "{v}: {e}");
        }
        // Two rows, and one more left by each earlier round's checks.
        assert_eq!(one(&c, "SELECT n FROM good").await, (1 + round).to_string());
        everything_else_works(&c, "t", &["good"], round).await;
        drop(c);
        bounded(STEP, "shutdown", srv.shutdown()).await.expect("shutdown");
    }
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    exec(&c, "DROP MATERIALIZED VIEW needs_fn CASCADE").await;
    verify(&c, "good").await.unwrap();
    drop(c);
    bounded(STEP, "shutdown", srv.shutdown()).await.unwrap();
    assert_eq!(Census::open(&url).await.orphans(), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}
