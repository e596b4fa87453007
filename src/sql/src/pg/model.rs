//! A read-only model of the catalog as PostgreSQL describes it: every relation (user tables,
//! views and materialized views from the native catalog, plus the catalog relations
//! themselves) with its OID, namespace OID, `relkind`, columns and primary key. The
//! `pg_catalog`/`information_schema` relations and the catalog functions (`format_type`,
//! `pg_table_is_visible`, `::regclass`, ...) are all computed from this one model, so they agree.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::Statement;

use super::defs::{INFORMATION_SCHEMA_RELS, PG_CATALOG_RELS};
use super::table::RelDef;
use super::types::column_typmod;
use crate::catalog::{Catalog, RelationKind, SchemaCatalog, TableCatalog, FIRST_USER_OID};

/// OID of the `pg_catalog` namespace.
pub const PG_CATALOG_OID: u32 = 11;
/// OID of the `public` namespace.
pub const PUBLIC_OID: u32 = 2200;
/// OID of the `information_schema` namespace (PostgreSQL assigns it at initdb; this is stable).
pub const INFORMATION_SCHEMA_OID: u32 = 13000;
/// OID of the bootstrap superuser, the owner of everything.
pub const SUPERUSER_OID: u32 = 10;
/// OID of the only database.
pub const DATABASE_OID: u32 = 5;
/// OID of the `heap` table access method.
pub const HEAP_AM_OID: u32 = 2;
/// OID of the `btree` index access method.
pub const BTREE_AM_OID: u32 = 403;
/// Added to a table's OID to name its primary-key index (no native object exists for it).
const INDEX_OID_OFFSET: u32 = 1 << 30;
/// Added to a table's OID to name its primary-key constraint.
const CONSTRAINT_OID_OFFSET: u32 = 1 << 29;
/// Base of column-default OIDs (`pg_attrdef.oid`).
const ATTRDEF_OID_BASE: u32 = 1 << 28;

/// `relkind` of a native relation kind. A new [`RelationKind`] must say how psql shows it.
pub fn relkind(kind: RelationKind) -> char {
    match kind {
        RelationKind::Table => 'r',
        RelationKind::MaterializedView => 'm',
        RelationKind::View => 'v',
        // PostgreSQL's foreign tables are the closest kind: rows that live elsewhere.
        RelationKind::Source => 'f',
        // Not listed (see `relations`); a sink has no rows to describe.
        RelationKind::Sink => 'f',
    }
}

/// The OID of a namespace.
pub fn namespace_oid(schema: &SchemaCatalog) -> u32 {
    match schema.name.as_str() {
        "pg_catalog" => PG_CATALOG_OID,
        "public" => PUBLIC_OID,
        "information_schema" => INFORMATION_SCHEMA_OID,
        _ => FIRST_USER_OID + schema.id,
    }
}

/// One column as `pg_attribute` shows it.
#[derive(Debug, Clone)]
pub struct ColInfo {
    /// Column name.
    pub name: String,
    /// Type OID.
    pub type_oid: u32,
    /// `atttypmod`.
    pub typmod: i32,
    /// `attnotnull`.
    pub not_null: bool,
    /// DEFAULT expression text.
    pub default: Option<String>,
    /// `COMMENT ON COLUMN` text.
    pub comment: Option<String>,
}

/// One relation as `pg_class` shows it.
#[derive(Debug, Clone)]
pub struct RelInfo {
    /// `pg_class.oid`.
    pub oid: u32,
    /// Relation name.
    pub name: String,
    /// Namespace name.
    pub schema: String,
    /// Namespace OID.
    pub nsp_oid: u32,
    /// `relkind`.
    pub kind: char,
    /// Columns, `attnum` = index + 1.
    pub cols: Vec<ColInfo>,
    /// Primary-key columns (indices into `cols`).
    pub pk: Vec<usize>,
    /// The statement that created it (user relations only).
    pub definition: Option<String>,
    /// `COMMENT ON` text.
    pub comment: Option<String>,
}

impl RelInfo {
    /// True for catalog relations (`pg_catalog`, `information_schema`).
    pub fn is_system(&self) -> bool {
        self.nsp_oid == PG_CATALOG_OID || self.nsp_oid == INFORMATION_SCHEMA_OID
    }

    /// OID of the primary-key index, if there is a primary key.
    pub fn pk_index_oid(&self) -> Option<u32> {
        (!self.pk.is_empty()).then_some(self.oid + INDEX_OID_OFFSET)
    }

