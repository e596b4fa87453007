//! Building blocks of the catalog relations: PostgreSQL column types ([`Ty`]), loosely typed
//! cell values ([`V`]), relation definitions ([`RelDef`]) and the read-only DataFusion table
//! ([`CatalogTable`]) that computes its rows from the native catalog on every scan.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder, ListBuilder, UInt32Builder,
    RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use eddy_common::types::JSONB_METADATA_KEY;

/// PostgreSQL type of a catalog column, and how it is held in Arrow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// `oid` (Int32; reported as `oid`).
    Oid,
    /// `name` (Utf8; reported as `name`).
    Name,
    /// `"char"` (Utf8 of one character, possibly empty; reported as `"char"`).
    Char,
    /// `text` (also `pg_node_tree`).
    Text,
    /// `regproc` (Utf8 function name; reported as `regproc`).
    Regproc,
    /// `bool`.
    Bool,
    /// `int2`.
    I2,
    /// `int4` (also `xid`).
    I4,
    /// `int8`.
    I8,
    /// `float4`.
    F4,
    /// `float8`.
    F8,
    /// `timestamptz`.
    Ts,
    /// `text[]` (also `aclitem[]`, `name[]`, `"char"[]`).
    TextArr,
    /// `oid[]` / `oidvector`.
    OidArr,
    /// `int2[]` / `int2vector`.
    I2Arr,
}

impl Ty {
    /// Arrow type values of this column are held in.
    pub fn arrow(self) -> DataType {
        match self {
            Ty::Oid => DataType::UInt32,
            Ty::I4 => DataType::Int32,
            Ty::Name | Ty::Char | Ty::Text | Ty::Regproc => DataType::Utf8,
            Ty::Bool => DataType::Boolean,
            Ty::I2 => DataType::Int16,
            Ty::I8 => DataType::Int64,
            Ty::F4 => DataType::Float32,
            Ty::F8 => DataType::Float64,
            Ty::Ts => DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from(eddy_common::types::UTC))),
            Ty::TextArr => DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))),
            Ty::OidArr => DataType::List(Arc::new(Field::new_list_field(DataType::UInt32, true))),
            Ty::I2Arr => DataType::List(Arc::new(Field::new_list_field(DataType::Int16, true))),
        }
    }

    /// PostgreSQL type OID (for `pg_attribute.atttypid` of catalog columns).
    pub fn pg_oid(self) -> u32 {
        match self {
            Ty::Oid => 26,
            Ty::Name => 19,
            Ty::Char => 18,
            Ty::Text => 25,
            Ty::Regproc => 24,
            Ty::Bool => 16,
            Ty::I2 => 21,
            Ty::I4 => 23,
            Ty::I8 => 20,
            Ty::F4 => 700,
            Ty::F8 => 701,
            Ty::Ts => 1184,
            Ty::TextArr => 1009,
            Ty::OidArr => 1028,
            Ty::I2Arr => 1005,
        }
    }

    /// The Arrow field of a column `name` of this type; types Arrow cannot tell apart from
    /// `int4`/`text` carry their PostgreSQL name in the field metadata for the wire layer.
    pub fn field(self, name: &str) -> Field {
        let f = Field::new(name, self.arrow(), true);
        let tag = match self {
            Ty::Oid => "oid",
            Ty::Name => "name",
            Ty::Char => "char",
            Ty::Regproc => "regproc",
            _ => return f,
        };
        f.with_metadata(HashMap::from([(JSONB_METADATA_KEY.to_string(), tag.to_string())]))
    }
}

/// One cell of a catalog row.
#[derive(Debug, Clone, PartialEq)]
pub enum V {
    /// SQL NULL.
    N,
    /// A boolean.
    B(bool),
    /// Any integer (also OIDs).
    I(i64),
    /// A float.
    F(f64),
    /// Text.
    S(String),
    /// An array.
    A(Vec<V>),
}

/// Text cell.
pub fn s(v: impl Into<String>) -> V {
    V::S(v.into())
}

/// Integer cell.
pub fn i(v: impl Into<i64>) -> V {
    V::I(v.into())
}

/// A catalog relation: its name, OID, kind and PostgreSQL 15 columns.
#[derive(Debug)]
pub struct RelDef {
    /// Relation name.
    pub name: &'static str,
    /// OID (PostgreSQL's own where clients hard-code it, e.g. `pg_class` = 1259).
    pub oid: u32,
    /// `relkind`: `r` for catalog tables, `v` for catalog views.
    pub kind: char,
    /// Columns in PostgreSQL's order.
    pub cols: &'static [(&'static str, Ty)],
}

impl RelDef {
    /// Arrow schema of the relation.
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.cols.iter().map(|(n, t)| t.field(n)).collect::<Vec<_>>()))
    }
}

fn int_of(v: &V) -> Option<i64> {
    match v {
        V::I(x) => Some(*x),
        V::B(b) => Some(i64::from(*b)),
        V::F(f) => Some(*f as i64),
        _ => None,
    }
}

fn text_of(v: &V) -> Option<String> {
    match v {
        V::N => None,
        V::S(x) => Some(x.clone()),
        V::I(x) => Some(x.to_string()),
        V::F(x) => Some(x.to_string()),
        V::B(b) => Some(if *b { "t".into() } else { "f".into() }),
        V::A(_) => None,
    }
}

fn list_items(v: &V) -> Option<&[V]> {
    match v {
        V::A(items) => Some(items),
        _ => None,
    }
}

