//! The HTTP server: the JSON API and Prometheus metrics reflect a running view's operators
//! and counters, `EXPLAIN ANALYZE MATERIALIZED VIEW` shows the same live counters,
//! `eddy_ddl_progress` and NOTICEs report a backfill's progress, bad requests get JSON errors,
//! and hostile HTTP clients never disturb the SQL path. The dashboard in a real browser is
//! in `dashboard.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{connect, eventually, rows, server_with};

/// `method path` over a fresh connection: (status, body).
pub async fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("HTTP connects");
    s.write_all(format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

/// `GET path` as JSON, asserting 200.
pub async fn get_json(addr: SocketAddr, path: &str) -> Value {
    let (status, body) = http(addr, "GET", path).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path} is not JSON ({e}): {body}"))
}

/// The value of the sample `name{labels}` in a metrics text (labels as printed).
fn sample(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(name) && l.contains(label) && !l.starts_with('#')).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The node of `view` whose label starts with `prefix`.
fn node<'a>(view: &'a Value, prefix: &str) -> &'a Value {
    view["nodes"].as_array().unwrap().iter().find(|n| n["label"].as_str().unwrap_or_default().starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} node in {view}"))
}

async fn setup() -> (eddy_server::ServerHandle, tokio_postgres::Client, SocketAddr) {
    let server = server_with(|c| c.http = Some("127.0.0.1:0".into())).await;
    let http = server.http_addr.expect("the HTTP server runs");
    let c = connect(server.addr).await;
    c.batch_execute(
        "SET streaming_parallelism = 2;
         CREATE TABLE t (k INT PRIMARY KEY, g INT, v INT);
         CREATE TABLE u (g INT PRIMARY KEY, name TEXT);
         INSERT INTO t SELECT i, i % 5, i FROM generate_series(1, 100) AS s(i);
         INSERT INTO u VALUES (0, 'a'), (1, 'b'), (2, 'c'), (3, 'd'), (4, 'e');
         CREATE MATERIALIZED VIEW v1 AS SELECT u.name, count(*) AS n, sum(t.v) AS s FROM t JOIN u ON t.g = u.g GROUP BY u.name;
         INSERT INTO t SELECT i, i % 5, i FROM generate_series(101, 150) AS s(i);
         FLUSH;",
    )
    .await
    .unwrap();
    (server, c, http)
}

