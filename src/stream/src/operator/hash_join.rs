//! `HashJoin`: incremental (symmetric hash) join of two change streams.
//!
//! Each side keeps its rows bucketed by join key. A change on one side is matched against the
//! other side's bucket (and the non-equi condition, if any) and emits joined rows at once; the
//! side's own bucket is updated after. Rows are multisets (a count per distinct row), so
//! retractions are exact.
//!
//! Outer, semi and anti joins track each row's *degree*: how many rows of the other side it
//! matches. A NULL-padded row is emitted while a preserved row's degree is 0 and retracted when
//! its first match arrives (and re-emitted when its last match goes); a semi join emits a row
//! while its degree is positive, an anti join while it is 0. NULL keys never match (unless the
//! join compares with `IS NOT DISTINCT FROM`); such rows are kept apart, with degree 0.
//!
//! Output layout (inner and outer joins): the left side's visible columns, the right side's
//! visible columns (the join's SQL schema), then the left side's hidden columns and the right
//! side's. Semi and anti joins output the rows of their side unchanged.
//!
//! `NOT IN (subquery)` is a *null-aware* anti join: a NULL on the right hides every left row,
//! and a left row with a NULL key shows only while the right side is empty. A right change that
//! flips either condition re-evaluates every left row.
//!
//! State: rows live in *buckets*: a join key's bucket holds both sides' rows with that key; a
//! row whose key never matches is a bucket of its own. One state-table entry per distinct row
//! and side (key: the bucket, its vnode first, then the side byte and the encoded row; value:
//! its count), so one prefix read loads a bucket. Buckets are cached in a bounded
//! [`StateCache`]: a chunk's buckets are loaded before it is processed, and evicted when memory
//! is short. Degrees are not stored: loading a bucket recomputes them from its two sides. A
//! null-aware anti join re-evaluates every left row when the right side gains or loses a NULL,
//! so it keeps all its state in memory.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, SortField};
use async_trait::async_trait;
use datafusion::physical_expr::PhysicalExpr;
use eddy_common::codec::table_prefix;
use eddy_common::{internal_err, Epoch, Op, Result, StreamChunk};
use eddy_storage::{EpochBatch, ReadSnapshot, StateStore};

use super::eval::{evaluate, predicate_mask, RowErrors};
use super::{BinaryOperator, Side};
use crate::cache::StateCache;
use interval::{IntervalBound, IntervalCleanup};
use windows::JoinWindows;
use bucket::{bucket_id, bucket_prefix, entry_key, idx, matchable, parse_entry_key, Entry, Pair, ROW_OVERHEAD_BYTES};

/// Which join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    Inner,
    LeftOuter,
    RightOuter,
    FullOuter,
    LeftSemi,
    LeftAnti,
    RightSemi,
    RightAnti,
}

impl JoinKind {
    /// True if `side`'s unmatched rows appear NULL-padded.
    fn pads(self, side: Side) -> bool {
        matches!((self, side), (JoinKind::FullOuter, _) | (JoinKind::LeftOuter, Side::Left) | (JoinKind::RightOuter, Side::Right))
    }

    /// The side a semi or anti join outputs, and whether it is a semi join.
    fn filtered(self) -> Option<(Side, bool)> {
        match self {
            JoinKind::LeftSemi => Some((Side::Left, true)),
            JoinKind::LeftAnti => Some((Side::Left, false)),
            JoinKind::RightSemi => Some((Side::Right, true)),
            JoinKind::RightAnti => Some((Side::Right, false)),
            _ => None,
        }
    }

    /// True if `side`'s rows need their degree.
    fn tracks(self, side: Side) -> bool {
        self.pads(side) || self.filtered().is_some_and(|(s, _)| s == side)
    }
}

