//! `array_agg` and `string_agg` as PostgreSQL computes them where DataFusion differs: DISTINCT
//! values in sorted order, and a separator that changes from row to row.

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, CastKind, DataType as SqlType, DuplicateTreatment, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentClause, FunctionArguments, Value,
};

use super::ast::{call, case_when, renamed, string_lit};
use super::function_args;

/// PostgreSQL sorts to find distinct values, so `array_agg(DISTINCT x)` comes out in
/// ascending order (NULL last); DataFusion's hash set gives an arbitrary one, and it cannot
/// combine a DISTINCT call's ORDER BY with other ordered calls.
pub(super) fn sorted_array_agg(f: &Function) -> Option<Expr> {
    match &f.args {
        FunctionArguments::List(l)
            if matches!(l.duplicate_treatment, Some(DuplicateTreatment::Distinct))
                && !l.clauses.iter().any(|c| matches!(c, FunctionArgumentClause::OrderBy(_)))
                && f.over.is_none() =>
        {
            Some(call("array_sort", vec![Expr::Function(f.clone()), string_lit("ASC"), string_lit("NULLS LAST")]))
        }
        _ => None,
    }
}

/// `string_agg(DISTINCT x, sep)`: the sorted distinct non-NULL values joined, NULL when there
/// are none. `string_agg(x, sep)` with a separator that is not a constant (`string_agg(a,
/// b::text ORDER BY b)`, which DataFusion refuses): each value after the first is preceded by
/// its own row's separator, joined by `eddy_string_agg_rows` over the (value, separator) pairs.
pub(super) fn string_agg(f: &Function) -> Option<Expr> {
    let FunctionArguments::List(l) = &f.args else { return None };
    // Two plain arguments (not `*` or a named one, which `function_args` leaves out).
    if l.args.len() != 2 || function_args(f).len() != 2 || f.over.is_some() {
        return None;
    }
    match l.duplicate_treatment {
        Some(DuplicateTreatment::Distinct) if l.clauses.is_empty() => {
            let sep = function_args(f).pop()?;
            let mut values = renamed(f, "array_agg");
            if let FunctionArguments::List(l) = &mut values.args {
                l.args.truncate(1);
            }
            let mut count = renamed(f, "count");
            if let FunctionArguments::List(l) = &mut count.args {
                l.args.truncate(1);
                l.duplicate_treatment = None;
            }
            let sorted = call("array_sort", vec![Expr::Function(values), string_lit("ASC"), string_lit("NULLS LAST")]);
            let some = Expr::BinaryOp {
                left: Box::new(Expr::Function(count)),
                op: BinaryOperator::Gt,
                right: Box::new(Expr::value(Value::Number("0".into(), false))),
            };
            Some(case_when(vec![(some, call("array_to_string", vec![sorted, sep]))]))
        }
        None if !matches!(function_args(f).get(1), Some(Expr::Value(_))) => {
            let args = function_args(f);
            let text = Expr::Cast { kind: CastKind::Cast, expr: Box::new(args[1].clone()), data_type: SqlType::Text, array: false, format: None };
            let mut pairs = renamed(f, "array_agg");
            if let FunctionArguments::List(l) = &mut pairs.args {
                l.args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(call("struct", vec![args[0].clone(), text])))];
            }
            Some(call("eddy_string_agg_rows", vec![Expr::Function(pairs)]))
        }
        _ => None,
    }
}

/// `GROUP BY CUBE (1, 2)` (and `ROLLUP`, `GROUPING SETS`): the positions read the select
/// list's expressions, as PostgreSQL reads them (DataFusion resolves positions only at the top
/// of GROUP BY, and grouped by the constants).
pub(super) fn grouping_set_positions(select: &mut datafusion::sql::sqlparser::ast::Select) {
    use datafusion::sql::sqlparser::ast::{Expr, GroupByExpr, SelectItem, Value};
    let items: Vec<Option<Expr>> = select
        .projection
        .iter()
        .map(|p| match p {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e.clone()),
            _ => None,
        })
        .collect();
    let resolve = |e: &mut Expr| {
        if let Expr::Value(v) = e {
            if let Value::Number(n, _) = &v.value {
                if let Some(Some(item)) = n.parse::<usize>().ok().and_then(|k| k.checked_sub(1)).and_then(|k| items.get(k)) {
                    *e = item.clone();
                }
            }
        }
    };
    let GroupByExpr::Expressions(exprs, _) = &mut select.group_by else { return };
    for g in exprs {
        match g {
            Expr::Rollup(sets) | Expr::Cube(sets) | Expr::GroupingSets(sets) => sets.iter_mut().flatten().for_each(resolve),
            _ => {}
        }
    }
}

