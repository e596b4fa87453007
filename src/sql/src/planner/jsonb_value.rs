//! A jsonb document in memory, as PostgreSQL holds one: numbers are `numeric` (their text keeps
//! the scale they were written with, `1.50` stays `1.50`, `1e3` is `1000`, and `1 = 1.0`),
//! object keys are unique (the last duplicate wins) and ordered shorter first, then by bytes,
//! and strings may not contain `\u0000`.
//!
//! serde_json is not used for the document because its numbers are `f64` (its
//! `arbitrary_precision` feature would change number handling for every crate in the build);
//! it still decodes and encodes string escapes.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use eddy_common::error::sqlstate;
use eddy_common::{user_err, EddyError, Result};

/// Deepest nesting of arrays and objects a document may have.
pub const MAX_DEPTH: usize = 1000;

/// jsonb's order of object keys: shorter first, then by bytes.
pub fn key_order(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// An object key, ordered as jsonb orders keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key(pub String);

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        key_order(&self.0, &other.0)
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

pub type Members = BTreeMap<Key, Json>;

/// One jsonb value.
#[derive(Clone, Debug)]
pub enum Json {
    Null,
    Bool(bool),
    /// PostgreSQL's `numeric` output of the number: no exponent, no `-0`.
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Members),
}

impl PartialEq for Json {
    /// jsonb equality: numbers by value, everything else by structure.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Json::Null, Json::Null) => true,
            (Json::Bool(a), Json::Bool(b)) => a == b,
            (Json::Number(a), Json::Number(b)) => number_value(a) == number_value(b),
            (Json::String(a), Json::String(b)) => a == b,
            (Json::Array(a), Json::Array(b)) => a == b,
            (Json::Object(a), Json::Object(b)) => a == b,
            _ => false,
        }
    }
}

/// A canonical number's value with its scale dropped: `1.50` and `1.5` give the same.
fn number_value(text: &str) -> &str {
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { text }
}

impl Json {
    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// The kind as `jsonb_typeof` names it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Object(_) => "object",
            Json::Array(_) => "array",
            Json::String(_) => "string",
            Json::Number(_) => "number",
            Json::Bool(_) => "boolean",
            Json::Null => "null",
        }
    }

    /// The document as jsonb prints it: `{"a": 1, "b": [1, 2]}`.
    pub fn write(&self, out: &mut String) {
        match self {
            Json::Object(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_string(&k.0, out);
                    out.push_str(": ");
                    v.write(out);
                }
                out.push('}');
            }
            Json::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    x.write(out);
                }
                out.push(']');
            }
            scalar => scalar.write_scalar(out),
        }
    }

    /// A scalar's text (a container writes nothing).
    pub fn write_scalar(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => out.push_str(n),
            Json::String(s) => write_string(s, out),
            Json::Array(_) | Json::Object(_) => {}
        }
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }
}

