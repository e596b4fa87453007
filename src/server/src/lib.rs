//! The `eddy` server: configuration, the PostgreSQL listener and the process lifecycle
//! (see `docs/architecture.md`). No planning logic lives here.

pub mod config;
pub mod encode;
pub mod server;
pub mod wire;

pub use config::ServerConfig;
pub use server::{start, ServerHandle};
