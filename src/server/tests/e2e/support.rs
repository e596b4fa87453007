//! Shared test helpers: in-process servers on port 0, temp directories, clients.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use eddy_server::{start, ServerConfig, ServerHandle};

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("eddy-test-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts a server on 127.0.0.1:0 with state at `state_store`.
pub async fn server(state_store: &str) -> ServerHandle {
    server_with(|c| c.state_store = state_store.into()).await
}

/// Starts an in-memory server on 127.0.0.1:0, with `configure` applied to its configuration.
pub async fn server_with(configure: impl FnOnce(&mut ServerConfig)) -> ServerHandle {
    let mut config = ServerConfig {
        listen: "127.0.0.1:0".into(),
        state_store: "memory://".into(),
        test_functions: true,
        ..ServerConfig::default()
    };
    configure(&mut config);
    start(config).await.expect("server starts")
}

/// A tokio-postgres client connected to `addr` as root/dev.
pub async fn connect(addr: std::net::SocketAddr) -> tokio_postgres::Client {
    let conn_str = format!("host={} port={} user=root dbname=dev", addr.ip(), addr.port());
    let (client, conn) = tokio_postgres::connect(&conn_str, tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// The SQLSTATE of a failed statement.
pub fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| d.code().code().to_string()).unwrap_or_else(|| format!("not a db error: {e}"))
}

/// Polls `f` until it returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "condition not met within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `fut`, failing the test if it takes longer than `limit` (a hang is a failure, not a
/// stuck CI run).
pub async fn bounded<T>(limit: Duration, what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(limit, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not finish within {limit:?}"),
    }
}

/// The rows of `sql` as text (`NULL` for nulls), or the error as `SQLSTATE: message`.
pub async fn rows(c: &tokio_postgres::Client, sql: &str) -> Result<Vec<Vec<String>>, String> {
    let msgs = c.simple_query(sql).await.map_err(|e| match e.as_db_error() {
        Some(d) => format!("{}: {}", d.code().code(), d.message()),
        None => e.to_string(),
    })?;
    Ok(msgs
        .iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_string()).collect())
            }
            _ => None,
        })
        .collect())
}

/// `VERIFY MATERIALIZED VIEW view`: `Ok` when it printed exactly `OK`, else what it printed.
pub async fn verify(c: &tokio_postgres::Client, view: &str) -> Result<(), String> {
    let out = rows(c, &format!("VERIFY MATERIALIZED VIEW {view}")).await?;
    if out == [["OK"]] { Ok(()) } else { Err(format!("{view}: {out:?}")) }
}

/// Keys of a store's committed state, counted per owner. Used to prove that DROP, failed
/// CREATEs and crashes leave no state behind.
#[derive(Debug)]
pub struct Census {
    /// Keys per relation or state-table id (the key's first four bytes), id 0 excluded.
    pub keys: std::collections::BTreeMap<u32, usize>,
    /// Failing-row count entries per view id (system key space).
    pub row_errors: std::collections::BTreeMap<u32, usize>,
    /// Views with a recorded failure (system key space).
    pub failures: std::collections::BTreeSet<u32>,
    /// The catalog of that state.
    pub catalog: eddy_sql::catalog::Catalog,
}

impl Census {
    /// Scans every committed key of `store`.
    pub async fn of(store: &eddy_storage::StateStore) -> Census {
        use std::ops::Bound;
        let snapshot = store.snapshot();
        let catalog = eddy_sql::catalog::Catalog::load(&snapshot).await.expect("catalog loads");
        let (mut keys, mut row_errors, mut failures) = (Default::default(), Default::default(), std::collections::BTreeSet::new());
        let mut cursor = snapshot.scan_batches(Bound::Unbounded, Bound::Unbounded, 4096).await.expect("scan");
        let errors_prefix = eddy_common::codec::view_errors_prefix(0);
        let errors_prefix = &errors_prefix[..errors_prefix.len() - 4];
        let id_at = |k: &[u8], at: usize| k.get(at..at + 4).map(|b| u32::from_be_bytes(b.try_into().unwrap()));
        while let Some(batch) = cursor.next_batch().await.expect("scan") {
            for (k, _) in batch {
                let owner = id_at(&k, 0).unwrap_or(0);
                if owner != 0 {
                    *std::collections::BTreeMap::entry(&mut keys, owner).or_insert(0usize) += 1;
                } else if k.starts_with(errors_prefix) {
                    if let Some(id) = id_at(&k, errors_prefix.len()) {
                        *std::collections::BTreeMap::entry(&mut row_errors, id).or_insert(0usize) += 1;
                    }
                } else if k.starts_with(eddy_common::codec::FAILURES_PREFIX) {
                    if let Some(id) = id_at(&k, eddy_common::codec::FAILURES_PREFIX.len()) {
                        failures.insert(id);
                    }
                }
            }
        }
        Census { keys, row_errors, failures, catalog }
    }

