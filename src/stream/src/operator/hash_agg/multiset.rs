//! A group's multiset of values (`min`/`max`, `count(DISTINCT)`, `string_agg`, ...), stored as
//! one state row per distinct value rather than inside the group's state: an epoch writes only
//! the values whose counts changed, so a change to a group of a million values writes a row or
//! two, not the million again (a blob per group made every INSERT into a big group rewrite it,
//! 280 MB of writes per single-row INSERT with three such calls over a million rows).
//!
//! Rows live in the aggregation's second state table, keyed by the group's vnode (so a
//! parallel actor owns its groups' values), the group key (length first, so one group's rows
//! are one prefix), the call and the encoded value; the value of a row is the count.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;

use eddy_common::codec::{table_prefix, vnode_of, KEY_PREFIX_LEN};
use eddy_common::{internal_err, Result};
use eddy_storage::{EpochBatch, ReadSnapshot};

use super::Acc;

/// Values with their multiplicities, and which of them changed since the group was last written.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Multiset {
    values: BTreeMap<Vec<u8>, i64>,
    touched: BTreeSet<Vec<u8>>,
}

impl Deref for Multiset {
    type Target = BTreeMap<Vec<u8>, i64>;
    fn deref(&self) -> &Self::Target {
        &self.values
    }
}

impl Multiset {
    /// Values as stored (nothing changed since).
    pub(super) fn loaded(values: BTreeMap<Vec<u8>, i64>) -> Self {
        Multiset { values, touched: BTreeSet::new() }
    }

    /// Values none of whose rows are written yet.
    pub(super) fn unwritten(values: BTreeMap<Vec<u8>, i64>) -> Self {
        let touched = values.keys().cloned().collect();
        Multiset { values, touched }
    }

    /// Adds `sign` to the count of `value` (a value whose count reaches 0 leaves).
    pub(super) fn add(&mut self, value: &[u8], sign: i64) {
        match self.values.get_mut(value) {
            Some(c) => {
                *c += sign;
                if *c == 0 {
                    self.values.remove(value);
                }
            }
            None => {
                self.values.insert(value.to_vec(), sign);
            }
        }
        if !self.touched.contains(value) {
            self.touched.insert(value.to_vec());
        }
    }

    /// Keeps only the smallest value (`smallest`) or the largest (an append-only `min`/`max`).
    pub(super) fn keep_one(&mut self, smallest: bool) {
        while self.values.len() > 1 {
            let gone = if smallest { self.values.pop_last() } else { self.values.pop_first() };
            if let Some((v, _)) = gone {
                self.touched.insert(v);
            }
        }
    }

    /// The changed values with their counts now (0: gone), forgetting that they changed.
    pub(super) fn take_changes(&mut self) -> Vec<(Vec<u8>, i64)> {
        std::mem::take(&mut self.touched)
            .into_iter()
            .map(|v| {
                let c = self.values.get(&v).copied().unwrap_or(0);
                (v, c)
            })
            .collect()
    }

    /// Every value's row is to be deleted (the group is dropped as a whole).
    pub(super) fn take_all(&mut self) -> Vec<Vec<u8>> {
        let mut all = std::mem::take(&mut self.touched);
        all.extend(std::mem::take(&mut self.values).into_keys());
        all.into_iter().collect()
    }
}

/// The prefix of the rows of group `group` in table `table_id`.
pub(super) fn group_prefix(table_id: u32, group: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(KEY_PREFIX_LEN + 4 + group.len() + 2);
    k.extend_from_slice(&table_prefix(table_id));
    k.extend_from_slice(&vnode_of(group).to_be_bytes());
    k.extend_from_slice(&(group.len() as u32).to_be_bytes());
    k.extend_from_slice(group);
    k
}

/// The key of `value` of call `call` under a group's `prefix` ([`group_prefix`]).
pub(super) fn value_key(prefix: &[u8], call: usize, value: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 2 + value.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(&(call as u16).to_be_bytes());
    k.extend_from_slice(value);
    k
}