/// A JSON string literal of `s`, escaped as PostgreSQL escapes (`\"`, `\\`, `\n` and the
/// other control characters; everything else as it is).
pub fn write_string(s: &str, out: &mut String) {
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

fn syntax(detail: impl std::fmt::Display) -> EddyError {
    user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type json: {detail}")
}

/// Parses `text` as one JSON document (surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Json> {
    let mut p = Parser { text, bytes: text.as_bytes(), pos: 0, depth: 0 };
    p.skip_ws();
    let v = p.value()?;
    p.skip_ws();
    if p.pos < p.bytes.len() {
        return Err(p.unexpected());
    }
    Ok(v)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len() && matches!(self.bytes[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn unexpected(&self) -> EddyError {
        match self.text[self.pos..].chars().next() {
            Some(c) => syntax(format_args!("unexpected character {c:?} at position {}", self.pos + 1)),
            None => syntax("the input ends unexpectedly"),
        }
    }

    fn value(&mut self) -> Result<Json> {
        match self.bytes.get(self.pos) {
            Some(b'{') => self.container(true),
            Some(b'[') => self.container(false),
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.word("true", Json::Bool(true)),
            Some(b'f') => self.word("false", Json::Bool(false)),
            Some(b'n') => self.word("null", Json::Null),
            _ => Err(self.unexpected()),
        }
    }

    fn word(&mut self, word: &str, v: Json) -> Result<Json> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.unexpected())
        }
    }

    /// An object (`{"k": v, ...}`) or an array (`[v, ...]`) starting at the current byte.
    fn container(&mut self, object: bool) -> Result<Json> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(user_err!(sqlstate::STATEMENT_TOO_COMPLEX, "stack depth limit exceeded: a JSON document nests deeper than {MAX_DEPTH} levels"));
        }
        let close = if object { b'}' } else { b']' };
        self.pos += 1;
        let (mut members, mut elements) = (Members::new(), Vec::new());
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&close) {
            self.pos += 1;
        } else {
            loop {
                self.skip_ws();
                if object {
                    if self.bytes.get(self.pos) != Some(&b'"') {
                        return Err(self.unexpected());
                    }
                    let key = self.string()?;
                    self.skip_ws();
                    if self.bytes.get(self.pos) != Some(&b':') {
                        return Err(self.unexpected());
                    }
                    self.pos += 1;
                    self.skip_ws();
                    members.insert(Key(key), self.value()?);
                } else {
                    elements.push(self.value()?);
                }
                self.skip_ws();
                match self.bytes.get(self.pos) {
                    Some(b',') => self.pos += 1,
                    Some(c) if *c == close => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.unexpected()),
                }
            }
        }
        self.depth -= 1;
        Ok(if object { Json::Object(members) } else { Json::Array(elements) })
    }

    /// A string literal starting at the current `"`.
    fn string(&mut self) -> Result<String> {
        let start = self.pos;
        let mut i = start + 1;
        let mut escaped = false;
        loop {
            match self.bytes.get(i) {
                None => return Err(syntax("a string is not terminated")),
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    i += 2;
                }
                Some(c) if *c < 0x20 => {
                    self.pos = i;
                    return Err(syntax(format_args!("a control character inside a string at position {}", i + 1)));
                }
                Some(_) => i += 1,
            }
        }
        self.pos = i + 1;
        if !escaped {
            return Ok(self.text[start + 1..i].to_string());
        }
        let s: String = serde_json::from_str(&self.text[start..=i]).map_err(|e| syntax(format_args!("{e} in the string at position {}", start + 1)))?;
        if s.contains('\0') {
            return Err(user_err!(sqlstate::UNTRANSLATABLE_CHARACTER, "unsupported Unicode escape sequence: \\u0000 cannot be converted to text"));
        }
        Ok(s)
    }

    fn number(&mut self) -> Result<Json> {
        let start = self.pos;
        let b = self.bytes;
        let digits = |i: &mut usize| {
            let from = *i;
            while *i < b.len() && b[*i].is_ascii_digit() {
                *i += 1;
            }
            *i - from
        };
        let mut i = start;
        if b[i] == b'-' {
            i += 1;
        }
        let int_start = i;
        let n = digits(&mut i);
        // JSON allows no leading zeros (`01`) and needs a digit before any point.
        if n == 0 || (n > 1 && b[int_start] == b'0') {
            self.pos = if n == 0 { i } else { int_start + 1 };
            return Err(self.unexpected());
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                self.pos = i;
                return Err(self.unexpected());
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                self.pos = i;
                return Err(self.unexpected());
            }
        }
        self.pos = i;
        canonical_number(&self.text[start..i]).map(Json::Number)
    }
}

