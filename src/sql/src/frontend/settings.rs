//! `SET`, `SHOW` and `RESET` of session settings.


use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, Set, Value,
};
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

use crate::frontend::output::{command, text_rows, Output};
use crate::frontend::session::Session;
use crate::planner::settings::{canonical_var, default_vars, display_var_name, REPORTED};


impl Session {
    pub(crate) fn set_var(&mut self, key: &str, value: String) {
        if key == "search_path" {
            let schema = value.split(',').map(|s| s.trim().trim_matches('"')).find(|s| *s != "$user" && !s.is_empty());
            if let Some(s) = schema {
                if self.engine.catalog().schema(s).is_none() {
                    self.notice(&format!("schema \"{s}\" does not exist"));
                }
            }
        }
        self.vars.write().insert(key.to_string(), value.clone());
        if REPORTED.contains(&key) {
            self.changed.push((display_var_name(key).to_string(), value));
        }
    }

    pub(crate) fn set(&mut self, set: &Set) -> Result<Output> {
        match set {
            Set::SingleAssignment { variable, values, .. } => {
                let key = canonical_var(&variable.to_string());
                let value = values.iter().map(value_text).collect::<Vec<_>>().join(", ");
                let value = if value.eq_ignore_ascii_case("default") {
                    default_vars(&self.user).get(&key).cloned().unwrap_or_default()
                } else {
                    value
                };
                let value = match key.as_str() {
                    "timezone" => normalize_timezone(&value)?,
                    "backfill_progress_interval" => format!("{}ms", parse_progress_interval(&value)?),
                    "barrier_interval" | "barrier_interval_ms" => {
                        let ms = parse_millis(&key, &value)?;
                        self.engine.barrier.set_interval(std::time::Duration::from_millis(ms));
                        format!("{ms}ms")
                    }
                    "backfill_epoch_rows" => match value.trim_matches('\'').parse::<u64>() {
                        Ok(n) if n >= 1 => n.to_string(),
                        _ => {
                            return Err(user_err!(
                                sqlstate::INVALID_PARAMETER_VALUE,
                                "invalid value for parameter \"backfill_epoch_rows\": \"{value}\" (a positive number of rows)"
                            ))
                        }
                    },
                    "background_ddl" => match value.trim_matches('\'').to_ascii_lowercase().as_str() {
                        "true" | "on" | "yes" | "1" => "true".to_string(),
                        "false" | "off" | "no" | "0" => "false".to_string(),
                        _ => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "parameter \"background_ddl\" requires a Boolean value")),
                    },
                    "streaming_parallelism" => match value.trim_matches('\'').parse::<u16>() {
                        Ok(n) if n <= eddy_common::codec::VNODE_COUNT => n.to_string(),
                        _ => {
                            return Err(user_err!(
                                sqlstate::INVALID_PARAMETER_VALUE,
                                "invalid value for parameter \"streaming_parallelism\": \"{value}\" (a number of actors from 1 to {}, or 0 for one per core)",
                                eddy_common::codec::VNODE_COUNT
                            ))
                        }
                    },
                    "client_encoding" => {
                        let v = value.to_ascii_uppercase().replace('-', "");
                        if v != "UTF8" && v != "UNICODE" {
                            return Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "client encoding \"{value}\" is not supported; Eddy speaks UTF8"));
                        }
                        "UTF8".to_string()
                    }
                    _ => value,
                };
                self.set_var(&key, value);
                Ok(command("SET"))
            }
            Set::SetTimeZone { value, .. } => {
                let v = normalize_timezone(&value_text(value))?;
                self.set_var("timezone", v);
                Ok(command("SET"))
            }
            _ => Ok(command("SET")),
        }
    }

    pub(crate) fn show(&mut self, variable: &[datafusion::sql::sqlparser::ast::Ident]) -> Result<Output> {
        let name = show_column_name(variable);
        if name == "all" {
            let rows = self.vars.read().iter().map(|(k, v)| vec![display_var_name(k).to_string(), v.clone(), String::new()]).collect();
            return text_rows(&["name", "setting", "description"], rows);
        }
        let value = self
            .var(&name)
            .ok_or_else(|| user_err!(sqlstate::UNDEFINED_OBJECT, "unrecognized configuration parameter \"{name}\""))?;
        text_rows(&[display_var_name(&canonical_var(&name))], vec![vec![value]])
    }
}

pub(crate) fn value_text(e: &SqlExpr) -> String {
    match e {
        SqlExpr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) | Value::EscapedStringLiteral(s) => s.clone(),
            other => other.to_string(),
        },
        SqlExpr::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    }
}

pub(crate) fn show_column_name(variable: &[datafusion::sql::sqlparser::ast::Ident]) -> String {
    let joined = variable.iter().map(|i| i.value.to_ascii_lowercase()).collect::<Vec<_>>().join(" ");
    match joined.as_str() {
        "transaction isolation level" => "transaction_isolation".into(),
        "time zone" => "timezone".into(),
        other => other.replace(' ', "_"),
    }
}

/// Parses `250`, `250ms` or `1s` as milliseconds.
/// A duration setting in milliseconds (`250ms`, `1s` or a bare number of milliseconds).
pub(crate) fn parse_millis(key: &str, v: &str) -> Result<u64> {
    let t = v.trim().to_ascii_lowercase();
    let (num, mul) = if let Some(n) = t.strip_suffix("ms") {
        (n.trim(), 1)
    } else if let Some(n) = t.strip_suffix('s') {
        (n.trim(), 1000)
    } else {
        (t.as_str(), 1)
    };
    match num.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n * mul),
        _ => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "invalid value for {key}: \"{v}\" (use e.g. 250ms or 1s)")),
    }
}

/// `backfill_progress_interval`: a duration, or 0 for no notices but the backfill's end.
pub(crate) fn parse_progress_interval(v: &str) -> Result<u64> {
    if v.trim().trim_end_matches("ms").trim_end_matches('s').trim() == "0" {
        return Ok(0);
    }
    parse_millis("backfill_progress_interval", v)
}

fn normalize_timezone(v: &str) -> Result<String> {
    let t = v.trim().trim_matches('\'');
    let upper = t.to_ascii_uppercase();
    if ["UTC", "ETC/UTC", "GMT", "Z", "ZULU", "UCT", "LOCAL", "DEFAULT", "ETC/GMT", "+00:00", "0"].contains(&upper.as_str()) {
        return Ok(if upper == "ETC/UTC" { "Etc/UTC".into() } else { "UTC".into() });
    }
    Err(user_err!(
        sqlstate::FEATURE_NOT_SUPPORTED,
        "time zone \"{t}\" is not supported yet; Eddy sessions run in UTC"
    ))
}
