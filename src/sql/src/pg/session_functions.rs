//! PostgreSQL functions (part of the PostgreSQL layer): session functions clients call on connect: `version()`, `current_schema()`,
//! `current_database()`, `current_user`, `current_setting(name)`, `set_config(name, value,
//! is_local)` (sets the session setting; `is_local` is ignored, as transactions are no-ops),
//! `pg_backend_pid()`.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, StringArray};
use arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{ColumnarValue, Signature, Volatility};
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;
use parking_lot::RwLock;

use crate::planner::settings::PG_VERSION;
use crate::planner::udf::register;


/// `version()` text: parseable by SQLAlchemy's `PostgreSQL (\d+)\.?(\d+)?` and names Eddy.
pub fn version_string() -> String {
    format!(
        "PostgreSQL {PG_VERSION} (Eddy {}) on x86_64-pc-linux-gnu, compiled by rustc, 64-bit",
        env!("CARGO_PKG_VERSION")
    )
}








fn constant_text(ctx: &SessionContext, name: &'static str, value: String) {
    let v = ScalarValue::Utf8(Some(value));
    register(
        ctx,
        name,
        Signature::exact(vec![], Volatility::Stable),
        DataType::Utf8,
        Arc::new(move |_, _| Ok(ColumnarValue::Scalar(v.clone()))),
    );
}

/// What the session functions read: the session's user and live settings.
pub struct SessionInfo {
    /// Connected user.
    pub user: String,
    /// Settings by lower-case name.
    pub vars: Arc<RwLock<BTreeMap<String, String>>>,
    /// Backend pid reported to the client.
    pub pid: i32,
}

/// Registers the session functions on `ctx`.
pub fn register_session_functions(ctx: &SessionContext, info: &SessionInfo) {
    register_interval_arithmetic(ctx);
    register_string_agg_rows(ctx);
    register_jsonb(ctx);
    crate::planner::to_json::register(ctx);
    crate::planner::ordered_set::register(ctx);
    crate::planner::pg_aggregates::register(ctx);
    crate::planner::single_value::register(ctx);
    register_format(ctx);
    register_upper(ctx);
    super::to_char::register_to_char(ctx);
    super::scalar_fns::register_scalar_functions(ctx);
    super::make_datetime::register_make_datetime(ctx);
    super::jsonb_ops::register_jsonb_operators(ctx);
    super::extract::register(ctx);
    constant_text(ctx, "version", version_string());
    constant_text(ctx, "current_database", crate::catalog::DATABASE_NAME.to_string());
    for name in ["current_user", "session_user", "current_role", "user"] {
        constant_text(ctx, name, info.user.clone());
    }
    let vars = info.vars.clone();
    register(
        ctx,
        "current_schema",
        Signature::exact(vec![], Volatility::Stable),
        DataType::Utf8,
        Arc::new(move |_, _| Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(first_schema(&vars.read())))))),
    );
    let pid = info.pid;
    register(
        ctx,
        "pg_backend_pid",
        Signature::exact(vec![], Volatility::Stable),
        DataType::Int32,
        Arc::new(move |_, _| Ok(ColumnarValue::Scalar(ScalarValue::Int32(Some(pid))))),
    );
    let vars = info.vars.clone();
    register(
        ctx,
        "set_config",
        Signature::any(3, Volatility::Volatile),
        DataType::Utf8,
        Arc::new(move |args, rows| set_config(&vars, args, rows)),
    );
    let vars = info.vars.clone();
    register(
        ctx,
        "current_setting",
        Signature::uniform(1, vec![DataType::Utf8], Volatility::Stable),
        DataType::Utf8,
        Arc::new(move |args, rows| {
            let vars = vars.read();
            let lookup = |name: &str| -> DfResult<String> {
                let key = crate::planner::settings::canonical_var(name);
                vars.get(&key).cloned().ok_or_else(|| {
                    DataFusionError::External(Box::new(eddy_common::user_err!(
                        eddy_common::error::sqlstate::UNDEFINED_OBJECT,
                        "unrecognized configuration parameter \"{name}\""
                    )))
                })
            };
            match &args[0] {
                ColumnarValue::Scalar(s) => match s {
                    ScalarValue::Utf8(Some(n)) | ScalarValue::LargeUtf8(Some(n)) | ScalarValue::Utf8View(Some(n)) => {
                        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(lookup(n)?))))
                    }
                    _ => Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None))),
                },
                ColumnarValue::Array(a) => {
                    let a = arrow::compute::cast(a, &DataType::Utf8)?;
                    let s = a.as_string::<i32>();
                    let out: StringArray = (0..rows.min(s.len()))
                        .map(|i| if s.is_null(i) { Ok(None) } else { lookup(s.value(i)).map(Some) })
                        .collect::<DfResult<_>>()?;
                    Ok(ColumnarValue::Array(Arc::new(out)))
                }
            }
        }),
    );
}

