//! Estimated bytes of a relation's state, for `pg_table_size` and friends.
//!
//! A relation's entries are its keys under `table_prefix(id)`; most state tables spread them
//! over the 256 vnodes that follow the prefix (`codec::make_key`), by a hash, so the first
//! vnodes hold about their share of the whole. [`ReadSnapshot::estimate_prefix_bytes`] reads
//! the prefix in key order: a relation below [`EXACT_BYTES`] is counted exactly; past it, the
//! read stops at the next vnode boundary and scales what it read by the vnodes it covered.
//! Keys that do not spread (a top-N's or a sink log's entries share one vnode) are read on up
//! to [`MAX_READ_BYTES`], which is then a lower bound. Bytes are keys plus values as stored
//! (before SlateDB's block format); superseded versions not yet compacted are not counted.
//! The cost is bounded by what is read, whatever the relation's size.

use eddy_common::codec::{KEY_PREFIX_LEN, VNODE_COUNT};
use eddy_common::Result;

use crate::scan::{prefix_bounds, ReadSnapshot};

/// Relations up to this size are counted exactly.
pub const EXACT_BYTES: u64 = 1 << 20;

/// The most bytes one estimate reads.
pub const MAX_READ_BYTES: u64 = 16 << 20;

/// Fewest distinct vnodes seen before the read is scaled up: fewer means the keys do not
/// spread by vnode, and scaling would overstate them.
const MIN_VNODES: u32 = 16;

impl ReadSnapshot {
    /// Estimated bytes (keys and values) of the entries under `prefix`, a relation's 4-byte
    /// table prefix (see the module docs).
    pub async fn estimate_prefix_bytes(&self, prefix: &[u8]) -> Result<u64> {
        let (start, end) = prefix_bounds(prefix);
        let mut cursor = self.scan_batches(start, end, 1024).await?;
        let (mut bytes, mut vnodes, mut current) = (0u64, 0u32, None::<u16>);
        while let Some(batch) = cursor.next_batch().await? {
            for (k, v) in &batch {
                let vnode = k.get(prefix.len()..KEY_PREFIX_LEN).map(|b| u16::from_be_bytes([b[0], b[1]]));
                if vnode != current {
                    if let Some(done) = current.filter(|_| bytes >= EXACT_BYTES && vnodes >= MIN_VNODES) {
                        // Vnodes 0 ..= `done` are read (an empty one holds nothing to read).
                        return Ok(scale(bytes, u64::from(done) + 1));
                    }
                    current = vnode;
                    vnodes += 1;
                }
                bytes += (k.len() + v.len()) as u64;
                if bytes >= MAX_READ_BYTES {
                    return Ok(match current {
                        Some(at) if vnodes >= MIN_VNODES => scale(bytes, u64::from(at) + 1),
                        _ => bytes,
                    });
                }
            }
        }
        Ok(bytes)
    }
}

/// `bytes` read from the first `covered` vnodes, scaled to all of them.
fn scale(bytes: u64, covered: u64) -> u64 {
    bytes.saturating_mul(u64::from(VNODE_COUNT)) / covered.clamp(1, u64::from(VNODE_COUNT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store_tests::memory_store;
    use crate::EpochBatch;
    use eddy_common::codec::{make_key, table_prefix};

    async fn store_with(rows: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> ReadSnapshot {
        let store = memory_store().await;
        let mut batch = EpochBatch::default();
        for (k, v) in rows {
            batch.put(k, v);
        }
        store.commit(eddy_common::Epoch(1), batch).await.unwrap();
        store.snapshot()
    }

    #[tokio::test]
    async fn small_relations_are_counted_exactly_and_others_are_not_counted() {
        let rows = (0..100u32).map(|i| (make_key(7, &i.to_be_bytes()), vec![0u8; 10]));
        let other = (0..50u32).map(|i| (make_key(8, &i.to_be_bytes()), vec![0u8; 1000]));
        let snapshot = store_with(rows.chain(other)).await;
        assert_eq!(snapshot.estimate_prefix_bytes(&table_prefix(7)).await.unwrap(), 100 * (6 + 4 + 10));
        assert_eq!(snapshot.estimate_prefix_bytes(&table_prefix(9)).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn large_spread_relations_are_scaled_from_their_first_vnodes() {
        // 400,000 rows of 20 bytes of key and 30 of value: 20 MB, over the exact limit and the
        // most one estimate reads.
        let n = 400_000u64;
        let rows = (0..n).map(|i| (make_key(7, &i.to_be_bytes()[..]), vec![1u8; 36]));
        let snapshot = store_with(rows).await;
        let exact = n * (6 + 8 + 36);
        let estimate = snapshot.estimate_prefix_bytes(&table_prefix(7)).await.unwrap();
        let error = (estimate as f64 - exact as f64).abs() / exact as f64;
        assert!(error < 0.1, "estimate {estimate} for {exact} bytes");
    }

    #[tokio::test]
    async fn keys_in_one_vnode_are_not_scaled_up() {
        // A top-N's layout: every key in vnode 0. 2 MB: read whole, not multiplied by 256.
        let rows = (0..20_000u32).map(|i| {
            let mut k = table_prefix(7).to_vec();
            k.extend_from_slice(&[0, 0]);
            k.extend_from_slice(&i.to_be_bytes());
            (k, vec![2u8; 90])
        });
        let snapshot = store_with(rows).await;
        assert_eq!(snapshot.estimate_prefix_bytes(&table_prefix(7)).await.unwrap(), 20_000 * (6 + 4 + 90));
    }
}
