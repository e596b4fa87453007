//! Spill runs: the key layout and the pure decisions behind them (docs/architecture.md, "State layers":
//! an epoch's changes need not fit in memory).
//!
//! A *run* is a sorted set of one epoch's ops written to SlateDB before that epoch commits, under
//! a private key space in the system table (table id 0):
//!
//! ```text
//! key   = RUN_PREFIX | run_id (u64 BE) | original key
//! value = tag (1 = put, 0 = delete) | value bytes
//! ```
//!
//! Run ids are `generation << 32 | counter`, so they are unique across restarts (the generation
//! is made durable when the store opens, see [`crate::protocol::CommitRecord::generation`]).
//!
//! One batch writes all its spills into one run (`EpochBatch::spill`): the run's entry for a
//! key is SlateDB's newest write of it, so the run holds the batch's last spilled version.
//!
//! A run becomes *live* when the commit of its epoch lists it under [`LIVE_RUNS_KEY`] (oldest
//! first), in the same atomic write batch as the epoch's other changes and its commit record.
//! A run that is never made live is invisible and is garbage; it is deleted with
//! `StateStore::discard_run`, or on the next open.
//!
//! Invariants (kept by [`commit_writes`] and [`fold_writes`], relied on by every read):
//! 1. A key written by the in-memory tail of a commit is absent from every live run: the commit
//!    deletes `run_key(r, k)` for each live run `r` and each run of the committing batch. So
//!    **if a live run holds key k, it holds the newest committed version of k** among the base
//!    and every run committed before it. (Two runs of the *same* batch may both hold k; the
//!    later one holds the newer version.)
//! 2. Consequently a reader resolves a key by checking the live runs newest first and the base
//!    keys last; the first source that holds the key (as a put or as a delete) decides.
//! 3. Folding moves the entries of the *oldest* live run into base keys. Since no older run
//!    remains and every newer run that holds the same key holds a newer version, moving them
//!    changes no read: snapshots taken before and after a fold step read the same data.

use bytes::Bytes;
use eddy_common::{internal_err, Result};

/// Identifier of a run: `generation << 32 | counter`.
pub type RunId = u64;

/// Key prefix of every run entry (system key space, table id 0).
pub const RUN_PREFIX: &[u8] = b"\0\0\0\0run/";

/// Key of the live-run list: run ids, oldest first, 8 bytes each (big-endian).
pub const LIVE_RUNS_KEY: &[u8] = b"\0\0\0\0meta/runs";

/// Key of the commit record, in the system key space (table id 0).
pub const COMMIT_RECORD_KEY: &[u8] = b"\0\0\0\0meta/commit";

/// Length of `RUN_PREFIX | run_id`, the part of a run key before the original key.
pub const RUN_KEY_HEADER_LEN: usize = RUN_PREFIX.len() + 8;

/// Value tag of a put in a run.
const TAG_PUT: u8 = 1;
/// Value tag of a delete in a run.
const TAG_DELETE: u8 = 0;

/// One logical op: a key and its new value (`None` deletes it).
pub type Op = (Vec<u8>, Option<Vec<u8>>);

/// The run id for `counter` in `generation`; `None` if the generation does not fit 32 bits.
pub fn make_run_id(generation: u64, counter: u32) -> Option<RunId> {
    (generation <= u64::from(u32::MAX)).then(|| (generation << 32) | u64::from(counter))
}

/// The generation that minted `run`.
pub fn run_generation(run: RunId) -> u64 {
    run >> 32
}

/// `RUN_PREFIX | run`: the prefix of all of one run's entries.
pub fn run_prefix(run: RunId) -> Vec<u8> {
    let mut k = Vec::with_capacity(RUN_KEY_HEADER_LEN);
    k.extend_from_slice(RUN_PREFIX);
    k.extend_from_slice(&run.to_be_bytes());
    k
}