#[tokio::test]
async fn the_api_and_metrics_show_a_running_views_operators_and_counters() {
    let (server, c, http_addr) = setup().await;
    let views = get_json(http_addr, "/api/views").await;
    let v = views.as_array().unwrap().iter().find(|v| v["name"] == "v1").expect("v1 is listed");
    assert_eq!(v["status"], "running", "{v}");
    let id = v["id"].as_u64().unwrap();

    // Every row that entered (105 backfilled, 50 live) is counted where it entered; the
    // aggregation keeps one group per name.
    let view = eventually(Duration::from_secs(30), || async move {
        let view = get_json(http_addr, &format!("/api/views/{id}")).await;
        (node(&view, "Input public.t")["rows_in"] == 150).then_some(view)
    })
    .await;
    assert_eq!(node(&view, "Input public.u")["rows_in"], 5, "{view}");
    let join = view["nodes"].as_array().unwrap().iter().find(|n| n["kind"] == "join").expect("a join node");
    assert_eq!(join["rows_in"], 155, "{join}");
    assert!(join["state"]["entries"].as_u64().unwrap() > 0, "{join}");
    let agg = node(&view, "HashAgg");
    assert_eq!(agg["state"]["entries"], 5, "{agg}");
    assert!(agg["cache_hit_ratio"].as_f64().is_some(), "{agg}");
    // The tree: inputs feed the join, which (through its chain) feeds the root.
    let roots: Vec<_> = view["nodes"].as_array().unwrap().iter().filter(|n| n["parent"].is_null()).collect();
    assert_eq!(roots.len(), 1, "{view}");
    let mut up = node(&view, "Input public.t")["parent"].clone();
    let by_id = |id: &Value| view["nodes"].as_array().unwrap().iter().find(|n| &n["id"] == id).cloned();
    while up != join["id"] {
        up = by_id(&up).unwrap_or_else(|| panic!("the join is not above the input of t: {view}"))["parent"].clone();
    }
    // Two actors per fragment: the inputs, the join and the aggregation each in a fragment of
    // their own, exchanges between them.
    assert_eq!(view["parallelism"], 2, "{view}");
    let fragments: std::collections::BTreeSet<u64> = view["nodes"].as_array().unwrap().iter().map(|n| n["fragment"].as_u64().unwrap()).collect();
    assert_eq!(fragments.len(), 4, "{view}");
    assert_eq!(node(&view, "Input public.t")["fragment"], 0, "{view}");
    assert!(view["nodes"].as_array().unwrap().iter().any(|n| n["label"] == "Exchange"), "{view}");
    // By qualified name too.
    assert_eq!(get_json(http_addr, "/api/views/public.v1").await["id"], id);

    let overview = get_json(http_addr, "/api/overview").await;
    assert_eq!(overview["relations"]["tables"], 2, "{overview}");
    assert_eq!(overview["relations"]["materialized_views"], 1, "{overview}");
    assert!(overview["connections"].as_u64().unwrap() >= 1, "{overview}");
    assert!(overview["memory"]["components"].as_array().unwrap().iter().any(|c| c["component"] == "operator_caches"), "{overview}");
    // Every component reports what it holds against its limit (the block cache too).
    for c in overview["memory"]["components"].as_array().unwrap() {
        let (used, limit) = (c["used_bytes"].as_u64(), c["limit_bytes"].as_u64().unwrap());
        assert!(used.is_some_and(|u| u <= limit), "{c}");
    }
    let catalog = get_json(http_addr, "/api/catalog").await;
    let t = catalog.as_array().unwrap().iter().find(|r| r["name"] == "t").expect("t in the catalog");
    assert_eq!(t["columns"][0]["name"], "k");
    assert_eq!(t["columns"][0]["type"], "integer");
    assert!(!get_json(http_addr, "/api/epochs").await.as_array().unwrap().is_empty());
    let storage = get_json(http_addr, "/api/storage").await;
    assert!(storage["object_store"]["requests"]["put"].as_u64().unwrap() > 0, "{storage}");
    assert!(storage["objects"].as_array().is_some_and(|d| !d.is_empty()), "{storage}");
    let progress = get_json(http_addr, "/api/progress").await;
    let p = progress.as_array().unwrap().iter().find(|p| p["view"] == "public.v1").expect("v1's backfill");
    assert_eq!((p["state"].as_str(), p["rows_done"].as_u64(), p["rows_total"].as_u64()), (Some("done"), Some(105), Some(105)), "{p}");

    // Statement counters are this server's (other tests' servers run in the same process).
    assert_eq!(crate::support::sqlstate(&c.simple_query("SELECT 1 / 0").await.unwrap_err()), "22012");
    let (status, metrics) = http(http_addr, "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.trim_end().ends_with("# EOF"), "OpenMetrics text ends with # EOF");
    assert_eq!(sample(&metrics, "eddy_query_errors_total", ""), Some(1.0), "{metrics}");
    assert_eq!(sample(&metrics, "eddy_view_rows_in_total", "view=\"public.v1\""), Some(155.0), "{metrics}");
    assert!(sample(&metrics, "eddy_operator_rows_in_total", "operator=\"HashAgg\"").is_some_and(|v| v > 0.0), "{metrics}");
    assert_eq!(sample(&metrics, "eddy_operator_state_entries", "operator=\"HashAgg\""), Some(5.0), "{metrics}");
    assert!(sample(&metrics, "eddy_barrier_latency_seconds_count", "").is_some_and(|v| v > 0.0), "{metrics}");
    let count = sample(&metrics, "eddy_barrier_latency_seconds_count", "");
    assert_eq!(sample(&metrics, "eddy_barrier_latency_seconds_bucket", "le=\"+Inf\""), count, "the +Inf bucket holds every observation: {metrics}");
    let buckets: Vec<f64> = metrics.lines().filter(|l| l.starts_with("eddy_barrier_latency_seconds_bucket")).map(|l| l.rsplit(' ').next().unwrap().parse().unwrap()).collect();
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "cumulative buckets: {buckets:?}");
    assert!(!metrics.contains("{}"), "unlabelled samples print without braces: {metrics}");
    assert!(sample(&metrics, "eddy_object_store_requests_total", "op=\"put\"").is_some_and(|v| v > 0.0), "{metrics}");
    assert!(sample(&metrics, "eddy_committed_epoch", "").is_some_and(|v| v > 0.0), "{metrics}");
    assert!(sample(&metrics, "eddy_connections", "").is_some_and(|v| v >= 1.0), "{metrics}");
    assert!(sample(&metrics, "eddy_query_duration_seconds_count", "").is_some_and(|v| v > 0.0), "{metrics}");
    assert!(sample(&metrics, "eddy_memory_limit_bytes", "component=\"operator_caches\"").is_some_and(|v| v > 0.0), "{metrics}");

    // The dashboard's files.
    let (status, html) = http(http_addr, "GET", "/").await;
    assert_eq!(status, 200);
    assert!(html.contains("/app.js"), "{html}");
    assert_eq!(http(http_addr, "GET", "/app.js").await.0, 200);
    assert_eq!(http(http_addr, "HEAD", "/style.css").await, (200, String::new()));

    // Bad requests: JSON errors naming the problem.
    for path in ["/api/nope", "/nope", "/api/views/nope"] {
        let (status, body) = http(http_addr, "GET", path).await;
        assert_eq!(status, 404, "{path}");
        let v: Value = serde_json::from_str(&body).expect("a JSON error");
        assert!(v["error"].is_string(), "{body}");
    }
    assert_eq!(http(http_addr, "POST", "/metrics").await.0, 405);
    drop(c);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn explain_analyze_ddl_progress_and_notices_report_live_counters() {
    let (server, c, _) = setup().await;
    let lines: Vec<String> = rows(&c, "EXPLAIN ANALYZE MATERIALIZED VIEW v1").await.unwrap().into_iter().map(|r| r[0].clone()).collect();
    assert!(lines[0].starts_with("Materialized view public.v1:"), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("Backfill: done, 105 rows read of 105")), "{lines:?}");
    let agg = lines.iter().find(|l| l.contains("HashAgg")).unwrap_or_else(|| panic!("{lines:?}"));
    assert!(agg.contains("state entries=5") && agg.contains("cache hit ratio="), "{agg}");
    let input = lines.iter().find(|l| l.contains("Input public.t")).unwrap_or_else(|| panic!("{lines:?}"));
    assert!(input.contains("rows in=150 "), "{input}");
    assert!(input.starts_with(' '), "inputs are indented under what they feed: {lines:?}");
    // v1 runs as four fragments of two actors each; every node names its fragment.
    assert!(lines.iter().any(|l| l.starts_with("Fragments: 4, each run by 2 actors")), "{lines:?}");
    assert!(input.contains("[F0] Input public.t"), "{input}");
    assert!(lines.iter().any(|l| l.contains("] Exchange")), "{lines:?}");
    let e = c.simple_query("EXPLAIN ANALYZE MATERIALIZED VIEW nope").await.unwrap_err();
    assert_eq!(crate::support::sqlstate(&e), "42P01");
    // A batch query's EXPLAIN ANALYZE runs it and shows DataFusion's metrics per operator.
    let plan = rows(&c, "EXPLAIN ANALYZE SELECT g, count(*) FROM t GROUP BY g").await.unwrap();
    let text: String = plan.iter().map(|r| r.join(" ")).collect::<Vec<_>>().join("\n");
    assert!(text.contains("AggregateExec") && text.contains("output_rows=5") && text.contains("elapsed_compute="), "{text}");

    assert_eq!(
        rows(&c, "SELECT view, state, rows_done, rows_total, percent FROM eddy_ddl_progress WHERE view = 'public.v1'").await.unwrap(),
        vec![vec!["public.v1".to_string(), "done".into(), "105".into(), "105".into(), "100".into()]]
    );

    // A backfill in many small epochs: with a progress interval of 0 it reports at least its end.
    let conn_str = format!("host={} port={} user=root dbname=dev", server.addr.ip(), server.addr.port());
    let (notified, mut conn) = tokio_postgres::connect(&conn_str, tokio_postgres::NoTls).await.unwrap();
    let (tx, mut notices) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
        while let Some(Ok(m)) = futures::StreamExt::next(&mut messages).await {
            if let tokio_postgres::AsyncMessage::Notice(n) = m {
                let _ = tx.send(n.message().to_string());
            }
        }
    });
    notified.batch_execute("SET backfill_epoch_rows = 5; SET backfill_progress_interval = 0").await.unwrap();
    notified.batch_execute("CREATE MATERIALIZED VIEW v2 AS SELECT g, count(*) FROM t GROUP BY g").await.unwrap();
    let mut seen = Vec::new();
    while let Ok(n) = notices.try_recv() {
        seen.push(n);
    }
    assert!(seen.iter().any(|n| n.starts_with("materialized view \"v2\": backfill 100.0% (150 of 150 rows") && n.contains("rows/s")), "{seen:?}");
    assert_eq!(rows(&c, "SELECT state, rows_done FROM eddy_ddl_progress WHERE view = 'public.v2'").await.unwrap(), vec![vec!["done".to_string(), "150".into()]]);

    // Reported every millisecond, a backfill of 150 one-row epochs (each a durable commit)
    // says how far it has come while it runs, and then that it finished.
    notified.batch_execute("SET backfill_epoch_rows = 1; SET backfill_progress_interval = 1").await.unwrap();
    notified.batch_execute("CREATE MATERIALIZED VIEW v3 AS SELECT g, count(*) FROM t GROUP BY g").await.unwrap();
    let mut seen = Vec::new();
    while let Ok(n) = notices.try_recv() {
        seen.push(n);
    }
    assert!(seen.len() >= 2, "notices while the backfill ran and at its end: {seen:?}");
    assert!(seen.iter().all(|n| n.starts_with("materialized view \"v3\": backfill ")), "{seen:?}");
    assert!(seen.last().is_some_and(|n| n.contains("100.0% (150 of 150 rows")), "{seen:?}");
    let e = c.simple_query("SET backfill_progress_interval = 'soon'").await.unwrap_err();
    assert_eq!(crate::support::sqlstate(&e), "22023");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn hostile_http_clients_never_disturb_the_sql_path() {
    let server = server_with(|c| c.http = Some("127.0.0.1:0".into())).await;
    let http_addr = server.http_addr.unwrap();
    // Idle connections beyond the limit, a huge request head, a large body nobody reads.
    let mut idle = Vec::new();
    for _ in 0..(eddy_server::http::MAX_CONNECTIONS + 20) {
        idle.push(tokio::net::TcpStream::connect(http_addr).await.unwrap());
    }
    let c = connect(server.addr).await;
    assert_eq!(rows(&c, "SELECT 1").await.unwrap(), vec![vec!["1".to_string()]]);
    drop(idle);
    let big = eventually(Duration::from_secs(30), || async move {
        let mut s = tokio::net::TcpStream::connect(http_addr).await.ok()?;
        let head = format!("GET /api/overview HTTP/1.1\r\nHost: x\r\nX-Junk: {}\r\n\r\n", "a".repeat(1 << 20));
        let _ = s.write_all(head.as_bytes()).await;
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        // Refused (431) or cut off, never answered as if it were fine.
        Some(String::from_utf8_lossy(&out).to_string())
    })
    .await;
    assert!(!big.starts_with("HTTP/1.1 200"), "{big}");
    // (Retried while the dropped idle clients still hold the connection slots: a connection
    // over the limit is closed unanswered.)
    let answer = eventually(Duration::from_secs(30), || async move {
        let mut s = tokio::net::TcpStream::connect(http_addr).await.ok()?;
        s.write_all(b"POST /api/overview HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n").await.ok()?;
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf)).await.expect("answered without the body").ok()?;
        (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).to_string())
    })
    .await;
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    // Served again once the idle clients are gone.
    eventually(Duration::from_secs(30), || async move { (http(http_addr, "GET", "/api/overview").await.0 == 200).then_some(()) }).await;
    assert_eq!(rows(&c, "SELECT 2").await.unwrap(), vec![vec!["2".to_string()]]);
    server.shutdown().await.unwrap();
}

