//! PostgreSQL's output column names (`FigureColname`): `SELECT count(*)` is named `count`,
//! `SELECT 'a'::text` is `text`, `SELECT 1` is `?column?`. DataFusion names columns after the
//! whole expression and rejects two unnamed items with the same name (`SELECT NULL, NULL`), so
//! each unaliased non-column item gets PostgreSQL's name as an explicit alias, made unique
//! with a `_N` suffix where PostgreSQL would repeat it.

use std::collections::HashSet;

use datafusion::sql::sqlparser::ast::{DataType as SqlType, Expr, FunctionArguments, Ident, Select, SelectItem};

/// PostgreSQL's name for an unaliased select item, and whether it is only the `?column?` fallback.
fn figure(e: &Expr) -> Option<String> {
    Some(match e {
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
        Expr::Substring { .. } => "substring".into(),
        Expr::Position { .. } => "position".into(),
        Expr::Extract { .. } => "extract".into(),
        Expr::Ceil { .. } => "ceil".into(),
        Expr::Floor { .. } => "floor".into(),
        Expr::CompoundFieldAccess { access_chain, .. } => match access_chain.last()? {
            datafusion::sql::sqlparser::ast::AccessExpr::Dot(Expr::Identifier(i)) => i.value.clone(),
            _ => return None,
        },
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
    let s = s.rsplit('.').next().unwrap_or(&s).to_string();
    match s.as_str() {
        "int" | "integer" => "int4".into(),
        "bigint" => "int8".into(),
        "smallint" => "int2".into(),
        "boolean" => "bool".into(),
        "double precision" => "float8".into(),
        "real" => "float4".into(),
        other => other.split('(').next().unwrap_or(other).trim().to_string(),
    }
}

/// Gives every unaliased, non-column select item of `select` its PostgreSQL name.
pub fn assign(select: &mut Select) {
    let mut used: HashSet<String> = HashSet::new();
    for item in &select.projection {
        match item {
            SelectItem::ExprWithAlias { alias, .. } => {
                used.insert(alias.value.clone());
            }
            SelectItem::UnnamedExpr(Expr::Identifier(i)) => {
                used.insert(i.value.to_ascii_lowercase());
            }
            _ => {}
        }
    }
    for item in select.projection.iter_mut() {
        let SelectItem::UnnamedExpr(e) = item else { continue };
        if matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
            continue;
        }
        // A name taken from a column (`c.oid::regclass` is `oid`) could clash with that column
        // when DataFusion adds it for ORDER BY; those keep DataFusion's name.
        if matches!(e, Expr::Cast { .. } | Expr::Nested(_) | Expr::CompoundFieldAccess { .. }) && names_a_column(e) {
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
