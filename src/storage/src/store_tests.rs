//! Tests of `StateStore` with spill runs, folding and garbage collection (failure tests live in
//! `fault_tests.rs`).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use eddy_common::{Epoch, Op, StreamChunk};

use crate::runs;
use crate::{EpochBatch, StateStore, StateTable, StoreOptions, StoreTuning};

/// Tuning for deterministic tests: no background task.
pub(crate) fn quiet() -> StoreTuning {
    StoreTuning { background_maintenance: false, ..StoreTuning::default() }
}

/// A fresh in-memory store without background work.
pub(crate) async fn memory_store() -> Arc<StateStore> {
    let os: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    StateStore::open_with(os, "db", &StoreOptions::default(), quiet()).await.unwrap()
}

/// A key in user table 5.
pub(crate) fn key(k: &str) -> Vec<u8> {
    let mut v = b"\0\0\0\x05".to_vec();
    v.extend_from_slice(k.as_bytes());
    v
}

/// All entries of table 5 as strings.
async fn table(snap: &crate::ReadSnapshot) -> BTreeMap<String, String> {
    snap.scan_prefix(b"\0\0\0\x05")
        .await
        .unwrap()
        .into_iter()
        .map(|(k, v)| (String::from_utf8_lossy(&k[4..]).into_owned(), String::from_utf8_lossy(&v).into_owned()))
        .collect()
}

/// Polls `cond` every few milliseconds until it holds or `limit` passes.
pub(crate) async fn eventually<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond().await
}

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

