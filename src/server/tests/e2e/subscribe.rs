//! `SUBSCRIBE` (issue 15): a client follows a table's or view's committed changes over the
//! wire. The accumulated changes equal the relation after every write (checked at progress
//! rows); a client that never reads does not slow writers down; CancelRequest and DROP end a
//! subscription with an error and leave the session usable; after a SIGKILL every change a
//! subscriber was shown is still there (only committed epochs are delivered). Polled with
//! generous deadlines; no timing asserted.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use tokio_postgres::{Row, RowStream};

use crate::support::{bounded, connect, rows, server, spawn_eddy, sqlstate, temp_dir};

const STEP: Duration = Duration::from_secs(120);

/// Follows a `SUBSCRIBE ... WITH (PROGRESS)` of rows `(k int, n bigint, total bigint)`.
struct Follower {
    stream: std::pin::Pin<Box<RowStream>>,
    /// Accumulated diffs per row.
    state: BTreeMap<(i32, i64, Option<i64>), i64>,
    last_ts: i64,
}

impl Follower {
    async fn start(c: &tokio_postgres::Client, sql: &str) -> Self {
        let stream = bounded(STEP, "subscribe", c.query_raw(sql, std::iter::empty::<i32>())).await.unwrap();
        Self { stream: Box::pin(stream), state: BTreeMap::new(), last_ts: 0 }
    }

    async fn next_row(&mut self) -> Result<Row, tokio_postgres::Error> {
        bounded(STEP, "next subscription row", self.stream.next()).await.expect("the subscription ended without an error")
    }

    /// Reads until, at a progress row, the accumulated rows equal `expected` (sorted).
    async fn until(&mut self, expected: &[(i32, i64, Option<i64>)]) {
        loop {
            let row = self.next_row().await.unwrap();
            let ts: i64 = row.get(0);
            assert!(ts >= self.last_ts, "mz_timestamp went back from {} to {ts}", self.last_ts);
            self.last_ts = ts;
            if row.get::<_, bool>(1) {
                let now: Vec<_> = self.state.iter().filter(|(_, n)| **n != 0).map(|(r, n)| {
                    assert_eq!(*n, 1, "row {r:?} accumulated to {n}");
                    *r
                }).collect();
                if now == expected {
                    return;
                }
                continue;
            }
            let diff: i64 = row.get(2);
            assert!(diff == 1 || diff == -1, "mz_diff {diff}");
            *self.state.entry((row.get(3), row.get(4), row.get(5))).or_default() += diff;
        }
    }
}

