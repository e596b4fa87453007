//! Planning support for queries: correlated subqueries DataFusion cannot decorrelate,
//! evaluated once per outer value (see [`crate::pg::apply`]).


use arrow::array::StringArray;
use arrow::datatypes::{DataType, Field};
use datafusion::sql::sqlparser::ast::Query;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::frontend::session::Session;


impl Session {
    /// `q` with the correlated subqueries DataFusion cannot decorrelate evaluated per outer
    /// value (see [`crate::pg::apply`]); `None` when there are none or one cannot be evaluated
    /// (planning then reports why).
    pub(crate) async fn apply_correlated(&self, q: &Query) -> Option<Query> {
        use crate::pg::apply;
        if !apply::may_have_site(q) {
            return None;
        }
        let mut q = q.clone();
        let mut changed = false;
        for _ in 0..16 {
            let Some(site) = apply::find_site(&mut q) else { break };
            let (key_schema, keys) = logged(self.run_query(&site.keys_query).await, "the outer keys")?;
            if keys.iter().map(|b| b.num_rows()).sum::<usize>() > apply::MAX_KEYS {
                return None;
            }
            let mut types: Vec<String> = key_schema.fields().iter().map(|f| sql_type_name(f)).collect::<Option<_>>()?;
            let mut rows = Vec::new();
            let mut value_type: Option<String> = None;
            for batch in &keys {
                for r in 0..batch.num_rows() {
                    let literals = (0..batch.num_columns()).map(|c| sql_literal(batch.column(c), r)).collect::<Option<Vec<String>>>()?;
                    let exprs = literals.iter().zip(&types).map(|(l, t)| parse_sql_expr(&format!("CAST({l} AS {t})"))).collect::<Option<Vec<_>>>()?;
                    let one = apply::substitute(&site.subquery, &site.keys, &exprs);
                    let (schema, out) = logged(self.run_query(&apply::value_query(&one)).await, "a subquery value")?;
                    let batch_out = out.iter().find(|b| b.num_rows() > 0);
                    value_type.get_or_insert(sql_type_name(schema.field(0))?);
                    let value = match batch_out {
                        Some(b) => sql_literal(b.column(0), 0)?,
                        None => "NULL".to_string(),
                    };
                    rows.push(literals.into_iter().chain([value]).collect::<Vec<_>>());
                }
            }
            let value_type = match value_type {
                Some(t) => t,
                None => {
                    // No outer row reaches the subquery: plan it once for its type.
                    let nulls = types.iter().map(|t| parse_sql_expr(&format!("CAST(NULL AS {t})"))).collect::<Option<Vec<_>>>()?;
                    let one = apply::substitute(&site.subquery, &site.keys, &nulls);
                    // Generated from a query that parsed; if it does not, planning the original reports why.
                    let stmt = Parser::parse_sql(&PostgreSqlDialect {}, &apply::value_query(&one)).ok()?.pop()?;
                    let (_, plan) = logged(Box::pin(self.plan(&stmt, false)).await, "the subquery's type")?;
                    sql_type_name(plan.schema().field(0))?
                }
            };
            types.push(value_type);
            let replacement = apply::lookup(&site.subquery, &site.keys, &rows, &types)?;
            apply::fill_slot(&mut q, replacement);
            changed = true;
        }
        changed.then_some(q)
    }
}

/// `r`'s value, or `None` after logging why `apply_correlated` gives up on computing `what`:
/// planning the original query then reports its own error, which need not be this one.
fn logged<T>(r: eddy_common::Result<T>, what: &str) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) if e.kind == eddy_common::ErrorKind::User => {
            tracing::debug!("correlated subquery not evaluated: computing {what} failed: {e}");
            None
        }
        Err(e) => {
            tracing::warn!("correlated subquery not evaluated: computing {what} failed: {e}");
            None
        }
    }
}

/// The SQL type name of a column (`None` for types without one, e.g. arrays).
pub(crate) fn sql_type_name(f: &Field) -> Option<String> {
    if f.data_type() == &DataType::UInt32 {
        return Some("oid".to_string());
    }
    eddy_common::types::ColumnType::from_arrow_field(f).map(|t| t.pg_name())
}

/// Value `row` of `col` as a quoted SQL text literal (`NULL` when null).
pub(crate) fn sql_literal(col: &arrow::array::ArrayRef, row: usize) -> Option<String> {
    if col.is_null(row) {
        return Some("NULL".to_string());
    }
    let text = arrow::compute::cast(&col.slice(row, 1), &DataType::Utf8).ok()?;
    let text = text.as_any().downcast_ref::<StringArray>()?.value(0).to_string();
    Some(format!("'{}'", text.replace('\'', "''")))
}

pub(crate) fn parse_sql_expr(sql: &str) -> Option<datafusion::sql::sqlparser::ast::Expr> {
    let mut parser = Parser::new(&PostgreSqlDialect {}).try_with_sql(sql).ok()?;
    parser.parse_expr().ok()
}
