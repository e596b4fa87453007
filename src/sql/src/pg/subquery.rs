//! Correlated scalar subqueries in a form DataFusion decorrelates.
//!
//! DataFusion turns a correlated scalar subquery into a join only when it aggregates and its
//! correlated predicates are equalities between an outer and an inner column. Catalog queries
//! (psql's `\d`) use other shapes, e.g. `(SELECT c.collname FROM pg_collation c, pg_type t
//! WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation)`.
//!
//! [`decorrelatable`] rewrites `(SELECT e FROM F WHERE p AND outer_only)` into
//! `CASE WHEN outer_only THEN eddy_one_row((SELECT eddy_single_value(e) FROM F WHERE p)) END`:
//! conditions on the outer row alone move out, and a non-aggregating projection becomes the
//! aggregate of `planner::single_value`, which fails as PostgreSQL does (21000) where more than
//! one row matched.
//! [`lift_outer_references`] then turns the remaining correlations that are not
//! `inner = outer` column equalities into equalities with a derived copy of the outer relation.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions, BinaryOperator, Expr, GroupByExpr, Query, SelectItem, SetExpr, TableFactor,
};

use super::rewrite::ast::{call, case_when, contains_aggregate};

fn qualifier_of(t: &TableFactor) -> Option<String> {
    match t {
        TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => {
            Some(a.name.value.to_ascii_lowercase())
        }
        TableFactor::Table { name, .. } => name.0.last().map(|p| p.to_string().to_ascii_lowercase()),
        TableFactor::UNNEST { alias: Some(a), .. } | TableFactor::Function { alias: Some(a), .. } => {
            Some(a.name.value.to_ascii_lowercase())
        }
        _ => None,
    }
}