/// Aggregate and window calls of one query level that differ only in casts (`max(n)` and
/// `max(n::int)`, which DataFusion names alike and so refuses together) each get a name of their
/// own: all but the first tag their first argument with `eddy_name_tag(arg, k)` (`pg::name_tag`).
pub(super) fn distinct_cast_names(q: &mut datafusion::sql::sqlparser::ast::Query) {
    use std::collections::HashMap;
    use std::ops::ControlFlow;

    use datafusion::sql::sqlparser::ast::{visit_expressions_mut, SetExpr, VisitMut};

    use super::ast::{is_aggregate_call, own_expressions};

    let is_call = |e: &Expr| matches!(e, Expr::Function(f) if f.over.is_some() || is_aggregate_call(e));
    let SetExpr::Select(select) = q.body.as_mut() else { return };
    // The calls' texts, and each text's form without casts.
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut collect = own_expressions(|e: &mut Expr| {
        if is_call(e) {
            let mut bare = e.clone();
            let _ = visit_expressions_mut(&mut bare, |x| {
                while let Expr::Cast { expr, .. } = x {
                    *x = std::mem::replace(expr.as_mut(), Expr::value(Value::Null));
                }
                ControlFlow::<()>::Continue(())
            });
            // `count(*)` is DataFusion's `count(1)`.
            texts.push((e.to_string(), bare.to_string().replace("(*)", "(1)")));
        }
        ControlFlow::Continue(())
    });
    let _ = select.visit(&mut collect);
    let _ = q.order_by.visit(&mut collect);
    // Texts that share a cast-free form with an earlier, different text: their tag. Calls of
    // `*` come first: they have no argument to tag.
    texts.sort_by_key(|(text, _)| !text.ends_with("(*)"));
    let mut first_of: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut tags: HashMap<String, usize> = HashMap::new();
    for (text, bare) in &texts {
        let seen = first_of.entry(bare).or_default();
        if !seen.contains(&text.as_str()) {
            if !seen.is_empty() {
                tags.insert(text.clone(), seen.len());
            }
            seen.push(text);
        }
    }
    if tags.is_empty() {
        return;
    }
    let mut tag = own_expressions(|e: &mut Expr| {
        if is_call(e) {
            if let Some(k) = tags.get(&e.to_string()) {
                if let Expr::Function(f) = e {
                    if let FunctionArguments::List(l) = &mut f.args {
                        if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))) = l.args.first_mut() {
                            let value = std::mem::replace(arg, Expr::value(Value::Null));
                            *arg = call(crate::pg::name_tag::NAME_TAG, vec![value, Expr::value(Value::Number(k.to_string(), false))]);
                        }
                    }
                }
            }
        }
        ControlFlow::Continue(())
    });
    let _ = select.visit(&mut tag);
    let _ = q.order_by.visit(&mut tag);
}

/// `DISTINCT ON (1)` and `DISTINCT ON (name)` read the select list as PostgreSQL reads them (as
/// ORDER BY does): a position is that item, a bare name an output column's name before an
/// input column's; so does such a query's ORDER BY. DataFusion took the position for a
/// constant (one row in all) and the name for the input column. Called before the select
/// list's own rewrites, so the names are the ones written.
pub(super) fn distinct_on_references(q: &mut datafusion::sql::sqlparser::ast::Query) {
    use datafusion::sql::sqlparser::ast::{Distinct, OrderByKind, SelectItem, SetExpr};
    let SetExpr::Select(select) = q.body.as_mut() else { return };
    let Some(Distinct::On(on)) = &mut select.distinct else { return };
    let items: Vec<(Option<&str>, Option<&Expr>)> = select
        .projection
        .iter()
        .map(|p| match p {
            SelectItem::ExprWithAlias { expr, alias } => (Some(alias.value.as_str()), Some(expr)),
            SelectItem::UnnamedExpr(e) => (None, Some(e)),
            _ => (None, None),
        })
        .collect();
    let named = |e: &Expr| -> Option<Expr> {
        let Expr::Identifier(name) = e else { return None };
        let wanted = if name.quote_style.is_none() { name.value.to_lowercase() } else { name.value.clone() };
        let mut named = items.iter().filter(|(alias, _)| alias.map(|a| if name.quote_style.is_none() { a.to_lowercase() } else { a.to_string() }) == Some(wanted.clone()));
        match (named.next(), named.next()) {
            (Some((_, expr)), None) => expr.cloned(),
            _ => None,
        }
    };
    for e in on.iter_mut() {
        let item = match &*e {
            Expr::Value(v) => match &v.value {
                Value::Number(n, _) => n.parse::<usize>().ok().and_then(|k| k.checked_sub(1)).and_then(|k| items.get(k)).and_then(|i| i.1.cloned()),
                _ => None,
            },
            other => named(other),
        };
        if let Some(item) = item {
            *e = item;
        }
    }
    // A key named twice (`DISTINCT ON (k, k)`) is one key (DataFusion's rewrite of it failed).
    let mut seen = Vec::with_capacity(on.len());
    on.retain(|e| {
        let fresh = !seen.contains(e);
        if fresh {
            seen.push(e.clone());
        }
        fresh
    });
    if let Some(OrderByKind::Expressions(order)) = q.order_by.as_mut().map(|o| &mut o.kind) {
        for o in order.iter_mut() {
            if let Some(item) = named(&o.expr) {
                o.expr = item;
            }
        }
    }
}

/// `HAVING` without GROUP BY or aggregates (`SELECT 1 FROM t HAVING 1 < 2`) makes the query
/// one group, as in PostgreSQL (DataFusion: 42601 "HAVING clause references non-aggregate
/// values"): an always-true aggregate condition is added, so the query aggregates.
pub(super) fn having_without_groups(q: &mut datafusion::sql::sqlparser::ast::Query) {
    use datafusion::sql::sqlparser::ast::{BinaryOperator, GroupByExpr, SelectItem, SetExpr, Value};
    let SetExpr::Select(select) = q.body.as_mut() else { return };
    let Some(having) = &select.having else { return };
    let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(g, _) if g.is_empty());
    let aggregates = super::ast::contains_aggregate(having)
        || select.projection.iter().any(|p| match p {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => super::ast::contains_aggregate(e),
            _ => false,
        });
    if grouped || aggregates {
        return;
    }
    let count = super::ast::call("count", vec![]);
    let always = Expr::BinaryOp { left: Box::new(count), op: BinaryOperator::GtEq, right: Box::new(Expr::value(Value::Number("0".into(), false))) };
    let cond = Expr::Nested(Box::new(having.clone()));
    select.having = Some(Expr::BinaryOp { left: Box::new(cond), op: BinaryOperator::And, right: Box::new(always) });
}

