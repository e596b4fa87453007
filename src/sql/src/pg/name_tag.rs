//! `eddy_name_tag(x, k)`: `x` itself, under a name of its own.
//!
//! DataFusion names an expression after what it computes but leaves casts out of the name, so
//! `max(n)` and `max(n::int)` are both `max(t.n)`, and an aggregation computing both has two
//! columns of one name, which it refuses. PostgreSQL computes both. The rewrite that finds such
//! calls (`rewrite::aggregates::distinct_cast_names`) tags the arguments of all but the first
//! with `eddy_name_tag(arg, k)`; the optimizer's simplification then drops the tag (the
//! aggregation's column keeps the tagged name), so no plan evaluates it.

use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::plan_err;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;

/// The function's name.
pub const NAME_TAG: &str = "eddy_name_tag";

#[derive(Debug, PartialEq, Eq, Hash)]
struct NameTag {
    signature: Signature,
}

impl ScalarUDFImpl for NameTag {
    fn name(&self) -> &str {
        NAME_TAG
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args.first() {
            Some(t) => Ok(t.clone()),
            None => plan_err!("{NAME_TAG} takes a value and a tag"),
        }
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        // The value's own field, so a type marked in its metadata (jsonb, uuid) stays marked.
        match args.arg_fields.first() {
            Some(f) => Ok(f.clone()),
            None => plan_err!("{NAME_TAG} takes a value and a tag"),
        }
    }
    fn simplify(&self, mut args: Vec<Expr>, _info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        Ok(ExprSimplifyResult::Simplified(args.swap_remove(0)))
    }
    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Ok(args.args.swap_remove(0))
    }
}

/// Registers `eddy_name_tag` on `ctx`.
pub fn install(ctx: &SessionContext) {
    let signature = Signature::any(2, Volatility::Immutable);
    ctx.register_udf(ScalarUDF::new_from_impl(NameTag { signature }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tagged_value_is_the_value() {
        let ctx = SessionContext::new();
        install(&ctx);
        let batches = ctx
            .sql("SELECT max(v), max(eddy_name_tag(CAST(v AS BIGINT), 1)) FROM (VALUES (1), (7)) t(v)")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
        assert!(text.contains("| 7 ") && text.matches(" 7 ").count() == 2, "{text}");
    }
}
