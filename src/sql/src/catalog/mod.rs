//! The native catalog: schemas and tables, persisted in the state store's system key space and
//! committed through the same epoch commit as data (so DDL is durable exactly when it returns).
//!
//! Object ids come from one sequence; a relation's state-table id is its object id and its
//! PostgreSQL OID is `16384 + id`, stable across restarts.
//!
//! This is layer 1 of the SQL crate: it knows nothing of sessions, planning or actors. The
//! layers above read the live database through the [`Relations`] trait.

pub mod relations;
pub mod sequence;
pub mod types;
pub mod users;

pub use relations::Relations;
pub use users::UserCatalog;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use eddy_common::error::sqlstate;
use eddy_common::{user_err, ColumnType, EddyError, Result};
use eddy_storage::{EpochBatch, ReadSnapshot, StateTable};
use serde::{Deserialize, Serialize};

/// First OID handed to user objects, as in PostgreSQL.
pub const FIRST_USER_OID: u32 = 16384;

/// Name of the hidden key column of tables declared without a primary key.
pub const ROW_ID_COLUMN: &str = "_row_id";

/// Key prefix of catalog entries (system table id 0).
const CATALOG_PREFIX: &[u8] = b"\0\0\0\0catalog/";

/// Name of the only database.
pub const DATABASE_NAME: &str = "dev";

/// Schemas that always exist.
pub const BUILTIN_SCHEMAS: [&str; 3] = ["public", "pg_catalog", "information_schema"];

/// One column of a table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ColumnCatalog {
    /// Column name.
    pub name: String,
    /// Declared type.
    pub ty: ColumnType,
    /// `NOT NULL` (implied for primary-key columns).
    pub not_null: bool,
    /// `DEFAULT` expression as SQL text.
    pub default: Option<String>,
    /// Stored but not visible to queries (a view's extra key columns).
    #[serde(default)]
    pub hidden: bool,
}

/// What kind of relation an entry is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum RelationKind {
    /// A table written by DML.
    Table,
    /// A materialized view, maintained incrementally.
    MaterializedView,
    /// A (plain) view: a stored query, expanded where it is read.
    View,
    /// A source (`CREATE SOURCE`): rows a connector produces, not stored; each materialized
    /// view reading it runs its own reader of the connector.
    Source,
    /// A sink (`CREATE SINK`): a maintained query whose changes go to a connector (Kafka)
    /// instead of a state table; it has no rows to read.
    Sink,
}

/// What an INSERT into a table does with a row whose primary key exists (RisingWave's
/// `CREATE TABLE ... ON CONFLICT ...`); PostgreSQL's behaviour, an error, is the default.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum ConflictPolicy {
    /// 23505 `duplicate key value violates unique constraint` (the statement changes nothing).
    #[default]
    Error,
    /// `ON CONFLICT OVERWRITE`: the new row replaces the old one.
    Overwrite,
    /// `ON CONFLICT IGNORE` / `DO NOTHING`: the old row stays.
    Ignore,
    /// `ON CONFLICT DO UPDATE IF NOT NULL`: the new row's non-null values replace the old ones.
    UpdateIfNotNull,
}

impl ConflictPolicy {
    /// The clause as `SHOW CREATE TABLE`-style text would spell it.
    pub fn sql(&self) -> &'static str {
        match self {
            ConflictPolicy::Error => "",
            ConflictPolicy::Overwrite => "ON CONFLICT OVERWRITE",
            ConflictPolicy::Ignore => "ON CONFLICT IGNORE",
            ConflictPolicy::UpdateIfNotNull => "ON CONFLICT DO UPDATE IF NOT NULL",
        }
    }
}

