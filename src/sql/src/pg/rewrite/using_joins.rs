//! The merged column of `RIGHT` and `FULL JOIN ... USING (k)`, as PostgreSQL defines it.
//!
//! PostgreSQL's `k` after `a FULL JOIN b USING (k)` is `COALESCE(a.k, b.k)` (after a `RIGHT`
//! join, `b.k`), and `*` lists it once, first. DataFusion reads an unqualified `k` as `a.k`, so
//! right-only rows showed a NULL key, and a second `FULL JOIN c USING (k)` found `k` ambiguous.
//! An inner or left chain `a JOIN b USING (k) JOIN c USING (k)` found `k` ambiguous too, and
//! so did `WHERE k = 1` after one inner `USING` join, whose `*` put `k` after `a`'s other
//! columns. When a `SELECT`'s FROM has a `USING` join, each `USING` join in it becomes an `ON` join on the
//! merged expressions, `*` lists the merged columns and then each relation's other columns
//! (`q.* EXCLUDE (k)`), and unqualified references to a merged column in the select list,
//! WHERE, GROUP BY, HAVING, later ON conditions and ORDER BY read the merged expression.
//! Where a side's columns cannot be told without the catalog (a `USING` column from a join
//! side that did not merge it, `NATURAL` joins, unaliased derived tables) the query is left as
//! it is.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, ExcludeSelectItem, Expr, Ident, JoinConstraint, JoinOperator, ObjectName, Query, Select,
    SelectItem, SelectItemQualifiedWildcardKind, SetExpr, TableFactor, TableWithJoins, VisitMut,
    WildcardAdditionalOptions,
};

use super::ast::{call, constraint_mut, own_expressions, same_ident as same};

/// One part of a FROM item's output, in `*` order.
#[derive(Clone)]
enum Item {
    /// A merged `USING` column: its name and value.
    Merged(Ident, Box<Expr>),
    /// A relation's columns (by qualifier) but the excluded (merged) ones.
    Rel(ObjectName, Vec<Ident>),
}

fn qualifier(t: &TableFactor) -> Option<ObjectName> {
    match t {
        TableFactor::Table { alias: Some(a), .. }
        | TableFactor::Derived { alias: Some(a), .. }
        | TableFactor::Function { alias: Some(a), .. }
        | TableFactor::UNNEST { alias: Some(a), .. } => Some(ObjectName::from(vec![a.name.clone()])),
        TableFactor::Table { name, alias: None, .. } => Some(name.clone()),
        _ => None,
    }
}

/// The value of column `c` of a side with `items`: its merged expression, or the column of its
/// only relation.
fn column_of(items: &[Item], c: &Ident) -> Option<Expr> {
    if let Some(e) = items.iter().find_map(|i| match i {
        Item::Merged(n, e) if same(n, c) => Some(e.as_ref().clone()),
        _ => None,
    }) {
        return Some(e);
    }
    match items {
        [Item::Rel(q, ex)] if !ex.iter().any(|x| same(x, c)) => {
            let mut parts = q.0.iter().filter_map(|p| p.as_ident().cloned()).collect::<Vec<_>>();
            parts.push(c.clone());
            Some(Expr::CompoundIdentifier(parts))
        }
        _ => None,
    }
}

/// `items` with column `c` gone (it is merged now).
fn without(items: Vec<Item>, c: &Ident) -> Vec<Item> {
    let single = items.len() == 1;
    items
        .into_iter()
        .filter(|i| !matches!(i, Item::Merged(n, _) if same(n, c)))
        .map(|i| match i {
            Item::Rel(q, mut ex) if single => {
                ex.push(c.clone());
                Item::Rel(q, ex)
            }
            other => other,
        })
        .collect()
}

/// The joins a `USING` clause may merge columns of.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Inner,
    Left,
    Right,
    Full,
}

/// `op`'s kind and constraint (`None`: cross, semi, anti and other joins).
fn kind(op: &JoinOperator) -> Option<(Kind, &JoinConstraint)> {
    Some(match op {
        JoinOperator::Join(c) | JoinOperator::Inner(c) => (Kind::Inner, c),
        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (Kind::Left, c),
        JoinOperator::Right(c) | JoinOperator::RightOuter(c) => (Kind::Right, c),
        JoinOperator::FullOuter(c) => (Kind::Full, c),
        _ => return None,
    })
}

