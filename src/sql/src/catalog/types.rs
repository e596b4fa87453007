//! SQL type names → [`ColumnType`]. Works on the type's SQL text so it accepts every spelling
//! PostgreSQL does (`int`, `int4`, `integer`, `character varying(20)`, `timestamptz`, ...).

use eddy_common::error::sqlstate;
use eddy_common::{user_err, ColumnType, Result};

/// The column type named by `sql_type` (e.g. `numeric(10, 2)`).
pub fn parse_type_name(sql_type: &str) -> Result<ColumnType> {
    let lower = sql_type.trim().to_ascii_lowercase();
    // `integer[]`, `text[3]`, `int array`: one-dimensional arrays (PostgreSQL ignores the size).
    let multidimensional = || user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "multidimensional arrays ({}) are not supported", sql_type.trim());
    if lower.matches('[').count() > 1 {
        return Err(multidimensional());
    }
    let element = lower.strip_suffix(']').and_then(|s| s.rfind('[').map(|i| &s[..i])).or_else(|| lower.strip_suffix(" array"));
    if let Some(element) = element {
        return match parse_type_name(element)? {
            ColumnType::Array(_) => Err(multidimensional()),
            e => Ok(ColumnType::Array(Box::new(e))),
        };
    }
    let (base, args) = match lower.find('(') {
        Some(i) => {
            let close = lower.rfind(')').unwrap_or(lower.len());
            let inner = &lower[i + 1..close.max(i + 1)];
            let rest = lower[close.min(lower.len())..].trim_start_matches(')').trim().to_string();
            let base = format!("{} {}", lower[..i].trim(), rest).trim().to_string();
            (base, inner.split(',').map(|s| s.trim().to_string()).collect::<Vec<_>>())
        }
        None => (lower.clone(), vec![]),
    };
    let base = base.split_whitespace().collect::<Vec<_>>().join(" ");
    let num = |i: usize| -> Result<Option<i64>> {
        match args.get(i) {
            None => Ok(None),
            Some(s) => s
                .parse::<i64>()
                .map(Some)
                .map_err(|_| user_err!(sqlstate::SYNTAX_ERROR, "invalid type modifier {s:?} in {sql_type}")),
        }
    };
    Ok(match base.as_str() {
        "bool" | "boolean" => ColumnType::Bool,
        "smallint" | "int2" => ColumnType::Int2,
        "int" | "integer" | "int4" => ColumnType::Int4,
        "bigint" | "int8" => ColumnType::Int8,
        "real" | "float4" => ColumnType::Float4,
        "double precision" | "float8" | "double" => ColumnType::Float8,
        "float" => match num(0)? {
            Some(p) if p <= 24 => ColumnType::Float4,
            _ => ColumnType::Float8,
        },
        "numeric" | "decimal" | "dec" => match (num(0)?, num(1)?) {
            (None, _) => ColumnType::Numeric(None),
            (Some(p), s) => {
                let s = s.unwrap_or(0);
                if !(1..=38).contains(&p) {
                    return Err(user_err!(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        "NUMERIC precision {p} must be between 1 and 38"
                    ));
                }
                if s < 0 || s > p {
                    return Err(user_err!(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        "NUMERIC scale {s} must be between 0 and precision {p}"
                    ));
                }
                ColumnType::Numeric(Some((p as u8, s as i8)))
            }
        },
        "text" | "string" => ColumnType::Text,
        "varchar" | "character varying" | "char varying" | "char" | "character" | "bpchar" | "name" => {
            ColumnType::Varchar(num(0)?.map(|n| n as u32))
        }
        "date" => ColumnType::Date,
        "time" | "time without time zone" => ColumnType::Time,
        "timestamp" | "timestamp without time zone" | "datetime" => ColumnType::Timestamp,
        "timestamptz" | "timestamp with time zone" => ColumnType::Timestamptz,
        "interval" => ColumnType::Interval,
        "bytea" => ColumnType::Bytea,
        "jsonb" | "json" => ColumnType::Jsonb,
        "uuid" => ColumnType::Uuid,
        _ => {
            return Err(user_err!(sqlstate::UNDEFINED_OBJECT, "type \"{}\" does not exist", sql_type.trim()));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_spellings_are_accepted() {
        assert_eq!(parse_type_name("INT").unwrap(), ColumnType::Int4);
        assert_eq!(parse_type_name("numeric(10, 2)").unwrap(), ColumnType::Numeric(Some((10, 2))));
        assert_eq!(parse_type_name("TIMESTAMP WITH TIME ZONE").unwrap(), ColumnType::Timestamptz);
        assert_eq!(parse_type_name("character varying(20)").unwrap(), ColumnType::Varchar(Some(20)));
        assert_eq!(parse_type_name("double precision").unwrap(), ColumnType::Float8);
        assert_eq!(parse_type_name("timestamp(3) without time zone").unwrap(), ColumnType::Timestamp);
        let int_array = ColumnType::Array(Box::new(ColumnType::Int4));
        assert_eq!(parse_type_name("INT[]").unwrap(), int_array);
        assert_eq!(parse_type_name("integer[3]").unwrap(), int_array);
        assert_eq!(parse_type_name("int4 ARRAY").unwrap(), int_array);
        assert_eq!(parse_type_name("varchar(10)[]").unwrap(), ColumnType::Array(Box::new(ColumnType::Varchar(Some(10)))));
        assert_eq!(parse_type_name("int[][]").unwrap_err().sqlstate, "0A000");
    }

    #[test]
    fn unknown_types_name_themselves() {
        let e = parse_type_name("geometry").unwrap_err();
        assert_eq!(e.sqlstate, "42704");
        assert!(e.message.contains("geometry"));
    }
}
