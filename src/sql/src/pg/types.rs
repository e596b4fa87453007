//! PostgreSQL's built-in types as `pg_type` shows them: real OIDs (`int4` = 23, `_int4` = 1007,
//! `numeric` = 1700, `timestamptz` = 1184, ...), and `format_type(oid, typmod)` spelled as
//! PostgreSQL spells it (`integer`, `numeric(10,2)`, `timestamp with time zone`).
//!
//! Drivers look up any OID they do not know in `pg_type` (pgjdbc's TypeInfoCache,
//! tokio-postgres' TYPEINFO_QUERY), so every OID Eddy can put in a RowDescription is here.

use eddy_common::ColumnType;

/// One built-in base type; its array type (if any) is derived from it.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinType {
    /// Type OID.
    pub oid: u32,
    /// `typname`.
    pub name: &'static str,
    /// `typlen` (-1 variable, -2 C string).
    pub len: i16,
    /// `typcategory`.
    pub category: char,
    /// OID of the `_name` array type; 0 = none.
    pub array: u32,
    /// `typalign`.
    pub align: char,
    /// Collatable (text-like): `typcollation` = 100 (`default`).
    pub collatable: bool,
    /// `typtype`: `b` base, `p` pseudo, `r` range.
    pub typtype: char,
}

const fn t(oid: u32, name: &'static str, len: i16, category: char, array: u32, align: char) -> BuiltinType {
    BuiltinType { oid, name, len, category, array, align, collatable: false, typtype: 'b' }
}

const fn text_like(oid: u32, name: &'static str, array: u32) -> BuiltinType {
    BuiltinType { oid, name, len: -1, category: 'S', array, align: 'i', collatable: true, typtype: 'b' }
}

const fn pseudo(oid: u32, name: &'static str, len: i16) -> BuiltinType {
    BuiltinType { oid, name, len, category: 'P', array: 0, align: 'i', collatable: false, typtype: 'p' }
}

/// PostgreSQL 15's commonly used base and pseudo types (OIDs from `pg_type.dat`).
pub const BUILTIN_TYPES: &[BuiltinType] = &[
    t(16, "bool", 1, 'B', 1000, 'c'),
    t(17, "bytea", -1, 'U', 1001, 'i'),
    BuiltinType { oid: 18, name: "char", len: 1, category: 'Z', array: 1002, align: 'c', collatable: false, typtype: 'b' },
    BuiltinType { oid: 19, name: "name", len: 64, category: 'S', array: 1003, align: 'c', collatable: true, typtype: 'b' },
    t(20, "int8", 8, 'N', 1016, 'd'),
    t(21, "int2", 2, 'N', 1005, 's'),
    t(22, "int2vector", -1, 'A', 1006, 'i'),
    t(23, "int4", 4, 'N', 1007, 'i'),
    t(24, "regproc", 4, 'N', 1008, 'i'),
    text_like(25, "text", 1009),
    t(26, "oid", 4, 'N', 1028, 'i'),
    t(27, "tid", 6, 'U', 1010, 's'),
    t(28, "xid", 4, 'U', 1011, 'i'),
    t(29, "cid", 4, 'U', 1012, 'i'),
    t(30, "oidvector", -1, 'A', 1013, 'i'),
    t(114, "json", -1, 'U', 199, 'i'),
    t(142, "xml", -1, 'U', 143, 'i'),
    t(194, "pg_node_tree", -1, 'Z', 0, 'i'),
    t(600, "point", 16, 'G', 1017, 'd'),
    t(650, "cidr", -1, 'I', 651, 'i'),
    t(700, "float4", 4, 'N', 1021, 'i'),
    t(701, "float8", 8, 'N', 1022, 'd'),
    pseudo(705, "unknown", -2),
    t(790, "money", 8, 'N', 791, 'd'),
    t(829, "macaddr", 6, 'U', 1040, 'i'),
    t(869, "inet", -1, 'I', 1041, 'i'),
    t(1033, "aclitem", 12, 'U', 1034, 'i'),
    text_like(1042, "bpchar", 1014),
    text_like(1043, "varchar", 1015),
    t(1082, "date", 4, 'D', 1182, 'i'),
    t(1083, "time", 8, 'D', 1183, 'd'),
    t(1114, "timestamp", 8, 'D', 1115, 'd'),
    t(1184, "timestamptz", 8, 'D', 1185, 'd'),
    t(1186, "interval", 16, 'T', 1187, 'd'),
    t(1266, "timetz", 12, 'D', 1270, 'd'),
    t(1560, "bit", -1, 'V', 1561, 'i'),
    t(1562, "varbit", -1, 'V', 1563, 'i'),
    t(1700, "numeric", -1, 'N', 1231, 'i'),
    t(1790, "refcursor", -1, 'U', 2201, 'i'),
    t(2202, "regprocedure", 4, 'N', 2207, 'i'),
    t(2203, "regoper", 4, 'N', 2208, 'i'),
    t(2204, "regoperator", 4, 'N', 2209, 'i'),
    t(2205, "regclass", 4, 'N', 2210, 'i'),
    t(2206, "regtype", 4, 'N', 2211, 'i'),
    pseudo(2249, "record", -1),
    pseudo(2275, "cstring", -2),
    pseudo(2276, "any", 4),
    pseudo(2277, "anyarray", -1),
    pseudo(2278, "void", 4),
    pseudo(2279, "trigger", 4),
    pseudo(2283, "anyelement", 4),
    t(2950, "uuid", 16, 'U', 2951, 'c'),
    t(3220, "pg_lsn", 8, 'U', 3221, 'd'),
    t(3614, "tsvector", -1, 'U', 3643, 'i'),
    t(3615, "tsquery", -1, 'U', 3645, 'i'),
    t(3802, "jsonb", -1, 'U', 3807, 'i'),
    t(4072, "jsonpath", -1, 'U', 4073, 'i'),
    t(4089, "regnamespace", 4, 'N', 4090, 'i'),
    t(4096, "regrole", 4, 'N', 4097, 'i'),
    BuiltinType { oid: 3904, name: "int4range", len: -1, category: 'R', array: 3905, align: 'i', collatable: false, typtype: 'r' },
    BuiltinType { oid: 3926, name: "int8range", len: -1, category: 'R', array: 3927, align: 'd', collatable: false, typtype: 'r' },
    BuiltinType { oid: 3906, name: "numrange", len: -1, category: 'R', array: 3907, align: 'i', collatable: false, typtype: 'r' },
    BuiltinType { oid: 3908, name: "tsrange", len: -1, category: 'R', array: 3909, align: 'd', collatable: false, typtype: 'r' },
    BuiltinType { oid: 3910, name: "tstzrange", len: -1, category: 'R', array: 3911, align: 'd', collatable: false, typtype: 'r' },
    BuiltinType { oid: 3912, name: "daterange", len: -1, category: 'R', array: 3913, align: 'i', collatable: false, typtype: 'r' },
];

