//! Every join kind against a brute-force recomputation, after random inserts and deletes on both
//! sides (NULL keys, duplicate keys, a non-equi condition), and again after a restore from state.

use std::collections::BTreeMap;

use arrow::array::{Array, AsArray, Int64Array};
use arrow::datatypes::{Field, Int64Type, Schema};
use datafusion::logical_expr::Operator as BinOp;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use eddy_storage::{StateStore, StoreOptions};
use rand::{Rng, SeedableRng};

use super::*;

type Row = Vec<Option<i64>>;

const KINDS: [JoinKind; 8] = [
    JoinKind::Inner,
    JoinKind::LeftOuter,
    JoinKind::RightOuter,
    JoinKind::FullOuter,
    JoinKind::LeftSemi,
    JoinKind::LeftAnti,
    JoinKind::RightSemi,
    JoinKind::RightAnti,
];

/// A side's rows: (k, v) visible, `id` hidden.
fn side_schema(p: &str) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(format!("{p}k"), DataType::Int64, true),
        Field::new(format!("{p}v"), DataType::Int64, true),
        Field::new(format!("{p}id"), DataType::Int64, true),
    ]))
}

fn join(kind: JoinKind, with_filter: bool, null_aware: bool) -> HashJoin {
    let (l, r) = (side_schema("l"), side_schema("r"));
    let pair = Arc::new(Schema::new(vec![
        l.field(0).clone(),
        l.field(1).clone(),
        r.field(0).clone(),
        r.field(1).clone(),
        l.field(2).clone(),
        r.field(2).clone(),
    ]));
    // l.v < r.v + 2, over the pair layout.
    let filter: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
        Arc::new(Column::new("lv", 1)),
        BinOp::Lt,
        Arc::new(BinaryExpr::new(Arc::new(Column::new("rv", 3)), BinOp::Plus, Arc::new(datafusion::physical_expr::expressions::Literal::new(2i64.into())))),
    ));
    HashJoin::try_new(
        77,
        JoinSpec {
            kind,
            left_schema: l,
            right_schema: r,
            left_visible: 2,
            right_visible: 2,
            left_keys: vec![Arc::new(Column::new("lk", 0))],
            right_keys: vec![Arc::new(Column::new("rk", 0))],
            nulls_match: false,
            null_aware: kind == JoinKind::LeftAnti && !with_filter && null_aware,
            filter: with_filter.then_some(filter),
            pair_schema: pair,
            watermark_keys: vec![],
            interval_bounds: vec![],
        },
    )
    .unwrap()
}

fn chunk(rows: &[(bool, Row)]) -> StreamChunk {
    let col = |i: usize| Arc::new(Int64Array::from(rows.iter().map(|(_, r)| r[i]).collect::<Vec<_>>())) as ArrayRef;
    let batch = RecordBatch::try_new(side_schema("x"), vec![col(0), col(1), col(2)]).unwrap();
    StreamChunk::try_new(batch, rows.iter().map(|(ins, _)| if *ins { Op::Insert } else { Op::Delete }).collect()).unwrap()
}

/// Applies output chunks to a multiset of rows.
fn apply(view: &mut BTreeMap<Row, i64>, chunks: Vec<StreamChunk>) {
    for c in chunks {
        for i in 0..c.len() {
            let row: Row = c.batch.columns().iter().map(|a| (!a.is_null(i)).then(|| a.as_primitive::<Int64Type>().value(i))).collect();
            let e = view.entry(row.clone()).or_default();
            *e += if c.ops[i].is_insert() { 1 } else { -1 };
            assert!(*e >= 0, "retracted {row:?} below zero");
            if *e == 0 {
                view.remove(&row);
            }
        }
    }
}

