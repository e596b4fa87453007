//! Whole-row references: a FROM item's name used as a value (`SELECT row_to_json(t) FROM t`,
//! `json_agg(o ORDER BY o.id)`, `SELECT t FROM t`) is the row as a record, as in PostgreSQL.
//! DataFusion reads a bare name only as a column, so each such reference becomes
//! `named_struct('c1', t.c1, ...)` of the item's columns (from the catalog for a table, the
//! alias list for an expanded view, the select list for a derived table). A name that is also
//! a column of a FROM item stays the column, as PostgreSQL resolves it.
//!
//! With the same column lists, `NATURAL` joins become `USING` joins on their common columns,
//! so the PostgreSQL rewrite merges the key of a `NATURAL FULL` or `RIGHT JOIN` as it does for
//! `USING` (DataFusion's merged column read the left side only).

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, JoinConstraint, ObjectName, Query, SelectItem, SetExpr, TableFactor, TableWithJoins, Value, VisitMut, VisitorMut};

use crate::frontend::names::resolve_name;
use crate::frontend::statement::ident_name;
use crate::frontend::session::Session;
use crate::pg::rewrite::ast::{constraint_mut, own_expressions, same_ident as same};

/// A FROM item's name and columns.
struct Item {
    name: Ident,
    columns: Vec<String>,
}

impl Session {
    /// The columns a derived table's query shows, when its select list names them all.
    fn derived_columns(q: &Query) -> Option<Vec<String>> {
        let SetExpr::Select(s) = q.body.as_ref() else { return None };
        s.projection
            .iter()
            .map(|p| match p {
                SelectItem::ExprWithAlias { alias, .. } => Some(ident_name(alias)),
                SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(ident_name(i)),
                SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts.last().map(ident_name),
                _ => None,
            })
            .collect()
    }

    /// The name and columns of a FROM item (of each item of a nested join) into `out`; false
    /// when one is not known (a CTE, a table function, a derived table with `*`).
    fn read_from_item(&self, t: &TableFactor, out: &mut Vec<Item>) -> bool {
        match t {
            TableFactor::Table { name, alias, args: None, .. } => {
                let listed = alias.as_ref().filter(|a| !a.columns.is_empty()).map(|a| a.columns.iter().map(|c| ident_name(&c.name)).collect());
                let columns = listed.or_else(|| {
                    let (schema, rel) = resolve_name(self, name).ok()?;
                    let cat = self.engine.catalog();
                    let table = cat.table(&schema, &rel)?;
                    Some(table.columns.iter().filter(|c| !c.hidden).map(|c| c.name.clone()).collect())
                });
                let shown = alias.as_ref().map(|a| a.name.clone()).or_else(|| name.0.last().and_then(|p| p.as_ident().cloned()));
                let (Some(name), Some(columns)) = (shown, columns) else { return false };
                out.push(Item { name, columns });
                true
            }
            TableFactor::Derived { subquery, alias: Some(a), .. } => {
                let columns = if a.columns.is_empty() { Self::derived_columns(subquery) } else { Some(a.columns.iter().map(|c| ident_name(&c.name)).collect()) };
                let Some(columns) = columns else { return false };
                out.push(Item { name: a.name.clone(), columns });
                true
            }
            TableFactor::NestedJoin { table_with_joins, .. } => {
                let mut known = self.read_from_item(&table_with_joins.relation, out);
                for j in &table_with_joins.joins {
                    known &= self.read_from_item(&j.relation, out);
                }
                known
            }
            _ => false,
        }
    }

    /// A table's alias list shorter than its columns names the first ones, as in PostgreSQL
    /// (`t AS q(a)`; DataFusion refused it): the list is completed with the other columns'
    /// names.
    fn complete_alias_list(&self, f: &mut TableFactor) {
        let TableFactor::Table { name, alias: Some(alias), args: None, .. } = f else { return };
        if alias.columns.is_empty() {
            return;
        }
        let Ok((schema, rel)) = resolve_name(self, name) else { return };
        let cat = self.engine.catalog();
        let Some(table) = cat.table(&schema, &rel) else { return };
        let visible: Vec<&str> = table.columns.iter().filter(|c| !c.hidden).map(|c| c.name.as_str()).collect();
        for c in visible.iter().skip(alias.columns.len()) {
            alias.columns.push(datafusion::sql::sqlparser::ast::TableAliasColumnDef { name: Ident::with_quote('"', *c), data_type: None });
        }
    }

