//! Randomized differential testing of incremental view maintenance: random INSERT/UPDATE/
//! DELETE on two tables feeding several views (aggregates, filters, a view on a view); after
//! every statement each view is checked with `VERIFY MATERIALIZED VIEW`, which recomputes its
//! query in batch over the same snapshot and compares multisets. A second test checks that a
//! run with a restart in the middle ends with exactly the view contents of an uninterrupted run.
//!
//! `EDDY_DIFF_STEPS` sets the number of statements (default 400, i.e. 2,800 view checks) and
//! `EDDY_DIFF_SEED` the seed; a failing run prints its seed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::{Client, SimpleQueryMessage};

use crate::support::{connect, server, temp_dir};

const SETUP: &str = "
CREATE TABLE t1 (id INT PRIMARY KEY, g INT, v INT, s TEXT);
CREATE TABLE t2 (a INT, b INT, flag BOOLEAN);
CREATE MATERIALIZED VIEW v_groups AS SELECT g, count(*) AS c, sum(v) AS sv, min(v) AS lo, max(v) AS hi, avg(v) AS av FROM t1 GROUP BY g;
CREATE MATERIALIZED VIEW v_filter AS SELECT id, v * 2 AS v2, s FROM t1 WHERE v > 50;
CREATE MATERIALIZED VIEW v_global AS SELECT count(*) AS n, sum(a) AS sa, count(DISTINCT b) AS db, bool_or(flag) AS anyflag FROM t2;
CREATE MATERIALIZED VIEW v_having AS SELECT a, count(*) AS c, count(DISTINCT s) AS ds, min(s) AS ms FROM (SELECT a, CAST(b AS TEXT) AS s FROM t2) x GROUP BY a HAVING count(*) > 1;
CREATE MATERIALIZED VIEW v_on_view AS SELECT count(*) AS groups, sum(c) AS rows_in_groups, max(hi) AS top FROM v_groups;
CREATE MATERIALIZED VIEW v_project AS SELECT s, g FROM t1;
CREATE MATERIALIZED VIEW v_union AS SELECT x, count(*) AS n, sum(y) AS sy FROM (SELECT g AS x, v AS y FROM t1 UNION ALL SELECT a, b FROM t2) u GROUP BY x;
";

const VIEWS: [&str; 7] = ["v_groups", "v_filter", "v_global", "v_having", "v_on_view", "v_project", "v_union"];

fn opt_int(rng: &mut StdRng, max: i32) -> String {
    if rng.gen_ratio(1, 10) { "NULL".into() } else { rng.gen_range(0..max).to_string() }
}

/// One random DML statement.
fn random_statement(rng: &mut StdRng) -> String {
    match rng.gen_range(0..12) {
        0..=2 => {
            let rows: Vec<String> = (0..rng.gen_range(1..5))
                .map(|_| {
                    format!("({}, {}, {}, 's{}')", rng.gen_range(0..150), opt_int(rng, 8), opt_int(rng, 100), rng.gen_range(0..5))
                })
                .collect();
            // A plain INSERT of an existing key fails (23505) and changes nothing.
            let on_conflict = match rng.gen_range(0..3) {
                0 => "",
                1 => " ON CONFLICT DO NOTHING",
                _ => " ON CONFLICT (id) DO UPDATE SET v = excluded.v + t1.v, s = excluded.s WHERE t1.g IS DISTINCT FROM 3",
            };
            format!("INSERT INTO t1 VALUES {}{on_conflict}", rows.join(", "))
        }
        3 => format!("UPDATE t1 SET v = v + {} WHERE g = {}", rng.gen_range(-30..30), rng.gen_range(0..8)),
        4 => format!("UPDATE t1 SET g = {} WHERE id = {}", opt_int(rng, 8), rng.gen_range(0..150)),
        5 => format!("UPDATE t1 SET id = id + 1 WHERE id = {}", rng.gen_range(0..150)),
        6 => format!("DELETE FROM t1 WHERE id = {}", rng.gen_range(0..150)),
        7 => format!("DELETE FROM t1 WHERE g = {}", rng.gen_range(0..8)),
        8 | 9 => {
            let rows: Vec<String> = (0..rng.gen_range(1..4))
                .map(|_| format!("({}, {}, {})", opt_int(rng, 6), opt_int(rng, 20), ["true", "false", "NULL"][rng.gen_range(0..3)]))
                .collect();
            format!("INSERT INTO t2 VALUES {}", rows.join(", "))
        }
        10 => format!("DELETE FROM t2 WHERE a = {}", rng.gen_range(0..6)),
        _ => format!("UPDATE t2 SET b = b + 1, flag = NOT flag WHERE a = {}", rng.gen_range(0..6)),
    }
}

