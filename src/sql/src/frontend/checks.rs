//! `CHECK` constraints of tables, as PostgreSQL has them: declared on a column or on the table,
//! named `t_col_check` (one column read) or `t_check` (several) unless named, numbered when
//! a name repeats; every inserted or updated row (INSERT, UPDATE, COPY, upserts) must make the
//! expression true or NULL, else the statement fails with 23514 and writes nothing.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Field, Schema};
use datafusion::common::DFSchema;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::sql::sqlparser::ast::{visit_expressions, ColumnOption, CreateTable, Expr as SqlExpr, TableConstraint};
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

use crate::catalog::{CheckDef, TableCatalog};
use crate::frontend::session::Session;
use crate::frontend::statement::ident_name;

/// The columns `e` reads, lower-cased, in order of first appearance.
fn columns_read(e: &SqlExpr) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let _ = visit_expressions(e, |x| {
        let name = match x {
            SqlExpr::Identifier(i) => Some(ident_name(i)),
            SqlExpr::CompoundIdentifier(parts) => parts.last().map(ident_name),
            _ => None,
        };
        if let Some(n) = name.filter(|n| !out.contains(n)) {
            out.push(n);
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// The CHECK constraints `ct` declares for table `table`, named as PostgreSQL names them.
pub(crate) fn definitions(ct: &CreateTable, table: &str) -> Vec<CheckDef> {
    let mut found: Vec<(Option<String>, &SqlExpr, Option<String>)> = Vec::new();
    for col in &ct.columns {
        for opt in &col.options {
            if let ColumnOption::Check(c) = &opt.option {
                let given = opt.name.as_ref().or(c.name.as_ref()).map(ident_name);
                found.push((given, &c.expr, Some(ident_name(&col.name))));
            }
        }
    }
    for c in &ct.constraints {
        if let TableConstraint::Check(c) = c {
            let read = columns_read(&c.expr);
            let column = (read.len() == 1).then(|| read[0].clone());
            found.push((c.name.as_ref().map(ident_name), &c.expr, column));
        }
    }
    let mut used: HashSet<String> = found.iter().filter_map(|(given, ..)| given.clone()).collect();
    found
        .into_iter()
        .map(|(given, expr, column)| {
            let name = given.unwrap_or_else(|| {
                let base = match column {
                    Some(c) => format!("{table}_{c}_check"),
                    None => format!("{table}_check"),
                };
                let name = (0..).map(|i| if i == 0 { base.clone() } else { format!("{base}{i}") }).find(|n| !used.contains(n)).unwrap_or(base);
                used.insert(name.clone());
                name
            });
            CheckDef { name, expr: expr.to_string() }
        })
        .collect()
}

/// A table's rows schema and its checks, each with its name, planned over that schema.
type PlannedChecks<'t> = (Arc<Schema>, Vec<(&'t str, Arc<dyn PhysicalExpr>)>);

impl Session {
    /// The table's rows schema (every column, as stored rows carry them) and its checks planned
    /// over it.
    fn planned_checks<'t>(&self, table: &'t TableCatalog) -> Result<PlannedChecks<'t>> {
        let fields: Vec<Field> = table.columns.iter().map(|c| c.ty.to_field(&c.name, true)).collect();
        let schema = Arc::new(Schema::new(fields));
        let df = DFSchema::try_from(schema.as_ref().clone())?;
        let mut out = Vec::with_capacity(table.checks.len());
        for c in &table.checks {
            let planned = self.ctx.parse_sql_expr(&c.expr, &df).and_then(|e| self.ctx.create_physical_expr(e, &df)).map_err(|e| {
                let e = eddy_common::EddyError::from(e);
                user_err!(e.sqlstate, "check constraint \"{}\" of table \"{}\": {}", c.name, table.name, e.message)
            })?;
            out.push((c.name.as_str(), planned));
        }
        Ok((schema, out))
    }

    /// Refuses a table whose checks do not plan (an unknown column or function).
    pub(crate) fn plan_checks(&self, table: &TableCatalog) -> Result<()> {
        self.planned_checks(table).map(|_| ())
    }

    /// Fails with 23514 when a row of `rows` (the table's columns, in order) makes a check
    /// false.
    pub(crate) fn enforce_checks(&self, table: &TableCatalog, rows: &RecordBatch) -> Result<()> {
        if table.checks.is_empty() || rows.num_rows() == 0 {
            return Ok(());
        }
        let (schema, checks) = self.planned_checks(table)?;
        let batch = RecordBatch::try_new(schema, rows.columns()[..table.columns.len()].to_vec())?;
        for (name, expr) in checks {
            let result = expr.evaluate(&batch)?.into_array(batch.num_rows())?;
            let result = arrow::compute::cast(&result, &arrow::datatypes::DataType::Boolean)?;
            let result = result.as_boolean();
            if (0..result.len()).any(|i| result.is_valid(i) && !result.value(i)) {
                return Err(user_err!(
                    sqlstate::CHECK_VIOLATION,
                    "new row for relation \"{}\" violates check constraint \"{name}\"",
                    table.name
                ));
            }
        }
        Ok(())
    }
}
