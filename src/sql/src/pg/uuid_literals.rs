//! A text literal compared with a `uuid` column reads as a uuid, as PostgreSQL resolves the
//! unknown literal to the column's type: `id = 'A0EEBC99-...'` finds the row stored as
//! `a0eebc99-...` (uuids are held as canonical text), and text that is no uuid is 22P02.

use datafusion::common::DFSchema;
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, Operator};
use datafusion::scalar::ScalarValue;
use eddy_common::types::ColumnType;

fn is_uuid(e: &Expr, schema: &DFSchema) -> bool {
    e.to_field(schema).is_ok_and(|(_, f)| ColumnType::from_arrow_field(&f) == Some(ColumnType::Uuid))
}

/// The literal side of a comparison with a uuid, in canonical form.
pub fn canonical_uuid_literal(b: &BinaryExpr, schema: &DFSchema) -> eddy_common::Result<Option<Expr>> {
    let comparison = matches!(b.op, Operator::Eq | Operator::NotEq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq | Operator::IsDistinctFrom | Operator::IsNotDistinctFrom);
    if !comparison {
        return Ok(None);
    }
    let canonical = |e: &Expr| -> eddy_common::Result<Option<Expr>> {
        match e {
            Expr::Literal(ScalarValue::Utf8(Some(text)), meta) => {
                Ok(Some(Expr::Literal(ScalarValue::Utf8(Some(eddy_common::text::parse_uuid(text)?)), meta.clone())))
            }
            _ => Ok(None),
        }
    };
    let (left, right) = (b.left.as_ref(), b.right.as_ref());
    if is_uuid(left, schema) {
        if let Some(lit) = canonical(right)? {
            return Ok(Some(Expr::BinaryExpr(BinaryExpr::new(Box::new(left.clone()), b.op, Box::new(lit)))));
        }
    }
    if is_uuid(right, schema) {
        if let Some(lit) = canonical(left)? {
            return Ok(Some(Expr::BinaryExpr(BinaryExpr::new(Box::new(lit), b.op, Box::new(right.clone())))));
        }
    }
    Ok(None)
}
