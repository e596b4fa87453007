//! `OverWindow`: window functions (`... OVER (PARTITION BY ... ORDER BY ...)`), maintained by
//! recomputing each changed partition (a top-N over the whole input is [`super::top_n`]).
//!
//! Rows are kept per partition in SQL order: the map key is the memcomparable encoding of the
//! ORDER BY values followed by the whole encoded row, so iterating a partition yields its rows
//! sorted, ties broken by the row itself (deterministic). At a barrier every partition changed
//! in the epoch is evaluated again — window functions by DataFusion's own `WindowExpr`s over the
//! sorted partition, top-N by taking the rows at the requested positions — and the difference
//! against what was emitted for it before goes out as deletes and inserts. A change costs
//! O(partition size).
//!
//! Output layout: the input's visible columns, the window functions' values (DataFusion's
//! schema), then the input's hidden columns.
//!
//! State: one state-table entry per distinct input row (value: its count), keyed by partition
//! first (`table | vnode(partition) | len | partition | row`) so one prefix read loads a
//! partition. Partitions are cached in a bounded [`StateCache`]: loaded when a chunk touches
//! them (their emitted output is recomputed then), evicted when memory is short.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows, SortField};
use async_trait::async_trait;
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::WindowExpr;
use eddy_common::codec::{table_prefix, vnode_of, KEY_PREFIX_LEN};
use eddy_common::{internal_err, Epoch, Op, Result, StreamChunk};
use eddy_storage::{EpochBatch, ReadSnapshot, StateStore};

use super::eval::{evaluate, RowErrors};
use super::Operator;
use crate::cache::StateCache;

/// A partition's rows: (ORDER BY key, row) → count.
type Partition = BTreeMap<(Vec<u8>, Vec<u8>), i64>;

/// One cached partition: its rows, and the output rows last emitted for it (with counts).
#[derive(Default)]
struct Part {
    rows: Partition,
    emitted: BTreeMap<Vec<u8>, i64>,
}

impl Part {
    /// Estimated heap bytes.
    fn bytes(&self) -> usize {
        self.rows.keys().map(|(o, r)| o.len() + r.len() + 64).sum::<usize>() + self.emitted.keys().map(|r| r.len() + 48).sum::<usize>()
    }
}

/// Key prefix of a partition's entries: table, the partition's vnode, its length, the partition.
fn partition_prefix(table_id: u32, part: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(KEY_PREFIX_LEN + 4 + part.len());
    k.extend_from_slice(&table_prefix(table_id));
    k.extend_from_slice(&vnode_of(part).to_be_bytes());
    k.extend_from_slice(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_be_bytes());
    k.extend_from_slice(part);
    k
}

/// Window functions over partitions.
pub struct OverWindow {
    table_id: u32,
    /// The window functions, one output column each.
    functions: Vec<Arc<dyn WindowExpr>>,
    partition_by: Vec<Arc<dyn PhysicalExpr>>,
    order_by: Vec<PhysicalSortExpr>,
    input_schema: SchemaRef,
    /// Visible input columns (window values go after them).
    visible: usize,
    schema: SchemaRef,
    partition_conv: Option<RowConverter>,
    order_conv: Option<RowConverter>,
    rows: RowConverter,
    output: RowConverter,
    /// Partitions by encoded partition key (the cache tracks which changed this epoch).
    partitions: StateCache<Part>,
    /// Rows changed this epoch (for the state table), with their partition and order key.
    dirty_rows: HashMap<Vec<u8>, (Vec<u8>, Vec<u8>)>,
    /// Set when split among parallel actors by partition key (see [`OverWindow::parallel`]).
    router: Option<Arc<crate::exchange::ExprRouter>>,
}

impl fmt::Display for OverWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part: Vec<String> = self.partition_by.iter().map(|e| e.to_string()).collect();
        let order: Vec<String> = self.order_by.iter().map(|e| e.to_string()).collect();
        let names: Vec<&str> = self.functions.iter().map(|w| w.name()).collect();
        write!(f, "OverWindow [{}]", names.join(", "))?;
        write!(f, " partition=[{}] order=[{}] state_table={}", part.join(", "), order.join(", "), self.table_id)
    }
}

impl OverWindow {
    /// An operator over rows of `input_schema` (its first `visible` columns visible) producing
    /// `schema`.
    pub fn try_new(
        table_id: u32,
        functions: Vec<Arc<dyn WindowExpr>>,
        partition_by: Vec<Arc<dyn PhysicalExpr>>,
        order_by: Vec<PhysicalSortExpr>,
        input_schema: SchemaRef,
        visible: usize,
        schema: SchemaRef,
    ) -> Result<Self> {
        let partition_conv = if partition_by.is_empty() {
            None
        } else {
            let fields = partition_by.iter().map(|e| Ok(SortField::new(e.data_type(&input_schema)?))).collect::<Result<Vec<_>>>()?;
            Some(RowConverter::new(fields)?)
        };
        let order_conv = super::order_converter(&order_by, &input_schema)?;
        let rows = super::row_converter(&input_schema)?;
        let output = super::row_converter(&schema)?;
        Ok(Self {
            table_id,
            functions,
            partition_by,
            order_by,
            input_schema,
            visible,
            schema,
            partition_conv,
            order_conv,
            rows,
            output,
            partitions: StateCache::new(true),
            dirty_rows: HashMap::new(),
            router: None,
        })
    }

