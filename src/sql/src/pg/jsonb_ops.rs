//! jsonb's deletion operators: `doc - key`, `doc - keys` (a text array), `doc - index` and
//! `doc #- path` (PostgreSQL's). DataFusion has no `#-` and refuses `-` of text; an
//! `ExprPlanner` sees the operands' types while the SQL is planned, so `-` of a jsonb value
//! becomes [`DELETE`] and `#-` [`DELETE_PATH`].

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::common::DFSchema;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{ExprSchemable, ScalarUDF, Signature, Volatility};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::BinaryOperator;

use crate::planner::jsonb::{self, Deletion};
use crate::planner::udf::{columnar, jsonb_closure_udf};

/// `doc - key | keys | index`.
pub const DELETE: &str = "eddy_jsonb_delete";
/// `doc #- path`.
pub const DELETE_PATH: &str = "eddy_jsonb_delete_path";

fn external(e: eddy_common::EddyError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

fn texts(a: &ArrayRef) -> DfResult<StringArray> {
    Ok(arrow::compute::cast(a, &DataType::Utf8)?.as_string::<i32>().clone())
}

/// The text items of row `i` of a list array.
fn items(list: &ArrayRef, i: usize) -> DfResult<Vec<String>> {
    let row = list.as_list::<i32>().value(i);
    Ok(texts(&row)?.iter().map(|s| s.unwrap_or_default().to_string()).collect())
}

fn delete(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    let doc = texts(&a[0])?;
    let what = &a[1];
    let keys = (!what.data_type().is_integer() && !matches!(what.data_type(), DataType::List(_))).then(|| texts(what)).transpose()?;
    let index = what.data_type().is_integer().then(|| arrow::compute::cast(what, &DataType::Int64)).transpose()?;
    let out = (0..n)
        .map(|i| {
            if doc.is_null(i) || what.is_null(i) {
                return Ok(None);
            }
            let listed;
            let deletion = match (&keys, &index) {
                (Some(k), _) => Deletion::Key(k.value(i)),
                (_, Some(x)) => Deletion::Index(x.as_primitive::<Int64Type>().value(i)),
                _ => {
                    listed = items(what, i)?;
                    Deletion::Keys(&listed)
                }
            };
            jsonb::delete(doc.value(i), deletion).map(Some).map_err(external)
        })
        .collect::<DfResult<StringArray>>()?;
    Ok(Arc::new(out))
}

fn delete_path(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    let doc = texts(&a[0])?;
    let paths = &a[1];
    let out = (0..n)
        .map(|i| {
            if doc.is_null(i) || paths.is_null(i) {
                return Ok(None);
            }
            let path = match paths.data_type() {
                DataType::List(_) => items(paths, i)?,
                _ => eddy_common::text::parse_array_text(texts(paths)?.value(i))
                    .map_err(external)?
                    .into_iter()
                    .map(Option::unwrap_or_default)
                    .collect(),
            };
            jsonb::delete_path(doc.value(i), &path).map(Some).map_err(external)
        })
        .collect::<DfResult<StringArray>>()?;
    Ok(Arc::new(out))
}

/// Plans `jsonb - x` and `jsonb #- path` (see the module docs).
#[derive(Debug)]
struct JsonbOperators {
    delete: Arc<ScalarUDF>,
    delete_path: Arc<ScalarUDF>,
}

impl ExprPlanner for JsonbOperators {
    fn plan_binary_op(&self, expr: RawBinaryExpr, schema: &DFSchema) -> DfResult<PlannerResult<RawBinaryExpr>> {
        let jsonb = |e: &datafusion::logical_expr::Expr| {
            e.to_field(schema).is_ok_and(|(_, f)| eddy_common::ColumnType::from_arrow_field(&f) == Some(eddy_common::ColumnType::Jsonb))
        };
        Ok(match expr.op {
            BinaryOperator::Minus if jsonb(&expr.left) => PlannerResult::Planned(self.delete.call(vec![expr.left, expr.right])),
            BinaryOperator::HashMinus => PlannerResult::Planned(self.delete_path.call(vec![expr.left, expr.right])),
            _ => PlannerResult::Original(expr),
        })
    }
}

/// Registers the operators' planner and functions on `ctx`.
pub fn register_jsonb_operators(ctx: &SessionContext) {
    let udf = |name: &str, f: fn(&[ArrayRef], usize) -> DfResult<ArrayRef>| {
        Arc::new(jsonb_closure_udf(name, Signature::any(2, Volatility::Immutable), Arc::new(move |args, rows| columnar(args, rows, f))))
    };
    let planner = JsonbOperators { delete: udf(DELETE, delete), delete_path: udf(DELETE_PATH, delete_path) };
    ctx.register_udf(planner.delete.as_ref().clone());
    ctx.register_udf(planner.delete_path.as_ref().clone());
    if let Err(e) = datafusion::execution::FunctionRegistry::register_expr_planner(&mut *ctx.state_ref().write(), Arc::new(planner)) {
        tracing::warn!("jsonb operators are not planned: {e}");
    }
}
