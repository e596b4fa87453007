//! Starting and stopping a server. Tests start servers in-process on port 0 through [`start`].
//!
//! A server runs on its own tokio runtime, whatever runtime calls [`start`]: its worker threads
//! have [`STATEMENT_STACK_BYTES`] of stack, because parsing, planning, optimizing and evaluating
//! a statement recurse once per level of its syntax tree (up to
//! `eddy_sql::planner::parse::MAX_STATEMENT_DEPTH` levels; deeper statements are refused). The
//! stack is reserved address space: only the pages a deep statement touches are ever resident.

use std::net::SocketAddr;
use std::sync::Arc;

use eddy_common::{EddyError, Result};
use eddy_sql::Engine;
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::ServerConfig;
use crate::limits::Admission;
use crate::wire::Factory;

/// Stack size of the threads statements run on.
pub const STATEMENT_STACK_BYTES: usize = 256 << 20;

/// A running server.
pub struct ServerHandle {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The address of its HTTP server, if it runs one.
    pub http_addr: Option<SocketAddr>,
    /// The database.
    pub engine: Arc<Engine>,
    /// Tells the accept loop to stop.
    stop: watch::Sender<bool>,
    /// The accept loop.
    accept: JoinHandle<()>,
    /// The runtime connections, statements and the dataflow run on.
    runtime: ServerRuntime,
}

/// A runtime that, when dropped (also on an error path inside an async caller), shuts down
/// in the background instead of blocking.
struct ServerRuntime(Option<Runtime>);

impl ServerRuntime {
    fn get(&self) -> Result<&Runtime> {
        self.0.as_ref().ok_or_else(|| EddyError::internal("the server runtime is gone"))
    }
}

impl Drop for ServerRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl ServerHandle {
    /// Stops accepting connections, commits what is pending and closes the store.
    pub async fn shutdown(mut self) -> Result<()> {
        // Fails only when the accept loop already ended and dropped its receiver.
        let _ = self.stop.send(true);
        if let Err(e) = (&mut self.accept).await {
            tracing::error!("the accept loop ended abnormally: {e}");
        }
        let engine = self.engine.clone();
        let closed = self.runtime.get()?.spawn(async move { engine.shutdown().await });
        closed.await.map_err(|e| EddyError::internal(e.to_string()))?
    }
}

/// The server's runtime: one worker per core, each with a [`STATEMENT_STACK_BYTES`] stack.
fn server_runtime() -> Result<ServerRuntime> {
    let workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).max(2);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("eddy-worker")
        .thread_stack_size(STATEMENT_STACK_BYTES)
        .enable_all()
        .build()
        .map(|rt| ServerRuntime(Some(rt)))
        .map_err(|e| EddyError::external(format!("cannot start the server runtime: {e}")))
}

/// Opens the state store and starts listening.
pub async fn start(config: ServerConfig) -> Result<ServerHandle> {
    crate::panics::install_hook();
    let runtime = server_runtime()?;
    let tls = crate::tls::acceptor(&config)?;
    let credentials = crate::auth::Credentials::from_config(&config)?;
    let engine_config = config.engine_config();
    let listen = config.listen.clone();
    let (engine, listener) = runtime
        .get()?
        .spawn(async move {
            let engine = eddy_sql::open_database(engine_config).await?;
            let listener = TcpListener::bind(&listen).await.map_err(|e| EddyError::external(format!("cannot listen on {listen}: {e}")))?;
            Ok::<_, EddyError>((engine, listener))
        })
        .await
        .map_err(|e| EddyError::internal(format!("server startup panicked: {e}")))??;
    if let Some(c) = &credentials {
        c.set_engine(engine.clone());
    }
    let factory = Arc::new(Factory::new(engine.clone(), credentials));
    let addr = listener.local_addr().map_err(|e| EddyError::external(e.to_string()))?;
    let admission = Admission::new(config.limits.clone());
    let (stop, mut stopped) = watch::channel(false);
    let http_addr = match &config.http {
        Some(http) => {
            let state = Arc::new(crate::http::HttpState {
                engine: engine.clone(),
                admission: admission.clone(),
                memory_budget: config.memory_bytes,
                started: std::time::Instant::now(),
            });
            let (http, stopped) = (http.clone(), stopped.clone());
            match runtime.get()?.spawn(async move { crate::http::start(&http, state, stopped).await }).await {
                Ok(Ok(a)) => Some(a),
                Ok(Err(e)) if config.http_is_default => {
                    tracing::warn!("{e}; the dashboard and metrics are not served (choose another address with --http)");
                    None
                }
                Ok(Err(e)) => return Err(e),
                Err(e) => return Err(EddyError::internal(format!("HTTP startup panicked: {e}"))),
            }
        }
        None => None,
    };
    let accept = runtime.get()?.spawn(async move {
        loop {
            tokio::select! {
                _ = stopped.changed() => break,
                conn = listener.accept() => match conn {
                    Ok((socket, _)) => {
                        if let Err(e) = socket.set_nodelay(true) {
                            tracing::warn!("cannot set TCP_NODELAY on a client connection: {e}");
                        }
                        tokio::spawn(crate::conn::serve(socket, tls.clone(), factory.clone(), admission.clone()));
                    }
                    Err(e) => tracing::warn!("accept failed: {e}"),
                }
            }
        }
    });
    Ok(ServerHandle { addr, http_addr, engine, stop, accept, runtime })
}
