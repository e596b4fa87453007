//! SQL column types: what a user declares in `CREATE TABLE`, how each is held in Arrow, and how
//! PostgreSQL clients see it (type OID, `format_type` name). OIDs are PostgreSQL's built-in ones.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, IntervalUnit, TimeUnit};
use serde::{Deserialize, Serialize};

/// Arrow field metadata key marking a Utf8 column that holds `jsonb` text.
pub const JSONB_METADATA_KEY: &str = "eddy.pg_type";

/// Arrow field metadata key marking an unconstrained `numeric` (printed without padding zeros).
pub const NUMERIC_UNCONSTRAINED_KEY: &str = "eddy.numeric";

/// Timezone string used for `timestamptz` columns (values are UTC instants).
pub const UTC: &str = "+00:00";

/// A column type as declared in SQL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnType {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    /// `numeric(precision, scale)`; `None` = unconstrained (stored as decimal(38, 10)).
    Numeric(Option<(u8, i8)>),
    /// `text`, or `varchar(n)` when `Some(n)`.
    Varchar(Option<u32>),
    Text,
    Date,
    Time,
    Timestamp,
    Timestamptz,
    Interval,
    Bytea,
    Jsonb,
}

/// Precision and scale used for an unconstrained `numeric`.
pub const DEFAULT_NUMERIC: (u8, i8) = (38, 10);

