//! HashAgg: retraction, SQL edge cases, state encoding, and eviction and restore through a state store.

use std::collections::BTreeMap;

use arrow::array::{Int32Array, RecordBatch, StringArray};
use arrow::datatypes::Field;
use datafusion::physical_expr::expressions::Column;

use super::*;

fn chunk(ops: &[Op], g: &[&str], v: &[Option<i32>]) -> StreamChunk {
    let schema = Arc::new(Schema::new(vec![Field::new("g", DataType::Utf8, true), Field::new("v", DataType::Int32, true)]));
    let batch = RecordBatch::try_new(
        schema,
        vec![Arc::new(StringArray::from(g.to_vec())), Arc::new(Int32Array::from(v.to_vec()))],
    )
    .unwrap();
    StreamChunk::try_new(batch, ops.to_vec()).unwrap()
}

fn agg(kinds: &[(AggKind, DataType)], grouped: bool) -> HashAgg {
    let input = Schema::new(vec![Field::new("g", DataType::Utf8, true), Field::new("v", DataType::Int32, true)]);
    let mut fields = Vec::new();
    let groups: Vec<Arc<dyn PhysicalExpr>> = if grouped {
        fields.push(Field::new("g", DataType::Utf8, true));
        vec![Arc::new(Column::new("g", 0))]
    } else {
        vec![]
    };
    let calls = kinds
        .iter()
        .map(|(k, t)| {
            fields.push(Field::new(format!("{k:?}"), t.clone(), true));
            AggCall { kind: k.clone(), arg: (*k != AggKind::CountStar).then(|| Arc::new(Column::new("v", 1)) as _), output: t.clone(), filter: None, order_by: vec![] }
        })
        .collect();
    HashAgg::try_new(100, &input, groups, calls, Arc::new(Schema::new(fields))).unwrap().with_values_table(101)
}

async fn barrier(a: &mut HashAgg) -> Vec<(Op, Vec<String>)> {
    let mut b = EpochBatch::default();
    let out = a.on_barrier(Epoch(1), &mut b, &mut RowErrors::default()).await.unwrap();
    let mut rows = Vec::new();
    for c in out {
        for i in 0..c.len() {
            let vals = c
                .batch
                .columns()
                .iter()
                .map(|col| arrow::util::display::array_value_to_string(col, i).unwrap())
                .collect();
            rows.push((c.ops[i], vals));
        }
    }
    rows
}

/// Random inserts and deletes of `(group, value)` rows, and the count/min/sum view they make.
struct Workload {
    live: Vec<(String, i32)>,
    seed: u64,
}

impl Workload {
    fn new(seed: u64) -> Self {
        Self { live: Vec::new(), seed }
    }

    fn next(&mut self) -> u64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed
    }

    /// `rows` changes: one in `delete_one_in` deletes a live row, the others insert into one of
    /// `groups` groups a value below `values`.
    fn chunk(&mut self, rows: usize, delete_one_in: u64, groups: u64, values: u64) -> StreamChunk {
        let (mut ops, mut gs, mut vs) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rows {
            let r = self.next();
            let (op, (g, v)) = if r.is_multiple_of(delete_one_in) && !self.live.is_empty() {
                let i = (r / delete_one_in) as usize % self.live.len();
                (Op::Delete, self.live.swap_remove(i))
            } else {
                let row = (format!("g{}", r % groups), (r / groups % values) as i32);
                self.live.push(row.clone());
                (Op::Insert, row)
            };
            ops.push(op);
            gs.push(g);
            vs.push(Some(v));
        }
        let g: Vec<&str> = gs.iter().map(String::as_str).collect();
        chunk(&ops, &g, &vs)
    }

    /// Group → count, min, sum of the live rows.
    fn expected(&self) -> BTreeMap<String, Vec<String>> {
        let mut expected: BTreeMap<String, (i64, i32, i64)> = BTreeMap::new();
        for (g, v) in &self.live {
            let e = expected.entry(g.clone()).or_insert((0, i32::MAX, 0));
            *e = (e.0 + 1, e.1.min(*v), e.2 + i64::from(*v));
        }
        expected.into_iter().map(|(g, (n, m, s))| (g, vec![n.to_string(), m.to_string(), s.to_string()])).collect()
    }
}

