//! The catalog functions clients call while browsing: `format_type`, `pg_get_expr`,
//! `pg_get_userbyid`, `pg_table_is_visible`, `pg_get_viewdef`, `pg_get_indexdef`,
//! `pg_get_constraintdef`, `has_*_privilege`, `to_regtype`, `current_schemas`, ...; plus the
//! functions the SQL rewrites (`rewrite.rs`) turn `::regclass`-style casts into.
//!
//! Eddy has one superuser (OID 10) who owns everything, so the privilege functions are true.

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, StructArray};
use arrow::datatypes::{DataType, Field, Fields};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, Signature, Volatility};
use datafusion::scalar::ScalarValue;
use eddy_common::error::sqlstate;

use super::model::{quote_ident, quote_literal, split_qualified, SUPERUSER_OID};
use super::rows::index_def;
use super::types::{format_type, type_by_oid, type_oid_by_name};
use super::udf::{bool_arg, int_arg, is_text, oid, text, text_arg, user_error, FnContext, Registrar};

/// Element type of `_pg_expandarray`'s result: PostgreSQL's `(x, n)` record.
pub fn expandarray_fields() -> Fields {
    Fields::from(vec![Field::new("x", DataType::Int64, true), Field::new("n", DataType::Int64, true)])
}

pub(super) fn relation_oid(cx: &mut FnContext, arg: Option<&ScalarValue>) -> DfResult<Option<u32>> {
    if is_text(arg) {
        let Some(name) = text_arg(arg) else { return Ok(None) };
        if let Ok(n) = name.trim().parse::<u32>() {
            return Ok(Some(n));
        }
        let path = cx.search_path();
        return match cx.model().resolve_relation(&name, &path) {
            Some(o) => Ok(Some(o)),
            None => Err(user_error(sqlstate::UNDEFINED_TABLE, format!("relation \"{name}\" does not exist"))),
        };
    }
    Ok(int_arg(arg).map(|v| v as u32))
}

fn type_oid(arg: Option<&ScalarValue>, strict: bool) -> DfResult<Option<u32>> {
    if is_text(arg) {
        let Some(name) = text_arg(arg) else { return Ok(None) };
        if let Ok(n) = name.trim().parse::<u32>() {
            return Ok(Some(n));
        }
        return match type_oid_by_name(&name) {
            Some(o) => Ok(Some(o)),
            None if strict => Err(user_error(sqlstate::UNDEFINED_OBJECT, format!("type \"{name}\" does not exist"))),
            None => Ok(None),
        };
    }
    Ok(int_arg(arg).map(|v| v as u32))
}

fn namespace_oid(cx: &mut FnContext, arg: Option<&ScalarValue>) -> DfResult<Option<u32>> {
    if is_text(arg) {
        let Some(name) = text_arg(arg) else { return Ok(None) };
        let n = split_qualified(&name).pop().unwrap_or_default();
        return match cx.model().namespaces.iter().find(|(_, s)| *s == n) {
            Some((o, _)) => Ok(Some(*o)),
            None => Err(user_error(sqlstate::INVALID_SCHEMA_NAME, format!("schema \"{name}\" does not exist"))),
        };
    }
    Ok(int_arg(arg).map(|v| v as u32))
}

/// Registers every catalog function.
pub fn register_all(r: &Registrar<'_>) {
    register_casts(r);
    register_descriptions(r);
    register_visibility(r);
    register_misc(r);
    register_quoting(r);
}

