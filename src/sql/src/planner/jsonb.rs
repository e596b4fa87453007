//! `jsonb` text normalization: what PostgreSQL's jsonb output looks like (`{"a": 1, "b": [1, 2]}`,
//! object keys ordered by length then bytes, duplicate keys keep the last value).

use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

pub use super::jsonb_value::key_order;
use super::jsonb_value::{parse, Json, Key};

/// Parses `text` as JSON and prints it the way PostgreSQL prints `jsonb`.
pub fn normalize(text: &str) -> Result<String> {
    Ok(parse(text)?.to_text())
}

/// One step of a JSON path: an object key, or an array index when the step is an integer
/// (negative counts from the end), as PostgreSQL's `->` / `#>` read them.
fn step<'a>(v: &'a Json, key: &str, by_index: bool) -> Option<&'a Json> {
    match v {
        Json::Object(m) if !by_index => m.get(&Key(key.to_string())),
        Json::Array(a) => {
            let i: i64 = key.trim().parse().ok()?;
            let i = if i < 0 { a.len() as i64 + i } else { i };
            a.get(usize::try_from(i).ok()?)
        }
        _ => None,
    }
}

/// A JSON value as `->>` returns it: strings unquoted, JSON null as SQL NULL.
fn as_text(v: &Json) -> Option<String> {
    match v {
        Json::Null => None,
        Json::String(s) => Some(s.clone()),
        other => Some(other.to_text()),
    }
}

/// `doc -> key` (`text` false) or `doc ->> key` (`text` true); `by_index` when the key was
/// an integer.
pub fn get(doc: &str, key: &str, by_index: bool, text: bool) -> Option<String> {
    let v = parse(doc).ok()?;
    let found = step(&v, key, by_index)?;
    if text { as_text(found) } else { Some(found.to_text()) }
}

/// `doc #> path` / `doc #>> path`.
pub fn get_path(doc: &str, path: &[String], text: bool) -> Option<String> {
    let v = parse(doc).ok()?;
    let mut cur = &v;
    for p in path {
        cur = step(cur, p, matches!(cur, Json::Array(_)))?;
    }
    if text { as_text(cur) } else { Some(cur.to_text()) }
}

/// `a || b` of two jsonb values: objects merge (`b`'s members win), arrays concatenate, and a
/// scalar or object beside an array (or two scalars) become elements of one array.
pub fn concat(a: &str, b: &str) -> Option<String> {
    let (a, b) = (parse(a).ok()?, parse(b).ok()?);
    let out = match (a, b) {
        (Json::Object(mut x), Json::Object(y)) => {
            x.extend(y);
            Json::Object(x)
        }
        (Json::Array(mut x), Json::Array(y)) => {
            x.extend(y);
            Json::Array(x)
        }
        (Json::Array(mut x), y) => {
            x.push(y);
            Json::Array(x)
        }
        (x, Json::Array(y)) => Json::Array(std::iter::once(x).chain(y).collect()),
        (x, y) => Json::Array(vec![x, y]),
    };
    Some(out.to_text())
}

