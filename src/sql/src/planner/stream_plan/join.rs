//! Joins in a view's stream plan: the join's layout and stream key, the watermarks it keeps,
//! interval bounds, and — planned for parallel actors — its join key in its stream key.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema};
use datafusion::common::DFSchema;
use datafusion::logical_expr::Expr;
use eddy_common::{not_supported, Result};
use eddy_storage::ReadSnapshot;
use eddy_stream::operator::{HashJoin, JoinKind, JoinSpec, Side};

use super::agg_call::{physical, strip_alias};
use super::{Built, PlanCtx, TableIds};
use crate::planner::interval_join::{interval_bounds, JoinInput};

/// A mark join (`EXISTS`/`IN (subquery)` under OR: each left row with a column saying whether
/// it has a match) as the union of the semi join, marked TRUE, and the anti join, marked FALSE:
/// a left row is in exactly one of them, and moves between them as its matches come and go.
pub(super) fn mark_join_as_union(j: &datafusion::logical_expr::Join) -> Result<datafusion::logical_expr::LogicalPlan> {
    use datafusion::common::JoinType;
    use datafusion::logical_expr::{lit, Join, LogicalPlan, LogicalPlanBuilder};
    let mark = j.schema.fields().len() - 1;
    let (qualifier, field) = j.schema.qualified_field(mark);
    let branch = |join_type: JoinType, matched: bool| -> Result<LogicalPlan> {
        let filtered = Join::try_new(j.left.clone(), j.right.clone(), j.on.clone(), j.filter.clone(), join_type, j.join_constraint, j.null_equality, false)?;
        let mut exprs: Vec<Expr> = j.left.schema().columns().into_iter().map(Expr::Column).collect();
        exprs.push(lit(matched).alias_qualified(qualifier.cloned(), field.name()));
        Ok(LogicalPlanBuilder::from(LogicalPlan::Join(filtered)).project(exprs)?.build()?)
    };
    Ok(LogicalPlanBuilder::from(branch(JoinType::LeftSemi, true)?).union(branch(JoinType::LeftAnti, false)?)?.build()?)
}

/// Adds to `b`'s rows a hidden column that is always TRUE (NULL in the rows a join pads in for
/// them); its index.
fn with_presence_column(b: &mut Built) -> Result<usize> {
    use datafusion::physical_expr::expressions::{Column, Literal};
    use datafusion::physical_expr::PhysicalExpr;
    let n = b.schema.fields().len();
    let mut exprs: Vec<Arc<dyn PhysicalExpr>> = b.schema.fields().iter().enumerate().map(|(i, f)| Arc::new(Column::new(f.name(), i)) as Arc<dyn PhysicalExpr>).collect();
    exprs.push(Arc::new(Literal::new(datafusion::scalar::ScalarValue::Boolean(Some(true)))));
    let mut fields: Vec<Field> = b.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("_present", arrow::datatypes::DataType::Boolean, true));
    let schema = Arc::new(Schema::new(fields));
    let identity: Vec<(usize, usize)> = b.watermarks.iter().map(|&c| (c, c)).collect();
    b.ops.push(Box::new(eddy_stream::operator::Project::try_new(exprs, schema.clone())?.with_watermarks(identity, b.schema.clone())));
    b.schema = schema;
    Ok(n)
}

