//! `named_struct` whose fields keep their values' field metadata, so a record built from a
//! `jsonb` column (a whole-row reference, `ROW(...)`) still knows the field is jsonb:
//! `row_to_json(t)` embeds it as JSON where it quoted its text (`{"j":"{\"k\": 1}"}`).
//! DataFusion's own function computes the values; this one relabels the fields.

use std::sync::Arc;

use arrow::array::{Array, AsArray, StructArray};
use arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature};
use datafusion::prelude::SessionContext;

#[derive(Debug, PartialEq, Eq, Hash)]
struct MarkedNamedStruct {
    inner: ScalarUDF,
}

/// `fields` with the metadata of the value arguments (every second one, after its name).
fn marked(fields: &Fields, args: &[FieldRef]) -> Fields {
    fields
        .iter()
        .enumerate()
        .map(|(i, f)| match args.get(2 * i + 1) {
            Some(value) if !value.metadata().is_empty() => Arc::new(f.as_ref().clone().with_metadata(value.metadata().clone())),
            _ => Arc::clone(f),
        })
        .collect()
}

impl ScalarUDFImpl for MarkedNamedStruct {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(args)
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let values = args.arg_fields.to_vec();
        let field = self.inner.return_field_from_args(args)?;
        match field.data_type() {
            DataType::Struct(fields) => {
                let ty = DataType::Struct(marked(fields, &values));
                Ok(Arc::new(Field::new(field.name(), ty, field.is_nullable()).with_metadata(field.metadata().clone())))
            }
            _ => Ok(field),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let DataType::Struct(fields) = args.return_field.data_type().clone() else { return self.inner.invoke_with_args(args) };
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = args.number_rows;
        let out = self.inner.invoke_with_args(args)?.into_array(rows)?;
        let s = out.as_struct();
        let relabelled: Arc<dyn Array> = Arc::new(StructArray::try_new(fields, s.columns().to_vec(), s.nulls().cloned())?);
        Ok(if scalar {
            ColumnarValue::Scalar(datafusion::scalar::ScalarValue::try_from_array(&relabelled, 0)?)
        } else {
            ColumnarValue::Array(relabelled)
        })
    }
}

/// Replaces DataFusion's `named_struct` on `ctx` by the one that keeps field metadata.
pub fn install(ctx: &SessionContext) {
    if let Some(inner) = ctx.state().scalar_functions().get("named_struct") {
        ctx.register_udf(ScalarUDF::new_from_impl(MarkedNamedStruct { inner: inner.as_ref().clone() }));
    }
}