/// Splits a row of a group (key under `prefix`, value the count) into call, value and count.
pub(super) fn parse_row<'a>(prefix_len: usize, key: &'a [u8], count: &[u8]) -> Result<(usize, &'a [u8], i64)> {
    let rest = key.get(prefix_len..).filter(|r| r.len() >= 2).ok_or_else(|| internal_err!("short multiset row key"))?;
    let call = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
    let count = i64::from_be_bytes(count.try_into().map_err(|_| internal_err!("bad multiset count"))?);
    Ok((call, &rest[2..], count))
}

/// A group's multiset rows as read (key, count), with the length of their group prefix.
pub(super) type ValueRows = Option<(usize, BTreeMap<Vec<u8>, Vec<u8>>)>;

/// The committed multiset rows of group `group` in table `table`, with their prefix.
pub(super) async fn stored_values(snapshot: &ReadSnapshot, table: u32, group: &[u8]) -> Result<(Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>)> {
    let prefix = group_prefix(table, group);
    let rows = snapshot.scan_prefix_cached(&prefix).await?.into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
    Ok((prefix, rows))
}

/// Fills a loaded group's multisets from its `rows` (keys under a prefix of `prefix_len`).
pub(super) fn fill(accs: &mut [Acc], prefix_len: usize, rows: &BTreeMap<Vec<u8>, Vec<u8>>) -> Result<()> {
    let mut maps: Vec<BTreeMap<Vec<u8>, i64>> = vec![BTreeMap::new(); accs.len()];
    for (k, v) in rows {
        let (call, value, count) = parse_row(prefix_len, k, v)?;
        maps.get_mut(call).ok_or_else(|| internal_err!("a multiset row of no call"))?.insert(value.to_vec(), count);
    }
    for (acc, map) in accs.iter_mut().zip(maps) {
        match acc {
            Acc::Values(m) => *m = Multiset::loaded(map),
            _ if map.is_empty() => {}
            _ => return Err(internal_err!("multiset rows of a call without one")),
        }
    }
    Ok(())
}

/// Writes the rows of the values whose counts changed in group `group`'s multisets.
pub(super) fn write_changes(accs: &mut [Acc], table: Option<u32>, group: &[u8], batch: &mut EpochBatch) -> Result<()> {
    let mut prefix = None;
    for (call, acc) in accs.iter_mut().enumerate() {
        let Acc::Values(m) = acc else { continue };
        for (value, count) in m.take_changes() {
            let prefix = match &prefix {
                Some(p) => p,
                None => prefix.insert(group_prefix(table.ok_or_else(|| internal_err!("an aggregation's multiset without its state table"))?, group)),
            };
            let row = value_key(prefix, call, &value);
            if count == 0 {
                batch.delete(row);
            } else {
                batch.put(row, count.to_be_bytes().to_vec());
            }
        }
    }
    Ok(())
}

/// Deletes every row of group `group`'s multisets (a group dropped whole, e.g. a closed window).
pub(super) fn delete_all(accs: &mut [Acc], table: u32, group: &[u8], batch: &mut EpochBatch) {
    let prefix = group_prefix(table, group);
    for (call, acc) in accs.iter_mut().enumerate() {
        if let Acc::Values(m) = acc {
            for value in m.take_all() {
                batch.delete(value_key(&prefix, call, &value));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_name_each_changed_value_once_with_its_count() {
        let mut m = Multiset::default();
        m.add(b"b", 1);
        m.add(b"a", 1);
        m.add(b"a", 1);
        m.add(b"b", -1);
        assert_eq!(m.take_changes(), vec![(b"a".to_vec(), 2), (b"b".to_vec(), 0)]);
        assert!(m.take_changes().is_empty());
        m.add(b"c", 1);
        m.keep_one(true);
        assert_eq!(m.len(), 1);
        assert_eq!(m.take_changes(), vec![(b"c".to_vec(), 0)]);
    }

    #[test]
    fn one_groups_rows_are_one_prefix() {
        // A group key that extends another's is not under its prefix (the length comes first).
        let (a, b) = (group_prefix(7, b"ab"), group_prefix(7, b"abc"));
        assert!(!value_key(&b, 0, b"x").starts_with(&a));
        let k = value_key(&a, 3, b"xyz");
        assert_eq!(parse_row(a.len(), &k, &5i64.to_be_bytes()).unwrap(), (3, &b"xyz"[..], 5));
    }
}
