//! Temporal filters (issue 13): rows of `WHERE ts > now() - INTERVAL ...` views expire, and
//! rows of `WHERE ts <= now()` views appear, as time passes — also across a SIGKILL, when the
//! time came while the server was down. Polled with generous deadlines; no timing asserted.

use std::time::Duration;

use crate::support::{bounded, connect, eventually, rows, spawn_eddy, temp_dir};

const STEP: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_appear_and_expire_as_time_passes_and_across_a_restart() {
    let dir = temp_dir("temporal");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    let setup = "CREATE TABLE ev (id INT PRIMARY KEY, ts TIMESTAMPTZ);
        CREATE MATERIALIZED VIEW recent AS SELECT id FROM ev WHERE ts > now() - INTERVAL '2' SECOND;
        CREATE MATERIALIZED VIEW due AS SELECT id FROM ev WHERE ts <= now();
        CREATE MATERIALIZED VIEW due_count AS SELECT count(*) AS n FROM ev WHERE ts <= now() AND ts > now() - INTERVAL '1' HOUR;
        INSERT INTO ev VALUES (1, now()), (2, now() + INTERVAL '2' SECOND), (3, now() + INTERVAL '1' HOUR), (4, now() - INTERVAL '2' HOUR);";
    bounded(STEP, "setup", c.batch_execute(setup)).await.unwrap();
    let ids = |sql: &'static str| {
        let c = &c;
        async move { rows(c, sql).await.unwrap().into_iter().map(|r| r[0].clone()).collect::<Vec<_>>() }
    };
    // Row 2 comes due, row 1 expires (its two seconds pass).
    eventually(STEP, || async { (ids("SELECT id FROM due ORDER BY 1").await == ["1", "2", "4"]).then_some(()) }).await;
    eventually(STEP, || async { (ids("SELECT id FROM recent ORDER BY 1").await == ["2", "3"]).then_some(()) }).await;
    eventually(STEP, || async { (ids("SELECT n FROM due_count").await == ["2"]).then_some(()) }).await;
    // Row 5 comes due around the restart (its second passes while the process is down or
    // starting): the restored filter applies what came due since its committed time.
    bounded(STEP, "insert", c.batch_execute("INSERT INTO ev VALUES (5, now() + INTERVAL '1' SECOND)")).await.unwrap();
    assert_eq!(ids("SELECT id FROM due ORDER BY 1").await, ["1", "2", "4"]);
    drop(c);
    drop(proc); // SIGKILL
    let (_proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    let ids = |sql: &'static str| {
        let c = &c;
        async move { rows(c, sql).await.unwrap().into_iter().map(|r| r[0].clone()).collect::<Vec<_>>() }
    };
    eventually(STEP, || async { (ids("SELECT id FROM due ORDER BY 1").await == ["1", "2", "4", "5"]).then_some(()) }).await;
    eventually(STEP, || async { (ids("SELECT id FROM recent ORDER BY 1").await == ["3"]).then_some(()) }).await;
    eventually(STEP, || async { (ids("SELECT n FROM due_count").await == ["3"]).then_some(()) }).await;
}