/// `jsonb_strip_nulls(doc)`: object members whose value is null removed, at every depth
/// (array elements stay).
pub fn strip_nulls(doc: &str) -> Option<String> {
    fn strip(v: &mut Json) {
        match v {
            Json::Object(m) => {
                m.retain(|_, x| !x.is_null());
                m.values_mut().for_each(strip);
            }
            Json::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = parse(doc).ok()?;
    strip(&mut v);
    Some(v.to_text())
}

/// `jsonb_pretty(doc)`: one member or element per line, indented by four spaces.
pub fn pretty(doc: &str) -> Option<String> {
    fn write(v: &Json, depth: usize, out: &mut String) {
        let pad = |d: usize| "    ".repeat(d);
        match v {
            Json::Object(m) => {
                out.push_str("{\n");
                for (i, (k, x)) in m.iter().enumerate() {
                    out.push_str(&pad(depth + 1));
                    super::jsonb_value::write_string(&k.0, out);
                    out.push_str(": ");
                    write(x, depth + 1, out);
                    out.push_str(if i + 1 < m.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad(depth));
                out.push('}');
            }
            Json::Array(a) => {
                out.push_str("[\n");
                for (i, x) in a.iter().enumerate() {
                    out.push_str(&pad(depth + 1));
                    write(x, depth + 1, out);
                    out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad(depth));
                out.push(']');
            }
            scalar => scalar.write_scalar(out),
        }
    }
    let v = parse(doc).ok()?;
    let mut out = String::new();
    write(&v, 0, &mut out);
    Some(out)
}

/// `jsonb_set(doc, path, new, create_missing)`: `doc` with the value at `path` replaced by
/// `new`; a missing last step is added when `create_missing` (an array index past either end
/// adds at that end). A path through a scalar or a missing inner step leaves `doc` unchanged.
pub fn set(doc: &str, path: &[String], new: &str, create_missing: bool) -> Result<Option<String>> {
    let (mut v, new) = (parse(doc)?, parse(new)?);
    fn go(cur: &mut Json, path: &[String], new: Json, create: bool) {
        let Some((key, rest)) = path.split_first() else { return };
        match cur {
            Json::Object(m) => {
                let key = Key(key.clone());
                if rest.is_empty() {
                    if create || m.contains_key(&key) {
                        m.insert(key, new);
                    }
                } else if let Some(next) = m.get_mut(&key) {
                    go(next, rest, new, create);
                }
            }
            Json::Array(a) => {
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
    Ok(Some(v.to_text()))
}

/// What `jsonb - x` deletes: a key (and string elements equal to it), keys, or an element.
pub enum Deletion<'a> {
    Key(&'a str),
    Keys(&'a [String]),
    Index(i64),
}

/// An array position from PostgreSQL's index (negative counts from the end), if in range.
fn position(len: usize, i: i64) -> Option<usize> {
    let at = if i < 0 { len as i64 + i } else { i };
    usize::try_from(at).ok().filter(|&at| at < len)
}

/// `doc - key`, `doc - keys` and `doc - index`, as PostgreSQL deletes (a scalar document, or
/// an object with an index, is an error).
pub fn delete(doc: &str, what: Deletion<'_>) -> Result<String> {
    let mut v = parse(doc)?;
    let keys: Vec<&str> = match &what {
        Deletion::Key(k) => vec![k],
        Deletion::Keys(ks) => ks.iter().map(String::as_str).collect(),
        Deletion::Index(_) => Vec::new(),
    };
    match (&mut v, what) {
        (Json::Object(_), Deletion::Index(_)) => {
            return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot delete from object using integer index"));
        }
        (Json::Object(m), _) => m.retain(|k, _| !keys.contains(&k.0.as_str())),
        (Json::Array(a), Deletion::Index(i)) => {
            if let Some(at) = position(a.len(), i) {
                a.remove(at);
            }
        }
        (Json::Array(a), _) => a.retain(|x| !matches!(x, Json::String(s) if keys.contains(&s.as_str()))),
        _ => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot delete from scalar")),
    }
    Ok(v.to_text())
}

/// `doc #- path`: the value at `path` removed (a missing step leaves `doc` as it is).
pub fn delete_path(doc: &str, path: &[String]) -> Result<String> {
    let mut v = parse(doc)?;
    if !matches!(v, Json::Object(_) | Json::Array(_)) {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot delete path in scalar"));
    }
    let mut cur = &mut v;
    for (n, step) in path.iter().enumerate() {
        let last = n + 1 == path.len();
        cur = match cur {
            Json::Object(m) if last => {
                m.remove(&Key(step.clone()));
                break;
            }
            Json::Object(m) => match m.get_mut(&Key(step.clone())) {
                Some(next) => next,
                None => break,
            },
            Json::Array(a) => {
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
    Ok(v.to_text())
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
    let v = parse(doc)?;
    let kind = |v: &Json| match v {
        Json::Object(_) => "an object",
        Json::Array(_) => "an array",
        _ => "a scalar",
    };
    match (what, &v) {
        (Listing::Elements, Json::Array(a)) => Ok(a.iter().map(|x| Some(x.to_text())).collect()),
        (Listing::ElementsText, Json::Array(a)) => Ok(a.iter().map(as_text).collect()),
        (Listing::Keys | Listing::EachKeys(_) | Listing::Values | Listing::ValuesText, Json::Object(m)) => Ok(m
            .iter()
            .map(|(k, x)| match what {
                Listing::Values => Some(x.to_text()),
                Listing::ValuesText => as_text(x),
                _ => Some(k.0.clone()),
            })
            .collect()),
        (Listing::EachKeys(true) | Listing::ValuesText, _) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot call jsonb_each_text on a non-object")),
        (Listing::EachKeys(false) | Listing::Values, _) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot call jsonb_each on a non-object")),
        (Listing::Keys, other) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot call jsonb_object_keys on {}", kind(other))),
        (_, other) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot extract elements from {}", kind(other))),
    }
}

/// `a @> b`: `b`'s structure is contained in `a` (PostgreSQL's jsonb containment; numbers
/// compare by value, so `1` contains `1.0`).
pub fn contains(a: &str, b: &str) -> Option<bool> {
    fn within(a: &Json, b: &Json, top: bool) -> bool {
        match (a, b) {
            (Json::Object(x), Json::Object(y)) => y.iter().all(|(k, bv)| x.get(k).is_some_and(|av| within(av, bv, false))),
            (Json::Array(x), Json::Array(y)) => y.iter().all(|bv| x.iter().any(|av| within(av, bv, false))),
            // A top-level array contains a scalar it has as an element.
            (Json::Array(x), scalar) if top && !matches!(scalar, Json::Object(_) | Json::Array(_)) => x.iter().any(|av| av == scalar),
            (x, y) => x == y,
        }
    }
    let (a, b) = (parse(a).ok()?, parse(b).ok()?);
    Some(within(&a, &b, true))
}

/// `doc ? key`: a top-level object key, or a string element of a top-level array.
pub fn has_key(doc: &str, key: &str) -> Option<bool> {
    Some(match parse(doc).ok()? {
        Json::Object(m) => m.contains_key(&Key(key.to_string())),
        Json::Array(a) => a.iter().any(|x| matches!(x, Json::String(s) if s == key)),
        Json::String(s) => s == key,
        _ => false,
    })
}

/// `jsonb_typeof`.
pub fn type_of(doc: &str) -> Option<String> {
    Some(parse(doc).ok()?.type_name().to_string())
}

/// `jsonb_array_length`; of a non-array, PostgreSQL's error message (`None` for text that is
/// not JSON, which a jsonb value never is).
pub fn array_length(doc: &str) -> Result<Option<i64>, &'static str> {
    match parse(doc) {
        Ok(Json::Array(a)) => Ok(Some(a.len() as i64)),
        Ok(Json::Object(_)) => Err("cannot get array length of a non-array"),
        Ok(_) => Err("cannot get array length of a scalar"),
        Err(_) => Ok(None),
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
        assert_eq!(array_length("[1, 2, 3]"), Ok(Some(3)));
        assert_eq!(array_length("null"), Err("cannot get array length of a scalar"));
        assert_eq!(array_length(r#"{"a": 1}"#), Err("cannot get array length of a non-array"));
    }

    #[test]
    fn output_matches_postgres_jsonb_formatting() {
        assert_eq!(normalize(r#"{"bb":1,"a":[1,2,{"c":null}]}"#).unwrap(), r#"{"a": [1, 2, {"c": null}], "bb": 1}"#);
        assert_eq!(normalize(r#"{"a":1.50,"b":[1e2, 0.1e-2, -0]}"#).unwrap(), r#"{"a": 1.50, "b": [100, 0.001, 0]}"#);
        assert_eq!(get(r#"{"a": 1.50}"#, "a", false, true).as_deref(), Some("1.50"));
        assert_eq!(contains(r#"{"a": [1, 2.50]}"#, r#"{"a": [2.5, 1.0]}"#), Some(true));
        assert_eq!(contains("[1, 2]", "2.0"), Some(true));
    }

    #[test]
    fn invalid_json_is_22p02() {
        assert_eq!(normalize("{").unwrap_err().sqlstate, "22P02");
    }
}
