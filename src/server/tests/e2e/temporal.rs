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
