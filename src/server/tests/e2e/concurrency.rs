//! Concurrent writers on the same keys (issue 9, "the single writer decides conflicts"): 16
//! sessions run conflicting upserts, `ON CONFLICT DO NOTHING` and plain inserts at once, some
//! inside transaction blocks. Commit order is not observable, so the upserts are commutative
//! (`v = kv.v + excluded.v`): any serial replay of the acknowledged statements gives the same
//! sums, and that is what the table and its views must hold. `DO NOTHING` and plain inserts
//! must keep exactly one row per key, written by the one statement told it inserted a row.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::support::{bounded, connect, rows, server, sqlstate, verify};

const SESSIONS: usize = 16;
const ROUNDS: usize = 40;
const KEYS: i32 = 6;

const SETUP: &str = "
CREATE TABLE kv (k INT PRIMARY KEY, v BIGINT NOT NULL, n BIGINT NOT NULL);
CREATE TABLE once (k INT PRIMARY KEY, who INT NOT NULL);
CREATE TABLE plain (k INT PRIMARY KEY, who INT NOT NULL);
CREATE MATERIALIZED VIEW kv_total AS SELECT count(*) AS keys, sum(v) AS v, sum(n) AS n FROM kv;
CREATE MATERIALIZED VIEW kv_parity AS SELECT k % 2 AS p, count(*) AS keys, sum(v) AS v, max(n) AS top FROM kv GROUP BY k % 2;
CREATE MATERIALIZED VIEW once_by_who AS SELECT who, count(*) AS keys FROM once GROUP BY who;
CREATE MATERIALIZED VIEW plain_keys AS SELECT k, who FROM plain;
";

const VIEWS: [&str; 4] = ["kv_total", "kv_parity", "once_by_who", "plain_keys"];

/// What one session was told: the upsert deltas acknowledged per key, and the keys for which its
/// `DO NOTHING` / plain insert reported a new row.
#[derive(Default)]
struct Acknowledged {
    /// key -> (sum of deltas, number of upserts)
    upserts: BTreeMap<i32, (i64, i64)>,
    /// Keys this session inserted into `once`.
    once: Vec<i32>,
    /// Keys this session inserted into `plain`.
    plain: Vec<i32>,
}

fn upsert(k: i32, delta: i64) -> String {
    format!("INSERT INTO kv VALUES ({k}, {delta}, 1) ON CONFLICT (k) DO UPDATE SET v = kv.v + excluded.v, n = kv.n + excluded.n")
}