    /// OID of the primary-key constraint, if there is a primary key.
    pub fn pk_constraint_oid(&self) -> Option<u32> {
        (!self.pk.is_empty()).then_some(self.oid + CONSTRAINT_OID_OFFSET)
    }

    /// Name of the primary-key index and constraint (PostgreSQL's default, `<table>_pkey`).
    pub fn pk_name(&self) -> String {
        format!("{}_pkey", self.name)
    }

    /// `pg_attrdef.oid` of column `attnum`'s default.
    pub fn attrdef_oid(&self, attnum: usize) -> u32 {
        ATTRDEF_OID_BASE + ((self.oid - FIRST_USER_OID.min(self.oid)) << 10) + attnum as u32
    }

    /// Comma-separated, quoted primary-key column names.
    pub fn pk_columns_sql(&self) -> String {
        self.pk.iter().map(|i| quote_ident(&self.cols[*i].name)).collect::<Vec<_>>().join(", ")
    }

    /// The view query (`pg_get_viewdef`), for views and materialized views.
    pub fn view_query(&self) -> Option<String> {
        let def = self.definition.as_deref()?;
        let stmts = crate::planner::parse::parse_bounded(def).ok()?;
        match stmts.first()? {
            Statement::CreateView(v) => Some(format!(" {};", v.query)),
            _ => None,
        }
    }
}

fn user_relation(t: &Arc<TableCatalog>, nsp_oid: u32) -> RelInfo {
    RelInfo {
        oid: t.oid(),
        name: t.name.clone(),
        schema: t.schema.clone(),
        nsp_oid,
        kind: relkind(t.kind),
        cols: t
            .columns
            .iter()
            .filter(|c| !c.hidden)
            .map(|c| ColInfo {
                name: c.name.clone(),
                type_oid: c.ty.pg_oid(),
                typmod: column_typmod(&c.ty),
                not_null: c.not_null,
                default: c.default.clone(),
                comment: t.comments.columns.get(&c.name).cloned(),
            })
            .collect(),
        // Views have no constraints; their stream key may include hidden columns.
        pk: if t.is_view() { vec![] } else { t.pk.clone() },
        definition: Some(t.definition.clone()),
        comment: t.comments.relation.clone(),
    }
}

fn system_relation(def: &RelDef, schema: &str, nsp_oid: u32) -> RelInfo {
    RelInfo {
        oid: def.oid,
        name: def.name.to_string(),
        schema: schema.to_string(),
        nsp_oid,
        kind: def.kind,
        cols: def
            .cols
            .iter()
            .map(|(n, t)| ColInfo { name: n.to_string(), type_oid: t.pg_oid(), typmod: -1, not_null: false, default: None, comment: None })
            .collect(),
        pk: vec![],
        definition: None,
        comment: None,
    }
}

/// The catalog as PostgreSQL describes it, taken from one consistent copy of the native catalog.
#[derive(Debug, Clone)]
pub struct Model {
    /// `(oid, name)` of every namespace.
    pub namespaces: Vec<(u32, String)>,
    /// Every relation: user relations first, then catalog relations.
    pub relations: Vec<RelInfo>,
    /// User enum types: `(oid, namespace oid, name, labels)`.
    pub enums: Vec<(u32, u32, String, Vec<String>)>,
    /// Users created with `CREATE USER` / `CREATE ROLE`.
    pub users: Vec<crate::catalog::UserCatalog>,
}

impl Model {
    /// The model of `catalog`.
    pub fn new(catalog: &Catalog) -> Self {
        let namespaces: Vec<(u32, String)> = catalog.schemas().map(|s| (namespace_oid(s), s.name.clone())).collect();
        let nsp = |name: &str| namespaces.iter().find(|(_, n)| n == name).map(|(o, _)| *o).unwrap_or(PUBLIC_OID);
        let mut relations: Vec<RelInfo> = catalog.tables().filter(|t| t.kind != RelationKind::Sink).map(|t| user_relation(t, nsp(&t.schema))).collect();
        relations.extend(PG_CATALOG_RELS.iter().map(|d| system_relation(d, "pg_catalog", PG_CATALOG_OID)));
        relations.extend(
            INFORMATION_SCHEMA_RELS.iter().map(|d| system_relation(d, "information_schema", INFORMATION_SCHEMA_OID)),
        );
        let enums = catalog.enum_types().map(|t| (t.oid(), nsp(&t.schema), t.name.clone(), t.labels.clone())).collect();
        let users = catalog.users().cloned().collect();
        Self { namespaces, relations, enums, users }
    }