/// Rewrites `t`'s `USING` joins into `ON` joins (see the module docs): the output items, or
/// `None` if a column's source cannot be told.
fn rewrite_joins(t: &mut TableWithJoins) -> Option<Vec<Item>> {
    let mut items = factor_items(&mut t.relation)?;
    for j in &mut t.joins {
        let right = factor_items(&mut j.relation)?;
        if matches!(j.join_operator, JoinOperator::CrossJoin(JoinConstraint::None)) {
            items.extend(right);
            continue;
        }
        let (kind, _) = kind(&j.join_operator)?;
        let constraint = constraint_mut(&mut j.join_operator)?;
        match constraint {
            JoinConstraint::Using(cols) => {
                let cols: Vec<Ident> = cols.iter().map(|c| c.0.last().and_then(|p| p.as_ident().cloned())).collect::<Option<_>>()?;
                let mut on = Vec::new();
                let mut merged = Vec::new();
                let (mut left_rest, mut right_rest) = (items.clone(), right.clone());
                for c in &cols {
                    let (l, r) = (column_of(&items, c)?, column_of(&right, c)?);
                    on.push(Expr::BinaryOp { left: Box::new(l.clone()), op: BinaryOperator::Eq, right: Box::new(r.clone()) });
                    let value = match kind {
                        Kind::Right => r,
                        // Flat, so a chain of n joins stays linear in size.
                        Kind::Full => match l {
                            Expr::Function(mut f) if super::ast::base_name(&f.name) == "coalesce" => {
                                if let datafusion::sql::sqlparser::ast::FunctionArguments::List(list) = &mut f.args {
                                    list.args.push(datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(r.into()));
                                }
                                Expr::Function(f)
                            }
                            l => call("coalesce", vec![l, r]),
                        },
                        _ => l,
                    };
                    merged.push(Item::Merged(c.clone(), Box::new(value)));
                    left_rest = without(left_rest, c);
                    right_rest = without(right_rest, c);
                }
                let on = on.into_iter().reduce(|a, b| Expr::BinaryOp { left: Box::new(a), op: BinaryOperator::And, right: Box::new(b) })?;
                *constraint = JoinConstraint::On(on);
                items = merged.into_iter().chain(left_rest).chain(right_rest).collect();
            }
            JoinConstraint::On(_) | JoinConstraint::None => items.extend(right),
            JoinConstraint::Natural => return None,
        }
    }
    Some(items)
}

fn factor_items(t: &mut TableFactor) -> Option<Vec<Item>> {
    match t {
        TableFactor::NestedJoin { table_with_joins, alias: None } => rewrite_joins(table_with_joins),
        other => Some(vec![Item::Rel(qualifier(other)?, vec![])]),
    }
}

/// Replaces the unqualified references to the merged columns in `node`, outside subqueries.
fn merge_refs<T: VisitMut>(node: &mut T, merged: &[(Ident, Expr)]) {
    let _ = node.visit(&mut own_expressions(|e: &mut Expr| {
        if let Expr::Identifier(id) = e {
            if let Some((_, value)) = merged.iter().find(|(n, _)| same(n, id)) {
                *e = value.clone();
            }
        }
        ControlFlow::Continue(())
    }));
}

