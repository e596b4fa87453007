//! `jsonb` text normalization: what PostgreSQL's jsonb output looks like (`{"a": 1, "b": [1, 2]}`,
//! object keys ordered by length then bytes, duplicate keys keep the last value).

use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};
use serde_json::Value;

/// Parses `text` as JSON and prints it the way PostgreSQL prints `jsonb`.
pub fn normalize(text: &str) -> Result<String> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type json: {e}"))?;
    let mut out = String::with_capacity(text.len());
    write_value(&v, &mut out);
    Ok(out)
}

/// jsonb's order of object keys: shorter first, then by bytes.
pub fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

fn write_value(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by(|a, b| key_order(a, b));
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push_str(": ");
                write_value(&m[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// One step of a JSON path: an object key, or an array index when the step is an integer
/// (negative counts from the end), as PostgreSQL's `->` / `#>` read them.
fn step<'a>(v: &'a Value, key: &str, by_index: bool) -> Option<&'a Value> {
    match v {
        Value::Object(m) if !by_index => m.get(key),
        Value::Array(a) => {
            let i: i64 = key.trim().parse().ok()?;
            let i = if i < 0 { a.len() as i64 + i } else { i };
            a.get(usize::try_from(i).ok()?)
        }
        _ => None,
    }
}

/// A JSON value as `->>` returns it: strings unquoted, JSON null as SQL NULL.
fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => {
            let mut out = String::new();
            write_value(other, &mut out);
            Some(out)
        }
    }
}

fn as_jsonb(v: &Value) -> String {
    let mut out = String::new();
    write_value(v, &mut out);
    out
}

/// `doc -> key` (`text` false) or `doc ->> key` (`text` true); `by_index` when the key was
/// an integer.
pub fn get(doc: &str, key: &str, by_index: bool, text: bool) -> Option<String> {
    let v: Value = serde_json::from_str(doc).ok()?;
    let found = step(&v, key, by_index)?;
    if text { as_text(found) } else { Some(as_jsonb(found)) }
}

/// `doc #> path` / `doc #>> path`.
pub fn get_path(doc: &str, path: &[String], text: bool) -> Option<String> {
    let v: Value = serde_json::from_str(doc).ok()?;
    let mut cur = &v;
    for p in path {
        cur = step(cur, p, matches!(cur, Value::Array(_)))?;
    }
    if text { as_text(cur) } else { Some(as_jsonb(cur)) }
}

/// `a || b` of two jsonb values: objects merge (`b`'s members win), arrays concatenate, and a
/// scalar or object beside an array (or two scalars) become elements of one array.
pub fn concat(a: &str, b: &str) -> Option<String> {
    let (a, b): (Value, Value) = (serde_json::from_str(a).ok()?, serde_json::from_str(b).ok()?);
    let out = match (a, b) {
        (Value::Object(mut x), Value::Object(y)) => {
            x.extend(y);
            Value::Object(x)
        }
        (Value::Array(mut x), Value::Array(y)) => {
            x.extend(y);
            Value::Array(x)
        }
        (Value::Array(mut x), y) => {
            x.push(y);
            Value::Array(x)
        }
        (x, Value::Array(y)) => Value::Array(std::iter::once(x).chain(y).collect()),
        (x, y) => Value::Array(vec![x, y]),
    };
    Some(as_jsonb(&out))
}

/// `jsonb_strip_nulls(doc)`: object members whose value is null removed, at every depth
/// (array elements stay).
pub fn strip_nulls(doc: &str) -> Option<String> {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, x| !x.is_null());
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v: Value = serde_json::from_str(doc).ok()?;
    strip(&mut v);
    Some(as_jsonb(&v))
}

/// `jsonb_pretty(doc)`: one member or element per line, indented by four spaces.
pub fn pretty(doc: &str) -> Option<String> {
    fn write(v: &Value, depth: usize, out: &mut String) {
        let pad = |d: usize| "    ".repeat(d);
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_by(|a, b| key_order(a, b));
                out.push_str("{\n");
                for (i, k) in keys.iter().enumerate() {
                    out.push_str(&pad(depth + 1));
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push_str(": ");
                    write(&m[k.as_str()], depth + 1, out);
                    out.push_str(if i + 1 < keys.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad(depth));
                out.push('}');
            }
            Value::Array(a) => {
                out.push_str("[\n");
                for (i, x) in a.iter().enumerate() {
                    out.push_str(&pad(depth + 1));
                    write(x, depth + 1, out);
                    out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad(depth));
                out.push(']');
            }
            other => write_value(other, out),
        }
    }
    let v: Value = serde_json::from_str(doc).ok()?;
    let mut out = String::new();
    write(&v, 0, &mut out);
    Some(out)
}