/// The key under which `run` stores its entry for `key`.
pub fn run_key(run: RunId, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(RUN_KEY_HEADER_LEN + key.len());
    k.extend_from_slice(RUN_PREFIX);
    k.extend_from_slice(&run.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// Splits a run key into its run id and original key.
pub fn split_run_key(key: &[u8]) -> Option<(RunId, &[u8])> {
    let rest = key.strip_prefix(RUN_PREFIX)?;
    // `get(..8)` yields exactly 8 bytes, so the conversion cannot fail.
    let id = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    Some((id, &rest[8..]))
}

/// Encodes an op's value for a run entry.
pub fn encode_run_value(value: Option<&[u8]>) -> Vec<u8> {
    match value {
        Some(v) => {
            let mut out = Vec::with_capacity(1 + v.len());
            out.push(TAG_PUT);
            out.extend_from_slice(v);
            out
        }
        None => vec![TAG_DELETE],
    }
}

/// Decodes a run entry's value: `Some(v)` for a put, `None` for a delete.
pub fn decode_run_value(raw: &Bytes) -> Result<Option<Bytes>> {
    match raw.first() {
        Some(&TAG_PUT) => Ok(Some(raw.slice(1..))),
        Some(&TAG_DELETE) if raw.len() == 1 => Ok(None),
        _ => Err(internal_err!("corrupt run entry: value of {} bytes with tag {:?}", raw.len(), raw.first())),
    }
}

/// Serialized live-run list.
pub fn encode_live_runs(runs: &[RunId]) -> Vec<u8> {
    runs.iter().flat_map(|r| r.to_be_bytes()).collect()
}

/// Parses [`encode_live_runs`]'s output.
pub fn decode_live_runs(bytes: &[u8]) -> Result<Vec<RunId>> {
    if !bytes.len().is_multiple_of(8) {
        return Err(internal_err!("corrupt live-run list of {} bytes", bytes.len()));
    }
    Ok(bytes.chunks_exact(8).map(|c| u64::from_be_bytes(c.try_into().unwrap_or([0; 8]))).collect())
}

/// True for keys that only the store itself may write: run entries and the store's metadata.
pub fn is_reserved_key(key: &[u8]) -> bool {
    key.starts_with(RUN_PREFIX) || key == LIVE_RUNS_KEY || key == COMMIT_RECORD_KEY
}

/// Checks that a caller's op may be written: not empty (SlateDB refuses empty keys) and not a
/// reserved key.
pub fn check_user_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(internal_err!("an epoch batch wrote an empty key"));
    }
    if is_reserved_key(key) {
        return Err(internal_err!("an epoch batch wrote the reserved state-store key {key:?}"));
    }
    Ok(())
}

/// Sorts `ops` by key and keeps the last op of each key (batch order decides among equal keys).
pub fn sort_last_wins(mut ops: Vec<Op>) -> Vec<Op> {
    // Stable: equal keys keep their batch order, so the last of each group is the newest.
    ops.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<Op> = Vec::with_capacity(ops.len());
    for op in ops {
        match out.last_mut() {
            Some(last) if last.0 == op.0 => *last = op,
            _ => out.push(op),
        }
    }
    out
}

/// Checks the runs a batch wants to make live: all minted in this `generation` (a run written
/// before the store was recovered may have been lost with the old SlateDB instance), none
/// already live, none listed twice.
pub fn check_new_runs(generation: u64, live: &[RunId], new_runs: &[RunId]) -> Result<()> {
    for (i, r) in new_runs.iter().enumerate() {
        if run_generation(*r) != generation {
            return Err(internal_err!(
                "epoch batch holds run {r:#x} of generation {}, but the store is in generation {generation}: \
                 it was spilled before the store was recovered and must be rebuilt",
                run_generation(*r)
            ));
        }
        if live.contains(r) || new_runs[..i].contains(r) {
            return Err(internal_err!("run {r:#x} committed twice"));
        }
    }
    Ok(())
}

/// The smallest and the largest original key written to a run (both inclusive): every entry
/// the run holds lies between them. The state store records them as runs are written, so a
/// commit shadows, and a read probes, only the runs that can hold a key. A run written by
/// another process (found live on open) has no known bounds and is treated as holding any key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBounds {
    pub lo: Vec<u8>,
    pub hi: Vec<u8>,
}

impl KeyBounds {
    /// The bounds of `ops`, sorted by key; `None` if empty.
    pub fn of_sorted(ops: &[Op]) -> Option<Self> {
        Some(Self { lo: ops.first()?.0.clone(), hi: ops.last()?.0.clone() })
    }

    /// Widens these bounds to cover `other` too.
    pub fn widen(&mut self, other: KeyBounds) {
        if other.lo < self.lo {
            self.lo = other.lo;
        }
        if other.hi > self.hi {
            self.hi = other.hi;
        }
    }

