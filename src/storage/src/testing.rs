//! Test support: a fault-injecting [`ObjectStore`] (STYLE.md, "Tests": reusable test doubles
//! live in one place). Compiled in every build so that tests of other crates can use it; nothing
//! in production code constructs it.
//!
//! [`FaultyStore`] wraps any `Arc<dyn ObjectStore>` and applies [`FaultRule`]s that can be added
//! and removed while a database runs on top of it:
//!
//! * fail the Nth matching request from now on ([`Trigger::Nth`]), every matching request while
//!   the rule is installed ([`Trigger::Always`], or [`FaultyStore::set_down`] for "the store is
//!   down"), or a seeded random fraction of them ([`Trigger::Fraction`]);
//! * make a request slow ([`FaultAction::Delay`]);
//! * make a PUT *ambiguous* ([`FaultAction::Ambiguous`]): the object is written, then an error is
//!   returned, as when a response is lost on the network.
//!
//! Requests are classified as [`OpKind::Put`] (put, multipart upload, copy, rename),
//! [`OpKind::Get`] (get, head, ranged reads), [`OpKind::List`] and [`OpKind::Delete`]. Injected
//! errors are `object_store::Error::Generic`, which SlateDB's retrying object store treats as
//! transient (it retries them), exactly like a 503 or a connection reset.
//!
//! Rules are tried in the order they were added; the first one that *fires* decides a request's
//! fate (a rule that matches without firing, e.g. `Nth(3)` on its first match, only counts the
//! request). A request no rule fires on goes straight to the wrapped store. Counters of requests per kind and of
//! injected faults let tests wait (with a deadline) until the database actually hit a fault.

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, RenameOptions, UploadPart,
};
use parking_lot::Mutex;

/// The kind of an object-store request, as far as fault rules are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Writes: put, multipart upload (creation and completion), copy, rename.
    Put,
    /// Reads: get, head, ranged gets.
    Get,
    /// Listings.
    List,
    /// Deletes (each deleted path counts once).
    Delete,
}

/// When a rule fires, among the requests it matches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// The `n`th matching request after the rule was added (1-based), once; the rule then
    /// stays installed but inert.
    Nth(u64),
    /// Every matching request while the rule is installed.
    Always,
    /// Each matching request with this probability (0.0..=1.0), drawn from the store's seeded
    /// generator so a failing test replays the same way.
    Fraction(f64),
}

/// What a firing rule does to the request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultAction {
    /// Return an error without touching the wrapped store.
    Fail,
    /// Wait this long, then perform the request normally.
    Delay(Duration),
    /// Perform the request, then return an error anyway (for PUTs: the object exists although
    /// the caller was told it failed). For non-PUT requests this behaves like `Fail` after the
    /// request ran.
    Ambiguous,
}

/// One fault-injection rule.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    /// Request kind matched; `None` matches every kind.
    pub op: Option<OpKind>,
    /// Only paths containing this substring match (e.g. `"/wal/"`, `"manifest"`); `None`
    /// matches every path. Listings match on their prefix.
    pub path_contains: Option<String>,
    /// Which of the matching requests the rule fires on.
    pub trigger: Trigger,
    /// What happens when it fires.
    pub action: FaultAction,
}

impl FaultRule {
    /// A rule matching every request of `op` (or of every kind for `None`) on any path.
    pub fn new(op: Option<OpKind>, trigger: Trigger, action: FaultAction) -> Self {
        Self { op, path_contains: None, trigger, action }
    }

    /// Restricts the rule to paths containing `fragment`.
    pub fn on_paths_containing(mut self, fragment: impl Into<String>) -> Self {
        self.path_contains = Some(fragment.into());
        self
    }
}

/// Handle of an installed rule, for [`FaultyStore::remove_rule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleId(u64);

/// An installed rule and how many requests it has matched.
#[derive(Debug)]
struct Installed {
    /// Handle given to the caller.
    id: RuleId,
    /// The rule.
    rule: FaultRule,
    /// Requests matched so far (for `Trigger::Nth`).
    matched: u64,
}

/// Mutable state shared by all clones of a [`FaultyStore`].
#[derive(Debug)]
struct FaultState {
    /// Rules in the order they were added.
    rules: Vec<Installed>,
    /// Next rule id.
    next_id: u64,
    /// Seeded generator state (splitmix64).
    rng: u64,
}

