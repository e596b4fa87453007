//! Correlated scalar subqueries DataFusion cannot decorrelate, evaluated per outer value.
//!
//! DataFusion plans a correlated scalar subquery only when it can turn it into a join. A
//! subquery with its own `WITH [RECURSIVE]`, `ORDER BY ... LIMIT` or a set operation cannot be
//! turned into one; asyncpg's type introspection has such a subquery (a recursive walk down a
//! domain's base types under `CASE WHEN t.typtype = 'd'`).
//!
//! [`find_site`] finds one such subquery `S` in a SELECT's projection, correlated through
//! columns `k1..kn` of that SELECT's FROM. The caller then
//! 1. reads the distinct `k1..kn` of the rows that can reach `S` (the SELECT's FROM, filtered by
//!    the `CASE WHEN` guard around `S` when there is one),
//! 2. runs `S` once per distinct key with the keys substituted as literals, and
//! 3. puts back [`lookup`]: `(SELECT first_value(v) FROM (<key, value rows>) WHERE k = outer.k)`,
//!    an equality-correlated subquery DataFusion does decorrelate.
//!
//! Keys that are NULL never match, so `S` reads as NULL for them (PostgreSQL would evaluate it).
//! Meant for catalog-sized inputs: the caller gives up above [`MAX_KEYS`] distinct keys.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions, visit_expressions_mut, Expr, Ident, Query, SelectItem, SetExpr, TableFactor,
    TableWithJoins,
};

use super::rewrite::ast::parse_query;

/// Most distinct outer keys a subquery is evaluated for.
pub const MAX_KEYS: usize = 1000;

/// Stands in the statement for the subquery being evaluated.
const SLOT: &str = "__eddy_apply_slot";

/// A subquery taken out of the statement (its place holds [`SLOT`]).
pub struct Site {
    /// The subquery, still referring to the outer columns.
    pub subquery: Query,
    /// Outer columns it reads, as `(qualifier, column)`.
    pub keys: Vec<(String, String)>,
    /// `SELECT DISTINCT <keys> FROM <outer FROM> [WHERE <guard>]`.
    pub keys_query: String,
}

fn parse_expr(sql: &str) -> Option<Expr> {
    let q = parse_query(&format!("SELECT {sql}"))?;
    match *q.body {
        SetExpr::Select(s) => match s.projection.into_iter().next()? {
            SelectItem::UnnamedExpr(e) => Some(e),
            _ => None,
        },
        _ => None,
    }
}

fn relations(t: &TableWithJoins) -> impl Iterator<Item = &TableFactor> {
    std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation))
}

fn qualifier(t: &TableFactor) -> Option<String> {
    match t {
        TableFactor::Table { alias: Some(a), .. }
        | TableFactor::Derived { alias: Some(a), .. }
        | TableFactor::Function { alias: Some(a), .. }
        | TableFactor::UNNEST { alias: Some(a), .. } => Some(a.name.value.to_ascii_lowercase()),
        TableFactor::Table { name, .. } => name.0.last().map(|p| p.to_string().to_ascii_lowercase()),
        _ => None,
    }
}

/// Every relation name or alias defined anywhere inside `q` (CTE names included), so that
/// columns qualified by them are not mistaken for outer references.
fn defined_inside(q: &Query, out: &mut HashSet<String>) {
    if let Some(with) = &q.with {
        for cte in &with.cte_tables {
            out.insert(cte.alias.name.value.to_ascii_lowercase());
            defined_inside(&cte.query, out);
        }
    }
    defined_in_set_expr(&q.body, out);
}

