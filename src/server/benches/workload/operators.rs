//! Streaming operators: a join, a HOP window and a per-group top-N, each fed by COPY, with
//! throughput, CPU and peak memory per phase.

use std::time::Instant;

use bytes::Bytes;
use tokio_postgres::Client;

use super::{copy_into, copy_rows, Opts, Phase, Server};

/// `rows` ids split into `batches` COPY payloads (generated before any timing).
fn batched(rows: usize, batches: usize, line: impl Fn(usize, &mut String) + Copy) -> Vec<Vec<Bytes>> {
    let per = rows.div_ceil(batches);
    (0..batches).map(|i| copy_rows((i * per).min(rows), ((i + 1) * per).min(rows), line)).filter(|d| !d.is_empty()).collect()
}

/// Runs the COPY statements one after the other inside one measured phase; returns (rows, wall).
async fn timed_copies(s: &Server, client: &Client, copy_sql: &str, data: Vec<Vec<Bytes>>, label: &str) -> (u64, f64) {
    let bytes: usize = data.iter().flatten().map(|b| b.len()).sum();
    println!("  {label}: {copy_sql} ({:.1} MiB of COPY text) in {} statement(s)", bytes as f64 / 1048576.0, data.len());
    let phase = Phase::begin(s);
    let mut n = 0;
    for d in data {
        n += copy_into(client, copy_sql, d).await;
    }
    let wall = phase.end(s);
    println!("  {label}: {n} rows in {wall:.3} s = {:.0} rows/s", n as f64 / wall);
    (n, wall)
}

/// `VERIFY MATERIALIZED VIEW` (only with `--verify`: it recomputes the whole query).
async fn maybe_verify(o: &Opts, client: &Client, view: &str) {
    if !o.verify {
        return;
    }
    let t = Instant::now();
    match client.simple_query(&format!("VERIFY MATERIALIZED VIEW {view}")).await {
        Ok(_) => println!("  check: VERIFY MATERIALIZED VIEW {view}: OK ({:.1} s)", t.elapsed().as_secs_f64()),
        Err(e) => println!("  check: VERIFY MATERIALIZED VIEW {view} FAILED: {e}"),
    }
}

const CREATE_L: &str = "CREATE TABLE l (id BIGINT PRIMARY KEY, k INT, v INT)";
const CREATE_R: &str = "CREATE TABLE r (id BIGINT PRIMARY KEY, k INT, w INT)";
const JOIN_VIEW: &str =
    "CREATE MATERIALIZED VIEW jv AS SELECT l.k, count(*) AS n, sum(r.w) AS s FROM l JOIN r ON l.id = r.id GROUP BY l.k";

/// Rows `id \t id % 100000 \t id % modulus` for l (v) and r (w).
fn join_line(modulus: usize) -> impl Fn(usize, &mut String) + Copy {
    move |id, buf| {
        use std::fmt::Write;
        let _ = writeln!(buf, "{id}\t{}\t{}", id % 100_000, id % modulus);
    }
}

async fn check_join_view(c: &Client, rows: usize) {
    let row = c.query_one("SELECT count(*)::BIGINT, sum(n)::BIGINT FROM jv", &[]).await.unwrap();
    let (groups, total): (i64, Option<i64>) = (row.get(0), row.get(1));
    println!(
        "  check: jv has {groups} groups (expected {}), sum(n) = {total:?} (expected {rows})",
        rows.min(100_000)
    );
}

/// 1:1 join of l and r on id, then a 100K-group aggregate: backfill of a new view over loaded
/// tables, and incremental maintenance while both tables are loaded with COPY.
pub async fn scenario_join(o: &Opts) {
    let rows = o.rows;
    let batches = o.copy_batches.unwrap_or(1);
    println!("\n== join: l JOIN r ON id (1:1, {rows} rows each) GROUP BY l.k (100K groups)");
    println!("  view: {JOIN_VIEW}");

    // (a) backfill
    let s = Server::start("join-backfill", o).await;
    let c = s.connect().await;
    c.batch_execute(CREATE_L).await.unwrap();
    c.batch_execute(CREATE_R).await.unwrap();
    timed_copies(&s, &c, "COPY l (id, k, v) FROM STDIN", batched(rows, batches, join_line(997)), "load l").await;
    timed_copies(&s, &c, "COPY r (id, k, w) FROM STDIN", batched(rows, batches, join_line(1000)), "load r").await;
    println!("  join backfill: CREATE MATERIALIZED VIEW over the loaded tables");
    let phase = Phase::begin(&s);
    c.batch_execute(JOIN_VIEW).await.expect("CREATE MATERIALIZED VIEW jv");
    let wall = phase.end(&s);
    println!("  RESULT join backfill: {} input rows in {wall:.3} s = {:.0} rows/s", 2 * rows, (2 * rows) as f64 / wall);
    check_join_view(&c, rows).await;
    maybe_verify(o, &c, "jv").await;
    drop(c);
    s.stop();

    // (b) incremental
    let s = Server::start("join-incremental", o).await;
    let c = s.connect().await;
    c.batch_execute(CREATE_L).await.unwrap();
    c.batch_execute(CREATE_R).await.unwrap();
    c.batch_execute(JOIN_VIEW).await.expect("CREATE MATERIALIZED VIEW jv");
    let dl = batched(rows, batches, join_line(997));
    let dr = batched(rows, batches, join_line(1000));
    println!("  join incremental: COPY into l (no matches yet), then into r (every row matches)");
    let phase = Phase::begin(&s);
    let (nl, _) = timed_copies(&s, &c, "COPY l (id, k, v) FROM STDIN", dl, "copy l").await;
    let (nr, _) = timed_copies(&s, &c, "COPY r (id, k, w) FROM STDIN", dr, "copy r").await;
    print!("  total:");
    let wall = phase.end(&s);
    println!("  RESULT join incremental: {} rows in {wall:.3} s = {:.0} rows/s through the view", nl + nr, (nl + nr) as f64 / wall);
    check_join_view(&c, rows).await;
    maybe_verify(o, &c, "jv").await;
    drop(c);
    s.stop();
}

