//! Parallel views across a crash (issue 12, "parallel fragments"): views (aggregations, a join,
//! windows) of three actors per fragment (not a divisor of the 256 vnodes, so the ranges are
//! uneven) keep their parallelism
//! and their state across a SIGKILL of the real process that lands while writes flow, and equal
//! their queries afterwards — including a window-closing aggregation, whose actors rebuild
//! their open windows after the restart from a scan of their own vnodes only (a scan of another
//! actor's vnodes would close those windows twice, one of none would never close them).

use std::time::Duration;

use tokio_postgres::Client;

use crate::support::{bounded, connect, eventually, rows, server, spawn_eddy, temp_dir, verify, Census};

const STEP: Duration = Duration::from_secs(120);

async fn exec(c: &Client, sql: &str) {
    bounded(STEP, sql, c.batch_execute(sql)).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

/// The views VERIFY checks (`p_windows` emits only closed windows: it is compared with them;
/// `p_window_count` counts its changes, so a window emitted twice would show there).
const VIEWS: [&str; 6] = ["p_groups", "p_nested", "p_rows", "p_hop", "p_window_count", "p_joined"];

/// Events at one second apart from `from`, keys cycling through 11 values.
fn events(from: i64, n: i64) -> String {
    format!(
        "INSERT INTO p_ev SELECT TIMESTAMP '2024-01-01 00:00:00' + i * INTERVAL '1 second', i % 11, i * 7 % 23 FROM generate_series({from}, {}) AS s(i)",
        from + n - 1
    )
}

/// The closed windows of `p_windows` as a batch query computes them: windows that end at or
/// before the watermark (the largest admitted `ts` minus the 10 s delay).
async fn closed_windows(c: &Client) -> Vec<Vec<String>> {
    let watermark = rows(c, "SELECT (max(ts) - INTERVAL '10' SECOND)::text FROM p_ev").await.unwrap()[0][0].clone();
    let sql = format!(
        "SELECT window_start, k, count(*), sum(x) FROM TUMBLE(p_ev, ts, INTERVAL '1' MINUTE) \
         WHERE window_end <= TIMESTAMP '{watermark}' GROUP BY window_start, k ORDER BY window_start, k"
    );
    rows(c, &sql).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_views_survive_sigkill_with_their_parallelism_and_close_each_window_once() {
    let dir = temp_dir("parallel-kill");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = eventually(STEP, || async { Some(connect(addr).await) }).await;
    exec(
        &c,
        "SET streaming_parallelism = 3; \
         CREATE TABLE p_t (id BIGINT PRIMARY KEY, g INT, v BIGINT); \
         CREATE TABLE p_ev (ts TIMESTAMP, k INT, x INT, WATERMARK FOR ts AS ts - INTERVAL '10' SECOND) APPEND ONLY; \
         CREATE TABLE p_d (g INT PRIMARY KEY, name TEXT); \
         INSERT INTO p_d SELECT i, 'group ' || i FROM generate_series(0, 90) AS s(i); \
         INSERT INTO p_t SELECT i, i % 97, i * 3 FROM generate_series(1, 20000) AS s(i)",
    )
    .await;
    exec(&c, &events(0, 600)).await;
    exec(
        &c,
        "CREATE MATERIALIZED VIEW p_groups AS SELECT g, count(*) AS n, sum(v) AS total, max(v) AS top FROM p_t GROUP BY g; \
         CREATE MATERIALIZED VIEW p_nested AS SELECT n, count(*) AS groups FROM (SELECT g, count(*) AS n FROM p_t GROUP BY g) x GROUP BY n; \
         CREATE MATERIALIZED VIEW p_rows AS SELECT id, v FROM p_t WHERE v % 5 = 0; \
         CREATE MATERIALIZED VIEW p_hop AS SELECT k, window_start, count(*) AS n FROM HOP(p_ev, ts, INTERVAL '20' SECOND, INTERVAL '1' MINUTE) GROUP BY k, window_start; \
         CREATE MATERIALIZED VIEW p_windows AS SELECT window_start, k, count(*) AS n, sum(x) AS s FROM TUMBLE(p_ev, ts, INTERVAL '1' MINUTE) GROUP BY window_start, k EMIT ON WINDOW CLOSE; \
         CREATE MATERIALIZED VIEW p_window_count AS SELECT count(*) AS windows, sum(n) AS events FROM p_windows; \
         CREATE MATERIALIZED VIEW p_joined AS SELECT t.id, t.v, d.name FROM p_t t LEFT JOIN p_d d ON t.g = d.g",
    )
    .await;
    // A writer keeps changing both tables; the kill lands after its 40th acknowledged
    // statement, while it goes on.
    let (acked_tx, mut acked) = tokio::sync::mpsc::unbounded_channel::<usize>();
    let writer = tokio::spawn(async move {
        let w = connect(addr).await;
        for round in 0..10_000i64 {
            let sql = match round % 4 {
                0 => format!(
                    "UPDATE p_t SET g = (g + 13) % 97, v = v + 1 WHERE id % 50 = {}; UPDATE p_d SET name = name || '+' WHERE g = {}",
                    round % 50,
                    round % 97
                ),
                1 => format!("DELETE FROM p_t WHERE id % 211 = {}", round % 211),
                2 => format!("INSERT INTO p_t SELECT i, i % 89, i FROM generate_series({0}, {0} + 99) AS s(i)", 100_000 + round * 100),
                _ => events(600 + round * 30, 30),
            };
            if w.batch_execute(&sql).await.is_err() {
                return;
            }
            let _ = acked_tx.send(round as usize);
        }
    });
    while let Some(n) = acked.recv().await {
        if n >= 40 {
            break;
        }
    }
    drop(proc);
    let _ = bounded(STEP, "the writer notices the kill", writer).await;

    let srv = bounded(STEP, "restart after SIGKILL", server(&url)).await;
    let c = connect(srv.addr).await;
    let catalog = srv.engine.catalog();
    // (A global count runs in one actor.)
    for name in ["p_groups", "p_nested", "p_rows", "p_hop", "p_windows", "p_joined"] {
        let v = catalog.table("public", name).unwrap_or_else(|| panic!("{name} exists"));
        assert_eq!(v.parallelism, 3, "{name} keeps its parallelism");
        assert!(srv.engine.view_actors(v.id).len() >= 3, "{name} runs its actors again");
    }
    for name in VIEWS {
        bounded(STEP, "VERIFY", verify(&c, name)).await.unwrap_or_else(|e| panic!("after SIGKILL: {e}"));
    }
    let expect = closed_windows(&c).await;
    let got = rows(&c, "SELECT window_start, k, n, s FROM p_windows ORDER BY window_start, k").await.unwrap();
    assert!(!expect.is_empty());
    assert_eq!(got, expect, "each closed window once, after the restart");
    // More writes after the restart: windows that close now come out once too.
    exec(&c, &events(100_000, 300)).await;
    exec(&c, "UPDATE p_t SET v = v * 2 WHERE g = 7; DELETE FROM p_t WHERE g = 8").await;
    for name in VIEWS {
        bounded(STEP, "VERIFY", verify(&c, name)).await.unwrap_or_else(|e| panic!("after more writes: {e}"));
    }
    let expect = closed_windows(&c).await;
    let got = rows(&c, "SELECT window_start, k, n, s FROM p_windows ORDER BY window_start, k").await.unwrap();
    assert_eq!(got, expect, "each closed window once, after more events");
    let census = Census::of(&srv.engine.store).await;
    assert_eq!(census.orphans(), Vec::<String>::new());
    drop(c);
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
