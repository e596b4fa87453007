//! SQL column types: what a user declares in `CREATE TABLE`, how each is held in Arrow, and how
//! PostgreSQL clients see it (type OID, `format_type` name). OIDs are PostgreSQL's built-in ones.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, IntervalUnit, TimeUnit};
use serde::{Deserialize, Serialize};

/// Arrow field metadata key marking a Utf8 column that holds `jsonb` (or `uuid`) text.
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
    /// `uuid`: held as its canonical text (lower-case hex in 8-4-4-4-12 groups, which orders as
    /// PostgreSQL orders the 16 bytes), marked in the field metadata like `jsonb`.
    Uuid,
    /// A one-dimensional array of the element type (`integer[]`), NULL elements allowed.
    Array(Box<ColumnType>),
}

/// PostgreSQL's array type OID for each element type OID (`_int4` = 1007 for `int4` = 23).
const ARRAY_OIDS: &[(u32, u32)] = &[
    (16, 1000),
    (21, 1005),
    (23, 1007),
    (20, 1016),
    (700, 1021),
    (701, 1022),
    (1700, 1231),
    (1043, 1015),
    (25, 1009),
    (1082, 1182),
    (1083, 1183),
    (1114, 1115),
    (1184, 1185),
    (1186, 1187),
    (17, 1001),
    (2950, 2951),
    (3802, 3807),
];

/// Precision and scale used for an unconstrained `numeric`.
pub const DEFAULT_NUMERIC: (u8, i8) = (38, 10);

/// Precision and scale of a numeric quotient (`numeric / numeric`): its text shows the
/// decimals PostgreSQL's division would for its magnitude (see `text_out::trim_quotient`).
/// A column declared `numeric(37, 20)` prints so too.
pub const QUOTIENT_NUMERIC: (u8, i8) = (37, 20);
/// Precision and scale of a numeric variance (a quotient, or 0 when the values are all equal,
/// which PostgreSQL shows as `0`): see `text_out::trim_variance`. A column declared
/// `numeric(35, 20)` prints so too.
pub const VARIANCE_NUMERIC: (u8, i8) = (35, 20);
/// Precision and scale of a numeric standard deviation (the square root of a quotient): its
/// text shows the decimals PostgreSQL's would, chosen by the magnitude of its square (see
/// `text_out::trim_root_quotient`). A column declared `numeric(36, 20)` prints so too.
pub const ROOT_QUOTIENT_NUMERIC: (u8, i8) = (36, 20);

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
            ColumnType::Varchar(_) | ColumnType::Text | ColumnType::Jsonb | ColumnType::Uuid => DataType::Utf8,
            ColumnType::Date => DataType::Date32,
            ColumnType::Time => DataType::Time64(TimeUnit::Microsecond),
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            ColumnType::Timestamptz => DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from(UTC))),
            ColumnType::Interval => DataType::Interval(IntervalUnit::MonthDayNano),
            ColumnType::Bytea => DataType::Binary,
            // Element fields carry no metadata (list types must compare equal to the ones
            // DataFusion builds): a `jsonb[]` result column is reported as `text[]`.
            ColumnType::Array(elem) => DataType::List(Arc::new(Field::new_list_field(elem.to_arrow(), true))),
        }
    }

    /// An Arrow field for a column of this type; `jsonb` is marked in the field metadata so the
    /// wire layer reports it as `jsonb` rather than `text`.
    pub fn to_field(&self, name: &str, nullable: bool) -> Field {
        let f = Field::new(name, self.to_arrow(), nullable);
        match self {
            ColumnType::Jsonb => f.with_metadata(HashMap::from([(JSONB_METADATA_KEY.to_string(), "jsonb".to_string())])),
            ColumnType::Uuid => f.with_metadata(HashMap::from([(JSONB_METADATA_KEY.to_string(), "uuid".to_string())])),
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
            ColumnType::Uuid => "uuid".into(),
            ColumnType::Array(elem) => format!("{}[]", elem.pg_name()),
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
            ColumnType::Uuid => 2950,
            ColumnType::Array(elem) => {
                let e = elem.pg_oid();
                ARRAY_OIDS.iter().find(|(x, _)| *x == e).map_or(1009, |(_, a)| *a)
            }
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
            2950 => ColumnType::Uuid,
            1014 => ColumnType::Array(Box::new(ColumnType::Varchar(None))), // _bpchar
            199 => ColumnType::Array(Box::new(ColumnType::Jsonb)), // _json
            a => {
                let (elem, _) = ARRAY_OIDS.iter().find(|(_, x)| *x == a)?;
                ColumnType::Array(Box::new(ColumnType::from_pg_oid(*elem)?))
            }
        })
    }

    /// The column type that best describes an Arrow field (for results of arbitrary queries).
    pub fn from_arrow_field(field: &Field) -> Option<ColumnType> {
        match field.metadata().get(JSONB_METADATA_KEY).map(String::as_str) {
            Some("jsonb") => return Some(ColumnType::Jsonb),
            Some("uuid") => return Some(ColumnType::Uuid),
            _ => {}
        }
        Self::from_arrow(field.data_type())
    }

    /// The column type that best describes an Arrow type; `None` for nested types other than
    /// lists of a scalar type (arrays).
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
            // One dimension only: a list of lists has no column type.
            DataType::List(elem) | DataType::LargeList(elem) => match Self::from_arrow_field(elem)? {
                ColumnType::Array(_) => return None,
                e => ColumnType::Array(Box::new(e)),
            },
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
            ColumnType::Interval, ColumnType::Bytea, ColumnType::Jsonb, ColumnType::Uuid,
            ColumnType::Array(Box::new(ColumnType::Int4)), ColumnType::Array(Box::new(ColumnType::Text)),
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