/// Next pseudo-random number in [0, 1) from a splitmix64 state.
fn next_unit(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

impl FaultState {
    /// The action for one request, if any rule fires; advances match counters of every rule
    /// the request matches up to the one that fires.
    fn decide(&mut self, op: OpKind, path: &str) -> Option<FaultAction> {
        let FaultState { rules, rng, .. } = self;
        for installed in rules.iter_mut() {
            let rule = &installed.rule;
            let kind_matches = rule.op.is_none_or(|o| o == op);
            let path_matches = rule.path_contains.as_deref().is_none_or(|f| path.contains(f));
            if !kind_matches || !path_matches {
                continue;
            }
            installed.matched += 1;
            let fires = match rule.trigger {
                Trigger::Nth(n) => installed.matched == n,
                Trigger::Always => true,
                Trigger::Fraction(p) => next_unit(rng) < p,
            };
            if fires {
                return Some(rule.action);
            }
        }
        None
    }
}

/// Counters of what the store saw and did.
#[derive(Debug, Default)]
struct Counters {
    /// Requests per kind: put, get, list, delete.
    requests: [AtomicU64; 4],
    /// Faults injected (failures, delays and ambiguous results).
    injected: AtomicU64,
}

/// A fault-injecting wrapper around an object store (see the module docs).
#[derive(Clone)]
pub struct FaultyStore {
    /// The store requests go to.
    inner: Arc<dyn ObjectStore>,
    /// Rules and generator.
    state: Arc<Mutex<FaultState>>,
    /// What happened so far.
    counters: Arc<Counters>,
}

impl fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultyStore").field("inner", &self.inner.to_string()).finish()
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

/// The error every injected fault returns: a generic (hence retryable) object-store error.
fn injected_error(op: OpKind, path: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultyStore",
        source: format!("injected fault on {op:?} {path}").into(),
    }
}

/// Index of a kind in [`Counters::requests`].
fn kind_index(op: OpKind) -> usize {
    match op {
        OpKind::Put => 0,
        OpKind::Get => 1,
        OpKind::List => 2,
        OpKind::Delete => 3,
    }
}

impl FaultyStore {
    /// Wraps `inner` with no rules installed; `seed` drives [`Trigger::Fraction`].
    pub fn new(inner: Arc<dyn ObjectStore>, seed: u64) -> Self {
        Self {
            inner,
            state: Arc::new(Mutex::new(FaultState { rules: Vec::new(), next_id: 0, rng: seed })),
            counters: Arc::new(Counters::default()),
        }
    }

    /// This store as the trait object SlateDB takes.
    pub fn as_object_store(&self) -> Arc<dyn ObjectStore> {
        Arc::new(self.clone())
    }

    /// Installs `rule` after the existing ones and returns its handle.
    pub fn add_rule(&self, rule: FaultRule) -> RuleId {
        let mut state = self.state.lock();
        let id = RuleId(state.next_id);
        state.next_id += 1;
        state.rules.push(Installed { id, rule, matched: 0 });
        id
    }

    /// Removes a rule; removing one twice is a no-op.
    pub fn remove_rule(&self, id: RuleId) {
        self.state.lock().rules.retain(|r| r.id != id);
    }

    /// Removes every rule: the store is healthy again.
    pub fn heal(&self) {
        self.state.lock().rules.clear();
    }

    /// Makes every request fail (`true`) until [`FaultyStore::heal`] or `set_down(false)`.
    /// `set_down(false)` removes every rule, like `heal`.
    pub fn set_down(&self, down: bool) {
        if down {
            self.add_rule(FaultRule::new(None, Trigger::Always, FaultAction::Fail));
        } else {
            self.heal();
        }
    }

    /// Fails the `n`th request of kind `op` from now on (1-based).
    pub fn fail_nth(&self, op: OpKind, n: u64) -> RuleId {
        self.add_rule(FaultRule::new(Some(op), Trigger::Nth(n), FaultAction::Fail))
    }

    /// Fails each request of kind `op` with probability `p`.
    pub fn fail_fraction(&self, op: OpKind, p: f64) -> RuleId {
        self.add_rule(FaultRule::new(Some(op), Trigger::Fraction(p), FaultAction::Fail))
    }

    /// Delays every request of kind `op` by `delay`.
    pub fn delay(&self, op: OpKind, delay: Duration) -> RuleId {
        self.add_rule(FaultRule::new(Some(op), Trigger::Always, FaultAction::Delay(delay)))
    }

    /// Makes the `n`th PUT from now on ambiguous: written, then reported as failed.
    pub fn ambiguous_nth_put(&self, n: u64) -> RuleId {
        self.add_rule(FaultRule::new(Some(OpKind::Put), Trigger::Nth(n), FaultAction::Ambiguous))
    }

    /// Requests of kind `op` seen so far (faulty or not).
    pub fn requests(&self, op: OpKind) -> u64 {
        self.counters.requests[kind_index(op)].load(Ordering::Relaxed)
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.counters.injected.load(Ordering::Relaxed)
    }

