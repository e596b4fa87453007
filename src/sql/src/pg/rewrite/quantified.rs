//! Subquery forms DataFusion does not plan, rewritten into ones it does: `EXISTS` in a select
//! list becomes a count, `x op ANY/ALL (subquery)` becomes `EXISTS`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, BinaryOperator, Expr, GroupByExpr, Select, SelectItem, SetExpr, TableFactor, UnaryOperator, Value,
};

use super::ast::{contains_aggregate, parse_query};

/// `EXISTS (subquery)` in a select list (DataFusion plans EXISTS only as a filter) becomes
/// `(SELECT count(*) FROM ... ) > 0`, a scalar subquery it decorrelates; `NOT EXISTS` is `= 0`.
pub(super) fn exists_as_count(select: &mut Select) {
    for item in select.projection.iter_mut() {
        let e = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => continue,
        };
        let _ = visit_expressions_mut(e, |x| {
            if let Expr::Exists { subquery, negated } = x {
                let simple = subquery.with.is_none()
                    && subquery.order_by.is_none()
                    && subquery.limit_clause.is_none()
                    && subquery.fetch.is_none()
                    && matches!(subquery.body.as_ref(), SetExpr::Select(s)
                        if s.having.is_none() && s.distinct.is_none()
                            && matches!(&s.group_by, GroupByExpr::Expressions(g, _) if g.is_empty()));
                // SQL built from a subquery that parsed; if it does not parse, EXISTS stays.
                let counted = if simple {
                    let mut q = subquery.as_ref().clone();
                    let count = parse_query("SELECT count(*)").and_then(|c| match *c.body {
                        SetExpr::Select(s) => s.projection.into_iter().next(),
                        _ => None,
                    });
                    if let (SetExpr::Select(s), Some(count)) = (q.body.as_mut(), count) {
                        s.projection = vec![count];
                    }
                    q
                } else {
                    match parse_query(&format!("SELECT count(*) FROM ({subquery}) AS __exists")) {
                        Some(q) => q,
                        None => return ControlFlow::<()>::Continue(()),
                    }
                };
                let op = if *negated { BinaryOperator::Eq } else { BinaryOperator::Gt };
                *x = Expr::Nested(Box::new(Expr::BinaryOp {
                    left: Box::new(Expr::Subquery(Box::new(counted))),
                    op,
                    right: Box::new(Expr::value(Value::Number("0".into(), false))),
                }));
            }
            ControlFlow::Continue(())
        });
    }
}

/// `x op ANY (subquery)` → `EXISTS (SELECT 1 FROM (subquery) v WHERE x op v)` and
/// `x op ALL (subquery)` → `NOT EXISTS (SELECT 1 FROM (subquery) v WHERE (x op v) IS NOT TRUE)`,
/// which DataFusion plans as semi/anti joins (its own ALL planning fails). A NULL `x` or element
/// makes ALL false where PostgreSQL says NULL, and ANY false where it says NULL — the same in a
/// WHERE clause (but not under a NOT).
pub(super) fn quantified_subquery(e: &Expr) -> Option<Expr> {
    // `x = ANY (q)` is `x IN (q)` and `x <> ALL (q)` is `x NOT IN (q)`, NULLs included, which
    // are planned with SQL's NULL semantics (the EXISTS forms below are false where those are
    // NULL, which a NOT above them turned into true); a correlated NOT IN as
    // [`row_in_subquery`] writes it.
    if let Some(in_form) = as_in_subquery(e) {
        return Some(row_in_subquery(&in_form).unwrap_or(in_form));
    }
    let (left, op, q, all) = match e {
        Expr::AnyOp { left, compare_op, right, .. } => (left, compare_op, right, false),
        Expr::AllOp { left, compare_op, right } => (left, compare_op, right, true),
        _ => return None,
    };
    let inner = match q.as_ref() {
        Expr::Nested(n) => n.as_ref(),
        other => other,
    };
    let Expr::Subquery(q) = inner else { return None };
    // A plain `SELECT v FROM f WHERE w` keeps its correlation in a WHERE clause:
    // `SELECT 1 FROM f WHERE w AND <test on v>`.
    if q.with.is_none() && q.order_by.is_none() && q.limit_clause.is_none() && q.fetch.is_none() {
        if let SetExpr::Select(s) = q.body.as_ref() {
            let safe = uncaptured(left, s);
            let plain = safe
                && s.projection.len() == 1
                && s.having.is_none()
                && s.distinct.is_none()
                && matches!(&s.group_by, GroupByExpr::Expressions(g, _) if g.is_empty())
                && !s.from.is_empty();
            let item = match s.projection.first() {
                Some(SelectItem::UnnamedExpr(v) | SelectItem::ExprWithAlias { expr: v, .. }) if plain && !contains_aggregate(v) => Some(v),
                _ => None,
            };
            if let Some(v) = item {
                let from = s.from.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
                let test = if all { format!("(({left} {op} ({v})) IS NOT TRUE)") } else { format!("({left} {op} ({v}))") };
                let filter = match &s.selection {
                    Some(w) => format!("({w}) AND {test}"),
                    None => test,
                };
                let sql = format!("SELECT 1 FROM {from} WHERE {filter}");
                // Built from parts that parsed; if it does not parse, the general form below is used.
                if let Some(sub) = parse_query(&sql) {
                    return Some(Expr::Exists { subquery: Box::new(sub), negated: all });
                }
            }
        }
    }
    let sql = if all {
        format!("SELECT 1 FROM ({q}) AS __all(__v) WHERE ({left} {op} __all.__v) IS NOT TRUE")
    } else {
        format!("SELECT 1 FROM ({q}) AS __any(__v) WHERE {left} {op} __any.__v")
    };
    // If this does not parse, the expression stays as written and planning reports what it cannot do.
    Some(Expr::Exists { subquery: Box::new(parse_query(&sql)?), negated: all })
}