/// Qualifiers of the columns `e` mentions as `q.col`.
fn qualifiers(e: &Expr) -> Vec<String> {
    let mut out = Vec::new();
    let _ = visit_expressions(e, |x| {
        if let Expr::CompoundIdentifier(parts) = x {
            if parts.len() >= 2 {
                out.push(parts[parts.len() - 2].value.to_ascii_lowercase());
            }
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// True if `e` mentions a column without a qualifier. PostgreSQL binds it to the innermost
/// relation that has the column: in a subquery, its own FROM first.
fn mentions_unqualified(e: &Expr) -> bool {
    let mut found = false;
    let _ = visit_expressions(e, |x| {
        if matches!(x, Expr::Identifier(_)) {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        Expr::Nested(inner) if matches!(inner.as_ref(), Expr::BinaryOp { op: BinaryOperator::And, .. }) => {
            conjuncts(*inner, out)
        }
        other => out.push(other),
    }
}

fn and_all(mut preds: Vec<Expr>) -> Option<Expr> {
    let first = if preds.is_empty() { return None } else { preds.remove(0) };
    Some(preds.into_iter().fold(first, |acc, p| Expr::BinaryOp { left: Box::new(acc), op: BinaryOperator::And, right: Box::new(p) }))
}

/// True for a predicate on outer columns that is not an `inner = outer` equality.
fn is_hard(p: &Expr, inner: &HashSet<String>) -> bool {
    let qs = qualifiers(p);
    let has_inner = qs.iter().any(|q| inner.contains(q)) || mentions_unqualified(p);
    let has_outer = qs.iter().any(|q| !inner.contains(q));
    if !has_outer {
        return false;
    }
    if !has_inner {
        // Only outer columns: a condition on the outer row, evaluated outside.
        return true;
    }
    match p {
        Expr::BinaryOp { left, op: BinaryOperator::Eq, right }
            if matches!(left.as_ref(), Expr::CompoundIdentifier(_) | Expr::Identifier(_))
                && matches!(right.as_ref(), Expr::CompoundIdentifier(_) | Expr::Identifier(_)) =>
        {
            // (inner column, outer column); an unqualified column is the subquery's own.
            let side = |e: &Expr| {
                let q = qualifiers(e);
                (q.iter().all(|x| inner.contains(x)), !q.is_empty() && q.iter().all(|x| !inner.contains(x)))
            };
            let (l_in, l_out) = side(left);
            let (r_in, r_out) = side(right);
            !((l_in && r_out) || (l_out && r_in))
        }
        _ => true,
    }
}

/// `q` with the projection replaced by `eddy_single_value(item)`.
fn scalar_of(q: &Query, item: Expr) -> Expr {
    let mut q = q.clone();
    if let SetExpr::Select(s) = q.body.as_mut() {
        s.projection = vec![SelectItem::UnnamedExpr(call(crate::planner::single_value::NAME, vec![item]))];
    }
    Expr::Subquery(Box::new(q))
}

/// The decorrelatable form of the scalar subquery `q` (see the module docs), or `None` when
/// `q` can stay as it is.
pub fn decorrelatable(q: &mut Query) -> Option<Expr> {
    if q.limit_clause.is_some() || q.fetch.is_some() || q.order_by.is_some() || q.with.is_some() {
        return None;
    }
    let SetExpr::Select(select) = q.body.as_mut() else { return None };
    let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(g, _) if g.is_empty());
    if grouped || select.having.is_some() || select.distinct.is_some() || select.projection.len() != 1 {
        return None;
    }
    let item = match &select.projection[0] {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
        _ => return None,
    };
    if contains_aggregate(&item) {
        return None;
    }
    let inner = inner_qualifiers(select);
    let preds = take_conjuncts(select);
    // Conditions on the outer row alone move out; mixed ones stay for `lift_outer_references`.
    let outer_only = |p: &Expr| {
        let qs = qualifiers(p);
        !qs.is_empty() && qs.iter().all(|q| !inner.contains(q)) && !mentions_unqualified(p)
    };
    let (hard, easy): (Vec<Expr>, Vec<Expr>) = preds.into_iter().partition(|p| outer_only(p));
    select.selection = and_all(easy);
    let value = call(crate::planner::single_value::READ, vec![scalar_of(q, item)]);
    if hard.is_empty() {
        return Some(value);
    }
    let condition = and_all(hard)?;
    Some(case_when(vec![(condition, value)]))
}

/// Rewrites the correlated subqueries in `select`'s projection whose outer references DataFusion
/// cannot decorrelate (aggregating subqueries such as `ARRAY(SELECT ... WHERE oid = ANY(pol.polroles))`):
/// each outer relation `q` they read becomes an inner derived table
/// `(SELECT DISTINCT <cols> FROM <q's table>) AS __outer_q`, joined to the outer row by
/// `__outer_q.col = q.col` equalities, which DataFusion does decorrelate.
pub fn lift_outer_references(select: &mut datafusion::sql::sqlparser::ast::Select) {
    use datafusion::sql::sqlparser::ast::{visit_expressions_mut, ObjectName};
    let mut outer: Vec<(String, ObjectName)> = Vec::new();
    for t in &select.from {
        for f in std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)) {
            if let (TableFactor::Table { name, args: None, .. }, Some(q)) = (f, qualifier_of(f)) {
                outer.push((q, name.clone()));
            }
        }
    }
    if outer.is_empty() {
        return;
    }
    for item in select.projection.iter_mut() {
        let expr = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => continue,
        };
        let _ = visit_expressions_mut(expr, |e| {
            if let Expr::Subquery(q) = e {
                lift_in_query(q, &outer);
            }
            ControlFlow::<()>::Continue(())
        });
    }
}

/// Names (or aliases) the relations in `select`'s FROM are referred to by.
fn inner_qualifiers(select: &datafusion::sql::sqlparser::ast::Select) -> HashSet<String> {
    select
        .from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)))
        .filter_map(qualifier_of)
        .collect()
}

