//! The `SET` forms of PostgreSQL's UPDATE that DataFusion's planner lacks, written as the ones
//! it has: `SET (a, b) = (x, y)` as `SET a = x, b = y` (a sub-SELECT of two columns as two
//! scalar subqueries), and `SET a = DEFAULT` as the column's default expression (NULL without
//! one). Two assignments to one column are an error, as in PostgreSQL.

use datafusion::sql::sqlparser::ast::{Assignment, AssignmentTarget, Expr, Statement, TableFactor};
use datafusion::sql::sqlparser::parser::Parser;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

use crate::frontend::session::Session;

fn is_default(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

impl Session {
    /// Rewrites `stmt`'s assignments if it is an UPDATE (see the module docs).
    pub(crate) fn update_assignments(&self, stmt: &mut Statement) -> Result<()> {
        let Statement::Update(u) = stmt else { return Ok(()) };
        let mut assignments = Vec::with_capacity(u.assignments.len());
        for a in std::mem::take(&mut u.assignments) {
            let AssignmentTarget::Tuple(names) = &a.target else {
                assignments.push(a);
                continue;
            };
            let values = match &a.value {
                Expr::Tuple(values) => values.clone(),
                Expr::Nested(one) => vec![one.as_ref().clone()],
                // `(SELECT x, y FROM ...)`: a scalar subquery per column.
                Expr::Subquery(q) => match q.body.as_ref() {
                    datafusion::sql::sqlparser::ast::SetExpr::Select(s) if s.projection.len() == names.len() && q.order_by.is_none() => s
                        .projection
                        .iter()
                        .map(|item| {
                            let mut one = q.clone();
                            if let datafusion::sql::sqlparser::ast::SetExpr::Select(s) = one.body.as_mut() {
                                s.projection = vec![item.clone()];
                            }
                            Expr::Subquery(one)
                        })
                        .collect(),
                    _ => return Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "UPDATE ... SET (columns) = (subquery) is supported for a plain SELECT of as many columns")),
                },
                _ => return Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "UPDATE ... SET (columns) = (subquery) is not supported yet")),
            };
            if values.len() != names.len() {
                return Err(user_err!(sqlstate::SYNTAX_ERROR, "number of columns does not match number of values"));
            }
            for (name, value) in names.iter().zip(values) {
                assignments.push(Assignment { target: AssignmentTarget::ColumnName(name.clone()), value });
            }
        }
        u.assignments = assignments;
        let mut seen = std::collections::HashSet::new();
        for a in &u.assignments {
            if let AssignmentTarget::ColumnName(c) = &a.target {
                let name = c.0.last().map(|p| p.to_string()).unwrap_or_default();
                let key = if name.starts_with('"') { name.trim_matches('"').to_string() } else { name.to_ascii_lowercase() };
                if !seen.insert(key.clone()) {
                    return Err(user_err!(sqlstate::SYNTAX_ERROR, "multiple assignments to same column \"{key}\""));
                }
            }
        }
        if !u.assignments.iter().any(|a| is_default(&a.value)) {
            return Ok(());
        }
        let TableFactor::Table { name, .. } = &u.table.relation else { return Ok(()) };
        let (schema, rel) = crate::frontend::names::resolve_name(self, name)?;
        let Some(table) = self.engine.catalog().table(&schema, &rel).cloned() else { return Ok(()) };
        for a in u.assignments.iter_mut().filter(|a| is_default(&a.value)) {
            let AssignmentTarget::ColumnName(column) = &a.target else { continue };
            let column = column.0.last().map(|p| p.to_string().trim_matches('"').to_string()).unwrap_or_default();
            let Some(c) = table.columns.iter().find(|c| c.name.eq_ignore_ascii_case(&column)) else { continue };
            a.value = match &c.default {
                None => Expr::value(datafusion::sql::sqlparser::ast::Value::Null),
                Some(text) => Parser::new(&crate::planner::parse::EddyDialect::default())
                    .try_with_sql(text)
                    .and_then(|mut p| p.parse_expr())
                    .map_err(|e| user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "the default of column \"{}\" cannot be used in UPDATE: {e}", c.name))?,
            };
        }
        Ok(())
    }
}