/// How to build a [`HashJoin`].
pub struct JoinSpec {
    pub kind: JoinKind,
    /// Each side's row schema (visible columns first, then hidden ones).
    pub left_schema: SchemaRef,
    pub right_schema: SchemaRef,
    /// Number of visible columns of each side.
    pub left_visible: usize,
    pub right_visible: usize,
    /// Equi-join keys, evaluated over each side's rows.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// NULL keys match each other (`IS NOT DISTINCT FROM`).
    pub nulls_match: bool,
    /// A left anti join with SQL's `NOT IN` semantics: a left row is output only if the right
    /// side is empty, or its key is not NULL, no right key is NULL and nothing matches it.
    pub null_aware: bool,
    /// Non-equi condition over the joined row (left visible, right visible, ...).
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// Schema of a joined row (see the module docs for the layout).
    pub pair_schema: SchemaRef,
    /// Equi-key pairs whose columns carry a watermark on both sides of an inner or outer
    /// join: (left column, right column, and the two output columns). Every later output row
    /// has both at least the smaller of the two watermarks (where not NULL-padded).
    pub watermark_keys: Vec<(usize, usize, usize, usize)>,
    /// Bounds the non-equi condition puts on the time columns of an inner join's matches
    /// (see [`interval`]).
    pub interval_bounds: Vec<IntervalBound>,
}

/// One side's encodings.
struct SideState {
    schema: SchemaRef,
    visible: usize,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Encodes whole rows of this side.
    rows: RowConverter,
    /// The encoding of a row of NULLs (padding).
    null_row: Vec<u8>,
    /// The side has no columns (a global aggregate whose value the join does not read, e.g.
    /// `WHERE 1 = (SELECT count(*) ...)`): rows are encoded with one NULL column of their own,
    /// since an encoding of no columns holds no rows.
    unit: bool,
}

impl SideState {
    fn try_new(schema: SchemaRef, visible: usize, keys: Vec<Arc<dyn PhysicalExpr>>) -> Result<Self> {
        let unit = schema.fields().is_empty();
        let mut fields: Vec<SortField> = schema.fields().iter().map(|f| SortField::new(f.data_type().clone())).collect();
        if unit {
            fields.push(SortField::new(arrow::datatypes::DataType::Boolean));
        }
        let rows = RowConverter::new(fields)?;
        let mut side = Self { schema, visible, keys, rows, null_row: Vec::new(), unit };
        let nulls: Vec<ArrayRef> = side.schema.fields().iter().map(|f| new_null_array(f.data_type(), 1)).collect();
        side.null_row = side.encode(&nulls, 1)?.row(0).as_ref().to_vec();
        Ok(side)
    }

    /// Encodes `n` rows of this side's `columns`.
    fn encode(&self, columns: &[ArrayRef], n: usize) -> Result<arrow::row::Rows> {
        if self.unit {
            return Ok(self.rows.convert_columns(&[new_null_array(&arrow::datatypes::DataType::Boolean, n)])?);
        }
        Ok(self.rows.convert_columns(columns)?)
    }

    /// Decodes encoded rows of this side into columns.
    fn columns(&self, rows: &[&[u8]]) -> Result<Vec<ArrayRef>> {
        let parser = self.rows.parser();
        let mut columns = eddy_common::codec::decode_rows(&self.rows, rows.iter().map(|r| parser.parse(r)))?;
        if self.unit {
            columns.clear();
        }
        Ok(columns)
    }

    /// Decodes encoded rows of this side into a batch.
    fn batch(&self, rows: &[&[u8]]) -> Result<RecordBatch> {
        with_rows(self.schema.clone(), self.columns(rows)?, rows.len())
    }
}

/// A batch of `n` rows (also when `schema` has no columns).
fn with_rows(schema: SchemaRef, columns: Vec<ArrayRef>, n: usize) -> Result<RecordBatch> {
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(n));
    Ok(RecordBatch::try_new_with_options(schema, columns, &options)?)
}

/// Encoded rows of a chunk with their join keys (`None`: the key has a NULL that never matches).
struct Keyed {
    chunk: StreamChunk,
    rows: arrow::row::Rows,
    keys: Vec<Option<Vec<u8>>>,
}

impl Keyed {
    /// Each row's bucket.
    fn buckets(&self, side: Side) -> Vec<Vec<u8>> {
        (0..self.chunk.len()).map(|i| bucket_id(self.keys[i].as_deref(), side, self.rows.row(i).data())).collect()
    }
}

