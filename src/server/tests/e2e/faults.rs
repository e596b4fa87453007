//! A whole server over a fault-injecting object store (issue 9, "a failed commit stops the
//! epoch, not the truth"): while the store refuses every PUT, DML fails with an error within a
//! deadline instead of hanging; no acknowledged write is lost; once the store heals, writes
//! succeed again and every view equals its recomputation, also after a restart.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_server::{start, ServerConfig};
use eddy_storage::testing::{FaultAction, FaultRule, FaultyStore, OpKind, Trigger};
use eddy_storage::StoreTuning;

use crate::support::{bounded, connect, rows, sqlstate, verify};

/// Longest one statement may take, store outage or not: a hang is a failure.
const STATEMENT: Duration = Duration::from_secs(45);

/// A server over `faulty` with few retries and short deadlines, so an outage surfaces as
/// failed commits within seconds.
async fn server_over(faulty: &FaultyStore) -> eddy_server::ServerHandle {
    let config = ServerConfig {
        listen: "127.0.0.1:0".into(),
        state_store: "memory://faulty".into(),
        object_store: Some(faulty.as_object_store()),
        store_tuning: StoreTuning {
            object_store_max_retries: Some(1),
            commit_timeout: Duration::from_secs(5),
            open_timeout: Duration::from_secs(10),
            close_timeout: Duration::from_secs(5),
            ..StoreTuning::default()
        },
        test_functions: true,
        ..ServerConfig::default()
    };
    start(config).await.expect("server starts")
}

const VIEWS: [&str; 2] = ["by_group", "total"];

/// Inserts row `id`, within the statement deadline.
async fn insert(c: &tokio_postgres::Client, id: i32) -> Result<(), tokio_postgres::Error> {
    let sql = format!("INSERT INTO t VALUES ({id}, {}, {})", id % 5, i64::from(id) * 10);
    bounded(STATEMENT, &sql, c.batch_execute(&sql)).await
}

/// Every acknowledged row is stored, nothing else but failed statements' rows (an ambiguous
/// failure may have committed), and the views equal their recomputation.
async fn check(c: &tokio_postgres::Client, acknowledged: &BTreeSet<i32>, failed: &BTreeSet<i32>) {
    let stored: BTreeSet<i32> = rows(c, "SELECT id FROM t").await.unwrap().iter().map(|r| r[0].parse().unwrap()).collect();
    let lost: Vec<_> = acknowledged.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    let invented: Vec<_> = stored.iter().filter(|id| !acknowledged.contains(id) && !failed.contains(id)).collect();
    assert!(invented.is_empty(), "rows nobody wrote: {invented:?}");
    for v in VIEWS {
        verify(c, v).await.unwrap();
    }
    assert_eq!(rows(c, "SELECT n FROM total").await.unwrap(), vec![vec![stored.len().to_string()]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_refusing_puts_for_a_while_fails_statements_loses_nothing_acknowledged_and_heals() {
    let faulty = FaultyStore::new(Arc::new(eddy_storage::object_store::memory::InMemory::new()), 9);
    let srv = server_over(&faulty).await;
    let c = connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE t (id INT PRIMARY KEY, g INT NOT NULL, v BIGINT NOT NULL); \
         CREATE MATERIALIZED VIEW by_group AS SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g; \
         CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n, sum(v) AS s FROM t",
    )
    .await
    .unwrap();
    let (mut acknowledged, mut failed) = (BTreeSet::new(), BTreeSet::new());
    let mut next = 0i32;
    for _ in 0..20 {
        next += 1;
        let (id, r) = (next, insert(&c, next).await);
        r.unwrap_or_else(|e| panic!("healthy store: {e:?}"));
        acknowledged.insert(id);
    }

    // The store goes down for writes: statements fail (with an error, within the deadline).
    let outage = faulty.add_rule(FaultRule::new(Some(OpKind::Put), Trigger::Always, FaultAction::Fail));
    let down_since = Instant::now();
    while failed.len() < 3 {
        assert!(down_since.elapsed() < Duration::from_secs(120), "no statement failed while the store was down");
        next += 1;
        let (id, r) = (next, insert(&c, next).await);
        match r {
            Ok(()) => {
                acknowledged.insert(id);
            }
            Err(e) => {
                eprintln!("while the store is down: {e:?}");
                assert_ne!(sqlstate(&e), "XX000", "a store outage is not an internal error: {e:?}");
                failed.insert(id);
            }
        }
    }
    faulty.remove_rule(outage);

    // Healed: writes succeed again (the first ones may still meet the store's recovery).
    let healed = Instant::now();
    let mut after = 0;
    while after < 20 {
        assert!(healed.elapsed() < Duration::from_secs(120), "writes did not succeed again after the store healed");
        next += 1;
        let (id, r) = (next, insert(&c, next).await);
        match r {
            Ok(()) => {
                acknowledged.insert(id);
                after += 1;
            }
            Err(e) => {
                if failed.len() < 8 {
                    eprintln!("after the store healed: {e:?}");
                }
                failed.insert(id);
            }
        }
    }
    check(&c, &acknowledged, &failed).await;
    drop(c);
    bounded(STATEMENT, "shutdown", srv.shutdown()).await.unwrap();

    // The same after a restart on the same (healed) store.
    let srv = server_over(&faulty).await;
    let c = connect(srv.addr).await;
    check(&c, &acknowledged, &failed).await;
    c.batch_execute("INSERT INTO t VALUES (0, 0, 0)").await.unwrap();
    for v in VIEWS {
        verify(&c, v).await.unwrap();
    }
    drop(c);
    srv.shutdown().await.unwrap();
}
