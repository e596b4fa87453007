//! PostgreSQL literal syntax around DataFusion's planner.
//!
//! * Interval text: PostgreSQL's interval syntax (`1 day 02:00:00`, `3 mons`) is parsed by Eddy
//!   and handed to DataFusion in a form Arrow reads exactly, both in SQL literals (AST pass) and
//!   in the implicit casts DataFusion plans, e.g. for an INSERT into an interval column (plan pass).
//! * `bytea` text (`'\\xdeadbeef'`) is decoded as PostgreSQL does, not taken as raw bytes.
//! * Array text (`'{1,2}'::int[]`) is parsed as PostgreSQL's array input.
//! * Integer literals: PostgreSQL types `1` as `integer`; DataFusion as `bigint`. The plan pass
//!   narrows integer literals that fit in 32 bits before type coercion runs, so `SELECT 1` and
//!   `int_col + 1` are `integer` as in PostgreSQL.

use std::ops::ControlFlow;

use arrow::datatypes::{DataType, IntervalUnit};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{Cast, Expr, LogicalPlan};
use datafusion::scalar::ScalarValue;
use arrow::datatypes::IntervalMonthDayNano;
use datafusion::sql::sqlparser::ast::{visit_expressions_mut, DataType as SqlType, Expr as SqlExpr, Statement, UnaryOperator, Value, ValueWithSpan};
use eddy_common::interval::{canonical_text, parse_interval};
use eddy_common::text::parse_bytea;
use eddy_common::{EddyError, Result};

fn rewrite_interval_text(v: &mut Value) -> Result<()> {
    if let Value::SingleQuotedString(s) = v {
        *s = canonical_text(parse_interval(s)?);
    }
    Ok(())
}

fn is_interval(t: &SqlType) -> bool {
    matches!(t, SqlType::Interval { .. })
}

/// Rewrites interval literals in `stmt` into text Arrow parses exactly.
pub fn rewrite_literals(stmt: &mut Statement) -> Result<()> {
    let flow = visit_expressions_mut(stmt, |e| {
        let r = match e {
            SqlExpr::Interval(iv) if iv.leading_field.is_none() && iv.last_field.is_none() => match iv.value.as_mut() {
                SqlExpr::Value(v) => rewrite_interval_text(&mut v.value),
                _ => Ok(()),
            },
            SqlExpr::Cast { expr, data_type, .. } if is_interval(data_type) => match expr.as_mut() {
                SqlExpr::Value(v) => rewrite_interval_text(&mut v.value),
                _ => Ok(()),
            },
            SqlExpr::TypedString(ts) if is_interval(&ts.data_type) => rewrite_interval_text(&mut ts.value.value),
            // `-INTERVAL '1' HOUR`: DataFusion would negate only the text's first field, so the
            // sign goes into the (already rewritten) literal.
            SqlExpr::UnaryOp { op: UnaryOperator::Minus, expr: inner } => match inner.as_mut() {
                SqlExpr::Interval(iv) if iv.leading_field.is_none() && iv.last_field.is_none() => match iv.value.as_mut() {
                    SqlExpr::Value(ValueWithSpan { value: Value::SingleQuotedString(text), .. }) => match parse_interval(text) {
                        Ok(v) => {
                            *text = canonical_text(IntervalMonthDayNano::new(-v.months, -v.days, -v.nanoseconds));
                            let negated = std::mem::replace(inner.as_mut(), SqlExpr::Value(Value::Null.into()));
                            *e = negated;
                            Ok(())
                        }
                        Err(err) => Err(err),
                    },
                    _ => Ok(()),
                },
                _ => Ok(()),
            },
            _ => Ok(()),
        };
        match r {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    });
    match flow {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// An integer literal's value and whether it is 64-bit.
fn int_literal(e: &Expr) -> Option<(i128, bool)> {
    match e {
        Expr::Literal(ScalarValue::Int32(Some(v)), _) => Some((i128::from(*v), false)),
        Expr::Literal(ScalarValue::Int64(Some(v)), _) => Some((i128::from(*v), true)),
        Expr::Literal(ScalarValue::Int16(Some(v)), _) => Some((i128::from(*v), false)),
        _ => None,
    }
}

/// Integer arithmetic on literals, folded here with PostgreSQL's overflow check: the
/// optimizer's constant folding would wrap around (`2147483647 + 1`).
fn fold_int_arithmetic(e: &Expr) -> datafusion::error::Result<Option<Expr>> {
    use datafusion::logical_expr::{BinaryExpr, Operator};
    let out_of_range = |wide: bool| {
        datafusion::error::DataFusionError::External(Box::new(eddy_common::user_err!(
            eddy_common::error::sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            "{} out of range",
            if wide { "bigint" } else { "integer" }
        )))
    };
    let (value, wide) = match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (Some((l, lw)), Some((r, rw))) = (int_literal(left), int_literal(right)) else { return Ok(None) };
            let v = match op {
                Operator::Plus => l + r,
                Operator::Minus => l - r,
                Operator::Multiply => l * r,
                _ => return Ok(None),
            };
            (v, lw || rw)
        }
        // `-2147483648` is an integer constant in PostgreSQL's grammar.
        Expr::Negative(inner) => match int_literal(inner) {
            Some((v, w)) => (-v, w && i32::try_from(-v).is_err()),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let lit = |v: ScalarValue| Expr::Literal(v, None);
    Ok(Some(if wide {
        lit(ScalarValue::Int64(Some(i64::try_from(value).map_err(|_| out_of_range(true))?)))
    } else {
        lit(ScalarValue::Int32(Some(i32::try_from(value).map_err(|_| out_of_range(false))?)))
    }))
}

fn rewrite_expr(e: Expr, narrow_ints: bool) -> datafusion::error::Result<Transformed<Expr>> {
    if narrow_ints {
        if let Some(folded) = fold_int_arithmetic(&e)? {
            return Ok(Transformed::yes(folded));
        }
    }
    match e {
        Expr::Literal(ScalarValue::Int64(Some(v)), meta) if narrow_ints && i32::try_from(v).is_ok() => {
            Ok(Transformed::yes(Expr::Literal(ScalarValue::Int32(Some(v as i32)), meta)))
        }
        Expr::Cast(Cast { expr, field })
            if field.data_type() == &DataType::Interval(IntervalUnit::MonthDayNano)
                && matches!(expr.as_ref(), Expr::Literal(ScalarValue::Utf8(Some(_)) | ScalarValue::Utf8View(Some(_)), _)) =>
        {
            let Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), meta) = *expr else {
                unreachable!("matched above")
            };
            let v = parse_interval(&s).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            Ok(Transformed::yes(Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), meta)))
        }
        Expr::Cast(Cast { expr, field })
            if field.data_type() == &DataType::Binary
                && matches!(expr.as_ref(), Expr::Literal(ScalarValue::Utf8(Some(_)) | ScalarValue::Utf8View(Some(_)), _)) =>
        {
            let Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), meta) = *expr else {
                unreachable!("matched above")
            };
            let v = parse_bytea(&s).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            Ok(Transformed::yes(Expr::Literal(ScalarValue::Binary(Some(v)), meta)))
        }
        Expr::Cast(Cast { expr, field })
            if matches!(field.data_type(), DataType::List(_) | DataType::Timestamp(_, _))
                && matches!(expr.as_ref(), Expr::Literal(ScalarValue::Utf8(Some(_)) | ScalarValue::Utf8View(Some(_)), _)) =>
        {
            let Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), meta) = *expr else {
                unreachable!("matched above")
            };
            let strings = arrow::array::StringArray::from(vec![s.as_str()]);
            let array = eddy_common::text::cast_text(&strings, field.data_type())
                .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            Ok(Transformed::yes(Expr::Literal(ScalarValue::try_from_array(&array, 0)?, meta)))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// Applies the plan-level rewrites (see the module docs).