    /// Lets window functions with a PARTITION BY run in parallel actors, split by partition
    /// (the planner keyed the output by the partition columns too, so a row moving to another
    /// partition never shares a key with the row it replaces). Partitions are stored under
    /// their own vnode, which routes them.
    pub fn parallel(mut self) -> Result<Self> {
        if !self.partition_by.is_empty() {
            self.router = Some(Arc::new(crate::exchange::ExprRouter::try_new(self.partition_by.clone(), &self.input_schema)?));
        }
        Ok(self)
    }

    /// Partition keys, order keys and encoded rows of `chunk` (rows failing are counted, dropped).
    fn keyed(&self, chunk: StreamChunk, errors: &mut RowErrors) -> Result<(StreamChunk, Option<Rows>, Option<Rows>, Rows)> {
        let exprs: Vec<Arc<dyn PhysicalExpr>> =
            self.partition_by.iter().cloned().chain(self.order_by.iter().map(|e| e.expr.clone())).collect();
        let (chunk, mut values) = evaluate(&exprs, chunk, errors)?;
        let order_values = values.split_off(self.partition_by.len());
        let parts = self.partition_conv.as_ref().map(|c| c.convert_columns(&values)).transpose()?;
        let orders = self.order_conv.as_ref().map(|c| c.convert_columns(&order_values)).transpose()?;
        let rows = self.rows.convert_columns(chunk.batch.columns())?;
        Ok((chunk, parts, orders, rows))
    }

    fn add(&mut self, part: &[u8], order: &[u8], row: &[u8], delta: i64) -> Result<()> {
        let p = &mut self.partitions.get_or_insert_with(part, Part::default)?.rows;
        let key = (order.to_vec(), row.to_vec());
        let c = p.entry(key.clone()).or_default();
        *c += delta;
        if *c < 0 {
            return Err(internal_err!("window retracted a row it never saw"));
        }
        if *c == 0 {
            p.remove(&key);
        }
        self.dirty_rows.insert(row.to_vec(), (part.to_vec(), order.to_vec()));
        Ok(())
    }

    /// The output rows of partition `part` as it is now.
    fn evaluate_partition(&self, part: &[u8]) -> Result<BTreeMap<Vec<u8>, i64>> {
        let mut out = BTreeMap::new();
        let Some(rows) = self.partitions.get(part).map(|p| &p.rows) else { return Ok(out) };
        // An emptied partition has no output (some window functions refuse zero rows).
        if rows.values().all(|&c| c <= 0) {
            return Ok(out);
        }
        // One row per copy, in order.
        let parser = self.rows.parser();
        let expanded = rows.iter().flat_map(|((_, r), &c)| std::iter::repeat_n(r, usize::try_from(c).unwrap_or(0)));
        let columns = eddy_common::codec::decode_rows(&self.rows, expanded.map(|r| parser.parse(r)))?;
        let batch = RecordBatch::try_new(self.input_schema.clone(), columns)?;
        let values = self.functions.iter().map(|w| Ok(w.evaluate(&batch)?)).collect::<Result<Vec<ArrayRef>>>()?;
        let cols: Vec<ArrayRef> = batch.columns()[..self.visible]
            .iter()
            .cloned()
            .chain(values.into_iter().zip(self.schema.fields().iter().skip(self.visible)).map(|(v, f)| {
                if v.data_type() == f.data_type() { Ok(v) } else { arrow::compute::cast(&v, f.data_type()) }
            }).collect::<Result<Vec<_>, _>>()?)
            .chain(batch.columns()[self.visible..].iter().cloned())
            .collect();
        let encoded = self.output.convert_columns(&cols)?;
        for r in encoded.iter() {
            *out.entry(r.as_ref().to_vec()).or_insert(0) += 1;
        }
        Ok(out)
    }

    /// Output chunk of `(op, encoded output row)`s.
    fn chunk_of(&self, out: Vec<(Op, Vec<u8>)>) -> Result<Vec<StreamChunk>> {
        super::chunk_of_rows(&self.output, &self.schema, out)
    }

    /// Recovery: partitions load when first touched.
    pub async fn restore(&mut self, snapshot: Option<&ReadSnapshot>) -> Result<()> {
        if snapshot.is_some() {
            self.partitions = StateCache::new(false);
        }
        Ok(())
    }

    /// The partition keys of `chunk`'s rows (rows whose keys fail are left out).
    fn partition_keys(&self, chunk: &StreamChunk) -> Result<Vec<Vec<u8>>> {
        let Some(conv) = &self.partition_conv else { return Ok(vec![Vec::new()]) };
        let (_, values) = evaluate(&self.partition_by, chunk.clone(), &mut RowErrors::default())?;
        Ok(conv.convert_columns(&values)?.iter().map(|r| r.as_ref().to_vec()).collect())
    }

