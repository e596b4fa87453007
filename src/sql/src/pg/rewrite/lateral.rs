//! Set-returning functions in FROM that read the relation before them, as PostgreSQL reads
//! them (implicitly LATERAL): `FROM t, unnest(t.tags) AS tag`,
//! `FROM t CROSS JOIN LATERAL jsonb_array_elements(t.doc -> 'items') AS item`,
//! `FROM t, jsonb_each(t.attrs) AS a`. DataFusion cannot plan the outer reference in FROM, so
//! the relation and the function become one derived table under the relation's name:
//! `(SELECT t.*, unnest(t.tags) AS tag FROM t) AS t` — the select-list form of the function
//! gives one row per element and drops a row whose list is empty or NULL, as the join does.
//! A function's own qualified columns (`a.key`) read the derived table's (`t.key`).
//!
//! Only an inner (comma, `CROSS JOIN`, `JOIN ... ON true`) join of one table or aliased
//! derived table with such functions is rewritten; other shapes are left to DataFusion.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    ExcludeSelectItem, Expr, FunctionArg, FunctionArgExpr, Ident, JoinConstraint, JoinOperator, ObjectName, Query, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, TableAlias, TableFactor, TableWithJoins, Value, VisitMut, visit_expressions,
};

use super::ast::{base_name, call, own_expressions};

/// A set-returning function of FROM: its select-list columns (name, expression) and alias.
struct SetFunction {
    alias: Option<Ident>,
    columns: Vec<(String, Expr)>,
}