/// `jsonb_set(doc, path, new, create_missing)`: `doc` with the value at `path` replaced by
/// `new`; a missing last step is added when `create_missing` (an array index past either end
/// adds at that end). A path through a scalar or a missing inner step leaves `doc` unchanged.
pub fn set(doc: &str, path: &[String], new: &str, create_missing: bool) -> Result<Option<String>> {
    let parse = |t: &str| -> Result<Value> {
        serde_json::from_str(t).map_err(|e| user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type json: {e}"))
    };
    let (mut v, new) = (parse(doc)?, parse(new)?);
    fn go(cur: &mut Value, path: &[String], new: Value, create: bool) {
        let Some((key, rest)) = path.split_first() else { return };
        match cur {
            Value::Object(m) => {
                if rest.is_empty() {
                    if create || m.contains_key(key) {
                        m.insert(key.clone(), new);
                    }
                } else if let Some(next) = m.get_mut(key) {
                    go(next, rest, new, create);
                }
            }
            Value::Array(a) => {
                let Ok(i) = key.parse::<i64>() else { return };
                let len = a.len() as i64;
                let at = if i < 0 { len + i } else { i };
                if (0..len).contains(&at) {
                    if rest.is_empty() {
                        a[at as usize] = new;
                    } else {
                        go(&mut a[at as usize], rest, new, create);
                    }
                } else if rest.is_empty() && create {
                    if at < 0 {
                        a.insert(0, new);
                    } else {
                        a.push(new);
                    }
                }
            }
            _ => {}
        }
    }
    go(&mut v, path, new, create_missing);
    Ok(Some(as_jsonb(&v)))
}

/// What `jsonb - x` deletes: a key (and string elements equal to it), keys, or an element.
pub enum Deletion<'a> {
    Key(&'a str),
    Keys(&'a [String]),
    Index(i64),
}

fn parse_doc(doc: &str) -> Result<Value> {
    serde_json::from_str(doc).map_err(|e| user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type json: {e}"))
}

/// An array position from PostgreSQL's index (negative counts from the end), if in range.
fn position(len: usize, i: i64) -> Option<usize> {
    let at = if i < 0 { len as i64 + i } else { i };
    usize::try_from(at).ok().filter(|&at| at < len)
}

/// `doc - key`, `doc - keys` and `doc - index`, as PostgreSQL deletes (a scalar document, or
/// an object with an index, is an error).
pub fn delete(doc: &str, what: Deletion<'_>) -> Result<String> {
    let mut v = parse_doc(doc)?;
    let keys: Vec<&str> = match &what {
        Deletion::Key(k) => vec![k],
        Deletion::Keys(ks) => ks.iter().map(String::as_str).collect(),
        Deletion::Index(_) => Vec::new(),
    };
    match (&mut v, what) {
        (Value::Object(_), Deletion::Index(_)) => {
            return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot delete from object using integer index"));
        }
        (Value::Object(m), _) => m.retain(|k, _| !keys.contains(&k.as_str())),
        (Value::Array(a), Deletion::Index(i)) => {
            if let Some(at) = position(a.len(), i) {
                a.remove(at);
            }
        }
        (Value::Array(a), _) => a.retain(|x| !matches!(x, Value::String(s) if keys.contains(&s.as_str()))),
        _ => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot delete from scalar")),
    }
    Ok(as_jsonb(&v))
}

/// `doc #- path`: the value at `path` removed (a missing step leaves `doc` as it is).
pub fn delete_path(doc: &str, path: &[String]) -> Result<String> {
    let mut v = parse_doc(doc)?;
    if !v.is_object() && !v.is_array() {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot delete path in scalar"));
    }
    let mut cur = &mut v;
    for (n, step) in path.iter().enumerate() {
        let last = n + 1 == path.len();
        cur = match cur {
            Value::Object(m) if last => {
                m.remove(step);
                break;
            }
            Value::Object(m) => match m.get_mut(step) {
                Some(next) => next,
                None => break,
            },
            Value::Array(a) => {
                let i: i64 = step.trim().parse().map_err(|_| {
                    user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "path element at position {} is not an integer: \"{step}\"", n + 1)
                })?;
                let Some(at) = position(a.len(), i) else { break };
                if last {
                    a.remove(at);
                    break;
                }
                &mut a[at]
            }
            _ => break,
        };
    }
    Ok(as_jsonb(&v))
}

/// What a jsonb set-returning function lists of a document.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// `jsonb_array_elements`: the elements as jsonb.
    Elements,
    /// `jsonb_array_elements_text`: as `->>` gives them.
    ElementsText,
    /// `jsonb_object_keys`.
    Keys,
    /// The keys of `jsonb_each` (`true`: `jsonb_each_text`), with its error for a non-object.
    EachKeys(bool),
    /// The values of `jsonb_each` (as jsonb) and `jsonb_each_text` (as text), in the keys' order.
    Values,
    ValuesText,
}

/// The rows of `jsonb_array_elements[_text](doc)` or `jsonb_object_keys(doc)` (`None`: a JSON
/// null element as text), or PostgreSQL's error for a document of the wrong kind.
pub fn list(doc: &str, what: Listing) -> Result<Vec<Option<String>>> {
    let v = parse_doc(doc)?;
    let kind = |v: &Value| if v.is_object() { "an object" } else if v.is_array() { "an array" } else { "a scalar" };
    match (what, &v) {
        (Listing::Elements, Value::Array(a)) => Ok(a.iter().map(|x| Some(as_jsonb(x))).collect()),
        (Listing::ElementsText, Value::Array(a)) => Ok(a.iter().map(as_text).collect()),
        (Listing::Keys | Listing::EachKeys(_) | Listing::Values | Listing::ValuesText, Value::Object(m)) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by(|a, b| key_order(a, b));
            Ok(keys
                .into_iter()
                .map(|k| match what {
                    Listing::Values => Some(as_jsonb(&m[k.as_str()])),
                    Listing::ValuesText => as_text(&m[k.as_str()]),
                    _ => Some(k.clone()),
                })
                .collect())
        }
        (Listing::EachKeys(true) | Listing::ValuesText, _) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot call jsonb_each_text on a non-object")),
        (Listing::EachKeys(false) | Listing::Values, _) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot call jsonb_each on a non-object")),
        (Listing::Keys, other) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot call jsonb_object_keys on {}", kind(other))),
        (_, other) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot extract elements from {}", kind(other))),
    }
}

