//! Server configuration: defaults, then an optional TOML file (`--config`), then `EDDY_*`
//! environment variables, then command-line flags (each later source wins).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};
use eddy_sql::EngineConfig;
use eddy_storage::{ObjectStore, StoreOptions, StoreTuning};
use serde::Deserialize;

use crate::limits::{Limits, MAX_MESSAGE_CEILING};

/// Everything a server needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `host:port` for the PostgreSQL protocol.
    pub listen: String,
    /// `host:port` for HTTP (metrics, JSON API, dashboard); `None`: no HTTP server.
    pub http: Option<String>,
    /// `http` is the default rather than asked for: if its port is taken the server starts
    /// without it (with a warning) instead of failing.
    pub http_is_default: bool,
    /// State store URL: `file://...`, `s3://bucket/prefix` or `memory://`.
    pub state_store: String,
    /// Password required from clients (SCRAM-SHA-256); `None` = trust.
    pub password: Option<String>,
    /// Time between barriers (epoch commits) when no DML asks for one.
    pub barrier_interval: Duration,
    /// Block cache size in bytes.
    pub block_cache_bytes: u64,
    /// The block cache's disk part (`--cache-dir`), if any.
    pub cache_dir: Option<PathBuf>,
    /// Its size in bytes (`--cache-disk-mb`).
    pub cache_disk_bytes: u64,
    /// The memory budget of the state layers (`--memory-mb`): the operators' state caches get
    /// half, the block cache a sixteenth unless set on its own, uncommitted writes and SlateDB's
    /// write buffers a sixty-fourth each (see [`ServerConfig::engine_config`]; benches/README.md,
    /// "A 5M-row COPY in 300 MiB").
    pub memory_bytes: u64,
    /// Register test-only functions such as `eddy_test_panic()` (never set by the CLI).
    pub test_functions: bool,
    /// Tests: run on this object store instead of `state_store`'s (never set by the CLI).
    pub object_store: Option<Arc<dyn ObjectStore>>,
    /// State store failure knobs (tests shorten them; the defaults suit production).
    pub store_tuning: StoreTuning,
    /// Message, connection and query-memory limits.
    pub limits: Limits,
    /// PEM certificate chain for TLS; with `tls_key`, clients may use `sslmode=require`.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for TLS.
    pub tls_key: Option<PathBuf>,
    /// `user:password` lines; with it (or `password`) clients authenticate with SCRAM-SHA-256.
    pub password_file: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:4566".into(),
            http: None,
            http_is_default: false,
            state_store: "file://./eddy-data".into(),
            password: None,
            barrier_interval: Duration::from_millis(250),
            block_cache_bytes: 64 << 20,
            cache_dir: None,
            cache_disk_bytes: 1 << 30,
            memory_bytes: 1 << 30,
            test_functions: false,
            object_store: None,
            store_tuning: StoreTuning::default(),
            limits: Limits::default(),
            tls_cert: None,
            tls_key: None,
            password_file: None,
        }
    }
}

/// Keys accepted in the TOML file and as `EDDY_<KEY>` variables.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigOverrides {
    pub listen: Option<String>,
    pub http: Option<String>,
    pub state_store: Option<String>,
    pub password: Option<String>,
    pub barrier_interval_ms: Option<u64>,
    pub block_cache_mb: Option<u64>,
    pub cache_dir: Option<PathBuf>,
    pub cache_disk_mb: Option<u64>,
    pub memory_mb: Option<u64>,
    pub max_message_bytes: Option<u64>,
    pub max_connections: Option<u64>,
    pub query_memory_mb: Option<u64>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub password_file: Option<PathBuf>,
}

