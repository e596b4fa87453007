//! A scalar UDF evaluated row by row over `ScalarValue`s, for the catalog functions
//! (`format_type`, `pg_get_expr`, `::regclass`, ...). They run over catalog-sized inputs, so
//! clarity beats vectorization here; every call sees one [`Model`] of the catalog, built at
//! most once per batch.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, Signature, Volatility};
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;

use super::model::Model;
use super::PgSession;
use crate::catalog::Relations;

/// What a catalog function can look at: the catalog (lazily modelled) and the session.
pub struct FnContext {
    relations: Arc<dyn Relations>,
    /// The calling session.
    pub session: Arc<PgSession>,
    model: Option<Model>,
}

impl FnContext {
    pub(crate) fn new(relations: Arc<dyn Relations>, session: Arc<PgSession>) -> Self {
        FnContext { relations, session, model: None }
    }

    /// The catalog model, built on first use.
    pub fn model(&mut self) -> &Model {
        let relations = &self.relations;
        self.model.get_or_insert_with(|| Model::new(&relations.catalog()))
    }

    /// Schemas on the session's `search_path` (`"$user"` dropped).
    pub fn search_path(&self) -> Vec<String> {
        self.session.search_path()
    }
}

type Body = dyn Fn(&mut FnContext, &[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync;

/// Evaluates a row-wise `body` over DataFusion's (scalar or array) arguments.
fn eval_rows(
    relations: &Arc<dyn Relations>,
    session: &Arc<PgSession>,
    ret: &DataType,
    body: &Body,
    args: &[ColumnarValue],
    n: usize,
) -> DfResult<ColumnarValue> {
    let mut cx = FnContext { relations: relations.clone(), session: session.clone(), model: None };
    if args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) {
        let row: Vec<ScalarValue> = args
            .iter()
            .map(|a| match a {
                ColumnarValue::Scalar(s) => s.clone(),
                ColumnarValue::Array(_) => ScalarValue::Null,
            })
            .collect();
        return Ok(ColumnarValue::Scalar(typed(ret, body(&mut cx, &row)?)?));
    }
    if n == 0 {
        return Ok(ColumnarValue::Array(arrow::array::new_empty_array(ret)));
    }
    let arrays = args.iter().map(|a| a.to_array(n)).collect::<DfResult<Vec<_>>>()?;
    let mut out = Vec::with_capacity(n);
    for r in 0..n {
        let row = arrays.iter().map(|a| ScalarValue::try_from_array(a, r)).collect::<DfResult<Vec<_>>>()?;
        out.push(typed(ret, body(&mut cx, &row)?)?);
    }
    Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?))
}

/// `v` as the declared return type (`NULL`s become typed NULLs).
fn typed(ret: &DataType, v: ScalarValue) -> DfResult<ScalarValue> {
    if v.is_null() {
        return ScalarValue::try_from(ret);
    }
    if &v.data_type() == ret {
        Ok(v)
    } else {
        v.cast_to(ret)
    }
}

/// Registers catalog functions on one session context.
pub struct Registrar<'a> {
    /// The context.
    pub ctx: &'a SessionContext,
    /// The database.
    pub relations: Arc<dyn Relations>,
    /// The session.
    pub session: Arc<PgSession>,
}

impl Registrar<'_> {
    /// Registers `name` taking any arguments (at least one) and returning `ret`.
    pub fn any(&self, name: &str, ret: DataType, body: impl Fn(&mut FnContext, &[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync + 'static) {
        self.add(name, Signature::variadic_any(Volatility::Stable), ret, Arc::new(body));
    }

    /// Registers `name` taking no arguments.
    pub fn nullary(&self, name: &str, ret: DataType, body: impl Fn(&mut FnContext, &[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync + 'static) {
        self.add(name, Signature::exact(vec![], Volatility::Stable), ret, Arc::new(body));
    }

    fn add(&self, name: &str, signature: Signature, ret: DataType, body: Arc<Body>) {
        let (relations, session, out) = (self.relations.clone(), self.session.clone(), ret.clone());
        let columnar = move |args: &[ColumnarValue], n: usize| eval_rows(&relations, &session, &out, body.as_ref(), args, n);
        crate::planner::udf::register(self.ctx, name, signature, ret, Arc::new(columnar));
    }
}

/// An integer argument (any integer type, or text holding one); `None` for NULL.
pub fn int_arg(v: Option<&ScalarValue>) -> Option<i64> {
    match v? {
        ScalarValue::Int8(x) => x.map(i64::from),
        ScalarValue::Int16(x) => x.map(i64::from),
        ScalarValue::Int32(x) => x.map(i64::from),
        ScalarValue::Int64(x) => *x,
        ScalarValue::UInt8(x) => x.map(i64::from),
        ScalarValue::UInt16(x) => x.map(i64::from),
        ScalarValue::UInt32(x) => x.map(i64::from),
        ScalarValue::UInt64(x) => x.and_then(|x| i64::try_from(x).ok()),
        ScalarValue::Boolean(x) => x.map(i64::from),
        other => text_arg(Some(other)).and_then(|s| s.trim().parse().ok()),
    }
}

/// A text argument (numbers are rendered); `None` for NULL.
pub fn text_arg(v: Option<&ScalarValue>) -> Option<String> {
    match v? {
        ScalarValue::Utf8(x) | ScalarValue::LargeUtf8(x) | ScalarValue::Utf8View(x) => x.clone(),
        ScalarValue::Null => None,
        other if other.is_null() => None,
        // A numeric's Display is its raw parts (`Some(150),3,2`); arrow's cast writes `1.50`.
        other @ (ScalarValue::Decimal128(..) | ScalarValue::Decimal256(..)) => match other.cast_to(&DataType::Utf8) {
            Ok(ScalarValue::Utf8(s)) => s,
            _ => Some(other.to_string()),
        },
        other => Some(other.to_string()),
    }
}

/// True when the argument is text rather than a number.
pub fn is_text(v: Option<&ScalarValue>) -> bool {
    matches!(v, Some(ScalarValue::Utf8(_) | ScalarValue::LargeUtf8(_) | ScalarValue::Utf8View(_)))
}

/// A boolean argument; `None` for NULL.
pub fn bool_arg(v: Option<&ScalarValue>) -> Option<bool> {
    match v? {
        ScalarValue::Boolean(b) => *b,
        other => int_arg(Some(other)).map(|i| i != 0),
    }
}

/// A text result.
pub fn text(v: Option<String>) -> ScalarValue {
    ScalarValue::Utf8(v)
}

/// An `oid` result.
pub fn oid(v: Option<u32>) -> ScalarValue {
    ScalarValue::Int32(v.map(|o| o as i32))
}

pub use crate::planner::udf::user_error;