/// `quote_literal(v)` and `quote_nullable(v)`: `v` as text written as an SQL string literal,
/// as [`quote_literal`] writes it; `quote_literal(NULL)` is NULL, `quote_nullable(NULL)`
/// the word `NULL`.
fn register_quoting(r: &Registrar<'_>) {
    fn one<'a>(name: &str, a: &'a [ScalarValue]) -> DfResult<Option<&'a ScalarValue>> {
        match a {
            [v] => Ok(Some(v)),
            _ => Err(user_error(sqlstate::UNDEFINED_FUNCTION, format!("function {name} takes one argument, not {}", a.len()))),
        }
    }
    r.any("quote_literal", DataType::Utf8, |_, a| Ok(text(text_arg(one("quote_literal", a)?).map(|s| quote_literal(&s)))));
    r.any("quote_nullable", DataType::Utf8, |_, a| {
        let quoted = text_arg(one("quote_nullable", a)?).map_or_else(|| "NULL".to_string(), |s| quote_literal(&s));
        Ok(text(Some(quoted)))
    });
}

/// The functions `::regclass`, `::regtype`, `::regnamespace`, `::regproc` and `::regrole`
/// casts are rewritten to (`eddy_regX` gives the OID, `eddy_regX_name` the display name).
fn register_casts(r: &Registrar<'_>) {
    r.any("eddy_regclass", DataType::Int32, |cx, a| Ok(oid(relation_oid(cx, a.first())?)));
    r.any("eddy_regclass_name", DataType::Utf8, |cx, a| {
        let Some(o) = relation_oid(cx, a.first())? else { return Ok(text(None)) };
        let path = cx.search_path();
        Ok(text(Some(cx.model().relation_display_name(o, &path).unwrap_or_else(|| o.to_string()))))
    });
    // to_regclass / to_regnamespace return NULL where regclass / regnamespace raise an error.
    r.any("to_regclass", DataType::Int32, |cx, a| Ok(oid(relation_oid(cx, a.first()).ok().flatten())));
    r.any("eddy_regtype", DataType::Int32, |_, a| Ok(oid(type_oid(a.first(), true)?)));
    r.any("eddy_regtype_name", DataType::Utf8, |_, a| {
        // PostgreSQL prints the invalid type OID 0 as `-`.
        Ok(text(type_oid(a.first(), true)?.map(|o| match o {
            0 => "-".to_string(),
            o if type_by_oid(o).is_some() => format_type(o, None),
            o => o.to_string(),
        })))
    });
    r.any("to_regtype", DataType::Int32, |_, a| Ok(oid(type_oid(a.first(), false)?)));
    r.any("eddy_regnamespace", DataType::Int32, |cx, a| Ok(oid(namespace_oid(cx, a.first())?)));
    r.any("eddy_regnamespace_name", DataType::Utf8, |cx, a| {
        let Some(o) = namespace_oid(cx, a.first())? else { return Ok(text(None)) };
        Ok(text(Some(cx.model().namespace_name(o).map(quote_ident).unwrap_or_else(|| o.to_string()))))
    });
    // See to_regclass: NULL instead of the error.
    r.any("to_regnamespace", DataType::Int32, |cx, a| Ok(oid(namespace_oid(cx, a.first()).ok().flatten())));
    // Functions are compared by name (`typinput = 'array_in'::regproc`), so regproc is text.
    r.any("eddy_regproc", DataType::Utf8, |_, a| {
        Ok(text(text_arg(a.first()).map(|n| split_qualified(&n).pop().unwrap_or_default())))
    });
    r.any("eddy_regrole", DataType::Int32, |cx, a| {
        if is_text(a.first()) {
            let name = text_arg(a.first()).unwrap_or_default();
            if name == cx.session.user {
                return Ok(oid(Some(SUPERUSER_OID)));
            }
            return Err(user_error(sqlstate::UNDEFINED_OBJECT, format!("role \"{name}\" does not exist")));
        }
        Ok(oid(int_arg(a.first()).map(|v| v as u32)))
    });
    r.any("eddy_regrole_name", DataType::Utf8, |cx, a| {
        Ok(text(int_arg(a.first()).map(|o| if o == i64::from(SUPERUSER_OID) { cx.session.user.clone() } else { o.to_string() })))
    });
}

