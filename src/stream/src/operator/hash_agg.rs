//! `HashAgg`: incremental, retractable GROUP BY aggregation.
//!
//! Group keys and aggregate arguments are evaluated per chunk with `PhysicalExpr`s; rows are
//! routed to groups by their memcomparable key. Every aggregate supports retraction: sums and
//! counts keep running totals (float sums compensated, `fsum`), and `min`/`max`/`count(DISTINCT)`/`string_agg`/`array_agg` keep the group's
//! multiset of values (so deleting the current minimum finds the next one). Output is emitted at
//! barriers, one change per dirty group: `Insert` for a new group, an `UpdateDelete`/
//! `UpdateInsert` pair for a changed one, `Delete` when its last row is retracted. A global
//! aggregate (no GROUP BY) always has exactly one row, as in SQL.
//!
//! State: one entry per group in the operator's state table (key = group key, value = the
//! serialized accumulators plus the group's last emitted row), cached in a bounded
//! [`StateCache`]: groups are loaded when a chunk touches them and evicted when memory is short.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::scalar::ScalarValue;
use eddy_common::codec::make_key;
use eddy_common::interval::IntervalSums;
use eddy_common::percentile::{Fractions, OrderedSet};
use eddy_common::{internal_err, Epoch, Op, Result, StreamChunk};
use eddy_storage::{EpochBatch, ReadSnapshot, StateStore};

use super::eval::{evaluate, RowErrors};
use crate::cache::StateCache;
use crate::write_set::WriteSet;
use {encoding::{decode_group, encode_group, fresh_group_bytes, group_bytes}, fsum::{DdSum, Fsum}, input::ArgInput, multiset::{Multiset, ValueRows}, regr::CoMoments};
pub use regr::RegrFn;
use super::Operator;

/// Group states read from the store at once when a chunk misses the cache.
const LOAD_CONCURRENCY: usize = 16;

/// Which aggregate function.
#[derive(Debug, Clone, PartialEq)]
pub enum AggKind {
    /// `count(*)`.
    CountStar,
    /// `count(x)`: non-null values.
    Count,
    /// `count(DISTINCT x)`.
    CountDistinct,
    Sum,
    Avg,
    Min,
    Max,
    BoolAnd,
    BoolOr,
    /// `string_agg([DISTINCT] x, sep [ORDER BY ...])`: non-null values concatenated in the
    /// call's order (value order without one).
    StringAgg { sep: String, distinct: bool },
    /// `array_agg([DISTINCT] x [ORDER BY ...])`: every value, NULLs included, in the call's
    /// order (value order without one).
    ArrayAgg { distinct: bool },
    /// `first_value(x ORDER BY ...)`: `x` of the first row in that order (ties: the smallest `x`).
    FirstValue,
    /// `last_value(x ORDER BY ...)`.
    LastValue,
    /// `var_samp` / `var_pop` (`sample`), or their square roots `stddev_samp` / `stddev_pop`.
    Variance { sample: bool, sqrt: bool },
    /// `sum(DISTINCT x)` / `avg(DISTINCT x)` (`avg`): over the group's distinct values.
    SumDistinct { avg: bool },
    /// `bit_and` / `bit_or` / `bit_xor` of integers.
    Bit(BitOp),
    /// `percentile_cont(p)` / `percentile_disc(p)` / `mode()` `WITHIN GROUP (ORDER BY x)`: over
    /// the group's multiset of non-null `x`, in the call's order.
    Percentile { kind: OrderedSet, fractions: Fractions },
    /// `covar_pop`/`covar_samp` and the `regr_*` functions of `(y, x)` (`corr` and `regr_r2`
    /// arrive rewritten over `regr_sxx/syy/sxy`), over the rows
    /// where both are non-null (the argument is a two-field struct of `y` and `x`).
    Regr(RegrFn),
}

/// Which bitwise aggregate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BitOp {
    And,
    Or,
    Xor,
}

/// One aggregate call.
pub struct AggCall {
    /// Function.
    pub kind: AggKind,
    /// Argument (absent for `count(*)`).
    pub arg: Option<Arc<dyn PhysicalExpr>>,
    /// Output type (as the batch planner types it).
    pub output: DataType,
    /// `FILTER (WHERE ...)`: only rows where it is true count.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// `ORDER BY` inside the call (used by `first_value`, `last_value`, `string_agg` and
    /// `array_agg`; the last two are in value order without one).
    pub order_by: Vec<datafusion::physical_expr::PhysicalSortExpr>,
}