pub fn rewrite_plan(plan: LogicalPlan) -> Result<LogicalPlan> {
    // A recursive query's work table is typed by its static term at planning time: narrowing
    // literals in one term only would make the two terms disagree.
    let mut recursive = false;
    plan.apply_with_subqueries(|n| {
        recursive |= matches!(n, LogicalPlan::RecursiveQuery(_));
        Ok(if recursive { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    })?;
    let out = plan.transform_up_with_subqueries(|node| {
        if matches!(node, LogicalPlan::Limit(_)) {
            return Ok(Transformed::no(node));
        }
        // VALUES rows fix their own column types; only interval text is rewritten there.
        let narrow_ints = !recursive && !matches!(node, LogicalPlan::Values(_));
        // Keep the names upper nodes refer to (`count(Int64(1))`) when an expression changes.
        let t = crate::planner::names::map_expressions_keeping_names(node, |e| e.transform_up(|e| rewrite_expr(e, narrow_ints)))?;
        if t.transformed {
            let recomputed = t.data.recompute_schema()?;
            Ok(Transformed::yes(recomputed))
        } else {
            // A node above a narrowed one derives its schema from its children: refresh it
            // (a join's or filter's schema would otherwise keep the old `bigint`).
            let before = t.data.schema().clone();
            match t.data.clone().recompute_schema() {
                Ok(p) if p.schema() != &before => Ok(Transformed::yes(p)),
                _ => Ok(t),
            }
        }
    });
    let plan = out.map(|t| t.data).map_err(EddyError::from)?;
    retype_outer_references(plan).map_err(EddyError::from)
}

/// A subquery's references to outer columns carry the column's type from before the outer
/// plan's literals were narrowed (`k + 4` was `bigint`, is now `integer`); type coercion would
/// then cast the inner side to the stale type and the executed comparison fails
/// (`Int32 == Int64`). Each reference takes the type its column now has, where every schema
/// of the plan that has the column agrees on it.
fn retype_outer_references(plan: LogicalPlan) -> datafusion::error::Result<LogicalPlan> {
    use std::collections::HashMap;
    let mut types: HashMap<datafusion::common::Column, Option<DataType>> = HashMap::new();
    plan.apply_with_subqueries(|n| {
        for (q, f) in n.schema().iter() {
            let col = datafusion::common::Column::new(q.cloned(), f.name());
            let slot = types.entry(col).or_insert_with(|| Some(f.data_type().clone()));
            if slot.as_ref() != Some(f.data_type()) {
                *slot = None;
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let t = plan.transform_up_with_subqueries(|node| {
        let t = node.map_expressions(|e| {
            e.transform_up(|e| match e {
                Expr::OuterReferenceColumn(field, col) => match types.get(&col) {
                    Some(Some(ty)) if ty != field.data_type() => {
                        let field = std::sync::Arc::new(field.as_ref().clone().with_data_type(ty.clone()));
                        Ok(Transformed::yes(Expr::OuterReferenceColumn(field, col)))
                    }
                    _ => Ok(Transformed::no(Expr::OuterReferenceColumn(field, col))),
                },
                other => Ok(Transformed::no(other)),
            })
        })?;
        if t.transformed {
            Ok(Transformed::yes(t.data.recompute_schema()?))
        } else {
            Ok(t)
        }
    })?;
    Ok(t.data)
}
