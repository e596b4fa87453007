//! `StateStore` under object-store failures (FaultyStore): a failed commit returns an error
//! within its deadline, does not advance the committed epoch, is never visible, and the store
//! recovers once the object store heals.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use eddy_common::Epoch;
use object_store::memory::InMemory;
use object_store::ObjectStore;

use crate::store_tests::{eventually, key};
use crate::testing::{FaultAction, FaultRule, FaultyStore, OpKind, Trigger};
use crate::{EpochBatch, StateStore, StoreOptions, StoreTuning};

/// Short deadlines and few retries, no background task.
fn tuning(retries: u32) -> StoreTuning {
    StoreTuning {
        object_store_max_retries: Some(retries),
        commit_timeout: Duration::from_secs(10),
        open_timeout: Duration::from_secs(10),
        close_timeout: Duration::from_secs(5),
        background_maintenance: false,
        ..StoreTuning::default()
    }
}

/// A healthy store over `faulty`.
async fn open(faulty: &FaultyStore, retries: u32) -> Arc<StateStore> {
    StateStore::open_with(faulty.as_object_store(), "db", &StoreOptions::default(), tuning(retries)).await.unwrap()
}

/// A fresh, healthy store over the same data, to see what is durable.
async fn reopen_clean(inner: &Arc<dyn ObjectStore>) -> Arc<StateStore> {
    StateStore::open_with(inner.clone(), "db", &StoreOptions::default(), tuning(2)).await.unwrap()
}

fn batch(k: &str, v: &str) -> EpochBatch {
    let mut b = EpochBatch::default();
    b.put(key(k), v.as_bytes().to_vec());
    b
}

/// Fails every WAL upload until removed.
fn wal_down(faulty: &FaultyStore) -> crate::testing::RuleId {
    faulty.add_rule(FaultRule::new(Some(OpKind::Put), Trigger::Always, FaultAction::Fail).on_paths_containing("wal"))
}

