//! SIGKILL of a real `eddy` process in the middle of long operations (issue 9, "a failed
//! CREATE leaves no state behind", "statement atomicity", "DROP removes a relation's state"):
//! during a CREATE MATERIALIZED VIEW's backfill over a large table, during a large COPY, and
//! during DROP. After each, a server on the same state must show every view equal to its
//! recomputation (VERIFY), the interrupted statement entirely applied or not at all, and no key
//! under an id that no catalog entry owns.
//!
//! The kill lands at half the measured duration of an identical, uninterrupted operation run
//! just before: a way to pick a crash point in the middle, not a synchronization (nothing
//! waits on it; the test holds whichever way the race goes, and says so when the operation
//! finished first).

use std::time::{Duration, Instant};

use futures::SinkExt;
use tokio_postgres::Client;

use crate::support::{bounded, connect, eventually, rows, server, spawn_eddy, temp_dir, verify, Census};

/// Rows of the large tables. A debug build backfills these in a few seconds.
const ROWS: i64 = 100_000;

/// Longest one step may take.
const STEP: Duration = Duration::from_secs(120);

async fn exec(c: &Client, sql: &str) {
    bounded(STEP, sql, c.batch_execute(sql)).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

async fn count(c: &Client, table: &str) -> i64 {
    let r = rows(c, &format!("SELECT count(*) FROM {table}")).await.unwrap_or_else(|e| panic!("{table}: {e}"));
    r[0][0].parse().unwrap()
}

/// Fills `table (id BIGINT, g INT, v BIGINT, s TEXT)` with ids `from..from + n`.
async fn load(c: &Client, table: &str, from: i64, n: i64) {
    exec(c, &format!("INSERT INTO {table} SELECT i, i % 97, i * 3, 'row ' || i FROM generate_series({from}, {}) AS s(i)", from + n - 1)).await;
}

/// Starts a server on `url` after a crash and checks it: every view verifies, no orphaned
/// state. Returns the server (for further checks) and a client.
async fn recovered(url: &str) -> (eddy_server::ServerHandle, Client) {
    let srv = bounded(STEP, "restart after SIGKILL", server(url)).await;
    let c = connect(srv.addr).await;
    let views: Vec<String> = srv.engine.catalog().tables().filter(|t| t.is_view()).map(|t| t.name.clone()).collect();
    for v in &views {
        bounded(STEP, "VERIFY", verify(&c, v)).await.unwrap_or_else(|e| panic!("after SIGKILL: {e}"));
    }
    let census = Census::of(&srv.engine.store).await;
    assert_eq!(census.orphans(), Vec::<String>::new(), "state without an owner after SIGKILL");
    (srv, c)
}

/// Runs `sql` on a fresh connection in the background, kills the process after `after`, and
/// tells whether the statement had finished by then.
async fn kill_during(proc: crate::support::Process, addr: std::net::SocketAddr, sql: String, after: Duration) -> bool {
    let c = connect(addr).await;
    let task = tokio::spawn(async move { c.batch_execute(&sql).await });
    tokio::time::sleep(after).await;
    let finished = task.is_finished();
    drop(proc);
    let _ = bounded(STEP, "the interrupted statement", task).await;
    if finished {
        eprintln!("note: the statement finished before the kill; this run checked a clean SIGKILL after it");
    }
    finished
}

/// Measures `sql`.
async fn timed(c: &Client, sql: &str) -> Duration {
    let t = Instant::now();
    exec(c, sql).await;
    t.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_a_backfill_leaves_no_view_or_a_complete_one_and_no_orphan_state() {
    let dir = temp_dir("kill-backfill");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = eventually(STEP, || async { Some(connect(addr).await) }).await;
    exec(&c, "CREATE TABLE big (id BIGINT PRIMARY KEY, g INT, v BIGINT, s TEXT)").await;
    load(&c, "big", 1, ROWS).await;
    let query = "SELECT g, count(*) AS n, sum(v) AS sv, max(s) AS top FROM big GROUP BY g";
    let took = timed(&c, &format!("CREATE MATERIALIZED VIEW first AS {query}")).await;
    kill_during(proc, addr, format!("CREATE MATERIALIZED VIEW second AS {query}"), took / 2).await;

    let (srv, c) = recovered(&url).await;
    assert_eq!(count(&c, "big").await, ROWS);
    // The interrupted view exists completely (verified above) or not at all; either way the
    // server keeps maintaining what it has, and the name can be (re)used.
    let second_exists = srv.engine.catalog().table("public", "second").is_some();
    eprintln!("after SIGKILL mid-backfill the view {}", if second_exists { "exists, complete" } else { "does not exist" });
    exec(&c, "INSERT INTO big VALUES (0, 0, 0, 'zero'); DELETE FROM big WHERE id = 1").await;
    if !second_exists {
        exec(&c, &format!("CREATE MATERIALIZED VIEW second AS {query}")).await;
    }
    for v in ["first", "second"] {
        verify(&c, v).await.unwrap();
    }
    drop(c);
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_a_large_copy_applies_none_of_it() {
    let dir = temp_dir("kill-copy");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = eventually(STEP, || async { Some(connect(addr).await) }).await;
    exec(
        &c,
        "CREATE TABLE c (id BIGINT PRIMARY KEY, g INT, v BIGINT, s TEXT); \
         CREATE MATERIALIZED VIEW c_groups AS SELECT g, count(*) AS n, sum(v) AS sv, min(s) AS lo FROM c GROUP BY g; \
         CREATE MATERIALIZED VIEW c_some AS SELECT id, s FROM c WHERE g < 5",
    )
    .await;
    load(&c, "c", 1, 1000).await;
    // A COPY far larger than anything buffered between client and server; the kill comes once
    // most of it was sent (the sink's backpressure means the server has been consuming it).
    let sink = c.copy_in("COPY c FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    let batch = 10_000i64;
    let batches = 3 * ROWS / batch;
    for b in 0..batches {
        let mut text = String::with_capacity(40 * batch as usize);
        for i in 0..batch {
            let id = 1001 + b * batch + i;
            text.push_str(&format!("{id}\t{}\t{}\tcopied {id}\n", id % 97, id * 3));
        }
        bounded(STEP, "COPY data", sink.send(bytes::Bytes::from(text))).await.unwrap();
    }
    drop(proc);
    assert!(sink.finish().await.is_err(), "the COPY cannot complete on a killed server");

    let (srv, c) = recovered(&url).await;
    assert_eq!(count(&c, "c").await, 1000, "a COPY that never completed must apply nothing");
    let copied = rows(&c, "SELECT count(*) FROM c_some WHERE s LIKE 'copied%'").await.unwrap();
    assert_eq!(copied, vec![vec!["0".to_string()]]);
    // The table takes the same rows again.
    let sink = c.copy_in("COPY c FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from("5000\t1\t2\tagain\n")).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 1);
    for v in ["c_groups", "c_some"] {
        verify(&c, v).await.unwrap();
    }
    drop(c);
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_drop_leaves_each_relation_whole_or_gone_without_a_trace() {
    let dir = temp_dir("kill-drop");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = eventually(STEP, || async { Some(connect(addr).await) }).await;
    exec(&c, "CREATE TABLE d (id BIGINT PRIMARY KEY, g INT, v BIGINT, s TEXT); CREATE TABLE keep (id INT PRIMARY KEY)").await;
    load(&c, "d", 1, ROWS).await;
    exec(
        &c,
        "INSERT INTO keep VALUES (1), (2); \
         CREATE MATERIALIZED VIEW d_copy1 AS SELECT id, g, v FROM d WHERE v >= 0; \
         CREATE MATERIALIZED VIEW d_copy2 AS SELECT id, g, v FROM d WHERE v >= 0; \
         CREATE MATERIALIZED VIEW d_groups AS SELECT g, count(*) AS n FROM d GROUP BY g; \
         CREATE MATERIALIZED VIEW keep_n AS SELECT count(*) AS n FROM keep",
    )
    .await;
    // Everything above is acknowledged, hence durable: a kill now loses nothing.
    drop(c);
    drop(proc);
    let before = Census::open(&url).await;
    let ids = |name: &str| before.ids(name).unwrap_or_else(|| panic!("{name} exists"));
    let doomed = [("d", ids("d")), ("d_copy2", ids("d_copy2")), ("d_groups", ids("d_groups"))];
    let copy1 = ids("d_copy1");
    assert!(before.keys_under(&copy1) as i64 >= ROWS);

    let (proc, addr) = spawn_eddy(&url);
    let c = eventually(STEP, || async { Some(connect(addr).await) }).await;
    let took = timed(&c, "DROP MATERIALIZED VIEW d_copy1").await;
    kill_during(proc, addr, "DROP TABLE d CASCADE".to_string(), took / 2).await;

    let (srv, c) = recovered(&url).await;
    let census = Census::of(&srv.engine.store).await;
    assert_eq!(census.keys_under(&copy1), 0, "the completed DROP left state behind");
    for (name, ids) in &doomed {
        eprintln!("after SIGKILL mid-DROP {name} {}", if census.ids(name).is_some() { "exists, complete" } else { "is gone" });
        if census.ids(name).is_none() {
            assert_eq!(census.keys_under(ids), 0, "{name} was dropped but left state behind");
        }
    }
    // Views never outlive what they read.
    if census.ids("d").is_none() {
        assert!(census.ids("d_copy2").is_none() && census.ids("d_groups").is_none());
    } else {
        assert_eq!(count(&c, "d").await, ROWS);
    }
    exec(&c, "INSERT INTO keep VALUES (3)").await;
    assert_eq!(rows(&c, "SELECT n FROM keep_n").await.unwrap(), vec![vec!["3".to_string()]]);
    exec(&c, "DROP TABLE IF EXISTS d CASCADE").await;
    drop(c);
    srv.shutdown().await.unwrap();
    let after = Census::open(&url).await;
    let all: Vec<u32> = doomed.iter().flat_map(|(_, ids)| ids.clone()).collect();
    assert_eq!(after.keys_under(&all), 0);
    assert_eq!(after.orphans(), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}