async fn view_rows(c: &tokio_postgres::Client) -> Vec<(i32, i64, Option<i64>)> {
    let rows = c.query("SELECT k, n, total FROM s ORDER BY k, n, total", &[]).await.unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_see_the_snapshot_then_every_committed_change_and_end_with_an_error_on_drop() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    let setup = "CREATE TABLE t (id INT PRIMARY KEY, k INT, v INT);
        INSERT INTO t VALUES (1, 1, 10), (2, 2, 20), (3, 1, 30);
        CREATE MATERIALIZED VIEW s AS SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k;";
    bounded(STEP, "setup", c.batch_execute(setup)).await.unwrap();
    let sub = connect(srv.addr).await;
    let mut f = Follower::start(&sub, "SUBSCRIBE TO s WITH (PROGRESS)").await;
    f.until(&view_rows(&c).await).await;
    // A second subscriber starts without the snapshot and sees only what changes from now on.
    let sub2 = connect(srv.addr).await;
    let mut changes = Box::pin(bounded(STEP, "subscribe", sub2.query_raw("SUBSCRIBE t WITH (SNAPSHOT = false, PROGRESS)", std::iter::empty::<i32>())).await.unwrap());
    // The statement may still be starting when query_raw returns: its first progress row says
    // it follows the table (a write committed before that belongs to the skipped snapshot).
    loop {
        let row = bounded(STEP, "first progress row", changes.next()).await.unwrap().unwrap();
        if row.get::<_, bool>(1) {
            break;
        }
    }
    let steps = [
        "INSERT INTO t VALUES (4, 3, 40)",
        "UPDATE t SET v = v + 1 WHERE k = 1",
        "DELETE FROM t WHERE id = 2",
        "INSERT INTO t VALUES (5, 2, NULL), (6, 2, 7)",
        "BEGIN; UPDATE t SET k = 3 WHERE id = 1; DELETE FROM t WHERE id = 3; COMMIT",
        "DELETE FROM t",
        "INSERT INTO t VALUES (7, 9, 1)",
    ];
    for sql in steps {
        bounded(STEP, sql, c.batch_execute(sql)).await.unwrap();
        let expected = view_rows(&c).await;
        f.until(&expected).await;
    }
    // The table subscriber's first change is the first step's insert, never the snapshot rows.
    let first = loop {
        let row = bounded(STEP, "table change", changes.next()).await.unwrap().unwrap();
        if !row.get::<_, bool>(1) {
            break row;
        }
    };
    assert_eq!((first.get::<_, i64>(2), first.get::<_, i32>(3), first.get::<_, i32>(4)), (1, 4, 3));
    // Dropping the view ends its subscription with an error; the session stays usable.
    bounded(STEP, "drop", c.batch_execute("DROP MATERIALIZED VIEW s")).await.unwrap();
    let end = loop {
        match f.next_row().await {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    assert_eq!(sqlstate(&end), "42P01", "{end}");
    assert_eq!(rows(&sub, "SELECT 1").await.unwrap(), [["1"]]);
    // CancelRequest ends the table subscription (57014); that session is usable too.
    sub2.cancel_token().cancel_query(tokio_postgres::NoTls).await.unwrap();
    let end = loop {
        match bounded(STEP, "cancelled subscription", changes.next()).await {
            Some(Ok(_)) => continue,
            Some(Err(e)) => break e,
            None => panic!("the cancelled subscription ended without an error"),
        }
    };
    assert_eq!(sqlstate(&end), "57014", "{end}");
    assert_eq!(rows(&sub2, "SELECT count(*) FROM t").await.unwrap(), [["1"]]);
    // Errors name the problem.
    for (sql, code) in [
        ("SUBSCRIBE nope", "42P01"),
        ("SUBSCRIBE (SELECT 1)", "0A000"),
        ("SUBSCRIBE t WITH (snapshot = maybe)", "22023"),
        ("SUBSCRIBE t WITH (color = 'red')", "42601"),
    ] {
        let e = c.simple_query(sql).await.unwrap_err();
        assert_eq!(sqlstate(&e), code, "{sql}: {e}");
    }
    srv.shutdown().await.unwrap();
}

/// Materialize's cursor form, as psycopg apps use it: FETCH returns what has arrived, waiting
/// for the first row at most its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_cursors_fetch_what_has_arrived() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    bounded(STEP, "setup", c.batch_execute("CREATE TABLE t (id INT PRIMARY KEY, name TEXT); INSERT INTO t VALUES (1, 'a'), (2, 'b')")).await.unwrap();
    let sub = connect(srv.addr).await;
    let fetched = |sql: &'static str| {
        let sub = &sub;
        async move {
            let out = bounded(STEP, sql, sub.simple_query(sql)).await.unwrap();
            let rows: Vec<Vec<String>> = out
                .iter()
                .filter_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => Some((1..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_string()).collect()),
                    _ => None,
                })
                .collect();
            let tag = out.iter().find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::CommandComplete(n) => Some(*n),
                _ => None,
            });
            (rows, tag)
        }
    };
    assert_eq!(sqlstate(&sub.simple_query("DECLARE c CURSOR FOR SUBSCRIBE t").await.unwrap_err()), "25P01");
    bounded(STEP, "declare", sub.batch_execute("BEGIN; DECLARE c CURSOR FOR SUBSCRIBE t")).await.unwrap();
    let (mut snapshot, tag) = fetched("FETCH ALL c").await;
    // The snapshot may arrive over more than one FETCH; it holds exactly the two rows.
    while snapshot.len() < 2 {
        snapshot.extend(fetched("FETCH ALL c").await.0);
    }
    snapshot.sort();
    assert_eq!(snapshot, [["1", "1", "a"], ["1", "2", "b"]]);
    assert!(tag.is_some());
    assert_eq!(fetched("FETCH ALL c WITH (timeout = '0s')").await.0, Vec::<Vec<String>>::new());
    bounded(STEP, "insert", c.batch_execute("INSERT INTO t VALUES (3, 'c'); UPDATE t SET name = 'z' WHERE id = 1")).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.extend(fetched("FETCH ALL c WITH (timeout = '60s')").await.0);
    }
    seen.sort();
    assert_eq!(seen, [["-1", "1", "a"], ["1", "1", "z"], ["1", "3", "c"]]);
    // FETCH 1 returns one row at a time.
    bounded(STEP, "insert", c.batch_execute("INSERT INTO t VALUES (4, 'd'), (5, 'e')")).await.unwrap();
    let (one, tag) = fetched("FETCH 1 c").await;
    assert_eq!((one.len(), tag), (1, Some(1)));
    assert_eq!(fetched("FETCH NEXT FROM c").await.0.len(), 1);
    // The cursor closes with its block.
    bounded(STEP, "commit", sub.batch_execute("COMMIT")).await.unwrap();
    assert_eq!(sqlstate(&sub.simple_query("FETCH ALL c").await.unwrap_err()), "34000");
    // `COPY (SUBSCRIBE ...) TO STDOUT` streams the same rows in COPY's text format.
    let copy = bounded(STEP, "copy out", sub.copy_out("COPY (SUBSCRIBE t WITH (SNAPSHOT = false)) TO STDOUT")).await.unwrap();
    let mut copy = Box::pin(copy);
    bounded(STEP, "insert", c.batch_execute("INSERT INTO t VALUES (9, 'tab\there')")).await.unwrap();
    let data = bounded(STEP, "copied change", copy.next()).await.unwrap().unwrap();
    let line = String::from_utf8(data.to_vec()).unwrap();
    assert!(line.ends_with("\t1\t9\ttab\\there\n"), "{line:?}");
    srv.shutdown().await.unwrap();
}