    /// True if `key` lies within the bounds.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.lo.as_slice() <= key && key <= self.hi.as_slice()
    }

    /// True if some key of the range (`start`, `end`) lies within the bounds.
    pub fn overlaps(&self, start: &std::ops::Bound<Vec<u8>>, end: &std::ops::Bound<Vec<u8>>) -> bool {
        use std::ops::Bound::*;
        let after_start = match start {
            Included(s) => self.hi >= *s,
            Excluded(s) => self.hi > *s,
            Unbounded => true,
        };
        let before_end = match end {
            Included(e) => self.lo <= *e,
            Excluded(e) => self.lo < *e,
            Unbounded => true,
        };
        after_start && before_end
    }
}

/// True if a run with bounds `bounds` may hold `key` (unknown bounds may hold any key).
pub fn may_hold(bounds: Option<&KeyBounds>, key: &[u8]) -> bool {
    bounds.is_none_or(|b| b.contains(key))
}

/// Everything one commit writes besides its commit record, as ops of one atomic batch: the
/// tail on base keys, the shadowing deletes of invariant 1, and the new live-run list when
/// `new_runs` is not empty (returned as well). `bounds` gives each run's [`KeyBounds`] where
/// known: a tail key gets a shadowing delete only in the runs whose bounds hold it. (Without
/// them a commit wrote one delete per tail key and live run: a view's 100K-group tail after a
/// bulk load of 40 runs made a 4M-entry SlateDB write.)
pub fn commit_writes(
    tail: Vec<Op>,
    live: &[RunId],
    new_runs: &[RunId],
    bounds: impl Fn(RunId) -> Option<KeyBounds>,
) -> (Vec<Op>, Vec<RunId>) {
    let tail = sort_last_wins(tail);
    let shadowed: Vec<(RunId, Option<KeyBounds>)> = live.iter().chain(new_runs).map(|r| (*r, bounds(*r))).collect();
    let mut writes = Vec::with_capacity(tail.len() + 1);
    for (key, value) in tail {
        for (r, b) in &shadowed {
            if may_hold(b.as_ref(), &key) {
                writes.push((run_key(*r, &key), None));
            }
        }
        writes.push((key, value));
    }
    let mut next_live = live.to_vec();
    if !new_runs.is_empty() {
        next_live.extend_from_slice(new_runs);
        writes.push((LIVE_RUNS_KEY.to_vec(), Some(encode_live_runs(&next_live))));
    }
    (writes, next_live)
}

/// One fold step's writes: move `entries` (run keys and raw run values, read from `run`, the
/// oldest live run) into base keys and delete them from the run; when `exhausted`, drop the
/// run from the live list. Returns the writes and the live list after the step.
pub fn fold_writes(run: RunId, entries: &[(Bytes, Bytes)], exhausted: bool, live: &[RunId]) -> Result<(Vec<Op>, Vec<RunId>)> {
    if live.first() != Some(&run) {
        return Err(internal_err!("fold of run {run:#x}, which is not the oldest live run"));
    }
    let mut writes = Vec::with_capacity(entries.len() * 2 + 1);
    for (rk, raw) in entries {
        let Some((id, key)) = split_run_key(rk) else {
            return Err(internal_err!("fold read a key outside any run: {rk:?}"));
        };
        if id != run {
            return Err(internal_err!("fold of run {run:#x} read an entry of run {id:#x}"));
        }
        writes.push((key.to_vec(), decode_run_value(raw)?.map(|v| v.to_vec())));
        writes.push((rk.to_vec(), None));
    }
    let mut next_live = live.to_vec();
    if exhausted {
        next_live.remove(0);
        writes.push((LIVE_RUNS_KEY.to_vec(), Some(encode_live_runs(&next_live))));
    }
    Ok((writes, next_live))
}

/// Where an [`crate::EpochBatch`] spills its runs and reads them back: implemented by the
/// state store. Runs written here stay invisible until a commit makes them live.
pub trait RunStore {
    /// A fresh run id.
    fn mint_run_id(&self) -> eddy_common::Result<RunId>;
    /// Writes `ops` (sorted, one per key) into run `run`.
    fn write_run_entries(&self, run: RunId, ops: &[Op]) -> impl std::future::Future<Output = eddy_common::Result<()>> + Send;
    /// Run `run`'s entry for `key`: absent, a delete, or a value.
    fn run_get(&self, run: RunId, key: &[u8]) -> impl std::future::Future<Output = eddy_common::Result<Option<Option<bytes::Bytes>>>> + Send;
    /// Deletes run `run`'s entries; the number deleted.
    fn discard_run(&self, run: RunId) -> impl std::future::Future<Output = eddy_common::Result<usize>> + Send;
}

