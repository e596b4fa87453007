//! Views created in the background (issue 11, "Backfill in bounded epochs": `SET
//! background_ddl = true` as in RisingWave): CREATE returns at once, the backfill goes on in
//! the server, survives a SIGKILL by resuming from its committed positions (nothing read
//! twice, nothing missed), and can be waited for (`WAIT`), dropped (cancelled) and shown in
//! `eddy_ddl_progress`.

use std::time::Duration;

use tokio_postgres::Client;

use crate::support::{bounded, connect, eventually, rows, server, spawn_eddy, temp_dir, verify, Census};

const STEP: Duration = Duration::from_secs(180);
const QUERY: &str = "SELECT g, count(*) AS n, sum(v) AS sv, min(v) AS lo, max(s) AS top FROM big GROUP BY g";

async fn exec(c: &Client, sql: &str) {
    bounded(STEP, sql, c.batch_execute(sql)).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

/// `(state, rows_done)` of `view`'s backfill in `eddy_ddl_progress`, if it is listed.
async fn progress(c: &Client, view: &str) -> Option<(String, i64)> {
    let r = rows(c, &format!("SELECT state, rows_done FROM eddy_ddl_progress WHERE view = 'public.{view}'")).await.ok()?;
    r.first().map(|r| (r[0].clone(), r[1].parse().unwrap()))
}

/// Committed keys under `prefix` of the store at `url` (no server running on it).
async fn keys_under(url: &str, prefix: &[u8]) -> usize {
    let options = eddy_storage::StoreOptions { url: url.to_string(), ..Default::default() };
    let store = eddy_storage::StateStore::open(&options).await.expect("store opens");
    let n = store.snapshot().scan_prefix(prefix).await.expect("scan").len();
    store.close().await.expect("store closes");
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_view_resumes_its_backfill_after_sigkill_and_is_exact() {
    let dir = temp_dir("background-ddl-kill");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = eventually(STEP, || async { Some(connect(addr).await) }).await;
    exec(&c, "CREATE TABLE big (id BIGINT PRIMARY KEY, g INT, v BIGINT, s TEXT)").await;
    exec(&c, "INSERT INTO big SELECT i, i % 97, i * 3, 'row ' || i FROM generate_series(1, 60000) AS s(i)").await;
    // Hundreds of epochs of backfill.
    exec(&c, "SET background_ddl = true; SET backfill_epoch_rows = 100").await;
    exec(&c, &format!("CREATE MATERIALIZED VIEW bg AS {QUERY}")).await;
    // Not readable (nor in the catalog) until complete; its name is taken.
    let early = rows(&c, "SELECT count(*) FROM bg").await;
    let (state, done) = eventually(STEP, || async { progress(&c, "bg").await }).await;
    if state == "running" {
        assert!(early.as_ref().is_err_and(|e| e.starts_with("42P01")), "a view being created was readable: {early:?}");
        let dup = rows(&c, &format!("CREATE MATERIALIZED VIEW bg AS {QUERY}")).await;
        assert!(dup.as_ref().is_err_and(|e| e.starts_with("42P07")), "a second view of the same name: {dup:?}");
    }
    eprintln!("backfill {state} with {done} rows read right after CREATE");
    // Writes during the backfill, acknowledged before the kill.
    exec(&c, "UPDATE big SET v = v + 1 WHERE id % 10 = 0; DELETE FROM big WHERE id % 7 = 0; INSERT INTO big VALUES (100001, 5, 5, 'new')").await;
    let before = eventually(STEP, || async { progress(&c, "bg").await.filter(|(_, n)| *n >= 3000) }).await;
    eprintln!("killing the server with the backfill at {before:?}");
    drop(c);
    drop(proc);

    let (proc, addr) = spawn_eddy(&url);
    let c = eventually(STEP, || async { Some(connect(addr).await) }).await;
    // The creation resumed (it would be gone had its state been swept as a failed CREATE's).
    let (state, resumed_at) = eventually(STEP, || async { progress(&c, "bg").await }).await;
    eprintln!("after the restart: {state}, {resumed_at} rows counted as read");
    if state == "running" {
        assert!(resumed_at > 0, "the backfill started over instead of reading on");
    }
    exec(&c, "INSERT INTO big VALUES (100002, 6, 6, 'newer'); DELETE FROM big WHERE id = 2").await;
    bounded(STEP, "WAIT", c.batch_execute("WAIT")).await.unwrap();
    assert_eq!(progress(&c, "bg").await.map(|p| p.0), Some("done".to_string()));
    verify(&c, "bg").await.unwrap();
    let n = rows(&c, "SELECT sum(n) FROM bg").await.unwrap();
    let m = rows(&c, "SELECT count(*) FROM big").await.unwrap();
    assert_eq!(n, m, "the view counts every row once");
    exec(&c, "UPDATE big SET g = 3 WHERE id < 500").await;
    verify(&c, "bg").await.unwrap();
    drop(c);
    drop(proc);
    // The record and the positions went with the catalog entry's commit.
    assert_eq!(keys_under(&url, eddy_common::codec::CREATING_PREFIX).await, 0);
    let positions = eddy_common::codec::backfill_prefix(0);
    let positions = &positions[..positions.len() - 4];
    assert_eq!(keys_under(&url, positions).await, 0, "backfill positions left behind");
    let census = Census::open(&url).await;
    assert_eq!(census.orphans(), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_being_created_in_the_background_can_be_waited_for_dropped_and_protects_its_inputs() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    exec(&c, "CREATE TABLE big (id BIGINT PRIMARY KEY, g INT, v BIGINT, s TEXT)").await;
    exec(&c, "INSERT INTO big SELECT i, i % 97, i * 3, 'row ' || i FROM generate_series(1, 20000) AS s(i)").await;
    let bad = c.batch_execute("SET background_ddl = maybe").await.unwrap_err();
    assert_eq!(crate::support::sqlstate(&bad), "22023");
    // One row per epoch: this backfill outlasts the test unless it is cancelled.
    exec(&c, "SET background_ddl = on; SET backfill_epoch_rows = 1").await;
    exec(&c, &format!("CREATE MATERIALIZED VIEW slow AS {QUERY}")).await;
    let ids = {
        let creating = srv.engine.creating.names();
        assert_eq!(creating, vec!["public.slow".to_string()]);
        let id = srv.engine.creating.named("public", "slow").unwrap();
        let view = srv.engine.creating_records(&srv.engine.store.snapshot()).await.unwrap().remove(&id).expect("its creation record committed").view;
        std::iter::once(view.id).chain(view.internal_tables).collect::<Vec<u32>>()
    };
    let e = c.batch_execute(&format!("CREATE MATERIALIZED VIEW slow AS {QUERY}")).await.unwrap_err();
    assert_eq!(crate::support::sqlstate(&e), "42P07");
    exec(&c, &format!("CREATE MATERIALIZED VIEW IF NOT EXISTS slow AS {QUERY}")).await;
    let e = c.batch_execute("DROP TABLE big").await.unwrap_err();
    assert_eq!(crate::support::sqlstate(&e), "2BP01", "{e:?}");
    // Some of its backfill committed; DROP cancels it and removes that state.
    eventually(STEP, || async { progress(&c, "slow").await.filter(|(_, n)| *n >= 20) }).await;
    exec(&c, "DROP MATERIALIZED VIEW slow").await;
    assert!(srv.engine.creating.names().is_empty());
    exec(&c, "FLUSH").await;
    let census = Census::of(&srv.engine.store).await;
    assert_eq!(census.keys_under(&ids), 0, "state of the cancelled view is left");
    assert!(srv.engine.creating_records(&srv.engine.store.snapshot()).await.unwrap().is_empty());

    // A quick one, waited for; then the input can be dropped with its view.
    exec(&c, "SET backfill_epoch_rows = 2000").await;
    exec(&c, &format!("CREATE MATERIALIZED VIEW quick AS {QUERY}")).await;
    exec(&c, "INSERT INTO big VALUES (0, 0, 0, 'zero'); UPDATE big SET v = 1 WHERE id < 50").await;
    bounded(STEP, "WAIT", c.batch_execute("WAIT")).await.unwrap();
    verify(&c, "quick").await.unwrap();
    // A foreground CREATE, and a cascade that cancels a creation.
    exec(&c, "SET background_ddl = false").await;
    exec(&c, "CREATE MATERIALIZED VIEW fg AS SELECT count(*) AS n FROM big").await;
    assert_eq!(rows(&c, "SELECT n FROM fg").await.unwrap(), vec![vec!["20001".to_string()]]);
    exec(&c, "SET background_ddl = true; SET backfill_epoch_rows = 1").await;
    exec(&c, &format!("CREATE MATERIALIZED VIEW slow2 AS {QUERY}")).await;
    exec(&c, "DROP TABLE big CASCADE").await;
    assert!(srv.engine.creating.names().is_empty());
    let census = Census::of(&srv.engine.store).await;
    assert_eq!(census.orphans(), Vec::<String>::new());
    drop(c);
    srv.shutdown().await.unwrap();
}