/// Plans a join of the planned inputs `left` and `right`.
pub(super) async fn plan_join(
    j: &datafusion::logical_expr::Join,
    left: Built,
    right: Built,
    ids: &mut TableIds<'_>,
    restore: Option<&ReadSnapshot>,
    internal: &mut PlanCtx,
) -> Result<Built> {
    use datafusion::common::{JoinType, NullEquality};
    let kind = match j.join_type {
        JoinType::Inner => JoinKind::Inner,
        JoinType::Left => JoinKind::LeftOuter,
        JoinType::Right => JoinKind::RightOuter,
        JoinType::Full => JoinKind::FullOuter,
        JoinType::LeftSemi => JoinKind::LeftSemi,
        JoinType::RightSemi => JoinKind::RightSemi,
        JoinType::LeftAnti => JoinKind::LeftAnti,
        JoinType::RightAnti => JoinKind::RightAnti,
        other => return Err(not_supported!("{other} joins are not supported in a materialized view yet")),
    };
    if j.null_aware && (j.join_type != JoinType::LeftAnti || j.filter.is_some()) {
        return Err(not_supported!("a correlated NOT IN (subquery) is not supported in a materialized view yet; use NOT EXISTS"));
    }
    // A full join's left-padded row (NULLs, right key) and right-padded row (left key, NULLs)
    // share a key when both keys can be all NULL: both sides keyless (at most one row each, as
    // ungrouped aggregates are), or keyed by nullable columns (a group key that is NULL) — and
    // one row overwrote the other in the view. A column that is TRUE on the left's rows tells
    // them apart. (A matched row cannot collide with a padded one: a side's row is either
    // matched or padded, and its key is its own.)
    let all_null = |b: &Built| b.key.iter().all(|&k| b.schema.field(k).is_nullable());
    let mut left = left;
    let presence = (kind == JoinKind::FullOuter && all_null(&left) && all_null(&right)).then(|| with_presence_column(&mut left)).transpose()?;
    let (ldf, rdf) = (j.left.schema(), j.right.schema());
    let (lv, rv) = (ldf.fields().len(), rdf.fields().len());
    let left_keys = j.on.iter().map(|(l, _)| physical(l, ldf)).collect::<Result<Vec<_>>>()?;
    let right_keys = j.on.iter().map(|(_, r)| physical(r, rdf)).collect::<Result<Vec<_>>>()?;
    let filter = match &j.filter {
        Some(f) => Some(physical(f, &ldf.join(rdf)?)?),
        None => None,
    };
    let nullable = |f: &Field| Field::new(f.name(), f.data_type().clone(), true).with_metadata(f.metadata().clone());
    let (ls, rs) = (left.schema.clone(), right.schema.clone());
    let fields: Vec<Field> = ls.fields()[..lv]
        .iter()
        .chain(&rs.fields()[..rv])
        .chain(&ls.fields()[lv..])
        .chain(&rs.fields()[rv..])
        .map(|f| nullable(f))
        .collect();
    let pair_schema = Arc::new(Schema::new(fields));
    let (lh, rh) = (ls.fields().len() - lv, rs.fields().len() - rv);
    let left_at = |c: usize| if c < lv { c } else { lv + rv + (c - lv) };
    let right_at = |c: usize| if c < rv { lv + c } else { lv + rv + lh + (c - rv) };
    debug_assert_eq!(pair_schema.fields().len(), lv + rv + lh + rh);
    let (schema, mut key) = match kind {
        JoinKind::LeftSemi | JoinKind::LeftAnti => (ls.clone(), left.key.clone()),
        JoinKind::RightSemi | JoinKind::RightAnti => (rs.clone(), right.key.clone()),
        _ => (pair_schema.clone(), left.key.iter().chain(&presence).map(|&k| left_at(k)).chain(right.key.iter().map(|&k| right_at(k))).collect()),
    };
    // Equi-keys watermarked on both sides of an inner join keep a watermark (the smaller).
    let column_at = |e: &Expr, df: &DFSchema| match strip_alias(e) {
        Expr::Column(c) => df.index_of_column(c).ok(),
        _ => None,
    };
    // Split among parallel actors by join key, the join's rows are keyed by it too: a row
    // whose key changes moves to another actor, and must not share its old row's key (see
    // `PlanCtx::parallel`). Only for keys that are columns of the output.
    let key_columns: Option<Vec<(usize, usize)>> = j.on.iter().map(|(l, r)| Some((column_at(l, ldf)?, column_at(r, rdf)?))).collect();
    let parallel = match key_columns.filter(|k| internal.parallel && !k.is_empty() && !j.null_aware) {
        Some(cols) => {
            let extra: Vec<usize> = cols
                .iter()
                .flat_map(|&(l, r)| match kind {
                    JoinKind::Inner | JoinKind::LeftOuter => vec![left_at(l)],
                    JoinKind::RightOuter => vec![right_at(r)],
                    JoinKind::FullOuter => vec![left_at(l), right_at(r)],
                    JoinKind::LeftSemi | JoinKind::LeftAnti => vec![l],
                    JoinKind::RightSemi | JoinKind::RightAnti => vec![r],
                })
                .collect();
            for c in extra {
                if !key.contains(&c) {
                    key.push(c);
                }
            }
            true
        }
        None => false,
    };
    let watermark_keys: Vec<(usize, usize, usize, usize)> = if matches!(kind, JoinKind::Inner | JoinKind::LeftOuter | JoinKind::RightOuter | JoinKind::FullOuter) {
        j.on.iter()
            .filter_map(|(l, r)| {
                let (li, ri) = (column_at(l, ldf)?, column_at(r, rdf)?);
                (left.watermarks.contains(&li) && right.watermarks.contains(&ri)).then(|| (li, ri, left_at(li), right_at(ri)))
            })
            .collect()
    } else {
        vec![]
    };
    let interval_bounds = match (&j.filter, kind) {
        (Some(f), JoinKind::Inner) => {
            let inputs = [
                JoinInput { watermarks: &left.watermarks, append_only: left.append_only },
                JoinInput { watermarks: &right.watermarks, append_only: right.append_only },
            ];
            interval_bounds(f, &ldf.join(rdf)?, lv, inputs, |s, c| if s == Side::Left { left_at(c) } else { right_at(c) })
        }
        _ => vec![],
    };
    // A side's columns are NULL in the other side's padded rows: no watermark there.
    let (left_padded, right_padded) = (matches!(kind, JoinKind::RightOuter | JoinKind::FullOuter), matches!(kind, JoinKind::LeftOuter | JoinKind::FullOuter));
    let mut watermarks: Vec<usize> =
        watermark_keys.iter().flat_map(|&(_, _, lo, ro)| [(!left_padded).then_some(lo), (!right_padded).then_some(ro)]).flatten().collect();
    watermarks.extend(interval_bounds.iter().map(|b| b.out_col).filter(|c| !watermarks.contains(c)).collect::<Vec<_>>());
    let table_id = ids.next()?;
    internal.push(table_id);
    let spec = JoinSpec {
        kind,
        left_schema: ls,
        right_schema: rs,
        left_visible: lv,
        right_visible: rv,
        left_keys,
        right_keys,
        nulls_match: j.null_equality == NullEquality::NullEqualsNull,
        null_aware: j.null_aware,
        filter,
        pair_schema,
        watermark_keys,
        interval_bounds,
    };
    let mut join = HashJoin::try_new(table_id, spec)?;
    if parallel {
        join = join.parallel();
    }
    join.restore(restore).await?;
    // An inner join of inputs that only insert only ever emits new matches.
    let append_only = kind == JoinKind::Inner && left.append_only && right.append_only;
    let mut built = Built::meet(vec![(left, Side::Left), (right, Side::Right)], Some(Box::new(join)), schema, key);
    built.append_only = append_only;
    built.watermarks = watermarks;
    Ok(built)
}