/// Definitions and descriptions: `format_type`, `pg_get_*def`, `obj_description`, ...
fn register_descriptions(r: &Registrar<'_>) {
    r.any("format_type", DataType::Utf8, |cx, a| {
        let Some(t) = int_arg(a.first()) else { return Ok(text(None)) };
        if let Some((_, _, name, _)) = cx.model().enums.iter().find(|(oid, ..)| i64::from(*oid) == t) {
            return Ok(text(Some(quote_ident(name))));
        }
        Ok(text(Some(format_type(t as u32, int_arg(a.get(1)).map(|m| m as i32)))))
    });
    // Defaults and index predicates are stored as SQL text, which is what pg_get_expr prints.
    r.any("pg_get_expr", DataType::Utf8, |_, a| Ok(text(text_arg(a.first()))));
    r.any("pg_get_userbyid", DataType::Utf8, |cx, a| {
        Ok(text(int_arg(a.first()).map(|o| {
            if o == i64::from(SUPERUSER_OID) {
                cx.session.user.clone()
            } else {
                format!("unknown (OID={o})")
            }
        })))
    });
    r.any("pg_get_viewdef", DataType::Utf8, |cx, a| {
        let Some(o) = relation_oid(cx, a.first())? else { return Ok(text(None)) };
        Ok(text(cx.model().relation(o).and_then(|r| r.view_query())))
    });
    r.any("pg_get_indexdef", DataType::Utf8, |cx, a| {
        let Some(o) = int_arg(a.first()) else { return Ok(text(None)) };
        let column = int_arg(a.get(1)).unwrap_or(0);
        let Some(rel) = cx.model().relation_of_index(o as u32).cloned() else { return Ok(text(None)) };
        if column > 0 {
            let name = usize::try_from(column - 1).ok().and_then(|c| rel.pk.get(c)).map(|c| quote_ident(&rel.cols[*c].name));
            return Ok(text(Some(name.unwrap_or_default())));
        }
        Ok(text(Some(index_def(&rel))))
    });
    // The size functions read the store: `sizes.rs`.
    r.any("pg_size_pretty", DataType::Utf8, |_, a| {
        let Some(bytes) = int_arg(a.first()) else { return Ok(text(None)) };
        // PostgreSQL: bytes below 10 kB, then kB/MB/GB/TB, each unit used while the value is
        // below 10240 of it (rounded half up).
        let mut v = bytes as f64;
        let mut unit = "bytes";
        for next in ["kB", "MB", "GB", "TB", "PB"] {
            if v.abs() < 10_240.0 {
                break;
            }
            v /= 1024.0;
            unit = next;
        }
        Ok(text(Some(if unit == "bytes" { format!("{bytes} bytes") } else { format!("{} {unit}", v.round() as i64) })))
    });
    // Comments (COMMENT ON) of relations and their columns.
    r.any("obj_description", DataType::Utf8, |cx, a| {
        let Some(o) = int_arg(a.first()) else { return Ok(text(None)) };
        Ok(text(cx.model().relations.iter().find(|r| i64::from(r.oid) == o).and_then(|r| r.comment.clone())))
    });
    r.any("col_description", DataType::Utf8, |cx, a| {
        let (Some(o), Some(n)) = (int_arg(a.first()), int_arg(a.get(1))) else { return Ok(text(None)) };
        let rel = cx.model().relations.iter().find(|r| i64::from(r.oid) == o).cloned();
        Ok(text(rel.and_then(|r| r.cols.get(usize::try_from(n - 1).ok()?)?.comment.clone())))
    });
    r.any("pg_get_constraintdef", DataType::Utf8, |cx, a| {
        let Some(o) = int_arg(a.first()) else { return Ok(text(None)) };
        Ok(text(cx.model().relation_of_constraint(o as u32).map(|r| format!("PRIMARY KEY ({})", r.pk_columns_sql()))))
    });
    for name in [
        "shobj_description", "pg_get_ruledef", "pg_get_serial_sequence",
        "pg_get_statisticsobjdef_columns", "pg_get_triggerdef", "pg_get_partkeydef", "pg_get_function_result",
        "pg_get_function_arguments", "pg_get_function_identity_arguments", "pg_get_partition_constraintdef",
        "pg_tablespace_location",
    ] {
        // Eddy stores no comments, rules, sequences, triggers, partitions or functions.
        r.any(name, DataType::Utf8, |_, _| Ok(text(None)));
    }
    r.any("pg_encoding_to_char", DataType::Utf8, |_, a| {
        Ok(text(int_arg(a.first()).map(|e| match e {
            0 => "SQL_ASCII".to_string(),
            6 => "UTF8".to_string(),
            8 => "LATIN1".to_string(),
            _ => String::new(),
        })))
    });
    r.any("quote_ident", DataType::Utf8, |_, a| Ok(text(text_arg(a.first()).map(|s| quote_ident(&s)))));
    r.any("parse_ident", DataType::new_list(DataType::Utf8, true), |_, a| {
        let Some(s) = text_arg(a.first()) else { return Ok(ScalarValue::Null) };
        let items: Vec<ScalarValue> = split_qualified(&s).into_iter().map(|p| ScalarValue::Utf8(Some(p))).collect();
        Ok(ScalarValue::List(ScalarValue::new_list_nullable(&items, &DataType::Utf8)))
    });
}

