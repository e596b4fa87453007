//! Scalar functions defined by closures, and the serial-column `nextval` default built on
//! them.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use datafusion::prelude::SessionContext;

/// The body of a closure-defined function: arguments and row count to result.
pub(crate) type Body = dyn Fn(&[ColumnarValue], usize) -> DfResult<ColumnarValue> + Send + Sync;

/// A scalar function defined by a closure.
struct FnUdf {
    name: String,
    signature: Signature,
    ret: DataType,
    /// The result's column type when its field must say more than its Arrow type (jsonb and
    /// uuid are `Utf8` fields marked so): clients see that type.
    marked: Option<eddy_common::ColumnType>,
    body: Arc<Body>,
}

impl std::fmt::Debug for FnUdf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}()", self.name)
    }
}

impl PartialEq for FnUdf {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && Arc::ptr_eq(&self.body, &other.body)
    }
}

impl Eq for FnUdf {}

impl Hash for FnUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl ScalarUDFImpl for FnUdf {
    fn name(&self) -> &str {
        &self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(self.ret.clone())
    }
    fn return_field_from_args(&self, _args: datafusion::logical_expr::ReturnFieldArgs) -> DfResult<arrow::datatypes::FieldRef> {
        Ok(Arc::new(match &self.marked {
            Some(ty) => ty.to_field(&self.name, true),
            None => arrow::datatypes::Field::new(&self.name, self.ret.clone(), true),
        }))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        (self.body)(&args.args, args.number_rows)
    }
}

/// Runs `f` over `args` as arrays of `rows` rows (one row if all are scalars) and returns a
/// scalar if they all were: the body of a function that computes on whole arrays.
pub(crate) fn columnar(
    args: &[ColumnarValue],
    rows: usize,
    f: impl Fn(&[arrow::array::ArrayRef], usize) -> DfResult<arrow::array::ArrayRef>,
) -> DfResult<ColumnarValue> {
    let scalar = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let n = if scalar { 1 } else { rows };
    let arrays = args.iter().map(|a| a.to_array(n)).collect::<DfResult<Vec<_>>>()?;
    let out = f(&arrays, n)?;
    Ok(if scalar { ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?) } else { ColumnarValue::Array(out) })
}

/// A user error (`code`, `msg`) raised inside a function, as DataFusion carries it; it reaches
/// the client with its SQLSTATE.
pub fn user_error(code: &'static str, msg: String) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(eddy_common::EddyError::user(code, msg)))
}

/// A closure-defined scalar function.
pub(crate) fn closure_udf(name: &str, signature: Signature, ret: DataType, body: Arc<Body>) -> ScalarUDF {
    ScalarUDF::new_from_impl(FnUdf { name: name.to_string(), signature, ret, marked: None, body })
}

/// A closure-defined scalar function whose text result is jsonb.
pub(crate) fn jsonb_closure_udf(name: &str, signature: Signature, body: Arc<Body>) -> ScalarUDF {
    typed_closure_udf(name, signature, eddy_common::ColumnType::Jsonb, body)
}

/// A closure-defined scalar function whose result has column type `ty` (its Arrow type, its
/// field marked where the type needs it).
pub(crate) fn typed_closure_udf(name: &str, signature: Signature, ty: eddy_common::ColumnType, body: Arc<Body>) -> ScalarUDF {
    ScalarUDF::new_from_impl(FnUdf { name: name.to_string(), signature, ret: ty.to_arrow(), marked: Some(ty), body })
}

/// `gen_random_uuid()`: a version-4 uuid per row.
pub(crate) fn gen_random_uuid_udf() -> ScalarUDF {
    let body: Arc<Body> = Arc::new(|_args, rows| {
        use rand::RngCore;
        let mut rng = rand::thread_rng();
        let out: arrow::array::StringArray = (0..rows.max(1))
            .map(|_| {
                let mut b = [0u8; 16];
                rng.fill_bytes(&mut b);
                b[6] = (b[6] & 0x0f) | 0x40;
                b[8] = (b[8] & 0x3f) | 0x80;
                Some(eddy_common::text::uuid_text(&b))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    });
    typed_closure_udf("gen_random_uuid", Signature::nullary(Volatility::Volatile), eddy_common::ColumnType::Uuid, body)
}

/// The context a column's DEFAULT is parsed in: DataFusion's functions and the PostgreSQL
/// ones a default commonly calls (`gen_random_uuid()`).
pub fn default_expression_context() -> SessionContext {
    let ctx = SessionContext::new();
    ctx.register_udf(gen_random_uuid_udf());
    ctx
}

/// Registers a closure-defined scalar function whose text result is jsonb.
pub(crate) fn register_jsonb(ctx: &SessionContext, name: &str, signature: Signature, body: Arc<Body>) {
    ctx.register_udf(jsonb_closure_udf(name, signature, body));
}

/// Registers a closure-defined scalar function on `ctx`.
pub(crate) fn register(ctx: &SessionContext, name: &str, signature: Signature, ret: DataType, body: Arc<Body>) {
    ctx.register_udf(closure_udf(name, signature, ret, body));
}

/// The expression a serial column's DEFAULT evaluates as: `eddy_nextval(table id, column
/// index)`, one new value per row drawn from `sequences`.
pub fn nextval_expr(sequences: &Arc<crate::catalog::sequence::Sequences>, table: u32, column: usize) -> Expr {
    let sequences = sequences.clone();
    let body = move |_args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        let values = sequences.take(table, column, rows);
        Ok(ColumnarValue::Array(Arc::new(arrow::array::Int64Array::from_iter_values(values))))
    };
    let udf = closure_udf("eddy_nextval", Signature::any(2, Volatility::Volatile), DataType::Int64, Arc::new(body));
    udf.call(vec![
        Expr::Literal(ScalarValue::Int64(Some(i64::from(table))), None),
        Expr::Literal(ScalarValue::Int64(Some(column as i64)), None),
    ])
}
