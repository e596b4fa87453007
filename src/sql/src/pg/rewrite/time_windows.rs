//! RisingWave's time-window table functions, rewritten into plain SQL every later layer knows:
//!
//! * `TUMBLE(t, ts, size [, offset])` → `(SELECT *, s AS window_start, s + size AS window_end
//!   FROM t)` with `s = date_bin(size, ts - offset) + offset`: one window per row.
//! * `HOP(t, ts, slide, size [, offset])` → the `UNION ALL` of `size / slide` such selects whose
//!   starts step back one `slide` each: every window of length `size` containing `ts`.
//!
//! The derived table keeps the alias (default: the table's name), so `t.col` still resolves.
//! `HOP` needs constant intervals with `size` a multiple of `slide` (as RisingWave requires).

use datafusion::sql::sqlparser::ast::{DateTimeField, Expr, TableAlias, TableFactor, Value};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

/// Most windows one row may fall in (`size / slide` of a HOP).
const MAX_HOP_WINDOWS: i64 = 1024;

/// The derived table replacing `fname(args) alias` (`fname` is `tumble` or `hop`).
pub(super) fn time_window(fname: &str, args: &[Expr], alias: Option<TableAlias>) -> Result<TableFactor> {
    let usage = || {
        user_err!(
            sqlstate::UNDEFINED_FUNCTION,
            "{}",
            if fname == "tumble" {
                "TUMBLE takes (table, time column, window size [, offset])"
            } else {
                "HOP takes (table, time column, slide, window size [, offset])"
            }
        )
    };
    let table = match args.first() {
        Some(Expr::Identifier(i)) => i.to_string(),
        Some(Expr::CompoundIdentifier(parts)) => parts.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("."),
        _ => return Err(usage()),
    };
    let base = match args.first() {
        Some(Expr::Identifier(i)) => i.clone(),
        Some(Expr::CompoundIdentifier(parts)) => parts.last().cloned().ok_or_else(usage)?,
        _ => return Err(usage()),
    };
    let ts = args.get(1).ok_or_else(usage)?;
    // A size, slide or offset written as a bare string ('+6 HOURS') is an interval.
    let typed: Vec<Expr> = args.iter().map(typed_interval).collect();
    let args = typed.as_slice();
    let (sql, n_args) = match fname {
        "tumble" => {
            let size = args.get(2).ok_or_else(usage)?;
            let start = start_expr(ts, size, args.get(3));
            (format!("SELECT *, {start} AS window_start, {start} + {size} AS window_end FROM {table}"), 4)
        }
        _ => {
            let (slide, size) = (args.get(2).ok_or_else(usage)?, args.get(3).ok_or_else(usage)?);
            let (slide_us, size_us) = (micros(slide)?, micros(size)?);
            if slide_us <= 0 || size_us <= 0 || size_us % slide_us != 0 {
                return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "HOP window size ({size}) must be a positive multiple of its slide ({slide})"));
            }
            let n = size_us / slide_us;
            if n > MAX_HOP_WINDOWS {
                return Err(user_err!(sqlstate::PROGRAM_LIMIT_EXCEEDED, "HOP puts each row in {n} windows; at most {MAX_HOP_WINDOWS} are supported"));
            }
            let start = start_expr(ts, slide, args.get(4));
            let branches: Vec<String> = (0..n)
                .map(|k| {
                    let s = if k == 0 { start.clone() } else { format!("({start} - INTERVAL '{} microseconds')", k * slide_us) };
                    format!("SELECT *, {s} AS window_start, {s} + {size} AS window_end FROM {table}")
                })
                .collect();
            (branches.join(" UNION ALL "), 5)
        }
    };
    if args.len() > n_args {
        return Err(usage());
    }
    let query = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| user_err!(sqlstate::SYNTAX_ERROR, "{fname}: {e}"))?;
    let alias = alias.unwrap_or(TableAlias { explicit: true, name: base, columns: vec![], at: None });
    Ok(TableFactor::Derived { lateral: false, subquery: query, alias: Some(alias), sample: None })
}

