//! PostgreSQL's output column names (`FigureColname`): `SELECT count(*)` is named `count`,
//! `SELECT 'a'::text` is `text`, `SELECT 1` is `?column?`. DataFusion names columns after the
//! whole expression and rejects two unnamed items with the same name (`SELECT NULL, NULL`), so
//! each unaliased non-column item gets PostgreSQL's name as an explicit alias, made unique
//! with a `_N` suffix where PostgreSQL would repeat it.

use std::collections::HashSet;

use crate::planner::names::DUPLICATE_MARK;

use datafusion::sql::sqlparser::ast::{DataType as SqlType, Expr, FunctionArguments, Ident, Select, SelectItem};

/// Reserved words that PostgreSQL reads as value functions where a column could stand
/// (`pg::rewrite` turns them into calls).
const VALUE_FUNCTIONS: [&str; 5] = ["current_role", "current_catalog", "current_schema", "localtime", "localtimestamp"];

/// Whether an identifier is one of [`VALUE_FUNCTIONS`] (so it names no column).
pub fn is_value_function(i: &Ident) -> bool {
    i.quote_style.is_none() && VALUE_FUNCTIONS.iter().any(|f| i.value.eq_ignore_ascii_case(f))
}

/// PostgreSQL's name for an unaliased select item, and whether it is only the `?column?` fallback.
fn figure(e: &Expr) -> Option<String> {
    Some(match e {
        Expr::Identifier(i) if is_value_function(i) => i.value.to_ascii_lowercase(),
        Expr::Identifier(i) => i.value.clone(),
        Expr::CompoundIdentifier(parts) => parts.last()?.value.clone(),
        Expr::Function(f) => {
            if matches!(&f.args, FunctionArguments::Subquery(_)) {
                "array".into()
            } else {
                f.name.0.last()?.to_string().trim_matches('"').to_ascii_lowercase()
            }
        }
        Expr::Cast { expr, data_type, .. } => match figure(expr) {
            Some(n) => n,
            None => type_name(data_type),
        },
        Expr::Nested(inner) => return figure(inner),
        Expr::TypedString(ts) => type_name(&ts.data_type),
        Expr::Interval(_) => "interval".into(),
        Expr::AtTimeZone { .. } => "timezone".into(),
        Expr::Case { .. } => "case".into(),
        Expr::Array(_) => "array".into(),
        Expr::Exists { .. } => "exists".into(),
        Expr::Subquery(q) => match q.body.as_ref() {
            datafusion::sql::sqlparser::ast::SetExpr::Select(s) => match s.projection.first()? {
                SelectItem::UnnamedExpr(e) => return figure(e),
                SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                _ => return None,
            },
            _ => return None,
        },
        Expr::Trim { .. } => "btrim".into(),
        Expr::Substring { shorthand: true, .. } => "substr".into(),
        Expr::Substring { .. } => "substring".into(),
        Expr::Overlay { .. } => "overlay".into(),
        Expr::Position { .. } => "position".into(),
        Expr::Extract { .. } => "extract".into(),
        Expr::Ceil { .. } => "ceil".into(),
        Expr::Floor { .. } => "floor".into(),
        // The last field name of the chain (`(r).f`); subscripts keep the name of what they
        // index (`a[1]` is `a`), as PostgreSQL's `FigureColname` does.
        Expr::CompoundFieldAccess { root, access_chain } => {
            match access_chain.iter().rev().find(|a| matches!(a, datafusion::sql::sqlparser::ast::AccessExpr::Dot(_))) {
                Some(datafusion::sql::sqlparser::ast::AccessExpr::Dot(Expr::Identifier(i))) => i.value.clone(),
                Some(_) => return None,
                None => return figure(root),
            }
        }

        _ => return None,
    })
}

fn names_a_column(e: &Expr) -> bool {
    match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => true,
        Expr::Cast { expr, .. } => names_a_column(expr),
        Expr::Nested(inner) => names_a_column(inner),
        Expr::CompoundFieldAccess { .. } => true,
        _ => false,
    }
}

fn type_name(t: &SqlType) -> String {
    let s = t.to_string().to_ascii_lowercase();
    // A precision inside the name (`timestamp(3) with time zone`) does not change it.
    let s = match (s.find('('), s.find(')')) {
        (Some(open), Some(close)) if open < close && s.starts_with("time") => format!("{}{}", &s[..open], &s[close + 1..]),
        _ => s,
    };
    let s = s.rsplit('.').next().unwrap_or(&s).to_string();
    match s.as_str() {
        "int" | "integer" => "int4".into(),
        "bigint" => "int8".into(),
        "smallint" => "int2".into(),
        "boolean" => "bool".into(),
        "double precision" => "float8".into(),
        "real" => "float4".into(),
        other => match other.split('(').next().unwrap_or(other).trim() {
            "character varying" => "varchar".into(),
            "character" => "bpchar".into(),
            "timestamp with time zone" => "timestamptz".into(),
            "timestamp without time zone" | "timestamp" => "timestamp".into(),
            base => base.to_string(),
        },
    }
}



