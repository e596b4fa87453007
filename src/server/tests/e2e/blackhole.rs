//! The `blackhole` sink (RisingWave's): it takes every change of its view, inserts, updates and
//! deletes alike, and drops them; SHOW SINKS counts them delivered and nothing stays pending.

use std::time::Duration;

use crate::support::{connect, eventually, rows, server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackhole_sink_takes_every_change_and_keeps_none_pending() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    for sql in [
        "CREATE TABLE bh (k int PRIMARY KEY, v int)",
        "CREATE MATERIALIZED VIEW bh_sum AS SELECT k % 3 AS g, sum(v) AS s FROM bh GROUP BY 1",
        "CREATE SINK bh_out FROM bh_sum WITH (connector = 'blackhole', type = 'upsert')",
        "CREATE SINK bh_rows AS SELECT * FROM bh WITH (connector = 'blackhole')",
        "INSERT INTO bh SELECT x, x FROM generate_series(1, 300) x",
        "UPDATE bh SET v = v + 1 WHERE k <= 100",
        "DELETE FROM bh WHERE k > 200",
    ] {
        rows(&c, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    // bh_rows: 300 inserts, 100 updates (a delete and an insert each) and 100 deletes.
    let shown = eventually(Duration::from_secs(120), || async {
        let shown = rows(&c, "SHOW SINKS").await.unwrap();
        let done = shown.len() == 2 && shown.iter().all(|r| r[1] == "blackhole" && r[3] == "running" && r[5] == "0" && r[4] != "0");
        done.then_some(shown)
    })
    .await;
    let rows_sink = shown.iter().find(|r| r[0] == "bh_rows").expect("bh_rows is shown");
    assert_eq!(rows_sink[4], "600", "{shown:?}");
    let bad = rows(&c, "CREATE SINK bh_bad FROM bh_sum WITH (connector = 'nowhere')").await.unwrap_err();
    assert!(bad.starts_with("0A000") && bad.contains("blackhole"), "{bad}");
    rows(&c, "DROP SINK bh_out").await.unwrap();
    rows(&c, "DROP SINK bh_rows").await.unwrap();
    assert!(rows(&c, "SHOW SINKS").await.unwrap().is_empty());
}