/// `set_config(name, value, is_local)` over scalars or columns: stores each setting and returns
/// the new value.
fn set_config(vars: &RwLock<BTreeMap<String, String>>, args: &[ColumnarValue], rows: usize) -> DfResult<ColumnarValue> {
    let all_scalar = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let n = if all_scalar { 1 } else { rows };
    let names = args[0].to_array(n)?;
    let values = args[1].to_array(n)?;
    let names = arrow::compute::cast(&names, &DataType::Utf8)?;
    let values = arrow::compute::cast(&values, &DataType::Utf8)?;
    let (names, values) = (names.as_string::<i32>(), values.as_string::<i32>());
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if names.is_null(i) {
            return Err(DataFusionError::External(Box::new(eddy_common::user_err!(
                eddy_common::error::sqlstate::INVALID_PARAMETER_VALUE,
                "SET requires parameter name"
            ))));
        }
        let value = if values.is_null(i) { String::new() } else { values.value(i).to_string() };
        vars.write().insert(crate::planner::settings::canonical_var(names.value(i)), value.clone());
        out.push(Some(value));
    }
    Ok(if all_scalar {
        ColumnarValue::Scalar(ScalarValue::Utf8(out.pop().flatten()))
    } else {
        ColumnarValue::Array(Arc::new(StringArray::from(out)))
    })
}

/// The first existing schema named by `search_path` (`"$user"` skipped), or `public`.
pub fn first_schema(vars: &BTreeMap<String, String>) -> String {
    vars.get("search_path")
        .and_then(|p| {
            p.split(',')
                .map(|s| s.trim().trim_matches('"').to_string())
                .find(|s| !s.is_empty() && s != "$user")
        })
        .unwrap_or_else(|| "public".to_string())
}

/// Test doubles: `eddy_test_panic()` panics when evaluated (proves panics are contained);
/// `eddy_test_panic_if(condition)` returns 0 for every row and panics when `condition` is true
/// for any of them. The latter is immutable, so a materialized view may use it: one row then
/// makes the view's actor panic (an internal fault, unlike a per-row evaluation error).
pub fn register_test_functions(ctx: &SessionContext) {
    register(
        ctx,
        "eddy_test_panic",
        Signature::exact(vec![], Volatility::Volatile),
        DataType::Int32,
        Arc::new(|_, _| panic!("eddy_test_panic() was called")),
    );
    register(
        ctx,
        "eddy_test_panic_if",
        Signature::exact(vec![DataType::Boolean], Volatility::Immutable),
        DataType::Int32,
        Arc::new(|args, rows| {
            let condition = args[0].to_array(rows)?;
            if condition.as_boolean().iter().any(|c| c == Some(true)) {
                panic!("eddy_test_panic_if() met a true condition");
            }
            Ok(ColumnarValue::Array(Arc::new(arrow::array::Int32Array::from(vec![0; rows]))))
        }),
    );
}

/// `interval * number` and `interval / number` (the rewrite turns `*`/`/` with an interval
/// operand into these; see [`super::scalar_fns::interval_arithmetic_udf`]).
fn register_interval_arithmetic(ctx: &SessionContext) {
    for divide in [false, true] {
        ctx.register_udf(super::scalar_fns::interval_arithmetic_udf(divide));
    }
}