/// Incremental join.
pub struct HashJoin {
    table_id: u32,
    kind: JoinKind,
    filter: Option<Arc<dyn PhysicalExpr>>,
    nulls_match: bool,
    null_aware: bool,
    /// Right rows, and right rows with a NULL key (counts; for null-aware anti joins).
    right_total: i64,
    right_nulls: i64,
    /// Encodes join keys (the left side's key types; right keys are cast to them).
    key_converter: Option<RowConverter>,
    key_types: Vec<DataType>,
    pair_schema: SchemaRef,
    left: SideState,
    right: SideState,
    /// Buckets by bucket id.
    state: StateCache<Pair>,
    /// Rows changed this epoch, by (side, row), with their bucket.
    dirty: HashMap<(u8, Vec<u8>), Vec<u8>>,
    /// See [`JoinSpec::watermark_keys`].
    watermark_keys: Vec<(usize, usize, usize, usize)>,
    /// Watermark-driven cleanup of an inner join (see [`JoinWindows`]).
    windows: Option<JoinWindows>,
    /// Watermark-driven cleanup of an interval join (see [`interval`]).
    intervals: Option<IntervalCleanup>,
    /// May run in parallel actors (see [`HashJoin::parallel`]), owning the buckets of `vnodes`.
    parallel: bool,
    vnodes: std::ops::Range<u16>,
}

impl fmt::Display for HashJoin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.left.keys.iter().zip(&self.right.keys).map(|(l, r)| format!("{l} = {r}")).collect();
        write!(f, "HashJoin {:?} on=[{}]", self.kind, keys.join(", "))?;
        if let Some(c) = &self.filter {
            write!(f, " filter={c}")?;
        }
        if let Some(c) = &self.intervals {
            write!(f, " {c}")?;
        }
        write!(f, " state_table={}", self.table_id)
    }
}

/// One joined (or padded, or semi/anti) output row: the left and right encoded rows.
type Out = (Op, Option<Vec<u8>>, Option<Vec<u8>>);

/// A row being matched: its encoding, its bucket if it can match (`None`: its key never
/// matches) and its op.
type Probe<'a> = (&'a [u8], Option<&'a [u8]>, Op);

/// The other side's rows a probe matches, with their counts.
type Matched = Vec<(Vec<u8>, i64)>;

impl HashJoin {
    /// A join keeping its state in table `table_id`.
    pub fn try_new(table_id: u32, spec: JoinSpec) -> Result<Self> {
        if spec.null_aware && (spec.kind != JoinKind::LeftAnti || spec.filter.is_some()) {
            return Err(internal_err!("null-aware joins are left anti joins without a condition"));
        }
        if spec.left_keys.len() != spec.right_keys.len() {
            return Err(internal_err!("join has {} left keys and {} right keys", spec.left_keys.len(), spec.right_keys.len()));
        }
        let key_types = spec.left_keys.iter().map(|k| Ok(k.data_type(&spec.left_schema)?)).collect::<Result<Vec<_>>>()?;
        let key_converter =
            if key_types.is_empty() { None } else { Some(RowConverter::new(key_types.iter().map(|t| SortField::new(t.clone())).collect())?) };
        let windows = JoinWindows::try_new(&spec, &key_types)?;
        let intervals = IntervalCleanup::new(&spec);
        Ok(Self {
            table_id,
            kind: spec.kind,
            filter: spec.filter,
            nulls_match: spec.nulls_match,
            null_aware: spec.null_aware,
            right_total: 0,
            right_nulls: 0,
            key_converter,
            key_types,
            pair_schema: spec.pair_schema,
            watermark_keys: spec.watermark_keys.clone(),
            windows,
            intervals,
            left: SideState::try_new(spec.left_schema, spec.left_visible, spec.left_keys)?,
            right: SideState::try_new(spec.right_schema, spec.right_visible, spec.right_keys)?,
            state: StateCache::new(true),
            dirty: HashMap::new(),
            parallel: false,
            vnodes: 0..eddy_common::codec::VNODE_COUNT,
        })
    }

    /// Lets the join run in parallel actors, split by join key: the planner keyed its output
    /// by the join key too, so no two actors ever emit rows of one key. Not for a join without
    /// equi-keys or a null-aware one (which needs every row).
    pub fn parallel(mut self) -> Self {
        self.parallel = self.key_converter.is_some() && !self.null_aware;
        self
    }

