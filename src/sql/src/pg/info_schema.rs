//! `information_schema` rows (SQL-standard views; Grafana, dbt, Superset SQL Lab and many
//! ORMs use them), computed from the same [`Model`](super::model::Model) as `pg_catalog`.
//!
//! As in PostgreSQL, materialized views are not listed in `information_schema.tables`.

use super::rows::{sql_data_type, user_relations, RowContext};
use super::table::{i, s, RelDef, V};
use super::types::type_by_oid;
use crate::catalog::DATABASE_NAME;

/// Rows of the `information_schema` relation `def`.
pub fn rows_of(def: &RelDef, cx: &RowContext<'_>) -> Vec<Vec<V>> {
    let user = cx.session.user.as_str();
    let model = cx.model;
    let listed = || model.relations.iter().filter(|r| matches!(r.kind, 'r' | 'v'));
    match def.name {
        "schemata" => model
            .namespaces
            .iter()
            .map(|(_, n)| vec![s(DATABASE_NAME), s(n), s(user), V::N, V::N, V::N, V::N])
            .collect(),
        "tables" => listed()
            .map(|r| {
                let table_type = if r.kind == 'v' { "VIEW" } else { "BASE TABLE" };
                let insertable = if r.kind == 'r' && !r.is_system() { "YES" } else { "NO" };
                vec![
                    s(DATABASE_NAME), s(&r.schema), s(&r.name), s(table_type), V::N, V::N, V::N, V::N, V::N,
                    s(insertable), s("NO"), V::N,
                ]
            })
            .collect(),
        "columns" => listed()
            .flat_map(|r| {
                r.cols.iter().enumerate().map(move |(n, c)| {
                    let (char_len, num_prec, radix, scale, dt_prec) = type_facets(c.type_oid, c.typmod);
                    let udt = type_by_oid(c.type_oid).map(|t| t.name()).unwrap_or_default();
                    let updatable = if r.kind == 'r' && !r.is_system() { "YES" } else { "NO" };
                    vec![
                        s(DATABASE_NAME), s(&r.schema), s(&r.name), s(&c.name), i(n as i64 + 1),
                        c.default.clone().map(V::S).unwrap_or(V::N), s(if c.not_null { "NO" } else { "YES" }),
                        s(sql_data_type(c.type_oid)), char_len, V::N, num_prec, radix, scale, dt_prec, V::N, V::N,
                        V::N, V::N, V::N, V::N, V::N, V::N, V::N, V::N, V::N, s(DATABASE_NAME), s("pg_catalog"), s(udt),
                        V::N, V::N, V::N, V::N, s((n + 1).to_string()), s("NO"), s("NO"), V::N, V::N, V::N, V::N,
                        V::N, s("NO"), s("NEVER"), V::N, s(updatable),
                    ]
                })
            })
            .collect(),
        "views" => user_relations(model)
            .filter(|r| r.kind == 'v')
            .map(|r| {
                vec![
                    s(DATABASE_NAME), s(&r.schema), s(&r.name), r.view_query().map(V::S).unwrap_or(V::N), s("NONE"),
                    s("NO"), s("NO"), s("NO"), s("NO"), s("NO"),
                ]
            })
            .collect(),
        "table_constraints" => user_relations(model)
            .filter(|r| !r.pk.is_empty())
            .map(|r| {
                vec![
                    s(DATABASE_NAME), s(&r.schema), s(r.pk_name()), s(DATABASE_NAME), s(&r.schema), s(&r.name),
                    s("PRIMARY KEY"), s("NO"), s("NO"), s("YES"), V::N,
                ]
            })
            .collect(),
        "key_column_usage" => user_relations(model)
            .flat_map(|r| {
                r.pk.iter().enumerate().map(move |(pos, col)| {
                    vec![
                        s(DATABASE_NAME), s(&r.schema), s(r.pk_name()), s(DATABASE_NAME), s(&r.schema), s(&r.name),
                        s(&r.cols[*col].name), i(pos as i64 + 1), V::N,
                    ]
                })
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `character_maximum_length`, `numeric_precision`, `numeric_precision_radix`, `numeric_scale`
/// and `datetime_precision` of a column type, as PostgreSQL reports them.
fn type_facets(type_oid: u32, typmod: i32) -> (V, V, V, V, V) {
    let none = || (V::N, V::N, V::N, V::N, V::N);
    match type_oid {
        21 => (V::N, i(16), i(2), i(0), V::N),
        23 => (V::N, i(32), i(2), i(0), V::N),
        20 => (V::N, i(64), i(2), i(0), V::N),
        700 => (V::N, i(24), i(2), V::N, V::N),
        701 => (V::N, i(53), i(2), V::N, V::N),
        1700 if typmod >= 4 => {
            let m = typmod - 4;
            (V::N, i((m >> 16) & 0xffff), i(10), i(m & 0xffff), V::N)
        }
        1700 => (V::N, V::N, i(10), V::N, V::N),
        1043 | 1042 if typmod >= 4 => (i(typmod - 4), V::N, V::N, V::N, V::N),
        1082 => (V::N, V::N, V::N, V::N, i(0)),
        1083 | 1114 | 1184 | 1266 | 1186 => (V::N, V::N, V::N, V::N, i(6)),
        _ => none(),
    }
}