#[tokio::test]
async fn deleting_the_minimum_exposes_the_next_smallest() {
    let mut a = agg(&[(AggKind::Min, DataType::Int32), (AggKind::Max, DataType::Int32)], true);
    a.restore(None).await.unwrap();
    a.process(chunk(&[Op::Insert, Op::Insert, Op::Insert], &["x", "x", "x"], &[Some(3), Some(1), Some(7)]), &mut RowErrors::default()).unwrap();
    assert_eq!(barrier(&mut a).await, vec![(Op::Insert, vec!["x".into(), "1".into(), "7".into()])]);
    a.process(chunk(&[Op::Delete], &["x"], &[Some(1)]), &mut RowErrors::default()).unwrap();
    assert_eq!(
        barrier(&mut a).await,
        vec![
            (Op::UpdateDelete, vec!["x".into(), "1".into(), "7".into()]),
            (Op::UpdateInsert, vec!["x".into(), "3".into(), "7".into()])
        ]
    );
}

#[tokio::test]
async fn a_group_whose_last_row_is_retracted_disappears() {
    let mut a = agg(&[(AggKind::CountStar, DataType::Int64)], true);
    a.restore(None).await.unwrap();
    a.process(chunk(&[Op::Insert], &["x"], &[Some(1)]), &mut RowErrors::default()).unwrap();
    barrier(&mut a).await;
    a.process(chunk(&[Op::Delete], &["x"], &[Some(1)]), &mut RowErrors::default()).unwrap();
    assert_eq!(barrier(&mut a).await, vec![(Op::Delete, vec!["x".into(), "1".into()])]);
    assert!(a.groups.values().next().is_none());
}

#[tokio::test]
async fn evicted_and_restored_groups_continue_exactly() {
    use eddy_storage::{StateStore, StoreOptions};
    // A budget of one byte makes every chunk evict what it can: groups reload from the store.
    for cache_bytes in [512 << 20, 1] {
        let store = StateStore::open(&StoreOptions { operator_cache_bytes: cache_bytes, ..Default::default() }).await.unwrap();
        let kinds = [(AggKind::CountStar, DataType::Int64), (AggKind::Min, DataType::Int32), (AggKind::Sum, DataType::Int64)];
        let mut a = agg(&kinds, true);
        a.restore(None).await.unwrap();
        let mut w = Workload::new(0x2545_f491_4f6c_dd1d);
        let mut view: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for epoch in 1..=30u64 {
            for _ in 0..4 {
                let c = w.chunk(6, 3, 17, 100);
                a.prefetch(&c, &store).await.unwrap();
                a.process(c, &mut RowErrors::default()).unwrap();
            }
            let mut b = EpochBatch::default();
            for c in a.on_barrier(Epoch(epoch), &mut b, &mut RowErrors::default()).await.unwrap() {
                for i in 0..c.len() {
                    let vals: Vec<String> =
                        c.batch.columns().iter().map(|col| arrow::util::display::array_value_to_string(col, i).unwrap()).collect();
                    if c.ops[i].is_insert() {
                        view.insert(vals[0].clone(), vals[1..].to_vec());
                    } else {
                        view.remove(&vals[0]);
                    }
                }
            }
            store.commit(Epoch(epoch), b).await.unwrap();
            let expected = w.expected();
            assert_eq!(view, expected, "cache {cache_bytes} epoch {epoch}");
            if epoch % 10 == 0 {
                a = agg(&kinds, true);
                a.restore(Some(&store.snapshot())).await.unwrap();
            }
        }
    }
}