    fn side(&self, s: Side) -> &SideState {
        match s {
            Side::Left => &self.left,
            Side::Right => &self.right,
        }
    }

    fn entry(&self, side: Side, bucket: &[u8], row: &[u8]) -> Option<&Entry> {
        self.state.get(bucket)?.sides[idx(side)].get(row)
    }

    fn entry_mut(&mut self, side: Side, bucket: &[u8], row: &[u8]) -> Option<&mut Entry> {
        self.state.get_mut(bucket)?.sides[idx(side)].get_mut(row)
    }

    /// Adds `delta` copies of `side`'s `row` to `bucket` (with `degree` if new); removes it at
    /// count 0.
    fn apply(&mut self, side: Side, bucket: &[u8], row: &[u8], delta: i64, degree: i64) -> Result<()> {
        let b = &mut self.state.get_or_insert_with(bucket, Pair::default)?.sides[idx(side)];
        let e = b.get_or_insert(row, Entry { count: 0, degree });
        e.count += delta;
        let count = e.count;
        if count < 0 {
            return Err(internal_err!("join retracted a row it never saw"));
        }
        if count == 0 {
            b.remove(row);
        }
        self.dirty.insert((idx(side) as u8, row.to_vec()), bucket.to_vec());
        Ok(())
    }

    /// Evaluates `side`'s join keys over `chunk` (rows whose key fails are counted and dropped).
    fn keyed(&self, side: Side, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Keyed> {
        let s = self.side(side);
        let (chunk, cols) = evaluate(&s.keys, chunk, errors)?;
        let n = chunk.len();
        let rows = s.encode(chunk.batch.columns(), n)?;
        let keys = match &self.key_converter {
            None => vec![Some(Vec::new()); n],
            Some(conv) => {
                let cols = cols
                    .iter()
                    .zip(&self.key_types)
                    .map(|(c, t)| if c.data_type() == t { Ok(c.clone()) } else { arrow::compute::cast(c, t) })
                    .collect::<Result<Vec<_>, _>>()?;
                let encoded = conv.convert_columns(&cols)?;
                (0..n)
                    .map(|i| {
                        let null = !self.nulls_match && cols.iter().any(|c| c.is_null(i));
                        (!null).then(|| encoded.row(i).as_ref().to_vec())
                    })
                    .collect()
            }
        };
        Ok(Keyed { chunk, rows, keys })
    }

    /// Joined rows in the pair layout.
    fn assemble(&self, pairs: &[(&[u8], &[u8])]) -> Result<RecordBatch> {
        let l = self.left.columns(&pairs.iter().map(|p| p.0).collect::<Vec<_>>())?;
        let r = self.right.columns(&pairs.iter().map(|p| p.1).collect::<Vec<_>>())?;
        let (lv, rv) = (self.left.visible, self.right.visible);
        let cols: Vec<ArrayRef> = l[..lv].iter().chain(&r[..rv]).chain(&l[lv..]).chain(&r[rv..]).cloned().collect();
        with_rows(self.pair_schema.clone(), cols, pairs.len())
    }

    /// For each row of `rows` (a `side` row, its bucket and op), the other side's rows it
    /// matches, with their counts.
    fn matches(&self, side: Side, rows: &[Probe<'_>], errors: &mut RowErrors) -> Result<Vec<Matched>> {
        let other = idx(side.other());
        let mut candidates: Vec<(usize, &Vec<u8>, i64)> = Vec::new();
        for (i, (_, bucket, _)) in rows.iter().enumerate() {
            if let Some(pair) = bucket.and_then(|b| self.state.get(b)) {
                candidates.extend(pair.sides[other].iter().map(|(r, e)| (i, r, e.count)));
            }
        }
        let keep = match &self.filter {
            None => vec![true; candidates.len()],
            Some(_) if candidates.is_empty() => vec![],
            Some(filter) => {
                let mut keep = Vec::with_capacity(candidates.len());
                // Bounded pair batches: a hot key may match many rows.
                for part in candidates.chunks(4096) {
                    let pairs: Vec<(&[u8], &[u8])> = part
                        .iter()
                        .map(|(i, o, _)| match side {
                            Side::Left => (rows[*i].0, o.as_slice()),
                            Side::Right => (o.as_slice(), rows[*i].0),
                        })
                        .collect();
                    let ops: Vec<Op> = part.iter().map(|(i, _, _)| rows[*i].2).collect();
                    keep.extend(predicate_mask(filter, &self.assemble(&pairs)?, &ops, errors)?);
                }
                keep
            }
        };
        let mut out = vec![Vec::new(); rows.len()];
        for ((i, o, c), k) in candidates.into_iter().zip(keep) {
            if k {
                out[i].push((o.clone(), c));
            }
        }
        Ok(out)
    }

    /// Builds the output chunk of `out`.
    fn output(&self, out: Vec<Out>) -> Result<Vec<StreamChunk>> {
        if out.is_empty() {
            return Ok(vec![]);
        }
        let ops: Vec<Op> = out.iter().map(|o| o.0).collect();
        let batch = match self.kind.filtered() {
            Some((side, _)) => {
                let s = self.side(side);
                let rows: Vec<&[u8]> = out.iter().map(|o| o.1.as_deref().or(o.2.as_deref()).unwrap_or(&s.null_row)).collect();
                s.batch(&rows)?
            }
            None => {
                let pairs: Vec<(&[u8], &[u8])> = out
                    .iter()
                    .map(|o| (o.1.as_deref().unwrap_or(&self.left.null_row), o.2.as_deref().unwrap_or(&self.right.null_row)))
                    .collect();
                self.assemble(&pairs)?
            }
        };
        Ok(vec![StreamChunk::try_new(batch, ops)?])
    }

    /// `row` of `side` as an output row (the other side NULL, or absent for semi/anti).
    fn alone(side: Side, op: Op, row: &[u8]) -> Out {
        match side {
            Side::Left => (op, Some(row.to_vec()), None),
            Side::Right => (op, None, Some(row.to_vec())),
        }
    }

    /// Whether a left row of a null-aware anti join shows, given its key is (not) NULL and its
    /// degree, with the right side as it is now.
    fn shows_not_in(&self, has_key: bool, degree: i64) -> bool {
        Self::not_in(self.right_total, self.right_nulls, has_key, degree)
    }

    fn not_in(right_total: i64, right_nulls: i64, has_key: bool, degree: i64) -> bool {
        right_total == 0 || (has_key && right_nulls == 0 && degree == 0)
    }

    /// The left rows of a null-aware anti join that appear or disappear after a right chunk:
    /// those whose degree changed, or all of them when the right side became (non-)empty or
    /// gained (or lost) its NULLs. (Such a join keeps all its state cached.)
    fn not_in_changes(&self, old_total: i64, old_nulls: i64, old_degrees: &HashMap<(Vec<u8>, Vec<u8>), i64>) -> Vec<Out> {
        let flipped = (old_total == 0) != (self.right_total == 0) || (old_nulls == 0) != (self.right_nulls == 0);
        let mut out = Vec::new();
        let mut visit = |bucket: &Vec<u8>, row: &Vec<u8>, e: &Entry| {
            let before = old_degrees.get(&(bucket.clone(), row.clone())).copied().unwrap_or(e.degree);
            let has_key = matchable(bucket);
            let was = Self::not_in(old_total, old_nulls, has_key, before);
            let is = Self::not_in(self.right_total, self.right_nulls, has_key, e.degree);
            if was != is {
                let op = if is { Op::Insert } else { Op::Delete };
                out.extend(std::iter::repeat_n((op, Some(row.clone()), None), usize::try_from(e.count).unwrap_or(0)));
            }
        };
        if flipped {
            for (bucket, pair) in self.state.values() {
                for (row, e) in pair.sides[0].iter() {
                    visit(bucket, row, e);
                }
            }
        } else {
            for (bucket, row) in old_degrees.keys() {
                if let Some(e) = self.entry(Side::Left, bucket, row) {
                    visit(bucket, row, e);
                }
            }
        }
        out
    }

    /// Caches the buckets made of `entries` (state entries in key order, so each bucket's are
    /// adjacent), plus an empty one for each of `absent`, and computes their rows' degrees.
    fn load_entries<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, entries: Vec<(K, V)>, absent: Vec<Vec<u8>>) -> Result<()> {
        let mut loaded: Vec<Vec<u8>> = Vec::new();
        let mut current: Option<(Vec<u8>, Pair, usize)> = None;
        for (k, v) in &entries {
            let (bucket, side, row) = parse_entry_key(k.as_ref())?;
            let count = i64::from_be_bytes(v.as_ref().try_into().map_err(|_| internal_err!("bad join state value"))?);
            if current.as_ref().is_none_or(|(b, _, _)| b.as_slice() != bucket) {
                if let Some((b, pair, bytes)) = current.take() {
                    self.state.load(b.clone(), Some(pair), bytes);
                    loaded.push(b);
                }
                current = Some((bucket.to_vec(), Pair::default(), 0));
            }
            if let Some((_, pair, bytes)) = current.as_mut() {
                pair.sides[side].get_or_insert(row, Entry { count, degree: 0 });
                *bytes += row.len() + ROW_OVERHEAD_BYTES;
            }
        }
        if let Some((b, pair, bytes)) = current.take() {
            self.state.load(b.clone(), Some(pair), bytes);
            loaded.push(b);
        }
        for b in absent {
            if self.state.get(&b).is_none() {
                self.state.load(b, None, 0);
            }
        }
        self.compute_degrees(&loaded)
    }

    /// Sets the degree of every row of the tracked sides in `buckets` from the other side.
    fn compute_degrees(&mut self, buckets: &[Vec<u8>]) -> Result<()> {
        let mut ignored = RowErrors::default();
        for side in [Side::Left, Side::Right] {
            if !self.kind.tracks(side) {
                continue;
            }
            let rows: Vec<(&Vec<u8>, Vec<u8>)> = buckets
                .iter()
                .filter(|b| matchable(b))
                .filter_map(|b| self.state.get(b).map(|p| (b, p)))
                .flat_map(|(b, p)| p.sides[idx(side)].iter().map(move |(r, _)| (b, r.clone())))
                .collect();
            for part in rows.chunks(8192) {
                let probes: Vec<Probe<'_>> = part.iter().map(|(b, r)| (r.as_slice(), Some(b.as_slice()), Op::Insert)).collect();
                let matched = self.matches(side, &probes, &mut ignored)?;
                let degrees: Vec<i64> = matched.iter().map(|m| m.iter().map(|(_, c)| c).sum()).collect();
                for ((b, r), degree) in part.iter().zip(degrees) {
                    if let Some(e) = self.entry_mut(side, b, r) {
                        e.degree = degree;
                    }
                }
            }
        }
        Ok(())
    }

    /// Recovery: buckets load when first touched, except for a null-aware anti join, which
    /// loads all of its state now.
    pub async fn restore(&mut self, snapshot: Option<&ReadSnapshot>) -> Result<()> {
        let Some(snapshot) = snapshot else { return Ok(()) };
        if let Some(w) = self.windows.as_mut() {
            w.complete = false;
        }
        if let Some(c) = self.intervals.as_mut() {
            c.complete = false;
        }
        if !self.null_aware {
            self.state = StateCache::new(false);
            return Ok(());
        }
        self.state = StateCache::new(true);
        let entries = snapshot.scan_prefix(&table_prefix(self.table_id)).await?;
        self.load_entries(entries, vec![])?;
        self.right_total = self.state.values().flat_map(|(_, p)| p.sides[1].iter()).map(|(_, e)| e.count).sum();
        self.right_nulls =
            self.state.values().filter(|(b, _)| !matchable(b)).flat_map(|(_, p)| p.sides[1].iter()).map(|(_, e)| e.count).sum();
        Ok(())
    }
}

#[async_trait]
impl BinaryOperator for HashJoin {
    fn on_watermarks(&mut self, left: &[crate::watermark::Watermark], right: &[crate::watermark::Watermark]) -> Result<Vec<crate::watermark::Watermark>> {
        use crate::watermark::Watermark;
        let mut out = Vec::new();
        for &(l, r, lo, ro) in &self.watermark_keys {
            let (Some(a), Some(b)) = (left.iter().find(|w| w.col == l), right.iter().find(|w| w.col == r)) else { continue };
            if let Some(m) = Watermark::min(a, b) {
                if let Some(w) = self.windows.as_mut().filter(|_| self.watermark_keys.first().is_some_and(|k| k.0 == l && k.1 == r)) {
                    w.advance(&m.value, &self.key_types)?;
                }
                // A side's columns are NULL in the other side's padded rows: no watermark there.
                if !self.kind.pads(Side::Right) {
                    out.push(Watermark { col: lo, value: m.value.clone() });
                }
                if !self.kind.pads(Side::Left) {
                    out.push(Watermark { col: ro, value: m.value });
                }
            }
        }
        if let Some(c) = self.intervals.as_mut() {
            for w in c.advance(left, right, [&self.left, &self.right])? {
                match out.iter_mut().find(|o| o.col == w.col) {
                    // Both bound the column from below: the larger is the better promise.
                    Some(o) if o.value < w.value => *o = w,
                    Some(_) => {}
                    None => out.push(w),
                }
            }
        }
        Ok(out)
    }