/// The COPY with `table` in `/api/copies`, once `ready` holds for it.
async fn copy_entry(http: SocketAddr, table: &'static str, ready: impl Fn(&Value) -> bool + Copy) -> Value {
    eventually(Duration::from_secs(30), || async move {
        let all = get_json(http, "/api/copies").await;
        all.as_array().unwrap().iter().find(|c| c["table"] == table && ready(c)).cloned()
    })
    .await
}

#[tokio::test]
async fn a_running_copy_shows_its_rows_and_bytes_then_how_it_ended() {
    let (server, c, http) = setup().await;
    c.batch_execute("CREATE TABLE c (k INT PRIMARY KEY, s TEXT)").await.unwrap();
    let sink = c.copy_in("COPY c FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    let mut sent = 0u64;
    for b in 0..5 {
        let text: String = (0..20_000).map(|i| format!("{}\trow {i}\n", b * 20_000 + i)).collect();
        sent += text.len() as u64;
        futures::SinkExt::send(&mut sink, bytes::Bytes::from(text)).await.unwrap();
    }
    // Still running (the client has not ended the data): what arrived is counted.
    let running = copy_entry(http, "public.c", |c| c["state"] == "running" && c["bytes"].as_u64() == Some(sent)).await;
    assert!(running["rows"].as_u64().unwrap() <= 100_000, "{running}");
    assert_eq!(sink.finish().await.unwrap(), 100_000);
    let done = copy_entry(http, "public.c", |c| c["state"] == "done").await;
    assert_eq!((done["rows"].as_u64(), done["bytes"].as_u64()), (Some(100_000), Some(sent)), "{done}");

    // A COPY that fails ends as failed and applies nothing.
    c.batch_execute("CREATE TABLE d (k INT PRIMARY KEY)").await.unwrap();
    let sink = c.copy_in("COPY d FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    futures::SinkExt::send(&mut sink, bytes::Bytes::from_static(b"1\nnot a number\n")).await.unwrap();
    assert!(sink.finish().await.is_err());
    copy_entry(http, "public.d", |c| c["state"] == "failed").await;
    assert_eq!(rows(&c, "SELECT count(*) FROM d").await.unwrap(), vec![vec!["0".to_string()]]);
    server.shutdown().await.unwrap();
}