/// `a @> b`: `b`'s structure is contained in `a` (PostgreSQL's jsonb containment).
pub fn contains(a: &str, b: &str) -> Option<bool> {
    fn within(a: &Value, b: &Value, top: bool) -> bool {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => y.iter().all(|(k, bv)| x.get(k).is_some_and(|av| within(av, bv, false))),
            (Value::Array(x), Value::Array(y)) => y.iter().all(|bv| x.iter().any(|av| within(av, bv, false))),
            // A top-level array contains a scalar it has as an element.
            (Value::Array(x), scalar) if top && !scalar.is_object() && !scalar.is_array() => x.iter().any(|av| av == scalar),
            (x, y) => x == y,
        }
    }
    let a: Value = serde_json::from_str(a).ok()?;
    let b: Value = serde_json::from_str(b).ok()?;
    Some(within(&a, &b, true))
}

/// `doc ? key`: a top-level object key, or a string element of a top-level array.
pub fn has_key(doc: &str, key: &str) -> Option<bool> {
    let v: Value = serde_json::from_str(doc).ok()?;
    Some(match &v {
        Value::Object(m) => m.contains_key(key),
        Value::Array(a) => a.iter().any(|x| x.as_str() == Some(key)),
        Value::String(s) => s == key,
        _ => false,
    })
}

/// `jsonb_typeof`.
pub fn type_of(doc: &str) -> Option<String> {
    let v: Value = serde_json::from_str(doc).ok()?;
    Some(
        match v {
            Value::Object(_) => "object",
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "boolean",
            Value::Null => "null",
        }
        .to_string(),
    )
}

/// `jsonb_array_length` (`None` for a non-array, which PostgreSQL reports as an error).
pub fn array_length(doc: &str) -> Option<i64> {
    match serde_json::from_str::<Value>(doc).ok()? {
        Value::Array(a) => Some(a.len() as i64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_read_like_postgres() {
        let d = r#"{"a": {"b": [10, "x", null]}, "n": 1}"#;
        assert_eq!(get(d, "a", false, false).as_deref(), Some(r#"{"b": [10, "x", null]}"#));
        assert_eq!(get(d, "n", false, true).as_deref(), Some("1"));
        assert_eq!(get(r#"[1, "two"]"#, "1", true, true).as_deref(), Some("two"));
        assert_eq!(get(r#"[1, "two"]"#, "-1", true, false).as_deref(), Some(r#""two""#));
        assert_eq!(get(d, "missing", false, true), None);
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(get_path(d, &path(&["a", "b", "1"]), true).as_deref(), Some("x"));
        assert_eq!(get_path(d, &path(&["a", "b", "2"]), true), None);
        assert_eq!(contains(d, r#"{"a": {"b": [10]}}"#), Some(true));
        assert_eq!(contains(d, r#"{"n": 2}"#), Some(false));
        assert_eq!(contains("[1, 2]", "1"), Some(true));
        assert_eq!(has_key(d, "n"), Some(true));
        assert_eq!(has_key(r#"["a", 1]"#, "a"), Some(true));
        assert_eq!(type_of(d).as_deref(), Some("object"));
        assert_eq!(array_length("[1, 2, 3]"), Some(3));
    }

    #[test]
    fn output_matches_postgres_jsonb_formatting() {
        assert_eq!(normalize(r#"{"bb":1,"a":[1,2,{"c":null}]}"#).unwrap(), r#"{"a": [1, 2, {"c": null}], "bb": 1}"#);
    }

    #[test]
    fn invalid_json_is_22p02() {
        assert_eq!(normalize("{").unwrap_err().sqlstate, "22P02");
    }
}
