//! jsonb's deletion operators: `doc - key`, `doc - keys` (a text array), `doc - index` and
//! `doc #- path` (PostgreSQL's), and the key tests `doc ?| keys` and `doc ?& keys`. DataFusion has no `#-` and refuses `-` of text; an
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

use crate::planner::jsonb::{self, Deletion, Listing};
use crate::planner::udf::{columnar, jsonb_closure_udf};

/// `doc - key | keys | index`.
pub const DELETE: &str = "eddy_jsonb_delete";
/// `doc #- path`.
pub const DELETE_PATH: &str = "eddy_jsonb_delete_path";
/// `jsonb_array_elements(doc)` as a list (the SQL rewrite unnests it), and the `_text` and
/// `jsonb_object_keys` lists.
pub const ELEMENTS: &str = "eddy_jsonb_elements";
pub const ELEMENTS_TEXT: &str = "eddy_jsonb_elements_text";
pub const KEYS: &str = "eddy_jsonb_keys";
/// The values of `jsonb_each` and `jsonb_each_text`, in [`KEYS`]'s order.
pub const VALUES: &str = "eddy_jsonb_values";
/// The keys of `jsonb_each` and `jsonb_each_text` (their errors).
pub const EACH_KEYS: &str = "eddy_jsonb_each_keys";
pub const EACH_KEYS_TEXT: &str = "eddy_jsonb_each_keys_text";
pub const VALUES_TEXT: &str = "eddy_jsonb_values_text";
/// `doc ?| keys`: any of the keys is a top-level key (or string element).
pub const EXISTS_ANY: &str = "eddy_jsonb_exists_any";
/// `doc ?& keys`: all of them are.
pub const EXISTS_ALL: &str = "eddy_jsonb_exists_all";

fn external(e: eddy_common::EddyError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

fn texts(a: &ArrayRef) -> DfResult<StringArray> {
    Ok(arrow::compute::cast(a, &DataType::Utf8)?.as_string::<i32>().clone())
}

/// Row `i` of a `text[]` argument, or of its `'{a,b}'` text (malformed text is PostgreSQL's
/// "malformed array literal"); a NULL element is `None`.
pub(crate) fn text_array_at(arr: &ArrayRef, i: usize) -> DfResult<Vec<Option<String>>> {
    Ok(match arr.data_type() {
        DataType::List(_) => texts(&arr.as_list::<i32>().value(i))?.iter().map(|s| s.map(str::to_string)).collect(),
        _ => eddy_common::text::parse_array_text(texts(&arr.slice(i, 1))?.value(0)).map_err(external)?,
    })
}

/// Row `i` of a path argument ([`text_array_at`]): a NULL step is an empty one.
pub(crate) fn path_at(arr: &ArrayRef, i: usize) -> DfResult<Vec<String>> {
    Ok(text_array_at(arr, i)?.into_iter().map(Option::unwrap_or_default).collect())
}

/// Row `i` of a keys argument ([`text_array_at`]): NULL keys are skipped, as PostgreSQL's
/// `-`, `?|` and `?&` skip them.
fn keys_at(arr: &ArrayRef, i: usize) -> DfResult<Vec<String>> {
    Ok(text_array_at(arr, i)?.into_iter().flatten().collect())
}

fn delete(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    let doc = texts(&a[0])?;
    let what = &a[1];
    let key = (!what.data_type().is_integer() && !matches!(what.data_type(), DataType::List(_))).then(|| texts(what)).transpose()?;
    let index = what.data_type().is_integer().then(|| arrow::compute::cast(what, &DataType::Int64)).transpose()?;
    let out = (0..n)
        .map(|i| {
            if doc.is_null(i) || what.is_null(i) {
                return Ok(None);
            }
            let listed;
            let deletion = match (&key, &index) {
                (Some(k), _) => Deletion::Key(k.value(i)),
                (_, Some(x)) => Deletion::Index(x.as_primitive::<Int64Type>().value(i)),
                _ => {
                    listed = keys_at(what, i)?;
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
            let path = path_at(paths, i)?;
            jsonb::delete_path(doc.value(i), &path).map(Some).map_err(external)
        })
        .collect::<DfResult<StringArray>>()?;
    Ok(Arc::new(out))
}

/// `doc ?| keys` (`all`: `?&`), keys given as a text array or its literal.
fn exists_keys(a: &[ArrayRef], n: usize, all: bool) -> DfResult<ArrayRef> {
    let doc = texts(&a[0])?;
    let keys = &a[1];
    let out = (0..n)
        .map(|i| {
            if doc.is_null(i) || keys.is_null(i) {
                return Ok(None);
            }
            let listed = keys_at(keys, i)?;
            let has = |k: &String| jsonb::has_key(doc.value(i), k) == Some(true);
            Ok(Some(if all { listed.iter().all(has) } else { listed.iter().any(has) }))
        })
        .collect::<DfResult<arrow::array::BooleanArray>>()?;
    Ok(Arc::new(out))
}

/// The list [`ELEMENTS`], [`ELEMENTS_TEXT`] or [`KEYS`] of each document.
fn listing(a: &[ArrayRef], n: usize, what: Listing) -> DfResult<ArrayRef> {
    use arrow::array::{ListBuilder, StringBuilder};
    let doc = texts(&a[0])?;
    let mut out = ListBuilder::new(StringBuilder::new());
    for i in 0..n {
        if doc.is_null(i) {
            out.append_null();
            continue;
        }
        for item in jsonb::list(doc.value(i), what).map_err(external)? {
            out.values().append_option(item);
        }
        out.append(true);
    }
    Ok(Arc::new(out.finish()))
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
    let text_list = DataType::List(Arc::new(arrow::datatypes::Field::new("item", DataType::Utf8, true)));
    for (name, what) in [(ELEMENTS, Listing::Elements), (ELEMENTS_TEXT, Listing::ElementsText), (KEYS, Listing::Keys), (VALUES, Listing::Values), (VALUES_TEXT, Listing::ValuesText), (EACH_KEYS, Listing::EachKeys(false)), (EACH_KEYS_TEXT, Listing::EachKeys(true))] {
        let body = move |args: &[datafusion::logical_expr::ColumnarValue], rows: usize| columnar(args, rows, |a, n| listing(a, n, what));
        crate::planner::udf::register(ctx, name, Signature::any(1, Volatility::Immutable), text_list.clone(), Arc::new(body));
    }
    for (name, all) in [(EXISTS_ANY, false), (EXISTS_ALL, true)] {
        let body = move |args: &[datafusion::logical_expr::ColumnarValue], rows: usize| columnar(args, rows, |a, n| exists_keys(a, n, all));
        crate::planner::udf::register(ctx, name, Signature::any(2, Volatility::Immutable), DataType::Boolean, Arc::new(body));
    }
    if let Err(e) = datafusion::execution::FunctionRegistry::register_expr_planner(&mut *ctx.state_ref().write(), Arc::new(planner)) {
        tracing::warn!("jsonb operators are not planned: {e}");
    }
}