    /// Caches partition `part` from its state entries (its output recomputed).
    fn load_partition<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, part: Vec<u8>, entries: &[(K, V)], prefix_len: usize) -> Result<()> {
        if entries.is_empty() {
            self.partitions.load(part, None, 0);
            return Ok(());
        }
        let mut rows = Partition::new();
        let mut ignored = RowErrors::default();
        for piece in entries.chunks(8192) {
            let encoded: Vec<&[u8]> = piece.iter().map(|(k, _)| k.as_ref().get(prefix_len..).unwrap_or_default()).collect();
            let parser = self.rows.parser();
            let columns = eddy_common::codec::decode_rows(&self.rows, encoded.iter().map(|r| parser.parse(r)))?;
            let batch = RecordBatch::try_new(self.input_schema.clone(), columns)?;
            let (chunk, _, orders, _) = self.keyed(StreamChunk::inserts(batch), &mut ignored)?;
            if chunk.len() != piece.len() {
                return Err(internal_err!("window state rows no longer evaluate their keys"));
            }
            for (i, (_, v)) in piece.iter().enumerate() {
                let count = i64::from_be_bytes(v.as_ref().try_into().map_err(|_| internal_err!("bad window state value"))?);
                let o = orders.as_ref().map_or(&[][..], |o| o.row(i).data());
                rows.insert((o.to_vec(), encoded[i].to_vec()), count);
            }
        }
        let loaded = Part { rows, emitted: BTreeMap::new() };
        let bytes = loaded.bytes();
        self.partitions.load(part.clone(), Some(loaded), bytes);
        let emitted = self.evaluate_partition(&part)?;
        if let Some(p) = self.partitions.get_mut(&part) {
            p.emitted = emitted;
        }
        Ok(())
    }
}

#[async_trait]
impl Operator for OverWindow {
    fn state_stats(&self) -> Option<crate::cache::CacheStats> {
        Some(self.partitions.stats())
    }

    fn distribution(&self) -> super::Distribution {
        match &self.router {
            Some(r) => super::Distribution::Hash(r.clone()),
            None => super::Distribution::Single,
        }
    }

    async fn prefetch(&mut self, chunk: &StreamChunk, store: &StateStore) -> Result<()> {
        self.partitions.begin(store);
        if self.partitions.is_complete() {
            // Nothing to load: what is not cached does not exist.
            self.partitions.answered(chunk.len());
            return Ok(());
        }
        let mut missing = self.partition_keys(chunk)?;
        missing.retain(|p| !self.partitions.knows(p));
        missing.sort_unstable();
        missing.dedup();
        let snapshot = store.snapshot();
        for part in missing {
            let prefix = partition_prefix(self.table_id, &part);
            let entries = snapshot.scan_prefix_cached(&prefix).await?;
            self.load_partition(part, &entries, prefix.len())?;
        }
        Ok(())
    }

    fn process(&mut self, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        let (chunk, parts, orders, rows) = self.keyed(chunk, errors)?;
        for i in 0..chunk.len() {
            let p = parts.as_ref().map_or(&[][..], |p| p.row(i).data());
            let o = orders.as_ref().map_or(&[][..], |o| o.row(i).data());
            self.add(p, o, rows.row(i).data(), if chunk.ops[i].is_insert() { 1 } else { -1 })?;
        }
        Ok(vec![])
    }

    async fn on_barrier(&mut self, epoch: Epoch, batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        for (row, (part, order)) in std::mem::take(&mut self.dirty_rows) {
            let count = self.partitions.get(&part).and_then(|p| p.rows.get(&(order, row.clone()))).copied().unwrap_or(0);
            let mut k = partition_prefix(self.table_id, &part);
            k.extend_from_slice(&row);
            if count == 0 {
                batch.delete(k);
            } else {
                batch.put(k, count.to_be_bytes().to_vec());
            }
        }
        let mut dirty = self.partitions.take_dirty();
        dirty.sort();
        // Every delete before every insert: a row moving between partitions keeps its stream key.
        let (mut deletes, mut inserts): (Vec<(Op, Vec<u8>)>, Vec<(Op, Vec<u8>)>) = (Vec::new(), Vec::new());
        for part in dirty {
            let new = self.evaluate_partition(&part)?;
            let old = self.partitions.get_mut(&part).map(|p| std::mem::take(&mut p.emitted)).unwrap_or_default();
            for (row, &c) in &old {
                let n = c - new.get(row).copied().unwrap_or(0);
                deletes.extend(std::iter::repeat_n((Op::Delete, row.clone()), usize::try_from(n).unwrap_or(0)));
            }
            for (row, &c) in &new {
                let n = c - old.get(row).copied().unwrap_or(0);
                inserts.extend(std::iter::repeat_n((Op::Insert, row.clone()), usize::try_from(n).unwrap_or(0)));
            }
            match self.partitions.get_mut(&part) {
                Some(p) if !p.rows.is_empty() => {
                    p.emitted = new;
                    let bytes = p.bytes();
                    self.partitions.written(&part, epoch, bytes);
                }
                _ => self.partitions.deleted(&part, epoch),
            }
        }
        deletes.extend(inserts);
        self.chunk_of(deletes)
    }
}
