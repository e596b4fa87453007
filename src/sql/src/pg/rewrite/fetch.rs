//! The SQL standard's `FETCH FIRST n ROWS ONLY` is `LIMIT n`.
//!
//! `ORDER BY ... [OFFSET m] FETCH FIRST n ROWS WITH TIES` (PostgreSQL 13+): the n rows after
//! the first m, and every further row that ties with the last of them in the ORDER BY.
//! DataFusion has no such limit, so the query is ranked and filtered:
//!
//! ```sql
//! SELECT * EXCLUDE (__eddy_rank, __eddy_row) FROM (
//!   SELECT *, rank() OVER (ORDER BY o) AS __eddy_rank, row_number() OVER (ORDER BY o) AS __eddy_row
//!   FROM (<the query without ORDER BY, OFFSET and FETCH>) AS __eddy_ties) AS __eddy_ranked
//! WHERE __eddy_rank <= m + n AND __eddy_row > m ORDER BY o
//! ```
//!
//! A row at position p (1-based) ranks 1 + the rows strictly before it, so rows at positions
//! up to m + n rank at most m + n, and a later row does so exactly when it ties with the row at
//! m + n. The ORDER BY is evaluated over the query's output: items that are not output
//! columns (by name, position or the select item's expression) are added to a plain SELECT's
//! output as hidden columns; elsewhere (set operations, DISTINCT) the query is left as it was
//! and refused.

use datafusion::sql::sqlparser::ast::{
    Expr, ExcludeSelectItem, Ident, ObjectName, OrderByExpr, OrderByKind, Query, SelectItem, SetExpr, Value,
};

use datafusion::sql::sqlparser::ast::LimitClause;

use super::ast::parse_query;

const RANK: &str = "__eddy_rank";
const ROW: &str = "__eddy_row";

/// The names of `body`'s output columns where the syntax gives them (`None` for an unnamed
/// expression), and whether a wildcard adds columns whose names are unknown here.
/// An output column: its name where the syntax gives one, and its select item's expression
/// (`None` for a wildcard).
type OutputColumn<'a> = (Option<Ident>, Option<&'a Expr>);

fn output_names(body: &SetExpr) -> (Vec<OutputColumn<'_>>, bool) {
    match body {
        SetExpr::Select(s) => {
            let mut names = Vec::new();
            let mut wildcard = false;
            for item in &s.projection {
                match item {
                    SelectItem::ExprWithAlias { alias, expr } => names.push((Some(alias.clone()), Some(expr))),
                    SelectItem::UnnamedExpr(e @ Expr::Identifier(i)) => names.push((Some(i.clone()), Some(e))),
                    SelectItem::UnnamedExpr(e @ Expr::CompoundIdentifier(parts)) => names.push((parts.last().cloned(), Some(e))),
                    SelectItem::UnnamedExpr(e) => names.push((None, Some(e))),
                    SelectItem::ExprWithAliases { .. } => names.push((None, None)),
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                        wildcard = true;
                        names.push((None, None));
                    }
                }
            }
            (names, wildcard)
        }
        SetExpr::SetOperation { left, .. } => output_names(left),
        SetExpr::Query(q) => output_names(&q.body),
        _ => (vec![], true),
    }
}

fn same_name(a: &Ident, b: &Ident) -> bool {
    let norm = |i: &Ident| if i.quote_style.is_some() { i.value.clone() } else { i.value.to_ascii_lowercase() };
    norm(a) == norm(b)
}

/// `e` as an output column of `body`, if it names one.
fn output_column(e: &Expr, body: &SetExpr) -> Option<Ident> {
    let (names, wildcard) = output_names(body);
    match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => {
                let k: usize = n.parse().ok()?;
                let (before, _) = names.split_at(k.checked_sub(1)?.min(names.len()));
                // A position past a wildcard cannot be resolved here.
                if before.iter().any(|(n, e)| n.is_none() && e.is_none()) {
                    return None;
                }
                names.get(k - 1)?.0.clone()
            }
            _ => None,
        },
        Expr::Identifier(i) => {
            let known = names.iter().any(|(n, _)| n.as_ref().is_some_and(|n| same_name(n, i)));
            (known || wildcard).then(|| i.clone())
        }
        Expr::Nested(inner) => output_column(inner, body),
        other => names.iter().find(|(_, item)| *item == Some(other)).and_then(|(n, _)| n.clone()).or_else(|| match other {
            Expr::CompoundIdentifier(parts) if wildcard => parts.last().cloned(),
            _ => None,
        }),
    }
}