/// Running state of one aggregate in one group.
#[derive(Debug, Clone, PartialEq)]
enum Acc {
    Count(i64),
    /// Integer or decimal sum (decimals as unscaled integers), with the non-null count.
    SumInt { sum: i128, n: i64 },
    /// Float sum of the finite values, with NaN and ±Infinity counted apart so that retracting
    /// them is exact (NaN - NaN would be NaN for good).
    SumFloat { sum: Fsum, n: i64, nan: i64, pos_inf: i64, neg_inf: i64 },
    /// Multiset of encoded values with multiplicities (stored as a row per value, see
    /// [`multiset`]).
    Values(Multiset),
    /// Interval sum: months, days and nanoseconds summed apart, with the non-null count.
    SumInterval(IntervalSums),
    Bools { trues: i64, falses: i64 },
    /// Sums of `x - shift` and of its square over the non-null values, `shift` being the first
    /// value the group saw (keeps the variance accurate for large values; fixed, so retraction
    /// is exact up to rounding).
    Moments { n: i64, shift: f64, sum: DdSum, sumsq: DdSum },
    /// The same for `(x, y)` pairs.
    CoMoments(CoMoments),
    /// Non-null values, and per bit (of the value as i64) how many have it set: enough to
    /// retract from AND, OR and XOR exactly.
    Bits { n: i64, ones: Vec<i64> },
}

/// State of one group.
#[derive(Debug, Clone, PartialEq)]
struct Group {
    /// Rows currently in the group.
    rows: i64,
    /// One accumulator per aggregate call.
    accs: Vec<Acc>,
    /// The row last emitted for this group (encoded), if any.
    emitted: Option<Vec<u8>>,
}

/// Incremental hash aggregation.
pub struct HashAgg {
    /// Routes input rows to the actor owning their group (a parallel aggregation).
    router: Arc<crate::exchange::ExprRouter>,
    /// The vnodes of the groups this actor owns (all, unless the aggregation is parallel).
    vnodes: std::ops::Range<u16>,
    /// State-table id of the group states.
    table_id: u32,
    /// State-table id of the multisets' values (see [`multiset`]), when a call keeps one.
    values_table: Option<u32>,
    /// GROUP BY expressions over the input.
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// Aggregate calls.
    calls: Vec<AggCall>,
    /// Type of each call's argument.
    arg_types: Vec<Option<DataType>>,
    /// Output schema: group columns then aggregates.
    schema: SchemaRef,
    /// Encodes group keys.
    key_converter: RowConverter,
    /// Encodes values of each call's argument (for multisets).
    value_converters: Vec<Option<RowConverter>>,
    /// Encodes whole output rows (the `emitted` copies).
    output_converter: RowConverter,
    /// Groups (the cache tracks which changed in the current epoch).
    groups: StateCache<Group>,
    /// Groups of the open epoch flushed out of the cache when it outgrew the memory budget
    /// (see [`crate::cache`]): spilled to a run before they may leave, read before the
    /// snapshot on a miss (only where the run's filter says the key may be: a key never
    /// flushed costs no run read), and handed to the epoch's batch at the barrier.
    flushed: WriteSet,
    /// Event-time handling, when the first group column carries a watermark.
    windows: Option<Windows>,
    /// The input only ever inserts: `min`/`max` (and `first_value`/`last_value`) keep just
    /// their current value instead of the group's multiset.
    append_only: bool,
}

/// How an aggregation grouped by a watermarked column (first in the group key, so groups are
/// stored in its order) closes groups: a group whose value is below the watermark gets no
/// more rows, so its state is dropped, and under `EMIT ON WINDOW CLOSE` it is emitted then,
/// once and final, instead of at every epoch it changed.
struct Windows {
    /// Emit on window close (append-only output).
    eowc: bool,
    /// The input column the first group expression reads.
    input_col: usize,
    /// Encodes a value of the first group column (a prefix of the group key).
    converter: RowConverter,
    /// The watermark, encoded; groups with smaller keys are closed.
    watermark: Option<Vec<u8>>,
    /// The store, for closed groups that are not cached.
    store: Option<Arc<StateStore>>,
    /// Every open group's key, in order (whether its state is cached or not): closing reads
    /// only the groups below the watermark.
    open: std::collections::BTreeSet<Vec<u8>>,
    /// `open` holds every group in the state table (after a restore it is filled by one scan).
    complete: bool,
}

