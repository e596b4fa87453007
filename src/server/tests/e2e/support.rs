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