    /// Counts a request and decides its fate.
    fn decide(&self, op: OpKind, path: &str) -> Option<FaultAction> {
        self.counters.requests[kind_index(op)].fetch_add(1, Ordering::Relaxed);
        let action = self.state.lock().decide(op, path);
        if action.is_some() {
            self.counters.injected.fetch_add(1, Ordering::Relaxed);
        }
        action
    }

    /// Runs `request` under the rules for (`op`, `path`).
    async fn run<T, F>(&self, op: OpKind, path: &str, request: F) -> object_store::Result<T>
    where
        F: Future<Output = object_store::Result<T>>,
    {
        match self.decide(op, path) {
            None => request.await,
            Some(FaultAction::Fail) => Err(injected_error(op, path)),
            Some(FaultAction::Delay(d)) => {
                tokio::time::sleep(d).await;
                request.await
            }
            Some(FaultAction::Ambiguous) => {
                // The request took effect; the caller is told it failed anyway.
                let _ = request.await?;
                Err(injected_error(op, path))
            }
        }
    }
}

/// The boxed future `#[async_trait]` methods return (the trait is declared with `async_trait`;
/// implementing it by hand avoids a proc-macro dependency for one test double).
type BoxFut<'a, T> = Pin<Box<dyn Future<Output = object_store::Result<T>> + Send + 'a>>;

impl ObjectStore for FaultyStore {
    fn put_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> BoxFut<'async_trait, PutResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            self.run(OpKind::Put, location.as_ref(), self.inner.put_opts(location, payload, opts)).await
        })
    }

    fn put_multipart_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        opts: PutMultipartOptions,
    ) -> BoxFut<'async_trait, Box<dyn MultipartUpload>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            // The creation and the completion are both PUTs as far as rules go: a rule can fail
            // the upload before it starts or make its completion ambiguous.
            let upload = self.run(OpKind::Put, location.as_ref(), self.inner.put_multipart_opts(location, opts)).await?;
            Ok(Box::new(FaultyUpload { inner: upload, store: self.clone(), path: location.to_string() })
                as Box<dyn MultipartUpload>)
        })
    }

    fn get_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        options: GetOptions,
    ) -> BoxFut<'async_trait, GetResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.run(OpKind::Get, location.as_ref(), self.inner.get_opts(location, options)).await })
    }

    fn get_ranges<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        ranges: &'life2 [Range<u64>],
    ) -> BoxFut<'async_trait, Vec<Bytes>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.run(OpKind::Get, location.as_ref(), self.inner.get_ranges(location, ranges)).await })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        // Each path is decided on its own; the ones no rule fails go to the wrapped store in
        // one stream so its batching is preserved.
        let this = self.clone();
        let inner = self.inner.clone();
        let decided = locations.map(move |loc| {
            let loc = loc?;
            match this.decide(OpKind::Delete, loc.as_ref()) {
                Some(FaultAction::Fail) => Err(injected_error(OpKind::Delete, loc.as_ref())),
                // Delays and ambiguity are not modelled for deletes: a delete is idempotent.
                _ => Ok(loc),
            }
        });
        let inner_stream = decided.flat_map(move |r| match r {
            Ok(loc) => inner.delete_stream(stream::once(async move { Ok(loc) }).boxed()),
            Err(e) => stream::once(async move { Err(e) }).boxed(),
        });
        inner_stream.boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let path = prefix.map(|p| p.to_string()).unwrap_or_default();
        match self.decide(OpKind::List, &path) {
            Some(FaultAction::Fail) | Some(FaultAction::Ambiguous) => {
                stream::once(async move { Err(injected_error(OpKind::List, &path)) }).boxed()
            }
            Some(FaultAction::Delay(d)) => {
                let inner = self.inner.list(prefix);
                stream::once(async move {
                    tokio::time::sleep(d).await;
                    inner
                })
                .flatten()
                .boxed()
            }
            None => self.inner.list(prefix),
        }
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let path = prefix.map(|p| p.to_string()).unwrap_or_default();
        match self.decide(OpKind::List, &path) {
            Some(FaultAction::Fail) | Some(FaultAction::Ambiguous) => {
                stream::once(async move { Err(injected_error(OpKind::List, &path)) }).boxed()
            }
            Some(FaultAction::Delay(d)) => {
                let inner = self.inner.list_with_offset(prefix, offset);
                stream::once(async move {
                    tokio::time::sleep(d).await;
                    inner
                })
                .flatten()
                .boxed()
            }
            None => self.inner.list_with_offset(prefix, offset),
        }
    }

    fn list_with_delimiter<'life0, 'life1, 'async_trait>(
        &'life0 self,
        prefix: Option<&'life1 Path>,
    ) -> BoxFut<'async_trait, ListResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let path = prefix.map(|p| p.to_string()).unwrap_or_default();
            self.run(OpKind::List, &path, self.inner.list_with_delimiter(prefix)).await
        })
    }

    fn copy_opts<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        from: &'life1 Path,
        to: &'life2 Path,
        options: CopyOptions,
    ) -> BoxFut<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.run(OpKind::Put, to.as_ref(), self.inner.copy_opts(from, to, options)).await })
    }

    fn rename_opts<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        from: &'life1 Path,
        to: &'life2 Path,
        options: RenameOptions,
    ) -> BoxFut<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.run(OpKind::Put, to.as_ref(), self.inner.rename_opts(from, to, options)).await })
    }
}

