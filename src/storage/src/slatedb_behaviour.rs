//! Tests that pin what SlateDB 0.18 itself does when object storage fails, on a bare `Db` over
//! a [`FaultyStore`]. `StateStore`'s failure handling (store.rs module docs) is built on these
//! observations; if an upgrade changes them, these tests say which assumption broke.

use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;
use slatedb::config::{CloseOptions, Settings};
use slatedb::{CloseReason, Db, ErrorKind, WriteBatch};

use crate::store_tests::eventually;
use crate::testing::{FaultAction, FaultRule, FaultyStore, OpKind, Trigger};

/// A store over fresh memory that can fail on demand.
fn faulty() -> FaultyStore {
    FaultyStore::new(Arc::new(InMemory::new()), 1)
}

async fn open(store: &FaultyStore, retries: Option<u32>) -> Db {
    let settings = Settings { object_store_max_retries: retries, ..Default::default() };
    Db::builder("db", store.as_object_store()).with_settings(settings).build().await.unwrap()
}

async fn put(db: &Db, k: &[u8], v: &[u8]) {
    let mut wb = WriteBatch::new();
    wb.put(k, v);
    db.write(wb).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_unbounded_retries_a_flush_waits_out_an_outage_and_then_succeeds() {
    let store = faulty();
    let db = open(&store, None).await;
    store.set_down(true);
    put(&db, b"k", b"v").await;
    // Still retrying after a while: a commit built on this would hang for the whole outage.
    assert!(tokio::time::timeout(Duration::from_secs(2), db.flush()).await.is_err());
    store.heal();
    tokio::time::timeout(Duration::from_secs(30), db.flush()).await.unwrap().unwrap();
    db.close().await.unwrap();
    let reopened = open(&store, None).await;
    assert_eq!(reopened.get(b"k").await.unwrap().as_deref(), Some(&b"v"[..]));
    reopened.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_bounded_retries_a_failed_wal_flush_kills_the_instance_for_good() {
    let store = faulty();
    let db = open(&store, Some(2)).await;
    put(&db, b"a", b"1").await;
    db.flush().await.unwrap();
    store.add_rule(FaultRule::new(Some(OpKind::Put), Trigger::Always, FaultAction::Fail).on_paths_containing("wal"));
    // The write itself succeeds: it only reaches the in-memory WAL buffer and memtable...
    put(&db, b"b", b"2").await;
    // ...and is readable through this instance although it is not durable.
    assert_eq!(db.get(b"b").await.unwrap().as_deref(), Some(&b"2"[..]));
    let err = tokio::time::timeout(Duration::from_secs(30), db.flush()).await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    store.heal();
    // Healing the store does not bring the WAL back.
    let again = tokio::time::timeout(Duration::from_secs(30), db.flush()).await.unwrap();
    assert!(again.is_err());
    let d = db.clone();
    assert!(eventually(Duration::from_secs(10), || { let d = d.clone(); async move { d.status().close_reason.is_some() } }).await);
    db.close_with_options(CloseOptions::default().with_flush_type(None)).await.unwrap();
    // A new instance sees only what was durable.
    let reopened = open(&store, Some(2)).await;
    assert_eq!(reopened.get(b"a").await.unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(reopened.get(b"b").await.unwrap(), None);
    reopened.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_retries_a_background_read_failure_kills_an_idle_instance() {
    let store = faulty();
    let db = open(&store, Some(0)).await;
    store.add_rule(FaultRule::new(Some(OpKind::Get), Trigger::Always, FaultAction::Fail));
    let d = db.clone();
    assert!(eventually(Duration::from_secs(30), || { let d = d.clone(); async move { d.status().close_reason.is_some() } }).await);
    assert_eq!(db.status().close_reason, Some(CloseReason::Panic));
    store.heal();
    let mut wb = WriteBatch::new();
    wb.put(b"k", b"v");
    assert!(db.write(wb).await.is_err());
    let _ = db.close_with_options(CloseOptions::default().with_flush_type(None)).await;
    let reopened = open(&store, Some(0)).await;
    put(&reopened, b"k", b"v").await;
    reopened.flush().await.unwrap();
    reopened.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_wal_upload_is_resolved_by_slatedb() {
    let store = faulty();
    let db = open(&store, Some(2)).await;
    store.add_rule(FaultRule::new(Some(OpKind::Put), Trigger::Nth(1), FaultAction::Ambiguous).on_paths_containing("wal"));
    put(&db, b"k", b"v").await;
    tokio::time::timeout(Duration::from_secs(30), db.flush()).await.unwrap().unwrap();
    assert_eq!(store.injected(), 1);
    db.close().await.unwrap();
    let reopened = open(&store, Some(2)).await;
    assert_eq!(reopened.get(b"k").await.unwrap().as_deref(), Some(&b"v"[..]));
    reopened.close().await.unwrap();
}

#[tokio::test]
async fn snapshots_of_a_closed_instance_fail_instead_of_reading() {
    let store = faulty();
    let db = open(&store, Some(2)).await;
    put(&db, b"k", b"v").await;
    let snap = db.snapshot().unwrap();
    db.close().await.unwrap();
    assert!(snap.get(b"k").await.is_err());
}