/// One column of `rows` as an Arrow array of type `ty`. Cells of the wrong shape are NULL.
fn column(ty: Ty, rows: &[Vec<V>], idx: usize) -> ArrayRef {
    let cells = rows.iter().map(|r| r.get(idx).unwrap_or(&V::N));
    match ty {
        Ty::Oid => {
            let mut b = UInt32Builder::new();
            cells.for_each(|c| b.append_option(int_of(c).and_then(|x| u32::try_from(x).ok())));
            Arc::new(b.finish())
        }
        Ty::I4 => {
            let mut b = Int32Builder::new();
            cells.for_each(|c| b.append_option(int_of(c).map(|x| x as i32)));
            Arc::new(b.finish())
        }
        Ty::I2 => {
            let mut b = Int16Builder::new();
            cells.for_each(|c| b.append_option(int_of(c).map(|x| x as i16)));
            Arc::new(b.finish())
        }
        Ty::I8 => {
            let mut b = Int64Builder::new();
            cells.for_each(|c| b.append_option(int_of(c)));
            Arc::new(b.finish())
        }
        Ty::F4 => {
            let mut b = Float32Builder::new();
            cells.for_each(|c| b.append_option(if let V::F(f) = c { Some(*f as f32) } else { int_of(c).map(|x| x as f32) }));
            Arc::new(b.finish())
        }
        Ty::F8 => {
            let mut b = Float64Builder::new();
            cells.for_each(|c| b.append_option(if let V::F(f) = c { Some(*f) } else { int_of(c).map(|x| x as f64) }));
            Arc::new(b.finish())
        }
        Ty::Bool => {
            let mut b = BooleanBuilder::new();
            cells.for_each(|c| b.append_option(if let V::B(x) = c { Some(*x) } else { None }));
            Arc::new(b.finish())
        }
        Ty::Ts => {
            let mut b = TimestampMicrosecondBuilder::new().with_timezone(eddy_common::types::UTC);
            cells.for_each(|c| b.append_option(int_of(c)));
            Arc::new(b.finish())
        }
        Ty::Name | Ty::Char | Ty::Text | Ty::Regproc => {
            let mut b = StringBuilder::new();
            cells.for_each(|c| b.append_option(text_of(c)));
            Arc::new(b.finish())
        }
        Ty::TextArr => {
            let mut b = ListBuilder::new(StringBuilder::new());
            for c in cells {
                match list_items(c) {
                    Some(items) => {
                        items.iter().for_each(|x| b.values().append_option(text_of(x)));
                        b.append(true);
                    }
                    None => b.append(false),
                }
            }
            Arc::new(b.finish())
        }
        Ty::OidArr => {
            let mut b = ListBuilder::new(UInt32Builder::new());
            for c in cells {
                match list_items(c) {
                    Some(items) => {
                        items.iter().for_each(|x| b.values().append_option(int_of(x).and_then(|v| u32::try_from(v).ok())));
                        b.append(true);
                    }
                    None => b.append(false),
                }
            }
            Arc::new(b.finish())
        }
        Ty::I2Arr => {
            let mut b = ListBuilder::new(Int16Builder::new());
            for c in cells {
                match list_items(c) {
                    Some(items) => {
                        items.iter().for_each(|x| b.values().append_option(int_of(x).map(|v| v as i16)));
                        b.append(true);
                    }
                    None => b.append(false),
                }
            }
            Arc::new(b.finish())
        }
    }
}

/// The rows of `def` as one record batch of `def.schema()`.
pub fn build_batch(def: &RelDef, rows: &[Vec<V>]) -> DfResult<RecordBatch> {
    let schema = def.schema();
    let arrays = def.cols.iter().enumerate().map(|(idx, (_, ty))| column(*ty, rows, idx)).collect();
    Ok(RecordBatch::try_new(schema, arrays)?)
}

/// Computes a catalog relation's rows for the statement reading it.
pub type RowSource = dyn Fn(&dyn Session) -> DfResult<Vec<Vec<V>>> + Send + Sync;

/// A read-only catalog relation whose rows are computed on every scan, so it always shows the
/// catalog as it is when the statement runs.
pub struct CatalogTable {
    /// The relation.
    pub def: &'static RelDef,
    /// Its rows.
    pub rows: Arc<RowSource>,
}

impl std::fmt::Debug for CatalogTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CatalogTable({})", self.def.name)
    }
}

#[async_trait]
impl TableProvider for CatalogTable {
    fn schema(&self) -> SchemaRef {
        self.def.schema()
    }

    fn table_type(&self) -> TableType {
        if self.def.kind == 'v' {
            TableType::View
        } else {
            TableType::Base
        }
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let rows = (self.rows)(state)?;
        let batch = build_batch(self.def, &rows)?;
        let exec = MemorySourceConfig::try_new_exec(&[vec![batch]], self.def.schema(), projection.cloned())?;
        Ok(exec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static DEF: RelDef = RelDef {
        name: "t",
        oid: 1,
        kind: 'r',
        cols: &[("oid", Ty::Oid), ("name", Ty::Name), ("keys", Ty::I2Arr), ("flag", Ty::Bool)],
    };

    #[test]
    fn rows_become_typed_columns_and_bad_cells_become_null() {
        let rows = vec![
            vec![i(16384), s("t1"), V::A(vec![i(1), i(2)]), V::B(true)],
            vec![s("not a number"), V::N, V::N, V::N],
        ];
        let b = build_batch(&DEF, &rows).unwrap();
        assert_eq!(b.num_rows(), 2);
        assert_eq!(b.column(0).null_count(), 1);
        assert_eq!(b.column(2).null_count(), 1);
        assert_eq!(b.schema().field(0).metadata().get(JSONB_METADATA_KEY).map(String::as_str), Some("oid"));
    }
}
