//! [`StateStore`]: SlateDB over `object_store`, committed one epoch at a time.
//!
//! Contract:
//! * [`StateStore::commit`] writes every change of an epoch plus its [`CommitRecord`] as one
//!   atomic SlateDB write batch and returns only once that batch is durable in object storage.
//!   Epochs commit in strictly increasing order; the store refuses anything else.
//! * [`StateStore::snapshot`] returns a view of exactly the last committed epoch: never a
//!   partially written one, since snapshots are taken between commits by the committer itself.
//! * After a crash, [`StateStore::open`] finds the last epoch whose batch became durable; none
//!   of a later epoch's changes are visible.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use eddy_common::{EddyError, Epoch, Result};
use parking_lot::RwLock;
use slatedb::config::Settings;
use slatedb::db_cache::foyer::{FoyerCache, FoyerCacheOptions};
use slatedb::{Db, DbSnapshot, WriteBatch};

use crate::object_store_url;
use crate::protocol::{self, CommitRecord};

/// Key of the commit record, in the system key space (table id 0).
const COMMIT_RECORD_KEY: &[u8] = b"\0\0\0\0meta/commit";

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// `file://...`, `s3://bucket/prefix` or `memory://`.
    pub url: String,
    /// Bytes of the in-memory block cache (foyer).
    pub block_cache_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self { url: "memory://".into(), block_cache_bytes: 256 << 20 }
    }
}

/// Changes of one epoch, applied in order (a later op on the same key wins).
#[derive(Debug, Default)]
pub struct EpochBatch {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl EpochBatch {
    /// Sets `key` to `value`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push((key, Some(value)));
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        self.ops.push((key, None));
    }

    /// Appends all of `other`'s ops after this batch's.
    pub fn extend(&mut self, other: EpochBatch) {
        self.ops.extend(other.ops);
    }

    /// Number of ops.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True if the batch holds no ops.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// A read view of one committed epoch.
#[derive(Clone)]
pub struct ReadSnapshot {
    /// The epoch this snapshot shows.
    pub epoch: Epoch,
    inner: Arc<DbSnapshot>,
}

impl std::fmt::Debug for ReadSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadSnapshot").field("epoch", &self.epoch).finish()
    }
}

fn storage_err(e: slatedb::Error) -> EddyError {
    EddyError::external(format!("state store: {e}"))
}

/// The exclusive upper bound of all keys starting with `prefix`, if any.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

impl ReadSnapshot {
    /// The value of `key` at this epoch.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.inner.get(key).await.map_err(storage_err)
    }

    /// True if no key starts with `prefix`.
    pub async fn is_prefix_empty(&self, prefix: &[u8]) -> Result<bool> {
        let start = Bound::Included(Bytes::copy_from_slice(prefix));
        let end = match prefix_end(prefix) {
            Some(e) => Bound::Excluded(Bytes::from(e)),
            None => Bound::Unbounded,
        };
        let mut iter = self.inner.scan((start, end)).await.map_err(storage_err)?;
        Ok(iter.next().await.map_err(storage_err)?.is_none())
    }

    /// All entries whose key starts with `prefix`, in key order.
    pub async fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        let start = Bound::Included(Bytes::copy_from_slice(prefix));
        let end = match prefix_end(prefix) {
            Some(e) => Bound::Excluded(Bytes::from(e)),
            None => Bound::Unbounded,
        };
        let mut iter = self.inner.scan((start, end)).await.map_err(storage_err)?;
        let mut out = Vec::new();
        while let Some(kv) = iter.next().await.map_err(storage_err)? {
            out.push((kv.key, kv.value));
        }
        Ok(out)
    }
}

/// Mutable part of the store, guarded by the commit lock.
struct Committed {
    epoch: Epoch,
    snapshot: ReadSnapshot,
}

/// The durable, epoch-committed key-value store all Eddy state lives in.
pub struct StateStore {
    /// The LSM.
    db: Db,
    /// Last committed epoch and a snapshot of it; replaced after every commit.
    committed: RwLock<Arc<Committed>>,
    /// Serializes commits (epoch order) without blocking readers.
    commit_lock: tokio::sync::Mutex<()>,
    /// Generation of this open (see [`CommitRecord::generation`]).
    generation: u64,
    /// Printable location.
    description: String,
}

