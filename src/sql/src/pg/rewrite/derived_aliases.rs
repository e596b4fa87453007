//! Column alias lists of derived tables where DataFusion refused PostgreSQL's:
//!
//! * a list shorter than the columns names the first ones (`(VALUES (1, 2, 3)) v(a, b)` keeps
//!   `column3`; DataFusion: 42601 "only 2 names given");
//! * a list over a select list whose items share a name (`(SELECT e1.id, e2.id ...) q(a, b)`,
//!   `(SELECT id, id::text ...) q(a, b)`) renames the items themselves (DataFusion: 42601
//!   "unique expression names", 42702 or 42703).
//!
//! The names go onto the subquery's select items (as `AS` aliases) or, for VALUES, the list is
//! completed with VALUES' own names. Items already named with `AS` keep theirs when that name
//! could be referenced inside the subquery (GROUP BY, ORDER BY), so only unnamed items and
//! lists DataFusion would refuse are rewritten.

use datafusion::sql::sqlparser::ast::{Query, SelectItem, SetExpr, TableAliasColumnDef, TableFactor};

/// Rewrites the alias lists of the derived tables in `q`'s own FROM.
pub(super) fn derived_alias_lists(q: &mut Query) {
    let SetExpr::Select(select) = q.body.as_mut() else { return };
    for t in &mut select.from {
        for f in std::iter::once(&mut t.relation).chain(t.joins.iter_mut().map(|j| &mut j.relation)) {
            rewrite_factor(f);
        }
    }
}

fn rewrite_factor(f: &mut TableFactor) {
    let TableFactor::Derived { subquery, alias: Some(alias), .. } = f else { return };
    if alias.columns.is_empty() {
        return;
    }
    match subquery.body.as_mut() {
        SetExpr::Values(v) => {
            let width = v.rows.first().map_or(0, |r| r.content.len());
            for i in alias.columns.len()..width {
                alias.columns.push(TableAliasColumnDef::from_name(format!("column{}", i + 1)));
            }
        }
        SetExpr::Select(s) => {
            let items = &mut s.projection;
            if items.iter().any(|i| !matches!(i, SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. })) || alias.columns.len() > items.len() {
                return;
            }
            let shorter = alias.columns.len() < items.len();
            let unnamed = |i: &SelectItem| matches!(i, SelectItem::UnnamedExpr(_));
            // Only where DataFusion refuses the list: shorter, or over unnamed items (whose
            // names may repeat).
            if !shorter && !items.iter().take(alias.columns.len()).any(unnamed) {
                return;
            }
            // An item's own name may be referenced inside (GROUP BY, HAVING, ORDER BY): then
            // it stays as it is, and so does the query.
            let referenced = {
                let inside = format!("{} {} {}", s.group_by, s.having.as_ref().map(|h| h.to_string()).unwrap_or_default(), subquery.order_by.as_ref().map(|o| o.to_string()).unwrap_or_default()).to_lowercase();
                let words: Vec<&str> = inside.split(|c: char| !(c.is_alphanumeric() || c == '_')).collect();
                s.projection.iter().take(alias.columns.len()).any(|i| matches!(i, SelectItem::ExprWithAlias { alias, .. } if words.contains(&alias.value.to_lowercase().as_str())))
            };
            if referenced {
                return;
            }
            let items = &mut s.projection;
            for (item, name) in items.iter_mut().zip(std::mem::take(&mut alias.columns)) {
                if let SelectItem::UnnamedExpr(e) = item {
                    *item = SelectItem::ExprWithAlias { expr: e.clone(), alias: name.name };
                } else if let SelectItem::ExprWithAlias { alias, .. } = item {
                    *alias = name.name;
                }
            }
        }
        _ => {}
    }
}
