//! PostgreSQL's domain errors for the math functions DataFusion computes with IEEE semantics.
//!
//! DataFusion's `sqrt(-1)` is NaN, `ln(0)` is -Infinity and `acos(2)` is NaN; PostgreSQL fails
//! each with a SQLSTATE (2201F, 2201E, 22003). Each function here wraps DataFusion's own (same
//! signature, coercion, simplification and result) and checks its arguments first; a row that
//! fails is an error of the statement, or in a view a row error (`22xxx` is data).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Float64Type};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature};
use datafusion::prelude::SessionContext;
use eddy_common::error::sqlstate;

use super::udf::user_error;

/// What a function's arguments must satisfy, row by row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Domain {
    /// `sqrt`: no negative argument.
    Sqrt,
    /// `ln`, `log10`, `log(x)` and `log(b, x)`: positive arguments, and a base other than 1.
    Log,
    /// `power(x, y)`: no zero to a negative power, no negative to a fractional one; a finite
    /// result for finite arguments.
    Power,
    /// `acos`, `asin`, `atanh`: the argument in [-1, 1] (`atanh` open at both ends).
    UnitInterval { open: bool },
    /// `acosh`: the argument at least 1.
    AtLeastOne,
    /// `exp`: a finite result.
    Exp,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Checked {
    inner: Arc<ScalarUDF>,
    domain: Domain,
}

fn as_f64(v: &ColumnarValue, rows: usize) -> DfResult<ArrayRef> {
    Ok(arrow::compute::cast(&v.to_array(rows)?, &DataType::Float64)?)
}

fn log_domain(x: f64) -> DfResult<()> {
    if x == 0.0 {
        return Err(user_error(sqlstate::INVALID_ARGUMENT_FOR_LOG, "cannot take logarithm of zero".into()));
    }
    if x < 0.0 {
        return Err(user_error(sqlstate::INVALID_ARGUMENT_FOR_LOG, "cannot take logarithm of a negative number".into()));
    }
    Ok(())
}

fn out_of_range() -> datafusion::error::DataFusionError {
    user_error(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "input is out of range".into())
}

fn overflow() -> datafusion::error::DataFusionError {
    user_error(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow".into())
}

/// The arguments as double precision, once for the check and the computation.
fn doubles(args: &[ColumnarValue], rows: usize) -> DfResult<Vec<ArrayRef>> {
    args.iter().map(|a| as_f64(a, rows)).collect()
}

/// Fails on the first row (non-NULL in every argument) of `args` (as [`doubles`]) outside
/// `domain`.
fn check(domain: Domain, args: &[ArrayRef], rows: usize) -> DfResult<()> {
    let cols: Vec<_> = args.iter().map(|c| c.as_primitive::<Float64Type>()).collect();
    for r in 0..rows {
        if cols.iter().any(|c| c.is_null(r)) {
            continue;
        }
        let v = |i: usize| cols[i].value(r);
        match (domain, cols.len()) {
            (Domain::Sqrt, 1) if v(0) < 0.0 => {
                return Err(user_error(sqlstate::INVALID_ARGUMENT_FOR_POWER, "cannot take square root of a negative number".into()));
            }
            (Domain::Log, 1) => log_domain(v(0))?,
            (Domain::Log, 2) => {
                log_domain(v(0))?;
                log_domain(v(1))?;
                if v(0) == 1.0 {
                    return Err(user_error(sqlstate::DIVISION_BY_ZERO, "division by zero".into()));
                }
            }
            (Domain::Power, 2) => {
                let (x, y) = (v(0), v(1));
                if x == 0.0 && y < 0.0 {
                    return Err(user_error(sqlstate::INVALID_ARGUMENT_FOR_POWER, "zero raised to a negative power is undefined".into()));
                }
                if x < 0.0 && y.is_finite() && y.fract() != 0.0 {
                    return Err(user_error(
                        sqlstate::INVALID_ARGUMENT_FOR_POWER,
                        "a negative number raised to a non-integer power yields a complex result".into(),
                    ));
                }
                if x.is_finite() && y.is_finite() && x.powf(y).is_infinite() {
                    return Err(overflow());
                }
            }
            (Domain::UnitInterval { open }, 1) => {
                let x = v(0);
                if !(-1.0..=1.0).contains(&x) || (open && x.abs() == 1.0) {
                    return Err(out_of_range());
                }
            }
            (Domain::AtLeastOne, 1) if v(0) < 1.0 => return Err(out_of_range()),
            (Domain::Exp, 1) if v(0).is_finite() && v(0).exp().is_infinite() => return Err(overflow()),
            _ => {}
        }
    }
    Ok(())
}

/// `power(numeric, y)`'s type: PostgreSQL computes it to at least 16 significant digits;
/// DataFusion keeps the base's scale and truncates (`power(2.5, 2)` was 6.2).
const DECIMAL_POWER: DataType = DataType::Decimal128(38, 16);

impl Checked {
    fn decimal_power(&self, args: &[DataType]) -> bool {
        self.domain == Domain::Power && matches!(args.first(), Some(DataType::Decimal128(..) | DataType::Decimal256(..)))
    }
}

/// `power(x, y)` of a numeric base, from its arguments in double precision (`doubles`), as a
/// numeric of [`DECIMAL_POWER`] (a result past its range is 22003); a scalar if every argument
/// was one.
fn decimal_power(doubles: &[ArrayRef], all_scalar: bool) -> DfResult<ColumnarValue> {
    let (x, y) = (doubles[0].as_primitive::<Float64Type>(), doubles[1].as_primitive::<Float64Type>());
    let out: arrow::array::Float64Array = arrow::compute::binary(x, y, f64::powf)?;
    let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
    let out = arrow::compute::cast_with_options(&out, &DECIMAL_POWER, &options).map_err(|_| overflow())?;
    Ok(match all_scalar {
        true => ColumnarValue::Scalar(datafusion::scalar::ScalarValue::try_from_array(&out, 0)?),
        false => ColumnarValue::Array(out),
    })
}

impl ScalarUDFImpl for Checked {
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
        match self.decimal_power(args) {
            true => Ok(DECIMAL_POWER),
            false => self.inner.return_type(args),
        }
    }
    fn return_field_from_args(&self, args: datafusion::logical_expr::ReturnFieldArgs) -> DfResult<arrow::datatypes::FieldRef> {
        let types: Vec<DataType> = args.arg_fields.iter().map(|f| f.data_type().clone()).collect();
        match self.decimal_power(&types) {
            true => Ok(Arc::new(arrow::datatypes::Field::new(self.name(), DECIMAL_POWER, true))),
            false => self.inner.return_field_from_args(args),
        }
    }
    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(args)
    }
    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        // The inner function's rewrites (`power(x, 1)` is `x`) keep the domain; an unchanged
        // call must stay this checked one.
        match self.inner.simplify(args, info)? {
            ExprSimplifyResult::Simplified(Expr::ScalarFunction(f)) if f.func.name() == self.inner.name() => {
                Ok(ExprSimplifyResult::Original(f.args))
            }
            other => Ok(other),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let doubles = doubles(&args.args, args.number_rows)?;
        check(self.domain, &doubles, args.number_rows)?;
        let types: Vec<DataType> = args.arg_fields.iter().map(|f| f.data_type().clone()).collect();
        if self.decimal_power(&types) {
            let all_scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
            return decimal_power(&doubles, all_scalar);
        }
        self.inner.invoke_with_args(args)
    }
}

