//! PostgreSQL type names as DataFusion plans them.

use datafusion::sql::sqlparser::ast::{ArrayElemTypeDef, DataType as SqlType, ExactNumberInfo};

use super::ast::base_name;

/// A DataFusion-plannable spelling of a PostgreSQL type name, if it needs one.
pub(super) fn plain_type(t: &SqlType) -> Option<SqlType> {
    match t {
        SqlType::Custom(n, mods) if mods.is_empty() => Some(match base_name(n).as_str() {
            "oid" => SqlType::IntUnsigned(None),
            "xid" | "cid" | "int4" => SqlType::Int(None),
            "int2" => SqlType::SmallInt(None),
            "int8" => SqlType::BigInt(None),
            "text" | "name" | "char" | "bpchar" | "pg_node_tree" | "aclitem" | "json" | "jsonb" => SqlType::Text,
            "varchar" => SqlType::Varchar(None),
            "bool" => SqlType::Boolean,
            "float4" => SqlType::Real,
            "float8" => SqlType::DoublePrecision,
            "numeric" => SqlType::Numeric(ExactNumberInfo::None),
            "int2vector" => SqlType::Array(ArrayElemTypeDef::SquareBracket(Box::new(SqlType::SmallInt(None)), None)),
            "oidvector" => SqlType::Array(ArrayElemTypeDef::SquareBracket(Box::new(SqlType::Int(None)), None)),
            _ => return None,
        }),
        SqlType::JSON | SqlType::JSONB => Some(SqlType::Text),
        // `float` is double precision; `float(p)` real up to 24 bits (DataFusion read real).
        SqlType::Float(info) => Some(match info {
            ExactNumberInfo::Precision(p) | ExactNumberInfo::PrecisionAndScale(p, _) if *p <= 24 => SqlType::Real,
            _ => SqlType::DoublePrecision,
        }),
        SqlType::Array(ArrayElemTypeDef::SquareBracket(inner, size)) => {
            plain_type(inner).map(|i| SqlType::Array(ArrayElemTypeDef::SquareBracket(Box::new(i), *size)))
        }
        _ => None,
    }
}

