//! RisingWave's connector clauses, which sqlparser does not know, taken out of a statement's
//! text before it is parsed: `WITH (key = value, ...)` after the column list (keys may be
//! dotted, `fields.v.kind`, `properties.bootstrap.server`), `FORMAT x ENCODE y [(...)]`, and
//! `INCLUDE key | partition | offset | timestamp [AS name]` (a Kafka message's metadata as
//! extra columns, stored as options `include.<what> = name`).

use datafusion::sql::sqlparser::tokenizer::Token;
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, Result};

use crate::frontend::split::tokens_with_offsets;

/// The connector clauses of a `CREATE SOURCE` / `CREATE TABLE` statement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConnectorClauses {
    /// The statement without them.
    pub text: String,
    /// `WITH (...)` options, keys lower-cased, in order.
    pub options: Vec<(String, String)>,
    /// `FORMAT x ENCODE y`, upper-cased.
    pub format: Option<(String, String)>,
    /// `ENCODE y (key = value, ...)` options, keys lower-cased.
    pub encode_options: Vec<(String, String)>,
    /// `INCLUDE what [AS name]`: `what` lower-cased, in order.
    pub includes: Vec<(String, Option<String>)>,
}

/// The text of a value token (`'abc'`, `123`, `true`, an identifier).
fn value_text(t: &Token) -> Option<String> {
    match t {
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) | Token::EscapedStringLiteral(s) => Some(s.replace("''", "'")),
        Token::Number(n, _) => Some(n.clone()),
        Token::Word(w) => Some(w.value.clone()),
        _ => None,
    }
}

/// Parses `( key = value, ... )` starting at the `(` at `code[open]`: the options and the index
/// of the closing `)`.
fn option_list(code: &[&(Token, usize)], open: usize) -> Result<(Vec<(String, String)>, usize)> {
    let bad = |what: &str| user_err!(sqlstate::SYNTAX_ERROR, "syntax error in options: {what}");
    let mut out = Vec::new();
    let mut j = open + 1;
    if matches!(code.get(j).map(|(t, _)| t), Some(Token::RParen)) {
        return Ok((out, j));
    }
    loop {
        // A key: words and numbers joined by dots.
        let mut key = String::new();
        while let Some((t, _)) = code.get(j) {
            match t {
                Token::Word(w) => key.push_str(&w.value),
                Token::Number(n, _) => key.push_str(n),
                Token::Period => key.push('.'),
                Token::SingleQuotedString(s) if key.is_empty() => key.push_str(s),
                _ => break,
            }
            j += 1;
        }
        if key.is_empty() {
            return Err(bad("expected an option name"));
        }
        if !matches!(code.get(j).map(|(t, _)| t), Some(Token::Eq)) {
            return Err(bad(&format!("expected = after {key}")));
        }
        let value = code.get(j + 1).and_then(|(t, _)| value_text(t)).ok_or_else(|| bad(&format!("expected a value for {key}")))?;
        out.push((key.to_ascii_lowercase(), value));
        j += 2;
        match code.get(j).map(|(t, _)| t) {
            Some(Token::Comma) => j += 1,
            Some(Token::RParen) => return Ok((out, j)),
            _ => return Err(bad("expected , or )")),
        }
    }
}

