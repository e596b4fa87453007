//! `VALUES` rows holding subqueries (`VALUES ((SELECT 42))`, `INSERT INTO t VALUES ((SELECT
//! max(a) FROM u), 1)`) are written as `SELECT ... UNION ALL SELECT ...`: DataFusion plans
//! a subquery in a select list, not in a VALUES row, where it failed with XX000 ("evaluated
//! before the subquery was executed"). The columns keep VALUES' names (`column1`, ...).
//!
//! A VALUES column whose rows give a type (`'2024-01-01'::date`, `DATE '...'`) gives it to
//! the rows' untyped string literals, as PostgreSQL resolves a VALUES column's type from all
//! of its rows (DataFusion refused the mix: "Inconsistent data type across values list").
//! Not for an INSERT's own VALUES, whose rows take the target's column types.
//!
//! `TABLE name`, PostgreSQL's short form of `SELECT * FROM name`, is written out here too
//! (DataFusion does not plan it).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{visit_expressions, CastKind, DataType, Expr, Ident, Query, SelectItem, SetExpr, SetOperator, SetQuantifier, Value};

/// Rewrites the VALUES of `q`'s body (also under set operations) that hold subqueries.
pub(super) fn values_with_subqueries(q: &mut Query) {
    rewrite_set(&mut q.body);
}

/// Casts the untyped string literals of each VALUES column to the type another row gives it
/// (see the module docs); `skip` for an INSERT's own VALUES.
pub(super) fn literal_types(q: &mut Query, skip: bool) {
    let SetExpr::Values(v) = q.body.as_mut() else { return };
    if skip || v.rows.len() < 2 {
        return;
    }
    let width = v.rows[0].content.len();
    for c in 0..width {
        let typed = v.rows.iter().find_map(|r| match r.content.get(c) {
            Some(Expr::Cast { data_type, .. } | Expr::TypedString(datafusion::sql::sqlparser::ast::TypedString { data_type, .. })) => Some(data_type.clone()),
            Some(Expr::Interval(_)) => datafusion::sql::sqlparser::parser::Parser::new(&datafusion::sql::sqlparser::dialect::PostgreSqlDialect {})
                .try_with_sql("interval")
                .and_then(|mut p| p.parse_data_type())
                .ok(),
            Some(Expr::Value(x)) if matches!(x.value, Value::Boolean(_)) => Some(DataType::Boolean),
            _ => None,
        });
        let Some(data_type) = typed else { continue };
        if matches!(data_type, DataType::Text | DataType::Varchar(_) | DataType::Char(_) | DataType::String(_)) {
            continue;
        }
        for row in &mut v.rows {
            if let Some(e @ Expr::Value(_)) = row.content.get_mut(c) {
                if matches!(e, Expr::Value(x) if matches!(x.value, Value::SingleQuotedString(_))) {
                    *e = Expr::Cast { kind: CastKind::DoubleColon, expr: Box::new(e.clone()), data_type: data_type.clone(), format: None, array: false };
                }
            }
        }
    }
}

/// Writes each `TABLE name` of `q`'s body (also under set operations) as `SELECT * FROM name`.
/// sqlparser keeps the name's text, not its quoting: it is taken as written unquoted.
pub(super) fn table_commands(q: &mut Query) {
    fn rewrite(body: &mut SetExpr) {
        match body {
            SetExpr::SetOperation { left, right, .. } => {
                rewrite(left);
                rewrite(right);
            }
            SetExpr::Table(t) => {
                let Some(name) = &t.table_name else { return };
                let from = match &t.schema_name {
                    Some(schema) => format!("{}.{}", Ident::new(schema), Ident::new(name)),
                    None => Ident::new(name).to_string(),
                };
                if let Some(q) = super::ast::parse_query(&format!("SELECT * FROM {from}")) {
                    *body = *q.body;
                }
            }
            _ => {}
        }
    }
    rewrite(&mut q.body);
}

fn rewrite_set(body: &mut SetExpr) {
    match body {
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_set(left);
            rewrite_set(right);
        }
        SetExpr::Values(v) if v.rows.iter().flat_map(|r| r.content.iter()).any(has_subquery) => {
            let selects: Option<Vec<SetExpr>> = v
                .rows
                .iter()
                .map(|row| select(row.content.iter().enumerate().map(|(i, e)| SelectItem::ExprWithAlias { expr: e.clone(), alias: Ident::new(format!("column{}", i + 1)) }).collect()))
                .collect();
            let Some(mut selects) = selects.map(Vec::into_iter) else { return };
            let Some(first) = selects.next() else { return };
            *body = selects.fold(first, |left, right| SetExpr::SetOperation {
                op: SetOperator::Union,
                set_quantifier: SetQuantifier::All,
                left: Box::new(left),
                right: Box::new(right),
            });
        }
        _ => {}
    }
}

fn has_subquery(e: &Expr) -> bool {
    visit_expressions(e, |e| match e {
        Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// `SELECT projection` without FROM.
fn select(projection: Vec<SelectItem>) -> Option<SetExpr> {
    let mut q = super::ast::parse_query("SELECT 1")?;
    let SetExpr::Select(s) = q.body.as_mut() else { return None };
    s.projection = projection;
    Some(*q.body)
}