/// A `pg_type` row: a base type or the array type of one.
#[derive(Debug, Clone)]
pub struct TypeRow {
    /// The base type (for an array row: its element type).
    pub base: BuiltinType,
    /// True for the `_name` array row.
    pub is_array: bool,
}

impl TypeRow {
    /// Type OID.
    pub fn oid(&self) -> u32 {
        if self.is_array {
            self.base.array
        } else {
            self.base.oid
        }
    }

    /// `typname`.
    pub fn name(&self) -> String {
        if self.is_array {
            format!("_{}", self.base.name)
        } else {
            self.base.name.to_string()
        }
    }
}

/// Every `pg_type` row: base types, then their array types.
pub fn all_type_rows() -> Vec<TypeRow> {
    let mut rows: Vec<TypeRow> = BUILTIN_TYPES.iter().map(|b| TypeRow { base: *b, is_array: false }).collect();
    rows.extend(BUILTIN_TYPES.iter().filter(|b| b.array != 0).map(|b| TypeRow { base: *b, is_array: true }));
    rows
}

/// The `pg_type` row of `oid`.
pub fn type_by_oid(oid: u32) -> Option<TypeRow> {
    BUILTIN_TYPES.iter().find_map(|b| {
        if b.oid == oid {
            Some(TypeRow { base: *b, is_array: false })
        } else if b.array == oid && oid != 0 {
            Some(TypeRow { base: *b, is_array: true })
        } else {
            None
        }
    })
}

/// SQL spellings PostgreSQL accepts for a type name (`integer`, `int`, `character varying`,
/// `timestamp with time zone`, `text[]`, ...), resolved to a type OID.
pub fn type_oid_by_name(name: &str) -> Option<u32> {
    let n = name.trim().trim_start_matches("pg_catalog.").trim_matches('"').to_ascii_lowercase();
    if let Some(elem) = n.strip_suffix("[]") {
        return type_oid_by_name(elem).and_then(type_by_oid).filter(|r| !r.is_array).map(|r| r.base.array).filter(|a| *a != 0);
    }
    // Drop a type modifier: `numeric(10,2)`, `varchar(20)`.
    let base = match n.find('(') {
        Some(i) => {
            let tail = n[i..].find(')').map(|j| n[i + j + 1..].to_string()).unwrap_or_default();
            format!("{}{}", n[..i].trim_end(), tail)
        }
        None => n.clone(),
    };
    let canonical = match base.as_str() {
        "boolean" => "bool",
        "smallint" => "int2",
        "integer" | "int" => "int4",
        "bigint" => "int8",
        "real" => "float4",
        "double precision" | "float" => "float8",
        "character varying" => "varchar",
        "character" | "char" => "bpchar",
        "\"char\"" => "char",
        "decimal" => "numeric",
        "timestamp without time zone" => "timestamp",
        "timestamp with time zone" => "timestamptz",
        "time without time zone" => "time",
        "time with time zone" => "timetz",
        other => other,
    };
    all_type_rows().into_iter().find(|r| r.name() == canonical).map(|r| r.oid())
}