/// Replaces DataFusion's math functions on `ctx` with the domain-checked ones.
pub fn install(ctx: &SessionContext) {
    let state = ctx.state();
    let functions = state.scalar_functions();
    let domains = [
        ("sqrt", Domain::Sqrt),
        ("ln", Domain::Log),
        ("log", Domain::Log),
        ("log10", Domain::Log),
        ("log2", Domain::Log),
        ("power", Domain::Power),
        ("acos", Domain::UnitInterval { open: false }),
        ("asin", Domain::UnitInterval { open: false }),
        ("atanh", Domain::UnitInterval { open: true }),
        ("acosh", Domain::AtLeastOne),
        ("exp", Domain::Exp),
    ];
    for (name, domain) in domains {
        if let Some(inner) = functions.get(name) {
            ctx.register_udf(ScalarUDF::new_from_impl(Checked { inner: inner.clone(), domain }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Float64Array;

    fn col(v: &[Option<f64>]) -> ArrayRef {
        Arc::new(Float64Array::from(v.to_vec()))
    }

    fn code(r: DfResult<()>) -> Option<&'static str> {
        r.err().map(|e| eddy_common::EddyError::from(e).sqlstate)
    }

    #[test]
    fn each_domain_fails_with_postgresql_sqlstate_and_skips_nulls() {
        assert_eq!(code(check(Domain::Sqrt, &[col(&[Some(4.0), Some(-1.0)])], 2)), Some("2201F"));
        assert_eq!(code(check(Domain::Sqrt, &[col(&[Some(4.0), None])], 2)), None);
        assert_eq!(code(check(Domain::Log, &[col(&[Some(0.0)])], 1)), Some("2201E"));
        assert_eq!(code(check(Domain::Log, &[col(&[Some(1.0)]), col(&[Some(10.0)])], 1)), Some("22012"));
        assert_eq!(code(check(Domain::Power, &[col(&[Some(-8.0)]), col(&[Some(0.5)])], 1)), Some("2201F"));
        assert_eq!(code(check(Domain::Power, &[col(&[Some(-8.0)]), col(&[Some(2.0)])], 1)), None);
        assert_eq!(code(check(Domain::Power, &[col(&[Some(10.0)]), col(&[Some(400.0)])], 1)), Some("22003"));
        assert_eq!(code(check(Domain::UnitInterval { open: true }, &[col(&[Some(1.0)])], 1)), Some("22003"));
        assert_eq!(code(check(Domain::UnitInterval { open: false }, &[col(&[Some(1.0)])], 1)), None);
        let r = decimal_power(&[col(&[Some(2.5)]), col(&[Some(2.0)])], false).unwrap().to_array(1).unwrap();
        assert_eq!(arrow::util::display::array_value_to_string(&r, 0).unwrap(), "6.2500000000000000");
        assert_eq!(code(check(Domain::Exp, &[col(&[Some(1000.0)])], 1)), Some("22003"));
    }
}