/// Applies output chunks to a view of group → other columns.
fn apply(view: &mut BTreeMap<String, Vec<String>>, out: Vec<StreamChunk>) -> usize {
    let mut rows = 0;
    for c in out {
        for i in 0..c.len() {
            let vals: Vec<String> = c.batch.columns().iter().map(|col| arrow::util::display::array_value_to_string(col, i).unwrap()).collect();
            if c.ops[i].is_insert() {
                view.insert(vals[0].clone(), vals[1..].to_vec());
            } else {
                assert_eq!(view.remove(&vals[0]).as_deref(), Some(&vals[1..]), "a retraction names the row last emitted");
            }
            rows += 1;
        }
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epoch_larger_than_the_budget_is_flushed_mid_epoch_and_stays_exact() {
    use eddy_storage::{StateStore, StoreOptions};
    // Every epoch changes thousands of groups under a one-byte budget: the changed groups are
    // flushed (output early, state to a run), leave the cache, and are read back by later
    // chunks of the same epoch and, before their epoch has committed, of the next one.
    let store = StateStore::open(&StoreOptions { operator_cache_bytes: 1, ..Default::default() }).await.unwrap();
    let kinds = [(AggKind::CountStar, DataType::Int64), (AggKind::Min, DataType::Int32), (AggKind::Sum, DataType::Int64)];
    let mut a = agg(&kinds, true);
    a.restore(None).await.unwrap();
    let mut w = Workload::new(0x9e37_79b9_7f4a_7c15);
    let mut view: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut early_rows, mut fewest_cached) = (0, usize::MAX);
    let mut committing: Option<tokio::task::JoinHandle<()>> = None;
    for epoch in 1..=6u64 {
        for _ in 0..8 {
            let c = w.chunk(600, 4, 5000, 1000);
            a.prefetch(&c, &store).await.unwrap();
            fewest_cached = fewest_cached.min(a.groups.len());
            early_rows += apply(&mut view, a.process(c, &mut RowErrors::default()).unwrap());
        }
        let mut b = EpochBatch::default();
        apply(&mut view, a.on_barrier(Epoch(epoch), &mut b, &mut RowErrors::default()).await.unwrap());
        // The next epoch runs while this one commits.
        if let Some(h) = committing.take() {
            h.await.unwrap();
        }
        let s = store.clone();
        committing = Some(tokio::spawn(async move { s.commit(Epoch(epoch), b).await.unwrap() }));
        let expected = w.expected();
        assert_eq!(view, expected, "epoch {epoch}");
    }
    committing.unwrap().await.unwrap();
    assert!(early_rows > 0, "changed groups were flushed before their barrier");
    assert!(fewest_cached < 2000, "flushed groups left the cache (fewest cached: {fewest_cached})");
    // What was committed is what was emitted: a restored operator continues from it.
    let mut b = a;
    b.groups = StateCache::new(false);
    let keys: Vec<&str> = view.keys().map(String::as_str).collect();
    let c = chunk(&vec![Op::Insert; keys.len()], &keys, &vec![Some(-1); keys.len()]);
    b.prefetch(&c, &store).await.unwrap();
    b.process(c, &mut RowErrors::default()).unwrap();
    let mut batch = EpochBatch::default();
    for c in b.on_barrier(Epoch(7), &mut batch, &mut RowErrors::default()).await.unwrap() {
        for i in (0..c.len()).filter(|i| c.ops[*i] == Op::UpdateDelete) {
            let vals: Vec<String> = c.batch.columns().iter().map(|col| arrow::util::display::array_value_to_string(col, i).unwrap()).collect();
            assert_eq!(view.get(&vals[0]), Some(&vals[1..].to_vec()), "committed state of {}", vals[0]);
        }
    }
}

#[tokio::test]
async fn a_global_count_of_nothing_is_one_row_with_zero() {
    let mut a = agg(&[(AggKind::CountStar, DataType::Int64), (AggKind::Sum, DataType::Int64)], false);
    a.restore(None).await.unwrap();
    assert_eq!(barrier(&mut a).await, vec![(Op::Insert, vec!["0".into(), "".into()])]);
    a.process(chunk(&[Op::Insert, Op::Insert], &["a", "b"], &[Some(2), None]), &mut RowErrors::default()).unwrap();
    assert_eq!(
        barrier(&mut a).await,
        vec![(Op::UpdateDelete, vec!["0".into(), "".into()]), (Op::UpdateInsert, vec!["2".into(), "2".into()])]
    );
}

#[tokio::test]
async fn distinct_counts_and_nulls_follow_sql() {
    let mut a = agg(&[(AggKind::CountDistinct, DataType::Int64), (AggKind::Count, DataType::Int64)], false);
    a.restore(None).await.unwrap();
    a.process(chunk(&[Op::Insert, Op::Insert, Op::Insert, Op::Insert], &["a", "a", "a", "a"], &[Some(1), Some(1), None, Some(2)]), &mut RowErrors::default()).unwrap();
    let rows = barrier(&mut a).await;
    assert_eq!(rows.last().unwrap().1, vec!["2".to_string(), "3".to_string()]);
}

#[test]
fn group_state_survives_encoding() {
    let g = Group {
        rows: 3,
        accs: vec![
            Acc::Count(3),
            Acc::SumInt { sum: -5, n: 2 },
            Acc::SumFloat { sum: Fsum::new(1.5, 1e-17), n: 3, nan: 1, pos_inf: 1, neg_inf: 0 },
            Acc::Moments { n: 2, shift: 7.0, sum: DdSum { main: Fsum::new(-1.5, 0.0), err: 1e-20 }, sumsq: DdSum { main: Fsum::new(4.25, -2e-16), err: 0.0 } },
            // Its values are rows of their own (read back by the loader).
            Acc::Values(Multiset::default()),
            Acc::Bools { trues: 1, falses: 0 },
            Acc::CoMoments({
                let mut m = CoMoments::new();
                m.add(2.0, 1.0, 1);
                m.add(4.0, 2.5, 1);
                m
            }),
        ],
        emitted: Some(vec![9, 9]),
    };
    assert_eq!(decode_group(&encode_group(&g)).unwrap(), g);
}

#[test]
fn two_variable_statistics_retract_and_follow_postgresql_null_rules() {
    let mut m = CoMoments::new();
    for (x, y) in [(2.0, 1.0), (4.0, 2.0), (7.0, 3.0)] {
        m.add(x + 3e9, y + 1e9, 1);
    }
    // A pair added and retracted again changes nothing (beyond rounding; the sums are of
    // values shifted by the first pair, so a retracted pair far from it, say 1e6 from 3e9,
    // would leave its rounding error in the small sums).
    m.add(3e9 + 10.0, 1e9 - 5.0, 1);
    m.add(3e9 + 10.0, 1e9 - 5.0, -1);
    let close = |f: RegrFn, want: f64| {
        let got = m.value(f).unwrap();
        assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{f:?}: {got} != {want}");
    };
    // PostgreSQL 15's answers for (y, x) = (1, 2), (2, 4), (3, 7), shifted by (1e9, 3e9).
    close(RegrFn::Count, 3.0);
    close(RegrFn::Sxx, 12.666666666666666);
    close(RegrFn::Sxy, 5.0);
    close(RegrFn::CovarSamp, 2.5);
    close(RegrFn::Syy, 2.0);
    close(RegrFn::Slope, 0.39473684210526316);
    close(RegrFn::AvgX, 3e9 + 4.333333333333333);
    // One pair: only count and averages are defined; none: everything is NULL.
    let mut one = CoMoments::new();
    one.add(1.0, 5.0, 1);
    assert_eq!((one.value(RegrFn::CovarSamp), one.value(RegrFn::Slope), one.value(RegrFn::AvgY)), (None, None, Some(5.0)));
    one.add(1.0, 5.0, -1);
    assert_eq!(one.value(RegrFn::Count), None);
    assert_eq!(one, CoMoments { kx: one.kx, ky: one.ky, ..CoMoments::new() });
}

#[tokio::test]
async fn over_append_only_input_extremes_keep_one_value_and_retractions_are_refused() {
    let mut a = agg(&[(AggKind::Min, DataType::Int32), (AggKind::Max, DataType::Int32)], true).with_append_only();
    a.restore(None).await.unwrap();
    let n = 500;
    let vals: Vec<Option<i32>> = (0..n).map(|i| Some((i * 37) % 101)).collect();
    a.process(chunk(&vec![Op::Insert; n as usize], &vec!["x"; n as usize], &vals), &mut RowErrors::default()).unwrap();
    assert_eq!(barrier(&mut a).await, vec![(Op::Insert, vec!["x".into(), "0".into(), "100".into()])]);
    let (_, group) = a.groups.values().next().unwrap();
    assert!(group.accs.iter().all(|acc| matches!(acc, Acc::Values(m) if m.len() == 1)), "{:?}", group.accs);
    assert!(a.process(chunk(&[Op::Delete], &["x"], &[Some(0)]), &mut RowErrors::default()).is_err());
}

#[tokio::test]
async fn percentiles_follow_retractions_and_skip_nulls() {
    let cont = AggKind::Percentile { kind: OrderedSet::Cont, fractions: Fractions::One(Some(0.5)) };
    let disc = AggKind::Percentile { kind: OrderedSet::Disc, fractions: Fractions::One(Some(0.5)) };
    let mode = AggKind::Percentile { kind: OrderedSet::Mode, fractions: Fractions::None };
    let mut a = agg(&[(cont, DataType::Float64), (disc, DataType::Int32), (mode, DataType::Int32)], true);
    a.restore(None).await.unwrap();
    let ins = [Op::Insert; 5];
    a.process(chunk(&ins, &["x"; 5], &[Some(4), Some(1), None, Some(2), Some(4)]), &mut RowErrors::default()).unwrap();
    // Values 1, 2, 4, 4: the median interpolates 2 and 4; the discrete one is the second; 4 is the mode.
    assert_eq!(barrier(&mut a).await, vec![(Op::Insert, vec!["x".into(), "3.0".into(), "2".into(), "4".into()])]);
    a.process(chunk(&[Op::Delete, Op::Delete], &["x", "x"], &[Some(4), Some(1)]), &mut RowErrors::default()).unwrap();
    assert_eq!(
        barrier(&mut a).await,
        vec![
            (Op::UpdateDelete, vec!["x".into(), "3.0".into(), "2".into(), "4".into()]),
            (Op::UpdateInsert, vec!["x".into(), "3.0".into(), "2".into(), "2".into()])
        ]
    );
}