fn defined_in_set_expr(body: &SetExpr, out: &mut HashSet<String>) {
    match body {
        SetExpr::Select(s) => {
            for t in &s.from {
                for r in relations(t) {
                    out.extend(qualifier(r));
                    if let TableFactor::Derived { subquery, .. } = r {
                        defined_inside(subquery, out);
                    }
                }
            }
            // Subqueries in expressions define relations too.
            let _ = visit_expressions(&s.projection, |e| {
                if let Expr::Subquery(q) | Expr::Exists { subquery: q, .. } | Expr::InSubquery { subquery: q, .. } = e {
                    defined_inside(q, out);
                }
                ControlFlow::<()>::Continue(())
            });
            let _ = visit_expressions(&s.selection, |e| {
                if let Expr::Subquery(q) | Expr::Exists { subquery: q, .. } | Expr::InSubquery { subquery: q, .. } = e {
                    defined_inside(q, out);
                }
                ControlFlow::<()>::Continue(())
            });
        }
        SetExpr::Query(q) => defined_inside(q, out),
        SetExpr::SetOperation { left, right, .. } => {
            defined_in_set_expr(left, out);
            defined_in_set_expr(right, out);
        }
        _ => {}
    }
}

/// Columns of `q` qualified by one of `outer` (and not by a relation of `q` itself).
fn outer_columns(q: &Query, outer: &HashSet<String>) -> Vec<(String, String)> {
    let mut inner = HashSet::new();
    defined_inside(q, &mut inner);
    let mut keys = Vec::new();
    let _ = visit_expressions(q, |e| {
        if let Expr::CompoundIdentifier(parts) = e {
            let n = parts.len();
            if n >= 2 {
                let qual = parts[n - 2].value.to_ascii_lowercase();
                let key = (qual.clone(), parts[n - 1].value.clone());
                if outer.contains(&qual) && !inner.contains(&qual) && !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    keys
}

/// A subquery shape DataFusion cannot decorrelate: its own WITH, ORDER BY/LIMIT, or a set
/// operation at the top.
fn undecorrelatable_shape(q: &Query) -> bool {
    q.with.is_some()
        || q.order_by.is_some()
        || q.limit_clause.is_some()
        || q.fetch.is_some()
        || !matches!(q.body.as_ref(), SetExpr::Select(_))
}

/// A correlated subquery of a shape DataFusion cannot decorrelate.
fn needs_apply(q: &Query, outer: &HashSet<String>) -> bool {
    undecorrelatable_shape(q) && !outer_columns(q, outer).is_empty()
}

/// True when `q` has a scalar subquery of such a shape anywhere: a cheap test that spares the
/// common query the copy [`find_site`] works on.
pub fn may_have_site(q: &Query) -> bool {
    let mut found = false;
    let _ = visit_expressions(q, |e| {
        if let Expr::Subquery(sub) = e {
            found |= undecorrelatable_shape(sub);
        }
        if found { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    });
    found
}

fn only_outer(e: &Expr, outer: &HashSet<String>) -> bool {
    let mut ok = true;
    let _ = visit_expressions(e, |x| {
        match x {
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => ok = false,
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                ok &= outer.contains(&parts[parts.len() - 2].value.to_ascii_lowercase())
            }
            Expr::Identifier(_) => ok = false,
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    ok
}

fn slot() -> Expr {
    Expr::Identifier(Ident::new(SLOT))
}

/// Finds one subquery to evaluate per outer value in `q` (innermost SELECTs first), replaces it
/// with a placeholder and describes it; `None` when there is none.
pub fn find_site(q: &mut Query) -> Option<Site> {
    if let Some(with) = q.with.as_mut() {
        for cte in with.cte_tables.iter_mut() {
            if let Some(s) = find_site(&mut cte.query) {
                return Some(s);
            }
        }
    }
    find_in_set_expr(&mut q.body)
}

fn find_in_set_expr(body: &mut SetExpr) -> Option<Site> {
    let select = match body {
        SetExpr::Select(s) => s,
        SetExpr::Query(q) => return find_site(q),
        SetExpr::SetOperation { left, right, .. } => return find_in_set_expr(left).or_else(|| find_in_set_expr(right)),
        _ => return None,
    };
    for t in select.from.iter_mut() {
        for r in std::iter::once(&mut t.relation).chain(t.joins.iter_mut().map(|j| &mut j.relation)) {
            if let TableFactor::Derived { subquery, .. } = r {
                if let Some(s) = find_site(subquery) {
                    return Some(s);
                }
            }
        }
    }
    let outer: HashSet<String> = select.from.iter().flat_map(relations).filter_map(qualifier).collect();
    if outer.is_empty() {
        return None;
    }
    let from = select.from.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
    // A subquery guarded by `CASE WHEN <outer-only condition> THEN (S)` only needs the keys of
    // the rows the condition admits.
    let mut found: Option<(Query, Option<Expr>)> = None;
    for item in select.projection.iter_mut() {
        let e = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => continue,
        };
        let _ = visit_expressions_mut(e, |x| {
            if let Expr::Case { operand: None, conditions, .. } = x {
                for w in conditions.iter_mut() {
                    if let Expr::Subquery(q) = &w.result {
                        if needs_apply(q, &outer) {
                            let guard = only_outer(&w.condition, &outer).then(|| w.condition.clone());
                            let Expr::Subquery(q) = std::mem::replace(&mut w.result, slot()) else { unreachable!() };
                            found = Some((*q, guard));
                            return ControlFlow::Break(());
                        }
                    }
                }
            }
            ControlFlow::Continue(())
        });
        if found.is_some() {
            break;
        }
    }
    if found.is_none() {
        for item in select.projection.iter_mut() {
            let e = match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
                _ => continue,
            };
            let _ = visit_expressions_mut(e, |x| {
                if let Expr::Subquery(q) = x {
                    if needs_apply(q, &outer) {
                        let Expr::Subquery(q) = std::mem::replace(x, slot()) else { unreachable!() };
                        found = Some((*q, None));
                        return ControlFlow::Break(());
                    }
                }
                ControlFlow::Continue(())
            });
            if found.is_some() {
                break;
            }
        }
    }
    let (subquery, guard) = found?;
    let keys = outer_columns(&subquery, &outer);
    let cols = keys.iter().map(|(q, c)| format!("{}.{}", Ident::new(q), Ident::new(c))).collect::<Vec<_>>().join(", ");
    let filter = guard.map(|g| format!(" WHERE {g}")).unwrap_or_default();
    let keys_query = format!("SELECT DISTINCT {cols} FROM {from}{filter}");
    Some(Site { subquery, keys, keys_query })
}

/// `subquery` with its outer columns replaced by `values` (SQL literals, in `keys` order).
pub fn substitute(subquery: &Query, keys: &[(String, String)], values: &[Expr]) -> Query {
    let mut q = subquery.clone();
    let mut inner = HashSet::new();
    defined_inside(subquery, &mut inner);
    let _ = visit_expressions_mut(&mut q, |e| {
        if let Expr::CompoundIdentifier(parts) = e {
            let n = parts.len();
            if n >= 2 {
                let qual = parts[n - 2].value.to_ascii_lowercase();
                if !inner.contains(&qual) {
                    if let Some(i) = keys.iter().position(|(kq, kc)| *kq == qual && *kc == parts[n - 1].value) {
                        *e = Expr::Nested(Box::new(values[i].clone()));
                    }
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    q
}

/// The decorrelatable lookup that replaces the subquery: `rows` are `(k1, .., kn, v)` SQL
/// literal tuples; `types` the SQL types of the keys and of the value.
pub fn lookup(subquery: &Query, keys: &[(String, String)], rows: &[Vec<String>], types: &[String]) -> Option<Expr> {
    let names: Vec<String> = (0..keys.len()).map(|i| format!("__k{i}")).chain(["__v".to_string()]).collect();
    let source = if rows.is_empty() {
        let cols = types.iter().zip(&names).map(|(t, n)| format!("CAST(NULL AS {t}) AS {n}")).collect::<Vec<_>>().join(", ");
        format!("(SELECT {cols} WHERE false) AS __apply")
    } else {
        let tuples = rows
            .iter()
            .map(|r| format!("({})", r.iter().zip(types).map(|(v, t)| format!("CAST({v} AS {t})")).collect::<Vec<_>>().join(", ")))
            .collect::<Vec<_>>()
            .join(", ");
        format!("(VALUES {tuples}) AS __apply({})", names.join(", "))
    };
    let cond = keys
        .iter()
        .enumerate()
        .map(|(i, (q, c))| format!("__apply.__k{i} = {}.{}", Ident::new(q), Ident::new(c)))
        .collect::<Vec<_>>()
        .join(" AND ");
    // Keep the column name PostgreSQL gives the subquery's value (its select item's name).
    let name = output_name(subquery).map(|n| format!(" AS {}", Ident::with_quote('"', n))).unwrap_or_default();
    parse_expr(&format!("(SELECT first_value(__apply.__v){name} FROM {source} WHERE {cond})"))
}

/// The name of the single column `q` returns, as PostgreSQL derives it.
fn output_name(q: &Query) -> Option<String> {
    let select = match q.body.as_ref() {
        SetExpr::Select(s) => s,
        SetExpr::SetOperation { left, .. } => match left.as_ref() {
            SetExpr::Select(s) => s,
            _ => return None,
        },
        _ => return None,
    };
    match select.projection.first()? {
        SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
        SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(i.value.clone()),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts.last().map(|i| i.value.clone()),
        SelectItem::UnnamedExpr(Expr::Function(f)) => f.name.0.last().map(|p| p.to_string()),
        _ => None,
    }
}

/// Puts `replacement` where [`find_site`] left its placeholder.
pub fn fill_slot(q: &mut Query, replacement: Expr) {
    let mut replacement = Some(replacement);
    let _ = visit_expressions_mut(q, |e| {
        if matches!(e, Expr::Identifier(i) if i.value == SLOT) {
            if let Some(r) = replacement.take() {
                *e = r;
            }
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
}

/// The subquery as a statement returning its single value: `SELECT (<q>)`.
pub fn value_query(q: &Query) -> String {
    format!("SELECT ({q}) AS __v")
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTRO: &str = "SELECT t.oid, (CASE WHEN t.typtype = 'd' THEN (WITH RECURSIVE b(oid, depth) AS (\
        SELECT t2.typbasetype, 0 FROM pg_type t2 WHERE t2.oid = t.oid UNION ALL \
        SELECT t2.typbasetype, b.depth + 1 FROM pg_type t2, b WHERE b.oid = t2.oid AND t2.typbasetype != 0) \
        SELECT oid FROM b ORDER BY depth DESC LIMIT 1) ELSE NULL END) AS basetype FROM pg_type t";

    #[test]
    fn a_guarded_recursive_subquery_is_taken_out_with_its_guard() {
        let mut q = parse_query(INTRO).unwrap();
        assert!(may_have_site(&q));
        let site = find_site(&mut q).expect("site");
        assert_eq!(site.keys, vec![("t".to_string(), "oid".to_string())]);
        assert_eq!(site.keys_query, "SELECT DISTINCT t.oid FROM pg_type t WHERE t.typtype = 'd'");
        assert!(q.to_string().contains(SLOT), "{q}");
        let one = substitute(&site.subquery, &site.keys, &[parse_expr("CAST(42 AS integer)").unwrap()]);
        assert!(one.to_string().contains("t2.oid = (CAST(42 AS INTEGER))"), "{one}");
        let repl = lookup(&site.subquery, &site.keys, &[vec!["42".into(), "7".into()]], &["integer".into(), "integer".into()]).unwrap();
        fill_slot(&mut q, repl);
        let out = q.to_string();
        assert!(out.contains("(VALUES (CAST(42 AS INTEGER), CAST(7 AS INTEGER))) AS __apply (__k0, __v) WHERE __apply.__k0 = t.oid"), "{out}");
        assert!(find_site(&mut q).is_none(), "{out}");
    }

    #[test]
    fn uncorrelated_and_plain_subqueries_are_left_alone() {
        for sql in [
            "SELECT (SELECT max(x) FROM u WHERE u.k = t.k) FROM t",
            "SELECT (WITH c AS (SELECT 1 AS one) SELECT one FROM c) FROM t",
        ] {
            let mut q = parse_query(sql).unwrap();
            assert!(find_site(&mut q).is_none(), "{sql}");
        }
        for sql in ["SELECT a FROM t WHERE b IN (SELECT b FROM u)", "SELECT (SELECT max(x) FROM u WHERE u.k = t.k) FROM t"] {
            assert!(!may_have_site(&parse_query(sql).unwrap()), "{sql}");
        }
    }
}