/// `e` as an interval: a bare string literal becomes `CAST('...' AS INTERVAL)`.
fn typed_interval(e: &Expr) -> Expr {
    match e {
        Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_)) => Expr::Cast {
            kind: datafusion::sql::sqlparser::ast::CastKind::Cast,
            expr: Box::new(e.clone()),
            data_type: datafusion::sql::sqlparser::ast::DataType::Interval { fields: None, precision: None },
            array: false,
            format: None,
        },
        other => other.clone(),
    }
}

/// `date_bin(step, ts - offset) + offset`: the start of the `step`-aligned window of `ts`.
fn start_expr(ts: &Expr, step: &Expr, offset: Option<&Expr>) -> String {
    match offset {
        Some(o) => format!("(date_bin({step}, {ts} - {o}) + {o})"),
        None => format!("date_bin({step}, {ts})"),
    }
}

/// A constant interval in microseconds (see [`micros`]), for other clauses that need one.
pub(crate) fn interval_micros(e: &Expr) -> Result<i64> {
    micros(e)
}

/// A constant interval in microseconds: `INTERVAL '10' SECOND`, `INTERVAL '1 minute 30 seconds'`,
/// `'5 seconds'::interval`.
fn micros(e: &Expr) -> Result<i64> {
    let bad = || user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "HOP needs constant intervals such as INTERVAL '10' SECOND, not {e}");
    let text = |v: &Expr| match v {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::Number(s, _) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    };
    match e {
        Expr::Interval(i) => {
            let s = text(&i.value).ok_or_else(bad)?;
            match &i.leading_field {
                Some(unit) => {
                    let n: f64 = s.trim().parse().map_err(|_| bad())?;
                    let per = unit_micros(&unit_name(unit)).ok_or_else(bad)?;
                    Ok((n * per as f64).round() as i64)
                }
                None => parse_interval_text(&s).ok_or_else(bad),
            }
        }
        Expr::Cast { expr, .. } => parse_interval_text(&text(expr).ok_or_else(bad)?).ok_or_else(bad),
        Expr::Nested(inner) => micros(inner),
        _ => Err(bad()),
    }
}

fn unit_name(f: &DateTimeField) -> String {
    f.to_string().to_ascii_lowercase()
}

fn unit_micros(unit: &str) -> Option<i64> {
    Some(match unit {
        "microsecond" | "microseconds" | "us" => 1,
        "millisecond" | "milliseconds" | "ms" => 1_000,
        "second" | "seconds" | "sec" | "secs" | "s" => 1_000_000,
        "minute" | "minutes" | "min" | "mins" | "m" => 60_000_000,
        "hour" | "hours" | "h" | "hr" | "hrs" => 3_600_000_000,
        "day" | "days" | "d" => 86_400_000_000,
        "week" | "weeks" | "w" => 604_800_000_000,
        _ => return None,
    })
}

/// `'1 minute 30 seconds'`, `'10'` (seconds).
fn parse_interval_text(s: &str) -> Option<i64> {
    let words: Vec<&str> = s.split_whitespace().collect();
    if words.len() == 1 {
        return words[0].parse::<f64>().ok().map(|n| (n * 1e6).round() as i64);
    }
    if words.is_empty() || !words.len().is_multiple_of(2) {
        return None;
    }
    let mut total = 0i64;
    for pair in words.chunks(2) {
        let n: f64 = pair[0].parse().ok()?;
        total = total.checked_add((n * unit_micros(&pair[1].to_ascii_lowercase())? as f64).round() as i64)?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_texts() {
        assert_eq!(parse_interval_text("10 seconds"), Some(10_000_000));
        assert_eq!(parse_interval_text("1 minute 30 seconds"), Some(90_000_000));
        assert_eq!(parse_interval_text("2 ms"), Some(2_000));
        assert_eq!(parse_interval_text("1 fortnight"), None);
    }
}