/// The output name of a select item as DataFusion derives it (unquoted identifiers fold to
/// lower case), or `None` for wildcards.
fn planned_name(item: &SelectItem) -> Option<String> {
    let ident = |i: &Ident| if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() };
    match item {
        SelectItem::ExprWithAlias { alias, .. } => Some(ident(alias)),
        SelectItem::UnnamedExpr(Expr::Identifier(i)) if !is_value_function(i) => Some(ident(i)),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts.last().map(ident),
        _ => None,
    }
}

/// Gives every unaliased, non-column select item of `select` its PostgreSQL name. In the
/// statement's outermost SELECT (`top`), whose names only clients see, repeated names get a
/// marked unique one; inside (derived tables, CTEs, subqueries), where other clauses refer to
/// the names, column-like items keep their column's name and repeats get a `_N` suffix.
pub fn assign(select: &mut Select, top: bool) {
    if !top {
        assign_inner(select);
        return;
    }
    let mut used: HashSet<String> = HashSet::new();
    // A wildcard's columns are unknown here: plain columns beside one are marked so they
    // cannot clash with it (`SELECT *, a FROM t`).
    let wildcard = select.projection.iter().any(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)));
    for item in select.projection.iter_mut() {
        if let SelectItem::UnnamedExpr(e) = item {
            let is_column = match e {
                Expr::Identifier(i) => !is_value_function(i),
                Expr::CompoundIdentifier(_) => true,
                _ => false,
            };
            // A name taken from a column (`c.oid::regclass` is `oid`) could clash with that
            // column when DataFusion adds it for ORDER BY; those keep DataFusion's name.
            let column_like = (wildcard && is_column)
                || (matches!(e, Expr::Cast { .. } | Expr::Nested(_) | Expr::CompoundFieldAccess { .. }) && names_a_column(e));
            if column_like {
                // Named after the column but marked, so it cannot clash with the column itself
                // when DataFusion adds that for ORDER BY (`SELECT c.oid::regclass ... ORDER BY c.oid`).
                let name = figure(e).map(|n| n.to_lowercase()).unwrap_or_else(|| "?column?".to_string());
                let mut n = 1;
                while used.contains(&format!("{name}{DUPLICATE_MARK}{n}")) {
                    n += 1;
                }
                let unique = format!("{name}{DUPLICATE_MARK}{n}");
                used.insert(unique.clone());
                *item = SelectItem::ExprWithAlias { expr: e.clone(), alias: Ident::with_quote('"', unique) };
                continue;
            }
            if !is_column {
                let name = figure(e).unwrap_or_else(|| "?column?".to_string());
                *item = SelectItem::ExprWithAlias { expr: e.clone(), alias: Ident::with_quote('"', name) };
            }
        }
        let Some(name) = planned_name(item) else { continue };
        if used.insert(name.clone()) {
            continue;
        }
        let mut n = 2;
        while used.contains(&format!("{name}{DUPLICATE_MARK}{n}")) {
            n += 1;
        }
        let unique = format!("{name}{DUPLICATE_MARK}{n}");
        used.insert(unique.clone());
        let expr = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
            _ => continue,
        };
        *item = SelectItem::ExprWithAlias { expr, alias: Ident::with_quote('"', unique) };
    }
}

fn assign_inner(select: &mut Select) {
    let mut used: HashSet<String> = select.projection.iter().filter_map(planned_name).collect();
    for item in select.projection.iter_mut() {
        let SelectItem::UnnamedExpr(e) = item else { continue };
        match e {
            Expr::Identifier(i) if !is_value_function(i) => continue,
            Expr::CompoundIdentifier(_) => continue,
            _ => {}
        }
        // `x::text` is named `x` (DataFusion would say `t.x`), unless that name is taken.
        if matches!(e, Expr::Cast { .. } | Expr::Nested(_) | Expr::CompoundFieldAccess { .. }) && names_a_column(e) {
            if let Some(name) = figure(e).map(|n| n.to_lowercase()).filter(|n| !used.contains(n)) {
                used.insert(name.clone());
                *item = SelectItem::ExprWithAlias { expr: e.clone(), alias: Ident::with_quote('"', name) };
            }
            continue;
        }
        let base = figure(e).unwrap_or_else(|| "?column?".to_string());
        let mut name = base.clone();
        let mut n = 1;
        while used.contains(&name) {
            n += 1;
            name = format!("{base}_{n}");
        }
        used.insert(name.clone());
        *item = SelectItem::ExprWithAlias { expr: e.clone(), alias: Ident::with_quote('"', name) };
    }
}