async fn value(store: &StateStore, k: &str) -> Option<Bytes> {
    store.snapshot().get(&key(k)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_while_the_store_is_down_fails_and_the_next_one_recovers() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faulty = FaultyStore::new(inner.clone(), 1);
    let store = open(&faulty, 1).await;
    store.commit(Epoch(1), batch("a", "1")).await.unwrap();
    faulty.set_down(true);
    let started = Instant::now();
    assert!(store.commit(Epoch(2), batch("failed", "x")).await.is_err());
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(store.committed_epoch(), Epoch(1));
    assert_eq!(store.snapshot().epoch, Epoch(1));
    assert!(store.needs_recovery());
    // Still down: the next commit tries to recover, fails, and changes nothing.
    assert!(store.commit(Epoch(2), batch("failed", "y")).await.is_err());
    assert_eq!(store.committed_epoch(), Epoch(1));
    faulty.heal();
    let generation = store.generation();
    store.commit(Epoch(2), batch("b", "2")).await.unwrap();
    assert!(store.generation() > generation);
    assert_eq!(store.committed_epoch(), Epoch(2));
    assert_eq!(value(&store, "failed").await, None);
    assert_eq!(value(&store, "b").await.as_deref(), Some(&b"2"[..]));
    store.close().await.unwrap();
    let fresh = reopen_clean(&inner).await;
    assert_eq!(fresh.committed_epoch(), Epoch(2));
    assert_eq!(value(&fresh, "a").await.as_deref(), Some(&b"1"[..]));
    assert_eq!(value(&fresh, "failed").await, None);
    fresh.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_recover_resumes_from_the_last_durable_commit_in_a_new_generation() {
    let faulty = FaultyStore::new(Arc::new(InMemory::new()), 2);
    let store = open(&faulty, 1).await;
    store.commit(Epoch(1), batch("a", "1")).await.unwrap();
    let rule = wal_down(&faulty);
    assert!(store.commit(Epoch(2), batch("a", "lost")).await.is_err());
    faulty.remove_rule(rule);
    let generation = store.generation();
    assert_eq!(store.recover().await.unwrap(), Epoch(1));
    assert_eq!(store.generation(), generation + 1);
    assert!(!store.needs_recovery());
    assert_eq!(value(&store, "a").await.as_deref(), Some(&b"1"[..]));
    store.commit(Epoch(2), batch("a", "2")).await.unwrap();
    assert_eq!(value(&store, "a").await.as_deref(), Some(&b"2"[..]));
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_after_a_failed_commit_does_not_make_it_durable() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faulty = FaultyStore::new(inner.clone(), 3);
    let store = open(&faulty, 1).await;
    store.commit(Epoch(1), batch("a", "1")).await.unwrap();
    let rule = wal_down(&faulty);
    assert!(store.commit(Epoch(2), batch("a", "lost")).await.is_err());
    faulty.remove_rule(rule);
    store.close().await.unwrap();
    let fresh = reopen_clean(&inner).await;
    assert_eq!(fresh.committed_epoch(), Epoch(1));
    assert_eq!(value(&fresh, "a").await.as_deref(), Some(&b"1"[..]));
    fresh.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_spilled_before_recovery_must_be_rebuilt_and_its_run_is_collected() {
    let faulty = FaultyStore::new(Arc::new(InMemory::new()), 4);
    let store = open(&faulty, 1).await;
    let mut stale = batch("s", "1");
    stale.spill(&store).await.unwrap();
    // Make the spilled run durable, so that it outlives the recovery as garbage.
    store.commit(Epoch(1), EpochBatch::default()).await.unwrap();
    let rule = wal_down(&faulty);
    assert!(store.commit(Epoch(2), batch("a", "lost")).await.is_err());
    faulty.remove_rule(rule);
    store.recover().await.unwrap();
    let err = store.commit(Epoch(2), stale).await.unwrap_err();
    assert!(err.message.contains("recovered"), "{}", err.message);
    assert_eq!(store.committed_epoch(), Epoch(1));
    assert_eq!(store.discard_garbage_runs().await.unwrap(), 1);
    store.commit(Epoch(2), batch("a", "2")).await.unwrap();
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_against_a_hanging_store_times_out_and_the_store_recovers() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faulty = FaultyStore::new(inner.clone(), 5);
    let t = StoreTuning { commit_timeout: Duration::from_millis(500), ..tuning(1) };
    let store = StateStore::open_with(faulty.as_object_store(), "db", &StoreOptions::default(), t).await.unwrap();
    store.commit(Epoch(1), batch("a", "1")).await.unwrap();
    let hang = faulty.add_rule(
        FaultRule::new(Some(OpKind::Put), Trigger::Always, FaultAction::Delay(Duration::from_secs(3600))).on_paths_containing("wal"),
    );
    let started = Instant::now();
    let err = store.commit(Epoch(2), batch("hung", "x")).await.unwrap_err();
    assert!(err.message.contains("did not finish"), "{}", err.message);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(store.committed_epoch(), Epoch(1));
    faulty.remove_rule(hang);
    store.commit(Epoch(2), batch("b", "2")).await.unwrap();
    assert_eq!(value(&store, "hung").await, None);
    store.close().await.unwrap();
    let fresh = reopen_clean(&inner).await;
    assert_eq!(fresh.committed_epoch(), Epoch(2));
    assert_eq!(value(&fresh, "hung").await, None);
    fresh.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_wal_upload_is_ambiguous_still_succeeds() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faulty = FaultyStore::new(inner.clone(), 6);
    let store = open(&faulty, 1).await;
    faulty.add_rule(FaultRule::new(Some(OpKind::Put), Trigger::Nth(1), FaultAction::Ambiguous).on_paths_containing("wal"));
    store.commit(Epoch(1), batch("a", "1")).await.unwrap();
    assert_eq!(faulty.injected(), 1);
    store.close().await.unwrap();
    let fresh = reopen_clean(&inner).await;
    assert_eq!(fresh.committed_epoch(), Epoch(1));
    assert_eq!(value(&fresh, "a").await.as_deref(), Some(&b"1"[..]));
    fresh.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_slatedb_died_in_the_background_recovers_on_the_next_commit() {
    let faulty = FaultyStore::new(Arc::new(InMemory::new()), 7);
    let store = open(&faulty, 0).await;
    store.commit(Epoch(1), batch("a", "1")).await.unwrap();
    faulty.add_rule(FaultRule::new(Some(OpKind::Get), Trigger::Always, FaultAction::Fail));
    let s = store.clone();
    assert!(eventually(Duration::from_secs(30), || { let s = s.clone(); async move { s.needs_recovery() } }).await);
    faulty.heal();
    store.commit(Epoch(2), batch("b", "2")).await.unwrap();
    assert_eq!(value(&store, "a").await.as_deref(), Some(&b"1"[..]));
    assert_eq!(value(&store, "b").await.as_deref(), Some(&b"2"[..]));
    store.close().await.unwrap();
}

/// Commits epoch `e` (one spilled and one in-memory key); `Ok` if acknowledged. A failed
/// commit must leave the committed epoch where it was.
async fn commit_epoch(store: &StateStore, e: u64) -> bool {
    let mut b = EpochBatch::default();
    b.put(key(&format!("e{e:03}")), b"spilled".to_vec());
    // A spill may fail too; the ops then stay in memory and commit with the tail.
    let _ = b.spill(store).await;
    b.put(key(&format!("t{e:03}")), b"tail".to_vec());
    let before = store.committed_epoch();
    let ok = store.commit(Epoch(e), b).await.is_ok();
    if !ok {
        assert_eq!(store.committed_epoch(), before, "a failed commit moved the committed epoch");
        assert_eq!(store.snapshot().epoch, before);
    }
    let _ = store.fold_step(3).await;
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_epochs_survive_random_faults_and_failed_ones_never_show() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faulty = FaultyStore::new(inner.clone(), 8);
    let store = open(&faulty, 1).await;
    let mut acked = Vec::new();
    let mut e = 0;
    // Rounds of an unreliable store (half of all requests fail, every SlateDB request is
    // retried once) until a few commits have failed, then a healthy store, on which every
    // commit must succeed at once: the first of them recovers.
    for round in 0..3 {
        let flaky = faulty.add_rule(FaultRule::new(None, Trigger::Fraction(0.5), FaultAction::Fail));
        let mut failures = 0;
        while failures < 2 && e < 40 * (round + 1) {
            e += 1;
            match commit_epoch(&store, e).await {
                true => acked.push(e),
                false => failures += 1,
            }
        }
        assert_eq!(failures, 2, "round {round}: the flaky store failed too few commits");
        faulty.remove_rule(flaky);
        for _ in 0..3 {
            e += 1;
            assert!(commit_epoch(&store, e).await, "round {round}: epoch {e} failed on a healthy store");
            acked.push(e);
        }
    }
    store.close().await.unwrap();
    let fresh = reopen_clean(&inner).await;
    let committed = fresh.committed_epoch();
    assert_eq!(committed, Epoch(e));
    for epoch in 1..=e {
        let spilled = value(&fresh, &format!("e{epoch:03}")).await;
        let tail = value(&fresh, &format!("t{epoch:03}")).await;
        assert_eq!(spilled.is_some(), tail.is_some(), "epoch {epoch} is visible only in part");
        if acked.contains(&epoch) {
            assert!(tail.is_some(), "acknowledged epoch {epoch} was lost");
        }
    }
    fresh.close().await.unwrap();
}
