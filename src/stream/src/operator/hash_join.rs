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
//! State: one state-table entry per distinct row and side (key: side byte + the encoded row;
//! value: its count). Degrees are not stored: recovery recomputes them from both sides. All rows
//! are kept in memory (moving buckets to a bounded cache is the state-at-scale work).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, SortField};
use async_trait::async_trait;
use datafusion::physical_expr::PhysicalExpr;
use eddy_common::codec::{make_key, KEY_PREFIX_LEN};
use eddy_common::{internal_err, Epoch, Op, Result, StreamChunk};
use eddy_storage::{EpochBatch, ReadSnapshot};

use super::eval::{evaluate, predicate_mask, RowErrors};
use super::{BinaryOperator, Side};

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
}

/// One distinct row of a side.
#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    count: i64,
    degree: i64,
}

/// The rows of one join key: a short vector while small (most keys have a row or a few: a
/// B-tree node would cost ~0.5 KiB per key), a B-tree once large.
#[derive(Debug)]
enum Bucket {
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
    fn get(&self, row: &[u8]) -> Option<&Entry> {
        match self {
            Bucket::Few(v) => v.iter().find(|(r, _)| r.as_slice() == row).map(|(_, e)| e),
            Bucket::Many(m) => m.get(row),
        }
    }

    fn get_mut(&mut self, row: &[u8]) -> Option<&mut Entry> {
        match self {
            Bucket::Few(v) => v.iter_mut().find(|(r, _)| r.as_slice() == row).map(|(_, e)| e),
            Bucket::Many(m) => m.get_mut(row),
        }
    }

    /// The entry of `row`, inserted as `new` if absent.
    fn get_or_insert(&mut self, row: &[u8], new: Entry) -> &mut Entry {
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

    fn remove(&mut self, row: &[u8]) {
        match self {
            Bucket::Few(v) => v.retain(|(r, _)| r.as_slice() != row),
            Bucket::Many(m) => {
                m.remove(row);
            }
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Bucket::Few(v) => v.is_empty(),
            Bucket::Many(m) => m.is_empty(),
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = (&Vec<u8>, &Entry)> + '_> {
        match self {
            Bucket::Few(v) => Box::new(v.iter().map(|(r, e)| (r, e))),
            Bucket::Many(m) => Box::new(m.iter()),
        }
    }
}

/// One side's rows.
struct SideState {
    schema: SchemaRef,
    visible: usize,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Encodes whole rows of this side.
    rows: RowConverter,
    /// The encoding of a row of NULLs (padding).
    null_row: Vec<u8>,
    /// Rows by encoded join key.
    buckets: HashMap<Vec<u8>, Bucket>,
    /// Rows whose key has a NULL: they never match.
    unmatched: Bucket,
    /// Rows changed this epoch, with their bucket (`None`: unmatched).
    dirty: HashMap<Vec<u8>, Option<Vec<u8>>>,
}

impl SideState {
    fn try_new(schema: SchemaRef, visible: usize, keys: Vec<Arc<dyn PhysicalExpr>>) -> Result<Self> {
        let rows = RowConverter::new(schema.fields().iter().map(|f| SortField::new(f.data_type().clone())).collect())?;
        let nulls: Vec<ArrayRef> = schema.fields().iter().map(|f| new_null_array(f.data_type(), 1)).collect();
        let null_row = rows.convert_columns(&nulls)?.row(0).as_ref().to_vec();
        Ok(Self { schema, visible, keys, rows, null_row, buckets: HashMap::new(), unmatched: Bucket::default(), dirty: HashMap::new() })
    }

    fn entry_mut(&mut self, key: Option<&[u8]>, row: &[u8]) -> Option<&mut Entry> {
        match key {
            Some(k) => self.buckets.get_mut(k)?.get_mut(row),
            None => self.unmatched.get_mut(row),
        }
    }

    /// Adds `delta` copies of `row` (with `degree` if new); removes it at count 0.
    fn apply(&mut self, key: Option<&[u8]>, row: &[u8], delta: i64, degree: i64) -> Result<()> {
        let bucket = match key {
            Some(k) => self.buckets.entry(k.to_vec()).or_default(),
            None => &mut self.unmatched,
        };
        let e = bucket.get_or_insert(row, Entry { count: 0, degree });
        e.count += delta;
        let count = e.count;
        if count < 0 {
            return Err(internal_err!("join retracted a row it never saw"));
        }
        if count == 0 {
            bucket.remove(row);
            if let Some(k) = key {
                if self.buckets.get(k).is_some_and(|b| b.is_empty()) {
                    self.buckets.remove(k);
                }
            }
        }
        self.dirty.insert(row.to_vec(), key.map(<[u8]>::to_vec));
        Ok(())
    }

    fn count_of(&self, key: Option<&[u8]>, row: &[u8]) -> i64 {
        match key {
            Some(k) => self.buckets.get(k).and_then(|b| b.get(row)),
            None => self.unmatched.get(row),
        }
        .map_or(0, |e| e.count)
    }

    /// Decodes encoded rows of this side into columns.
    fn columns(&self, rows: &[&[u8]]) -> Result<Vec<ArrayRef>> {
        let parser = self.rows.parser();
        Ok(self.rows.convert_rows(rows.iter().map(|r| parser.parse(r)))?)
    }
}

/// Encoded rows of a chunk with their join keys (`None`: the key has a NULL that never matches).
struct Keyed {
    chunk: StreamChunk,
    rows: arrow::row::Rows,
    keys: Vec<Option<Vec<u8>>>,
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
}

impl fmt::Display for HashJoin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.left.keys.iter().zip(&self.right.keys).map(|(l, r)| format!("{l} = {r}")).collect();
        write!(f, "HashJoin {:?} on=[{}]", self.kind, keys.join(", "))?;
        if let Some(c) = &self.filter {
            write!(f, " filter={c}")?;
        }
        write!(f, " state_table={}", self.table_id)
    }
}