async fn session(addr: std::net::SocketAddr, me: i32, seed: u64) -> Acknowledged {
    let c = connect(addr).await;
    let mut rng = StdRng::seed_from_u64(seed ^ (me as u64) << 32);
    let mut ack = Acknowledged::default();
    for _ in 0..ROUNDS {
        let k = rng.gen_range(0..KEYS);
        match rng.gen_range(0..5) {
            0 | 1 => {
                let delta = rng.gen_range(-50..100i64);
                c.execute(&upsert(k, delta), &[]).await.unwrap_or_else(|e| panic!("session {me}: upsert: {e:?}"));
                let e = ack.upserts.entry(k).or_default();
                e.0 += delta;
                e.1 += 1;
            }
            2 => {
                // A block of two upserts (maybe on the same key) applied at COMMIT in one epoch.
                let (k2, d1, d2) = (rng.gen_range(0..KEYS), rng.gen_range(-50..100i64), rng.gen_range(-50..100i64));
                let sql = format!("BEGIN; {}; {}; COMMIT", upsert(k, d1), upsert(k2, d2));
                c.batch_execute(&sql).await.unwrap_or_else(|e| panic!("session {me}: {sql}: {e:?}"));
                for (key, d) in [(k, d1), (k2, d2)] {
                    let e = ack.upserts.entry(key).or_default();
                    e.0 += d;
                    e.1 += 1;
                }
            }
            3 => {
                let n = c
                    .execute(&format!("INSERT INTO once VALUES ({k}, {me}) ON CONFLICT DO NOTHING"), &[])
                    .await
                    .unwrap_or_else(|e| panic!("session {me}: DO NOTHING: {e:?}"));
                if n == 1 {
                    ack.once.push(k);
                }
            }
            _ => match c.execute(&format!("INSERT INTO plain VALUES ({k}, {me})"), &[]).await {
                Ok(1) => ack.plain.push(k),
                Ok(n) => panic!("session {me}: plain insert reported {n} rows"),
                Err(e) => assert_eq!(sqlstate(&e), "23505", "session {me}: plain insert: {e:?}"),
            },
        }
    }
    ack
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_sessions_upserting_the_same_keys_end_as_a_serial_replay_of_what_was_acknowledged() {
    let seed: u64 = std::env::var("EDDY_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute(SETUP).await.unwrap();
    let addr = srv.addr;
    let start = Arc::new(tokio::sync::Barrier::new(SESSIONS));
    let handles: Vec<_> = (0..SESSIONS as i32)
        .map(|me| {
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                session(addr, me, seed).await
            })
        })
        .collect();
    let mut acks = Vec::new();
    for h in handles {
        acks.push(bounded(Duration::from_secs(240), "a writing session", h).await.expect("session"));
    }

    // Upserts commute: every serial order gives these sums.
    let mut expected: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for a in &acks {
        for (k, (d, n)) in &a.upserts {
            let e = expected.entry(*k).or_default();
            e.0 += d;
            e.1 += n;
        }
    }
    let got: BTreeMap<i32, (i64, i64)> = rows(&c, "SELECT k, v, n FROM kv")
        .await
        .unwrap()
        .iter()
        .map(|r| (r[0].parse().unwrap(), (r[1].parse().unwrap(), r[2].parse().unwrap())))
        .collect();
    assert_eq!(got, expected, "seed {seed}: kv differs from the replay of the acknowledged upserts");
    let (sv, sn): (i64, i64) = (expected.values().map(|e| e.0).sum(), expected.values().map(|e| e.1).sum());
    let total = rows(&c, "SELECT keys, v, n FROM kv_total").await.unwrap();
    assert_eq!(total, vec![vec![expected.len().to_string(), sv.to_string(), sn.to_string()]], "seed {seed}");

    // DO NOTHING and plain inserts: exactly one winner per key, and it is the one that was told so.
    for (table, winners) in [("once", acks.iter().map(|a| &a.once).collect::<Vec<_>>()), ("plain", acks.iter().map(|a| &a.plain).collect())] {
        let mut told: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for (who, keys) in winners.iter().enumerate() {
            for k in keys.iter() {
                told.entry(*k).or_default().push(who as i32);
            }
        }
        let stored: BTreeMap<i32, Vec<i32>> = rows(&c, &format!("SELECT k, who FROM {table}"))
            .await
            .unwrap()
            .iter()
            .map(|r| (r[0].parse().unwrap(), vec![r[1].parse().unwrap()]))
            .collect();
        assert_eq!(stored, told, "seed {seed}: {table}: stored rows vs the statements told they inserted");
    }
    for v in VIEWS {
        verify(&c, v).await.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    srv.shutdown().await.unwrap();
}

/// Concurrent `SET v = v + 1` updates of one row, in and out of transaction blocks, lose
/// nothing (the writer applies each to the row's current version).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_increments_of_one_row_are_all_kept() {
    let srv = crate::support::server("memory://").await;
    let c = crate::support::connect(srv.addr).await;
    c.batch_execute("CREATE TABLE ctr (id INT PRIMARY KEY, v BIGINT NOT NULL); INSERT INTO ctr VALUES (1, 0), (2, 0)").await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let addr = srv.addr;
        tasks.push(tokio::spawn(async move {
            let c = crate::support::connect(addr).await;
            for _ in 0..25 {
                c.batch_execute("UPDATE ctr SET v = v + 1 WHERE id = 1").await.unwrap();
                c.batch_execute("BEGIN; UPDATE ctr SET v = v + 1 WHERE id = 2; COMMIT").await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rows = crate::support::rows(&c, "SELECT id, v FROM ctr ORDER BY id").await.unwrap();
    assert_eq!(rows, vec![vec!["1".to_string(), "200".to_string()], vec!["2".to_string(), "200".to_string()]]);
    srv.shutdown().await.unwrap();
}

/// DDL in one session while another creates materialized views: every relation gets an id of
/// its own. A view's internal tables took ids from the live catalog while a CREATE TABLE
/// decided its id on a copy, so both could take the same id, and the new table then read the
/// view's state ("Codecs ... did not consume all bytes", wrong counts) for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_created_while_views_are_created_never_share_an_id_with_them() {
    let srv = crate::support::server("memory://").await;
    let c = crate::support::connect(srv.addr).await;
    c.batch_execute("CREATE TABLE idb (a INT, b INT, c INT, d INT, e INT); INSERT INTO idb VALUES (1, 2, 3, 4, 5)").await.unwrap();
    let addr = srv.addr;
    let views = tokio::spawn(async move {
        let c = crate::support::connect(addr).await;
        for i in 0..60 {
            c.batch_execute(&format!("CREATE MATERIALIZED VIEW idv_{i} AS SELECT a, count(*) FROM idb GROUP BY a")).await.unwrap();
        }
    });
    let tables = tokio::spawn(async move {
        let c = crate::support::connect(addr).await;
        for i in 0..60 {
            c.batch_execute(&format!("CREATE TABLE idt_{i} (x INT); INSERT INTO idt_{i} VALUES (42)")).await.unwrap();
        }
    });
    views.await.unwrap();
    tables.await.unwrap();
    for i in 0..60 {
        let got = crate::support::rows(&c, &format!("SELECT x FROM idt_{i}")).await;
        assert_eq!(got, Ok(vec![vec!["42".to_string()]]), "table idt_{i}");
        let view = crate::support::rows(&c, &format!("SELECT * FROM idv_{i}")).await;
        assert_eq!(view, Ok(vec![vec!["1".to_string(), "1".to_string()]]), "view idv_{i}");
    }
    srv.shutdown().await.unwrap();
}