/// `eddy_string_agg_rows(list of (value, separator))`: `string_agg` with a separator per row
/// (see the PostgreSQL rewrite): NULL values are left out, each value after the first is
/// preceded by its row's separator (none when NULL); NULL without values.
fn register_string_agg_rows(ctx: &SessionContext) {
    let body = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        let lists = args[0].to_array(rows)?;
        let lists = lists.as_list_opt::<i32>().ok_or_else(|| DataFusionError::Internal("string_agg pairs".into()))?;
        let mut out = arrow::array::StringBuilder::new();
        for i in 0..lists.len() {
            if lists.is_null(i) {
                out.append_null();
                continue;
            }
            let pairs = lists.value(i);
            let pairs = pairs.as_struct_opt().ok_or_else(|| DataFusionError::Internal("string_agg pairs".into()))?;
            let values = arrow::compute::cast(pairs.column(0), &DataType::Utf8)?;
            let seps = arrow::compute::cast(pairs.column(1), &DataType::Utf8)?;
            let (values, seps) = (values.as_string::<i32>(), seps.as_string::<i32>());
            let mut joined: Option<String> = None;
            for j in 0..values.len() {
                if values.is_null(j) {
                    continue;
                }
                match joined.as_mut() {
                    None => joined = Some(values.value(j).to_string()),
                    Some(s) => {
                        if seps.is_valid(j) {
                            s.push_str(seps.value(j));
                        }
                        s.push_str(values.value(j));
                    }
                }
            }
            out.append_option(joined);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    };
    register(ctx, "eddy_string_agg_rows", Signature::any(1, Volatility::Immutable), DataType::Utf8, Arc::new(body));
}

