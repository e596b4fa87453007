//! Sources (issue 14): `CREATE SOURCE` with the datagen and nexmark connectors, views over
//! them, exact resume after a restart and after SIGKILL of a real process (every event counted
//! once), errors for bad options and direct queries, and DROP.

use std::time::Duration;

use tokio_postgres::Client;

use crate::support::{bounded, connect, eventually, rows, server, spawn_eddy, temp_dir};

const STEP: Duration = Duration::from_secs(120);

async fn exec(c: &Client, sql: &str) {
    bounded(STEP, sql, c.batch_execute(sql)).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

/// The one-row result of `sql`, polled until it equals `want`.
async fn until(c: &Client, sql: &str, want: &[&str]) {
    let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    eventually(STEP, || async {
        let r = rows(c, sql).await.ok()?;
        (r.first() == Some(&want)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datagen_sequence_feeds_every_view_once_and_resumes_exactly_after_a_restart() {
    let dir = temp_dir("source-restart");
    let url = format!("file://{}", dir.display());
    {
        let srv = server(&url).await;
        let c = connect(srv.addr).await;
        exec(
            &c,
            "CREATE SOURCE seq (id BIGINT, g INT, name VARCHAR) WITH (connector = 'datagen', fields.id.kind = 'sequence', \
             fields.id.start = '1', fields.id.end = '30000', fields.g.min = '0', fields.g.max = '9', fields.name.length = '4', \
             datagen.rows.per.second = '20000')",
        )
        .await;
        exec(&c, "CREATE MATERIALIZED VIEW totals AS SELECT count(*) AS n, sum(id) AS s, count(DISTINCT id) AS d FROM seq").await;
        exec(&c, "CREATE MATERIALIZED VIEW per_g AS SELECT g, count(*) AS n FROM seq GROUP BY g").await;
        // Two scans of one source in a view share its reader: a self-join matches every row once.
        exec(&c, "CREATE MATERIALIZED VIEW self_join AS SELECT count(*) AS n FROM seq a JOIN seq b ON a.id = b.id AND a.g = b.g").await;
        // Stop part-way through: the readers' positions are committed with the views' state.
        eventually(STEP, || async {
            let r = rows(&c, "SELECT n FROM totals").await.ok()?;
            let n: i64 = r.first()?.first()?.parse().ok()?;
            (n > 0).then_some(())
        })
        .await;
        srv.shutdown().await.unwrap();
    }
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    until(&c, "SELECT n, s, d FROM totals", &["30000", "450015000", "30000"]).await;
    until(&c, "SELECT sum(n), count(*) FROM per_g", &["30000", "10"]).await;
    until(&c, "SELECT n FROM self_join", &["30000"]).await;
    let readers = srv.engine.source_readers();
    let self_join = srv.engine.catalog().tables().find(|t| t.name == "self_join").map(|t| t.id).unwrap();
    assert_eq!(readers.iter().filter(|(_, r)| r.view == self_join).count(), 1, "one reader per source and view");
    let out = rows(&c, "SHOW SOURCES").await.unwrap();
    assert_eq!(out, vec![vec!["seq".to_string()]]);
}

/// A source's rows reach a view that is still backfilling a table it also reads: the view's
/// own reader starts at the source's beginning, so the source has nothing to backfill and its
/// rows pass at once (they were held behind the table's scan and dropped at its barriers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_rows_arriving_while_a_table_backfills_are_kept() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    exec(
        &c,
        "CREATE TABLE big (id BIGINT PRIMARY KEY); INSERT INTO big SELECT i FROM generate_series(1, 20000) AS s(i); \
         CREATE SOURCE seq (id BIGINT) WITH (connector = 'datagen', fields.id.kind = 'sequence', fields.id.start = '1', \
         fields.id.end = '3000', datagen.rows.per.second = '100000'); \
         SET backfill_epoch_rows = 40",
    )
    .await;
    for parallelism in [1, 2] {
        exec(&c, &format!("SET streaming_parallelism = {parallelism}")).await;
        let (j, u) = (format!("joined{parallelism}"), format!("unioned{parallelism}"));
        // The table is the first input: its backfill runs for hundreds of epochs while the
        // source's 3,000 rows arrive.
        exec(&c, &format!("CREATE MATERIALIZED VIEW {j} AS SELECT count(*) AS n, sum(s.id) AS t FROM big b JOIN seq s ON b.id = s.id")).await;
        exec(&c, &format!("CREATE MATERIALIZED VIEW {u} AS SELECT count(*) AS n FROM (SELECT id FROM big UNION ALL SELECT id FROM seq) x")).await;
        until(&c, &format!("SELECT n, t FROM {j}"), &["3000", "4501500"]).await;
        until(&c, &format!("SELECT n FROM {u}"), &["23000"]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_loses_and_repeats_no_event() {
    let dir = temp_dir("source-kill");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    exec(
        &c,
        "CREATE SOURCE s (id BIGINT) WITH (connector = 'datagen', fields.id.kind = 'sequence', fields.id.start = '1', \
         fields.id.end = '40000', datagen.rows.per.second = '10000')",
    )
    .await;
    exec(&c, "CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n, sum(id) AS s, count(DISTINCT id) AS d FROM s").await;
    eventually(STEP, || async {
        let r = rows(&c, "SELECT n FROM v").await.ok()?;
        let n: i64 = r.first()?.first()?.parse().ok()?;
        (n >= 5000).then_some(())
    })
    .await;
    drop(c);
    drop(proc); // SIGKILL
    let (_proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    until(&c, "SELECT n, s, d FROM v", &["40000", "800020000", "40000"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nexmark_sources_run_the_standard_queries() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    let n = 20_000;
    exec(
        &c,
        &format!(
            "CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR) \
             WITH (connector = 'nexmark', nexmark.table.type = 'Bid', nexmark.event.num = '{n}', nexmark.split.num = '2');
             CREATE SOURCE auction (id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, \
             expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR) \
             WITH (connector = 'nexmark', nexmark.table.type = 'Auction', nexmark.event.num = '{n}');
             CREATE SOURCE person (id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR, state VARCHAR, \
             date_time TIMESTAMP, extra VARCHAR) WITH (connector = 'nexmark', nexmark.table.type = 'Person', nexmark.event.num = '{n}')"
        ),
    )
    .await;
    // q1, q2, a keyed aggregate and q3's join of auctions and persons.
    exec(&c, "CREATE MATERIALIZED VIEW q1 AS SELECT auction, bidder, 0.908 * price AS price, date_time FROM bid").await;
    exec(&c, "CREATE MATERIALIZED VIEW q2 AS SELECT auction, price FROM bid WHERE auction % 123 = 0").await;
    exec(&c, "CREATE MATERIALIZED VIEW agg AS SELECT auction, count(*) AS n, max(price) AS top FROM bid GROUP BY auction").await;
    exec(
        &c,
        "CREATE MATERIALIZED VIEW q3 AS SELECT p.name, p.city, p.state, a.id FROM auction a JOIN person p ON a.seller = p.id \
         WHERE a.category = 10 AND (p.state = 'OR' OR p.state = 'ID' OR p.state = 'CA')",
    )
    .await;
    // 46 of every 50 events are bids, 3 auctions, 1 a person.
    until(&c, "SELECT count(*) FROM q1", &["18400"]).await;
    until(&c, "SELECT sum(n) FROM agg", &["18400"]).await;
    let q2 = rows(&c, "SELECT count(*) FROM q2 WHERE auction % 123 <> 0").await.unwrap();
    assert_eq!(q2, vec![vec!["0".to_string()]]);
    let top = rows(&c, "SELECT count(*) FROM agg WHERE top IS NULL OR n <= 0").await.unwrap();
    assert_eq!(top, vec![vec!["0".to_string()]]);
    eventually(STEP, || async {
        let r = rows(&c, "SELECT count(*) FROM q3").await.ok()?;
        (r.first()?.first()?.parse::<i64>().ok()? > 0).then_some(())
    })
    .await;
    // Each view reads its own copy of the stream: a later view sees all of it too.
    exec(&c, "CREATE MATERIALIZED VIEW late AS SELECT count(*) AS n FROM bid").await;
    until(&c, "SELECT n FROM late", &["18400"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sources_are_refused_with_clear_errors_and_sources_drop() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    let err = |sql: &'static str| {
        let c = &c;
        async move { rows(c, sql).await.expect_err(sql) }
    };
    let e = err("CREATE SOURCE s (a INT) WITH (connector = 'nosuch')").await;
    assert!(e.starts_with("0A000") && e.contains("nosuch"), "{e}");
    let e = err("CREATE SOURCE s (a INT) WITH (connector = 'datagen', fields.a.kind = 'zigzag')").await;
    assert!(e.starts_with("22023") && e.contains("fields.a.kind"), "{e}");
    let e = err("CREATE SOURCE s (colour VARCHAR) WITH (connector = 'nexmark', nexmark.table.type = 'Bid')").await;
    assert!(e.contains("colour"), "{e}");
    let e = err("CREATE SOURCE s (a INT)").await;
    assert!(e.starts_with("42601"), "{e}");
    exec(&c, "CREATE SOURCE s (a INT) WITH (connector = 'datagen', datagen.rows.per.second = '5')").await;
    let e = err("SELECT * FROM s").await;
    assert!(e.starts_with("0A000") && e.contains("materialized view"), "{e}");
    let e = err("INSERT INTO s VALUES (1)").await;
    assert!(e.starts_with("42809"), "{e}");
    exec(&c, "CREATE MATERIALIZED VIEW sv AS SELECT a FROM s").await;
    let e = err("DROP SOURCE s").await;
    assert!(e.starts_with("2BP01"), "{e}");
    let e = err("DROP TABLE s").await;
    assert!(e.starts_with("42809") && e.contains("DROP SOURCE"), "{e}");
    exec(&c, "DROP SOURCE s CASCADE").await;
    assert_eq!(rows(&c, "SHOW SOURCES").await.unwrap(), Vec::<Vec<String>>::new());
    exec(&c, "DROP SOURCE IF EXISTS s").await;
    // The server still cuts barriers and commits after the readers left.
    exec(&c, "CREATE TABLE t (a INT); INSERT INTO t VALUES (1)").await;
    assert_eq!(rows(&c, "SELECT count(*) FROM t").await.unwrap(), vec![vec!["1".to_string()]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_a_connector_stores_its_rows_once_across_restarts() {
    let dir = temp_dir("connector-table");
    let url = format!("file://{}", dir.display());
    {
        let srv = server(&url).await;
        let c = connect(srv.addr).await;
        exec(
            &c,
            "CREATE TABLE t (id BIGINT, v INT) WITH (connector = 'datagen', fields.id.kind = 'sequence', fields.id.start = '1', \
             fields.id.end = '20000', fields.v.max = '3', datagen.rows.per.second = '10000') FORMAT PLAIN ENCODE JSON;
             CREATE TABLE k (id INT PRIMARY KEY, v INT) WITH (connector = 'datagen', fields.id.max = '50', fields.v.max = '9', \
             datagen.rows.per.second = '2000')",
        )
        .await;
        exec(&c, "CREATE MATERIALIZED VIEW tv AS SELECT v, count(*) AS n FROM t GROUP BY v").await;
        eventually(STEP, || async {
            let r = rows(&c, "SELECT count(*) FROM t").await.ok()?;
            (r.first()?.first()?.parse::<i64>().ok()? > 0).then_some(())
        })
        .await;
        // DML still works on a connector table.
        exec(&c, "INSERT INTO t VALUES (-1, 0)").await;
        srv.shutdown().await.unwrap();
    }
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    until(&c, "SELECT count(*), count(DISTINCT id), sum(id) FROM t", &["20001", "20001", "200009999"]).await;
    until(&c, "SELECT sum(n) FROM tv", &["20001"]).await;
    // A keyed table keeps the newest row of each key: at most 51 rows, one per id.
    eventually(STEP, || async {
        let r = rows(&c, "SELECT count(*), count(DISTINCT id), max(id) <= 50 FROM k").await.ok()?;
        let row = r.first()?;
        (row[0] == row[1] && row[2] == "t" && row[0] != "0").then_some(())
    })
    .await;
    // Dropping the table drops its connector's position too (nothing left under its id).
    exec(&c, "DROP TABLE t CASCADE").await;
}

/// Views over a source with a watermark: windows closed by it (EMIT ON WINDOW CLOSE, TUMBLE,
/// HOP, a window self-join whose closed buckets leave its state) and a window aggregate whose
/// closed groups drop their state. SIGKILLed mid-stream, the
/// restarted server ends with exactly the views of an uninterrupted run: the reader's position
/// and its watermark commit together, so no window is emitted twice or lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watermarked_windows_after_sigkill_equal_an_uninterrupted_run() {
    const DDL: &str = "CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, \
        date_time TIMESTAMP, extra VARCHAR, WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND) WITH (connector = 'nexmark', \
        nexmark.table.type = 'Bid', nexmark.event.num = '60000', nexmark.base.time = '1700000000000', \
        nexmark.use.real.time = 'true', nexmark.max.chunk.size = '256');
        CREATE MATERIALIZED VIEW closed AS SELECT window_start, count(*) AS n, sum(price) AS s \
            FROM TUMBLE(bid, date_time, INTERVAL '1' SECOND) GROUP BY window_start EMIT ON WINDOW CLOSE;
        CREATE MATERIALIZED VIEW live AS SELECT window_start, count(*) AS n, sum(price) AS s \
            FROM TUMBLE(bid, date_time, INTERVAL '1' SECOND) GROUP BY window_start;
        CREATE MATERIALIZED VIEW sliding AS SELECT auction % 10 AS a, window_start, count(*) AS n, max(price) AS m \
            FROM HOP(bid, date_time, INTERVAL '500' MILLISECOND, INTERVAL '1500' MILLISECOND) GROUP BY auction % 10, window_start EMIT ON WINDOW CLOSE;
        CREATE MATERIALIZED VIEW joined AS SELECT x.window_start, count(*) AS n, sum(x.bidder) AS b \
            FROM TUMBLE(bid, date_time, INTERVAL '1' SECOND) x JOIN TUMBLE(bid, date_time, INTERVAL '1' SECOND) y \
            ON x.window_start = y.window_start AND x.price = y.price GROUP BY x.window_start EMIT ON WINDOW CLOSE;";
    const VIEWS: [&str; 4] =
        ["SELECT * FROM closed ORDER BY 1", "SELECT * FROM live ORDER BY 1", "SELECT * FROM sliding ORDER BY 1, 2", "SELECT * FROM joined ORDER BY 1"];
    // Every bid reached the non-closing view (60,000 events hold 55,200 bids, none late here),
    // so its reader's watermark is final; each view is done once its own reader got there too
    // (a view closes windows in the epoch its reader's watermark commits in).
    async fn finished(c: &Client) {
        until(c, "SELECT sum(n) FROM live", &["55200"]).await;
        until(c, "SELECT count(DISTINCT watermark), count(*) FROM eddy_watermarks", &["1", "4"]).await;
    }
    let reference = {
        let srv = server("memory://").await;
        let c = connect(srv.addr).await;
        exec(&c, DDL).await;
        finished(&c).await;
        let mut out = Vec::new();
        for q in VIEWS {
            out.push(rows(&c, q).await.unwrap());
        }
        out
    };
    // Closed windows are all there, once each, and the last ones stay open.
    assert!(reference[0].len() + 2 >= reference[1].len(), "all windows but the last ones closed");
    assert_eq!(reference[0][..], reference[1][..reference[0].len()], "a closed window holds what the live one does");
    assert!(reference[0].len() >= 3 && reference[2].len() > 25, "{} windows, {} sliding windows", reference[0].len(), reference[2].len());

    let dir = temp_dir("watermark-kill");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    exec(&c, DDL).await;
    eventually(STEP, || async {
        let r = rows(&c, "SELECT count(*) FROM closed").await.ok()?;
        let n: i64 = r.first()?.first()?.parse().ok()?;
        (n >= 1).then_some(())
    })
    .await;
    let before: i64 = rows(&c, "SELECT sum(n) FROM live").await.unwrap()[0][0].parse().unwrap();
    assert!(before < 55200, "the source paces its events in real time: killed mid-stream");
    drop(c);
    drop(proc); // SIGKILL
    let (_proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    finished(&c).await;
    for (q, want) in VIEWS.iter().zip(&reference) {
        assert_eq!(&rows(&c, q).await.unwrap(), want, "{q} after SIGKILL");
    }
    let late = rows(&c, "SELECT view, late_rows FROM eddy_watermarks ORDER BY 1").await.unwrap();
    assert_eq!(
        late,
        vec![vec!["closed".to_string(), "0".into()], vec!["joined".into(), "0".into()], vec!["live".into(), "0".into()], vec!["sliding".into(), "0".into()]]
    );
    assert_eq!(reference[3].len(), reference[0].len(), "the window join closes the same windows");
}
