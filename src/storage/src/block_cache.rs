//! The block cache SlateDB reads SST blocks, indexes and filters through: foyer's in-memory
//! cache (`--block-cache-mb`), or foyer's hybrid cache, which writes blocks evicted from memory
//! to a local disk directory (`--cache-dir`, `--cache-disk-mb`) and reads them back from there
//! before going to the object store. Configured here, not rewritten: SlateDB's own
//! `FoyerCache`/`FoyerHybridCache` adapters do the caching. The disk part survives a restart
//! (foyer recovers its index from the directory), so a restarted server on S3 starts warm; an
//! empty or deleted directory only means a cold start.

use std::path::Path;
use std::sync::Arc;

use eddy_common::{EddyError, Result};
use foyer::DeviceBuilder;
use slatedb::db_cache::foyer::FoyerCache;
use slatedb::db_cache::foyer_hybrid::FoyerHybridCache;
use slatedb::db_cache::{CachedEntry, CachedKey, DbCache};

/// Shards of the in-memory part (contention of concurrent readers).
const SHARDS: usize = 8;

/// Size of the disk cache's blocks (its unit of writing and eviction).
const DISK_BLOCK_BYTES: usize = 4 << 20;

/// A built block cache, kept beside the `DbCache` SlateDB uses so its usage can be read.
pub(crate) enum BlockCache {
    Memory(foyer::Cache<CachedKey, CachedEntry>),
    Hybrid(foyer::HybridCache<CachedKey, CachedEntry>),
}

impl BlockCache {
    /// Builds the cache: `memory_bytes` in memory, plus `disk_bytes` in `dir` when given.
    pub(crate) async fn build(memory_bytes: u64, disk: Option<(&Path, u64)>) -> Result<(Self, Arc<dyn DbCache>)> {
        let memory = usize::try_from(memory_bytes).unwrap_or(usize::MAX);
        let Some((dir, disk_bytes)) = disk else {
            // As FoyerCache::new_with_opts builds it.
            let cache = foyer::CacheBuilder::new(memory).with_weighter(|_, v: &CachedEntry| v.size()).with_shards(SHARDS).build();
            let db: Arc<dyn DbCache> = Arc::new(FoyerCache::new_with_cache(cache.clone()));
            return Ok((BlockCache::Memory(cache), db));
        };
        let err = |e: String| EddyError::external(format!("cannot open the block cache directory {}: {e}", dir.display()));
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
        let capacity = usize::try_from(disk_bytes).unwrap_or(usize::MAX).max(2 * DISK_BLOCK_BYTES);
        let device = foyer::FsDeviceBuilder::new(dir).with_capacity(capacity).build().map_err(|e| err(e.to_string()))?;
        let cache = foyer::HybridCacheBuilder::new()
            .with_name("eddy-blocks")
            .memory(memory)
            .with_shards(SHARDS)
            .with_weighter(|_, v: &CachedEntry| v.size())
            .storage()
            .with_io_engine_config(foyer::PsyncIoEngineConfig::new())
            .with_engine_config(foyer::BlockEngineConfig::new(device).with_block_size(DISK_BLOCK_BYTES))
            .build()
            .await
            .map_err(|e| err(e.to_string()))?;
        let db: Arc<dyn DbCache> = Arc::new(FoyerHybridCache::new_with_cache(cache.clone()));
        Ok((BlockCache::Hybrid(cache), db))
    }

    /// Capacity of the in-memory part in bytes.
    pub(crate) fn capacity(&self) -> usize {
        match self {
            BlockCache::Memory(c) => c.capacity(),
            BlockCache::Hybrid(c) => c.memory().capacity(),
        }
    }

    /// Bytes the in-memory part holds now.
    pub(crate) fn usage(&self) -> usize {
        match self {
            BlockCache::Memory(c) => c.usage(),
            BlockCache::Hybrid(c) => c.memory().usage(),
        }
    }

    /// Stops the disk part's writers (what is in flight is written first).
    pub(crate) async fn close(&self) {
        if let BlockCache::Hybrid(c) = self {
            if let Err(e) = c.close().await {
                tracing::warn!("closing the block cache's disk part: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_disk_part_is_built_in_its_directory_and_reopens() {
        let dir = std::env::temp_dir().join(format!("eddy-block-cache-{}", std::process::id()));
        let (cache, db) = BlockCache::build(1 << 20, Some((&dir, 64 << 20))).await.unwrap();
        assert!(matches!(cache, BlockCache::Hybrid(_)));
        assert_eq!(cache.capacity(), 1 << 20);
        assert!(std::fs::read_dir(&dir).unwrap().next().is_some(), "foyer made no files in {}", dir.display());
        drop(db);
        cache.close().await;
        // The same directory opens again (a restart).
        let (again, _) = BlockCache::build(1 << 20, Some((&dir, 64 << 20))).await.unwrap();
        again.close().await;
        let (memory, _) = BlockCache::build(1 << 20, None).await.unwrap();
        assert!(matches!(memory, BlockCache::Memory(_)));
        let _ = std::fs::remove_dir_all(dir);
    }

    /// GET requests of two passes of point reads over 20K keys (~4 MB of SST blocks) with a
    /// 64 KiB memory cache, after a reopen put them in SSTs.
    async fn gets_of_two_read_passes(cache_dir: Option<std::path::PathBuf>) -> (u64, u64) {
        use crate::metered::RequestKind;
        use crate::{EpochBatch, StateStore, StoreOptions};
        let os: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let tuning = crate::StoreTuning { background_maintenance: false, ..crate::StoreTuning::default() };
        let options = StoreOptions { block_cache_bytes: 64 << 10, cache_dir: cache_dir.map(|d| (d, 256 << 20)), ..StoreOptions::default() };
        let key = |i: u32| [b"\0\0\0\x07".as_slice(), &i.to_be_bytes()].concat();
        let store = StateStore::open_with(os.clone(), "db", &options, tuning.clone()).await.unwrap();
        let mut b = EpochBatch::default();
        for i in 0..20_000u32 {
            b.put(key(i), vec![(i % 251) as u8; 200]);
        }
        store.commit(eddy_common::Epoch(1), b).await.unwrap();
        store.close().await.unwrap();
        let store = StateStore::open_with(os, "db", &options, tuning).await.unwrap();
        let mut passes = Vec::new();
        for _ in 0..2 {
            let before = store.object_store_stats().requests(RequestKind::Get);
            let snapshot = store.snapshot();
            for i in (0..20_000u32).step_by(7) {
                assert_eq!(snapshot.get(&key(i)).await.unwrap().map(|v| v.len()), Some(200));
            }
            passes.push(store.object_store_stats().requests(RequestKind::Get) - before);
        }
        store.close().await.unwrap();
        eprintln!("GETs of two read passes: {passes:?}");
        (passes[0], passes[1])
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocks_evicted_from_memory_are_read_back_from_the_disk_part() {
        let (first, second) = gets_of_two_read_passes(None).await;
        assert!(second * 2 > first, "memory only: the second pass should read the store again ({first} then {second} GETs)");
        let dir = std::env::temp_dir().join(format!("eddy-block-cache-reads-{}", std::process::id()));
        let (first, second) = gets_of_two_read_passes(Some(dir.clone())).await;
        assert!(first > 10, "the first pass reads SST blocks from the store ({first} GETs)");
        assert!(second * 4 < first, "with a disk part the second pass should mostly hit it ({first} then {second} GETs)");
        let _ = std::fs::remove_dir_all(dir);
    }
}