impl<S: RunStore + Send + Sync> RunStore for std::sync::Arc<S> {
    fn mint_run_id(&self) -> eddy_common::Result<RunId> {
        S::mint_run_id(self)
    }

    fn write_run_entries(&self, run: RunId, ops: &[Op]) -> impl std::future::Future<Output = eddy_common::Result<()>> + Send {
        S::write_run_entries(self, run, ops)
    }

    fn run_get(&self, run: RunId, key: &[u8]) -> impl std::future::Future<Output = eddy_common::Result<Option<Option<bytes::Bytes>>>> + Send {
        S::run_get(self, run, key)
    }

    fn discard_run(&self, run: RunId) -> impl std::future::Future<Output = eddy_common::Result<usize>> + Send {
        S::discard_run(self, run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str) -> Op {
        (k.as_bytes().to_vec(), Some(v.as_bytes().to_vec()))
    }

    fn del(k: &str) -> Op {
        (k.as_bytes().to_vec(), None)
    }

    #[test]
    fn run_ids_carry_their_generation_and_sort_by_it() {
        let a = make_run_id(3, u32::MAX).unwrap();
        let b = make_run_id(4, 0).unwrap();
        assert_eq!(run_generation(a), 3);
        assert!(run_key(a, b"z") < run_key(b, b"a"));
        assert_eq!(make_run_id(1 << 32, 0), None);
    }

    #[test]
    fn a_run_key_splits_back_into_run_and_key() {
        let k = run_key(77, b"\0\0\0\x05abc");
        assert_eq!(split_run_key(&k), Some((77, &b"\0\0\0\x05abc"[..])));
        assert_eq!(split_run_key(b"\0\0\0\0run/"), None);
        assert!(is_reserved_key(&k));
    }

    #[test]
    fn run_values_tag_puts_and_deletes() {
        let p = Bytes::from(encode_run_value(Some(b"v")));
        let d = Bytes::from(encode_run_value(None));
        assert_eq!(decode_run_value(&p).unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(decode_run_value(&d).unwrap(), None);
        assert_eq!(decode_run_value(&Bytes::from(encode_run_value(Some(b"")))).unwrap().as_deref(), Some(&b""[..]));
        assert!(decode_run_value(&Bytes::from_static(&[7, 1])).is_err());
        assert!(decode_run_value(&Bytes::new()).is_err());
    }

    #[test]
    fn the_live_run_list_survives_encoding_and_rejects_garbage() {
        let runs = vec![1, u64::MAX, 1 << 32];
        assert_eq!(decode_live_runs(&encode_live_runs(&runs)).unwrap(), runs);
        assert!(decode_live_runs(&[1, 2, 3]).is_err());
    }

    #[test]
    fn sorting_keeps_the_last_op_of_each_key() {
        let ops = vec![put("b", "1"), put("a", "1"), del("b"), put("a", "2"), put("c", "1")];
        assert_eq!(sort_last_wins(ops), vec![put("a", "2"), del("b"), put("c", "1")]);
    }

    #[test]
    fn reserved_and_empty_keys_are_refused() {
        assert!(check_user_key(b"").is_err());
        assert!(check_user_key(COMMIT_RECORD_KEY).is_err());
        assert!(check_user_key(&run_key(1, b"k")).is_err());
        assert!(check_user_key(b"\0\0\0\0catalog/x").is_ok());
    }

    #[test]
    fn a_tail_write_shadows_its_key_in_every_live_and_new_run() {
        let (writes, live) = commit_writes(vec![put("k", "v")], &[1, 2], &[3], |_| None);
        assert_eq!(live, vec![1, 2, 3]);
        let deletes: Vec<_> = writes.iter().filter(|(k, v)| v.is_none() && k.starts_with(RUN_PREFIX)).collect();
        assert_eq!(deletes.len(), 3);
        for r in [1, 2, 3] {
            assert!(writes.contains(&(run_key(r, b"k"), None)));
        }
        assert!(writes.contains(&put("k", "v")));
        assert!(writes.contains(&(LIVE_RUNS_KEY.to_vec(), Some(encode_live_runs(&[1, 2, 3])))));
    }

    #[test]
    fn a_tail_write_shadows_its_key_only_in_runs_whose_bounds_hold_it() {
        let bounds = |r: RunId| match r {
            1 => KeyBounds::of_sorted(&[put("a", ""), put("f", "")]),
            2 => KeyBounds::of_sorted(&[put("m", ""), put("z", "")]),
            _ => None,
        };
        let (writes, live) = commit_writes(vec![put("b", "v"), del("f"), put("g", "v")], &[1, 2], &[3], bounds);
        assert_eq!(live, vec![1, 2, 3]);
        let mut deletes: Vec<_> = writes.iter().filter(|(k, _)| k.starts_with(RUN_PREFIX)).map(|(k, _)| split_run_key(k).unwrap()).collect();
        deletes.sort();
        // Run 1 holds a..=f, run 2 m..=z, run 3 anything (unknown bounds).
        assert_eq!(deletes, vec![(1, &b"b"[..]), (1, &b"f"[..]), (3, &b"b"[..]), (3, &b"f"[..]), (3, &b"g"[..])]);
    }

    #[test]
    fn key_bounds_widen_and_test_ranges() {
        use std::ops::Bound::*;
        let mut b = KeyBounds::of_sorted(&[put("d", ""), put("f", "")]).unwrap();
        b.widen(KeyBounds::of_sorted(&[put("b", ""), put("e", "")]).unwrap());
        assert_eq!(b, KeyBounds { lo: b"b".to_vec(), hi: b"f".to_vec() });
        assert!(b.contains(b"b") && b.contains(b"f") && b.contains(b"c\xff") && !b.contains(b"a") && !b.contains(b"f\0"));
        assert!(b.overlaps(&Included(b"f".to_vec()), &Unbounded));
        assert!(!b.overlaps(&Excluded(b"f".to_vec()), &Unbounded));
        assert!(!b.overlaps(&Unbounded, &Excluded(b"b".to_vec())));
        assert!(b.overlaps(&Unbounded, &Included(b"b".to_vec())));
        assert!(b.overlaps(&Included(b"c".to_vec()), &Excluded(b"d".to_vec())));
        assert!(KeyBounds::of_sorted(&[]).is_none());
        assert!(may_hold(None, b"anything"));
    }

    #[test]
    fn a_commit_without_new_runs_leaves_the_live_list_alone() {
        let (writes, live) = commit_writes(vec![put("k", "v"), del("k")], &[], &[], |_| None);
        assert!(live.is_empty());
        assert_eq!(writes, vec![del("k")]);
    }

    #[test]
    fn runs_of_an_older_generation_cannot_commit() {
        let old = make_run_id(1, 0).unwrap();
        let new = make_run_id(2, 0).unwrap();
        assert!(check_new_runs(2, &[], &[old]).is_err());
        assert!(check_new_runs(2, &[old], &[new]).is_ok());
        assert!(check_new_runs(2, &[new], &[new]).is_err());
        assert!(check_new_runs(2, &[], &[new, new]).is_err());
    }

    #[test]
    fn folding_moves_entries_to_base_and_drops_an_exhausted_run() {
        let entries = vec![
            (Bytes::from(run_key(5, b"a")), Bytes::from(encode_run_value(Some(b"1")))),
            (Bytes::from(run_key(5, b"b")), Bytes::from(encode_run_value(None))),
        ];
        let (writes, live) = fold_writes(5, &entries, true, &[5, 6]).unwrap();
        assert_eq!(live, vec![6]);
        assert!(writes.contains(&put("a", "1")));
        assert!(writes.contains(&del("b")));
        assert!(writes.contains(&(run_key(5, b"a"), None)));
        assert!(writes.contains(&(LIVE_RUNS_KEY.to_vec(), Some(encode_live_runs(&[6])))));
        let (_, live) = fold_writes(5, &entries, false, &[5, 6]).unwrap();
        assert_eq!(live, vec![5, 6]);
    }

    #[test]
    fn only_the_oldest_live_run_may_fold() {
        assert!(fold_writes(6, &[], true, &[5, 6]).is_err());
        let stray = vec![(Bytes::from(run_key(9, b"a")), Bytes::from(encode_run_value(None)))];
        assert!(fold_writes(5, &stray, false, &[5]).is_err());
    }
}