impl ConfigOverrides {
    /// Reads a TOML file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot read config {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "invalid config {}: {e}", path.display()))
    }

    /// Reads `EDDY_LISTEN`, `EDDY_HTTP`, `EDDY_STATE_STORE`, `EDDY_PASSWORD`, `EDDY_BARRIER_INTERVAL_MS`,
    /// `EDDY_BLOCK_CACHE_MB`, `EDDY_CACHE_DIR`, `EDDY_CACHE_DISK_MB`, `EDDY_MEMORY_MB`, `EDDY_MAX_MESSAGE_BYTES`, `EDDY_MAX_CONNECTIONS`,
    /// `EDDY_QUERY_MEMORY_MB`, `EDDY_TLS_CERT`, `EDDY_TLS_KEY`, `EDDY_PASSWORD_FILE`.
    pub fn from_env() -> Result<Self> {
        let get = |k: &str| -> Result<Option<String>> {
            match std::env::var(k) {
                Ok(v) => Ok(Some(v).filter(|v| !v.is_empty())),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(e) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "{k}: {e}")),
            }
        };
        let num = |k: &str| -> Result<Option<u64>> {
            get(k)?.map(|v| v.parse().map_err(|_| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "{k}={v} is not a number"))).transpose()
        };
        Ok(Self {
            listen: get("EDDY_LISTEN")?,
            http: get("EDDY_HTTP")?,
            state_store: get("EDDY_STATE_STORE")?,
            password: get("EDDY_PASSWORD")?,
            barrier_interval_ms: num("EDDY_BARRIER_INTERVAL_MS")?,
            block_cache_mb: num("EDDY_BLOCK_CACHE_MB")?,
            cache_dir: get("EDDY_CACHE_DIR")?.map(PathBuf::from),
            cache_disk_mb: num("EDDY_CACHE_DISK_MB")?,
            memory_mb: num("EDDY_MEMORY_MB")?,
            max_message_bytes: num("EDDY_MAX_MESSAGE_BYTES")?,
            max_connections: num("EDDY_MAX_CONNECTIONS")?,
            query_memory_mb: num("EDDY_QUERY_MEMORY_MB")?,
            tls_cert: get("EDDY_TLS_CERT")?.map(PathBuf::from),
            tls_key: get("EDDY_TLS_KEY")?.map(PathBuf::from),
            password_file: get("EDDY_PASSWORD_FILE")?.map(PathBuf::from),
        })
    }

    /// Applies the values that are set.
    pub fn apply(self, c: &mut ServerConfig) {
        if let Some(v) = self.listen {
            c.listen = v;
        }
        if let Some(v) = self.http {
            c.http = (!matches!(v.as_str(), "off" | "none" | "false")).then_some(v);
            c.http_is_default = false;
        }
        if let Some(v) = self.state_store {
            c.state_store = v;
        }
        if let Some(v) = self.password {
            c.password = Some(v);
        }
        if let Some(v) = self.barrier_interval_ms {
            c.barrier_interval = Duration::from_millis(v.max(1));
        }
        if let Some(v) = self.memory_mb {
            c.memory_bytes = v.max(16) << 20;
            if self.block_cache_mb.is_none() {
                c.block_cache_bytes = c.memory_bytes / 16;
            }
        }
        if let Some(v) = self.block_cache_mb {
            c.block_cache_bytes = v << 20;
        }
        if let Some(dir) = self.cache_dir {
            c.cache_dir = Some(dir);
        }
        if let Some(mb) = self.cache_disk_mb {
            c.cache_disk_bytes = mb.max(16) << 20;
        }
        if let Some(v) = self.max_message_bytes {
            // At least a page, at most PostgreSQL's own ceiling.
            c.limits.max_message_bytes = (v as usize).clamp(4096, MAX_MESSAGE_CEILING);
        }
        if let Some(v) = self.max_connections {
            c.limits.max_connections = (v as usize).max(1);
        }
        if let Some(v) = self.query_memory_mb {
            c.limits.query_memory_bytes = (v as usize).max(1) << 20;
        }
        if let Some(v) = self.tls_cert {
            c.tls_cert = Some(v);
        }
        if let Some(v) = self.tls_key {
            c.tls_key = Some(v);
        }
        if let Some(v) = self.password_file {
            c.password_file = Some(v);
        }
    }
}

impl ServerConfig {
    /// The engine part of the configuration.
    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            store: StoreOptions {
                url: self.state_store.clone(),
                block_cache_bytes: self.block_cache_bytes,
                cache_dir: self.cache_dir.clone().map(|d| (d, self.cache_disk_bytes)),
                object_store: self.object_store.clone(),
                tuning: self.store_tuning.clone(),
                operator_cache_bytes: self.memory_bytes / 2,
                write_buffer_bytes: (self.memory_bytes / 64).max(8 << 20),
                lsm_buffer_bytes: (self.memory_bytes / 64).clamp(4 << 20, 64 << 20),
            },
            barrier_interval: self.barrier_interval,
            test_functions: self.test_functions,
            query_memory_bytes: self.limits.query_memory_bytes,
        }
    }
}