/// A multipart upload whose completion is subject to the store's PUT rules.
#[derive(Debug)]
struct FaultyUpload {
    /// The wrapped upload.
    inner: Box<dyn MultipartUpload>,
    /// The store whose rules apply.
    store: FaultyStore,
    /// Destination, for path rules.
    path: String,
}

impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.inner.put_part(data)
    }

    fn complete<'life0, 'async_trait>(&'life0 mut self) -> BoxFut<'async_trait, PutResult>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let store = self.store.clone();
            let path = self.path.clone();
            store.run(OpKind::Put, &path, self.inner.complete()).await
        })
    }

    fn abort<'life0, 'async_trait>(&'life0 mut self) -> BoxFut<'async_trait, ()>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.inner.abort().await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::ObjectStoreExt;

    fn store() -> FaultyStore {
        FaultyStore::new(Arc::new(InMemory::new()), 7)
    }

    #[tokio::test]
    async fn the_nth_matching_put_fails_once_and_the_others_succeed() {
        let s = store();
        s.fail_nth(OpKind::Put, 2);
        let p = Path::from("a");
        assert!(s.put(&p, Bytes::from_static(b"1").into()).await.is_ok());
        assert!(s.put(&p, Bytes::from_static(b"2").into()).await.is_err());
        assert!(s.put(&p, Bytes::from_static(b"3").into()).await.is_ok());
        assert_eq!(s.injected(), 1);
        assert_eq!(s.requests(OpKind::Put), 3);
    }

    #[tokio::test]
    async fn a_down_store_fails_everything_until_healed() {
        let s = store();
        let p = Path::from("a");
        s.put(&p, Bytes::from_static(b"1").into()).await.unwrap();
        s.set_down(true);
        assert!(s.get(&p).await.is_err());
        assert!(s.list(None).next().await.unwrap().is_err());
        assert!(s.delete(&p).await.is_err());
        s.set_down(false);
        assert_eq!(s.get(&p).await.unwrap().bytes().await.unwrap(), Bytes::from_static(b"1"));
        s.delete(&p).await.unwrap();
        assert!(s.get(&p).await.is_err());
    }

    #[tokio::test]
    async fn an_ambiguous_put_is_written_although_it_reports_failure() {
        let s = store();
        s.ambiguous_nth_put(1);
        let p = Path::from("x");
        assert!(s.put(&p, Bytes::from_static(b"v").into()).await.is_err());
        assert_eq!(s.get(&p).await.unwrap().bytes().await.unwrap(), Bytes::from_static(b"v"));
    }

    #[tokio::test]
    async fn path_rules_only_touch_matching_paths() {
        let s = store();
        s.add_rule(FaultRule::new(None, Trigger::Always, FaultAction::Fail).on_paths_containing("wal"));
        assert!(s.put(&Path::from("db/wal/1"), Bytes::new().into()).await.is_err());
        assert!(s.put(&Path::from("db/manifest/1"), Bytes::new().into()).await.is_ok());
    }

    #[tokio::test]
    async fn a_fraction_rule_replays_the_same_way_for_the_same_seed() {
        async fn outcomes(seed: u64) -> Vec<bool> {
            let s = FaultyStore::new(Arc::new(InMemory::new()), seed);
            s.fail_fraction(OpKind::Put, 0.5);
            let mut v = Vec::new();
            for i in 0..64 {
                v.push(s.put(&Path::from(format!("k{i}")), Bytes::new().into()).await.is_ok());
            }
            v
        }
        let a = outcomes(42).await;
        assert_eq!(a, outcomes(42).await);
        let failed = a.iter().filter(|ok| !**ok).count();
        assert!(failed > 10 && failed < 54, "{failed} of 64 failed");
    }

    #[tokio::test]
    async fn removing_a_rule_stops_its_faults() {
        let s = store();
        let id = s.add_rule(FaultRule::new(Some(OpKind::Get), Trigger::Always, FaultAction::Fail));
        let p = Path::from("a");
        s.put(&p, Bytes::new().into()).await.unwrap();
        assert!(s.get(&p).await.is_err());
        s.remove_rule(id);
        assert!(s.get(&p).await.is_ok());
    }
}
