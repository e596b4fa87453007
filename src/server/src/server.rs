//! Starting and stopping a server. Tests start servers in-process on port 0 through [`start`].

use std::net::SocketAddr;
use std::sync::Arc;

use eddy_common::{EddyError, Result};
use eddy_sql::Engine;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::ServerConfig;
use crate::wire::Factory;

/// A running server.
pub struct ServerHandle {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The database.
    pub engine: Arc<Engine>,
    /// Tells the accept loop to stop.
    stop: watch::Sender<bool>,
    /// The accept loop.
    accept: JoinHandle<()>,
}

impl ServerHandle {
    /// Stops accepting connections, commits what is pending and closes the store.
    pub async fn shutdown(self) -> Result<()> {
        // Fails only when the accept loop already ended and dropped its receiver.
        let _ = self.stop.send(true);
        if let Err(e) = self.accept.await {
            tracing::error!("the accept loop ended abnormally: {e}");
        }
        self.engine.shutdown().await
    }
}

/// Opens the state store and starts listening.
pub async fn start(config: ServerConfig) -> Result<ServerHandle> {
    let engine = eddy_sql::open_database(config.engine_config()).await?;
    let listener = TcpListener::bind(&config.listen)
        .await
        .map_err(|e| EddyError::external(format!("cannot listen on {}: {e}", config.listen)))?;
    let addr = listener.local_addr().map_err(|e| EddyError::external(e.to_string()))?;
    let factory = Arc::new(Factory::new(engine.clone(), config.password.clone()));
    let (stop, mut stopped) = watch::channel(false);
    let accept = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stopped.changed() => break,
                conn = listener.accept() => match conn {
                    Ok((socket, _)) => {
                        if let Err(e) = socket.set_nodelay(true) {
                            tracing::warn!("cannot set TCP_NODELAY on a client connection: {e}");
                        }
                        let factory = factory.clone();
                        tokio::spawn(async move {
                            if let Err(e) = pgwire::tokio::process_socket(socket, None, factory).await {
                                tracing::debug!("connection ended: {e}");
                            }
                        });
                    }
                    Err(e) => tracing::warn!("accept failed: {e}"),
                }
            }
        }
    });
    Ok(ServerHandle { addr, engine, stop, accept })
}