    /// Opens the store at `url` (no server may be running on it), scans it and closes it.
    pub async fn open(url: &str) -> Census {
        let options = eddy_storage::StoreOptions { url: url.to_string(), ..Default::default() };
        let store = eddy_storage::StateStore::open(&options).await.expect("store opens");
        let census = Census::of(&store).await;
        store.close().await.expect("store closes");
        census
    }

    /// The relation `name` (in `public`) and its state-table ids, if it exists.
    pub fn ids(&self, name: &str) -> Option<Vec<u32>> {
        self.catalog.table("public", name).map(|t| std::iter::once(t.id).chain(t.internal_tables.iter().copied()).collect())
    }

    /// Keys under any of `ids`: relation and operator state, failing-row counts, failures.
    pub fn keys_under(&self, ids: &[u32]) -> usize {
        ids.iter()
            .map(|id| {
                self.keys.get(id).copied().unwrap_or(0)
                    + self.row_errors.get(id).copied().unwrap_or(0)
                    + usize::from(self.failures.contains(id))
            })
            .sum()
    }

    /// State whose owner is not in the catalog: one line per orphaned id.
    pub fn orphans(&self) -> Vec<String> {
        let known: std::collections::BTreeSet<u32> =
            self.catalog.tables().flat_map(|t| std::iter::once(t.id).chain(t.internal_tables.iter().copied())).collect();
        let mut out = Vec::new();
        for (id, n) in &self.keys {
            if !known.contains(id) {
                out.push(format!("{n} keys under id {id}, which is in no catalog entry"));
            }
        }
        for (id, n) in &self.row_errors {
            if !known.contains(id) {
                out.push(format!("{n} failing-row counts of id {id}, which is in no catalog entry"));
            }
        }
        for id in &self.failures {
            if !known.contains(id) {
                out.push(format!("a failure record of id {id}, which is in no catalog entry"));
            }
        }
        out
    }
}

/// Starts `moto_server` (a real S3 API server) on a free port, or returns `None` when it is
/// not installed and this is not CI.
pub fn start_s3_server() -> Option<(Process, u16)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    match std::process::Command::new("moto_server").args(["-H", "127.0.0.1", "-p", &port.to_string()]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn() {
        Ok(child) => Some((Process(child), port)),
        Err(e) => {
            assert!(std::env::var("CI").is_err(), "moto_server is required in CI: {e}");
            eprintln!("skipping S3 test: moto_server not installed ({e}); .ci/run installs it");
            None
        }
    }
}

/// The environment an `eddy` process needs to keep its state on the S3 server on `port`.
pub fn s3_env(port: u16) -> [(&'static str, String); 5] {
    [
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_ALLOW_HTTP", "true".to_string()),
        ("AWS_ACCESS_KEY_ID", "test".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
    ]
}

pub fn http_put(port: u16, path: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    write!(s, "PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Creates bucket `name` on the S3 server on `port`, waiting for the server to come up.
pub async fn create_bucket(port: u16, name: &str) {
    let path = format!("/{name}");
    eventually(Duration::from_secs(60), || {
        let path = path.clone();
        async move { http_put(port, &path).ok().filter(|r| r.starts_with("HTTP/1.1 200")) }
    })
    .await;
}

/// A real `eddy` process, killed with SIGKILL when dropped.
pub struct Process(pub std::process::Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the `eddy` binary on `state` and a free port; returns once it printed its address.
pub fn spawn_eddy(state: &str) -> (Process, std::net::SocketAddr) {
    spawn_eddy_env(state, &[])
}

/// [`spawn_eddy`] with extra environment variables.
pub fn spawn_eddy_env(state: &str, env: &[(&str, String)]) -> (Process, std::net::SocketAddr) {
    let (p, addr, _) = spawn_eddy_http(state, env);
    (p, addr)
}

/// [`spawn_eddy_env`], also returning the address of its HTTP server (dashboard, /metrics).
pub fn spawn_eddy_http(state: &str, env: &[(&str, String)]) -> (Process, std::net::SocketAddr, std::net::SocketAddr) {
    use std::io::BufRead;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_eddy"));
    cmd.args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--state-store", state]).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("eddy binary starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut reader = std::io::BufReader::new(stdout);
    // "Eddy ... listening on <addr> ...", "Connect with: ...", "Dashboard: http://<addr>/ ...".
    let mut head = String::new();
    for _ in 0..3 {
        reader.read_line(&mut head).expect("startup lines");
    }
    std::thread::spawn(move || {
        let mut sink = String::new();
        while reader.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
            sink.clear();
        }
    });
    let addr = head
        .split_whitespace()
        .skip_while(|w| *w != "on")
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in startup lines {head:?}"));
    let http = head
        .split("Dashboard: http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no dashboard address in startup lines {head:?}"));
    (Process(child), addr, http)
}

