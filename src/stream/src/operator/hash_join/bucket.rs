//! The rows a join keeps per bucket (a join key, or a row whose key never matches), and the
//! layout of their state keys.

use std::collections::BTreeMap;

use eddy_common::codec::{table_prefix, vnode_of, KEY_PREFIX_LEN};
use eddy_common::{internal_err, Result};

use super::Side;

/// One distinct row of a side.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Entry {
    pub(super) count: i64,
    pub(super) degree: i64,
}

/// The rows of one join key: a short vector while small (most keys have a row or a few: a
/// B-tree node would cost ~0.5 KiB per key), a B-tree once large.
#[derive(Debug)]
pub(super) enum Bucket {
    Few(Vec<(Vec<u8>, Entry)>),
    Many(BTreeMap<Vec<u8>, Entry>),
}

/// Rows a bucket keeps in a vector.
const FEW: usize = 16;

impl Default for Bucket {
    fn default() -> Self {
        Bucket::Few(Vec::new())
    }
}

impl Bucket {
    pub(super) fn get(&self, row: &[u8]) -> Option<&Entry> {
        match self {
            Bucket::Few(v) => v.iter().find(|(r, _)| r.as_slice() == row).map(|(_, e)| e),
            Bucket::Many(m) => m.get(row),
        }
    }

    pub(super) fn get_mut(&mut self, row: &[u8]) -> Option<&mut Entry> {
        match self {
            Bucket::Few(v) => v.iter_mut().find(|(r, _)| r.as_slice() == row).map(|(_, e)| e),
            Bucket::Many(m) => m.get_mut(row),
        }
    }

    /// The entry of `row`, inserted as `new` if absent.
    pub(super) fn get_or_insert(&mut self, row: &[u8], new: Entry) -> &mut Entry {
        if let Bucket::Few(v) = self {
            if v.len() >= FEW && !v.iter().any(|(r, _)| r.as_slice() == row) {
                *self = Bucket::Many(std::mem::take(v).into_iter().collect());
            }
        }
        match self {
            Bucket::Few(v) => {
                let i = match v.iter().position(|(r, _)| r.as_slice() == row) {
                    Some(i) => i,
                    None => {
                        v.push((row.to_vec(), new));
                        v.len() - 1
                    }
                };
                &mut v[i].1
            }
            Bucket::Many(m) => m.entry(row.to_vec()).or_insert(new),
        }
    }

    pub(super) fn remove(&mut self, row: &[u8]) {
        match self {
            Bucket::Few(v) => v.retain(|(r, _)| r.as_slice() != row),
            Bucket::Many(m) => {
                m.remove(row);
            }
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        match self {
            Bucket::Few(v) => v.is_empty(),
            Bucket::Many(m) => m.is_empty(),
        }
    }

    pub(super) fn iter(&self) -> Box<dyn Iterator<Item = (&Vec<u8>, &Entry)> + '_> {
        match self {
            Bucket::Few(v) => Box::new(v.iter().map(|(r, e)| (r, e))),
            Bucket::Many(m) => Box::new(m.iter()),
        }
    }
}

/// Estimated bytes a cached row costs beyond its encoding.
pub(super) const ROW_OVERHEAD_BYTES: usize = 48;

pub(super) fn idx(side: Side) -> usize {
    match side {
        Side::Left => 0,
        Side::Right => 1,
    }
}

/// Both sides' rows of one bucket.
#[derive(Debug, Default)]
pub(super) struct Pair {
    pub(super) sides: [Bucket; 2],
}

impl Pair {
    pub(super) fn is_empty(&self) -> bool {
        self.sides.iter().all(Bucket::is_empty)
    }

    /// Estimated heap bytes.
    pub(super) fn bytes(&self) -> usize {
        self.sides.iter().flat_map(|b| b.iter()).map(|(r, _)| r.len() + ROW_OVERHEAD_BYTES).sum()
    }
}

/// The bucket of a `side` row: its join key (tag 0), or, for a key that never matches, the row
/// itself (tag 1).
pub(super) fn bucket_id(key: Option<&[u8]>, side: Side, row: &[u8]) -> Vec<u8> {
    match key {
        Some(k) => {
            let mut b = Vec::with_capacity(1 + k.len());
            b.push(0);
            b.extend_from_slice(k);
            b
        }
        None => {
            let mut b = Vec::with_capacity(2 + row.len());
            b.extend_from_slice(&[1, idx(side) as u8]);
            b.extend_from_slice(row);
            b
        }
    }
}

/// True for the bucket of a join key (whose rows match the other side's).
pub(super) fn matchable(bucket: &[u8]) -> bool {
    bucket.first() == Some(&0)
}

/// Key prefix of a bucket's entries: table, the bucket's vnode, its length, the bucket.
pub(super) fn bucket_prefix(table_id: u32, bucket: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(KEY_PREFIX_LEN + 4 + bucket.len() + 1);
    k.extend_from_slice(&table_prefix(table_id));
    k.extend_from_slice(&vnode_of(bucket).to_be_bytes());
    k.extend_from_slice(&u32::try_from(bucket.len()).unwrap_or(u32::MAX).to_be_bytes());
    k.extend_from_slice(bucket);
    k
}

/// State key of a row of side `tag` in `bucket`.
pub(super) fn entry_key(table_id: u32, bucket: &[u8], tag: u8, row: &[u8]) -> Vec<u8> {
    let mut k = bucket_prefix(table_id, bucket);
    k.push(tag);
    k.extend_from_slice(row);
    k
}

/// Splits a state key into its bucket, side and row.
pub(super) fn parse_entry_key(key: &[u8]) -> Result<(&[u8], usize, &[u8])> {
    let bad = || internal_err!("malformed join state key");
    let body = key.get(KEY_PREFIX_LEN..).ok_or_else(bad)?;
    let (len, body) = body.split_first_chunk::<4>().ok_or_else(bad)?;
    let len = u32::from_be_bytes(*len) as usize;
    let bucket = body.get(..len).ok_or_else(bad)?;
    let (&side, row) = body.get(len..).and_then(<[u8]>::split_first).ok_or_else(bad)?;
    if side > 1 {
        return Err(bad());
    }
    Ok((bucket, usize::from(side), row))
}
