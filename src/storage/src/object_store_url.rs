//! Parsing of the `--state-store` URL into an `object_store` and a path inside it.
//!
//! * `file:///abs/path`, `file://./rel/path` or a bare path: a local directory (created if missing).
//! * `memory://`: an in-process store that vanishes on exit (tests, `eddy playground`).
//! * `s3://bucket/prefix`: S3 or any S3-compatible server; credentials, region and endpoint come
//!   from the standard `AWS_*` environment variables (`AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, ...).

use std::path::PathBuf;
use std::sync::Arc;

use eddy_common::error::sqlstate;
use eddy_common::{EddyError, Result};
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::ObjectStore;

/// Where state lives: the store and the path prefix SlateDB uses inside it.
pub struct ResolvedStore {
    /// The object store.
    pub store: Arc<dyn ObjectStore>,
    /// Path of the database inside the store.
    pub path: String,
    /// A printable description for logs.
    pub description: String,
}

/// Resolves a state-store URL (see the module docs for the accepted forms).
pub fn resolve(url: &str) -> Result<ResolvedStore> {
    let bad = |m: String| EddyError::user(sqlstate::INVALID_PARAMETER_VALUE, m);
    if is_memory(url) {
        return Ok(ResolvedStore { store: Arc::new(InMemory::new()), path: "eddy".into(), description: "memory://".into() });
    }
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad(format!("state store URL {url:?} names no bucket")));
        }
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
            builder = builder.with_region("us-east-1");
        }
        if std::env::var("AWS_ALLOW_HTTP").map(|v| v == "true" || v == "1").unwrap_or(false) {
            builder = builder.with_allow_http(true);
        }
        let store = builder.build().map_err(|e| bad(format!("cannot use S3 state store {url:?}: {e}")))?;
        let path = if prefix.trim_matches('/').is_empty() { "eddy".to_string() } else { prefix.trim_matches('/').to_string() };
        return Ok(ResolvedStore { store: Arc::new(store), path, description: url.to_string() });
    }
    let dir = local_dir(url)?.ok_or_else(|| bad(format!("unsupported state store URL {url:?}")))?;
    // fsync files and directories: an acknowledged commit must survive power loss, not only
    // a killed process.
    let store = LocalFileSystem::new_with_prefix(&dir)
        .map_err(|e| EddyError::external(format!("cannot open state directory {}: {e}", dir.display())))?
        .with_fsync(true);
    Ok(ResolvedStore { store: Arc::new(store), path: "eddy".into(), description: format!("file://{}", dir.display()) })
}

fn is_memory(url: &str) -> bool {
    matches!(url, "memory://" | "memory:" | "memory")
}

/// The local directory a `file://` URL or a bare path names, created if missing, canonical;
/// `None` for an in-memory or S3 store.
fn local_dir(url: &str) -> Result<Option<PathBuf>> {
    let bad = |m: String| EddyError::user(sqlstate::INVALID_PARAMETER_VALUE, m);
    if is_memory(url) || url.starts_with("s3://") {
        return Ok(None);
    }
    let local = if let Some(rest) = url.strip_prefix("file://") {
        rest
    } else if url.contains("://") {
        return Err(bad(format!("unsupported state store URL {url:?}: use file://, s3:// or memory://")));
    } else {
        url
    };
    if local.is_empty() {
        return Err(bad(format!("state store URL {url:?} names no directory")));
    }
    let dir = PathBuf::from(local);
    std::fs::create_dir_all(&dir)
        .map_err(|e| EddyError::external(format!("cannot create state directory {}: {e}", dir.display())))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| EddyError::external(format!("cannot open state directory {}: {e}", dir.display())))?;
    Ok(Some(dir))
}

/// Name of the lock file a server holds in a local state directory.
pub const LOCK_FILE: &str = "eddy.lock";

/// For a local state directory (`file://` or a bare path), takes an exclusive lock on its
/// `eddy.lock` for as long as the returned file stays open (the kernel drops it when the
/// process ends, `kill -9` included), so a second server on the same directory refuses to
/// start instead of fencing the first. Other stores (S3, memory) return `None`: on S3 a second
/// server fences the first through SlateDB, and the first stops (`StateStore::fenced`).
pub fn lock_local_store(url: &str) -> Result<Option<std::fs::File>> {
    let Some(dir) = local_dir(url)? else { return Ok(None) };
    let path = dir.join(LOCK_FILE);
    let io = |e: std::io::Error| EddyError::external(format!("cannot lock state directory {}: {e}", dir.display()));
    let mut file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
    match file.try_lock() {
        Ok(()) => {
            use std::io::{Seek, Write};
            file.set_len(0).map_err(io)?;
            file.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
            writeln!(file, "{}", std::process::id()).map_err(io)?;
            Ok(Some(file))
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            let holder = holder.trim();
            let who = if holder.is_empty() { "another eddy process".to_string() } else { format!("another eddy process (pid {holder})") };
            Err(EddyError::user(
                sqlstate::OBJECT_IN_USE,
                format!("state directory {} is in use by {who}; stop it first, or give this server its own --state-store", dir.display()),
            ))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_schemes_are_refused_with_a_clear_message() {
        let e = resolve("gopher://x").err().unwrap();
        assert!(e.message.contains("unsupported state store URL"));
    }

    #[test]
    fn relative_file_urls_resolve_to_a_created_directory() {
        let dir = std::env::temp_dir().join(format!("eddy-url-test-{}", std::process::id()));
        let url = format!("file://{}", dir.display());
        let r = resolve(&url).unwrap();
        assert!(dir.is_dir());
        assert!(r.description.starts_with("file://"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_locked_state_directory_refuses_a_second_lock_until_released() {
        let dir = std::env::temp_dir().join(format!("eddy-lock-test-{}", std::process::id()));
        let url = format!("file://{}", dir.display());
        let first = lock_local_store(&url).unwrap().expect("a local directory is locked");
        let e = lock_local_store(&url).expect_err("the second lock is refused");
        assert_eq!(e.sqlstate, sqlstate::OBJECT_IN_USE);
        assert!(e.message.contains(&format!("pid {}", std::process::id())), "{}", e.message);
        drop(first);
        assert!(lock_local_store(&url).unwrap().is_some());
        assert!(lock_local_store("memory://").unwrap().is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}