impl fmt::Display for HashAgg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let groups: Vec<String> = self.group_exprs.iter().map(|e| e.to_string()).collect();
        let calls: Vec<String> = self
            .calls
            .iter()
            .map(|c| format!("{:?}({})", c.kind, c.arg.as_ref().map(|a| a.to_string()).unwrap_or_else(|| "*".into())))
            .collect();
        write!(f, "HashAgg group=[{}] aggs=[{}] state_table={}", groups.join(", "), calls.join(", "), self.table_id)
    }
}

fn initial_acc(kind: &AggKind, arg_type: Option<&DataType>) -> Acc {
    match kind {
        AggKind::CountStar | AggKind::Count => Acc::Count(0),
        AggKind::Sum | AggKind::Avg => match arg_type {
            Some(DataType::Interval(_)) => Acc::SumInterval(IntervalSums::default()),
            Some(DataType::Float16 | DataType::Float32 | DataType::Float64) => Acc::SumFloat { sum: Fsum::default(), n: 0, nan: 0, pos_inf: 0, neg_inf: 0 },
            _ => Acc::SumInt { sum: 0, n: 0 },
        },
        AggKind::BoolAnd | AggKind::BoolOr => Acc::Bools { trues: 0, falses: 0 },
        AggKind::Variance { .. } => Acc::Moments { n: 0, shift: f64::NAN, sum: DdSum::default(), sumsq: DdSum::default() },
        AggKind::Regr(_) => Acc::CoMoments(CoMoments::new()),
        AggKind::Bit(_) => Acc::Bits { n: 0, ones: vec![0; 64] },
        AggKind::SumDistinct { .. }
        | AggKind::CountDistinct
        | AggKind::Min
        | AggKind::Max
        | AggKind::StringAgg { .. }
        | AggKind::ArrayAgg { .. }
        | AggKind::Percentile { .. }
        | AggKind::FirstValue
        | AggKind::LastValue => Acc::Values(Multiset::default()),
    }
}

