//! Names as PostgreSQL reads them: identifier folding and `[schema.]name` resolution against
//! the session's `search_path`.

use datafusion::sql::sqlparser::ast::ObjectName;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

use crate::frontend::session::Session;

/// Splits `[schema.]name` (identifiers already case-normalized) using the session's default schema.
pub fn resolve_name(session: &Session, name: &ObjectName) -> Result<(String, String)> {
    let parts: Vec<String> = name.0.iter().map(|p| normalize_ident(&p.to_string())).collect();
    match parts.as_slice() {
        [n] => Ok((session.default_schema(), n.clone())),
        [s, n] => Ok((s.clone(), n.clone())),
        [_db, s, n] => Ok((s.clone(), n.clone())),
        _ => Err(user_err!(sqlstate::SYNTAX_ERROR, "improper qualified name (too many dotted names): {name}")),
    }
}

/// The relation `[schema.]name` names, with the schema and name it resolved to; `42P01` if
/// there is none.
pub fn resolve_relation(session: &Session, name: &ObjectName) -> Result<(String, String, std::sync::Arc<crate::catalog::TableCatalog>)> {
    let (schema, rel) = resolve_name(session, name)?;
    let table = session
        .engine
        .catalog()
        .table(&schema, &rel)
        .cloned()
        .ok_or_else(|| user_err!(sqlstate::UNDEFINED_TABLE, "relation \"{rel}\" does not exist"))?;
    Ok((schema, rel, table))
}

/// PostgreSQL identifier folding: unquoted names are lower-cased, quoted ones kept verbatim.
pub fn normalize_ident(raw: &str) -> String {
    if raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"') {
        raw[1..raw.len() - 1].replace("\"\"", "\"")
    } else {
        raw.to_lowercase()
    }
}
