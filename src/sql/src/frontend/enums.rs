//! `CREATE TYPE name AS ENUM (...)`, `DROP TYPE`, and casts to enum types (rewritten into
//! calls of [`crate::planner::enums::enum_value_udf`]).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{visit_expressions_mut, DataType as SqlType, Expr, Ident, ObjectName, Statement, Value};
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};
use eddy_storage::EpochBatch;

use crate::catalog::{CatalogChange, TypeCatalog};
use crate::frontend::names::resolve_name;
use crate::frontend::session::Session;

fn literal_text(s: &str) -> Expr {
    Expr::value(Value::SingleQuotedString(s.to_string()))
}

impl Session {
    /// Casts to enum types in `stmt` become `eddy_enum_value(...)` calls.
    pub(crate) fn rewrite_enum_casts(&self, stmt: &mut Statement) {
        let cat = self.engine.catalog();
        if cat.enum_types().next().is_none() {
            return;
        }
        let _ = visit_expressions_mut(stmt, |e| {
            let Expr::Cast { expr, data_type: SqlType::Custom(name, mods), .. } = e else { return ControlFlow::<()>::Continue(()) };
            if !mods.is_empty() {
                return ControlFlow::Continue(());
            }
            let Ok((schema, type_name)) = resolve_name(self, name) else { return ControlFlow::Continue(()) };
            let Some(t) = cat.enum_type(&schema, &type_name) else { return ControlFlow::Continue(()) };
            let labels = Expr::Function(datafusion::sql::sqlparser::ast::Function {
                name: ObjectName::from(vec![Ident::new("make_array")]),
                uses_odbc_syntax: false,
                parameters: datafusion::sql::sqlparser::ast::FunctionArguments::None,
                args: datafusion::sql::sqlparser::ast::FunctionArguments::List(datafusion::sql::sqlparser::ast::FunctionArgumentList {
                    duplicate_treatment: None,
                    args: t
                        .labels
                        .iter()
                        .map(|l| datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(literal_text(l))))
                        .collect(),
                    clauses: vec![],
                }),
                filter: None,
                null_treatment: None,
                over: None,
                within_group: vec![],
            });
            let call = crate::pg::rewrite::call(
                "eddy_enum_value",
                vec![Expr::value(Value::Number(t.oid().to_string(), false)), literal_text(&t.name), labels, expr.as_ref().clone()],
            );
            *e = call;
            ControlFlow::Continue(())
        });
    }

    /// `CREATE TYPE name AS ENUM (...)`.
    pub(crate) async fn create_enum(&mut self, name: &ObjectName, labels: &[Ident]) -> Result<()> {
        let (schema, type_name) = resolve_name(self, name)?;
        self.engine.catalog().require_schema(&schema)?;
        let labels: Vec<String> = labels.iter().map(|l| l.value.clone()).collect();
        if let Some(dup) = labels.iter().enumerate().find(|(i, l)| labels[..*i].contains(l)).map(|(_, l)| l) {
            return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "enum label \"{dup}\" used more than once"));
        }
        if crate::pg::types::type_oid_by_name(&type_name).is_some() {
            return Err(user_err!(sqlstate::DUPLICATE_OBJECT, "type \"{type_name}\" already exists"));
        }
        self.engine
            .ddl(|cat| {
                if cat.enum_type(&schema, &type_name).is_some() {
                    return Err(user_err!(sqlstate::DUPLICATE_OBJECT, "type \"{type_name}\" already exists"));
                }
                let t = TypeCatalog { id: cat.allocate_id(), schema: schema.clone(), name: type_name.clone(), labels: labels.clone() };
                Ok((vec![CatalogChange::CreateType(t)], EpochBatch::default()))
            })
            .await
    }

    /// `DROP TYPE [IF EXISTS] name, ...`.
    pub(crate) async fn drop_enums(&mut self, names: &[ObjectName], if_exists: bool) -> Result<()> {
        for n in names {
            let (schema, type_name) = resolve_name(self, n)?;
            let existing = self.engine.catalog().enum_type(&schema, &type_name).cloned();
            let Some(t) = existing else {
                if if_exists {
                    self.notice(&format!("type \"{type_name}\" does not exist, skipping"));
                    continue;
                }
                return Err(user_err!(sqlstate::UNDEFINED_OBJECT, "type \"{type_name}\" does not exist"));
            };
            self.engine.ddl(|_| Ok((vec![CatalogChange::DropType(t.clone())], EpochBatch::default()))).await?;
        }
        Ok(())
    }
}
