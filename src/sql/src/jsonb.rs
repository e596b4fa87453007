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

fn write_value(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes())));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_matches_postgres_jsonb_formatting() {
        assert_eq!(normalize(r#"{"bb":1,"a":[1,2,{"c":null}]}"#).unwrap(), r#"{"a": [1, 2, {"c": null}], "bb": 1}"#);
    }

    #[test]
    fn invalid_json_is_22p02() {
        assert_eq!(normalize("{").unwrap_err().sqlstate, "22P02");
    }
}
