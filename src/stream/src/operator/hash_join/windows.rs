//! Window joins: state cleanup of an inner join whose equi-key carries a watermark on both
//! sides (`ON x.window_start = y.window_start AND ...`).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow::datatypes::DataType;
use arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::expressions::Column;
use datafusion::scalar::ScalarValue;
use eddy_common::{internal_err, Epoch, Result, StreamChunk};
use eddy_storage::{EpochBatch, StateStore};

use super::bucket::{bucket_prefix, entry_key, matchable, parse_entry_key};
use super::{HashJoin, JoinKind, JoinSpec, SideState};

/// State cleanup of an inner or outer join whose equi-key `key_index` carries a watermark on
/// both sides: a bucket whose value there is below the smaller watermark gets no more rows
/// from either side, so its rows leave the state (their matches, and an outer join's
/// NULL-padded rows, were emitted long ago).
pub(super) struct JoinWindows {
    /// Position of the watermarked column among the join keys.
    key_index: usize,
    /// Encodes a value of that key column (order-preserving).
    converter: RowConverter,
    /// The smaller of the two sides' watermarks, encoded.
    watermark: Option<Vec<u8>>,
    /// Open buckets by their watermarked key value.
    open: BTreeMap<Vec<u8>, HashSet<Vec<u8>>>,
    /// `open` knows every bucket in the state table (after a restore, one scan fills it).
    pub(super) complete: bool,
    /// The store, for evicted buckets and the scan after a restore.
    pub(super) store: Option<Arc<StateStore>>,
}

impl JoinWindows {
    /// The cleanup of `spec`'s join, if it is an inner join on a watermarked equi-key (the
    /// first of `spec.watermark_keys`) whose keys have `key_types`.
    pub(super) fn try_new(spec: &JoinSpec, key_types: &[DataType]) -> Result<Option<Self>> {
        let joins = matches!(spec.kind, JoinKind::Inner | JoinKind::LeftOuter | JoinKind::RightOuter | JoinKind::FullOuter);
        let (true, false, Some(&(l, _, _, _))) = (joins, spec.null_aware, spec.watermark_keys.first()) else {
            return Ok(None);
        };
        let is_column = |k: &Arc<dyn datafusion::physical_expr::PhysicalExpr>| {
            (k.as_ref() as &dyn std::any::Any).downcast_ref::<Column>().is_some_and(|c| c.index() == l)
        };
        let Some(key_index) = spec.left_keys.iter().position(is_column) else { return Ok(None) };
        Ok(Some(JoinWindows {
            key_index,
            converter: RowConverter::new(vec![SortField::new(key_types[key_index].clone())])?,
            watermark: None,
            open: BTreeMap::new(),
            complete: true,
            store: None,
        }))
    }

    /// Moves the watermark to `value` (the smaller of the sides' watermarks on the key).
    pub(super) fn advance(&mut self, value: &ScalarValue, key_types: &[DataType]) -> Result<()> {
        let t = &key_types[self.key_index];
        let v = value.to_array_of_size(1)?;
        let v = if v.data_type() == t { v } else { arrow::compute::cast(&v, t)? };
        let encoded = self.converter.convert_columns(&[v])?.row(0).as_ref().to_vec();
        if self.watermark.as_ref().is_none_or(|old| encoded > *old) {
            self.watermark = Some(encoded);
        }
        Ok(())
    }

    /// Records the buckets `chunk`'s inserted rows (of the side `s`) go to.
    pub(super) fn record(&mut self, s: &SideState, chunk: &StreamChunk, buckets: &[Vec<u8>], key_types: &[DataType]) -> Result<()> {
        let v = s.keys[self.key_index].evaluate(&chunk.batch)?.into_array(chunk.len())?;
        let t = &key_types[self.key_index];
        let v = if v.data_type() == t { v } else { arrow::compute::cast(&v, t)? };
        let encoded = self.converter.convert_columns(&[v])?;
        for (i, bucket) in buckets.iter().enumerate() {
            if chunk.ops[i].is_insert() && matchable(bucket) {
                let set = self.open.entry(encoded.row(i).as_ref().to_vec()).or_default();
                if !set.contains(bucket) {
                    set.insert(bucket.clone());
                }
            }
        }
        Ok(())
    }
}

impl HashJoin {
    /// Drops the buckets below the watermark (see [`JoinWindows`]).
    pub(super) async fn close_windows(&mut self, epoch: Epoch, batch: &mut EpochBatch) -> Result<()> {
        let Some(w) = self.windows.as_ref() else { return Ok(()) };
        let Some(watermark) = w.watermark.clone() else { return Ok(()) };
        let store = w.store.clone().ok_or_else(|| internal_err!("a windowed join without its store"))?;
        let snapshot = store.snapshot();
        if !w.complete {
            // Restored: every committed bucket is open (buckets loaded since are committed too,
            // or were recorded by the rows that created them).
            let (start, end) = eddy_storage::scan::vnode_bounds(self.table_id, &self.vnodes);
            let mut cursor = snapshot.scan_batches(start, end, 4096).await?;
            let conv = self.key_converter.as_ref().ok_or_else(|| internal_err!("a windowed join without keys"))?;
            let mut found: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            while let Some(entries) = cursor.next_batch().await? {
                let buckets: Vec<Vec<u8>> =
                    entries.iter().map(|(k, _)| parse_entry_key(k).map(|(b, _, _)| b.to_vec())).collect::<Result<Vec<_>>>()?;
                let keyed: Vec<&Vec<u8>> = buckets.iter().filter(|b| matchable(b)).collect();
                if keyed.is_empty() {
                    continue;
                }
                let parser = conv.parser();
                let cols = eddy_common::codec::decode_rows(conv, keyed.iter().map(|b| parser.parse(&b[1..])))?;
                let w = self.windows.as_ref().ok_or_else(|| internal_err!("join windows vanished"))?;
                let encoded = w.converter.convert_columns(&[cols[w.key_index].clone()])?;
                for (i, b) in keyed.iter().enumerate() {
                    found.push((encoded.row(i).as_ref().to_vec(), (*b).clone()));
                }
            }
            let w = self.windows.as_mut().ok_or_else(|| internal_err!("join windows vanished"))?;
            for (v, b) in found {
                w.open.entry(v).or_default().insert(b);
            }
            w.complete = true;
        }
        let w = self.windows.as_mut().ok_or_else(|| internal_err!("join windows vanished"))?;
        let rest = w.open.split_off(&watermark);
        let below = std::mem::replace(&mut w.open, rest);
        for bucket in below.into_values().flatten() {
            let cached: Option<Vec<Vec<u8>>> = self.state.get(&bucket).map(|pair| {
                pair.sides
                    .iter()
                    .enumerate()
                    .flat_map(|(tag, side)| side.iter().map(move |(row, _)| (tag, row.clone())).collect::<Vec<_>>())
                    .map(|(tag, row)| entry_key(self.table_id, &bucket, tag as u8, &row))
                    .collect()
            });
            match cached {
                Some(keys) => {
                    for k in keys {
                        batch.delete(k);
                    }
                    self.state.deleted(&bucket, epoch);
                }
                None if !self.state.knows(&bucket) => {
                    // Evicted: its committed entries are its current ones.
                    for (k, _) in snapshot.scan_prefix_cached(&bucket_prefix(self.table_id, &bucket)).await? {
                        batch.delete(k.to_vec());
                    }
                }
                None => {}
            }
        }
        Ok(())
    }
}