/// A table (and later: view, materialized view, source).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TableCatalog {
    /// Object id (state-table id; OID = 16384 + id).
    pub id: u32,
    /// Schema name.
    pub schema: String,
    /// Relation name.
    pub name: String,
    /// What the relation is.
    pub kind: RelationKind,
    /// User-visible columns.
    pub columns: Vec<ColumnCatalog>,
    /// Indices of primary-key columns; empty = keyed by a hidden `_row_id`.
    pub pk: Vec<usize>,
    /// The statement that created it.
    pub definition: String,
    /// For views: the defining query's text.
    #[serde(default)]
    pub query: Option<String>,
    /// For views: ids of the relations it reads.
    #[serde(default)]
    pub dependencies: Vec<u32>,
    /// For views: state-table ids of its stateful operators, in plan order.
    #[serde(default)]
    pub internal_tables: Vec<u32>,
    /// `COMMENT ON` texts.
    #[serde(default)]
    pub comments: Comments,
    /// For tables with a primary key: what an INSERT of an existing key does.
    #[serde(default)]
    pub on_conflict: ConflictPolicy,
    /// RisingWave's `APPEND ONLY` table: rows are only ever inserted (UPDATE and DELETE are
    /// refused); for a materialized view, its changes are only inserts.
    #[serde(default)]
    pub append_only: bool,
    /// For sources: the `WITH (...)` options (keys lower-cased), with `FORMAT` and `ENCODE`
    /// under the keys `format` and `encode`.
    #[serde(default)]
    pub with_options: BTreeMap<String, String>,
    /// `WATERMARK FOR column AS column - delay` (append-only tables and sources); for a
    /// materialized view, the column whose watermark it passes on (delay 0, nothing generated).
    #[serde(default)]
    pub watermark: Option<WatermarkDef>,
    /// For materialized views: `EMIT ON WINDOW CLOSE`.
    #[serde(default)]
    pub emit_on_window_close: bool,
    /// A materialized view's actors per fragment (0 or 1: one actor runs the whole view).
    #[serde(default)]
    pub parallelism: u32,
    /// For tables: `CHECK` constraints, in declaration order.
    #[serde(default)]
    pub checks: Vec<CheckDef>,
    /// What is derived from this entry and worth building once (entries are immutable: a DDL
    /// change replaces the whole entry, and with it this cache).
    #[serde(skip)]
    pub derived: Derived,
}

/// A table's `CHECK (expr)` constraint: every stored row makes `expr` true or NULL.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckDef {
    /// The constraint's name (PostgreSQL's `t_col_check` / `t_check` when not given).
    pub name: String,
    /// The expression's SQL text, over the table's column names.
    pub expr: String,
}

/// A relation's event-time watermark: rows whose `column` is more than `delay_us` behind the
/// largest seen so far are late (see `eddy_stream::watermark`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WatermarkDef {
    /// The event-time column (a timestamp).
    pub column: String,
    /// How far the watermark trails the largest event time, in microseconds.
    pub delay_us: i64,
}

/// Values derived from a [`TableCatalog`] on first use. Never persisted; equal whatever it holds.
#[derive(Debug, Clone, Default)]
pub struct Derived {
    /// The state table holding the relation's rows (its codecs are worth reusing).
    state_table: std::sync::OnceLock<Arc<StateTable>>,
    /// Key and value encoding of stored rows.
    codec: std::sync::OnceLock<Arc<eddy_common::codec::RowCodec>>,
    /// Parsed column defaults, by column name.
    pub defaults: std::sync::OnceLock<std::collections::HashMap<String, datafusion::logical_expr::Expr>>,
}