/// Takes the connector clauses out of `sql` (a `CREATE` statement whose column list, if any,
/// comes first). `Ok(None)` when it has none.
pub fn take_connector_clauses(sql: &str) -> Result<Option<ConnectorClauses>> {
    let Some(tokens) = tokens_with_offsets(sql) else { return Ok(None) };
    let code: Vec<&(Token, usize)> = tokens.iter().filter(|(t, _)| !matches!(t, Token::Whitespace(_))).collect();
    let is = |i: usize, w: &str| matches!(code.get(i).map(|(t, _)| t), Some(Token::Word(x)) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    let at = |i: usize| code.get(i).map(|(_, o)| *o).unwrap_or(sql.len());
    let bad = |what: &str| user_err!(sqlstate::SYNTAX_ERROR, "syntax error in {what}");
    let mut out = ConnectorClauses::default();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    while i < code.len() {
        match &code[i].0 {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        if depth == 0 && is(i, "WITH") && matches!(code.get(i + 1).map(|(t, _)| t), Some(Token::LParen)) {
            let start = at(i);
            let (options, j) = option_list(&code, i + 1)?;
            out.options.extend(options);
            cuts.push((start, at(j + 1)));
            i = j + 1;
            continue;
        }
        if depth == 0 && is(i, "INCLUDE") {
            if let Some(Token::Word(what)) = code.get(i + 1).map(|(t, _)| t) {
                let start = at(i);
                let what = what.value.to_ascii_lowercase();
                let (alias, j) = if is(i + 2, "AS") {
                    match code.get(i + 3).map(|(t, _)| t) {
                        Some(Token::Word(w)) => (Some(if w.quote_style.is_some() { w.value.clone() } else { w.value.to_ascii_lowercase() }), i + 4),
                        _ => return Err(bad("INCLUDE ... AS")),
                    }
                } else {
                    (None, i + 2)
                };
                out.includes.push((what, alias));
                cuts.push((start, at(j)));
                i = j;
                continue;
            }
        }
        if depth == 0 && is(i, "FORMAT") && is(i + 2, "ENCODE") {
            let start = at(i);
            let word = |k: usize| match code.get(k).map(|(t, _)| t) {
                Some(Token::Word(w)) => Some(w.value.to_ascii_uppercase()),
                _ => None,
            };
            let (format, encode) = (word(i + 1).ok_or_else(|| bad("FORMAT"))?, word(i + 3).ok_or_else(|| bad("ENCODE"))?);
            out.format = Some((format, encode));
            let mut j = i + 4;
            if matches!(code.get(j).map(|(t, _)| t), Some(Token::LParen)) {
                let (options, end) = option_list(&code, j)?;
                out.encode_options = options;
                j = end + 1;
            }
            cuts.push((start, at(j)));
            i = j;
            continue;
        }
        i += 1;
    }
    if cuts.is_empty() {
        return Ok(None);
    }
    let mut text = String::with_capacity(sql.len());
    let mut from = 0;
    for (a, b) in cuts {
        text.push_str(&sql[from..a]);
        from = b;
    }
    text.push_str(&sql[from..]);
    out.text = text;
    Ok(Some(out))
}

/// A connector's stored options: the `WITH` options, `FORMAT`/`ENCODE` under `format` and
/// `encode`, `ENCODE (...)` options under `encode.`, and the creation time generators count
/// their timestamps from (so a replay generates the same values).
pub(crate) fn connector_options(clauses: &ConnectorClauses) -> Result<std::collections::BTreeMap<String, String>> {
    let mut options: std::collections::BTreeMap<String, String> = clauses.options.iter().cloned().collect();
    let Some(connector) = options.get("connector").cloned() else {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "a source needs the option connector = '...'"));
    };
    if let Some((format, encode)) = &clauses.format {
        // Connectors produce append-only streams of rows: only the plain format means anything,
        // but for Kafka's keyed topics, which a table with a primary key upserts.
        if format != "PLAIN" && !(format == "UPSERT" && connector.eq_ignore_ascii_case("kafka")) {
            return Err(not_supported!("FORMAT {format} for a {connector} source (only FORMAT PLAIN)"));
        }
        options.insert("format".into(), format.clone());
        options.insert("encode".into(), encode.clone());
    }
    for (k, v) in &clauses.encode_options {
        options.insert(format!("encode.{k}"), v.clone());
    }
    for (what, alias) in &clauses.includes {
        if !connector.eq_ignore_ascii_case("kafka") {
            return Err(not_supported!("INCLUDE {what} for a {connector} source (only kafka sources include message metadata)"));
        }
        let Some((_, default, _)) = eddy_connector::kafka::INCLUDABLE.iter().find(|(w, _, _)| w == what) else {
            return Err(not_supported!("INCLUDE {what} (supported: key, partition, offset, timestamp)"));
        };
        let name = alias.clone().unwrap_or_else(|| default.to_string());
        if options.insert(format!("include.{what}"), name).is_some() {
            return Err(user_err!(sqlstate::SYNTAX_ERROR, "INCLUDE {what} is given twice"));
        }
    }
    let now_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0);
    options.entry(eddy_connector::datagen::BASE_TIME_OPTION.to_string()).or_insert_with(|| now_us.to_string());
    Ok(options)
}

