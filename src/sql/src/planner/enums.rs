//! User-defined enum types: `CREATE TYPE name AS ENUM ('a', 'b')`, `DROP TYPE`, and values
//! of them (`'a'::name`).
//!
//! A type is a catalog entry with an OID; `pg_type` (typtype `e`) and `pg_enum` list it, so
//! drivers can look it up. A value is its label as text, reported to clients with the type's
//! OID: before planning, casts to an enum type become `eddy_enum_value(oid, name, labels, x)`,
//! which checks the label (22P02 otherwise) and marks its result column with the OID.
//! Table columns of enum types are not supported yet.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use eddy_common::error::sqlstate;
use eddy_common::types::JSONB_METADATA_KEY;
use eddy_common::user_err;


/// Field metadata value marking an enum-typed column: `enum:<oid>:<name>`.
pub fn enum_tag(oid: u32, name: &str) -> String {
    format!("enum:{oid}:{name}")
}

/// The (OID, name) an `enum:` field tag names.
pub fn parse_enum_tag(tag: &str) -> Option<(u32, &str)> {
    let rest = tag.strip_prefix("enum:")?;
    let (oid, name) = rest.split_once(':')?;
    Some((oid.parse().ok()?, name))
}

/// `eddy_enum_value(oid, name, labels, x)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct EnumValue {
    signature: Signature,
}

impl ScalarUDFImpl for EnumValue {
    fn name(&self) -> &str {
        "eddy_enum_value"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let oid = match args.scalar_arguments.first().copied().flatten().map(|v| v.cast_to(&DataType::Int64)) {
            Some(Ok(ScalarValue::Int64(Some(o)))) => o as u32,
            _ => 0,
        };
        let name = match args.scalar_arguments.get(1).copied().flatten() {
            Some(ScalarValue::Utf8(Some(n))) => n.clone(),
            _ => String::new(),
        };
        let field = Field::new(self.name(), DataType::Utf8, true)
            .with_metadata(HashMap::from([(JSONB_METADATA_KEY.to_string(), enum_tag(oid, &name))]));
        Ok(Arc::new(field))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let name = match &args.args[1] {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(n))) => n.clone(),
            _ => String::new(),
        };
        let labels = args.args[2].to_array(1)?;
        let labels = labels
            .as_list_opt::<i32>()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| DataFusionError::Plan("eddy_enum_value: the labels must be an array".into()))?
            .value(0);
        let labels = arrow::compute::cast(&labels, &DataType::Utf8)?;
        let labels: Vec<String> = labels.as_string::<i32>().iter().flatten().map(str::to_string).collect();
        let values = arrow::compute::cast(&args.args[3].to_array(rows)?, &DataType::Utf8)?;
        let values = values.as_string::<i32>();
        for v in values.iter().flatten() {
            if !labels.iter().any(|l| l == v) {
                return Err(DataFusionError::External(Box::new(user_err!(
                    sqlstate::INVALID_TEXT_REPRESENTATION,
                    "invalid input value for enum {name}: \"{v}\""
                ))));
            }
        }
        let out: StringArray = values.iter().collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// The function casts to enum types become.
pub fn enum_value_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(EnumValue { signature: Signature::any(4, Volatility::Immutable) })
}

