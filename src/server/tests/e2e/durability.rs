//! Acknowledged means durable: restarts on the same directory and SIGKILL of a real process.

use std::time::Duration;

use crate::support::{connect, create_bucket, eventually, s3_env, server, spawn_eddy, spawn_eddy_env, start_s3_server, temp_dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_restart_keeps_tables_rows_and_schemas() {
    let dir = temp_dir("restart");
    let url = format!("file://{}", dir.display());
    {
        let srv = server(&url).await;
        let c = connect(srv.addr).await;
        c.batch_execute(
            "CREATE SCHEMA s; CREATE TABLE s.t (id INT PRIMARY KEY, v TEXT NOT NULL DEFAULT 'x'); \
             INSERT INTO s.t VALUES (1, 'a'), (2, 'b'); INSERT INTO s.t (id) VALUES (3); \
             CREATE TABLE norow (a INT); INSERT INTO norow VALUES (1), (1); \
             CREATE VIEW s.v (key, val) AS SELECT id, upper(v) FROM s.t WHERE id > 1; \
             CREATE MATERIALIZED VIEW s.mv AS SELECT count(*) AS n FROM s.v; \
             CREATE TABLE ser (id BIGSERIAL PRIMARY KEY, v TEXT); INSERT INTO ser (v) VALUES ('a'), ('b');",
        )
        .await
        .unwrap();
        drop(c);
        srv.shutdown().await.unwrap();
    }
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    let rows = c.query("SELECT id, v FROM s.t ORDER BY id", &[]).await.unwrap();
    let got: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, vec![(1, "a".into()), (2, "b".into()), (3, "x".into())]);
    // Views survive too; a materialized view over a view recovers and keeps maintaining.
    let rows = c.query("SELECT key, val FROM s.v ORDER BY key", &[]).await.unwrap();
    let got: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, vec![(2, "B".into()), (3, "X".into())]);
    c.batch_execute("INSERT INTO s.t VALUES (4, 'd'); FLUSH").await.unwrap();
    let n: i64 = c.query_one("SELECT n FROM s.mv", &[]).await.unwrap().get(0);
    assert_eq!(n, 3);
    // A serial column continues after the values it handed out before the restart.
    let id: i64 = c.query_one("INSERT INTO ser (v) VALUES ('c') RETURNING id", &[]).await.unwrap().get(0);
    assert_eq!(id, 3);
    // Hidden row ids minted after a restart never collide with earlier ones.
    c.batch_execute("INSERT INTO norow VALUES (2)").await.unwrap();
    let n: i64 = c.query_one("SELECT count(*) FROM norow", &[]).await.unwrap().get(0);
    assert_eq!(n, 3);
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}