/// Randomized: out-of-order inserts (some late) in random batches into a watermarked table,
/// with window-closing and live views over TUMBLE and HOP. After every batch each closed view
/// equals the batch query over the admitted rows restricted to the windows that ended by the
/// watermark, and the live views equal the batch query. `EDDY_WM_SEED` sets the seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_closing_views_equal_batch_recomputation_of_the_closed_windows() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let seed: u64 = std::env::var("EDDY_WM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("EDDY_WM_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let srv = crate::support::server("memory://").await;
    let c = connect(srv.addr).await;
    let setup = "CREATE TABLE ev (ts TIMESTAMP, k INT, v INT, WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) APPEND ONLY;
        CREATE MATERIALIZED VIEW t_closed AS SELECT k, window_start, count(*) AS n, sum(v) AS s, min(v) AS lo FROM TUMBLE(ev, ts, INTERVAL '2' SECOND) GROUP BY k, window_start EMIT ON WINDOW CLOSE;
        CREATE MATERIALIZED VIEW t_live AS SELECT k, window_start, count(*) AS n, max(v) AS hi FROM TUMBLE(ev, ts, INTERVAL '2' SECOND) GROUP BY k, window_start;
        CREATE MATERIALIZED VIEW h_closed AS SELECT window_start, count(*) AS n, max(v) AS hi FROM HOP(ev, ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND) WHERE v % 3 <> 0 GROUP BY window_start EMIT ON WINDOW CLOSE;";
    bounded(STEP, "setup", c.batch_execute(setup)).await.unwrap();
    let closed_tumble = "SELECT k, window_start, count(*), sum(v), min(v) FROM TUMBLE(ev, ts, INTERVAL '2' SECOND) GROUP BY k, window_start \
        HAVING window_start + INTERVAL '2' SECOND <= (SELECT watermark FROM eddy_watermarks) ORDER BY 1, 2";
    let closed_hop = "SELECT window_start, count(*), max(v) FROM HOP(ev, ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND) WHERE v % 3 <> 0 GROUP BY window_start \
        HAVING window_start + INTERVAL '3' SECOND <= (SELECT watermark FROM eddy_watermarks) ORDER BY 1";
    let live = "SELECT k, window_start, count(*), max(v) FROM TUMBLE(ev, ts, INTERVAL '2' SECOND) GROUP BY k, window_start ORDER BY 1, 2";
    let mut clock_ms: i64 = 0;
    let mut checks = 0;
    for round in 0..40 {
        let n = rng.gen_range(1..20);
        let mut values = Vec::new();
        for _ in 0..n {
            clock_ms += rng.gen_range(0..400);
            // Mostly recent, sometimes far behind (late or just in time).
            let back = if rng.gen_bool(0.2) { rng.gen_range(0..6000) } else { rng.gen_range(0..800) };
            let t = (clock_ms - back).max(0);
            values.push(format!(
                "(TIMESTAMP '2024-01-01 00:00:00' + INTERVAL '{t} milliseconds', {}, {})",
                rng.gen_range(0..3),
                rng.gen_range(-50..50)
            ));
        }
        let sql = format!("INSERT INTO ev VALUES {}", values.join(", "));
        bounded(STEP, "insert", c.batch_execute(&sql)).await.unwrap();
        assert_eq!(rows(&c, "SELECT * FROM t_closed ORDER BY 1, 2").await.unwrap(), rows(&c, closed_tumble).await.unwrap(), "round {round}, seed {seed}");
        assert_eq!(rows(&c, "SELECT * FROM h_closed ORDER BY 1").await.unwrap(), rows(&c, closed_hop).await.unwrap(), "round {round}, seed {seed}");
        assert_eq!(rows(&c, "SELECT * FROM t_live ORDER BY 1, 2").await.unwrap(), rows(&c, live).await.unwrap(), "round {round}, seed {seed}");
        checks += 3;
    }
    let late: i64 = rows(&c, "SELECT late_rows FROM eddy_watermarks").await.unwrap()[0][0].parse().unwrap();
    println!("{checks} checks, {late} late rows dropped");
}