impl PartialEq for Derived {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Comments on a relation and its columns (`COMMENT ON TABLE/COLUMN ...`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Comments {
    /// On the relation.
    pub relation: Option<String>,
    /// On columns, by name.
    pub columns: std::collections::BTreeMap<String, String>,
}

impl TableCatalog {
    /// A relation of `kind` with `columns`, keyed by a hidden row id, every other property
    /// empty or off: the constant rows of a view (which no catalog lists), and tests.
    pub fn unlisted(id: u32, name: &str, kind: RelationKind, columns: Vec<ColumnCatalog>) -> Self {
        Self {
            id,
            schema: String::new(),
            name: name.to_string(),
            kind,
            columns,
            pk: vec![],
            definition: String::new(),
            query: None,
            dependencies: vec![],
            internal_tables: vec![],
            comments: Default::default(),
            on_conflict: Default::default(),
            append_only: false,
            with_options: Default::default(),
            watermark: None,
            emit_on_window_close: false,
            parallelism: 0,
            checks: vec![],
            derived: Default::default(),
        }
    }

    /// PostgreSQL OID.
    pub fn oid(&self) -> u32 {
        FIRST_USER_OID + self.id
    }

    /// True when rows are keyed by a hidden row id (tables without a primary key).
    pub fn has_row_id(&self) -> bool {
        self.pk.is_empty() && matches!(self.kind, RelationKind::Table | RelationKind::Source)
    }

    /// Schema DataFusion plans against: every column nullable, so NOT NULL is enforced by
    /// Eddy with PostgreSQL's error (23502) rather than by the planner.
    pub fn planning_schema(&self, with_row_id: bool) -> SchemaRef {
        let mut fields: Vec<Field> = self.columns.iter().filter(|c| !c.hidden).map(|c| c.ty.to_field(&c.name, true)).collect();
        if with_row_id && self.has_row_id() {
            fields.push(Field::new(ROW_ID_COLUMN, DataType::Int64, true));
        }
        Arc::new(Schema::new(fields))
    }

    /// Schema of the user-visible columns.
    pub fn user_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns.iter().filter(|c| !c.hidden).map(|c| c.ty.to_field(&c.name, !c.not_null)).collect::<Vec<Field>>(),
        ))
    }

    /// Indices (in the storage schema) of the columns queries see.
    pub fn visible_indices(&self) -> Vec<usize> {
        self.columns.iter().enumerate().filter(|(_, c)| !c.hidden).map(|(i, _)| i).collect()
    }

    /// True for materialized views.
    pub fn is_view(&self) -> bool {
        self.kind == RelationKind::MaterializedView
    }

    /// True for relations an actor maintains from their query: materialized views and sinks.
    pub fn is_maintained(&self) -> bool {
        matches!(self.kind, RelationKind::MaterializedView | RelationKind::Sink)
    }

    /// What the relation is, as PostgreSQL's messages name it.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            RelationKind::Table => "table",
            RelationKind::MaterializedView => "materialized view",
            RelationKind::View => "view",
            RelationKind::Source => "source",
            RelationKind::Sink => "sink",
        }
    }

    /// Schema of stored rows: user columns plus `_row_id` when there is no primary key.
    pub fn storage_schema(&self) -> SchemaRef {
        let mut fields: Vec<Field> = self.columns.iter().map(|c| c.ty.to_field(&c.name, !c.not_null)).collect();
        if self.has_row_id() {
            fields.push(Field::new(ROW_ID_COLUMN, DataType::Int64, false));
        }
        Arc::new(Schema::new(fields))
    }

    /// The state table holding this relation's rows.
    pub fn state_table(&self) -> Result<Arc<StateTable>> {
        if let Some(t) = self.derived.state_table.get() {
            return Ok(t.clone());
        }
        let t = Arc::new(StateTable::try_new(self.id, self.storage_schema(), self.storage_pk())?);
        Ok(self.derived.state_table.get_or_init(|| t).clone())
    }

    /// The encoding of this relation's stored keys and rows.
    pub fn codec(&self) -> Result<Arc<eddy_common::codec::RowCodec>> {
        if let Some(c) = self.derived.codec.get() {
            return Ok(c.clone());
        }
        let c = Arc::new(eddy_common::codec::RowCodec::try_new(self.storage_schema(), self.storage_pk())?);
        Ok(self.derived.codec.get_or_init(|| c).clone())
    }

    /// Key columns of stored rows.
    pub fn storage_pk(&self) -> Vec<usize> {
        if self.has_row_id() {
            vec![self.columns.len()]
        } else {
            self.pk.clone()
        }
    }
}

/// A schema (namespace).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SchemaCatalog {
    /// Object id.
    pub id: u32,
    /// Schema name.
    pub name: String,
}