/// `x = ANY (subquery)` as `x IN (subquery)`, `x <> ALL (subquery)` as `x NOT IN (subquery)`.
fn as_in_subquery(e: &Expr) -> Option<Expr> {
    let (left, q, negated) = match e {
        Expr::AnyOp { left, compare_op: BinaryOperator::Eq, right, .. } => (left, right, false),
        Expr::AllOp { left, compare_op: BinaryOperator::NotEq, right } => (left, right, true),
        _ => return None,
    };
    let Expr::Subquery(q) = strip_nesting(q) else { return None };
    Some(Expr::InSubquery { expr: left.clone(), subquery: q.clone(), negated })
}

/// True if `x` reads no column the relations of `s` could capture: only qualified columns whose
/// qualifiers `s` does not define (so `x` can move into `s`'s WHERE clause).
fn uncaptured(x: &Expr, s: &Select) -> bool {
    let inner = inner_relations(s);
    let mut safe = true;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(x, |x| {
        match x {
            Expr::Identifier(_) | Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => safe = false,
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => safe &= !inner.contains(&parts[parts.len() - 2].value.to_lowercase()),
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    safe
}

/// True if `x` reads a column (or a subquery, which may).
fn reads_columns(x: &Expr) -> bool {
    datafusion::sql::sqlparser::ast::visit_expressions(x, |x| match x {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// True if `s`'s WHERE clause reads a qualified column of a relation `s` does not define (a
/// correlated subquery).
fn correlated(s: &Select) -> bool {
    let inner = inner_relations(s);
    let Some(w) = &s.selection else { return false };
    datafusion::sql::sqlparser::ast::visit_expressions(w, |x| match x {
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 && !inner.contains(&parts[parts.len() - 2].value.to_lowercase()) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// The names (aliases, else table names) `s`'s FROM clause defines, lower case.
fn inner_relations(s: &Select) -> Vec<String> {
    s
        .from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)))
        .filter_map(|f| match f {
            TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => Some(a.name.value.to_lowercase()),
            TableFactor::Table { name, .. } => name.0.last().map(|p| p.to_string().to_lowercase()),
            _ => None,
        })
        .collect()
}

/// `(x1, x2) [NOT] IN (subquery of two columns)` (DataFusion plans IN over one column only), and
/// a correlated or constant `x NOT IN (subquery)`, →
/// `[NOT] EXISTS (SELECT 1 FROM (subquery) AS __in(c1, c2) WHERE <test>)`, the test being
/// `(c1, c2) = (x1, x2)` for IN and `((c1, c2) = (x1, x2)) IS NOT FALSE` for NOT IN (a row
/// whose comparison is NULL makes NOT IN not true). Exact in a WHERE clause; elsewhere a NULL
/// result reads as false.
pub(super) fn row_in_subquery(e: &Expr) -> Option<Expr> {
    in_subquery_as_exists(e, false)
}

/// `x NOT IN (subquery)` in a WHERE clause beside other conditions (joined by AND or OR) is
/// written as [`row_in_subquery`] writes a correlated one. DataFusion's null-aware anti join
/// is right alone, but beside `x > 0` it inferred `k > 0` for the subquery's side, which drops
/// the NULLs that make NOT IN not true (`id > 0 AND id NOT IN (SELECT k ...)` with a NULL k
/// gave rows); under OR it planned a mark join that ignores NULLs. In a WHERE clause's ANDs
/// and ORs a NULL result filters as false does, so the rewrite is exact there.
pub(super) fn not_in_beside_other_conditions(select: &mut Select) {
    fn walk(e: &mut Expr) {
        // `x <> ALL (subquery)` is `x NOT IN (subquery)`, and `NOT (x = ANY (subquery))` is
        // `NOT (x IN (subquery))` (the expression pass rewrites them too, but after this one).
        if let Some(in_form) = as_in_subquery(e) {
            *e = in_form;
        }
        if let Expr::UnaryOp { op: UnaryOperator::Not, expr } = e {
            if let Some(in_form) = as_in_subquery(strip_nesting(expr)) {
                **expr = in_form;
            }
        }
        match e {
            Expr::BinaryOp { op: BinaryOperator::And | BinaryOperator::Or, left, right } => {
                walk(left);
                walk(right);
            }
            Expr::Nested(inner) => walk(inner),
            // `a IS DISTINCT FROM b OR ...` as parsed (the OR inside the IS DISTINCT FROM; the
            // expression pass fixes it too, but after this one).
            Expr::IsDistinctFrom(..) | Expr::IsNotDistinctFrom(..) => {
                if let Some(fixed) = super::scalars::distinct_from_precedence(e) {
                    *e = fixed;
                    walk(e);
                }
            }
            // `NOT (x IN (subquery))` is `x NOT IN (subquery)`.
            Expr::UnaryOp { op: UnaryOperator::Not, expr } if matches!(strip_nesting(expr), Expr::InSubquery { negated: false, .. }) => {
                if let Expr::InSubquery { expr, subquery, .. } = strip_nesting(expr) {
                    let not_in = Expr::InSubquery { expr: expr.clone(), subquery: subquery.clone(), negated: true };
                    if let Some(r) = in_subquery_as_exists(&not_in, true) {
                        *e = r;
                    }
                }
            }
            Expr::InSubquery { negated: true, .. } => {
                if let Some(r) = in_subquery_as_exists(e, true) {
                    *e = r;
                }
            }
            _ => {}
        }
    }
    match &mut select.selection {
        Some(Expr::InSubquery { .. }) | None => {}
        Some(w) => walk(w),
    }
}

fn strip_nesting(e: &Expr) -> &Expr {
    match e {
        Expr::Nested(inner) => strip_nesting(inner),
        other => other,
    }
}

/// [`row_in_subquery`]; `any_not_in`: also an uncorrelated `x NOT IN (...)`.
fn in_subquery_as_exists(e: &Expr, any_not_in: bool) -> Option<Expr> {
    let Expr::InSubquery { expr, subquery, negated } = e else { return None };
    let xs = match expr.as_ref() {
        Expr::Tuple(xs) => xs.clone(),
        x if *negated && any_not_in => vec![x.clone()],
        // A correlated `x NOT IN (...)` too: DataFusion's null-aware anti join takes one key
        // only, and the correlation adds another.
        x if *negated && matches!(subquery.body.as_ref(), SetExpr::Select(s) if correlated(s)) => vec![x.clone()],
        // And `constant NOT IN (...)`: with no column to key the anti join on, DataFusion's
        // join ignored the subquery's NULLs (`5 NOT IN (SELECT y ...)` with a NULL y was true).
        x if *negated && !reads_columns(x) => vec![x.clone()],
        _ => return None,
    };
    let row = |items: Vec<String>| format!("({})", items.join(", "));
    let test = |values: Vec<String>| {
        let equal = format!("{} = {}", row(values), row(xs.iter().map(|x| x.to_string()).collect()));
        if *negated { format!("({equal}) IS NOT FALSE") } else { equal }
    };
    // A plain `SELECT p1, p2 FROM f WHERE w` keeps its correlation in a WHERE clause:
    // `SELECT 1 FROM f WHERE w AND <test on p1, p2>` (DataFusion does not decorrelate a
    // derived table).
    let plain = match subquery.body.as_ref() {
        SetExpr::Select(s)
            if subquery.with.is_none()
                && subquery.order_by.is_none()
                && subquery.limit_clause.is_none()
                && subquery.fetch.is_none()
                && s.having.is_none()
                && s.distinct.is_none()
                && matches!(&s.group_by, GroupByExpr::Expressions(g, _) if g.is_empty())
                && !s.from.is_empty()
                && s.projection.len() == xs.len()
                && xs.iter().all(|x| uncaptured(x, s)) =>
        {
            let values: Option<Vec<String>> = s
                .projection
                .iter()
                .map(|p| match p {
                    SelectItem::UnnamedExpr(v) | SelectItem::ExprWithAlias { expr: v, .. } if !contains_aggregate(v) => Some(format!("({v})")),
                    _ => None,
                })
                .collect();
            values.map(|values| {
                let from = s.from.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
                match &s.selection {
                    Some(w) => format!("SELECT 1 FROM {from} WHERE ({w}) AND {}", test(values)),
                    None => format!("SELECT 1 FROM {from} WHERE {}", test(values)),
                }
            })
        }
        _ => None,
    };
    let sql = plain.unwrap_or_else(|| {
        let columns: Vec<String> = (1..=xs.len()).map(|i| format!("__c{i}")).collect();
        format!("SELECT 1 FROM ({subquery}) AS __in({}) WHERE {}", columns.join(", "), test(columns.iter().map(|c| format!("__in.{c}")).collect()))
    });
    Some(Expr::Exists { subquery: Box::new(parse_query(&sql)?), negated: *negated })
}