/// Randomized interval join (issue 13): two watermarked tables joined on a key and
/// `b.ts BETWEEN a.ts - 500ms AND a.ts + 1s`, out-of-order inserts (some late), a SIGKILL
/// halfway. After every batch the join view equals batch recomputation, every window a
/// window-closing view over it emitted (closed by the join's output watermark) equals the
/// batch count of that window, and the join's state holds only rows the watermarks have not
/// passed. `EDDY_IJ_SEED` sets the seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_joins_equal_batch_recomputation_and_drop_the_rows_watermarks_passed() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let seed: u64 = std::env::var("EDDY_IJ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("EDDY_IJ_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = temp_dir("interval-join");
    let url = format!("file://{}", dir.display());
    let (mut proc, addr) = spawn_eddy(&url);
    let mut c = connect(addr).await;
    let setup = "CREATE TABLE ia (ts TIMESTAMP, k INT, v INT, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) APPEND ONLY;
        CREATE TABLE ib (ts TIMESTAMP, k INT, w INT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
        CREATE MATERIALIZED VIEW ij AS SELECT a.k, a.ts AS ats, b.ts AS bts, a.v, b.w FROM ia a JOIN ib b
            ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '500 milliseconds' AND a.ts + INTERVAL '1' SECOND;
        CREATE MATERIALIZED VIEW ij_closed AS SELECT window_start, count(*) AS n, sum(v * w) AS s
            FROM TUMBLE(ij, ats, INTERVAL '2' SECOND) GROUP BY window_start EMIT ON WINDOW CLOSE;";
    bounded(STEP, "setup", c.batch_execute(setup)).await.unwrap();
    let batch = "SELECT a.k, a.ts, b.ts, a.v, b.w FROM ia a JOIN ib b
        ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '500 milliseconds' AND a.ts + INTERVAL '1' SECOND ORDER BY 1, 2, 3, 4, 5";
    let closed_check = "SELECT c.window_start, c.n, c.s, count(j.k), sum(j.v * j.w) FROM ij_closed c
        LEFT JOIN ij j ON j.ats >= c.window_start AND j.ats < c.window_start + INTERVAL '2' SECOND
        GROUP BY c.window_start, c.n, c.s ORDER BY 1";
    // Each side keeps the rows the other side's watermark has not passed (plus the
    // millisecond the index rounds to).
    let state_bound = "SELECT (SELECT count(*) FROM ia WHERE ts >= (SELECT watermark FROM eddy_watermarks WHERE relation = 'ib') - INTERVAL '1001 milliseconds')
        + (SELECT count(*) FROM ib WHERE ts >= (SELECT watermark FROM eddy_watermarks WHERE relation = 'ia') - INTERVAL '501 milliseconds')";
    let join_entries = "SELECT entries FROM eddy_state_tables WHERE view = 'ij' AND role = 'operator'";
    let mut clock_ms: i64 = 0;
    let mut closed_windows = 0;
    for round in 0..30 {
        if round == 15 {
            drop(c);
            drop(proc); // SIGKILL
            (proc, c) = {
                let (p, addr) = spawn_eddy(&url);
                (p, connect(addr).await)
            };
        }
        for table in ["ia", "ib"] {
            let mut values = Vec::new();
            for _ in 0..rng.gen_range(1..12) {
                clock_ms += rng.gen_range(0..200);
                let back = if rng.gen_bool(0.2) { rng.gen_range(0..4000) } else { rng.gen_range(0..600) };
                let t = (clock_ms - back).max(0);
                values.push(format!("(TIMESTAMP '2024-01-01 00:00:00' + INTERVAL '{t} milliseconds', {}, {})", rng.gen_range(0..3), rng.gen_range(-9..10)));
            }
            bounded(STEP, "insert", c.batch_execute(&format!("INSERT INTO {table} VALUES {}", values.join(", ")))).await.unwrap();
        }
        assert_eq!(rows(&c, "SELECT * FROM ij ORDER BY 1, 2, 3, 4, 5").await.unwrap(), rows(&c, batch).await.unwrap(), "round {round}, seed {seed}");
        let closed = rows(&c, closed_check).await.unwrap();
        for r in &closed {
            let s = if r[2] == "NULL" { "0" } else { &r[2] };
            assert_eq!((&r[1], s), (&r[3], if r[4] == "NULL" { "0" } else { &r[4] }), "window {r:?}, round {round}, seed {seed}");
        }
        closed_windows = closed.len();
        let entries: i64 = rows(&c, join_entries).await.unwrap()[0][0].parse().unwrap();
        let bound: i64 = rows(&c, state_bound).await.unwrap()[0][0].parse().unwrap();
        assert!(entries <= bound, "the join keeps {entries} rows, at most {bound} are not passed; round {round}, seed {seed}");
    }
    let total: i64 = rows(&c, "SELECT (SELECT count(*) FROM ia) + (SELECT count(*) FROM ib)").await.unwrap()[0][0].parse().unwrap();
    let entries: i64 = rows(&c, join_entries).await.unwrap()[0][0].parse().unwrap();
    assert!(closed_windows > 3 && entries * 4 < total, "{closed_windows} windows closed; the join keeps {entries} of {total} rows");
    println!("{closed_windows} windows closed; the join keeps {entries} of {total} rows");
}
