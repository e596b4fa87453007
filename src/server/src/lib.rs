//! The `eddy` server: configuration, the PostgreSQL listener and the process lifecycle
//! (see `docs/architecture.md`), and the HTTP server of metrics, the JSON API and the dashboard.
//! No planning logic lives here.

pub mod auth;
pub mod bench;
pub mod config;
pub mod conn;
pub mod copy_out;
pub mod encode;
pub mod frame;
pub mod http;
pub mod limits;
pub mod panics;
pub mod respond;
pub mod run;
pub mod server;
pub mod tls;
pub mod wire;

pub use config::ServerConfig;
pub use server::{start, ServerHandle};