    /// The relation with `oid` (also a primary-key index's owning table via its index OID).
    pub fn relation(&self, oid: u32) -> Option<&RelInfo> {
        self.relations.iter().find(|r| r.oid == oid)
    }

    /// The relation whose primary-key index has OID `oid`.
    pub fn relation_of_index(&self, oid: u32) -> Option<&RelInfo> {
        self.relations.iter().find(|r| r.pk_index_oid() == Some(oid))
    }

    /// The relation whose primary-key constraint has OID `oid`.
    pub fn relation_of_constraint(&self, oid: u32) -> Option<&RelInfo> {
        self.relations.iter().find(|r| r.pk_constraint_oid() == Some(oid))
    }

    /// Namespace name of `oid`.
    pub fn namespace_name(&self, oid: u32) -> Option<&str> {
        self.namespaces.iter().find(|(o, _)| *o == oid).map(|(_, n)| n.as_str())
    }

    /// Resolves a relation name as `::regclass` does: `schema.name` or a bare name searched
    /// in `pg_catalog` and then `search_path`. Also finds primary-key indexes by name.
    pub fn resolve_relation(&self, name: &str, search_path: &[String]) -> Option<u32> {
        let parts = split_qualified(name);
        let (schema, rel) = match parts.as_slice() {
            [r] => (None, r.clone()),
            [s, r] => (Some(s.clone()), r.clone()),
            [_, s, r] => (Some(s.clone()), r.clone()),
            _ => return None,
        };
        let candidates: Vec<String> = match schema {
            Some(s) => vec![s],
            None => std::iter::once("pg_catalog".to_string()).chain(search_path.iter().cloned()).collect(),
        };
        for s in candidates {
            if let Some(r) = self.relations.iter().find(|r| r.schema == s && r.name == rel) {
                return Some(r.oid);
            }
            if let Some(r) = self.relations.iter().find(|r| r.schema == s && r.pk_index_oid().is_some() && r.pk_name() == rel) {
                return r.pk_index_oid();
            }
        }
        None
    }

    /// `relation::regclass::text`: the name, schema-qualified unless visible on `search_path`.
    pub fn relation_display_name(&self, oid: u32, search_path: &[String]) -> Option<String> {
        let (schema, name) = match self.relation(oid) {
            Some(r) => (r.schema.clone(), r.name.clone()),
            None => {
                let r = self.relation_of_index(oid)?;
                (r.schema.clone(), r.pk_name())
            }
        };
        if schema == "pg_catalog" || search_path.contains(&schema) {
            Some(quote_ident(&name))
        } else {
            Some(format!("{}.{}", quote_ident(&schema), quote_ident(&name)))
        }
    }
}

/// Splits `a.b."C d"` into its identifiers, folding unquoted ones to lower case.
pub fn split_qualified(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = name.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut cur)),
            c if quoted => cur.push(c),
            c => cur.extend(c.to_lowercase()),
        }
    }
    parts.push(cur);
    parts
}

/// `quote_ident`: quotes a name unless it is a plain lower-case identifier.
pub fn quote_ident(name: &str) -> String {
    let plain = !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !is_reserved(name);
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// `quote_literal`: `s` as an SQL string literal, as PostgreSQL's `quote.c` writes it: quotes
/// doubled, and a string holding a backslash gets its backslashes doubled and an `E` prefix,
/// so the literal reads back the same whatever `standard_conforming_strings` is.
pub fn quote_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 3);
    if s.contains('\\') {
        out.push('E');
    }
    eddy_common::text_out::push_quoted(s, '\'', &mut out);
    out
}

fn is_reserved(word: &str) -> bool {
    super::keywords::KEYWORDS.iter().any(|(w, cat)| *w == word && *cat == 'R')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_split_and_fold_like_postgres() {
        assert_eq!(split_qualified("Public.\"My T\""), vec!["public".to_string(), "My T".to_string()]);
        assert_eq!(split_qualified("pg_catalog.pg_class"), vec!["pg_catalog".to_string(), "pg_class".to_string()]);
    }

    #[test]
    fn quote_ident_quotes_only_when_needed() {
        assert_eq!(quote_ident("t1"), "t1");
        assert_eq!(quote_ident("My T"), "\"My T\"");
        assert_eq!(quote_ident("select"), "\"select\"");
    }
}