#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_acknowledged_before_sigkill_survive_it() {
    let dir = temp_dir("kill9");
    let url = format!("file://{}", dir.display());
    let (proc1, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    c.batch_execute(
        "CREATE TABLE k (id BIGINT PRIMARY KEY, payload TEXT); \
         CREATE MATERIALIZED VIEW k_stats AS SELECT count(*) AS n, sum(id) AS s, max(payload) AS top FROM k; \
         CREATE MATERIALIZED VIEW k_even AS SELECT id, payload FROM k WHERE id % 2 = 0",
    )
    .await
    .unwrap();
    let mut acknowledged = 0i64;
    for i in 0..50i64 {
        c.execute("INSERT INTO k VALUES ($1, $2)", &[&i, &format!("row {i}")]).await.unwrap();
        acknowledged += 1;
    }
    // SIGKILL right after the last INSERT returned: no shutdown, no flush.
    drop(c);
    drop(proc1);
    let (_proc2, addr) = spawn_eddy(&url);
    let c = eventually(Duration::from_secs(30), || async { Some(connect(addr).await) }).await;
    let n: i64 = c.query_one("SELECT count(*) FROM k", &[]).await.unwrap().get(0);
    assert_eq!(n, acknowledged);
    let last: String = c.query_one("SELECT payload FROM k WHERE id = 49", &[]).await.unwrap().get(0);
    assert_eq!(last, "row 49");
    // Views were rebuilt from their committed state and keep updating.
    let r = c.query_one("SELECT n, s::bigint FROM k_stats", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (50, (0..50).sum::<i64>()));
    c.batch_execute("INSERT INTO k VALUES (100, 'row 100'); DELETE FROM k WHERE id = 0").await.unwrap();
    let r = c.query_one("SELECT n, s::bigint FROM k_stats", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (50, (1..50).sum::<i64>() + 100));
    let evens: i64 = c.query_one("SELECT count(*) FROM k_even", &[]).await.unwrap().get(0);
    assert_eq!(evens, 25);
    for v in ["k_stats", "k_even"] {
        let msgs = c.simple_query(&format!("VERIFY MATERIALIZED VIEW {v}")).await.unwrap();
        let ok = msgs.iter().any(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(r) if r.get(0) == Some("OK")));
        assert!(ok, "{v} differs from its query after recovery");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_on_an_s3_server_survives_sigkill() {
    let Some((_s3, port)) = start_s3_server() else { return };
    create_bucket(port, "eddy-test").await;
    let env = s3_env(port);
    let url = "s3://eddy-test/state";
    let (p1, addr) = spawn_eddy_env(url, &env);
    let c = connect(addr).await;
    c.batch_execute("CREATE TABLE s3t (id INT PRIMARY KEY, v TEXT)").await.unwrap();
    for i in 0..10i32 {
        c.execute("INSERT INTO s3t VALUES ($1, 'v')", &[&i]).await.unwrap();
    }
    drop(c);
    drop(p1);
    let (_p2, addr) = spawn_eddy_env(url, &env);
    let c = connect(addr).await;
    let n: i64 = c.query_one("SELECT count(*) FROM s3t", &[]).await.unwrap().get(0);
    assert_eq!(n, 10);
}

/// Issue 11, item 6: state on an S3 server process, with the block cache's disk part, across
/// restarts with an empty cache directory (a second data directory on the same bucket) and
/// back on the first one, whose cached blocks are stale by then. A small memory budget makes
/// operator state leave memory, so the restarted servers read it back through those caches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_on_s3_survives_restarts_on_an_empty_cache_and_a_second_data_directory() {
    let Some((_s3, port)) = start_s3_server() else { return };
    create_bucket(port, "eddy-dirs").await;
    let (dir_a, dir_b) = (temp_dir("s3-cache-a"), temp_dir("s3-cache-b"));
    let env_on = |dir: &std::path::Path| {
        let mut env = s3_env(port).to_vec();
        env.push(("EDDY_CACHE_DIR", dir.display().to_string()));
        env.push(("EDDY_MEMORY_MB", "32".to_string()));
        env
    };
    let url = "s3://eddy-dirs/state";
    let check = |c: tokio_postgres::Client, rows: i64| async move {
        let row = c.query_one("SELECT (SELECT count(*) FROM t), (SELECT sum(n)::BIGINT FROM by_g), (SELECT count(*) FROM per_row)", &[]).await.unwrap();
        let (a, b, d): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        assert_eq!((a, b, d), (rows, rows, rows));
        for v in ["by_g", "per_row"] {
            crate::support::verify(&c, v).await.unwrap();
        }
        c
    };

    let (p1, addr) = spawn_eddy_env(url, &env_on(&dir_a));
    let c = connect(addr).await;
    c.batch_execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, g INT, s TEXT); \
         CREATE MATERIALIZED VIEW by_g AS SELECT g, count(*) AS n, max(s) AS hi FROM t GROUP BY g; \
         CREATE MATERIALIZED VIEW per_row AS SELECT id, count(*) AS n, sum(g) AS total FROM t GROUP BY id; \
         INSERT INTO t SELECT x, x % 100, 'row ' || x FROM generate_series(1, 30000) AS x; \
         UPDATE t SET g = g + 1 WHERE id % 3 = 0",
    )
    .await
    .unwrap();
    let c = check(c, 30_000).await;
    drop(c);
    drop(p1);

    // A second data directory: nothing cached.
    let (p2, addr) = spawn_eddy_env(url, &env_on(&dir_b));
    let c = check(connect(addr).await, 30_000).await;
    c.batch_execute("INSERT INTO t SELECT x, x % 100, 'row ' || x FROM generate_series(30001, 40000) AS x; DELETE FROM t WHERE id % 10 = 0")
        .await
        .unwrap();
    let c = check(c, 36_000).await;
    drop(c);
    drop(p2);

    // Back on the first directory: its cached blocks predate the second server's writes.
    let (_p3, addr) = spawn_eddy_env(url, &env_on(&dir_a));
    let c = check(connect(addr).await, 36_000).await;
    c.batch_execute("INSERT INTO t VALUES (50000, 7, 'late')").await.unwrap();
    check(c, 36_001).await;
    let _ = (std::fs::remove_dir_all(dir_a), std::fs::remove_dir_all(dir_b));
}

