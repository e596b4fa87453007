//! SQL values as JSON: `to_json` / `to_jsonb`, and the final step of `json_agg` / `jsonb_agg`.
//!
//! The PostgreSQL rewrite turns `jsonb_agg([DISTINCT] x [ORDER BY o])` into
//! `eddy_json_agg(array_agg([DISTINCT] to_jsonb(x) [ORDER BY o]), sort)`: each value is
//! converted on the way in, `array_agg` collects them (incrementally in a view, where it is an
//! ordered multiset), and [`json_agg_final`] writes the array. `sort` orders DISTINCT values the
//! way PostgreSQL does (it sorts by the value to find the distinct ones), by their JSON value.
//!
//! Values convert as PostgreSQL converts them: numbers stay numbers (NaN and infinities become
//! strings), timestamps are ISO 8601 with a `T`, arrays become arrays, records objects, json
//! values are embedded, everything else is its text output as a string. `jsonb` prints as
//! PostgreSQL prints jsonb (`[1, 2]`, `{"a": 1}`, keys by length then bytes, numbers without
//! exponents); `json` keeps PostgreSQL's compact forms (`[1,2]`, `{"a":1}`).

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use datafusion::prelude::SessionContext;
use eddy_common::text_out::{self, write_text};
use eddy_common::types::JSONB_METADATA_KEY;