/// One joined (or padded, or semi/anti) output row: the left and right encoded rows.
type Out = (Op, Option<Vec<u8>>, Option<Vec<u8>>);

/// A row being matched: its encoding, its join key (`None`: never matches) and its op.
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
            left: SideState::try_new(spec.left_schema, spec.left_visible, spec.left_keys)?,
            right: SideState::try_new(spec.right_schema, spec.right_visible, spec.right_keys)?,
        })
    }

    fn side(&self, s: Side) -> &SideState {
        match s {
            Side::Left => &self.left,
            Side::Right => &self.right,
        }
    }

    fn side_mut(&mut self, s: Side) -> &mut SideState {
        match s {
            Side::Left => &mut self.left,
            Side::Right => &mut self.right,
        }
    }

    /// Evaluates `side`'s join keys over `chunk` (rows whose key fails are counted and dropped).
    fn keyed(&self, side: Side, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Keyed> {
        let s = self.side(side);
        let (chunk, cols) = evaluate(&s.keys, chunk, errors)?;
        let n = chunk.len();
        let rows = s.rows.convert_columns(chunk.batch.columns())?;
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
        Ok(RecordBatch::try_new(self.pair_schema.clone(), cols)?)
    }

    /// For each row of `rows` (a `side` row, its key and op), the other side's rows it matches,
    /// with their counts.
    fn matches(&self, side: Side, rows: &[Probe<'_>], errors: &mut RowErrors) -> Result<Vec<Matched>> {
        let other = self.side(side.other());
        let mut candidates: Vec<(usize, &Vec<u8>, i64)> = Vec::new();
        for (i, (_, key, _)) in rows.iter().enumerate() {
            if let Some(bucket) = key.and_then(|k| other.buckets.get(k)) {
                candidates.extend(bucket.iter().map(|(r, e)| (i, r, e.count)));
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
                RecordBatch::try_new(s.schema.clone(), s.columns(&rows)?)?
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
    /// gained (or lost) its NULLs.
    fn not_in_changes(&self, old_total: i64, old_nulls: i64, old_degrees: &HashMap<(Option<Vec<u8>>, Vec<u8>), i64>) -> Vec<Out> {
        let flipped = (old_total == 0) != (self.right_total == 0) || (old_nulls == 0) != (self.right_nulls == 0);
        let mut out = Vec::new();
        let mut visit = |key: Option<&Vec<u8>>, row: &Vec<u8>, e: &Entry| {
            let before = old_degrees.get(&(key.cloned(), row.clone())).copied().unwrap_or(e.degree);
            let was = Self::not_in(old_total, old_nulls, key.is_some(), before);
            let is = Self::not_in(self.right_total, self.right_nulls, key.is_some(), e.degree);
            if was != is {
                let op = if is { Op::Insert } else { Op::Delete };
                out.extend(std::iter::repeat_n((op, Some(row.clone()), None), usize::try_from(e.count).unwrap_or(0)));
            }
        };
        if flipped {
            for (k, bucket) in &self.left.buckets {
                for (row, e) in bucket.iter() {
                    visit(Some(k), row, e);
                }
            }
            for (row, e) in self.left.unmatched.iter() {
                visit(None, row, e);
            }
        } else {
            for (k, row) in old_degrees.keys() {
                if let Some(e) = k.as_ref().and_then(|k| self.left.buckets.get(k)).and_then(|b| b.get(row)) {
                    visit(k.as_ref(), row, e);
                }
            }
        }
        out
    }

    /// Loads committed rows (recovery) and recomputes degrees.
    pub async fn restore(&mut self, snapshot: Option<&ReadSnapshot>) -> Result<()> {
        let Some(snapshot) = snapshot else { return Ok(()) };
        let mut by_side: [Vec<(Vec<u8>, i64)>; 2] = [Vec::new(), Vec::new()];
        for (k, v) in snapshot.scan_prefix(&self.table_id.to_be_bytes()).await? {
            let body = k.get(KEY_PREFIX_LEN..).ok_or_else(|| internal_err!("short join state key"))?;
            let (&side, row) = body.split_first().ok_or_else(|| internal_err!("empty join state key"))?;
            let count = i64::from_be_bytes(v[..].try_into().map_err(|_| internal_err!("bad join state value"))?);
            by_side.get_mut(usize::from(side)).ok_or_else(|| internal_err!("bad join side {side}"))?.push((row.to_vec(), count));
        }
        let mut ignored = RowErrors::default();
        for (side, rows) in [(Side::Left, &by_side[0]), (Side::Right, &by_side[1])] {
            for part in rows.chunks(8192) {
                let s = self.side(side);
                let refs: Vec<&[u8]> = part.iter().map(|(r, _)| r.as_slice()).collect();
                let batch = RecordBatch::try_new(s.schema.clone(), s.columns(&refs)?)?;
                let keyed = self.keyed(side, StreamChunk::inserts(batch), &mut ignored)?;
                if keyed.chunk.len() != part.len() {
                    return Err(internal_err!("join state rows no longer evaluate their keys"));
                }
                for (i, (row, count)) in part.iter().enumerate() {
                    self.side_mut(side).apply(keyed.keys[i].as_deref(), row, *count, 0)?;
                }
            }
            self.side_mut(side).dirty.clear();
        }
        self.right_total = self.right.buckets.values().flat_map(|b| b.iter()).chain(self.right.unmatched.iter()).map(|(_, e)| e.count).sum();
        self.right_nulls = self.right.unmatched.iter().map(|(_, e)| e.count).sum();
        for side in [Side::Left, Side::Right] {
            if !self.kind.tracks(side) {
                continue;
            }
            let s = self.side(side);
            let rows: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                s.buckets.iter().flat_map(|(k, b)| b.iter().map(move |(r, _)| (r.clone(), Some(k.clone())))).collect();
            for part in rows.chunks(8192) {
                let refs: Vec<Probe<'_>> = part.iter().map(|(r, k)| (r.as_slice(), k.as_deref(), Op::Insert)).collect();
                let matches = self.matches(side, &refs, &mut ignored)?;
                for ((row, key), m) in part.iter().zip(matches) {
                    let degree = m.iter().map(|(_, c)| c).sum();
                    if let Some(e) = self.side_mut(side).entry_mut(key.as_deref(), row) {
                        e.degree = degree;
                    }
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl BinaryOperator for HashJoin {
    fn process(&mut self, side: Side, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        let Keyed { chunk, rows, keys } = self.keyed(side, chunk, errors)?;
        let n = chunk.len();
        if n == 0 {
            return Ok(vec![]);
        }
        let other = side.other();
        let refs: Vec<Probe<'_>> = (0..n).map(|i| (rows.row(i).data(), keys[i].as_deref(), chunk.ops[i])).collect();
        let matches = self.matches(side, &refs, errors)?;
        let (kind, filtered) = (self.kind, self.kind.filtered());
        let pairs = filtered.is_none();
        let null_aware = self.null_aware;
        let (old_total, old_nulls) = (self.right_total, self.right_nulls);
        // Null-aware: the degree each left row had before this chunk, for rows it changed.
        let mut old_degrees: HashMap<(Option<Vec<u8>>, Vec<u8>), i64> = HashMap::new();
        let mut out: Vec<Out> = Vec::new();
        for (i, matched) in matches.into_iter().enumerate() {
            let (row, key, op) = refs[i];
            let insert = op.is_insert();
            let (sign, pair_op) = if insert { (1, Op::Insert) } else { (-1, Op::Delete) };
            let degree: i64 = matched.iter().map(|(_, c)| c).sum();
            for (o, count) in &matched {
                let copies = usize::try_from(*count).unwrap_or(0);
                let (before, after) = if kind.tracks(other) {
                    let e = self.side_mut(other).entry_mut(key, o).ok_or_else(|| internal_err!("matched row vanished"))?;
                    let before = e.degree;
                    e.degree += sign;
                    if null_aware {
                        old_degrees.entry((key.map(<[u8]>::to_vec), o.clone())).or_insert(before);
                    }
                    (before, e.degree)
                } else {
                    (0, 0)
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
            self.side_mut(side).apply(key, row, sign, degree)?;
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

    async fn on_barrier(&mut self, _epoch: Epoch, batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        for (tag, side) in [(0u8, Side::Left), (1u8, Side::Right)] {
            let dirty = std::mem::take(&mut self.side_mut(side).dirty);
            let s = self.side(side);
            for (row, key) in dirty {
                let count = s.count_of(key.as_deref(), &row);
                let mut body = Vec::with_capacity(1 + row.len());
                body.push(tag);
                body.extend_from_slice(&row);
                let k = make_key(self.table_id, &body);
                if count == 0 {
                    batch.delete(k);
                } else {
                    batch.put(k, count.to_be_bytes().to_vec());
                }
            }
        }
        Ok(vec![])
    }
}

#[cfg(test)]
mod tests;
