//! User-defined enum types: `CREATE TYPE name AS ENUM ('a', 'b')`, `DROP TYPE`, and values
//! of them (`'a'::name`).
//!
//! A type is a catalog entry with an OID; `pg_type` (typtype `e`) and `pg_enum` list it, so
//! drivers can look it up. A value is its label as text, reported to clients with the type's
//! OID: before planning, casts to an enum type become `eddy_enum_value(oid, name, labels, x)`,
//! which checks the label (22P02 otherwise) and marks its result column with the OID.
//! Table columns of enum types are not supported yet.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{Array, AsArray, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::{visit_expressions_mut, DataType as SqlType, Expr, Ident, ObjectName, Statement, Value};
use eddy_common::error::sqlstate;
use eddy_common::types::JSONB_METADATA_KEY;
use eddy_common::{user_err, Result};
use eddy_storage::EpochBatch;

use crate::catalog::{CatalogChange, TypeCatalog};
use crate::ddl::resolve_name;
use crate::session::Session;

/// Field metadata value marking an enum-typed column: `enum:<oid>:<name>`.
pub fn enum_tag(oid: u32, name: &str) -> String {
    format!("enum:{oid}:{name}")
}

/// The (OID, name) an `enum:` field tag names.
pub fn parse_enum_tag(tag: &str) -> Option<(u32, &str)> {
    let rest = tag.strip_prefix("enum:")?;
    let (oid, name) = rest.split_once(':')?;
    Some((oid.parse().ok()?, name))
}

/// `eddy_enum_value(oid, name, labels, x)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct EnumValue {
    signature: Signature,
}

impl ScalarUDFImpl for EnumValue {
    fn name(&self) -> &str {
        "eddy_enum_value"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let oid = match args.scalar_arguments.first().copied().flatten().map(|v| v.cast_to(&DataType::Int64)) {
            Some(Ok(ScalarValue::Int64(Some(o)))) => o as u32,
            _ => 0,
        };
        let name = match args.scalar_arguments.get(1).copied().flatten() {
            Some(ScalarValue::Utf8(Some(n))) => n.clone(),
            _ => String::new(),
        };
        let field = Field::new(self.name(), DataType::Utf8, true)
            .with_metadata(HashMap::from([(JSONB_METADATA_KEY.to_string(), enum_tag(oid, &name))]));
        Ok(Arc::new(field))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let name = match &args.args[1] {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(n))) => n.clone(),
            _ => String::new(),
        };
        let labels = args.args[2].to_array(1)?;
        let labels = labels
            .as_list_opt::<i32>()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| DataFusionError::Plan("eddy_enum_value: the labels must be an array".into()))?
            .value(0);
        let labels = arrow::compute::cast(&labels, &DataType::Utf8)?;
        let labels: Vec<String> = labels.as_string::<i32>().iter().flatten().map(str::to_string).collect();
        let values = arrow::compute::cast(&args.args[3].to_array(rows)?, &DataType::Utf8)?;
        let values = values.as_string::<i32>();
        for v in values.iter().flatten() {
            if !labels.iter().any(|l| l == v) {
                return Err(DataFusionError::External(Box::new(user_err!(
                    sqlstate::INVALID_TEXT_REPRESENTATION,
                    "invalid input value for enum {name}: \"{v}\""
                ))));
            }
        }
        let out: StringArray = values.iter().collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// The function casts to enum types become.
pub fn enum_value_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(EnumValue { signature: Signature::any(4, Volatility::Immutable) })
}

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