/// PostgreSQL's `numeric` text of a decimal literal such as a JSON number (`1.50` → `1.50`,
/// `1e3` → `1000`, `0.1e-2` → `0.001`, `-0` → `0`): the scale is the digits written after
/// the point less the exponent, never below 0. Beyond numeric's 131072 digits before the point
/// or 16383 after it is PostgreSQL's 22003.
pub fn canonical_number(literal: &str) -> Result<String> {
    let bad = || user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type numeric: \"{literal}\"");
    let overflow = || user_err!(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "value overflows numeric format");
    let (negative, rest) = match literal.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, literal.strip_prefix('+').unwrap_or(literal)),
    };
    let (mantissa, exp) = match rest.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().map_err(|_| overflow())?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if (int.is_empty() && frac.is_empty()) || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let scale = (frac.len() as i64).saturating_sub(exp).max(0);
    let first_significant = int.bytes().chain(frac.bytes()).position(|c| c != b'0');
    let int_digits = first_significant.map_or(0, |f| (int.len() as i64).saturating_add(exp).saturating_sub(f as i64));
    if scale > 16383 || int_digits > 131_072 {
        return Err(overflow());
    }
    let scale = scale as usize;
    // The digits and where the point goes among them.
    let all: String = format!("{int}{frac}");
    let point = int.len() as i64 + exp;
    let mut body = String::new();
    if point <= 0 {
        body.push('0');
        if scale > 0 {
            body.push('.');
            body.extend(std::iter::repeat_n('0', (-point) as usize));
            body.push_str(&all);
        }
    } else {
        let point = point as usize;
        if point >= all.len() {
            body.push_str(&all);
            body.extend(std::iter::repeat_n('0', point - all.len()));
        } else {
            body.push_str(&all[..point]);
            body.push('.');
            body.push_str(&all[point..]);
        }
    }
    // The digits after the point are exactly `scale` long: pad, or drop the exponent's excess
    // (zeros only, since the scale covers every digit written).
    let (int_part, frac_part) = body.split_once('.').map_or((body.as_str(), ""), |(i, f)| (i, f));
    let int_part = int_part.trim_start_matches('0');
    let int_part = if int_part.is_empty() { "0" } else { int_part };
    let mut frac_part = frac_part.to_string();
    frac_part.truncate(scale);
    while frac_part.len() < scale {
        frac_part.push('0');
    }
    let zero = int_part == "0" && frac_part.bytes().all(|c| c == b'0');
    let mut out = String::with_capacity(int_part.len() + frac_part.len() + 2);
    if negative && !zero {
        out.push('-');
    }
    out.push_str(int_part);
    if scale > 0 {
        out.push('.');
        out.push_str(&frac_part);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_postgres_numeric_text() {
        for (input, out) in [
            ("1.50", "1.50"),
            ("1e3", "1000"),
            ("1.0e2", "100"),
            ("0.1e-2", "0.001"),
            ("-0", "0"),
            ("-0.0", "0.0"),
            ("12345678901234567890123", "12345678901234567890123"),
            ("0.1234567890123456789", "0.1234567890123456789"),
            ("-1.25e+02", "-125"),
            ("1.5e-07", "0.00000015"),
            ("1E-5", "0.00001"),
            ("120e-1", "12.0"),
            ("0", "0"),
        ] {
            assert_eq!(canonical_number(input).unwrap(), out, "{input}");
        }
        assert_eq!(canonical_number("1e131071").unwrap().len(), 131_072);
        assert_eq!(canonical_number("1e-16383").unwrap().len(), 16_385);
        for overflow in ["1e131072", "1e-16384", "1e99999999999999999999", "0e-20000"] {
            assert_eq!(canonical_number(overflow).unwrap_err().sqlstate, "22003", "{overflow}");
        }
    }

    #[test]
    fn documents_parse_and_print_as_jsonb() {
        let d = parse(r#" {"bb": 1.50, "a": [1e2, "x\ny", null, true], "a": 2} "#).unwrap();
        assert_eq!(d.to_text(), r#"{"a": 2, "bb": 1.50}"#);
        assert!(parse("[1, 1.0]").map(|v| matches!(&v, Json::Array(a) if a[0] == a[1])).unwrap());
        for bad in ["{", "[1,]", "01", "1.", "-", "\"a", "{\"a\" 1}", "[1] x", "nul", "\"\t\""] {
            assert_eq!(parse(bad).unwrap_err().sqlstate, "22P02", "{bad}");
        }
        assert_eq!(parse(r#""\u0000""#).unwrap_err().sqlstate, "22P05");
        assert_eq!(parse(r#""\ud83d\ude00 \"q\"""#).unwrap().to_text(), "\"\u{1f600} \\\"q\\\"\"");
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(&deep).unwrap_err().sqlstate, "54001");
    }
}