const CREATE_E: &str = "CREATE TABLE e (id BIGINT PRIMARY KEY, auction INT, price INT, ts TIMESTAMP)";
const HOP_VIEW: &str = "CREATE MATERIALIZED VIEW hv AS SELECT auction, window_start, count(*) AS n, max(price) AS top \
     FROM HOP(e, ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND) GROUP BY auction, window_start";

/// Rows of e: auction = id % 1000, a pseudo-random price, ts = 2024-01-01 + id milliseconds.
fn hop_line(id: usize, buf: &mut String) {
    use std::fmt::Write;
    let (secs, ms) = (id / 1000, id % 1000);
    let (day, h, m, sec) = (1 + secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let price = (id as u64).wrapping_mul(2_654_435_761) % 100_000;
    let _ = writeln!(buf, "{id}\t{}\t{price}\t2024-01-{day:02} {h:02}:{m:02}:{sec:02}.{ms:03}", id % 1000);
}

/// HOP window (slide 2 s, size 10 s: each row is in 5 windows) aggregated per auction and window.
pub async fn scenario_hop(o: &Opts) {
    let rows = o.rows;
    println!("\n== hop: COPY {rows} rows (ts + 1 ms per row, 1000 auctions) into e feeding a HOP(2 s, 10 s) view");
    println!("  view: {HOP_VIEW}");
    let s = Server::start("hop", o).await;
    let c = s.connect().await;
    c.batch_execute(CREATE_E).await.unwrap();
    c.batch_execute(HOP_VIEW).await.expect("CREATE MATERIALIZED VIEW hv");
    let data = batched(rows, o.copy_batches.unwrap_or(1), hop_line);
    let (n, wall) = timed_copies(&s, &c, "COPY e (id, auction, price, ts) FROM STDIN", data, "copy e").await;
    println!("  RESULT hop: {n} rows in {wall:.3} s = {:.0} rows/s through the view", n as f64 / wall);
    let row = c.query_one("SELECT count(*)::BIGINT, sum(n)::BIGINT FROM hv", &[]).await.unwrap();
    let (groups, total): (i64, Option<i64>) = (row.get(0), row.get(1));
    println!("  check: hv has {groups} groups, sum(n) = {total:?} (expected {})", 5 * rows);
    maybe_verify(o, &c, "hv").await;
    drop(c);
    s.stop();
}

const CREATE_T2: &str = "CREATE TABLE t2 (id BIGINT PRIMARY KEY, g INT, v INT)";
const TOPN_VIEW: &str = "CREATE MATERIALIZED VIEW tv AS SELECT * FROM (SELECT id, g, v, \
     row_number() OVER (PARTITION BY g ORDER BY v DESC, id) AS rn FROM t2) x WHERE rn <= 10";

/// Rows of t2: g = id % 1000, v distinct and pseudo-random (an odd multiplier mod 2^31).
fn topn_line(id: usize, buf: &mut String) {
    use std::fmt::Write;
    let v = (id as u64).wrapping_mul(2_654_435_761) % (1 << 31);
    let _ = writeln!(buf, "{id}\t{}\t{v}", id % 1000);
}

/// Per-group top-10 (`row_number() ... WHERE rn <= 10`) over 1000 groups, loaded in batches.
pub async fn scenario_topn(o: &Opts) {
    let rows = o.rows;
    let batches = o.copy_batches.unwrap_or(10);
    println!("\n== topn: COPY {rows} rows in {batches} statements into t2 (1000 groups) feeding a per-group top-10 view");
    println!("  view: {TOPN_VIEW}");
    let s = Server::start("topn", o).await;
    let c = s.connect().await;
    c.batch_execute(CREATE_T2).await.unwrap();
    c.batch_execute(TOPN_VIEW).await.expect("CREATE MATERIALIZED VIEW tv");
    let data = batched(rows, batches, topn_line);
    let (n, wall) = timed_copies(&s, &c, "COPY t2 (id, g, v) FROM STDIN", data, "copy t2").await;
    println!("  RESULT topn: {n} rows in {wall:.3} s = {:.0} rows/s through the view", n as f64 / wall);
    let row = c.query_one("SELECT count(*)::BIGINT, max(rn)::BIGINT FROM tv", &[]).await.unwrap();
    let (cnt, max_rn): (i64, Option<i64>) = (row.get(0), row.get(1));
    println!("  check: tv has {cnt} rows (expected {}), max(rn) = {max_rn:?}", 10 * rows.min(1000));
    // One group against a direct query.
    let view: Vec<i32> =
        c.query("SELECT v FROM tv WHERE g = 7 ORDER BY rn", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let direct: Vec<i32> = c
        .query("SELECT v FROM t2 WHERE g = 7 ORDER BY v DESC, id LIMIT 10", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    println!("  check: group 7 equals a direct ORDER BY ... LIMIT 10: {}", view == direct);
    maybe_verify(o, &c, "tv").await;
    drop(c);
    s.stop();
}