/// A view created under another `search_path` keeps reading the same relations after a restart
/// (its stored query names them with their schemas).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_created_under_a_search_path_recovers_bound_to_the_same_tables() {
    let dir = temp_dir("search-path");
    let url = format!("file://{}", dir.display());
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    c.batch_execute(
        "CREATE SCHEMA s2; CREATE TABLE s2.t (id INT PRIMARY KEY, v INT); CREATE TABLE t (id INT PRIMARY KEY, v INT);
         SET search_path = s2; INSERT INTO t VALUES (1, 10);
         CREATE MATERIALIZED VIEW public.sv AS SELECT t.id, v FROM t;
         CREATE MATERIALIZED VIEW public.both_t AS SELECT a.id, b.v FROM t a JOIN public.t b ON a.id = b.id",
    )
    .await
    .unwrap();
    drop(c);
    srv.shutdown().await.unwrap();
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    c.batch_execute("INSERT INTO s2.t VALUES (2, 20); INSERT INTO public.t VALUES (2, 5), (3, 7)").await.unwrap();
    let rows = crate::support::rows(&c, "SELECT id, v FROM sv ORDER BY id").await.unwrap();
    assert_eq!(rows, vec![vec!["1".to_string(), "10".to_string()], vec!["2".to_string(), "20".to_string()]]);
    let rows = crate::support::rows(&c, "SELECT id, v FROM both_t").await.unwrap();
    assert_eq!(rows, vec![vec!["2".to_string(), "5".to_string()]]);
    for v in ["sv", "both_t"] {
        crate::support::verify(&c, v).await.unwrap();
    }
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// Relation ids are never handed out twice, even after the newest relation was dropped and
/// the server restarted (a reused id could find state left under it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relation_ids_are_not_reused_after_a_drop_and_a_restart() {
    let dir = temp_dir("ids");
    let url = format!("file://{}", dir.display());
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    c.batch_execute("CREATE TABLE a (x INT); CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n FROM a").await.unwrap();
    let dropped = oid(&c, "v").await;
    c.batch_execute("DROP MATERIALIZED VIEW v").await.unwrap();
    drop(c);
    srv.shutdown().await.unwrap();
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    c.batch_execute("CREATE TABLE b (x INT)").await.unwrap();
    assert!(oid(&c, "b").await > dropped, "an id was handed out again");
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

async fn oid(c: &tokio_postgres::Client, name: &str) -> u64 {
    let r = crate::support::rows(c, &format!("SELECT oid FROM pg_class WHERE relname = '{name}'")).await.unwrap();
    r[0][0].parse().unwrap()
}

/// A view over constant rows (VALUES, a query without FROM, constants joined with a table)
/// holds them exactly once after a clean restart and after SIGKILL: its reader committed that
/// it emitted them, so the recovered view emits none again, and it keeps maintaining its join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_over_constant_rows_hold_them_once_across_restarts() {
    let dir = temp_dir("constants");
    let url = format!("file://{}", dir.display());
    let setup = "CREATE TABLE t (c TEXT, v INT); INSERT INTO t VALUES ('cn', 1), ('us', 2); \
                 CREATE MATERIALIZED VIEW vals AS VALUES (233, 'x'), (233, 'x'); \
                 CREATE MATERIALIZED VIEW one AS SELECT 1 AS a, 'b' AS b; \
                 CREATE MATERIALIZED VIEW joined AS WITH dict(abbr, name) AS (VALUES ('cn', 'China'), ('us', 'United States')) \
                 SELECT t.v, dict.name FROM t JOIN dict ON t.c = dict.abbr";
    let check = |c: tokio_postgres::Client| async move {
        let n: i64 = c.query_one("SELECT count(*) FROM vals", &[]).await.unwrap().get(0);
        assert_eq!(n, 2);
        let n: i64 = c.query_one("SELECT count(*) FROM one", &[]).await.unwrap().get(0);
        assert_eq!(n, 1);
        let rows = c.query("SELECT v, name FROM joined ORDER BY v", &[]).await.unwrap();
        rows.iter().map(|r| (r.get::<_, i32>(0), r.get::<_, String>(1))).collect::<Vec<_>>()
    };
    {
        let srv = server(&url).await;
        let c = connect(srv.addr).await;
        c.batch_execute(setup).await.unwrap();
        assert_eq!(check(c).await, vec![(1, "China".to_string()), (2, "United States".to_string())]);
        srv.shutdown().await.unwrap();
    }
    {
        let srv = server(&url).await;
        let c = connect(srv.addr).await;
        c.batch_execute("INSERT INTO t VALUES ('us', 3); FLUSH").await.unwrap();
        assert_eq!(check(c).await, vec![(1, "China".into()), (2, "United States".into()), (3, "United States".into())]);
        srv.shutdown().await.unwrap();
    }
    // And after SIGKILL of a real process (dropping a `Process` kills it).
    let (proc1, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    c.batch_execute("DELETE FROM t WHERE v = 1").await.unwrap();
    drop(c);
    drop(proc1);
    let (_proc2, addr) = spawn_eddy(&url);
    let c = eventually(Duration::from_secs(30), || async { Some(connect(addr).await) }).await;
    for v in ["vals", "one", "joined"] {
        let msgs = c.simple_query(&format!("VERIFY MATERIALIZED VIEW {v}")).await.unwrap();
        let ok = msgs.iter().any(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(r) if r.get(0) == Some("OK")));
        assert!(ok, "{v} differs from its query after recovery");
    }
    assert_eq!(check(c).await, vec![(2, "United States".into()), (3, "United States".into())]);
    let _ = std::fs::remove_dir_all(dir);
}