/// Errors a random statement may end with: a key conflict (a plain INSERT of an existing key,
/// an UPDATE moving a key onto another row) or ON CONFLICT DO UPDATE meeting a key twice.
const EXPECTED_ERRORS: [&str; 2] = ["23505", "21000"];

/// Runs `sql`; an expected error must leave every table as it was (statement atomicity).
async fn execute(c: &Client, sql: &str) -> Result<(), String> {
    let before = digest(c).await;
    match c.batch_execute(sql).await {
        Ok(()) => Ok(()),
        Err(e) => {
            let code = e.as_db_error().map(|d| d.code().code().to_string()).unwrap_or_default();
            if !EXPECTED_ERRORS.contains(&code.as_str()) {
                return Err(format!("{sql}: {e}"));
            }
            let after = digest(c).await;
            if after != before {
                return Err(format!("{sql} failed with {code} but changed the tables: {before} -> {after}"));
            }
            Ok(())
        }
    }
}

/// A summary of both tables' rows.
async fn digest(c: &Client) -> String {
    let q = "SELECT (SELECT count(*) FROM t1), (SELECT sum(id) FROM t1), (SELECT sum(v) FROM t1), (SELECT string_agg(s, ',' ORDER BY id) FROM t1), (SELECT count(*) FROM t2), (SELECT sum(b) FROM t2)";
    let msgs = c.simple_query(q).await.unwrap();
    msgs.iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_string()).collect::<Vec<_>>().join("/")),
            _ => None,
        })
        .collect()
}

async fn verify(c: &Client, view: &str) -> Result<(), String> {
    let msgs = c.simple_query(&format!("VERIFY MATERIALIZED VIEW {view}")).await.map_err(|e| e.to_string())?;
    let lines: Vec<String> = msgs
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .collect();
    if lines == ["OK"] { Ok(()) } else { Err(lines.join("\n")) }
}

/// Every view's contents, sorted, as text.
async fn contents(c: &Client) -> Vec<String> {
    let mut out = Vec::new();
    for v in VIEWS {
        let msgs = c.simple_query(&format!("SELECT * FROM {v}")).await.unwrap();
        let mut rows: Vec<String> = msgs
            .iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_string()).collect::<Vec<_>>().join(",")),
                _ => None,
            })
            .collect();
        rows.sort();
        out.push(format!("{v}: {}", rows.join(" | ")));
    }
    out
}

fn seed() -> u64 {
    std::env::var("EDDY_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_match_batch_recomputation_after_every_random_statement() {
    let seed = seed();
    let steps: usize = std::env::var("EDDY_DIFF_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(400);
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute(SETUP).await.unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut checks, mut mismatches) = (0usize, Vec::new());
    for step in 0..steps {
        let sql = random_statement(&mut rng);
        execute(&c, &sql).await.unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
        for v in VIEWS {
            checks += 1;
            if let Err(diff) = verify(&c, v).await {
                mismatches.push(format!("step {step} after `{sql}`: {v}:\n{diff}"));
            }
        }
        if !mismatches.is_empty() {
            break;
        }
    }
    println!("differential: {checks} view checks, {} mismatches (seed {seed})", mismatches.len());
    assert!(mismatches.is_empty(), "seed {seed}: {}", mismatches.join("\n"));
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_run_ends_with_the_same_views_as_an_uninterrupted_one() {
    let seed = seed();
    let steps = 120;
    let statements: Vec<String> = {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..steps).map(|_| random_statement(&mut rng)).collect()
    };
    // Uninterrupted.
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute(SETUP).await.unwrap();
    for s in &statements {
        execute(&c, s).await.unwrap();
    }
    let expected = contents(&c).await;
    srv.shutdown().await.unwrap();
    // With a restart in the middle: views resume from their committed state.
    let dir = temp_dir("restart-diff");
    let url = format!("file://{}", dir.display());
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    c.batch_execute(SETUP).await.unwrap();
    for s in &statements[..steps / 2] {
        execute(&c, s).await.unwrap();
    }
    drop(c);
    srv.shutdown().await.unwrap();
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    for s in &statements[steps / 2..] {
        execute(&c, s).await.unwrap();
    }
    let actual = contents(&c).await;
    for v in VIEWS {
        verify(&c, v).await.unwrap_or_else(|d| panic!("seed {seed}: {v} after restart: {d}"));
    }
    assert_eq!(actual, expected, "seed {seed}");
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