/// Rewrites `q`'s FETCH clause (see the module docs).
pub(super) fn fetch_clause(q: &mut Query) {
    fetch_with_ties(q);
    fetch_as_limit(q);
}

/// Rewrites `q` if it ends in `FETCH ... WITH TIES` (see the module docs).
fn fetch_with_ties(q: &mut Query) {
    let Some(fetch) = q.fetch.as_ref().filter(|f| f.with_ties && !f.percent) else { return };
    let Some(order_by) = q.order_by.as_ref() else { return };
    let OrderByKind::Expressions(items) = &order_by.kind else { return };
    let mut order = Vec::new();
    // ORDER BY expressions that are not output columns, added to a plain SELECT's output.
    let mut extra = Vec::new();
    for item in items {
        let column = match output_column(&item.expr, &q.body) {
            Some(column) => column,
            None if matches!(q.body.as_ref(), SetExpr::Select(s) if s.distinct.is_none()) => {
                let alias = Ident::new(format!("__eddy_order{}", extra.len()));
                extra.push(SelectItem::ExprWithAlias { expr: item.expr.clone(), alias: alias.clone() });
                alias
            }
            None => return,
        };
        order.push(OrderByExpr { expr: Expr::Identifier(column), options: item.options, with_fill: None }.to_string());
    }
    let mut hidden: Vec<ObjectName> = extra
        .iter()
        .filter_map(|i| match i {
            SelectItem::ExprWithAlias { alias, .. } => Some(ObjectName::from(vec![alias.clone()])),
            _ => None,
        })
        .collect();
    hidden.extend([ObjectName::from(vec![Ident::new(RANK)]), ObjectName::from(vec![Ident::new(ROW)])]);
    let order = order.join(", ");
    let n = fetch.quantity.as_ref().map_or("1".to_string(), |e| e.to_string());
    let offset = match &q.limit_clause {
        Some(LimitClause::LimitOffset { limit: None, offset, limit_by }) if limit_by.is_empty() => {
            offset.as_ref().map_or("0".to_string(), |o| o.value.to_string())
        }
        None => "0".to_string(),
        // A LIMIT and a FETCH together are a syntax error in PostgreSQL; leave it to the planner.
        _ => return,
    };
    let mut inner = q.clone();
    inner.with = None;
    inner.order_by = None;
    inner.limit_clause = None;
    inner.fetch = None;
    if let SetExpr::Select(s) = inner.body.as_mut() {
        s.projection.extend(extra);
    }
    let sql = format!(
        "SELECT * FROM (SELECT *, rank() OVER (ORDER BY {order}) AS {RANK}, row_number() OVER (ORDER BY {order}) AS {ROW} \
         FROM ({inner}) AS __eddy_ties) AS __eddy_ranked \
         WHERE {RANK} <= ({offset}) + ({n}) AND {ROW} > ({offset}) ORDER BY {order}"
    );
    let Some(mut ranked) = parse_query(&sql) else { return };
    let SetExpr::Select(select) = ranked.body.as_mut() else { return };
    let Some(SelectItem::Wildcard(options)) = select.projection.first_mut() else { return };
    options.opt_exclude = Some(ExcludeSelectItem::Multiple(hidden));
    ranked.with = q.with.take();
    *q = ranked;
}

/// `FETCH FIRST n ROWS ONLY` (SQL standard) → `LIMIT n`, keeping an OFFSET.
fn fetch_as_limit(q: &mut Query) {
    let Some(fetch) = q.fetch.as_ref() else { return };
    if fetch.with_ties || fetch.percent {
        return;
    }
    let n = fetch.quantity.clone().unwrap_or_else(|| Expr::value(Value::Number("1".into(), false)));
    q.limit_clause = Some(match q.limit_clause.take() {
        Some(LimitClause::LimitOffset { offset, limit_by, .. }) => LimitClause::LimitOffset { limit: Some(n), offset, limit_by },
        _ => LimitClause::LimitOffset { limit: Some(n), offset: None, limit_by: vec![] },
    });
    q.fetch = None;
}