/// A subscriber that stops reading never slows the writers: its changes queue in the server
/// (up to a limit), not in the dataflow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_never_reads_does_not_block_writers() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    bounded(STEP, "setup", c.batch_execute("CREATE TABLE t (id INT PRIMARY KEY, pad TEXT); CREATE MATERIALIZED VIEW m AS SELECT id, pad FROM t")).await.unwrap();
    let stalled = connect(srv.addr).await;
    // Started and never polled again: its socket fills, the server's queue takes the rest.
    let _stream = bounded(STEP, "subscribe", stalled.query_raw("SUBSCRIBE m", std::iter::empty::<i32>())).await.unwrap();
    let pad = "x".repeat(200);
    for batch in 0..60 {
        let values: Vec<String> = (0..500).map(|i| format!("({}, '{pad}')", batch * 500 + i)).collect();
        let sql = format!("INSERT INTO t VALUES {}", values.join(","));
        bounded(STEP, "insert while a subscriber stalls", c.batch_execute(&sql)).await.unwrap();
    }
    assert_eq!(rows(&c, "SELECT count(*) FROM m").await.unwrap(), [["30000"]]);
    srv.shutdown().await.unwrap();
}

/// Only committed epochs are delivered: after a SIGKILL of the real process, every row a
/// subscriber was shown is in the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_a_subscriber_saw_survives_sigkill() {
    let dir = temp_dir("subscribe-kill");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    bounded(STEP, "setup", c.batch_execute("CREATE TABLE t (id INT PRIMARY KEY)")).await.unwrap();
    let sub = connect(addr).await;
    let mut stream = Box::pin(bounded(STEP, "subscribe", sub.query_raw("SUBSCRIBE t", std::iter::empty::<i32>())).await.unwrap());
    let writer = tokio::spawn(async move {
        for id in 1..=100_000 {
            if c.execute(&format!("INSERT INTO t VALUES ({id})"), &[]).await.is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    while seen.len() < 40 {
        let row = bounded(STEP, "subscription row", stream.next()).await.unwrap().unwrap();
        seen.push(row.get::<_, i32>(2));
    }
    drop(proc); // SIGKILL while the writer and the subscription run
    // The subscription ends (with an error or the end of the connection), it does not hang.
    while let Some(Ok(row)) = bounded(STEP, "subscription after the kill", stream.next()).await {
        seen.push(row.get::<_, i32>(2));
    }
    let _ = writer.await;
    let (_proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    let ids: std::collections::HashSet<i32> = c.query("SELECT id FROM t", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let lost: Vec<i32> = seen.iter().copied().filter(|id| !ids.contains(id)).collect();
    assert!(lost.is_empty(), "rows shown to the subscriber but lost by the crash: {lost:?}");
}

/// A SUBSCRIBE interrupted while its barrier is being cut (statement_timeout of 1 ms, again
/// and again, while another session writes) never costs an epoch: every acknowledged write
/// is in the table and the view, and the view equals its query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_cut_short_while_starting_lose_no_epoch() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    bounded(STEP, "setup", c.batch_execute("CREATE TABLE t (id INT PRIMARY KEY); CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t")).await.unwrap();
    let sub = connect(srv.addr).await;
    bounded(STEP, "timeout", sub.batch_execute("SET statement_timeout = '1ms'")).await.unwrap();
    let writer = {
        let c = connect(srv.addr).await;
        tokio::spawn(async move {
            for id in 1..=200 {
                c.execute(&format!("INSERT INTO t VALUES ({id})"), &[]).await.unwrap();
            }
        })
    };
    for _ in 0..60 {
        // Times out while starting or while streaming; either way it ends with 57014.
        let e = bounded(STEP, "subscribe with a timeout", sub.simple_query("SUBSCRIBE m")).await.unwrap_err();
        assert_eq!(sqlstate(&e), "57014", "{e}");
    }
    bounded(STEP, "writer", writer).await.unwrap();
    assert_eq!(rows(&c, "SELECT count(*) FROM t").await.unwrap(), [["200"]]);
    assert_eq!(rows(&c, "SELECT n FROM m").await.unwrap(), [["200"]]);
    crate::support::verify(&c, "m").await.unwrap();
    srv.shutdown().await.unwrap();
}