fn args_of(args: &[FunctionArg]) -> Option<Vec<Expr>> {
    args.iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// Does `args` read a column (as opposed to constants only)?
fn reads_columns(args: &[Expr]) -> bool {
    args.iter().any(|a| {
        visit_expressions(a, |e| if matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
            .is_break()
    })
}

/// `t` as a set-returning function, if it is one, and whether it reads columns.
fn set_function(t: &TableFactor) -> Option<(SetFunction, bool)> {
    let (name, args, alias) = match t {
        TableFactor::Table { name, args: Some(args), alias, .. } => (base_name(name), args_of(&args.args)?, alias),
        TableFactor::Function { name, args, alias, .. } => (base_name(name), args_of(args)?, alias),
        TableFactor::UNNEST { array_exprs, alias, with_ordinality, with_offset: false, .. } => {
            (if *with_ordinality { "unnest with ordinality" } else { "unnest" }.to_string(), array_exprs.clone(), alias)
        }
        _ => return None,
    };
    let reads = reads_columns(&args);
    let alias_name = alias.as_ref().map(|a| a.name.clone());
    let listed: Vec<String> = alias.as_ref().map(|a| a.columns.iter().map(|c| c.name.value.clone()).collect()).unwrap_or_default();
    // One column: named as listed, else after the alias, else PostgreSQL's default.
    let single = |default: &str| listed.first().cloned().or_else(|| alias_name.as_ref().map(|a| a.value.clone())).unwrap_or_else(|| default.to_string());
    let columns = match name.as_str() {
        "unnest" if args.len() == 1 => vec![(single("unnest"), call("unnest", args))],
        // The element and its position, 1 up: two lists unnested side by side.
        "unnest with ordinality" if args.len() == 1 => {
            let value = single("unnest");
            let position = listed.get(1).cloned().unwrap_or_else(|| "ordinality".into());
            let length = call("cardinality", args.clone());
            let positions = call("generate_series", vec![Expr::value(Value::Number("1".into(), false)), length]);
            vec![(value, call("unnest", args)), (position, positions)]
        }
        "generate_series" => vec![(single("generate_series"), call("generate_series", args))],
        "regexp_matches" => vec![(single("regexp_matches"), call("regexp_matches", args))],
        "jsonb_array_elements" | "json_array_elements" | "jsonb_array_elements_text" | "json_array_elements_text" => {
            vec![(single("value"), call(&name, args))]
        }
        "jsonb_object_keys" | "json_object_keys" => vec![(single(&name), call(&name, args))],
        "jsonb_each" | "json_each" | "jsonb_each_text" | "json_each_text" => {
            let (keys, values) = if name.ends_with("_text") {
                (crate::pg::jsonb_ops::EACH_KEYS_TEXT, crate::pg::jsonb_ops::VALUES_TEXT)
            } else {
                (crate::pg::jsonb_ops::EACH_KEYS, crate::pg::jsonb_ops::VALUES)
            };
            let key = listed.first().cloned().unwrap_or_else(|| "key".into());
            let value = listed.get(1).cloned().unwrap_or_else(|| "value".into());
            vec![
                (key, call("unnest", vec![call(keys, args.clone())])),
                (value, call("unnest", vec![call(values, args)])),
            ]
        }
        _ => return None,
    };
    Some((SetFunction { alias: alias_name, columns }, reads))
}

/// The list-valued function the rewrite turns `regexp_matches` into (`unnest` of it).
pub(crate) const REGEXP_MATCHES: &str = "eddy_regexp_matches";

/// Table functions (Eddy's, DataFusion's, and those the rewrites turn into lists) that
/// [`scalar_function_in_from`] leaves alone.
const TABLE_FUNCTIONS: &[&str] = &["generate_series", "range", "unnest", "generate_subscripts", "pg_get_keywords", "tumble", "hop", "regexp_matches"];

/// `FROM f(constants) [AS a[(c)]]` with a scalar `f`: PostgreSQL reads it as a one-row table
/// whose one column is named after the column alias, else the table alias, else the function
/// (`SELECT * FROM abs(-3)` is `abs = 3`). Becomes `(SELECT f(..) AS c) AS a`. A function
/// reading columns of the relation before it is left alone.
pub(super) fn scalar_function_in_from(name: &str, args: &[FunctionArg], alias: &Option<TableAlias>) -> Option<TableFactor> {
    if TABLE_FUNCTIONS.contains(&name) || super::json::json_set_function(name).is_some() {
        return None;
    }
    let args = args_of(args)?;
    if reads_columns(&args) {
        return None;
    }
    let table = alias.as_ref().map_or_else(|| Ident::new(name), |a| a.name.clone());
    let column = match alias {
        Some(a) if a.columns.len() > 1 => return None,
        Some(a) => a.columns.first().map_or_else(|| a.name.value.clone(), |c| c.name.value.clone()),
        None => name.to_string(),
    };
    let f = SetFunction { alias: None, columns: vec![(column, call(name, args))] };
    derived(&f, "", "", table)
}

/// The function's name of a FROM item (the default name of its derived table).
fn base_name_of(t: &TableFactor) -> String {
    match t {
        TableFactor::Table { name, .. } | TableFactor::Function { name, .. } => base_name(name),
        _ => "unnest".into(),
    }
}

/// An inner join to a set function: comma, `CROSS JOIN`, or `JOIN ... ON true`.
fn inner(op: &JoinOperator) -> bool {
    match op {
        JoinOperator::CrossJoin(_) => true,
        JoinOperator::Join(JoinConstraint::On(Expr::Value(v))) | JoinOperator::Inner(JoinConstraint::On(Expr::Value(v))) => {
            matches!(v.value, Value::Boolean(true))
        }
        _ => false,
    }
}

/// The name the relation is read by.
fn qualifier(t: &TableFactor) -> Option<Ident> {
    match t {
        TableFactor::Table { alias: Some(a), args: None, .. } | TableFactor::Derived { alias: Some(a), .. } if a.columns.is_empty() => Some(a.name.clone()),
        TableFactor::Table { name, alias: None, args: None, .. } => name.0.last()?.as_ident().cloned(),
        _ => None,
    }
}

/// `(SELECT {before}<f's columns>{from}) AS name`: a derived table giving `f`'s columns (after
/// `before`, the relation's), `None` if the generated SQL does not parse.
fn derived(f: &SetFunction, before: &str, from: &str, name: Ident) -> Option<TableFactor> {
    let items: Vec<String> = f.columns.iter().map(|(column, e)| format!("{e} AS {}", Ident::with_quote('"', column))).collect();
    let inner = super::ast::parse_query(&format!("SELECT {before}{}{from}", items.join(", ")))?;
    Some(TableFactor::Derived {
        lateral: false,
        subquery: Box::new(inner),
        alias: Some(TableAlias { explicit: true, name, columns: vec![], at: None }),
        sample: None,
    })
}

/// The rewrite of the module docs on `q`'s own SELECT.
pub(super) fn lateral_set_functions(q: &mut Query) {
    let SetExpr::Select(select) = q.body.as_mut() else { return };
    // The FROM as one sequence: the relation, then the functions joined to it.
    let [first, rest @ ..] = select.from.as_slice() else { return };
    let mut factors: Vec<&TableFactor> = Vec::new();
    for j in &first.joins {
        if !inner(&j.join_operator) {
            return;
        }
        factors.push(&j.relation);
    }
    for t in rest {
        if t.joins.iter().any(|j| !inner(&j.join_operator)) {
            return;
        }
        factors.push(&t.relation);
        factors.extend(t.joins.iter().map(|j| &j.relation));
    }
    // `FROM jsonb_each(constant)` (or `unnest(..) WITH ORDINALITY`) alone: its columns from
    // a select without FROM.
    if factors.is_empty() {
        let Some((f, _)) = set_function(&first.relation).filter(|(f, _)| f.columns.len() > 1) else { return };
        let name = f.alias.clone().unwrap_or_else(|| Ident::new(base_name_of(&first.relation)));
        if let Some(derived) = derived(&f, "", "", name) {
            select.from[0].relation = derived;
        }
        return;
    }
    let Some(q_name) = qualifier(&first.relation) else { return };
    let functions: Option<Vec<(SetFunction, bool)>> = factors.iter().map(|f| set_function(f)).collect();
    // At least one reads the relation (constant ones are joined as they are otherwise).
    let Some(functions) = functions.filter(|f| f.iter().any(|(_, reads)| *reads)) else { return };
    let functions: Vec<SetFunction> = functions.into_iter().map(|(f, _)| f).collect();
    // Each function wraps what comes before it: one level per function, so two functions give
    // their cross product, as two joins do.
    let mut relation = first.relation.clone();
    for f in &functions {
        let Some(wrapped) = derived(f, &format!("{q_name}.*, "), &format!(" FROM {relation}"), q_name.clone()) else { return };
        relation = wrapped;
    }
    select.from = vec![TableWithJoins { relation, joins: vec![] }];
    // `t.*` lists the relation's own columns, not the functions'.
    let added: Vec<ObjectName> = functions.iter().flat_map(|f| f.columns.iter().map(|(n, _)| ObjectName::from(vec![Ident::with_quote('"', n)]))).collect();
    for item in &mut select.projection {
        if let SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(n), options) = item {
            if n.0.len() == 1 && n.0[0].as_ident().is_some_and(|i| i.value == q_name.value) && options.opt_exclude.is_none() {
                options.opt_exclude = Some(ExcludeSelectItem::Multiple(added.clone()));
            }
        }
    }
    // A function's qualified columns are the derived table's now; a one-column function's
    // `alias.anything` is its value (`e.value` of `jsonb_array_elements(..) e`).
    let requalify = |e: &mut Expr| {
        if let Expr::CompoundIdentifier(parts) = e {
            if let (2, Some(f)) = (parts.len(), functions.iter().find(|f| f.alias.as_ref().is_some_and(|a| a.value == parts[0].value))) {
                *e = match f.columns.as_slice() {
                    [(name, _)] => Expr::Identifier(Ident::with_quote('"', name)),
                    _ => Expr::CompoundIdentifier(vec![q_name.clone(), parts[1].clone()]),
                };
            }
        }
        ControlFlow::Continue(())
    };
    let mut visitor = own_expressions(requalify);
    let _ = q.body.visit(&mut visitor);
    if let Some(order_by) = q.order_by.as_mut() {
        let _ = order_by.visit(&mut visitor);
    }
}