/// The join of `l` and `r` computed from scratch.
fn expected(kind: JoinKind, with_filter: bool, null_aware: bool, l: &[Row], r: &[Row]) -> BTreeMap<Row, i64> {
    if null_aware {
        // l.k NOT IN (SELECT r.k FROM r).
        let mut out = BTreeMap::new();
        for a in l {
            let shows = r.is_empty() || (a[0].is_some() && r.iter().all(|b| b[0].is_some() && b[0] != a[0]));
            if shows {
                *out.entry(a.clone()).or_insert(0) += 1;
            }
        }
        return out;
    }
    let matches = |a: &Row, b: &Row| a[0].is_some() && a[0] == b[0] && (!with_filter || matches!((a[1], b[1]), (Some(x), Some(y)) if x < y + 2));
    let mut out = BTreeMap::new();
    let mut add = |row: Row| *out.entry(row).or_insert(0) += 1;
    let pair = |a: Option<&Row>, b: Option<&Row>| {
        let n = vec![None; 3];
        let (a, b) = (a.unwrap_or(&n), b.unwrap_or(&n));
        vec![a[0], a[1], b[0], b[1], a[2], b[2]]
    };
    match kind.filtered() {
        Some((side, semi)) => {
            let (this, other) = if side == Side::Left { (l, r) } else { (r, l) };
            for a in this {
                let any = other.iter().any(|b| if side == Side::Left { matches(a, b) } else { matches(b, a) });
                if any == semi {
                    add(a.clone());
                }
            }
        }
        None => {
            for a in l {
                for b in r {
                    if matches(a, b) {
                        add(pair(Some(a), Some(b)));
                    }
                }
            }
            if kind.pads(Side::Left) {
                for a in l.iter().filter(|a| !r.iter().any(|b| matches(a, b))) {
                    add(pair(Some(a), None));
                }
            }
            if kind.pads(Side::Right) {
                for b in r.iter().filter(|b| !l.iter().any(|a| matches(a, b))) {
                    add(pair(None, Some(b)));
                }
            }
        }
    }
    out
}

/// Random changes: inserts of new rows and deletes of live ones, on a random side.
fn step(rng: &mut rand::rngs::StdRng, live: &mut [Vec<Row>; 2], next_id: &mut i64) -> (Side, Vec<(bool, Row)>) {
    let s = rng.gen_range(0..2);
    let mut changes = Vec::new();
    for _ in 0..rng.gen_range(1..6) {
        if !live[s].is_empty() && rng.gen_bool(0.35) {
            let i = rng.gen_range(0..live[s].len());
            changes.push((false, live[s].swap_remove(i)));
        } else {
            let k = if rng.gen_bool(0.15) { None } else { Some(rng.gen_range(0..4)) };
            let row = vec![k, Some(rng.gen_range(0..6)), Some(*next_id)];
            *next_id += 1;
            live[s].push(row.clone());
            changes.push((true, row));
        }
    }
    (if s == 0 { Side::Left } else { Side::Right }, changes)
}

#[tokio::test]
async fn every_kind_equals_recomputation_through_changes_and_a_restore() {
    let variants = KINDS.iter().flat_map(|&k| [(k, false, false), (k, true, false)]).chain([(JoinKind::LeftAnti, false, true)]);
    // A budget of one byte makes every chunk evict what it can: buckets reload from the store.
    let variants: Vec<_> = variants.flat_map(|v| [(v, 512 << 20), (v, 1)]).collect();
    for ((kind, with_filter, null_aware), cache_bytes) in variants {
        {
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let store = StateStore::open(&StoreOptions { operator_cache_bytes: cache_bytes, ..Default::default() }).await.unwrap();
            let mut j = join(kind, with_filter, null_aware);
            let mut view = BTreeMap::new();
            let mut live: [Vec<Row>; 2] = [Vec::new(), Vec::new()];
            let mut next_id = 0;
            let mut errors = RowErrors::default();
            for epoch in 1..=40u64 {
                for _ in 0..5 {
                    let (side, changes) = step(&mut rng, &mut live, &mut next_id);
                    let c = chunk(&changes);
                    j.prefetch(side, &c, &store).await.unwrap();
                    apply(&mut view, j.process(side, c, &mut errors).unwrap());
                }
                let mut batch = EpochBatch::default();
                apply(&mut view, j.on_barrier(Epoch(epoch), &mut batch, &mut errors).await.unwrap());
                store.commit(Epoch(epoch), batch).await.unwrap();
                assert_eq!(view, expected(kind, with_filter, null_aware, &live[0], &live[1]), "{kind:?} filter={with_filter} null_aware={null_aware} cache={cache_bytes} epoch {epoch}");
                if epoch % 10 == 0 {
                    // A restarted join continues from its committed state.
                    j = join(kind, with_filter, null_aware);
                    j.restore(Some(&store.snapshot())).await.unwrap();
                }
            }
            assert!(errors.is_empty());
        }
    }
}

#[test]
fn null_keys_match_when_compared_with_is_not_distinct_from() {
    let mut j = join(JoinKind::Inner, false, false);
    j.nulls_match = true;
    let mut view = BTreeMap::new();
    let mut errors = RowErrors::default();
    apply(&mut view, j.process(Side::Left, chunk(&[(true, vec![None, Some(1), Some(1)])]), &mut errors).unwrap());
    apply(&mut view, j.process(Side::Right, chunk(&[(true, vec![None, Some(2), Some(2)])]), &mut errors).unwrap());
    assert_eq!(view.len(), 1);
}