impl StateStore {
    /// Opens (or creates) the store at `options.url` and recovers its last committed epoch.
    pub async fn open(options: &StoreOptions) -> Result<Arc<Self>> {
        let resolved = object_store_url::resolve(&options.url)?;
        let cache = FoyerCache::new_with_opts(FoyerCacheOptions { max_capacity: options.block_cache_bytes, shards: 8 });
        let settings = Settings::default();
        let db = Db::builder(resolved.path.clone(), resolved.store.clone())
            .with_settings(settings)
            .with_db_cache(Arc::new(cache), 1)
            .build()
            .await
            .map_err(|e| EddyError::external(format!("cannot open state store {}: {e}", resolved.description)))?;
        let stored = db.get(COMMIT_RECORD_KEY).await.map_err(storage_err)?;
        let recovered = protocol::recover(stored.as_deref())?;
        let snapshot = ReadSnapshot { epoch: recovered.committed, inner: db.snapshot().map_err(storage_err)? };
        Ok(Arc::new(Self {
            db,
            committed: RwLock::new(Arc::new(Committed { epoch: recovered.committed, snapshot })),
            commit_lock: tokio::sync::Mutex::new(()),
            generation: recovered.generation,
            description: resolved.description,
        }))
    }

    /// Where the store lives, for logs.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Generation of this open; unique and increasing across restarts.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The last committed epoch.
    pub fn committed_epoch(&self) -> Epoch {
        self.committed.read().epoch
    }

    /// A snapshot of the last committed epoch.
    pub fn snapshot(&self) -> ReadSnapshot {
        self.committed.read().snapshot.clone()
    }

    /// Commits `batch` as epoch `epoch`: atomically, durably, in epoch order. Returns once the
    /// batch is durable and later snapshots show it.
    pub async fn commit(&self, epoch: Epoch, batch: EpochBatch) -> Result<()> {
        let _guard = self.commit_lock.lock().await;
        let last = self.committed_epoch();
        let record: CommitRecord = protocol::decide_commit(last, epoch, self.generation)?;
        let mut wb = WriteBatch::new();
        for (k, v) in batch.ops {
            match v {
                Some(v) => wb.put(k, v),
                None => wb.delete(k),
            }
        }
        wb.put(COMMIT_RECORD_KEY, record.encode());
        self.db.write(wb).await.map_err(storage_err)?;
        // Force the WAL out now instead of waiting for the flush timer: a DML is waiting.
        self.db.flush().await.map_err(storage_err)?;
        let snapshot = ReadSnapshot { epoch, inner: self.db.snapshot().map_err(storage_err)? };
        *self.committed.write() = Arc::new(Committed { epoch, snapshot });
        Ok(())
    }

    /// Flushes and closes the LSM.
    pub async fn close(&self) -> Result<()> {
        let _guard = self.commit_lock.lock().await;
        self.db.close().await.map_err(storage_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_url(name: &str) -> (std::path::PathBuf, String) {
        let dir = std::env::temp_dir().join(format!("eddy-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let url = format!("file://{}", dir.display());
        (dir, url)
    }

    #[tokio::test]
    async fn committed_epochs_are_visible_and_survive_reopen() {
        let (dir, url) = file_url("reopen");
        let opts = StoreOptions { url, ..Default::default() };
        {
            let store = StateStore::open(&opts).await.unwrap();
            assert_eq!(store.committed_epoch(), Epoch::ZERO);
            let mut b = EpochBatch::default();
            b.put(b"\0\0\0\x05k1".to_vec(), b"v1".to_vec());
            store.commit(Epoch(1), b).await.unwrap();
            let snap = store.snapshot();
            assert_eq!(snap.epoch, Epoch(1));
            assert_eq!(snap.get(b"\0\0\0\x05k1").await.unwrap().as_deref(), Some(&b"v1"[..]));
            assert!(store.commit(Epoch(1), EpochBatch::default()).await.is_err());
            store.close().await.unwrap();
        }
        let store = StateStore::open(&opts).await.unwrap();
        assert_eq!(store.committed_epoch(), Epoch(1));
        assert_eq!(store.generation(), 2);
        let rows = store.snapshot().scan_prefix(b"\0\0\0\x05").await.unwrap();
        assert_eq!(rows.len(), 1);
        store.close().await.unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn an_old_snapshot_does_not_see_later_commits() {
        let store = StateStore::open(&StoreOptions::default()).await.unwrap();
        let mut b = EpochBatch::default();
        b.put(b"\0\0\0\x01a".to_vec(), b"1".to_vec());
        store.commit(Epoch(1), b).await.unwrap();
        let old = store.snapshot();
        let mut b = EpochBatch::default();
        b.delete(b"\0\0\0\x01a".to_vec());
        b.put(b"\0\0\0\x01b".to_vec(), b"2".to_vec());
        store.commit(Epoch(2), b).await.unwrap();
        assert_eq!(old.scan_prefix(b"\0\0\0\x01").await.unwrap().len(), 1);
        let new = store.snapshot().scan_prefix(b"\0\0\0\x01").await.unwrap();
        assert_eq!(new.len(), 1);
        assert_eq!(&new[0].0[..], b"\0\0\0\x01b");
    }

    #[test]
    fn prefix_end_carries_over_0xff() {
        assert_eq!(prefix_end(&[0, 0xff]), Some(vec![1]));
        assert_eq!(prefix_end(&[0xff]), None);
    }
}