    async fn prefetch(&mut self, side: Side, chunk: &StreamChunk, store: &StateStore) -> Result<()> {
        if self.null_aware {
            // Keeps everything (see `restore`): never evicts, never misses.
            self.state.answered(chunk.len());
            return Ok(());
        }
        self.state.begin(store);
        if self.state.is_complete() {
            // Nothing to load: what is not cached does not exist.
            self.state.answered(chunk.len());
            return Ok(());
        }
        // Rows whose key fails are left out by `process` as well.
        let keyed = self.keyed(side, chunk.clone(), &mut RowErrors::default())?;
        let mut missing = keyed.buckets(side);
        missing.retain(|b| !self.state.knows(b));
        if missing.is_empty() {
            return Ok(());
        }
        missing.sort_unstable();
        missing.dedup();
        let snapshot = store.snapshot();
        let mut entries = Vec::new();
        for b in &missing {
            entries.extend(snapshot.scan_prefix_cached(&bucket_prefix(self.table_id, b)).await?);
        }
        self.load_entries(entries, missing)
    }

    fn process(&mut self, side: Side, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        let keyed = self.keyed(side, chunk, errors)?;
        let n = keyed.chunk.len();
        if n == 0 {
            return Ok(vec![]);
        }
        let buckets = keyed.buckets(side);
        let Keyed { chunk, rows, keys } = keyed;
        let s = match side {
            Side::Left => &self.left,
            Side::Right => &self.right,
        };
        if let Some(w) = self.windows.as_mut() {
            w.record(s, &chunk, &buckets, &self.key_types)?;
        }
        if let Some(c) = self.intervals.as_mut() {
            c.record(side, &chunk, &buckets)?;
        }
        let other = side.other();
        let refs: Vec<Probe<'_>> =
            (0..n).map(|i| (rows.row(i).data(), keys[i].is_some().then(|| buckets[i].as_slice()), chunk.ops[i])).collect();
        let matches = self.matches(side, &refs, errors)?;
        let (kind, filtered) = (self.kind, self.kind.filtered());
        let pairs = filtered.is_none();
        let null_aware = self.null_aware;
        let (old_total, old_nulls) = (self.right_total, self.right_nulls);
        // Null-aware: the degree each left row had before this chunk, for rows it changed.
        let mut old_degrees: HashMap<(Vec<u8>, Vec<u8>), i64> = HashMap::new();
        let mut out: Vec<Out> = Vec::new();
        for (i, matched) in matches.into_iter().enumerate() {
            let (row, key, op) = refs[i];
            let insert = op.is_insert();
            let (sign, pair_op) = if insert { (1, Op::Insert) } else { (-1, Op::Delete) };
            let degree: i64 = matched.iter().map(|(_, c)| c).sum();
            for (o, count) in &matched {
                let copies = usize::try_from(*count).unwrap_or(0);
                let (before, after) = match key {
                    Some(bucket) if kind.tracks(other) => {
                        let e = self.entry_mut(other, bucket, o).ok_or_else(|| internal_err!("matched row vanished"))?;
                        let before = e.degree;
                        e.degree += sign;
                        let after = e.degree;
                        if null_aware {
                            old_degrees.entry((bucket.to_vec(), o.clone())).or_insert(before);
                        }
                        (before, after)
                    }
                    _ => (0, 0),
                };
                let first = before == 0 && after > 0;
                let last = before > 0 && after == 0;
                if kind.pads(other) && first {
                    out.extend(std::iter::repeat_n(Self::alone(other, Op::Delete, o), copies));
                }
                if pairs {
                    let pair = match side {
                        Side::Left => (pair_op, Some(row.to_vec()), Some(o.clone())),
                        Side::Right => (pair_op, Some(o.clone()), Some(row.to_vec())),
                    };
                    out.extend(std::iter::repeat_n(pair, copies));
                }
                if kind.pads(other) && last {
                    out.extend(std::iter::repeat_n(Self::alone(other, Op::Insert, o), copies));
                }
                if let Some((s, semi)) = filtered.filter(|_| !null_aware) {
                    if s == other && (first || last) {
                        let shows = first == semi;
                        out.extend(std::iter::repeat_n(Self::alone(other, if shows { Op::Insert } else { Op::Delete }, o), copies));
                    }
                }
            }
            if kind.pads(side) && degree == 0 {
                out.push(Self::alone(side, pair_op, row));
            }
            if let Some((s, semi)) = filtered {
                let shows = if null_aware { self.shows_not_in(key.is_some(), degree) } else { (degree > 0) == semi };
                if s == side && shows {
                    out.push(Self::alone(side, pair_op, row));
                }
            }
            self.apply(side, &buckets[i], row, sign, degree)?;
            if side == Side::Right {
                self.right_total += sign;
                if key.is_none() {
                    self.right_nulls += sign;
                }
            }
        }
        if null_aware && side == Side::Right {
            out.extend(self.not_in_changes(old_total, old_nulls, &old_degrees));
        }
        self.output(out)
    }