/// Visibility and privileges.
fn register_visibility(r: &Registrar<'_>) {
    r.any("pg_table_is_visible", DataType::Boolean, |cx, a| {
        let Some(o) = int_arg(a.first()) else { return Ok(ScalarValue::Boolean(None)) };
        let path = cx.search_path();
        let model = cx.model();
        let rel = model.relation(o as u32).or_else(|| model.relation_of_index(o as u32));
        Ok(ScalarValue::Boolean(Some(rel.is_some_and(|r| r.schema == "pg_catalog" || path.contains(&r.schema)))))
    });
    r.any("pg_type_is_visible", DataType::Boolean, |cx, a| {
        let Some(o) = int_arg(a.first()) else { return Ok(ScalarValue::Boolean(None)) };
        let user = cx.model().enums.iter().any(|(oid, ..)| i64::from(*oid) == o);
        Ok(ScalarValue::Boolean(Some(user || type_by_oid(o as u32).is_some())))
    });
    for name in ["pg_function_is_visible", "pg_collation_is_visible", "pg_opclass_is_visible", "pg_conversion_is_visible"] {
        r.any(name, DataType::Boolean, |_, a| Ok(ScalarValue::Boolean(int_arg(a.first()).map(|_| true))));
    }
    for name in [
        "has_table_privilege", "has_schema_privilege", "has_database_privilege", "has_any_column_privilege",
        "has_column_privilege", "has_function_privilege", "has_sequence_privilege", "has_type_privilege",
        "has_tablespace_privilege", "has_foreign_data_wrapper_privilege", "has_server_privilege",
        "has_language_privilege", "pg_has_role",
    ] {
        r.any(name, DataType::Boolean, |_, _| Ok(ScalarValue::Boolean(Some(true))));
    }
    r.any("pg_relation_is_publishable", DataType::Boolean, |cx, a| {
        let Some(o) = int_arg(a.first()) else { return Ok(ScalarValue::Boolean(None)) };
        Ok(ScalarValue::Boolean(Some(cx.model().relation(o as u32).is_some_and(|r| r.kind == 'r' && !r.is_system()))))
    });
}

fn list_len(v: Option<&ScalarValue>) -> Option<usize> {
    match v? {
        ScalarValue::List(l) if !l.is_null(0) => Some(l.value(0).len()),
        ScalarValue::LargeList(l) if !l.is_null(0) => Some(l.value(0).len()),
        ScalarValue::FixedSizeList(l) if !l.is_null(0) => Some(l.value(0).len()),
        _ => None,
    }
}