/// The jsonb operators (`->`, `->>`, `#>`, `#>>`, `@>`, `<@`, `?`, which the rewrite turns into
/// `eddy_jsonb_*` calls) and functions, over jsonb text.
fn register_jsonb(ctx: &SessionContext) {
    // A text result (`->>`, `#>>`, `..._text`) or a jsonb one (`->`, `#>`, ...).
    fn register_result(ctx: &SessionContext, name: &str, signature: Signature, text: bool, body: Arc<crate::planner::udf::Body>) {
        if text {
            register(ctx, name, signature, DataType::Utf8, body);
        } else {
            crate::planner::udf::register_jsonb(ctx, name, signature, body);
        }
    }
    let two = || Signature::any(2, Volatility::Immutable);
    use arrow::array::{Array, AsArray, BooleanArray, Int64Array, StringArray};
    use crate::planner::jsonb;
    fn strings(v: &ColumnarValue, rows: usize) -> DfResult<StringArray> {
        let a = arrow::compute::cast(&v.to_array(rows)?, &DataType::Utf8)?;
        Ok(a.as_string::<i32>().clone())
    }
    fn is_int(v: &ColumnarValue) -> bool {
        v.data_type().is_integer()
    }
    for (name, text) in [("eddy_jsonb_get", false), ("eddy_jsonb_get_text", true)] {
        let body = move |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
            let (doc, key, by_index) = (strings(&args[0], rows)?, strings(&args[1], rows)?, is_int(&args[1]));
            let out: StringArray = (0..rows)
                .map(|i| {
                    if doc.is_null(i) || key.is_null(i) {
                        return None;
                    }
                    jsonb::get(doc.value(i), key.value(i), by_index, text)
                })
                .collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        };
        register_result(ctx, name, two(), text, Arc::new(body));
    }
    for (name, text) in [("eddy_jsonb_path", false), ("eddy_jsonb_path_text", true)] {
        let body = move |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
            let doc = strings(&args[0], rows)?;
            let paths = args[1].to_array(rows)?;
            let out: StringArray = (0..rows)
                .map(|i| -> DfResult<Option<String>> {
                    if doc.is_null(i) || paths.is_null(i) {
                        return Ok(None);
                    }
                    Ok(jsonb::get_path(doc.value(i), &super::jsonb_ops::path_at(&paths, i)?, text))
                })
                .collect::<DfResult<_>>()?;
            Ok(ColumnarValue::Array(Arc::new(out)))
        };
        register_result(ctx, name, two(), text, Arc::new(body));
    }
    type JsonbTest = fn(&str, &str) -> Option<bool>;
    let tests: [(&str, JsonbTest); 2] =
        [("eddy_jsonb_contains", jsonb::contains), ("eddy_jsonb_exists", jsonb::has_key)];
    for (name, test) in tests {
        let body = move |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
            if name == "eddy_jsonb_contains" && args.iter().any(|a| super::array_contains::is_array(&a.data_type())) {
                let out = super::array_contains::contains(&args[0].to_array(rows)?, &args[1].to_array(rows)?)?;
                return Ok(ColumnarValue::Array(Arc::new(out)));
            }
            let (a, b) = (strings(&args[0], rows)?, strings(&args[1], rows)?);
            let out: BooleanArray =
                (0..rows).map(|i| if a.is_null(i) || b.is_null(i) { None } else { test(a.value(i), b.value(i)) }).collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        };
        register(ctx, name, Signature::any(2, Volatility::Immutable), DataType::Boolean, Arc::new(body));
    }
    // jsonb_extract_path(doc, VARIADIC keys) is `#>` with the keys as the path.
    for (name, text) in [("jsonb_extract_path", false), ("json_extract_path", false), ("jsonb_extract_path_text", true), ("json_extract_path_text", true)] {
        let body = move |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
            let doc = strings(&args[0], rows)?;
            let keys = args[1..].iter().map(|a| strings(a, rows)).collect::<DfResult<Vec<_>>>()?;
            let out: StringArray = (0..rows)
                .map(|i| {
                    if doc.is_null(i) || keys.iter().any(|k| k.is_null(i)) {
                        return None;
                    }
                    let path: Vec<String> = keys.iter().map(|k| k.value(i).to_string()).collect();
                    jsonb::get_path(doc.value(i), &path, text)
                })
                .collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        };
        register_result(ctx, name, Signature::variadic_any(Volatility::Immutable), text, Arc::new(body));
    }
    type JsonbMap = fn(&str) -> Option<String>;
    let maps: [(&str, JsonbMap, bool); 3] =
        [("jsonb_strip_nulls", jsonb::strip_nulls, false), ("json_strip_nulls", jsonb::strip_nulls, false), ("jsonb_pretty", jsonb::pretty, true)];
    for (name, map, text) in maps {
        let body = move |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
            let a = strings(&args[0], rows)?;
            let out: StringArray = (0..rows).map(|i| if a.is_null(i) { None } else { map(a.value(i)) }).collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        };
        register_result(ctx, name, Signature::any(1, Volatility::Immutable), text, Arc::new(body));
    }
    let set = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        let (doc, paths, new) = (strings(&args[0], rows)?, args[1].to_array(rows)?, strings(&args[2], rows)?);
        let create = match args.get(3) {
            Some(c) => Some(arrow::compute::cast(&c.to_array(rows)?, &DataType::Boolean)?.as_boolean().clone()),
            None => None,
        };
        let out: StringArray = (0..rows)
            .map(|i| -> DfResult<Option<String>> {
                if doc.is_null(i) || paths.is_null(i) || new.is_null(i) || create.as_ref().is_some_and(|c| c.is_null(i)) {
                    return Ok(None);
                }
                let create = create.as_ref().is_none_or(|c| c.value(i));
                jsonb::set(doc.value(i), &super::jsonb_ops::path_at(&paths, i)?, new.value(i), create).map_err(|e| DataFusionError::External(Box::new(e)))
            })
            .collect::<DfResult<_>>()?;
        Ok(ColumnarValue::Array(Arc::new(out)))
    };
    crate::planner::udf::register_jsonb(
        ctx,
        "jsonb_set",
        Signature::one_of(
            vec![datafusion::logical_expr::TypeSignature::Any(3), datafusion::logical_expr::TypeSignature::Any(4)],
            Volatility::Immutable,
        ),
        Arc::new(set),
    );
    for name in ["jsonb_typeof", "json_typeof"] {
        let body = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
            let a = strings(&args[0], rows)?;
            let out: StringArray = (0..rows).map(|i| if a.is_null(i) { None } else { jsonb::type_of(a.value(i)) }).collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        };
        register(ctx, name, Signature::any(1, Volatility::Immutable), DataType::Utf8, Arc::new(body));
    }
    for name in ["jsonb_array_length", "json_array_length"] {
        let body = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
            let a = strings(&args[0], rows)?;
            let out = (0..rows)
                .map(|i| if a.is_null(i) { Ok(None) } else { jsonb::array_length(a.value(i)) })
                .collect::<Result<Int64Array, _>>()
                .map_err(|m| DataFusionError::External(Box::new(eddy_common::user_err!(eddy_common::error::sqlstate::INVALID_PARAMETER_VALUE, "{m}"))))?;
            Ok(ColumnarValue::Array(Arc::new(out)))
        };
        register(ctx, name, Signature::any(1, Volatility::Immutable), DataType::Int64, Arc::new(body));
    }
}