    async fn on_barrier(&mut self, epoch: Epoch, batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        self.expire_intervals().await?;
        for ((tag, row), bucket) in std::mem::take(&mut self.dirty) {
            let side = if tag == 0 { Side::Left } else { Side::Right };
            let count = self.entry(side, &bucket, &row).map_or(0, |e| e.count);
            let k = entry_key(self.table_id, &bucket, tag, &row);
            if count == 0 {
                batch.delete(k);
            } else {
                batch.put(k, count.to_be_bytes().to_vec());
            }
        }
        for bucket in self.state.take_dirty() {
            match self.state.get(&bucket) {
                Some(pair) if !pair.is_empty() => {
                    let bytes = pair.bytes();
                    self.state.written(&bucket, epoch, bytes);
                }
                _ => self.state.deleted(&bucket, epoch),
            }
        }
        self.close_windows(epoch, batch).await?;
        Ok(vec![])
    }

    fn attach_store(&mut self, store: &Arc<StateStore>) {
        if let Some(w) = self.windows.as_mut() {
            w.store = Some(store.clone());
        }
        if let Some(c) = self.intervals.as_mut() {
            c.store = Some(store.clone());
        }
    }
    fn state_stats(&self) -> Option<crate::cache::CacheStats> {
        Some(self.state.stats())
    }

    /// Parallel by join key, when the planner keyed the output by it ([`HashJoin::parallel`]).
    fn routers(&self) -> Option<[Arc<dyn crate::route::Router>; 2]> {
        let router = |side: Side| -> Arc<dyn crate::route::Router> {
            let (keys, nulls_match) = (self.side(side).keys.clone(), self.nulls_match);
            Arc::new(route::JoinRouter { side, keys, key_types: self.key_types.clone(), nulls_match })
        };
        self.parallel.then(|| [router(Side::Left), router(Side::Right)])
    }

    fn own_vnodes(&mut self, vnodes: std::ops::Range<u16>) {
        self.vnodes = vnodes;
    }
}

mod bucket;
mod route;
pub mod interval;
mod windows;
#[cfg(test)]
mod tests;
