//! The rows of every catalog relation, computed from the [`Model`] of the native catalog when a
//! statement reads it. Relations Eddy has nothing to put in (policies, triggers, publications,
//! sequences, ...) are empty with the right columns.

use super::keywords::KEYWORDS;
use super::model::{
    quote_ident, Model, RelInfo, BTREE_AM_OID, DATABASE_OID, HEAP_AM_OID, INFORMATION_SCHEMA_OID, PG_CATALOG_OID,
    SUPERUSER_OID,
};
use super::table::{i, s, RelDef, V};
use super::types::{all_type_rows, format_type, type_by_oid, TypeRow};
use super::PgSession;
use crate::catalog::DATABASE_NAME;

/// What a catalog relation's rows are computed from.
pub struct RowContext<'a> {
    /// The catalog model.
    pub model: &'a Model,
    /// The reading session.
    pub session: &'a PgSession,
}

/// Every role as `(oid, name, superuser, can login, has a password)`: the connected user (a
/// superuser, as every client admitted by trust is) unless it is a created user, then the users
/// created with `CREATE USER` / `CREATE ROLE`.
fn roles<'a>(cx: &'a RowContext<'_>, user: &'a str) -> impl Iterator<Item = (i64, &'a str, bool, bool, bool)> + 'a {
    let session = (!cx.model.users.iter().any(|u| u.name == user)).then_some((i64::from(SUPERUSER_OID), user, true, true, false));
    session.into_iter().chain(cx.model.users.iter().map(|u| (i64::from(u.oid()), u.name.as_str(), u.superuser, u.login, u.verifier.is_some())))
}

/// Rows of the `pg_catalog` relation `def`.
pub fn rows_of(def: &RelDef, cx: &RowContext<'_>) -> Vec<Vec<V>> {
    let user = cx.session.user.as_str();
    match def.name {
        "pg_class" => pg_class(cx.model),
        "pg_namespace" => cx
            .model
            .namespaces
            .iter()
            .map(|(oid, name)| vec![i(*oid), s(name), i(SUPERUSER_OID), V::N])
            .collect(),
        "pg_attribute" => pg_attribute(cx.model),
        "pg_type" => {
            let mut rows: Vec<Vec<V>> = all_type_rows().iter().map(pg_type_row).collect();
            rows.extend(cx.model.enums.iter().map(|(oid, nsp, name, _)| enum_type_row(*oid, *nsp, name)));
            rows
        }
        "pg_enum" => cx
            .model
            .enums
            .iter()
            .flat_map(|(oid, _, _, labels)| {
                labels.iter().enumerate().map(move |(n, l)| {
                    // Label OIDs: unique per (type, position).
                    vec![i(i64::from(*oid) * 1000 + n as i64 + 1), i(*oid), V::F(n as f64 + 1.0), s(l)]
                })
            })
            .collect(),
        "pg_attrdef" => user_relations(cx.model)
            .flat_map(|r| {
                r.cols.iter().enumerate().filter_map(move |(n, c)| {
                    let d = c.default.as_ref()?;
                    Some(vec![i(r.attrdef_oid(n + 1)), i(r.oid), i(n as i64 + 1), s(d)])
                })
            })
            .collect(),
        "pg_index" => pg_index(cx.model),
        "pg_constraint" => pg_constraint(cx.model),
        "pg_database" => vec![vec![
            i(DATABASE_OID), s(DATABASE_NAME), i(SUPERUSER_OID), i(6), s("c"), V::B(false), V::B(true), i(-1),
            i(0), i(1), i(1663), s("C"), s("C"), V::N, V::N, V::N,
        ]],
        "pg_roles" => roles(cx, user)
            .map(|(oid, name, sup, login, pw)| {
                vec![
                    s(name), V::B(sup), V::B(true), V::B(sup), V::B(sup), V::B(login), V::B(sup), i(-1),
                    if pw { s("********") } else { V::N }, V::N, V::B(sup), V::N, i(oid),
                ]
            })
            .collect(),
        "pg_authid" => roles(cx, user)
            .map(|(oid, name, sup, login, _)| {
                vec![i(oid), s(name), V::B(sup), V::B(true), V::B(sup), V::B(sup), V::B(login), V::B(sup), V::B(sup), i(-1), V::N, V::N]
            })
            .collect(),
        "pg_user" => roles(cx, user)
            .filter(|r| r.3)
            .map(|(oid, name, sup, _, pw)| {
                vec![s(name), i(oid), V::B(sup), V::B(sup), V::B(sup), V::B(sup), if pw { s("********") } else { V::N }, V::N, V::N]
            })
            .collect(),
        "pg_settings" => pg_settings(cx.session),
        "pg_am" => [
            (HEAP_AM_OID, "heap", "heap_tableam_handler", "t"),
            (BTREE_AM_OID, "btree", "bthandler", "i"),
            (405, "hash", "hashhandler", "i"),
            (783, "gist", "gisthandler", "i"),
            (2742, "gin", "ginhandler", "i"),
            (4000, "spgist", "spghandler", "i"),
            (3580, "brin", "brinhandler", "i"),
        ]
        .iter()
        .map(|(oid, name, handler, kind)| vec![i(*oid), s(*name), s(*handler), s(*kind)])
        .collect(),
        "pg_range" => [(3904u32, 23u32), (3926, 20), (3906, 1700), (3908, 1114), (3910, 1184), (3912, 1082)]
            .iter()
            .map(|(t, sub)| vec![i(*t), i(*sub), i(0), i(0), i(0), s("-"), s("-")])
            .collect(),
        "pg_collation" => [(100u32, "default", "d"), (950, "C", "c"), (951, "POSIX", "c")]
            .iter()
            .map(|(oid, name, provider)| {
                vec![i(*oid), s(*name), i(PG_CATALOG_OID), i(SUPERUSER_OID), s(*provider), V::B(true), i(-1), s("C"), s("C"), V::N, V::N]
            })
            .collect(),
        // `COMMENT ON` texts: the relation's (objsubid 0) and its columns' (objsubid = attnum).
        "pg_description" => user_relations(cx.model)
            .flat_map(|r| {
                let rel = r.comment.clone().map(|c| vec![i(r.oid), i(PG_CLASS_OID), i(0), s(c)]);
                let cols = r.cols.iter().enumerate().filter_map(|(n, c)| {
                    c.comment.clone().map(|t| vec![i(r.oid), i(PG_CLASS_OID), i(n as i64 + 1), s(t)])
                });
                rel.into_iter().chain(cols).collect::<Vec<_>>()
            })
            .collect(),
        "pg_tablespace" => vec![
            vec![i(1663), s("pg_default"), i(SUPERUSER_OID), V::N, V::N],
            vec![i(1664), s("pg_global"), i(SUPERUSER_OID), V::N, V::N],
        ],
        "pg_tables" => user_relations(cx.model)
            .filter(|r| r.kind == 'r')
            .map(|r| vec![s(&r.schema), s(&r.name), s(user), V::N, V::B(!r.pk.is_empty()), V::B(false), V::B(false), V::B(false)])
            .collect(),
        "pg_views" => user_relations(cx.model)
            .filter(|r| r.kind == 'v')
            .map(|r| vec![s(&r.schema), s(&r.name), s(user), r.view_query().map(V::S).unwrap_or(V::N)])
            .collect(),
        "pg_matviews" => user_relations(cx.model)
            .filter(|r| r.kind == 'm')
            .map(|r| {
                vec![s(&r.schema), s(&r.name), s(user), V::N, V::B(!r.pk.is_empty()), V::B(true), r.view_query().map(V::S).unwrap_or(V::N)]
            })
            .collect(),
        "pg_indexes" => user_relations(cx.model)
            .filter(|r| !r.pk.is_empty())
            .map(|r| vec![s(&r.schema), s(&r.name), s(r.pk_name()), V::N, s(index_def(r))])
            .collect(),
        "pg_stat_user_tables" => user_relations(cx.model)
            .filter(|r| r.kind == 'r' || r.kind == 'm')
            .map(|r| {
                let mut row = vec![i(r.oid), s(&r.schema), s(&r.name)];
                // Eddy keeps no access statistics: counters are zero, timestamps NULL.
                row.extend((0..11).map(|_| i(0)));
                row.extend((0..4).map(|_| V::N));
                row.extend((0..4).map(|_| i(0)));
                row
            })
            .collect(),
        "pg_stat_activity" => vec![vec![
            i(DATABASE_OID), s(DATABASE_NAME), i(cx.session.pid), V::N, i(SUPERUSER_OID), s(user),
            s(cx.session.var("application_name").unwrap_or_default()), V::N, V::N, V::N, V::N, V::N, V::N, V::N,
            V::N, V::N, s("active"), V::N, V::N, V::N, V::N, s("client backend"),
        ]],
        _ => Vec::new(),
    }
}

/// User relations (not the catalog's own).
pub fn user_relations(model: &Model) -> impl Iterator<Item = &RelInfo> {
    model.relations.iter().filter(|r| !r.is_system())
}

/// `CREATE UNIQUE INDEX ...` text of a relation's primary-key index (`pg_get_indexdef`).
pub fn index_def(r: &RelInfo) -> String {
    format!(
        "CREATE UNIQUE INDEX {} ON {}.{} USING btree ({})",
        quote_ident(&r.pk_name()),
        quote_ident(&r.schema),
        quote_ident(&r.name),
        r.pk_columns_sql()
    )
}

/// `pg_class`'s own OID (`classoid` of relation comments).
const PG_CLASS_OID: i64 = 1259;

// One argument per pg_class column that varies between rows; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
fn class_row(oid: u32, name: &str, nsp: u32, kind: char, am: u32, natts: usize, has_index: bool, has_rules: bool) -> Vec<V> {
    vec![
        i(oid), s(name), i(nsp), i(0), i(0), i(SUPERUSER_OID), i(am), i(oid), i(0), i(0), V::F(-1.0), i(0), i(0),
        V::B(has_index), V::B(false), s("p"), s(kind.to_string()), i(natts as i64), i(0), V::B(has_rules),
        V::B(false), V::B(false), V::B(false), V::B(false), V::B(true), s(if kind == 'v' { "n" } else { "d" }),
        V::B(false), i(0), i(0), i(0), V::N, V::N, V::N,
    ]
}

fn pg_class(model: &Model) -> Vec<Vec<V>> {
    let mut rows = Vec::new();
    for r in &model.relations {
        let am = if matches!(r.kind, 'r' | 'm') { HEAP_AM_OID } else { 0 };
        rows.push(class_row(r.oid, &r.name, r.nsp_oid, r.kind, am, r.cols.len(), !r.pk.is_empty(), r.kind == 'v'));
        if let Some(idx) = r.pk_index_oid() {
            rows.push(class_row(idx, &r.pk_name(), r.nsp_oid, 'i', BTREE_AM_OID, r.pk.len(), false, false));
        }
    }
    rows
}

fn attribute_row(relid: u32, attnum: i64, name: &str, type_oid: u32, typmod: i32, not_null: bool, has_def: bool) -> Vec<V> {
    let t = type_by_oid(type_oid);
    let len = t.as_ref().map(|t| if t.is_array { -1 } else { t.base.len }).unwrap_or(-1);
    let align = t.as_ref().map(|t| if t.is_array { 'i' } else { t.base.align }).unwrap_or('i');
    let collation = if t.as_ref().is_some_and(|t| t.base.collatable) { 100 } else { 0 };
    vec![
        i(relid), s(name), i(type_oid), i(-1), i(len), i(attnum), i(0), i(-1), i(typmod), V::B(matches!(len, 1 | 2 | 4 | 8)),
        s(align.to_string()), s(if len == -1 { "x" } else { "p" }), s(""), V::B(not_null), V::B(has_def), V::B(false),
        s(""), s(""), V::B(false), V::B(true), i(0), i(collation), V::N, V::N, V::N, V::N,
    ]
}

fn pg_attribute(model: &Model) -> Vec<Vec<V>> {
    let mut rows = Vec::new();
    for r in &model.relations {
        for (n, c) in r.cols.iter().enumerate() {
            rows.push(attribute_row(r.oid, n as i64 + 1, &c.name, c.type_oid, c.typmod, c.not_null, c.default.is_some()));
        }
        if let Some(idx) = r.pk_index_oid() {
            for (n, col) in r.pk.iter().enumerate() {
                let c = &r.cols[*col];
                rows.push(attribute_row(idx, n as i64 + 1, &c.name, c.type_oid, c.typmod, false, false));
            }
        }
    }
    rows
}

/// The `pg_type` row of a user enum type (typtype `e`, category `E`).
fn enum_type_row(oid: u32, nsp: u32, name: &str) -> Vec<V> {
    vec![
        i(oid), s(name), i(nsp), i(SUPERUSER_OID), i(4), V::B(true), s("e"), s("E"), V::B(false), V::B(true), s(","), i(0),
        s("-"), i(0), i(0), s("enum_in"), s("enum_out"), s("enum_recv"), s("enum_send"), s("-"), s("-"), s("-"), s("i"),
        s("p"), V::B(false), i(0), i(-1), i(0), i(0), V::N, V::N, V::N,
    ]
}

fn pg_type_row(t: &TypeRow) -> Vec<V> {
    let b = &t.base;
    let (len, category, elem, array, input, output, recv, send, subscript) = if t.is_array {
        (-1, 'A', b.oid, 0, "array_in".to_string(), "array_out".to_string(), "array_recv".to_string(), "array_send".to_string(), "array_subscript_handler")
    } else {
        let elem = match b.name {
            "name" => 18,
            "int2vector" => 21,
            "oidvector" => 26,
            _ => 0,
        };
        (b.len, b.category, elem, b.array, format!("{}in", b.name), format!("{}out", b.name), format!("{}recv", b.name), format!("{}send", b.name), "-")
    };
    let storage = if len == -1 { "x" } else { "p" };
    vec![
        i(t.oid()), s(t.name()), i(PG_CATALOG_OID), i(SUPERUSER_OID), i(len), V::B(matches!(len, 1 | 2 | 4 | 8)),
        s(if t.is_array { 'b' } else { b.typtype }.to_string()), s(category.to_string()),
        V::B(matches!(b.name, "text" | "float8" | "oid" | "bool" | "timestamptz" | "interval") && !t.is_array),
        V::B(true), s(","), i(0), s(subscript), i(elem), i(array), s(input), s(output), s(recv), s(send), s("-"),
        s("-"), s("-"), s(if t.is_array { 'i' } else { b.align }.to_string()), s(storage), V::B(false), i(0), i(-1),
        i(0), i(if b.collatable { 100 } else { 0 }), V::N, V::N, V::N,
    ]
}

fn pg_index(model: &Model) -> Vec<Vec<V>> {
    user_relations(model)
        .filter_map(|r| {
            let idx = r.pk_index_oid()?;
            let keys: Vec<V> = r.pk.iter().map(|c| i(*c as i64 + 1)).collect();
            let zeros: Vec<V> = r.pk.iter().map(|_| i(0)).collect();
            let n = r.pk.len() as i64;
            Some(vec![
                i(idx), i(r.oid), i(n), i(n), V::B(true), V::B(false), V::B(true), V::B(false), V::B(true), V::B(false),
                V::B(true), V::B(false), V::B(true), V::B(true), V::B(false), V::A(keys), V::A(zeros.clone()),
                V::A(zeros.clone()), V::A(zeros), V::N, V::N,
            ])
        })
        .collect()
}

fn pg_constraint(model: &Model) -> Vec<Vec<V>> {
    user_relations(model)
        .filter_map(|r| {
            let oid = r.pk_constraint_oid()?;
            let keys: Vec<V> = r.pk.iter().map(|c| i(*c as i64 + 1)).collect();
            Some(vec![
                i(oid), s(r.pk_name()), i(r.nsp_oid), s("p"), V::B(false), V::B(false), V::B(true), i(r.oid), i(0),
                i(r.pk_index_oid().unwrap_or(0)), i(0), i(0), s(" "), s(" "), s(" "), V::B(true), i(0), V::B(true),
                V::A(keys), V::N, V::N, V::N, V::N, V::N, V::N, V::N,
            ])
        })
        .collect()
}

fn pg_settings(session: &PgSession) -> Vec<Vec<V>> {
    let mut vars: Vec<(String, String)> = session.vars.read().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for (k, v) in [("max_index_keys", "32"), ("max_function_args", "100"), ("server_encoding", "UTF8")] {
        if !vars.iter().any(|(n, _)| n == k) {
            vars.push((k.to_string(), v.to_string()));
        }
    }
    vars.sort();
    vars.into_iter()
        .map(|(name, setting)| {
            let display = crate::planner::settings::display_var_name(&name).to_string();
            vec![
                s(display), s(&setting), V::N, s("Eddy"), V::N, V::N, s("user"), s("string"), s("session"), V::N, V::N,
                V::N, s(&setting), s(&setting), V::N, V::N, V::B(false),
            ]
        })
        .collect()
}

/// Rows of `pg_get_keywords()`: word, catcode, barelabel, catdesc, baredesc.
pub fn keyword_rows() -> Vec<Vec<V>> {
    KEYWORDS
        .iter()
        .map(|(w, c)| {
            vec![s(*w), s(c.to_string()), V::B(true), s(super::keywords::category_description(*c)), s("can be bare label")]
        })
        .collect()
}

/// `information_schema.columns.data_type` of a type: the SQL-standard spelling.
pub fn sql_data_type(type_oid: u32) -> String {
    match type_by_oid(type_oid) {
        Some(t) if t.is_array => "ARRAY".into(),
        Some(t) if t.base.typtype == 'b' || t.base.typtype == 'p' => format_type(type_oid, None),
        Some(_) => "USER-DEFINED".into(),
        None => "USER-DEFINED".into(),
    }
}

/// Namespace OIDs whose relations are catalog relations.
pub fn is_system_namespace(oid: u32) -> bool {
    oid == PG_CATALOG_OID || oid == INFORMATION_SCHEMA_OID
}
