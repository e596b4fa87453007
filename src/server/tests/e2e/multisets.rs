//! Multisets (`min`/`max`, `count(DISTINCT)`, `string_agg`) are stored as one state row per
//! distinct value, so a change to a big group writes the values that changed, not the group's
//! whole multiset again (which made each INSERT into a group of a million values rewrite it).

use crate::support::*;

/// The operator state tables of view `view`: (entries, bytes) of each, in plan order.
async fn operator_tables(c: &tokio_postgres::Client, view: &str) -> Vec<(i64, i64)> {
    let rows = c
        .query("SELECT entries, bytes FROM eddy_state_tables WHERE view = $1 AND role = 'operator' ORDER BY state_table", &[&view])
        .await
        .unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

async fn verify(c: &tokio_postgres::Client, view: &str) {
    let r = c.query_one(&format!("VERIFY MATERIALIZED VIEW {view}"), &[]).await.unwrap();
    assert_eq!(r.get::<_, String>(0), "OK", "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_groups_values_are_rows_of_their_own_and_follow_changes_across_a_restart() {
    let dir = temp_dir("multisets");
    let url = format!("file://{}", dir.display());
    let views = ["ms_g", "ms_all"];
    {
        let srv = server(&url).await;
        let c = connect(srv.addr).await;
        c.batch_execute(
            "CREATE TABLE ms (id BIGINT PRIMARY KEY, g INT, v BIGINT, s TEXT); \
             INSERT INTO ms SELECT i, 1, i % 20000, 'x' || (i % 7) FROM generate_series(1, 20000) AS t(i); \
             INSERT INTO ms VALUES (20001, 2, 5, 'y'); \
             CREATE MATERIALIZED VIEW ms_g AS SELECT g, min(v) AS lo, max(v) AS hi, count(DISTINCT v) AS d, count(*) AS n FROM ms GROUP BY g; \
             CREATE MATERIALIZED VIEW ms_all AS SELECT max(v) AS hi, count(DISTINCT s) AS ds, string_agg(DISTINCT s, ',') AS ss FROM ms",
        )
        .await
        .unwrap();
        // The grouped view: two groups in its group table, and a row per value and call
        // (20,000 values of group 1 under min, max and count(DISTINCT); one of group 2).
        let tables = operator_tables(&c, "ms_g").await;
        assert_eq!(tables.len(), 2, "{tables:?}");
        let (groups, values) = (tables[0], tables[1]);
        assert_eq!(groups.0, 2);
        assert!(groups.1 < 1_000, "a group's state holds no values: {groups:?}");
        assert_eq!(values.0, 3 * 20_001);
        for view in views {
            verify(&c, view).await;
        }
        // Changes inside the big group: a new minimum, the maximum deleted, values moved.
        c.batch_execute(
            "INSERT INTO ms VALUES (30000, 1, -1, 'z'); DELETE FROM ms WHERE v = 19999; \
             UPDATE ms SET v = v + 100000 WHERE id % 1000 = 0 AND id <= 20000; DELETE FROM ms WHERE g = 2",
        )
        .await
        .unwrap();
        for view in views {
            verify(&c, view).await;
        }
        srv.shutdown().await.unwrap();
    }
    // After a restart the groups' values are read back from their rows.
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    let before: (i64, i64) = {
        let r = c.query_one("SELECT lo, hi FROM ms_g WHERE g = 1", &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(before, (-1, 119000));
    c.batch_execute("DELETE FROM ms WHERE v < 0 OR v >= 100000; INSERT INTO ms VALUES (30001, 3, 7, 'w'); DELETE FROM ms WHERE s = 'x3'")
        .await
        .unwrap();
    for view in views {
        verify(&c, view).await;
    }
    let r = c.query_one("SELECT lo, hi FROM ms_g WHERE g = 1", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (1, 19998));
    // Every value row of a dropped group is gone with it.
    c.batch_execute("DELETE FROM ms WHERE g = 3").await.unwrap();
    let values = operator_tables(&c, "ms_g").await[1];
    let distinct: i64 = c.query_one("SELECT count(DISTINCT v) FROM ms", &[]).await.unwrap().get(0);
    assert_eq!(values.0, 3 * distinct, "{values:?}");
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