/// `format(fmt, args...)`: `%s` (text; NULL is empty), `%I` (identifier, quoted when needed),
/// `%L` (literal, `NULL` for NULL) and `%%`, as PostgreSQL's `format`.
/// `upper(s)` character by character, keeping a character whose uppercase is several
/// (`upper('ß')` is `ß` in PostgreSQL; Rust's, and so DataFusion's, is `SS`). DataFusion's
/// signature, so the same arguments are accepted.
fn register_upper(ctx: &SessionContext) {
    let body = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        let a = arrow::compute::cast(&args[0].to_array(rows)?, &DataType::Utf8)?;
        let upper = |s: &str| -> String {
            s.chars()
                .flat_map(|c| {
                    let mut u = c.to_uppercase();
                    match (u.next(), u.next()) {
                        (Some(one), None) => vec![one],
                        _ => vec![c],
                    }
                })
                .collect()
        };
        let out: StringArray = a.as_string::<i32>().iter().map(|v| v.map(upper)).collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    };
    let signature = datafusion::functions::string::upper().signature().clone();
    register(ctx, "upper", signature, DataType::Utf8, Arc::new(body));
}

fn register_format(ctx: &SessionContext) {
    use arrow::array::StringArray;
    let body = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        let texts = args
            .iter()
            .map(|a| {
                let arr = a.to_array(rows)?;
                let mut out = Vec::with_capacity(rows);
                let field = arrow::datatypes::Field::new("", arr.data_type().clone(), true);
                for r in 0..rows {
                    let mut s = String::new();
                    let present = eddy_common::text_out::write_text(&arr, r, &field, &mut s)
                        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
                    out.push(present.then_some(s));
                }
                Ok(out)
            })
            .collect::<DfResult<Vec<Vec<Option<String>>>>>()?;
        let mut result: Vec<Option<String>> = Vec::with_capacity(rows);
        for r in 0..rows {
            let Some(fmt) = texts.first().and_then(|t| t[r].clone()) else {
                result.push(None);
                continue;
            };
            let mut out = String::new();
            let mut next = 1;
            let mut chars = fmt.chars();
            while let Some(c) = chars.next() {
                if c != '%' {
                    out.push(c);
                    continue;
                }
                let spec = chars.next().ok_or_else(|| {
                    datafusion::error::DataFusionError::External(Box::new(eddy_common::user_err!(
                        eddy_common::error::sqlstate::INVALID_PARAMETER_VALUE,
                        "unterminated format() type specifier"
                    )))
                })?;
                if spec == '%' {
                    out.push('%');
                    continue;
                }
                let arg = texts.get(next).ok_or_else(|| {
                    datafusion::error::DataFusionError::External(Box::new(eddy_common::user_err!(
                        eddy_common::error::sqlstate::INVALID_PARAMETER_VALUE,
                        "too few arguments for format()"
                    )))
                })?[r]
                    .clone();
                next += 1;
                match spec {
                    's' => out.push_str(arg.as_deref().unwrap_or("")),
                    'I' => match arg {
                        Some(a) => out.push_str(&crate::pg::model::quote_ident(&a)),
                        None => {
                            return Err(datafusion::error::DataFusionError::External(Box::new(eddy_common::user_err!(
                                "22004",
                                "null values cannot be formatted as an SQL identifier"
                            ))))
                        }
                    },
                    'L' => match arg {
                        Some(a) => out.push_str(&crate::pg::model::quote_literal(&a)),
                        None => out.push_str("NULL"),
                    },
                    other => {
                        return Err(datafusion::error::DataFusionError::External(Box::new(eddy_common::user_err!(
                            eddy_common::error::sqlstate::INVALID_PARAMETER_VALUE,
                            "unrecognized format() type specifier \"{other}\""
                        ))))
                    }
                }
            }
            result.push(Some(out));
        }
        Ok(ColumnarValue::Array(Arc::new(result.into_iter().collect::<StringArray>())))
    };
    register(ctx, "format", Signature::variadic_any(Volatility::Immutable), DataType::Utf8, Arc::new(body));
}

