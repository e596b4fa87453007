//! A state store that fails: a commit the store rejects acknowledges nobody, the server
//! rebuilds its dataflow from the last committed epoch (discarding in-memory operator state),
//! refuses writes with a retryable error meanwhile, and works again once the store heals, with
//! every acknowledged row present and every view equal to its recomputation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_server::{start, ServerConfig};
use eddy_storage::testing::FaultyStore;
use eddy_storage::StoreTuning;
use object_store::memory::InMemory;

use crate::support::{connect, eventually, sqlstate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_outage_loses_no_acknowledged_write_and_the_server_recovers() {
    let faulty = FaultyStore::new(Arc::new(InMemory::new()), 7);
    let tuning = StoreTuning {
        object_store_max_retries: Some(1),
        commit_timeout: Duration::from_secs(5),
        open_timeout: Duration::from_secs(5),
        ..StoreTuning::default()
    };
    let config = ServerConfig {
        listen: "127.0.0.1:0".into(),
        state_store: "memory://".into(),
        test_functions: true,
        object_store: Some(faulty.as_object_store()),
        store_tuning: tuning,
        ..ServerConfig::default()
    };
    let srv = start(config).await.expect("server starts");
    let c = connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE t (k INT PRIMARY KEY, v INT);
         CREATE MATERIALIZED VIEW s AS SELECT count(*) AS n, sum(v) AS total FROM t;
         CREATE MATERIALIZED VIEW big AS SELECT k, v FROM t WHERE v > 5;",
    )
    .await
    .unwrap();
    let mut acknowledged = Vec::new();
    for k in 0..20 {
        c.execute("INSERT INTO t VALUES ($1, $2)", &[&k, &(k % 10)]).await.unwrap();
        acknowledged.push(k);
    }
    // The store goes down: writes fail with a retryable error, never hang, never succeed.
    faulty.set_down(true);
    let outage = Instant::now();
    let mut k = 100;
    let mut refused = 0;
    while refused < 3 {
        match tokio::time::timeout(Duration::from_secs(60), c.execute("INSERT INTO t VALUES ($1, 1)", &[&k])).await {
            Ok(Ok(_)) => acknowledged.push(k),
            Ok(Err(e)) => {
                assert_eq!(sqlstate(&e), "40001", "a failed commit is a retryable error: {e}");
                refused += 1;
            }
            Err(_) => panic!("a write hung while the store was down"),
        }
        k += 1;
    }
    // Down for at least a while longer, then heal.
    tokio::time::sleep(Duration::from_millis(500)).await;
    faulty.set_down(false);
    let healed = Instant::now();
    // Writes work again once the server has recovered.
    eventually(Duration::from_secs(60), || async {
        c.execute("INSERT INTO t VALUES (1000, 7)", &[]).await.ok().map(|_| ())
    })
    .await;
    acknowledged.push(1000);
    let recovery = healed.elapsed();
    println!("store outage of {:?}; serving writes {recovery:?} after the store healed", healed - outage);
    let rows = c.query("SELECT k FROM t ORDER BY k", &[]).await.unwrap();
    let present: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    for k in &acknowledged {
        assert!(present.contains(k), "acknowledged row {k} lost; present: {present:?}");
    }
    for v in ["s", "big"] {
        let r = c.simple_query(&format!("VERIFY MATERIALIZED VIEW {v}")).await.unwrap();
        let line = r.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        });
        assert_eq!(line.as_deref(), Some("OK"), "view {v} diverged after recovery");
    }
    drop(c);
    srv.shutdown().await.unwrap();
}