/// A secondary index (`CREATE INDEX name ON table (columns)`). Eddy answers every query from
/// its own storage; an index is recorded (so it can be dropped and listed) but not built.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IndexCatalog {
    /// Object id.
    pub id: u32,
    /// Schema name (the table's).
    pub schema: String,
    /// Index name.
    pub name: String,
    /// The indexed relation.
    pub table_id: u32,
    /// Indexed columns.
    pub columns: Vec<String>,
}

/// A user-defined enum type (`CREATE TYPE name AS ENUM (...)`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TypeCatalog {
    /// Object id (OID = 16384 + id).
    pub id: u32,
    /// Schema name.
    pub schema: String,
    /// Type name.
    pub name: String,
    /// The labels, in sort order.
    pub labels: Vec<String>,
}

impl TypeCatalog {
    /// PostgreSQL OID.
    pub fn oid(&self) -> u32 {
        FIRST_USER_OID + self.id
    }
}

/// A persisted catalog entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Entry {
    Schema(SchemaCatalog),
    Table(Box<TableCatalog>),
    Type(TypeCatalog),
    User(UserCatalog),
    Index(IndexCatalog),
}

/// The in-memory catalog; the persisted copy is changed only through [`CatalogChange`]s that
/// commit with an epoch.
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    /// Schemas by name.
    schemas: BTreeMap<String, SchemaCatalog>,
    /// Relations by (schema, name).
    tables: BTreeMap<(String, String), Arc<TableCatalog>>,
    /// Enum types by (schema, name).
    types: BTreeMap<(String, String), TypeCatalog>,
    /// Users by name.
    users: BTreeMap<String, UserCatalog>,
    /// Indexes by (schema, name).
    indexes: BTreeMap<(String, String), IndexCatalog>,
    /// Next object id, shared by every copy of the catalog.
    next_id: IdCounter,
}

/// The next object id. Copies of a catalog share it: a DDL statement decides its changes on a
/// copy while a view being created takes ids for its internal tables from the live catalog,
/// and both must never hand out the same id (two relations would share their state).
#[derive(Debug, Clone)]
struct IdCounter(Arc<std::sync::atomic::AtomicU32>);

impl Default for IdCounter {
    fn default() -> Self {
        IdCounter::new(0)
    }
}

impl IdCounter {
    fn new(next: u32) -> Self {
        IdCounter(Arc::new(std::sync::atomic::AtomicU32::new(next)))
    }

    fn get(&self) -> u32 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Makes every id below `next` taken.
    fn bump_to(&self, next: u32) {
        self.0.fetch_max(next, std::sync::atomic::Ordering::SeqCst);
    }

    fn take(&self) -> u32 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }
}

/// A change to the catalog, to be committed with an epoch and then applied in memory.
// Made a few at a time per DDL statement, so the size of `CreateTable` does not matter and
// boxing it would only add noise at every call site.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum CatalogChange {
    CreateSchema(SchemaCatalog),
    DropSchema(SchemaCatalog),
    CreateTable(TableCatalog),
    DropTable(Arc<TableCatalog>),
    CreateType(TypeCatalog),
    DropType(TypeCatalog),
    /// Creates a user, or replaces the user with the same id (ALTER USER).
    CreateUser(UserCatalog),
    DropUser(UserCatalog),
    CreateIndex(IndexCatalog),
    DropIndex(IndexCatalog),
}