/// Registers `to_json`, `to_jsonb` and `eddy_json_agg` on `ctx`.
pub fn register(ctx: &SessionContext) {
    let any = |n| Signature::any(n, Volatility::Immutable);
    for (name, jsonb, agg_item) in [("to_json", false, false), ("to_jsonb", true, false), ("eddy_json_agg_item", false, true)] {
        ctx.register_udf(ScalarUDF::new_from_impl(JsonFn { name, kind: JsonFnKind::ToJson { jsonb, agg_item }, signature: any(1) }));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(JsonFn { name: "eddy_json_agg", kind: JsonFnKind::AggFinal, signature: any(2) }));
    for (name, jsonb) in [("eddy_json_object_agg", false), ("eddy_jsonb_object_agg", true)] {
        ctx.register_udf(ScalarUDF::new_from_impl(JsonFn { name, kind: JsonFnKind::ObjectAggFinal { jsonb }, signature: any(1) }));
    }
    for (name, jsonb) in [("eddy_json_in", false), ("eddy_jsonb_in", true)] {
        ctx.register_udf(ScalarUDF::new_from_impl(JsonFn { name, kind: JsonFnKind::Input { jsonb }, signature: any(1) }));
    }
    let variadic = || {
        Signature::one_of(
            vec![datafusion::logical_expr::TypeSignature::VariadicAny, datafusion::logical_expr::TypeSignature::Nullary],
            Volatility::Immutable,
        )
    };
    for (name, object, jsonb) in [
        ("json_build_object", true, false),
        ("jsonb_build_object", true, true),
        ("json_build_array", false, false),
        ("jsonb_build_array", false, true),
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(JsonFn { name, kind: JsonFnKind::Build { object, jsonb }, signature: variadic() }));
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
enum JsonFnKind {
    /// `to_json(x)` / `to_jsonb(x)`; `agg_item`: an element of `json_agg`, which starts arrays
    /// and records after the first on a new line ([`NEW_LINE`]).
    ToJson { jsonb: bool, agg_item: bool },
    /// `eddy_json_agg(list of json, sort)`: [`json_agg_final`].
    AggFinal,
    /// `eddy_json[b]_object_agg(list of [key json, value json])`: [`object_agg_final`].
    ObjectAggFinal { jsonb: bool },
    /// `x::jsonb` (validated and normalized; a jsonb value as it is) / `x::json` (validated).
    Input { jsonb: bool },
    /// `json[b]_build_object(k, v, ...)` / `json[b]_build_array(v, ...)`: [`build`].
    Build { object: bool, jsonb: bool },
}

/// The functions of this module. Not closures: `to_json` reads its argument's field to tell a
/// json value (embedded as it is) from text (quoted), and the results are typed jsonb.
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonFn {
    name: &'static str,
    kind: JsonFnKind,
    signature: Signature,
}

impl ScalarUDFImpl for JsonFn {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(Arc::new(eddy_common::ColumnType::Jsonb.to_field(self.name, true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = args.args.iter().map(|a| a.to_array(rows)).collect::<DfResult<Vec<_>>>()?;
        let Some(values) = arrays.first() else {
            // Only the builders take no arguments: `{}` / `[]`.
            let JsonFnKind::Build { object, .. } = self.kind else { return Err(DataFusionError::Plan(format!("{}() needs an argument", self.name))) };
            let out: StringArray = (0..rows).map(|_| Some(if object { "{}" } else { "[]" })).collect();
            return Ok(ColumnarValue::Array(Arc::new(out)));
        };
        let out: StringArray = match self.kind {
            JsonFnKind::Build { object, jsonb } => (0..rows).map(|i| build(&arrays, &args.arg_fields, i, object, jsonb).map(Some)).collect::<DfResult<_>>()?,
            JsonFnKind::ToJson { jsonb, agg_item } => {
                let field = field_at(&args.arg_fields, &arrays, 0);
                let structured = matches!(values.data_type(), DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) | DataType::Struct(_));
                let prefix = if agg_item && structured { NEW_LINE } else { "" };
                (0..values.len())
                    .map(|i| {
                        let mut s = String::from(prefix);
                        Ok(write_json(values, i, &field, jsonb, &mut s).map_err(|e| DataFusionError::External(Box::new(e)))?.then_some(s))
                    })
                    .collect::<DfResult<_>>()?
            }
            JsonFnKind::AggFinal => {
                let Some(ColumnarValue::Scalar(sort)) = args.args.get(1) else {
                    return Err(DataFusionError::Plan("eddy_json_agg(list, sort) takes a constant sort".into()));
                };
                let sort = match sort.cast_to(&DataType::Int64)? {
                    ScalarValue::Int64(Some(1)) => Some(false),
                    ScalarValue::Int64(Some(2)) => Some(true),
                    _ => None,
                };
                (0..rows).map(|i| json_agg_final(values, i, sort)).collect::<DfResult<_>>()?
            }
            JsonFnKind::ObjectAggFinal { jsonb } => (0..rows).map(|i| object_agg_final(values, i, jsonb)).collect::<DfResult<_>>()?,
            JsonFnKind::Input { jsonb } => {
                let already = args.arg_fields.first().is_some_and(|f| f.metadata().contains_key(JSONB_METADATA_KEY));
                let texts = arrow::compute::cast(values, &DataType::Utf8)?;
                let texts = texts.as_string::<i32>();
                texts
                    .iter()
                    .map(|t| match t {
                        None => Ok(None),
                        Some(t) if already => Ok(Some(t.to_string())),
                        Some(t) if jsonb => super::jsonb::normalize(t).map(Some),
                        Some(t) => serde_json::from_str::<serde_json::Value>(t)
                            .map(|_| Some(t.to_string()))
                            .map_err(|e| eddy_common::user_err!(eddy_common::error::sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type json: {e}")),
                    })
                    .collect::<eddy_common::Result<_>>()
                    .map_err(|e| DataFusionError::External(Box::new(e)))?
            }
        };
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// The field of argument `i` (a plain one when DataFusion gave none).
fn field_at(fields: &[FieldRef], arrays: &[ArrayRef], i: usize) -> FieldRef {
    fields.get(i).cloned().unwrap_or_else(|| Arc::new(Field::new("x", arrays[i].data_type().clone(), true)))
}

/// What `json_agg` puts before an array or record element after the first (PostgreSQL's
/// `json_agg_transfn`); its elements carry it from [`JsonFnKind::ToJson`] to the final step.
const NEW_LINE: &str = "\n ";

/// Writes value `row` of `array` as JSON; `false` (nothing written) if it is NULL.
pub fn write_json(array: &ArrayRef, row: usize, field: &Field, jsonb: bool, out: &mut String) -> eddy_common::Result<bool> {
    if array.is_null(row) {
        return Ok(false);
    }
    match array.data_type() {
        DataType::Null => return Ok(false),
        DataType::Boolean => out.push_str(if array.as_boolean().value(row) { "true" } else { "false" }),
        t if t.is_integer() => {
            write_text(array, row, field, out)?;
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) | DataType::Decimal256(..) => {
            let mut s = String::new();
            write_text(array, row, field, &mut s)?;
            if s.contains(['N', 'I']) {
                // NaN and ±Infinity are not JSON numbers.
                out.push_str(&quote(&s));
            } else if jsonb && s.contains('e') {
                // jsonb stores numbers as numeric, which prints without an exponent.
                out.push_str(&super::jsonb_value::canonical_number(&s).unwrap_or(s));
            } else {
                out.push_str(&s);
            }
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let mut s = String::new();
            write_text(array, row, field, &mut s)?;
            if field.metadata().get(JSONB_METADATA_KEY).is_some_and(|t| t == "jsonb") {
                out.push_str(&s);
            } else {
                out.push_str(&quote(&s));
            }
        }
        DataType::Timestamp(_, tz) => {
            let mut s = String::new();
            text_out::write_timestamp(text_out::timestamp_micros(array, row), &mut s);
            let mut s = s.replacen(' ', "T", 1);
            if tz.is_some() && s != "infinity" {
                s.push_str("+00:00");
            }
            out.push_str(&quote(&s));
        }
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => {
            let values: ArrayRef = match array.data_type() {
                DataType::List(_) => array.as_list::<i32>().value(row),
                DataType::LargeList(_) => array.as_list::<i64>().value(row),
                _ => array.as_fixed_size_list().value(row),
            };
            let item = Field::new("item", values.data_type().clone(), true);
            out.push('[');
            for i in 0..values.len() {
                if i > 0 {
                    out.push_str(if jsonb { ", " } else { "," });
                }
                if !write_json(&values, i, &item, jsonb, out)? {
                    out.push_str("null");
                }
            }
            out.push(']');
        }
        DataType::Struct(_) => {
            let s = array.as_struct();
            let mut members = Vec::with_capacity(s.num_columns());
            for (col, f) in s.columns().iter().zip(s.fields()) {
                let mut v = String::new();
                if !write_json(col, row, f, jsonb, &mut v)? {
                    v.push_str("null");
                }
                members.push((f.name().clone(), v));
            }
            // A record is compact in json: `{"a":1,"b":2}`.
            out.push_str(&write_object(members, jsonb, ":", ","));
        }
        _ => {
            let mut s = String::new();
            write_text(array, row, field, &mut s)?;
            out.push_str(&quote(&s));
        }
    }
    Ok(true)
}

/// A JSON string literal, escaped as PostgreSQL escapes it.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The JSON array of the `row`th list of JSON texts (NULL elements are `null`); NULL for a NULL
/// list. `sort` orders the elements by their JSON value (`Some(true)`: descending).
fn json_agg_final(lists: &ArrayRef, row: usize, sort: Option<bool>) -> DfResult<Option<String>> {
    if lists.is_null(row) {
        return Ok(None);
    }
    let values = match lists.data_type() {
        DataType::List(_) => lists.as_list::<i32>().value(row),
        DataType::LargeList(_) => lists.as_list::<i64>().value(row),
        other => return Err(DataFusionError::Internal(format!("eddy_json_agg over {other}"))),
    };
    let values = arrow::compute::cast(&values, &DataType::Utf8)?;
    let texts = values.as_string::<i32>();
    let mut items: Vec<Option<&str>> = texts.iter().collect();
    if let Some(descending) = sort {
        let parsed: Vec<Option<serde_json::Value>> = items.iter().map(|t| t.and_then(|t| serde_json::from_str(t).ok())).collect();
        let mut order: Vec<usize> = (0..items.len()).collect();
        // NULLs last ascending, first descending, as PostgreSQL sorts.
        order.sort_by(|&a, &b| {
            let o = match (&parsed[a], &parsed[b]) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(x), Some(y)) => json_cmp(x, y),
            };
            if descending { o.reverse() } else { o }
        });
        items = order.into_iter().map(|i| items[i]).collect();
    }
    let mut out = String::from("[");
    for (i, item) in items.iter().enumerate() {
        let item = item.unwrap_or("null");
        if i > 0 {
            out.push_str(", ");
            out.push_str(item);
        } else {
            out.push_str(item.strip_prefix(NEW_LINE).unwrap_or(item));
        }
    }
    out.push(']');
    Ok(Some(out))
}

/// Row `row` of `json[b]_build_object` (`object`) or `json[b]_build_array` over `arrays`: keys
/// are their value's text (a NULL key is `22004`, an odd argument count `22023`), values as
/// [`write_json`] writes them; objects as [`write_object`] writes them.
fn build(arrays: &[ArrayRef], fields: &[FieldRef], row: usize, object: bool, jsonb: bool) -> DfResult<String> {
    let err = |state, msg: String| DataFusionError::External(Box::new(eddy_common::user_err!(state, "{msg}")));
    let json = |i: usize| -> DfResult<String> {
        let field = field_at(fields, arrays, i);
        let mut s = String::new();
        if !write_json(&arrays[i], row, &field, jsonb, &mut s).map_err(|e| DataFusionError::External(Box::new(e)))? {
            s.push_str("null");
        }
        Ok(s)
    };
    if !object {
        let items = (0..arrays.len()).map(json).collect::<DfResult<Vec<_>>>()?;
        return Ok(format!("[{}]", items.join(", ")));
    }
    if !arrays.len().is_multiple_of(2) {
        return Err(err(eddy_common::error::sqlstate::INVALID_PARAMETER_VALUE, "argument list must have even number of elements".into()));
    }
    let mut members = Vec::with_capacity(arrays.len() / 2);
    for k in (0..arrays.len()).step_by(2) {
        if arrays[k].is_null(row) {
            return Err(err("22004", format!("argument {}: key must not be null", k + 1)));
        }
        let key = json(k)?;
        let key = match serde_json::from_str::<serde_json::Value>(&key) {
            Ok(serde_json::Value::String(s)) => s,
            _ => key,
        };
        members.push((key, json(k + 1)?));
    }
    Ok(write_object(members, jsonb, " : ", ", "))
}

/// An object of `members` (key, value JSON): json keeps every member in order, `json_key_sep`
/// after each key and `json_member_sep` between members; jsonb orders keys as jsonb does
/// ([`super::jsonb::key_order`]), keeps the last of duplicates and writes `{"k": v, ...}`.
fn write_object(mut members: Vec<(String, String)>, jsonb: bool, json_key_sep: &str, json_member_sep: &str) -> String {
    let (key_sep, member_sep) = if jsonb {
        members.reverse();
        members.sort_by(|a, b| super::jsonb::key_order(&a.0, &b.0));
        members.dedup_by(|a, b| a.0 == b.0);
        (": ", ", ")
    } else {
        (json_key_sep, json_member_sep)
    };
    let body: Vec<String> = members.iter().map(|(k, v)| format!("{}{key_sep}{v}", quote(k))).collect();
    format!("{{{}}}", body.join(member_sep))
}

/// The object of the `row`th list of `[key, value]` pairs (both JSON texts; a string key is its
/// text, any other its JSON), as `json_object_agg` writes it (`{ "k" : v, ... }`, every pair in
/// order) or `jsonb_object_agg` (`{"k": v}`, jsonb's key order, the last of duplicate keys).
/// NULL for a NULL list; a NULL key is an error, as in PostgreSQL.
fn object_agg_final(lists: &ArrayRef, row: usize, jsonb: bool) -> DfResult<Option<String>> {
    if lists.is_null(row) {
        return Ok(None);
    }
    let pairs = match lists.data_type() {
        DataType::List(_) => lists.as_list::<i32>().value(row),
        other => return Err(DataFusionError::Internal(format!("eddy_json_object_agg over {other}"))),
    };
    let mut members: Vec<(String, String)> = Vec::with_capacity(pairs.len());
    for i in 0..pairs.len() {
        let pair = arrow::compute::cast(&pairs.as_list::<i32>().value(i), &DataType::Utf8)?;
        let pair = pair.as_string::<i32>();
        if pair.len() != 2 || pair.is_null(0) {
            return Err(DataFusionError::External(Box::new(eddy_common::user_err!(
                eddy_common::error::sqlstate::INVALID_PARAMETER_VALUE,
                "field name must not be null"
            ))));
        }
        let key = match serde_json::from_str::<serde_json::Value>(pair.value(0)) {
            Ok(serde_json::Value::String(k)) => k,
            _ => pair.value(0).to_string(),
        };
        let value = if pair.is_null(1) { "null".to_string() } else { pair.value(1).to_string() };
        members.push((key, value));
    }
    let object = write_object(members, jsonb, " : ", ", ");
    // json_object_agg pads its braces: `{ "k" : v }`.
    Ok(Some(if jsonb { object } else { format!("{{ {} }}", &object[1..object.len() - 1]) }))
}

/// The order of the SQL values behind two JSON values of the same kind: numbers by value,
/// strings by bytes (ISO dates and timestamps sort as they are), `false` before `true`; values
/// of different kinds by kind.
fn json_cmp(a: &serde_json::Value, b: &serde_json::Value) -> Ordering {
    use serde_json::Value;
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::String(_) => 1,
            Value::Number(_) => 2,
            Value::Bool(_) => 3,
            Value::Array(_) => 4,
            Value::Object(_) => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
            x.total_cmp(&y)
        }
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            x.iter().zip(y).map(|(p, q)| json_cmp(p, q)).find(|o| o.is_ne()).unwrap_or_else(|| x.len().cmp(&y.len()))
        }
        _ => rank(a).cmp(&rank(b)).then_with(|| a.to_string().cmp(&b.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int32Array, ListArray};
    use arrow::datatypes::Int32Type;

    fn json(array: ArrayRef, jsonb: bool) -> Vec<Option<String>> {
        let field = Field::new("x", array.data_type().clone(), true);
        (0..array.len())
            .map(|i| {
                let mut s = String::new();
                write_json(&array, i, &field, jsonb, &mut s).unwrap().then_some(s)
            })
            .collect()
    }

    #[test]
    fn numbers_strings_and_lists_convert_as_postgres_does() {
        assert_eq!(json(Arc::new(Int32Array::from(vec![Some(1), None])), true), vec![Some("1".into()), None]);
        let floats = Arc::new(Float64Array::from(vec![1.5, 1e20, 1.5e-7, f64::NAN]));
        assert_eq!(json(floats.clone(), false), vec![Some("1.5".into()), Some("1e+20".into()), Some("1.5e-07".into()), Some("\"NaN\"".into())]);
        assert_eq!(json(floats, true)[1..3], [Some("100000000000000000000".into()), Some("0.00000015".into())]);
        assert_eq!(json(Arc::new(StringArray::from(vec!["a\"b\n"])), true), vec![Some(r#""a\"b\n""#.into())]);
        let list = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1), None, Some(3)])]));
        assert_eq!(json(list.clone(), true), vec![Some("[1, null, 3]".into())]);
        assert_eq!(json(list, false), vec![Some("[1,null,3]".into())]);
    }

    #[test]
    fn json_values_are_embedded() {
        let field = Field::new("j", DataType::Utf8, true).with_metadata([(JSONB_METADATA_KEY.to_string(), "jsonb".to_string())].into());
        let array: ArrayRef = Arc::new(StringArray::from(vec![r#"{"a": 1}"#]));
        let mut s = String::new();
        write_json(&array, 0, &field, true, &mut s).unwrap();
        assert_eq!(s, r#"{"a": 1}"#);
    }

    #[test]
    fn aggregate_arrays_sort_distinct_values_by_value() {
        let texts = StringArray::from(vec![Some("10"), Some("9"), None, Some("-1")]);
        let list: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new_list_field(DataType::Utf8, true)),
            arrow::buffer::OffsetBuffer::from_lengths([4]),
            Arc::new(texts),
            None,
        ));
        assert_eq!(json_agg_final(&list, 0, None).unwrap().unwrap(), "[10, 9, null, -1]");
        assert_eq!(json_agg_final(&list, 0, Some(false)).unwrap().unwrap(), "[-1, 9, 10, null]");
        assert_eq!(json_agg_final(&list, 0, Some(true)).unwrap().unwrap(), "[null, 10, 9, -1]");
    }
}