/// Arrays, JSON and session functions.
fn register_misc(r: &Registrar<'_>) {
    // The SQL name of the argument's type (PostgreSQL returns regtype, shown as this name).
    r.ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(PgTypeof {
        signature: Signature::any(1, Volatility::Immutable),
    }));
    r.any("current_schemas", DataType::new_list(DataType::Utf8, true), |cx, a| {
        let mut schemas = Vec::new();
        if bool_arg(a.first()).unwrap_or(false) {
            schemas.push("pg_catalog".to_string());
        }
        let path = cx.search_path();
        let model = cx.model();
        schemas.extend(path.into_iter().filter(|s| model.namespaces.iter().any(|(_, n)| n == s)));
        let items: Vec<ScalarValue> = schemas.into_iter().map(|s| ScalarValue::Utf8(Some(s))).collect();
        Ok(ScalarValue::List(ScalarValue::new_list_nullable(&items, &DataType::Utf8)))
    });
    // Arrays are 1-based in PostgreSQL and in Eddy; empty and NULL arrays have no bounds.
    r.any("array_upper", DataType::Int32, |_, a| {
        Ok(ScalarValue::Int32(list_len(a.first()).filter(|n| *n > 0 && int_arg(a.get(1)) == Some(1)).map(|n| n as i32)))
    });
    r.any("array_lower", DataType::Int32, |_, a| {
        Ok(ScalarValue::Int32(list_len(a.first()).filter(|n| *n > 0 && int_arg(a.get(1)) == Some(1)).map(|_| 1)))
    });
    r.any("_pg_expandarray", DataType::new_list(DataType::Struct(expandarray_fields()), true), |_, a| {
        let values = match a.first() {
            Some(ScalarValue::List(l)) if !l.is_null(0) => l.value(0),
            _ => return Ok(ScalarValue::Null),
        };
        let xs = arrow::compute::cast(&values, &DataType::Int64)?;
        let xs = xs.as_primitive::<arrow::datatypes::Int64Type>().clone();
        let ns = Int64Array::from_iter_values(1..=xs.len() as i64);
        let st = StructArray::try_new(expandarray_fields(), vec![Arc::new(xs), Arc::new(ns)], None)?;
        let list = arrow::array::ListArray::try_new(
            Arc::new(Field::new_list_field(DataType::Struct(expandarray_fields()), true)),
            arrow::buffer::OffsetBuffer::from_lengths([st.len()]),
            Arc::new(st),
            None,
        )?;
        Ok(ScalarValue::List(Arc::new(list)))
    });
    r.nullary("pg_is_in_recovery", DataType::Boolean, |_, _| Ok(ScalarValue::Boolean(Some(false))));
    r.nullary("pg_postmaster_start_time", DataType::Utf8, |_, _| Ok(text(None)));
}

/// PostgreSQL's name for values of Arrow type `dt`.
/// `pg_typeof(x)`: the type PostgreSQL would name for `x`, from its field (so a jsonb value
/// says jsonb, as its RowDescription does), one constant per call.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgTypeof {
    signature: Signature,
}

impl datafusion::logical_expr::ScalarUDFImpl for PgTypeof {
    fn name(&self) -> &str {
        "pg_typeof"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: datafusion::logical_expr::ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let name = match args.arg_fields.first() {
            Some(f) if f.metadata().contains_key(eddy_common::types::JSONB_METADATA_KEY) => {
                eddy_common::types::ColumnType::from_arrow_field(f).map_or_else(|| pg_type_name(f.data_type()), |t| t.pg_name())
            }
            Some(f) => pg_type_name(f.data_type()),
            None => "unknown".to_string(),
        };
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))))
    }
}

fn pg_type_name(dt: &DataType) -> String {
    match dt {
        DataType::Null => "unknown".to_string(),
        DataType::UInt32 => "oid".to_string(),
        DataType::List(f) | DataType::LargeList(f) => format!("{}[]", pg_type_name(f.data_type())),
        other => match eddy_common::types::ColumnType::from_arrow(other) {
            Some(t) => format_type(t.pg_oid(), None),
            None => other.to_string().to_lowercase(),
        },
    }
}