/// Appends the columns a connector's `INCLUDE` clauses add (stored in `options`) to `columns`,
/// after the declared ones: the key as `bytea`, partition and offset as `varchar`, the message
/// timestamp as `timestamptz`.
pub(crate) fn add_included_columns(columns: &mut Vec<crate::catalog::ColumnCatalog>, options: &std::collections::BTreeMap<String, String>) -> Result<()> {
    use eddy_common::types::ColumnType;
    use eddy_connector::kafka::Include;
    for (what, _, include) in eddy_connector::kafka::INCLUDABLE {
        let Some(name) = options.get(&format!("include.{what}")) else { continue };
        if columns.iter().any(|c| c.name == *name) {
            return Err(user_err!(sqlstate::DUPLICATE_COLUMN, "column \"{name}\" of INCLUDE {what} is also a declared column"));
        }
        let ty = match include {
            Include::Key => ColumnType::Bytea,
            Include::Timestamp => ColumnType::Timestamptz,
            Include::Partition | Include::Offset => ColumnType::Varchar(None),
        };
        columns.push(crate::catalog::ColumnCatalog { name: name.clone(), ty, not_null: false, default: None, hidden: false });
    }
    Ok(())
}

/// A sink's stored options: the `WITH` options, with `FORMAT`/`ENCODE` under `format` and
/// `encode` and `ENCODE (...)` options under `encode.`.
pub(crate) fn sink_options(clauses: &ConnectorClauses) -> std::collections::BTreeMap<String, String> {
    let mut options: std::collections::BTreeMap<String, String> = clauses.options.iter().cloned().collect();
    if let Some((format, encode)) = &clauses.format {
        options.insert("format".into(), format.clone());
        options.insert("encode".into(), encode.clone());
    }
    for (k, v) in &clauses.encode_options {
        options.insert(format!("encode.{k}"), v.clone());
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_options_and_format_come_out_and_the_rest_parses() {
        let c = take_connector_clauses(
            "CREATE SOURCE s (a INT, b VARCHAR) WITH (connector = 'datagen', fields.a.kind = 'sequence', datagen.rows.per.second = 100) FORMAT PLAIN ENCODE JSON",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.text.trim(), "CREATE SOURCE s (a INT, b VARCHAR)");
        assert_eq!(c.options[1], ("fields.a.kind".to_string(), "sequence".to_string()));
        assert_eq!(c.options[2].1, "100");
        assert_eq!(c.format, Some(("PLAIN".into(), "JSON".into())));
        let c = take_connector_clauses("CREATE SOURCE s (a INT) WITH (connector = 'posix_fs') FORMAT PLAIN ENCODE CSV (without_header = 'true', delimiter = ',')")
            .unwrap()
            .unwrap();
        assert_eq!(c.encode_options, vec![("without_header".into(), "true".into()), ("delimiter".into(), ",".into())]);
        assert_eq!(c.text.trim(), "CREATE SOURCE s (a INT)");
    }

    #[test]
    fn include_clauses_come_out_with_their_names() {
        let c = take_connector_clauses("CREATE SOURCE s (a INT) INCLUDE key AS k INCLUDE \"offset\" INCLUDE timestamp AS \"At\" WITH (connector = 'kafka', topic = 't')")
            .unwrap()
            .unwrap();
        assert_eq!(c.text.split_whitespace().collect::<Vec<_>>(), ["CREATE", "SOURCE", "s", "(a", "INT)"]);
        assert_eq!(c.includes, vec![("key".into(), Some("k".into())), ("offset".into(), None), ("timestamp".into(), Some("At".into()))]);
        let options = connector_options(&c).unwrap();
        assert_eq!(options.get("include.offset").map(String::as_str), Some("_rw_kafka_offset"));
        assert_eq!(options.get("include.timestamp").map(String::as_str), Some("At"));
        // A covering index's INCLUDE (columns) is not a connector clause.
        assert_eq!(take_connector_clauses("CREATE INDEX i ON t (a) INCLUDE (b)").unwrap(), None);
    }

    #[test]
    fn a_with_inside_the_column_list_or_a_query_is_not_taken() {
        assert_eq!(take_connector_clauses("CREATE TABLE t (a INT)").unwrap(), None);
        let e = take_connector_clauses("CREATE SOURCE s (a INT) WITH (connector 'x')").unwrap_err();
        assert_eq!(e.sqlstate, sqlstate::SYNTAX_ERROR);
    }
}