fn entry_key(id: u32) -> Vec<u8> {
    let mut k = CATALOG_PREFIX.to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

impl Catalog {
    /// The next relation id to hand out (every id below it is taken).
    pub fn next_id(&self) -> u32 {
        self.next_id.get()
    }

    /// Loads the catalog from a committed snapshot, creating the built-in schemas' entries
    /// in memory if this is a new store.
    pub async fn load(snapshot: &ReadSnapshot) -> Result<Self> {
        let mut cat = Catalog { next_id: IdCounter::new(1), ..Default::default() };
        if let Some(v) = snapshot.get(eddy_common::codec::NEXT_ID_KEY).await? {
            let mark = <[u8; 4]>::try_from(&v[..]).map_err(|_| EddyError::internal("corrupt id high-water mark"))?;
            cat.next_id.bump_to(u32::from_be_bytes(mark));
        }
        for (_, v) in snapshot.scan_prefix(CATALOG_PREFIX).await? {
            let entry: Entry = serde_json::from_slice(&v)
                .map_err(|e| EddyError::internal(format!("corrupt catalog entry: {e}")))?;
            match entry {
                Entry::Schema(s) => {
                    cat.next_id.bump_to(s.id + 1);
                    cat.schemas.insert(s.name.clone(), s);
                }
                Entry::Table(t) => {
                    cat.next_id.bump_to(t.id + 1);
                    cat.tables.insert((t.schema.clone(), t.name.clone()), Arc::new(*t));
                }
                Entry::Type(t) => {
                    cat.next_id.bump_to(t.id + 1);
                    cat.types.insert((t.schema.clone(), t.name.clone()), t);
                }
                Entry::User(u) => {
                    cat.next_id.bump_to(u.id + 1);
                    cat.users.insert(u.name.clone(), u);
                }
                Entry::Index(i) => {
                    cat.next_id.bump_to(i.id + 1);
                    cat.indexes.insert((i.schema.clone(), i.name.clone()), i);
                }
            }
        }
        // An index of a dropped table (its entry outlives the table's) is gone with it.
        let table_ids: std::collections::HashSet<u32> = cat.tables.values().map(|t| t.id).collect();
        cat.indexes.retain(|_, i| table_ids.contains(&i.table_id));
        Ok(cat)
    }

    /// Schemas that must exist but are not yet persisted (first start).
    pub fn missing_builtin_schemas(&mut self) -> Vec<CatalogChange> {
        let missing: Vec<&str> = BUILTIN_SCHEMAS.iter().copied().filter(|n| !self.schemas.contains_key(*n)).collect();
        missing
            .into_iter()
            .map(|n| CatalogChange::CreateSchema(SchemaCatalog { id: self.allocate_id(), name: n.to_string() }))
            .collect()
    }

    /// A fresh object id. Ids handed out but never committed are simply skipped.
    pub fn allocate_id(&mut self) -> u32 {
        self.next_id.take()
    }

    /// Adds the persisted form of `change` to `batch`.
    pub fn persist(change: &CatalogChange, batch: &mut EpochBatch) -> Result<()> {
        let (id, entry) = match change {
            CatalogChange::CreateSchema(s) => (s.id, Some(Entry::Schema(s.clone()))),
            CatalogChange::CreateTable(t) => (t.id, Some(Entry::Table(Box::new(t.clone())))),
            CatalogChange::DropSchema(s) => (s.id, None),
            CatalogChange::DropTable(t) => (t.id, None),
            CatalogChange::CreateType(t) => (t.id, Some(Entry::Type(t.clone()))),
            CatalogChange::DropType(t) => (t.id, None),
            CatalogChange::CreateUser(u) => (u.id, Some(Entry::User(u.clone()))),
            CatalogChange::DropUser(u) => (u.id, None),
            CatalogChange::CreateIndex(i) => (i.id, Some(Entry::Index(i.clone()))),
            CatalogChange::DropIndex(i) => (i.id, None),
        };
        match entry {
            Some(e) => batch.put(
                entry_key(id),
                serde_json::to_vec(&e).map_err(|e| EddyError::internal(format!("catalog encode: {e}")))?,
            ),
            None => batch.delete(entry_key(id)),
        }
        Ok(())
    }

    /// Applies a committed change in memory.
    pub fn apply(&mut self, change: CatalogChange) {
        match change {
            CatalogChange::CreateSchema(s) => {
                self.next_id.bump_to(s.id + 1);
                self.schemas.insert(s.name.clone(), s);
            }
            CatalogChange::DropSchema(s) => {
                self.schemas.remove(&s.name);
            }
            CatalogChange::CreateTable(t) => {
                // An existing id is replaced (a rename, a comment, a replaced view).
                self.tables.retain(|_, e| e.id != t.id);
                self.next_id.bump_to(t.id + 1);
                self.tables.insert((t.schema.clone(), t.name.clone()), Arc::new(t));
            }
            CatalogChange::DropTable(t) => {
                self.tables.remove(&(t.schema.clone(), t.name.clone()));
                self.indexes.retain(|_, i| i.table_id != t.id);
            }
            CatalogChange::CreateType(t) => {
                self.next_id.bump_to(t.id + 1);
                self.types.insert((t.schema.clone(), t.name.clone()), t);
            }
            CatalogChange::DropType(t) => {
                self.types.remove(&(t.schema.clone(), t.name.clone()));
            }
            CatalogChange::CreateIndex(i) => {
                self.next_id.bump_to(i.id + 1);
                self.indexes.insert((i.schema.clone(), i.name.clone()), i);
            }
            CatalogChange::DropIndex(i) => {
                self.indexes.remove(&(i.schema.clone(), i.name.clone()));
            }
            CatalogChange::CreateUser(u) => {
                // An existing id is replaced (a new password, a rename).
                self.users.retain(|_, e| e.id != u.id);
                self.next_id.bump_to(u.id + 1);
                self.users.insert(u.name.clone(), u);
            }
            CatalogChange::DropUser(u) => {
                self.users.remove(&u.name);
            }
        }
    }

    /// The user named `name`.
    pub fn user(&self, name: &str) -> Option<&UserCatalog> {
        self.users.get(name)
    }

    /// All users.
    pub fn users(&self) -> impl Iterator<Item = &UserCatalog> {
        self.users.values()
    }

    /// The schema named `name`.
    pub fn schema(&self, name: &str) -> Option<&SchemaCatalog> {
        self.schemas.get(name)
    }

    /// All schemas.
    pub fn schemas(&self) -> impl Iterator<Item = &SchemaCatalog> {
        self.schemas.values()
    }

    /// The relation `schema.name`.
    pub fn table(&self, schema: &str, name: &str) -> Option<&Arc<TableCatalog>> {
        self.tables.get(&(schema.to_string(), name.to_string()))
    }

    /// All relations.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<TableCatalog>> {
        self.tables.values()
    }

    /// Views that read relation `id`.
    pub fn dependents(&self, id: u32) -> Vec<Arc<TableCatalog>> {
        self.tables.values().filter(|t| t.dependencies.contains(&id)).cloned().collect()
    }

    /// The enum type `schema.name`.
    pub fn enum_type(&self, schema: &str, name: &str) -> Option<&TypeCatalog> {
        self.types.get(&(schema.to_string(), name.to_string()))
    }

    /// An index by schema and name.
    pub fn index(&self, schema: &str, name: &str) -> Option<&IndexCatalog> {
        self.indexes.get(&(schema.to_string(), name.to_string()))
    }

    /// The indexes of relation `table_id`.
    pub fn indexes_of(&self, table_id: u32) -> impl Iterator<Item = &IndexCatalog> {
        self.indexes.values().filter(move |i| i.table_id == table_id)
    }

    /// All enum types.
    pub fn enum_types(&self) -> impl Iterator<Item = &TypeCatalog> {
        self.types.values()
    }

    /// A relation by id.
    pub fn by_id(&self, id: u32) -> Option<&Arc<TableCatalog>> {
        self.tables.values().find(|t| t.id == id)
    }

    /// Relations in `schema`.
    pub fn tables_in(&self, schema: &str) -> Vec<Arc<TableCatalog>> {
        self.tables.values().filter(|t| t.schema == schema).cloned().collect()
    }

    /// Fails with `3F000` unless `schema` exists.
    pub fn require_schema(&self, schema: &str) -> Result<&SchemaCatalog> {
        self.schema(schema)
            .ok_or_else(|| user_err!(sqlstate::INVALID_SCHEMA_NAME, "schema \"{schema}\" does not exist"))
    }
}