impl ColumnType {
    /// The Arrow type values of this column are stored and computed as.
    pub fn to_arrow(&self) -> DataType {
        match self {
            ColumnType::Bool => DataType::Boolean,
            ColumnType::Int2 => DataType::Int16,
            ColumnType::Int4 => DataType::Int32,
            ColumnType::Int8 => DataType::Int64,
            ColumnType::Float4 => DataType::Float32,
            ColumnType::Float8 => DataType::Float64,
            ColumnType::Numeric(ps) => {
                let (p, s) = ps.unwrap_or(DEFAULT_NUMERIC);
                DataType::Decimal128(p, s)
            }
            ColumnType::Varchar(_) | ColumnType::Text | ColumnType::Jsonb => DataType::Utf8,
            ColumnType::Date => DataType::Date32,
            ColumnType::Time => DataType::Time64(TimeUnit::Microsecond),
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            ColumnType::Timestamptz => DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from(UTC))),
            ColumnType::Interval => DataType::Interval(IntervalUnit::MonthDayNano),
            ColumnType::Bytea => DataType::Binary,
        }
    }

    /// An Arrow field for a column of this type; `jsonb` is marked in the field metadata so the
    /// wire layer reports it as `jsonb` rather than `text`.
    pub fn to_field(&self, name: &str, nullable: bool) -> Field {
        let f = Field::new(name, self.to_arrow(), nullable);
        match self {
            ColumnType::Jsonb => f.with_metadata(HashMap::from([(JSONB_METADATA_KEY.to_string(), "jsonb".to_string())])),
            ColumnType::Numeric(None) => {
                f.with_metadata(HashMap::from([(NUMERIC_UNCONSTRAINED_KEY.to_string(), "unconstrained".to_string())]))
            }
            _ => f,
        }
    }

    /// PostgreSQL's name for the type as `format_type` prints it.
    pub fn pg_name(&self) -> String {
        match self {
            ColumnType::Bool => "boolean".into(),
            ColumnType::Int2 => "smallint".into(),
            ColumnType::Int4 => "integer".into(),
            ColumnType::Int8 => "bigint".into(),
            ColumnType::Float4 => "real".into(),
            ColumnType::Float8 => "double precision".into(),
            ColumnType::Numeric(None) => "numeric".into(),
            ColumnType::Numeric(Some((p, s))) => format!("numeric({p},{s})"),
            ColumnType::Varchar(None) => "character varying".into(),
            ColumnType::Varchar(Some(n)) => format!("character varying({n})"),
            ColumnType::Text => "text".into(),
            ColumnType::Date => "date".into(),
            ColumnType::Time => "time without time zone".into(),
            ColumnType::Timestamp => "timestamp without time zone".into(),
            ColumnType::Timestamptz => "timestamp with time zone".into(),
            ColumnType::Interval => "interval".into(),
            ColumnType::Bytea => "bytea".into(),
            ColumnType::Jsonb => "jsonb".into(),
        }
    }

    /// PostgreSQL type OID.
    pub fn pg_oid(&self) -> u32 {
        match self {
            ColumnType::Bool => 16,
            ColumnType::Int2 => 21,
            ColumnType::Int4 => 23,
            ColumnType::Int8 => 20,
            ColumnType::Float4 => 700,
            ColumnType::Float8 => 701,
            ColumnType::Numeric(_) => 1700,
            ColumnType::Varchar(_) => 1043,
            ColumnType::Text => 25,
            ColumnType::Date => 1082,
            ColumnType::Time => 1083,
            ColumnType::Timestamp => 1114,
            ColumnType::Timestamptz => 1184,
            ColumnType::Interval => 1186,
            ColumnType::Bytea => 17,
            ColumnType::Jsonb => 3802,
        }
    }

    /// The column type for a PostgreSQL type OID (used for parameter types a client names).
    pub fn from_pg_oid(oid: u32) -> Option<ColumnType> {
        Some(match oid {
            16 => ColumnType::Bool,
            21 => ColumnType::Int2,
            23 => ColumnType::Int4,
            20 => ColumnType::Int8,
            700 => ColumnType::Float4,
            701 => ColumnType::Float8,
            1700 => ColumnType::Numeric(None),
            1043 | 1042 => ColumnType::Varchar(None),
            25 | 19 | 705 => ColumnType::Text,
            1082 => ColumnType::Date,
            1083 => ColumnType::Time,
            1114 => ColumnType::Timestamp,
            1184 => ColumnType::Timestamptz,
            1186 => ColumnType::Interval,
            17 => ColumnType::Bytea,
            3802 | 114 => ColumnType::Jsonb,
            _ => return None,
        })
    }

    /// The column type that best describes an Arrow field (for results of arbitrary queries).
    pub fn from_arrow_field(field: &Field) -> Option<ColumnType> {
        if field.metadata().get(JSONB_METADATA_KEY).map(String::as_str) == Some("jsonb") {
            return Some(ColumnType::Jsonb);
        }
        Self::from_arrow(field.data_type())
    }

    /// The column type that best describes an Arrow type; `None` for nested types.
    pub fn from_arrow(dt: &DataType) -> Option<ColumnType> {
        Some(match dt {
            DataType::Boolean => ColumnType::Bool,
            DataType::Int8 | DataType::Int16 | DataType::UInt8 => ColumnType::Int2,
            DataType::Int32 | DataType::UInt16 => ColumnType::Int4,
            DataType::Int64 | DataType::UInt32 => ColumnType::Int8,
            // Counters (row_number, rank, array_position) are bigint in PostgreSQL.
            DataType::UInt64 => ColumnType::Int8,
            DataType::Float16 | DataType::Float32 => ColumnType::Float4,
            DataType::Float64 => ColumnType::Float8,
            DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => {
                ColumnType::Numeric(Some((*p, *s)))
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => ColumnType::Text,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => ColumnType::Bytea,
            DataType::Date32 | DataType::Date64 => ColumnType::Date,
            DataType::Time32(_) | DataType::Time64(_) => ColumnType::Time,
            DataType::Timestamp(_, None) => ColumnType::Timestamp,
            DataType::Timestamp(_, Some(_)) => ColumnType::Timestamptz,
            DataType::Interval(_) | DataType::Duration(_) => ColumnType::Interval,
            DataType::Dictionary(_, v) => return Self::from_arrow(v),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_through_its_oid_family() {
        for t in [
            ColumnType::Bool, ColumnType::Int2, ColumnType::Int4, ColumnType::Int8,
            ColumnType::Float4, ColumnType::Float8, ColumnType::Text, ColumnType::Date,
            ColumnType::Time, ColumnType::Timestamp, ColumnType::Timestamptz,
            ColumnType::Interval, ColumnType::Bytea, ColumnType::Jsonb,
        ] {
            assert_eq!(ColumnType::from_pg_oid(t.pg_oid()), Some(t.clone()));
            assert_eq!(ColumnType::from_arrow_field(&t.to_field("c", true)).map(|x| x.to_arrow()), Some(t.to_arrow()));
        }
    }

    #[test]
    fn format_type_names_match_postgres() {
        assert_eq!(ColumnType::Numeric(Some((10, 2))).pg_name(), "numeric(10,2)");
        assert_eq!(ColumnType::Timestamptz.pg_name(), "timestamp with time zone");
    }
}