impl HashAgg {
    /// An aggregation over `input_schema` producing `schema` (group columns, then one column per call).
    pub fn try_new(
        table_id: u32,
        input_schema: &Schema,
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        calls: Vec<AggCall>,
        schema: SchemaRef,
    ) -> Result<Self> {
        let key_fields: Vec<SortField> = group_exprs
            .iter()
            .map(|e| Ok(SortField::new(e.data_type(input_schema)?)))
            .collect::<Result<_>>()?;
        let arg_types = calls
            .iter()
            .map(|c| c.arg.as_ref().map(|a| a.data_type(input_schema)).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        let value_converters = calls
            .iter()
            .zip(&arg_types)
            .map(|(c, t)| match (&c.kind, t) {
                (AggKind::CountDistinct | AggKind::SumDistinct { .. } | AggKind::Min | AggKind::Max, Some(t)) => {
                    Ok(Some(RowConverter::new(vec![SortField::new(t.clone())])?))
                }
                // Values in the WITHIN GROUP order.
                (AggKind::Percentile { .. }, Some(t)) => {
                    let options = c.order_by.first().map(|o| o.options).unwrap_or_default();
                    Ok(Some(RowConverter::new(vec![SortField::new_with_options(t.clone(), options)])?))
                }
                // Rows of (ORDER BY values..., x): their order is the call's order.
                (AggKind::FirstValue | AggKind::LastValue | AggKind::StringAgg { .. } | AggKind::ArrayAgg { .. }, Some(t)) => {
                    let mut fields = c
                        .order_by
                        .iter()
                        .map(|o| Ok(SortField::new_with_options(o.expr.data_type(input_schema)?, o.options)))
                        .collect::<Result<Vec<_>>>()?;
                    // Value order (array_agg(DISTINCT x), ties) is ascending with NULLs last, as
                    // PostgreSQL sorts; first/last_value keep their stored NULLs-first order.
                    let nulls_first = matches!(c.kind, AggKind::FirstValue | AggKind::LastValue);
                    fields.push(SortField::new_with_options(t.clone(), arrow::compute::SortOptions::new(false, nulls_first)));
                    Ok(Some(RowConverter::new(fields)?))
                }
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let output_converter = super::row_converter(&schema)?;
        let key_converter = RowConverter::new(key_fields)?;
        let router = crate::exchange::ExprRouter::try_new(group_exprs.clone(), input_schema)?;
        let mut agg = Self {
            router: Arc::new(router),
            vnodes: 0..eddy_common::codec::VNODE_COUNT,
            table_id,
            values_table: None,
            key_converter,
            group_exprs,
            calls,
            arg_types,
            schema,
            value_converters,
            output_converter,
            groups: StateCache::new(true),
            flushed: WriteSet::default(),
            windows: None,
            append_only: false,
        };
        agg.groups.set_fresh_value_bytes(agg.fresh_bytes());
        Ok(agg)
    }

    /// True when a call keeps a multiset, whose values need a state table of their own
    /// ([`HashAgg::with_values_table`]).
    pub fn needs_values_table(&self) -> bool {
        self.new_group().accs.iter().any(|a| matches!(a, Acc::Values(_)))
    }

    /// The state table of the multisets' values.
    pub fn with_values_table(mut self, table_id: u32) -> Self {
        self.values_table = Some(table_id);
        self
    }

    /// For an input that never retracts (append-only tables and sources, through stateless
    /// operators and inner joins): extreme-value aggregates keep one value per group.
    pub fn with_append_only(mut self) -> Self {
        self.append_only = true;
        self
    }

    /// Closes groups by the watermark of the first group column, which must be an input
    /// column (see [`Windows`]); `eowc`: emit each group once, when it closes.
    pub fn with_windows(mut self, eowc: bool, input_schema: &Schema) -> Result<Self> {
        let col = self
            .group_exprs
            .first()
            .and_then(|e| (e.as_ref() as &dyn std::any::Any).downcast_ref::<datafusion::physical_expr::expressions::Column>())
            .ok_or_else(|| internal_err!("a windowed aggregation's first group key must be a column"))?
            .index();
        let converter = RowConverter::new(vec![SortField::new(input_schema.field(col).data_type().clone())])?;
        self.windows = Some(Windows { eowc, input_col: col, converter, watermark: None, store: None, open: Default::default(), complete: true });
        Ok(self)
    }

    /// Encoded output rows of the (existing) groups `keys`.
    fn output_rows(&self, keys: &[&Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        if keys.is_empty() {
            return Ok(vec![]);
        }
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        if !self.is_global() {
            let parser = self.key_converter.parser();
            columns.extend(eddy_common::codec::decode_rows(&self.key_converter, keys.iter().map(|k| parser.parse(k)))?);
        }
        for i in 0..self.calls.len() {
            let values = keys
                .iter()
                .map(|k| {
                    let g = self.groups.get(k).ok_or_else(|| internal_err!("group vanished"))?;
                    self.output_value(i, &g.accs[i])
                })
                .collect::<Result<Vec<_>>>()?;
            let arr = ScalarValue::iter_to_array(values)?;
            let target = self.schema.field(columns.len()).data_type();
            columns.push(if arr.data_type() == target { arr } else { arrow::compute::cast(&arr, target)? });
        }
        let encoded = self.output_converter.convert_columns(&columns)?;
        Ok(encoded.iter().map(|r| r.as_ref().to_vec()).collect())
    }

    /// Writes group `key`'s state into `batch` (deleting it once it has no rows): `epoch`'s
    /// batch, or with `None` the open epoch's flushed groups.
    fn write_group(&mut self, key: &[u8], epoch: Option<Epoch>, batch: &mut EpochBatch) -> Result<()> {
        let state_key = make_key(self.table_id, key);
        // The values whose counts changed (a group with no rows left has none).
        if let Some(g) = self.groups.get_mut(key) {
            multiset::write_changes(&mut g.accs, self.values_table, key, batch)?;
        }
        let (encoded, bytes) = match self.groups.get(key) {
            Some(g) if g.rows > 0 || self.is_global() => (Some(encode_group(g)), Some(group_bytes(g))),
            _ => (None, None),
        };
        match (epoch, bytes) {
            (Some(epoch), Some(bytes)) => self.groups.written(key, epoch, bytes),
            (Some(epoch), None) => self.groups.deleted(key, epoch),
            (None, bytes) => self.groups.flushed(key, bytes),
        }
        match encoded {
            Some(e) => batch.put(state_key, e),
            None => batch.delete(state_key),
        }
        Ok(())
    }

    /// Writes the changed groups `keys` into `batch` (see [`HashAgg::write_group`]) and returns
    /// their output changes: one per group, from the row it last emitted to its current one
    /// (none under `EMIT ON WINDOW CLOSE`, which emits groups when they close).
    fn settle(&mut self, mut keys: Vec<Vec<u8>>, epoch: Option<Epoch>, batch: &mut EpochBatch) -> Result<Vec<(Op, Vec<u8>)>> {
        keys.sort_unstable();
        let mut out: Vec<(Op, Vec<u8>)> = Vec::new();
        if self.windows.as_ref().is_some_and(|w| w.eowc) {
            for key in &keys {
                self.write_group(key, epoch, batch)?;
            }
            return Ok(out);
        }
        // New output rows of the groups that (still) exist.
        let alive: Vec<&Vec<u8>> = keys.iter().filter(|k| self.is_global() || self.groups.get(k).is_some_and(|g| g.rows > 0)).collect();
        let mut new_rows: HashMap<Vec<u8>, Vec<u8>> = alive.iter().map(|k| (*k).clone()).zip(self.output_rows(&alive)?).collect();
        for key in keys {
            let new = new_rows.remove(&key);
            let Some(group) = self.groups.get_mut(&key) else { continue };
            match (&group.emitted, &new) {
                (None, Some(n)) => out.push((Op::Insert, n.clone())),
                (Some(o), Some(n)) if o != n => {
                    out.push((Op::UpdateDelete, o.clone()));
                    out.push((Op::UpdateInsert, n.clone()));
                }
                (Some(o), None) => out.push((Op::Delete, o.clone())),
                _ => {}
            }
            group.emitted = new;
            self.write_group(&key, epoch, batch)?;
        }
        Ok(out)
    }

    /// Output changes as a chunk.
    fn chunk_of(&self, out: Vec<(Op, Vec<u8>)>) -> Result<Vec<StreamChunk>> {
        super::chunk_of_rows(&self.output_converter, &self.schema, out)
    }

    /// Caches group `key` as read from the store (`None`: absent), with its multisets' value
    /// rows (see [`multiset`]).
    fn load_stored(&mut self, key: Vec<u8>, stored: Option<impl AsRef<[u8]>>, values: ValueRows) -> Result<()> {
        let mut group = stored.map(|v| decode_group(v.as_ref())).transpose()?;
        if let (Some(g), Some((prefix_len, rows))) = (group.as_mut(), values) {
            multiset::fill(&mut g.accs, prefix_len, &rows)?;
        }
        let bytes = group.as_ref().map_or(0, group_bytes);
        self.groups.load(key, group, bytes);
        Ok(())
    }

    /// Loads the states of `keys`, which the cache does not hold: from the groups this epoch
    /// flushed, else from the committed snapshot (once it holds what earlier epochs flushed).
    async fn load(&mut self, keys: Vec<Vec<u8>>, store: &StateStore) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        if let Some(epoch) = self.groups.commit_to_wait_for(store.committed_epoch()) {
            store.committed_through(epoch).await?;
        }
        // Looked up by key in its run, not by a search of the in-memory ops.
        if self.flushed.in_memory_len() > 0 {
            self.flushed.spill_now(store).await?;
        }
        let snapshot = store.snapshot();
        let (flushed, table_id, values_table) = (&self.flushed, self.table_id, self.values_table);
        // Several reads in flight: a miss waits on the store, not on the CPU.
        let read = futures::stream::iter(keys)
            .map(|key| {
                let snapshot = &snapshot;
                async move {
                    let state_key = make_key(table_id, &key);
                    // The run is read only where its filter says the key may be.
                    let (stored, was_flushed) = match flushed.get(store, &state_key).await? {
                        Some(flushed) => (flushed, true),
                        None => (snapshot.get(&state_key).await?.map(|b| b.to_vec()), false),
                    };
                    let mut values = None;
                    if let (Some(_), Some(table)) = (&stored, values_table) {
                        let (prefix, mut rows) = multiset::stored_values(snapshot, table, &key).await?;
                        // Flushed this epoch: so were its changed values.
                        if was_flushed {
                            for (k, v) in flushed.scan_prefix(store, &prefix).await? {
                                match v {
                                    Some(v) => rows.insert(k, v),
                                    None => rows.remove(&k),
                                };
                            }
                        }
                        values = Some((prefix.len(), rows));
                    }
                    Ok::<_, eddy_common::EddyError>((key, stored, values))
                }
            })
            .buffered(LOAD_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await?;
        for (key, stored, values) in read {
            self.load_stored(key, stored, values)?;
        }
        Ok(())
    }

    /// The groups the watermark closes this epoch, loaded into the cache.
    async fn closing_groups(&mut self) -> Result<Vec<Vec<u8>>> {
        let Some(w) = self.windows.as_ref() else { return Ok(vec![]) };
        let Some(watermark) = w.watermark.clone() else { return Ok(vec![]) };
        let store = w.store.clone().ok_or_else(|| internal_err!("windowed aggregation without its store"))?;
        if !w.complete {
            // Restored: the open groups are the committed ones (the cache only holds groups
            // loaded since, which are committed or in `open` already).
            let (start, end) = eddy_storage::scan::vnode_bounds(self.table_id, &self.vnodes);
            let mut cursor = store.snapshot().scan_batches(start, end, 4096).await?;
            let mut keys = Vec::new();
            while let Some(entries) = cursor.next_batch().await? {
                keys.extend(entries.into_iter().map(|(k, _)| k[eddy_common::codec::KEY_PREFIX_LEN..].to_vec()));
            }
            if let Some(w) = self.windows.as_mut() {
                w.open.extend(keys);
                w.complete = true;
            }
        }
        let Some(w) = self.windows.as_mut() else { return Ok(vec![]) };
        let rest = w.open.split_off(&watermark);
        let below = std::mem::replace(&mut w.open, rest);
        // Closed groups evicted from the cache.
        let missing: Vec<Vec<u8>> = below.iter().filter(|k| !self.groups.knows(k)).cloned().collect();
        self.load(missing, &store).await?;
        Ok(below.into_iter().filter(|k| self.groups.get(k).is_some_and(|g| g.rows > 0)).collect())
    }

    /// Drops the state of the `closed` groups in `epoch`'s batch and, under `EMIT ON WINDOW
    /// CLOSE`, returns their final rows.
    fn close_windows(&mut self, closed: Vec<Vec<u8>>, epoch: Epoch, batch: &mut EpochBatch) -> Result<Vec<(Op, Vec<u8>)>> {
        let eowc = self.windows.as_ref().is_some_and(|w| w.eowc);
        let rows = if eowc { self.output_rows(&closed.iter().collect::<Vec<_>>())? } else { vec![] };
        for key in &closed {
            if let (Some(g), Some(table)) = (self.groups.get_mut(key), self.values_table) {
                multiset::delete_all(&mut g.accs, table, key, batch);
            }
            self.groups.deleted(key, epoch);
            batch.delete(make_key(self.table_id, key));
        }
        Ok(rows.into_iter().map(|r| (Op::Insert, r)).collect())
    }

    fn is_global(&self) -> bool {
        self.group_exprs.is_empty()
    }

    /// Estimated bytes of a new group with its first row (see [`fresh_group_bytes`]).
    fn fresh_bytes(&self) -> usize {
        let row: usize = self.schema.fields().iter().map(|f| f.data_type().primitive_width().unwrap_or(16) + 1).sum();
        fresh_group_bytes(&self.new_group(), row)
    }

    fn new_group(&self) -> Group {
        Group {
            rows: 0,
            accs: self.calls.iter().zip(&self.arg_types).map(|(c, t)| initial_acc(&c.kind, t.as_ref())).collect(),
            emitted: None,
        }
    }

    /// Loads committed group states (recovery), or sets up the single global group of a new
    /// global aggregate so its first barrier emits the empty-input row.
    pub async fn restore(&mut self, snapshot: Option<&ReadSnapshot>) -> Result<()> {
        if let Some(snapshot) = snapshot {
            // Groups load when first touched; only the global group is read now.
            self.groups = StateCache::new(false);
            self.groups.set_fresh_value_bytes(self.fresh_bytes());
            if let Some(w) = self.windows.as_mut() {
                w.complete = false;
            }
            if self.is_global() {
                let stored = snapshot.get(&make_key(self.table_id, &[])).await?;
                let mut values = None;
                if let (Some(_), Some(table)) = (&stored, self.values_table) {
                    let (prefix, rows) = multiset::stored_values(snapshot, table, &[]).await?;
                    values = Some((prefix.len(), rows));
                }
                self.load_stored(Vec::new(), stored, values)?;
            }
        }
        if self.is_global() && self.groups.get(&[]).is_none() {
            let g = self.new_group();
            self.groups.get_or_insert_with(&[], || g)?;
        }
        Ok(())
    }
}

#[async_trait]
impl Operator for HashAgg {
    async fn prefetch(&mut self, chunk: &StreamChunk, store: &StateStore) -> Result<()> {
        // Groups the last chunk flushed go to a run before they may leave the cache.
        if self.flushed.in_memory_len() > 0 {
            self.flushed.spill_now(store).await?;
        }
        self.groups.begin(store);
        if self.groups.is_complete() {
            // Nothing to load: what is not cached does not exist.
            self.groups.answered(chunk.len());
            return Ok(());
        }
        let mut missing: Vec<Vec<u8>> = if self.is_global() {
            vec![Vec::new()]
        } else {
            // Rows whose key fails are left out by `process` as well.
            let (_, keys) = evaluate(&self.group_exprs, chunk.clone(), &mut RowErrors::default())?;
            self.key_converter.convert_columns(&keys)?.iter().map(|r| r.as_ref().to_vec()).collect()
        };
        missing.retain(|k| !self.groups.knows(k));
        if missing.is_empty() {
            return Ok(());
        }
        missing.sort_unstable();
        missing.dedup();
        self.load(missing, store).await
    }

    fn process(&mut self, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        // Group keys and arguments evaluated together: a row failing in either is left out.
        let args: Vec<Arc<dyn PhysicalExpr>> = self.calls.iter().filter_map(|c| c.arg.clone()).collect();
        let filters: Vec<Arc<dyn PhysicalExpr>> = self.calls.iter().filter_map(|c| c.filter.clone()).collect();
        let orders: Vec<Arc<dyn PhysicalExpr>> = self.calls.iter().flat_map(|c| c.order_by.iter().map(|o| o.expr.clone())).collect();
        let exprs: Vec<Arc<dyn PhysicalExpr>> = self.group_exprs.iter().cloned().chain(args).chain(filters).chain(orders).collect();
        let (chunk, mut values) = evaluate(&exprs, chunk, errors)?;
        let n = chunk.len();
        let mut arg_values = values.split_off(self.group_exprs.len());
        let mut filter_values = arg_values.split_off(self.calls.iter().filter(|c| c.arg.is_some()).count());
        let mut order_values = filter_values.split_off(self.calls.iter().filter(|c| c.filter.is_some()).count()).into_iter();
        let mut filter_values = filter_values.into_iter();
        // Per call: which rows count (FILTER), and the ORDER BY values of ordered calls.
        let masks = self
            .calls
            .iter()
            .map(|c| {
                c.filter
                    .as_ref()
                    .map(|_| {
                        use arrow::array::AsArray;
                        let a = filter_values.next().ok_or_else(|| internal_err!("missing FILTER value"))?;
                        let b = a.as_boolean_opt().ok_or_else(|| internal_err!("FILTER is not boolean"))?;
                        Ok(b.iter().map(|v| v.unwrap_or(false)).collect::<Vec<bool>>())
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        let order_cols: Vec<Vec<ArrayRef>> = self.calls.iter().map(|c| order_values.by_ref().take(c.order_by.len()).collect()).collect();
        // Group keys, memcomparable, without a per-row allocation.
        let key_rows = if self.is_global() { None } else { Some(self.key_converter.convert_columns(&values)?) };
        // Arguments, decoded once per chunk into the accumulators' native form.
        let mut arg_values = arg_values.into_iter();
        let inputs = self
            .calls
            .iter()
            .zip(&self.value_converters)
            .zip(&self.arg_types)
            .zip(&order_cols)
            .map(|(((c, conv), t), order)| {
                if c.arg.is_none() {
                    return Ok(ArgInput::Star);
                }
                let arr = arg_values.next().ok_or_else(|| internal_err!("missing aggregate argument"))?;
                if matches!(c.kind, AggKind::FirstValue | AggKind::LastValue | AggKind::ArrayAgg { .. } | AggKind::StringAgg { .. }) {
                    let conv = conv.as_ref().ok_or_else(|| internal_err!("missing value converter"))?;
                    // string_agg leaves NULL values out; the others keep them.
                    let skip_nulls = matches!(c.kind, AggKind::StringAgg { .. }).then(|| arr.clone());
                    let cols: Vec<ArrayRef> = order.iter().cloned().chain([arr]).collect();
                    return Ok(ArgInput::Ordered(conv.convert_columns(&cols)?, skip_nulls));
                }
                ArgInput::decode(&c.kind, arr, conv.as_ref(), t.as_ref())
            })
            .collect::<Result<Vec<_>>>()?;
        let fresh = self.new_group();
        // Append-only: which end of its multiset each call keeps (true: the smallest).
        let keep_end: Vec<Option<bool>> = self
            .calls
            .iter()
            .map(|c| match c.kind {
                AggKind::Min | AggKind::FirstValue if self.append_only => Some(true),
                AggKind::Max | AggKind::LastValue if self.append_only => Some(false),
                _ => None,
            })
            .collect();
        if self.append_only && chunk.ops.iter().any(|op| !op.is_insert()) {
            return Err(internal_err!("an append-only aggregation received a retraction"));
        }
        for row in 0..n {
            let sign: i64 = if chunk.ops[row].is_insert() { 1 } else { -1 };
            let key: &[u8] = match &key_rows {
                Some(r) => r.row(row).data(),
                None => &[],
            };
            let group = self.groups.get_or_insert_with(key, || fresh.clone())?;
            group.rows += sign;
            if group.rows == 1 && sign == 1 {
                if let Some(w) = self.windows.as_mut() {
                    w.open.insert(key.to_vec());
                }
            }
            if group.rows < 0 {
                return Err(internal_err!("aggregation retracted a row it never saw"));
            }
            for (((acc, input), mask), keep) in group.accs.iter_mut().zip(&inputs).zip(&masks).zip(&keep_end) {
                if mask.as_ref().is_none_or(|m| m[row]) {
                    input.apply(acc, row, sign)?;
                    if let (Some(smallest), Acc::Values(m)) = (keep, &mut *acc) {
                        m.keep_one(*smallest);
                    }
                }
            }
        }
        if self.groups.flush_due() {
            // The epoch's changed groups outgrew the budget: out of the cache with them.
            let dirty = self.groups.take_dirty();
            let mut flushed = std::mem::take(&mut self.flushed);
            let out = self.settle(dirty, None, flushed.batch_mut());
            self.flushed = flushed;
            return self.chunk_of(out?);
        }
        Ok(vec![])
    }

    async fn on_barrier(&mut self, epoch: Epoch, batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        // Read while the groups this epoch flushed are still this operator's to read.
        let closed = self.closing_groups().await?;
        // The flushed groups come first in the epoch: the writes below are newer.
        batch.extend(std::mem::take(&mut self.flushed).into_batch());
        self.groups.seal(epoch);
        let dirty = self.groups.take_dirty();
        let mut out = self.settle(dirty, Some(epoch), batch)?;
        out.extend(self.close_windows(closed, epoch, batch)?);
        self.chunk_of(out)
    }

    fn on_watermarks(&mut self, input: &[crate::watermark::Watermark]) -> Result<Vec<crate::watermark::Watermark>> {
        use datafusion::physical_expr::expressions::Column;
        let mut out = Vec::new();
        let eowc = self.windows.as_ref().is_some_and(|w| w.eowc);
        for (g, e) in self.group_exprs.iter().enumerate() {
            let Some(c) = (e.as_ref() as &dyn std::any::Any).downcast_ref::<Column>() else { continue };
            let Some(w) = input.iter().find(|w| w.col == c.index()) else { continue };
            // Emitting on window close, rows come out once the first column closes them:
            // only its watermark holds for the output.
            if eowc && g != 0 {
                continue;
            }
            out.push(crate::watermark::Watermark { col: g, value: w.value.clone() });
            if let Some(win) = self.windows.as_mut().filter(|win| g == 0 && win.input_col == c.index()) {
                let arr = w.value.to_array_of_size(1)?;
                let encoded = win.converter.convert_columns(&[arr])?.row(0).as_ref().to_vec();
                if win.watermark.as_ref().is_none_or(|old| encoded > *old) {
                    win.watermark = Some(encoded);
                }
            }
        }
        Ok(out)
    }

    fn attach_store(&mut self, store: &Arc<StateStore>) {
        if let Some(w) = self.windows.as_mut() {
            w.store = Some(store.clone());
        }
    }
    fn state_stats(&self) -> Option<crate::cache::CacheStats> {
        Some(self.groups.stats())
    }

    /// One of the parallel actors of the aggregation: only the groups of `vnodes` are its own.
    fn own_vnodes(&mut self, vnodes: std::ops::Range<u16>) {
        self.vnodes = vnodes;
    }

    /// Grouped: parallel by group (its state keys are the group keys); global: one actor.
    fn distribution(&self) -> super::Distribution {
        if self.is_global() {
            return super::Distribution::Single;
        }
        super::Distribution::Hash(self.router.clone())
    }
}

mod encoding;
mod fsum;
mod multiset;
mod output;
mod input;
mod regr;
#[cfg(test)]
mod tests;
