//! The HTTP server (`--http`, loopback by default): Prometheus metrics at `GET /metrics`, the
//! JSON API under `/api/` ([`api`]) and the dashboard's files (`dashboard/`, embedded in the
//! binary at build time, so the start command serves the UI with no build step of its own).
//!
//! It shares nothing with the SQL path but read-only snapshots of counters and the catalog:
//! a request never takes a lock the dataflow or a session waits on, beyond copying a map of
//! `Arc`s. A slow or hostile client is bounded: at most [`MAX_CONNECTIONS`] at once (others
//! are closed at accept), request heads must arrive within [`HEAD_TIMEOUT`] and fit in
//! [`MAX_HEAD_BYTES`], bodies are never read, and a connection lives at most
//! [`CONNECTION_LIFETIME`].

pub mod api;
pub mod prometheus;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use eddy_common::{EddyError, Result};
use eddy_sql::Engine;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::limits::Admission;

/// Connections served at once; more are closed as they arrive.
pub const MAX_CONNECTIONS: usize = 64;
/// Time a client has to send a request's head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head accepted.
pub const MAX_HEAD_BYTES: usize = 16 << 10;
/// Longest a connection stays open (a browser reconnects).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);

/// What the handlers read.
pub struct HttpState {
    pub engine: Arc<Engine>,
    pub admission: Arc<Admission>,
    /// The state layers' memory budget (`--memory-mb`).
    pub memory_budget: u64,
    pub started: Instant,
}

/// The dashboard's files: (path, content type, body).
const ASSETS: &[(&str, &str, &str)] = &[
    ("/", "text/html; charset=utf-8", include_str!("../../../dashboard/index.html")),
    ("/index.html", "text/html; charset=utf-8", include_str!("../../../dashboard/index.html")),
    ("/app.js", "text/javascript; charset=utf-8", include_str!("../../../dashboard/app.js")),
    ("/style.css", "text/css; charset=utf-8", include_str!("../../../dashboard/style.css")),
];

/// Binds `addr` and serves until `stop` turns true. Returns the bound address.
pub async fn start(addr: &str, state: Arc<HttpState>, mut stop: watch::Receiver<bool>) -> Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await.map_err(|e| EddyError::external(format!("cannot listen for HTTP on {addr}: {e}")))?;
    let bound = listener.local_addr().map_err(|e| EddyError::external(e.to_string()))?;
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                conn = listener.accept() => match conn {
                    Ok((socket, _)) => {
                        // Over the limit the connection is dropped at once: closed, unanswered.
                        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
                        let state = state.clone();
                        tokio::spawn(async move {
                            let service = hyper::service::service_fn(move |req| {
                                let state = state.clone();
                                async move { Ok::<_, Infallible>(handle(&state, req).await) }
                            });
                            let conn = hyper::server::conn::http1::Builder::new()
                                .timer(TokioTimer::new())
                                .header_read_timeout(HEAD_TIMEOUT)
                                .max_buf_size(MAX_HEAD_BYTES)
                                .serve_connection(TokioIo::new(socket), service);
                            if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
                                tracing::debug!("HTTP connection ended: {e}");
                            }
                            drop(slot);
                        });
                    }
                    Err(e) => tracing::warn!("HTTP accept failed: {e}"),
                }
            }
        }
    });
    Ok(bound)
}

/// One response.
pub struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Bytes,
}

impl Reply {
    pub fn json(status: StatusCode, v: &serde_json::Value) -> Reply {
        Reply { status, content_type: "application/json", body: Bytes::from(v.to_string()) }
    }

    pub fn error(status: StatusCode, message: &str, path: &str) -> Reply {
        Reply::json(status, &serde_json::json!({ "error": message, "path": path }))
    }
}

async fn handle(state: &HttpState, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let reply = if req.method() != Method::GET && req.method() != Method::HEAD {
        Reply::error(StatusCode::METHOD_NOT_ALLOWED, "only GET is served", &path)
    } else {
        route(state, &path).await
    };
    let mut resp = Response::new(Full::new(if req.method() == Method::HEAD { Bytes::new() } else { reply.body }));
    *resp.status_mut() = reply.status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    resp.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The reply to `GET path`.
pub async fn route(state: &HttpState, path: &str) -> Reply {
    if path == "/metrics" {
        return Reply {
            status: StatusCode::OK,
            content_type: "application/openmetrics-text; version=1.0.0; charset=utf-8",
            body: Bytes::from(prometheus::render(state)),
        };
    }
    if let Some(rest) = path.strip_prefix("/api/") {
        return api::route(state, rest).await.unwrap_or_else(|| Reply::error(StatusCode::NOT_FOUND, "no such API route", path));
    }
    match ASSETS.iter().find(|(p, _, _)| *p == path) {
        Some((_, ty, body)) => Reply { status: StatusCode::OK, content_type: ty, body: Bytes::from_static(body.as_bytes()) },
        None => Reply::error(StatusCode::NOT_FOUND, "not found", path),
    }
}
