//! Plans `LogicalPlan::Unnest` (set-returning functions in the select list) as
//! `eddy_stream`'s `Unnest`.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use eddy_common::{not_supported, Result};
use eddy_stream::operator::{Unnest, UnnestColumn};

use super::Built;

/// `input` (the planned input of `u`) unnested.
pub(super) fn plan_unnest(u: &datafusion::logical_expr::Unnest, mut b: Built) -> Result<Built> {
    if !u.struct_type_columns.is_empty() || u.list_type_columns.iter().any(|(_, l)| l.depth != 1) || u.options.recursions.iter().any(|r| r.depth != 1) {
        return Err(not_supported!("unnest of structs or of nested lists is not supported in a materialized view yet"));
    }
    let unnested: Vec<usize> = u.list_type_columns.iter().map(|(i, _)| *i).collect();
    // Each list column appears once in the output (DataFusion names the element column).
    let columns: Vec<UnnestColumn> = u.dependency_indices.iter().map(|&input| UnnestColumn { input, unnest: unnested.contains(&input) }).collect();
    if columns.len() != u.schema.fields().len() {
        return Err(eddy_common::internal_err!("unnest has {} dependencies for {} columns", columns.len(), u.schema.fields().len()));
    }
    let mut fields: Vec<Field> = u.schema.fields().iter().map(|f| Field::new(f.name(), f.data_type().clone(), true).with_metadata(f.metadata().clone())).collect();
    let visible = fields.len();
    for (j, &k) in b.key.iter().enumerate() {
        fields.push(Field::new(format!("_unnest_key{j}"), b.schema.field(k).data_type().clone(), true));
    }
    fields.push(Field::new("_unnest_ordinal", DataType::Int64, false));
    let schema = Arc::new(Schema::new(fields));
    let op = Unnest::try_new(columns.clone(), b.key.clone(), u.options.preserve_nulls, schema.clone())?;
    b.ops.push(Box::new(op));
    b.watermarks = columns.iter().enumerate().filter(|(_, c)| !c.unnest && b.watermarks.contains(&c.input)).map(|(o, _)| o).collect();
    b.key = (visible..schema.fields().len()).collect();
    b.schema = schema;
    Ok(b)
}