/// The rewrite of the module docs on `q`'s own SELECT (not its subqueries, which the visitor
/// of `pg::rewrite` reaches on its own).
pub fn merge_outer_using(q: &mut Query) {
    let SetExpr::Select(select) = q.body.as_mut() else { return };
    let Some(items) = rewritten_from(select) else { return };
    let merged: Vec<(Ident, Expr)> = items
        .iter()
        .filter_map(|i| match i {
            Item::Merged(n, e) => Some((n.clone(), e.as_ref().clone())),
            Item::Rel(..) => None,
        })
        .collect();
    // References first: the expanded `*` below already reads the merged values.
    for item in &mut select.projection {
        match item {
            // A bare `k` keeps its name.
            SelectItem::UnnamedExpr(Expr::Identifier(id)) if merged.iter().any(|(n, _)| same(n, id)) => {
                let alias = id.clone();
                let mut expr = Expr::Identifier(alias.clone());
                merge_refs(&mut expr, &merged);
                *item = SelectItem::ExprWithAlias { expr, alias };
            }
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => merge_refs(e, &merged),
            _ => {}
        }
    }
    for e in select.selection.iter_mut().chain(select.having.iter_mut()) {
        merge_refs(e, &merged);
    }
    if let datafusion::sql::sqlparser::ast::GroupByExpr::Expressions(g, _) = &mut select.group_by {
        for e in g {
            merge_refs(e, &merged);
        }
    }
    // The generated conditions are qualified: only the user's change.
    merge_join_conditions(&mut select.from, &merged);
    let aliases: Vec<Ident> = select
        .projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.clone()),
            _ => None,
        })
        .collect();
    let unaliased: Vec<(Ident, Expr)> = merged.iter().filter(|(n, _)| !aliases.iter().any(|a| same(a, n))).cloned().collect();
    if let Some(order_by) = &mut q.order_by {
        merge_refs(order_by, &unaliased);
    }
    let SetExpr::Select(select) = q.body.as_mut() else { return };
    select.projection = std::mem::take(&mut select.projection)
        .into_iter()
        .flat_map(|item| match item {
            SelectItem::Wildcard(_) => items.iter().map(star_item).collect(),
            other => vec![other],
        })
        .collect();
}

fn star_item(i: &Item) -> SelectItem {
    match i {
        Item::Merged(n, e) => SelectItem::ExprWithAlias { expr: e.as_ref().clone(), alias: n.clone() },
        Item::Rel(q, ex) => {
            let options = WildcardAdditionalOptions {
                opt_exclude: (!ex.is_empty()).then(|| ExcludeSelectItem::Multiple(ex.iter().map(|c| ObjectName::from(vec![c.clone()])).collect())),
                ..Default::default()
            };
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(q.clone()), options)
        }
    }
}

/// The user's ON conditions in `from` read the merged columns too.
fn merge_join_conditions(from: &mut [TableWithJoins], merged: &[(Ident, Expr)]) {
    for t in from {
        if let TableFactor::NestedJoin { table_with_joins, .. } = &mut t.relation {
            merge_join_conditions(std::slice::from_mut(table_with_joins.as_mut()), merged);
        }
        for j in &mut t.joins {
            if let TableFactor::NestedJoin { table_with_joins, .. } = &mut j.relation {
                merge_join_conditions(std::slice::from_mut(table_with_joins.as_mut()), merged);
            }
            if let Some(JoinConstraint::On(e)) = constraint_mut(&mut j.join_operator) {
                merge_refs(e, merged);
            }
        }
    }
}

/// How many `USING` joins `t` has, and whether one is a RIGHT or FULL join.
fn using_joins(t: &TableWithJoins) -> usize {
    let nested = |f: &TableFactor| match f {
        TableFactor::NestedJoin { table_with_joins, .. } => using_joins(table_with_joins),
        _ => 0,
    };
    let mut n = nested(&t.relation);
    for j in &t.joins {
        n += nested(&j.relation);
        if let Some((_, JoinConstraint::Using(_))) = kind(&j.join_operator) {
            n += 1;
        }
    }
    n
}

/// `select`'s FROM with its USING joins rewritten, and the output items, if it has a `USING`
/// join and every column's source is known (else `select` is unchanged).
fn rewritten_from(select: &mut Select) -> Option<Vec<Item>> {
    if select.from.iter().map(using_joins).sum::<usize>() == 0 {
        return None;
    }
    // A `*` with options of its own is left alone, and so is the query.
    if select.projection.iter().any(|i| matches!(i, SelectItem::Wildcard(o) if *o != WildcardAdditionalOptions { wildcard_token: o.wildcard_token.clone(), ..Default::default() })) {
        return None;
    }
    let mut from = select.from.clone();
    let mut items = Vec::new();
    for t in &mut from {
        items.extend(rewrite_joins(t)?);
    }
    select.from = from;
    Some(items)
}
