//! `pg_table_size`, `pg_relation_size`, `pg_total_relation_size`, `pg_indexes_size` and
//! `pg_database_size` (psql's `\dt+` and `\l+` sizes, BI tools' table lists): bytes of state
//! at the last committed epoch, estimated by [`eddy_storage::sizes`] (exact below 1 MiB, else
//! scaled from the first vnodes; each estimate reads at most 16 MiB).
//!
//! A relation's own size is its rows' state: a table's rows, a materialized view's rows. The
//! total size adds the state of a view's (or sink's) operators, as PostgreSQL's adds indexes
//! and TOAST. Plain views, sources, indexes (Eddy builds none) and the system catalogs are 0
//! bytes; an OID of no relation is NULL, as in PostgreSQL. The database size is every
//! relation's total.
//!
//! They read the store, so they are asynchronous functions (DataFusion runs them in their own
//! plan node) and volatile (never folded while planning).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::Int64Array;
use arrow::datatypes::DataType;
use async_trait::async_trait;
use datafusion::common::{exec_err, ScalarValue};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::async_udf::{AsyncScalarUDF, AsyncScalarUDFImpl};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use datafusion::prelude::SessionContext;

use super::functions::relation_oid;
use super::udf::FnContext;
use super::PgSession;
use crate::catalog::{RelationKind, Relations, TableCatalog};
use eddy_storage::ReadSnapshot;

/// What a function measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Measure {
    /// The relation's own rows (`pg_table_size`, `pg_relation_size`).
    Rows,
    /// Rows and operator state (`pg_total_relation_size`).
    Total,
    /// Its indexes: Eddy builds none (`pg_indexes_size`).
    Indexes,
    /// Every relation (`pg_database_size`).
    Database,
}

struct SizeFn {
    name: &'static str,
    measure: Measure,
    relations: Arc<dyn Relations>,
    session: Arc<PgSession>,
    signature: Signature,
}

impl std::fmt::Debug for SizeFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}()", self.name)
    }
}

impl PartialEq for SizeFn {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && Arc::ptr_eq(&self.session, &other.session)
    }
}

impl Eq for SizeFn {}

impl std::hash::Hash for SizeFn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl ScalarUDFImpl for SizeFn {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }
    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        exec_err!("{} reads the state store and runs asynchronously", self.name)
    }
}

#[async_trait]
impl AsyncScalarUDFImpl for SizeFn {
    async fn invoke_async_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = if scalar { 1 } else { args.number_rows };
        let arrays = args.args.iter().map(|a| a.to_array(n)).collect::<DfResult<Vec<_>>>()?;
        let mut cx = FnContext::new(self.relations.clone(), self.session.clone());
        // One catalog and one epoch for every row of the call; each relation measured once.
        let catalog = self.relations.catalog();
        let snapshot = self.relations.snapshot();
        let mut memo: HashMap<u32, Option<i64>> = HashMap::new();
        let mut database: Option<i64> = None;
        let mut out = Vec::with_capacity(n);
        for row in 0..n {
            let arg = arrays.first().map(|a| ScalarValue::try_from_array(a, row)).transpose()?;
            let size = if self.measure == Measure::Database {
                // Any database name or OID: Eddy serves one database.
                match arg {
                    Some(a) if a.is_null() => None,
                    _ => Some(match database {
                        Some(total) => total,
                        None => *database.insert(state_bytes(&snapshot, catalog.tables().flat_map(|r| all_state(r)).collect::<Vec<u32>>()).await?),
                    }),
                }
            } else {
                match relation_oid(&mut cx, arg.as_ref())? {
                    None => None,
                    Some(oid) => match memo.get(&oid) {
                        Some(known) => *known,
                        None => {
                            let size = self.relation_bytes(&mut cx, &catalog, &snapshot, oid).await?;
                            memo.insert(oid, size);
                            size
                        }
                    },
                }
            };
            out.push(size);
        }
        let array = Int64Array::from(out);
        Ok(if scalar { ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?) } else { ColumnarValue::Array(Arc::new(array)) })
    }
}

impl SizeFn {
    /// The measure of relation `oid` (not the database's); `None` when no relation has that
    /// OID.
    async fn relation_bytes(&self, cx: &mut FnContext, catalog: &crate::catalog::Catalog, snapshot: &ReadSnapshot, oid: u32) -> DfResult<Option<i64>> {
        let Some(rel) = catalog.tables().find(|t| t.oid() == oid) else {
            // A system catalog or a primary key's index: no state of its own.
            return Ok(cx.model().relation(oid).map(|_| 0).or_else(|| cx.model().relation_of_index(oid).map(|_| 0)));
        };
        Ok(Some(match self.measure {
            Measure::Indexes => 0,
            Measure::Rows => state_bytes(snapshot, own_state(rel)).await?,
            Measure::Total | Measure::Database => state_bytes(snapshot, all_state(rel)).await?,
        }))
    }
}

/// Estimated bytes of the state tables `tables` at `snapshot`'s epoch.
async fn state_bytes(snapshot: &ReadSnapshot, tables: impl IntoIterator<Item = u32>) -> DfResult<i64> {
    let mut total = 0u64;
    for t in tables {
        let bytes = snapshot.estimate_prefix_bytes(&eddy_common::codec::table_prefix(t)).await.map_err(|e| DataFusionError::External(Box::new(e)))?;
        total = total.saturating_add(bytes);
    }
    Ok(i64::try_from(total).unwrap_or(i64::MAX))
}

/// The state tables of `rel`'s own rows: none for relations that store nothing.
fn own_state(rel: &TableCatalog) -> Vec<u32> {
    match rel.kind {
        RelationKind::View | RelationKind::Source => vec![],
        _ => vec![rel.id],
    }
}

/// `rel`'s own rows and its operators' state.
fn all_state(rel: &TableCatalog) -> Vec<u32> {
    let mut tables = own_state(rel);
    tables.extend(rel.internal_tables.iter().copied());
    tables
}

/// Registers the size functions on a session's context.
pub fn install(ctx: &SessionContext, relations: &Arc<dyn Relations>, session: &Arc<PgSession>) {
    for (name, measure) in [
        ("pg_table_size", Measure::Rows),
        ("pg_relation_size", Measure::Rows),
        ("pg_total_relation_size", Measure::Total),
        ("pg_indexes_size", Measure::Indexes),
        ("pg_database_size", Measure::Database),
    ] {
        let f = SizeFn { name, measure, relations: relations.clone(), session: session.clone(), signature: Signature::variadic_any(Volatility::Volatile) };
        ctx.register_udf(AsyncScalarUDF::new(Arc::new(f)).into_scalar_udf());
    }
}