/// `format_type(oid, typmod)`: the SQL name PostgreSQL prints, with the modifier applied.
/// Unknown OIDs print `???` as in PostgreSQL.
pub fn format_type(oid: u32, typmod: Option<i32>) -> String {
    let Some(row) = type_by_oid(oid) else { return "???".to_string() };
    let typmod = typmod.filter(|m| *m >= 0);
    if row.is_array {
        return format!("{}[]", format_type(row.base.oid, typmod));
    }
    let with_len = |name: &str| match typmod {
        Some(m) if m >= 4 => format!("{name}({})", m - 4),
        _ => name.to_string(),
    };
    match row.base.name {
        "bool" => "boolean".into(),
        "int2" => "smallint".into(),
        "int4" => "integer".into(),
        "int8" => "bigint".into(),
        "float4" => "real".into(),
        "float8" => "double precision".into(),
        "varchar" => with_len("character varying"),
        "bpchar" => with_len("character"),
        "char" => "\"char\"".into(),
        "numeric" => match typmod {
            Some(m) if m >= 4 => {
                let m = m - 4;
                format!("numeric({},{})", (m >> 16) & 0xffff, m & 0xffff)
            }
            _ => "numeric".into(),
        },
        "timestamp" => "timestamp without time zone".into(),
        "timestamptz" => "timestamp with time zone".into(),
        "time" => "time without time zone".into(),
        "timetz" => "time with time zone".into(),
        other => other.to_string(),
    }
}

/// `atttypmod` of a column type: `numeric(p,s)` and `varchar(n)` carry one (and arrays of
/// them, PostgreSQL keeps the element's), others are -1.
pub fn column_typmod(ty: &ColumnType) -> i32 {
    match ty {
        ColumnType::Array(elem) => column_typmod(elem),
        ColumnType::Numeric(Some((p, s))) => ((i32::from(*p) << 16) | (i32::from(*s) & 0xffff)) + 4,
        ColumnType::Varchar(Some(n)) => i32::try_from(*n).unwrap_or(i32::MAX - 4) + 4,
        _ => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_type_matches_postgres_for_every_column_type() {
        for (ty, want) in [
            (ColumnType::Int4, "integer"),
            (ColumnType::Numeric(Some((10, 2))), "numeric(10,2)"),
            (ColumnType::Numeric(None), "numeric"),
            (ColumnType::Varchar(Some(20)), "character varying(20)"),
            (ColumnType::Timestamptz, "timestamp with time zone"),
            (ColumnType::Jsonb, "jsonb"),
            (ColumnType::Array(Box::new(ColumnType::Numeric(Some((6, 2))))), "numeric(6,2)[]"),
            (ColumnType::Array(Box::new(ColumnType::Text)), "text[]"),
        ] {
            assert_eq!(format_type(ty.pg_oid(), Some(column_typmod(&ty))), want);
            assert_eq!(ty.pg_name(), want);
        }
        assert_eq!(format_type(1007, None), "integer[]");
        assert_eq!(format_type(999_999, None), "???");
    }

    #[test]
    fn type_names_resolve_to_builtin_oids() {
        assert_eq!(type_oid_by_name("integer"), Some(23));
        assert_eq!(type_oid_by_name("pg_catalog.int4"), Some(23));
        assert_eq!(type_oid_by_name("_int4"), Some(1007));
        assert_eq!(type_oid_by_name("numeric(10,2)"), Some(1700));
        assert_eq!(type_oid_by_name("text[]"), Some(1009));
        assert_eq!(type_oid_by_name("timestamp with time zone"), Some(1184));
        assert_eq!(type_oid_by_name("hstore"), None);
    }

    #[test]
    fn every_array_oid_is_unique() {
        let rows = all_type_rows();
        let mut oids: Vec<u32> = rows.iter().map(TypeRow::oid).collect();
        oids.sort_unstable();
        oids.dedup();
        assert_eq!(oids.len(), rows.len());
    }
}