#[tokio::test]
async fn a_generation_is_never_reused_even_without_a_commit() {
    let (dir, url) = file_url("generation");
    let opts = StoreOptions { url, ..Default::default() };
    let first = StateStore::open(&opts).await.unwrap();
    assert_eq!(first.generation(), 1);
    first.close().await.unwrap();
    let second = StateStore::open(&opts).await.unwrap();
    assert_eq!(second.generation(), 2);
    second.close().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn spilled_ops_are_invisible_until_their_epoch_commits() {
    let store = memory_store().await;
    let mut b = EpochBatch::default();
    b.put(key("a"), b"1".to_vec());
    b.delete(key("gone"));
    b.spill(&store).await.unwrap();
    assert_eq!(b.in_memory_len(), 0);
    assert_eq!(b.runs().len(), 1);
    assert_eq!(b.len(), 2);
    let run = b.runs()[0];
    assert_eq!(store.run_get(run, &key("a")).await.unwrap(), Some(Some(Bytes::from_static(b"1"))));
    assert_eq!(store.run_get(run, &key("gone")).await.unwrap(), Some(None));
    assert_eq!(store.run_get(run, &key("other")).await.unwrap(), None);
    assert_eq!(store.snapshot().get(&key("a")).await.unwrap(), None);
    assert!(store.snapshot().is_prefix_empty(b"\0\0\0\x05").await.unwrap());
    store.commit(Epoch(1), b).await.unwrap();
    let snap = store.snapshot();
    assert_eq!(snap.live_runs(), &[run]);
    assert_eq!(snap.get(&key("a")).await.unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(table(&snap).await.len(), 1);
}

#[tokio::test]
async fn within_a_batch_later_writes_win_over_spilled_ones() {
    let store = memory_store().await;
    let mut b = EpochBatch::default();
    b.put(key("a"), b"run1".to_vec());
    b.put(key("b"), b"run1".to_vec());
    b.put(key("c"), b"run1".to_vec());
    b.spill(&store).await.unwrap();
    b.put(key("a"), b"run2".to_vec());
    b.delete(key("c"));
    b.spill(&store).await.unwrap();
    b.put(key("a"), b"tail".to_vec());
    assert_eq!(b.lookup(&store, &key("a")).await.unwrap(), Some(Some(Bytes::from_static(b"tail"))));
    assert_eq!(b.lookup(&store, &key("c")).await.unwrap(), Some(None));
    assert_eq!(b.lookup(&store, &key("b")).await.unwrap(), Some(Some(Bytes::from_static(b"run1"))));
    assert_eq!(b.lookup(&store, &key("z")).await.unwrap(), None);
    store.commit(Epoch(1), b).await.unwrap();
    let snap = store.snapshot();
    let expected: BTreeMap<String, String> = [("a", "tail"), ("b", "run1")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(table(&snap).await, expected);
    assert_eq!(snap.get(&key("c")).await.unwrap(), None);
}

#[tokio::test]
async fn a_later_epoch_hides_keys_of_older_live_runs() {
    let store = memory_store().await;
    let mut b = EpochBatch::default();
    b.put(key("a"), b"1".to_vec());
    b.put(key("b"), b"1".to_vec());
    b.spill(&store).await.unwrap();
    store.commit(Epoch(1), b).await.unwrap();
    let mut b = EpochBatch::default();
    b.put(key("a"), b"2".to_vec());
    b.delete(key("b"));
    store.commit(Epoch(2), b).await.unwrap();
    let snap = store.snapshot();
    assert_eq!(snap.get(&key("a")).await.unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(snap.get(&key("b")).await.unwrap(), None);
    assert_eq!(table(&snap).await.len(), 1);
    // The invariant: the live run no longer holds the keys the tail wrote.
    let run = snap.live_runs()[0];
    assert_eq!(store.run_get(run, &key("a")).await.unwrap(), None);
}

/// A key in user table `t`.
fn key_in(t: u8, k: &str) -> Vec<u8> {
    let mut v = vec![0, 0, 0, t];
    v.extend_from_slice(k.as_bytes());
    v
}

#[tokio::test]
async fn runs_are_skipped_by_key_bounds_and_still_shadowed_inside_them() {
    let (dir, _) = file_url("bounds");
    std::fs::create_dir_all(&dir).unwrap();
    let open = || async {
        let os: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::local::LocalFileSystem::new_with_prefix(&dir).unwrap());
        StateStore::open_with(os, "db", &StoreOptions::default(), quiet()).await.unwrap()
    };
    let store = open().await;
    // Epoch 1: table 6 bulk-loads b..=d into one run, table 7 into another.
    let mut b = EpochBatch::default();
    for k in ["b", "c", "d"] {
        b.put(key_in(6, k), b"run".to_vec());
    }
    b.spill(&store).await.unwrap();
    let mut other = EpochBatch::default();
    other.put(key_in(7, "x"), b"run".to_vec());
    other.spill(&store).await.unwrap();
    b.extend(other);
    store.commit(Epoch(1), b).await.unwrap();
    let (r6, r7) = (store.snapshot().live_runs()[0], store.snapshot().live_runs()[1]);
    // Epoch 2: tail writes inside run 6's bounds (c), outside every run (a, table 8), and
    // inside run 7's (x).
    let mut b = EpochBatch::default();
    b.put(key_in(6, "c"), b"tail".to_vec());
    b.put(key_in(6, "a"), b"tail".to_vec());
    b.put(key_in(8, "q"), b"tail".to_vec());
    b.delete(key_in(7, "x"));
    store.commit(Epoch(2), b).await.unwrap();
    let check = |snap: crate::ReadSnapshot| async move {
        let get = |t, k: &'static str| {
            let snap = snap.clone();
            async move { snap.get(&key_in(t, k)).await.unwrap().map(|v| String::from_utf8_lossy(&v).into_owned()) }
        };
        assert_eq!(get(6, "a").await.as_deref(), Some("tail"));
        assert_eq!(get(6, "b").await.as_deref(), Some("run"));
        assert_eq!(get(6, "c").await.as_deref(), Some("tail"));
        assert_eq!(get(7, "x").await, None);
        assert_eq!(get(8, "q").await.as_deref(), Some("tail"));
        let all: Vec<_> = snap.scan_prefix(&[0, 0, 0]).await.unwrap().into_iter().filter(|(k, _)| k[3] != 0).map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        let want = vec![
            (key_in(6, "a"), b"tail".to_vec()),
            (key_in(6, "b"), b"run".to_vec()),
            (key_in(6, "c"), b"tail".to_vec()),
            (key_in(6, "d"), b"run".to_vec()),
            (key_in(8, "q"), b"tail".to_vec()),
        ];
        assert_eq!(all, want);
    };
    check(store.snapshot()).await;
    // Invariant 1 inside the bounds: the runs no longer hold the keys the tail rewrote.
    assert_eq!(store.run_get(r6, &key_in(6, "c")).await.unwrap(), None);
    assert_eq!(store.run_get(r7, &key_in(7, "x")).await.unwrap(), None);
    // A reopened store knows no bounds (it probes every run) and reads the same.
    store.close().await.unwrap();
    drop(store);
    let store = open().await;
    assert_eq!(store.snapshot().live_runs(), &[r6, r7]);
    check(store.snapshot()).await;
    // A commit with unknown bounds shadows in every run, as before.
    let mut b = EpochBatch::default();
    b.put(key_in(6, "d"), b"late".to_vec());
    store.commit(Epoch(3), b).await.unwrap();
    assert_eq!(store.snapshot().get(&key_in(6, "d")).await.unwrap().as_deref(), Some(&b"late"[..]));
    assert_eq!(store.run_get(r6, &key_in(6, "d")).await.unwrap(), None);
    store.close().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_large_tail_commits_as_the_newest_run_and_a_small_one_onto_base_keys() {
    let os: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let opts = StoreOptions { lsm_buffer_bytes: 256 << 10, ..StoreOptions::default() };
    let store = StateStore::open_with(os, "db", &opts, quiet()).await.unwrap();
    // Epoch 1: an older live run holds k0000..k0999 = "old".
    let mut b = EpochBatch::default();
    for i in 0..1000 {
        b.put(key(&format!("k{i:04}")), b"old".to_vec());
    }
    b.spill(&store).await.unwrap();
    store.commit(Epoch(1), b).await.unwrap();
    let older = store.snapshot().live_runs().to_vec();
    // Epoch 2: a tail of 5,000 ops (~300 KB, past a quarter of the 256 KiB LSM buffer)
    // rewrites half the old keys, deletes some, and adds new ones.
    let mut b = EpochBatch::default();
    for i in (0..1000).step_by(2) {
        b.put(key(&format!("k{i:04}")), b"new".to_vec());
    }
    for i in (1..1000).step_by(10) {
        b.delete(key(&format!("k{i:04}")));
    }
    for i in 1000..5400 {
        b.put(key(&format!("k{i:04}")), b"new".to_vec());
    }
    assert_eq!(b.runs().len(), 0);
    store.commit(Epoch(2), b).await.unwrap();
    let snap = store.snapshot();
    assert_eq!(snap.live_runs().len(), 2, "the tail became a run");
    assert_eq!(snap.live_runs()[0], older[0]);
    let rows = table(&snap).await;
    assert_eq!(rows.len(), 5400 - 100);
    assert_eq!(rows["k0000"], "new");
    assert_eq!(rows["k0003"], "old");
    assert!(!rows.contains_key("k0001"));
    assert_eq!(snap.get(&key("k0002")).await.unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(snap.get(&key("k0011")).await.unwrap(), None);
    // A small tail goes onto base keys and shadows the runs that held its keys.
    let mut b = EpochBatch::default();
    b.put(key("k0003"), b"small".to_vec());
    b.put(key("k0004"), b"small".to_vec());
    store.commit(Epoch(3), b).await.unwrap();
    let snap = store.snapshot();
    assert_eq!(snap.live_runs().len(), 2);
    let rows = table(&snap).await;
    assert_eq!((rows["k0003"].as_str(), rows["k0004"].as_str(), rows.len()), ("small", "small", 5300));
    // Folding every run changes no read.
    while store.fold_step(1000).await.unwrap() {}
    assert_eq!(table(&store.snapshot()).await, rows);
}

#[tokio::test]
async fn deletes_in_a_run_hide_base_keys() {
    let store = memory_store().await;
    let mut b = EpochBatch::default();
    b.put(key("a"), b"1".to_vec());
    store.commit(Epoch(1), b).await.unwrap();
    let mut b = EpochBatch::default();
    b.delete(key("a"));
    b.spill(&store).await.unwrap();
    store.commit(Epoch(2), b).await.unwrap();
    let snap = store.snapshot();
    assert_eq!(snap.get(&key("a")).await.unwrap(), None);
    assert!(snap.is_prefix_empty(b"\0\0\0\x05").await.unwrap());
    assert!(table(&snap).await.is_empty());
}

#[tokio::test]
async fn spill_if_over_spills_only_past_the_limit() {
    let store = memory_store().await;
    let mut b = EpochBatch::default();
    b.put(key("a"), vec![0; 100]);
    b.spill_if_over(&store, 1000).await.unwrap();
    assert!(b.runs().is_empty());
    assert!(b.approx_bytes() > 100);
    for i in 0..20 {
        b.put(key(&format!("k{i}")), vec![0; 100]);
    }
    b.spill_if_over(&store, 1000).await.unwrap();
    assert_eq!(b.runs().len(), 1);
    assert_eq!(b.approx_bytes(), 0);
    assert!(!b.is_empty());
}

#[tokio::test]
async fn batches_stay_in_memory_until_they_exhaust_the_shared_write_budget_together() {
    let store = memory_store().await;
    let budget = Arc::new(crate::MemoryBudget::new(24 << 20));
    let fill = |b: &mut EpochBatch, tag: &str, mib: usize| {
        for i in 0..mib {
            b.put(key(&format!("{tag}{i:04}")), vec![0; 1 << 20]);
        }
    };
    let (mut a, mut b) = (EpochBatch::default(), EpochBatch::default());
    fill(&mut a, "a", 10);
    a.spill_if_over_budget(&store, &budget).await.unwrap();
    assert!(a.runs().is_empty(), "10 MiB of a 24 MiB budget stays in memory");
    fill(&mut b, "b", 10);
    b.spill_if_over_budget(&store, &budget).await.unwrap();
    assert!(b.runs().is_empty());
    assert!(budget.used() >= 20 << 20);
    fill(&mut b, "c", 5);
    b.spill_if_over_budget(&store, &budget).await.unwrap();
    assert_eq!(b.runs().len(), 1, "the batch that finds the budget exhausted spills");
    assert!(budget.used() < 12 << 20, "a spilled batch no longer counts: {}", budget.used());
    fill(&mut b, "d", 13);
    b.spill_if_over_budget(&store, &budget).await.unwrap();
    assert_eq!(b.in_memory_len(), 0, "half the budget in one batch spills whatever the others hold");
    assert_eq!(b.runs().len(), 1, "a batch spills into its one run");
    drop(a);
    assert_eq!(budget.used(), 0, "a dropped batch returns its charge");
}

#[tokio::test]
async fn a_batch_spills_into_one_run_where_its_later_ops_win() {
    let store = memory_store().await;
    let mut b = EpochBatch::default();
    b.put(key("a"), b"1".to_vec());
    b.put(key("b"), b"1".to_vec());
    b.put(key("c"), b"1".to_vec());
    b.spill(&store).await.unwrap();
    b.put(key("a"), b"2".to_vec());
    b.delete(key("b"));
    b.spill(&store).await.unwrap();
    b.put(key("c"), b"3".to_vec());
    assert_eq!(b.runs().len(), 1);
    let run = b.runs()[0];
    assert_eq!(store.run_get(run, &key("a")).await.unwrap(), Some(Some(Bytes::from_static(b"2"))));
    assert_eq!(store.run_get(run, &key("b")).await.unwrap(), Some(None));
    assert_eq!(b.lookup(&store, &key("c")).await.unwrap(), Some(Some(Bytes::from_static(b"3"))));
    store.commit(Epoch(1), b).await.unwrap();
    let rows = table(&store.snapshot()).await;
    let want: BTreeMap<String, String> = [("a", "2"), ("c", "3")].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(rows, want);
    while store.fold_step(1).await.unwrap() {}
    assert_eq!(table(&store.snapshot()).await, rows, "folding the run changes no read");
}

#[tokio::test]
async fn extend_keeps_both_batches_runs_and_tails() {
    let store = memory_store().await;
    let mut a = EpochBatch::default();
    a.put(key("a1"), b"x".to_vec());
    a.spill(&store).await.unwrap();
    a.put(key("a2"), b"x".to_vec());
    let mut b = EpochBatch::default();
    b.put(key("b1"), b"x".to_vec());
    b.spill(&store).await.unwrap();
    b.put(key("b2"), b"x".to_vec());
    a.extend(b);
    assert_eq!(a.runs().len(), 2);
    assert_eq!(a.len(), 4);
    store.commit(Epoch(1), a).await.unwrap();
    assert_eq!(table(&store.snapshot()).await.len(), 4);
}

#[tokio::test]
async fn reserved_and_empty_keys_cannot_be_committed() {
    let store = memory_store().await;
    let mut b = EpochBatch::default();
    b.put(runs::COMMIT_RECORD_KEY.to_vec(), b"x".to_vec());
    assert!(store.commit(Epoch(1), b).await.is_err());
    let mut b = EpochBatch::default();
    b.put(Vec::new(), b"x".to_vec());
    assert!(b.spill(&store).await.is_err());
    assert_eq!(b.in_memory_len(), 1);
    assert_eq!(store.committed_epoch(), Epoch::ZERO);
}

/// A tiny seeded generator for model tests.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

#[tokio::test]
async fn reads_with_runs_and_folding_match_a_model_under_random_epochs() {
    for seed in 0..4 {
        let store = memory_store().await;
        let mut rng = Rng(seed);
        let mut model: BTreeMap<String, String> = BTreeMap::new();
        let mut history: Vec<(crate::ReadSnapshot, BTreeMap<String, String>)> = Vec::new();
        for epoch in 1..=12u64 {
            let mut batch = EpochBatch::default();
            let mut next = model.clone();
            for op in 0..(5 + rng.below(40)) {
                let k = format!("k{:02}", rng.below(30));
                if rng.below(4) == 0 {
                    batch.delete(key(&k));
                    next.remove(&k);
                } else {
                    let v = format!("e{epoch}o{op}");
                    batch.put(key(&k), v.clone().into_bytes());
                    next.insert(k, v);
                }
                if rng.below(8) == 0 {
                    batch.spill(&store).await.unwrap();
                }
            }
            store.commit(Epoch(epoch), batch).await.unwrap();
            model = next;
            if rng.below(3) == 0 {
                store.fold_step(1 + rng.below(6) as usize).await.unwrap();
            }
            let snap = store.snapshot();
            assert_eq!(table(&snap).await, model, "seed {seed} epoch {epoch}");
            history.push((snap, model.clone()));
        }
        while store.fold_step(5).await.unwrap() {}
        assert!(store.snapshot().live_runs().is_empty());
        assert_eq!(table(&store.snapshot()).await, model, "seed {seed} after folding");
        for (snap, expected) in &history {
            assert_eq!(&table(snap).await, expected, "seed {seed}: an old snapshot changed");
            for k in 0..30 {
                let k = format!("k{k:02}");
                let got = snap.get(&key(&k)).await.unwrap().map(|v| String::from_utf8_lossy(&v).into_owned());
                assert_eq!(got.as_ref(), expected.get(&k), "seed {seed} key {k}");
            }
        }
    }
}

#[tokio::test]
async fn a_fold_step_changes_no_read_and_finally_empties_the_live_list() {
    let store = memory_store().await;
    let mut b = EpochBatch::default();
    for i in 0..50 {
        b.put(key(&format!("k{i:02}")), b"v".to_vec());
    }
    b.spill(&store).await.unwrap();
    b.put(key("tail"), b"t".to_vec());
    store.commit(Epoch(1), b).await.unwrap();
    let before = store.snapshot();
    let expected = table(&before).await;
    assert_eq!(expected.len(), 51);
    let mut steps = 0;
    while store.fold_step(7).await.unwrap() {
        steps += 1;
        assert_eq!(table(&store.snapshot()).await, expected);
    }
    assert_eq!(steps, 7, "50 entries in chunks of 7 leave the run live for 7 full steps");
    let after = store.snapshot();
    assert!(after.live_runs().is_empty());
    assert_eq!(after.epoch, Epoch(1));
    assert_eq!(table(&after).await, expected);
    assert_eq!(table(&before).await, expected);
    assert!(!store.fold_step(7).await.unwrap());
}

#[tokio::test]
async fn live_runs_survive_reopen_and_uncommitted_runs_are_garbage() {
    let (dir, url) = file_url("runs-reopen");
    let opts = StoreOptions { url, ..Default::default() };
    let resolved = crate::object_store_url::resolve(&opts.url).unwrap();
    let (garbage, live) = {
        let store = StateStore::open_with(resolved.store.clone(), "eddy", &opts, quiet()).await.unwrap();
        let mut b = EpochBatch::default();
        b.put(key("a"), b"1".to_vec());
        b.spill(&store).await.unwrap();
        let live = b.runs()[0];
        store.commit(Epoch(1), b).await.unwrap();
        let mut never = EpochBatch::default();
        never.put(key("b"), b"2".to_vec());
        never.spill(&store).await.unwrap();
        let garbage = never.runs()[0];
        // Make the uncommitted run durable, as if the process died later.
        store.commit(Epoch(2), EpochBatch::default()).await.unwrap();
        store.close().await.unwrap();
        (garbage, live)
    };
    let store = StateStore::open_with(resolved.store.clone(), "eddy", &opts, quiet()).await.unwrap();
    assert_eq!(store.committed_epoch(), Epoch(2));
    assert_eq!(store.snapshot().live_runs(), &[live]);
    assert_eq!(store.snapshot().get(&key("a")).await.unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(store.snapshot().get(&key("b")).await.unwrap(), None);
    assert_eq!(store.run_get(garbage, &key("b")).await.unwrap(), Some(Some(Bytes::from_static(b"2"))));
    assert_eq!(store.discard_garbage_runs().await.unwrap(), 1);
    assert_eq!(store.run_get(garbage, &key("b")).await.unwrap(), None);
    assert_eq!(store.run_get(live, &key("a")).await.unwrap(), Some(Some(Bytes::from_static(b"1"))));
    store.close().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_discarded_batch_cannot_be_committed_and_leaves_nothing_behind() {
    let store = memory_store().await;
    let mut b = EpochBatch::default();
    b.put(key("a"), b"1".to_vec());
    b.spill(&store).await.unwrap();
    let run = b.runs()[0];
    assert_eq!(store.discard_run(run).await.unwrap(), 1);
    assert_eq!(store.run_get(run, &key("a")).await.unwrap(), None);
    assert!(store.commit(Epoch(1), b).await.is_err());
    let mut live = EpochBatch::default();
    live.put(key("x"), b"1".to_vec());
    live.spill(&store).await.unwrap();
    let live_run = live.runs()[0];
    store.commit(Epoch(1), live).await.unwrap();
    assert!(store.discard_run(live_run).await.is_err());
    let mut dropped = EpochBatch::default();
    dropped.put(key("y"), b"1".to_vec());
    dropped.spill(&store).await.unwrap();
    let dropped_run = dropped.runs()[0];
    dropped.discard(&store).await.unwrap();
    assert_eq!(store.run_get(dropped_run, &key("y")).await.unwrap(), None);
}

#[tokio::test]
async fn the_background_task_folds_committed_runs() {
    let os: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let tuning = StoreTuning { fold_chunk_entries: 16, ..StoreTuning::default() };
    let store = StateStore::open_with(os, "db", &StoreOptions::default(), tuning).await.unwrap();
    let mut b = EpochBatch::default();
    for i in 0..100 {
        b.put(key(&format!("k{i:03}")), b"v".to_vec());
    }
    b.spill(&store).await.unwrap();
    store.commit(Epoch(1), b).await.unwrap();
    let s = store.clone();
    assert!(eventually(Duration::from_secs(20), || { let s = s.clone(); async move { s.snapshot().live_runs().is_empty() } }).await);
    assert_eq!(table(&store.snapshot()).await.len(), 100);
    let started = Instant::now();
    store.close().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
}

fn int_table() -> StateTable {
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false), Field::new("v", DataType::Int64, false)]));
    StateTable::try_new(9, schema, vec![0]).unwrap()
}

fn chunk(t: &StateTable, keys: std::ops::Range<i64>, op: Op) -> StreamChunk {
    let n = keys.end - keys.start;
    let batch = RecordBatch::try_new(
        t.schema().clone(),
        vec![Arc::new(Int64Array::from_iter_values(keys.clone())), Arc::new(Int64Array::from_iter_values(keys.map(|k| k * 10)))],
    )
    .unwrap();
    StreamChunk::try_new(batch, vec![op; n as usize]).unwrap()
}

#[tokio::test]
async fn a_table_streams_in_bounded_batches_across_runs() {
    let store = memory_store().await;
    let t = int_table();
    let mut b = EpochBatch::default();
    t.write_chunk(&chunk(&t, 0..12_000, Op::Insert), &mut b).unwrap();
    b.spill(&store).await.unwrap();
    t.write_chunk(&chunk(&t, 12_000..20_000, Op::Insert), &mut b).unwrap();
    t.write_chunk(&chunk(&t, 0..1_000, Op::Delete), &mut b).unwrap();
    store.commit(Epoch(1), b).await.unwrap();
    let snap = store.snapshot();
    let mut scan = t.scan_stream(&snap).await.unwrap();
    let mut rows = 0;
    let mut sum = 0i64;
    while let Some(batch) = scan.next_batch().await.unwrap() {
        assert!(batch.num_rows() <= 8192 && batch.num_rows() > 0);
        rows += batch.num_rows();
        let k = batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        sum += k.iter().flatten().sum::<i64>();
    }
    assert_eq!(rows, 19_000);
    assert_eq!(sum, (1_000..20_000).sum::<i64>());
    assert_eq!(t.scan(&snap).await.unwrap().iter().map(|b| b.num_rows()).sum::<usize>(), 19_000);
    let mut by_vnode = 0;
    for lo in (0..256u16).step_by(64) {
        let mut part = t.scan_stream_vnodes(&snap, lo..lo + 64).await.unwrap();
        while let Some(batch) = part.next_batch().await.unwrap() {
            by_vnode += batch.num_rows();
        }
    }
    assert_eq!(by_vnode, 19_000);
    let mut clear = EpochBatch::default();
    t.clear(&snap, &mut clear).await.unwrap();
    store.commit(Epoch(2), clear).await.unwrap();
    assert!(store.snapshot().is_prefix_empty(&9u32.to_be_bytes()).await.unwrap());
}

#[tokio::test]
async fn a_scan_cursor_hands_out_at_most_max_entries_per_batch() {
    let store = memory_store().await;
    let mut b = EpochBatch::default();
    for i in 0..10 {
        b.put(key(&format!("k{i}")), b"v".to_vec());
    }
    b.spill(&store).await.unwrap();
    store.commit(Epoch(1), b).await.unwrap();
    let snap = store.snapshot();
    let mut cursor = snap.scan_batches(Bound::Included(key("k2")), Bound::Excluded(key("k9")), 3).await.unwrap();
    let mut sizes = Vec::new();
    while let Some(batch) = cursor.next_batch().await.unwrap() {
        sizes.push(batch.len());
    }
    assert_eq!(sizes, vec![3, 3, 1]);
    let mut empty = snap.scan_batches(Bound::Included(key("k5")), Bound::Excluded(key("k5")), 3).await.unwrap();
    assert!(empty.next_batch().await.unwrap().is_none());
    // The whole key space shows no run entries and no other tables' keys twice.
    let all = snap.scan_prefix(b"").await.unwrap();
    assert!(all.iter().all(|(k, _)| !k.starts_with(runs::RUN_PREFIX)));
    assert_eq!(all.iter().filter(|(k, _)| k.starts_with(b"\0\0\0\x05")).count(), 10);
}

#[tokio::test]
async fn scans_are_also_available_as_streams() {
    use futures::TryStreamExt;
    let store = memory_store().await;
    let t = int_table();
    let mut b = EpochBatch::default();
    t.write_chunk(&chunk(&t, 0..10_000, Op::Insert), &mut b).unwrap();
    b.spill(&store).await.unwrap();
    store.commit(Epoch(1), b).await.unwrap();
    let snap = store.snapshot();
    let batches: Vec<RecordBatch> = t.scan_stream(&snap).await.unwrap().into_stream().try_collect().await.unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).collect::<Vec<_>>(), vec![8192, 1808]);
    let cursor = snap.scan_batches(Bound::Unbounded, Bound::Unbounded, 4000).await.unwrap();
    let entries: Vec<Vec<(Bytes, Bytes)>> = cursor.into_stream().try_collect().await.unwrap();
    assert!(entries.iter().all(|e| e.len() <= 4000));
    assert!(entries.iter().map(|e| e.len()).sum::<usize>() >= 10_000);
}

#[tokio::test]
async fn garbage_runs_are_collected_in_the_background_after_open() {
    let os: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let garbage = {
        let store = StateStore::open_with(os.clone(), "db", &StoreOptions::default(), quiet()).await.unwrap();
        let mut never = EpochBatch::default();
        never.put(key("b"), b"2".to_vec());
        never.spill(&store).await.unwrap();
        store.commit(Epoch(1), EpochBatch::default()).await.unwrap();
        store.close().await.unwrap();
        never.runs()[0]
    };
    let store = StateStore::open_with(os, "db", &StoreOptions::default(), StoreTuning::default()).await.unwrap();
    let s = store.clone();
    let collected = eventually(Duration::from_secs(20), || {
        let s = s.clone();
        async move { s.run_get(garbage, &key("b")).await.unwrap().is_none() }
    })
    .await;
    assert!(collected);
    store.close().await.unwrap();
}