/// The name the only relation of `select`'s FROM is referred to by (its alias or its table
/// name), if there is just one.
fn sole_relation_name(select: &datafusion::sql::sqlparser::ast::Select) -> Option<datafusion::sql::sqlparser::ast::Ident> {
    use datafusion::sql::sqlparser::ast::ObjectNamePart;
    let [only] = select.from.as_slice() else { return None };
    if !only.joins.is_empty() {
        return None;
    }
    match &only.relation {
        TableFactor::Table { alias: Some(a), args: None, .. } | TableFactor::Derived { alias: Some(a), .. } => Some(a.name.clone()),
        TableFactor::Table { name, alias: None, args: None, .. } => match name.0.last() {
            Some(ObjectNamePart::Identifier(i)) => Some(i.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// Removes `select`'s WHERE clause and returns its AND-ed conditions.
fn take_conjuncts(select: &mut datafusion::sql::sqlparser::ast::Select) -> Vec<Expr> {
    let mut preds = Vec::new();
    if let Some(w) = select.selection.take() {
        conjuncts(w, &mut preds);
    }
    preds
}

fn lift_in_query(q: &mut Query, outer: &[(String, datafusion::sql::sqlparser::ast::ObjectName)]) {
    use datafusion::sql::sqlparser::ast::{Ident, TableAlias, TableWithJoins};
    let SetExpr::Select(select) = q.body.as_mut() else { return };
    let inner = inner_qualifiers(select);
    let sole = sole_relation_name(select);
    let mut preds = take_conjuncts(select);
    // Outer columns in the projection cannot be decorrelated either: they are read from the
    // copy of the outer relation too.
    let mut projected: Vec<&mut Expr> = select
        .projection
        .iter_mut()
        .filter_map(|i| match i {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
            _ => None,
        })
        .collect();
    let hard_outer: HashSet<String> = preds
        .iter()
        .filter(|p| is_hard(p, &inner))
        .chain(projected.iter().map(|e| &**e))
        .flat_map(qualifiers)
        .filter(|q| !inner.contains(q))
        .collect();
    if hard_outer.is_empty() || hard_outer.iter().any(|q| !outer.iter().any(|(o, _)| o == q)) {
        select.selection = and_all(preds);
        return;
    }
    // The copies of outer relations join the subquery's FROM: an unqualified column named like
    // a copied one would bind to the copy, where PostgreSQL binds it to the subquery's own
    // relation if that has the column. With one relation in the subquery's FROM, the column
    // is taken to be that relation's; with several (catalog queries reading an outer array
    // unqualified), it is left to bind to the copy, the outer relation's value.
    // The columns each lifted relation's copy provides, as the subquery names them.
    let copied: Vec<(&String, &datafusion::sql::sqlparser::ast::ObjectName, Vec<String>)> = outer
        .iter()
        .filter(|(o, _)| hard_outer.contains(o))
        .map(|(qual, table)| {
            let mut cols: Vec<String> = Vec::new();
            for p in preds.iter().chain(projected.iter().map(|e| &**e)) {
                let _ = visit_expressions(p, |x| {
                    if let Expr::CompoundIdentifier(parts) = x {
                        let n = parts.len();
                        if n >= 2 && parts[n - 2].value.eq_ignore_ascii_case(qual) && !cols.contains(&parts[n - 1].value) {
                            cols.push(parts[n - 1].value.clone());
                        }
                    }
                    ControlFlow::<()>::Continue(())
                });
            }
            (qual, table, cols)
        })
        .collect();
    let lifted: HashSet<String> = copied.iter().flat_map(|(_, _, cols)| cols.iter().map(|c| c.to_ascii_lowercase())).collect();
    let clashes = |i: &datafusion::sql::sqlparser::ast::Ident| lifted.contains(&i.value.to_ascii_lowercase());
    let clash = preds.iter().chain(projected.iter().map(|e| &**e)).any(|e| {
        let mut found = false;
        let _ = visit_expressions(e, |x| {
            found |= matches!(x, Expr::Identifier(i) if clashes(i));
            ControlFlow::<()>::Continue(())
        });
        found
    });
    if let (true, Some(own)) = (clash, &sole) {
        for p in preds.iter_mut().chain(projected.iter_mut().map(|e| &mut **e)) {
            let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(p, |x| {
                if let Expr::Identifier(i) = x {
                    if clashes(i) {
                        *x = Expr::CompoundIdentifier(vec![own.clone(), i.clone()]);
                    }
                }
                ControlFlow::<()>::Continue(())
            });
        }
    }
    let mut equalities = Vec::new();
    for (qual, table, cols) in &copied {
        let alias = format!("__outer_{qual}");
        let sql = format!("SELECT DISTINCT {} FROM {table}", cols.join(", "));
        let Ok(mut parsed) = datafusion::sql::sqlparser::parser::Parser::parse_sql(
            &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
            &sql,
        ) else {
            select.selection = and_all(preds);
            return;
        };
        let Some(datafusion::sql::sqlparser::ast::Statement::Query(sub)) = parsed.pop() else {
            select.selection = and_all(preds);
            return;
        };
        for p in preds.iter_mut().chain(projected.iter_mut().map(|e| &mut **e)) {
            let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(p, |x| {
                if let Expr::CompoundIdentifier(parts) = x {
                    let n = parts.len();
                    if n >= 2 && parts[n - 2].value.eq_ignore_ascii_case(qual) {
                        *parts = vec![Ident::new(alias.clone()), parts[n - 1].clone()];
                    }
                }
                ControlFlow::<()>::Continue(())
            });
        }
        for c in cols {
            equalities.push(Expr::BinaryOp {
                left: Box::new(Expr::CompoundIdentifier(vec![Ident::new(alias.clone()), Ident::new(c.clone())])),
                op: BinaryOperator::Eq,
                right: Box::new(Expr::CompoundIdentifier(vec![Ident::new(qual.to_string()), Ident::new(c.clone())])),
            });
        }
        select.from.push(TableWithJoins {
            relation: TableFactor::Derived {
                lateral: false,
                subquery: sub,
                alias: Some(TableAlias { explicit: true, name: Ident::new(alias), columns: vec![], at: None }),
                sample: None,
            },
            joins: vec![],
        });
    }
    preds.extend(equalities);
    select.selection = and_all(preds);
}

/// Largest attribute number in PostgreSQL (a table has at most 1600 columns).
const MAX_ATTNUM: i64 = 1600;

/// A literal number, the only argument form DataFusion's `generate_series` accepts.
fn is_constant(e: &Expr) -> bool {
    match e {
        Expr::Value(_) => true,
        Expr::UnaryOp { expr, .. } | Expr::Nested(expr) => is_constant(expr),
        _ => false,
    }
}

/// `FROM generate_series(lo, hi) s` with bounds read from other relations (a lateral call,
/// which DataFusion cannot plan) becomes `FROM generate_series(0, 1600) s WHERE s BETWEEN lo
/// AND hi`. Catalog queries use such series to walk attribute numbers, which PostgreSQL caps
/// at 1600; bounds outside `0..=1600` are not supported in this form.
pub fn bound_lateral_series(select: &mut datafusion::sql::sqlparser::ast::Select) {
    use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, Ident, Value};
    let mut extra = Vec::new();
    for t in select.from.iter_mut() {
        for f in std::iter::once(&mut t.relation).chain(t.joins.iter_mut().map(|j| &mut j.relation)) {
            let TableFactor::Table { name, args: Some(args), alias: Some(alias), .. } = f else { continue };
            let fname = name.0.last().map(|p| p.to_string()).unwrap_or_default();
            if !fname.eq_ignore_ascii_case("generate_series") || args.args.len() != 2 {
                continue;
            }
            let bounds: Vec<Expr> = super::rewrite::ast::unnamed_arg_exprs(args);
            if bounds.len() != 2 || bounds.iter().all(is_constant) {
                continue;
            }
            let column = alias.columns.first().map(|c| c.name.clone()).unwrap_or_else(|| alias.name.clone());
            let number = |n: i64| Expr::value(Value::Number(n.to_string(), false));
            args.args = vec![
                FunctionArg::Unnamed(FunctionArgExpr::Expr(number(0))),
                FunctionArg::Unnamed(FunctionArgExpr::Expr(number(MAX_ATTNUM))),
            ];
            extra.push(Expr::Between {
                expr: Box::new(Expr::CompoundIdentifier(vec![Ident::new(alias.name.value.clone()), column])),
                negated: false,
                low: Box::new(bounds[0].clone()),
                high: Box::new(bounds[1].clone()),
            });
        }
    }
    if extra.is_empty() {
        return;
    }
    let mut preds = Vec::new();
    if let Some(w) = select.selection.take() {
        conjuncts(w, &mut preds);
    }
    preds.extend(extra);
    select.selection = and_all(preds);
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    #[test]
    fn non_equality_correlation_joins_a_copy_of_the_outer_relation() {
        let sql = "SELECT (SELECT c.collname FROM pg_collation c, pg_type t WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) FROM pg_attribute a";
        let mut stmt = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        super::super::rewrite::rewrite(&mut stmt).unwrap();
        let out = stmt.to_string();
        assert!(out.contains("(SELECT eddy_single_value(c.collname) FROM pg_collation c, pg_type t, (SELECT DISTINCT"), "{out}");
        assert!(out.contains("__outer_a.attcollation <> t.typcollation"), "{out}");
        assert!(out.contains("__outer_a.attcollation = a.attcollation"), "{out}");
    }

    #[test]
    fn outer_columns_in_the_projection_are_read_from_the_copy_too() {
        let sql = "SELECT (SELECT json_build_object('always', a.attidentity = 'a', 'start', s.seqstart) FROM pg_sequence s WHERE s.seqrelid = a.attrelid + 1) FROM pg_attribute a";
        let mut stmt = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        super::super::rewrite::rewrite(&mut stmt).unwrap();
        let out = stmt.to_string();
        assert!(out.contains("__outer_a.attidentity = 'a'"), "{out}");
        assert!(out.contains("__outer_a.attidentity = a.attidentity"), "{out}");
    }
}