    /// The rewrite of the module docs, on every query of `q`.
    pub(crate) fn expand_whole_rows(&self, q: &mut Query) {
        struct Queries<'a>(&'a Session);
        impl VisitorMut for Queries<'_> {
            type Break = ();
            fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
                self.0.whole_rows_of(q);
                ControlFlow::Continue(())
            }
        }
        let _ = q.visit(&mut Queries(self));
    }

    fn whole_rows_of(&self, q: &mut Query) {
        let SetExpr::Select(select) = q.body.as_mut() else { return };
        // Each FROM item read once; whole rows only when every item's columns are known (a
        // name could be a column of another).
        let mut items = Vec::new();
        let mut known = true;
        for t in select.from.iter_mut() {
            for f in std::iter::once(&mut t.relation).chain(t.joins.iter_mut().map(|j| &mut j.relation)) {
                self.complete_alias_list(f);
            }
            let factors: Vec<Option<Vec<Item>>> = std::iter::once(&t.relation)
                .chain(t.joins.iter().map(|j| &j.relation))
                .map(|f| {
                    let mut out = Vec::new();
                    self.read_from_item(f, &mut out).then_some(out)
                })
                .collect();
            natural_as_using(t, &factors);
            for f in factors {
                match f {
                    Some(found) => items.extend(found),
                    None => known = false,
                }
            }
        }
        if items.is_empty() || !known {
            return;
        }
        let columns: HashSet<String> = items.iter().flat_map(|i| i.columns.iter().map(|c| c.to_lowercase())).collect();
        // `t.c[1]` parses as an access chain on the bare name `t`: that name is a qualifier.
        let mut qualifiers: HashSet<*const Expr> = HashSet::new();
        let mut rewrite = |e: &mut Expr| {
            if let Expr::CompoundFieldAccess { root, access_chain } = e {
                if matches!(access_chain.first(), Some(datafusion::sql::sqlparser::ast::AccessExpr::Dot(_))) {
                    qualifiers.insert(root.as_ref() as *const Expr);
                }
            }
            if qualifiers.contains(&(e as *const Expr)) {
                return ControlFlow::Continue(());
            }
            // `f(t.*)` passes the row as one value, as `f(t)` does (`count(DISTINCT t.*)`
            // counted one distinct value).
            if let Expr::Function(f) = e {
                if let FunctionArguments::List(list) = &mut f.args {
                    for a in &mut list.args {
                        if let FunctionArg::Unnamed(arg @ FunctionArgExpr::QualifiedWildcard(_)) = a {
                            let FunctionArgExpr::QualifiedWildcard(ObjectName(parts)) = &*arg else { continue };
                            let name = match parts.as_slice() {
                                [p] => p.as_ident().cloned(),
                                _ => None,
                            };
                            if let Some(name) = name.filter(|n| items.iter().any(|i| same(&i.name, n))) {
                                *arg = FunctionArgExpr::Expr(Expr::Identifier(name));
                            }
                        }
                    }
                }
            }
            if let Expr::Identifier(id) = e {
                let found: Vec<&Item> = items.iter().filter(|i| same(&i.name, id)).collect();
                if let ([item], false) = (found.as_slice(), columns.contains(&id.value.to_lowercase())) {
                    let mut args = Vec::with_capacity(item.columns.len() * 2);
                    for c in &item.columns {
                        args.push(Expr::value(Value::SingleQuotedString(c.clone())));
                        args.push(Expr::CompoundIdentifier(vec![item.name.clone(), Ident::with_quote('"', c.clone())]));
                    }
                    *e = crate::pg::rewrite::call("named_struct", args);
                }
            }
            ControlFlow::Continue(())
        };
        let mut own = own_expressions(&mut rewrite);
        let _ = select.projection.visit(&mut own);
        let _ = select.selection.visit(&mut own);
        let _ = select.having.visit(&mut own);
        let _ = select.group_by.visit(&mut own);
    }
}

/// `a NATURAL [kind] JOIN b` as `a [kind] JOIN b USING (common columns)`, when both sides'
/// columns are known (left to right along the chain; `factors`: each item's, as read).
fn natural_as_using(t: &mut TableWithJoins, factors: &[Option<Vec<Item>>]) {
    let single = |f: Option<&Option<Vec<Item>>>| match f {
        Some(Some(found)) if found.len() == 1 => Some(found[0].columns.clone()),
        _ => None,
    };
    let first = single(factors.first());
    let mut known = first.is_some();
    let mut columns = first.unwrap_or_default();
    for (k, j) in t.joins.iter_mut().enumerate() {
        let right = single(factors.get(k + 1));
        known &= right.is_some();
        let right = right.unwrap_or_default();
        if let (true, Some(c @ JoinConstraint::Natural)) = (known, constraint_mut(&mut j.join_operator)) {
            let common: Vec<ObjectName> = columns.iter().filter(|c| right.contains(c)).map(|c| ObjectName::from(vec![Ident::with_quote('"', c.clone())])).collect();
            if !common.is_empty() {
                *c = JoinConstraint::Using(common);
            }
        }
        for c in right {
            if !columns.contains(&c) {
                columns.push(c);
            }
        }
    }
}
