//! `::text` casts print values the way PostgreSQL does (`2024-01-02 03:04:05+00`, `1 day`,
//! `{1,2}`, `(1,a)`), not in Arrow's formats (`2024-01-02T03:04:05Z`, `0 years 0 mons 1 days`).
//!
//! An analyzer rule, run after type coercion, turns casts to text of the types whose formats
//! differ into `eddy_text(x)`, which uses the wire layer's text output. The same rule makes
//! float `/` and `%` fail on a zero divisor (22012) instead of producing Infinity/NaN, casts of
//! floats and numerics to integers round instead of truncating, and
//! turns `||` of jsonb values into jsonb concatenation (it needs the operands' fields).

use std::sync::Arc;

use arrow::array::StringBuilder;
use arrow::datatypes::{DataType, Field};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TryCast,
    Volatility,
};
use datafusion::optimizer::AnalyzerRule;

fn differs_from_arrow(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(_, _)
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Interval(_)
            | DataType::Duration(_)
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal128(_, _)
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::Struct(_)
            | DataType::Binary
            | DataType::LargeBinary
    )
}

/// `eddy_text(x)`: `x` in PostgreSQL's text output.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgText {
    signature: Signature,
}

impl ScalarUDFImpl for PgText {
    fn name(&self) -> &str {
        "eddy_text"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arr = args.args[0].to_array(rows)?;
        let field = args.arg_fields.first().map(|f| f.as_ref().clone()).unwrap_or_else(|| Field::new("", arr.data_type().clone(), true));
        let mut out = StringBuilder::with_capacity(rows, rows * 16);
        let mut s = String::new();
        for r in 0..rows {
            s.clear();
            if eddy_common::text_out::write_text(&arr, r, &field, &mut s).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))? {
                out.append_value(&s);
            } else {
                out.append_null();
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// `eddy_float_div(x, y)` / `eddy_float_mod(x, y)`: float `/` and `%` that fail on a zero
/// divisor with 22012, as PostgreSQL's do (IEEE division would give Infinity or NaN).
fn float_div(modulo: bool) -> ScalarUDF {
    let body = move |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        use arrow::array::{Array, AsArray, Float64Array};
        let l = arrow::compute::cast(&args[0].to_array(rows)?, &DataType::Float64)?;
        let r = arrow::compute::cast(&args[1].to_array(rows)?, &DataType::Float64)?;
        let (l, r) = (l.as_primitive::<arrow::datatypes::Float64Type>(), r.as_primitive::<arrow::datatypes::Float64Type>());
        let mut out = Vec::with_capacity(rows);
        for i in 0..rows {
            if l.is_null(i) || r.is_null(i) {
                out.push(None);
                continue;
            }
            let d = r.value(i);
            if d == 0.0 {
                return Err(datafusion::error::DataFusionError::ArrowError(Box::new(arrow::error::ArrowError::DivideByZero), None));
            }
            out.push(Some(if modulo { l.value(i) % d } else { l.value(i) / d }));
        }
        Ok(ColumnarValue::Array(Arc::new(out.into_iter().collect::<Float64Array>())))
    };
    let name = if modulo { "eddy_float_mod" } else { "eddy_float_div" };
    crate::planner::udf::closure_udf(name, Signature::any(2, Volatility::Immutable), DataType::Float64, Arc::new(body))
}

/// `eddy_jsonb_concat(a, b)`: [`crate::planner::jsonb::concat`].
fn jsonb_concat() -> ScalarUDF {
    let body = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        use arrow::array::{Array, AsArray, StringArray};
        let a = arrow::compute::cast(&args[0].to_array(rows)?, &DataType::Utf8)?;
        let b = arrow::compute::cast(&args[1].to_array(rows)?, &DataType::Utf8)?;
        let (a, b) = (a.as_string::<i32>(), b.as_string::<i32>());
        let out: StringArray =
            (0..rows).map(|i| if a.is_null(i) || b.is_null(i) { None } else { crate::planner::jsonb::concat(a.value(i), b.value(i)) }).collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    };
    crate::planner::udf::jsonb_closure_udf("eddy_jsonb_concat", Signature::any(2, Volatility::Immutable), Arc::new(body))
}

/// `eddy_rint(x)`: `round(double precision)` as PostgreSQL computes it (`rint`: halves to even).
fn rint() -> ScalarUDF {
    let body = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        use arrow::array::{AsArray, Float64Array};
        let a = arrow::compute::cast(&args[0].to_array(rows)?, &DataType::Float64)?;
        let out: Float64Array = a.as_primitive::<arrow::datatypes::Float64Type>().iter().map(|v| v.map(f64::round_ties_even)).collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    };
    crate::planner::udf::closure_udf("eddy_rint", Signature::any(1, Volatility::Immutable), DataType::Float64, Arc::new(body))
}

/// `eddy_text_array(text)`: PostgreSQL's array input of a one-dimensional array, as text
/// elements (a cast to the element type follows). Casts of literals are parsed in the SQL
/// rewrite; this reads a column's text (`s::int[]` took `{1,2}` as one element).
fn text_array() -> ScalarUDF {
    let body = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> { Ok(ColumnarValue::Array(text_arrays(&args[0].to_array(rows)?)?)) };
    let ret = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
    crate::planner::udf::closure_udf("eddy_text_array", Signature::any(1, Volatility::Immutable), ret, Arc::new(body))
}

/// Text values read as PostgreSQL's one-dimensional array input: a list of text per row.
pub(crate) fn text_arrays(values: &arrow::array::ArrayRef) -> DfResult<arrow::array::ArrayRef> {
    use arrow::array::{AsArray, ListBuilder};
    let a = arrow::compute::cast(values, &DataType::Utf8)?;
    let mut out = ListBuilder::new(StringBuilder::new());
    for v in a.as_string::<i32>() {
        match v {
            None => out.append_null(),
            Some(text) => {
                let items = eddy_common::text::parse_array_text(text).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
                for item in items {
                    out.values().append_option(item);
                }
                out.append(true);
            }
        }
    }
    Ok(Arc::new(out.finish()))
}

/// `text::float8` / `text::real` as PostgreSQL reads them: surrounding spaces, `NaN` and
/// `[+-]Infinity` / `inf` in any case; a finite number too large or too small for the type is
/// 22003 "out of range" (Arrow's cast gave Infinity or 0), anything else 22P02.
/// One instance for each type, so two casts of one column are one expression (a closure
/// function's instances compare by identity).
fn text_float(real: bool) -> &'static ScalarUDF {
    static UDFS: std::sync::OnceLock<[ScalarUDF; 2]> = std::sync::OnceLock::new();
    let [double, single] = UDFS.get_or_init(|| [float_reader(false), float_reader(true)]);
    if real { single } else { double }
}

/// `eddy_numeric_text(t)`: text to be read as a numeric, trimmed, exponent forms as plain
/// decimals (`eddy_common::text::plain_decimal`).
fn numeric_text() -> &'static ScalarUDF {
    static UDF: std::sync::OnceLock<ScalarUDF> = std::sync::OnceLock::new();
    UDF.get_or_init(|| {
        let body = |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
            use arrow::array::{AsArray, StringArray};
            let a = arrow::compute::cast(&args[0].to_array(rows)?, &DataType::Utf8)?;
            let out: StringArray = a.as_string::<i32>().iter().map(|v| v.map(|t| eddy_common::text::plain_decimal(t).unwrap_or_else(|| t.trim().to_string()))).collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        };
        crate::planner::udf::closure_udf("eddy_numeric_text", Signature::any(1, Volatility::Immutable), DataType::Utf8, Arc::new(body))
    })
}

fn float_reader(real: bool) -> ScalarUDF {
    let body = move |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        use arrow::array::{AsArray, Float64Array};
        let type_name = if real { "real" } else { "double precision" };
        let a = arrow::compute::cast(&args[0].to_array(rows)?, &DataType::Utf8)?;
        let out = a
            .as_string::<i32>()
            .iter()
            .map(|v| v.map(|text| parse_pg_float(text, real, type_name)).transpose())
            .collect::<DfResult<Float64Array>>()?;
        Ok(ColumnarValue::Array(Arc::new(out)))
    };
    let name = if real { "eddy_text_real" } else { "eddy_text_float8" };
    crate::planner::udf::closure_udf(name, Signature::any(1, Volatility::Immutable), DataType::Float64, Arc::new(body))
}

fn parse_pg_float(text: &str, real: bool, type_name: &str) -> DfResult<f64> {
    use eddy_common::error::sqlstate;
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if matches!(unsigned, "infinity" | "inf" | "nan") {
        let v: f64 = lower.replace("infinity", "inf").parse().map_err(|_| crate::planner::udf::user_error(sqlstate::INVALID_TEXT_REPRESENTATION, format!("invalid input syntax for type {type_name}: \"{text}\"")))?;
        return Ok(v);
    }
    let numeric = !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    let v: f64 = match t.parse() {
        Ok(v) if numeric => v,
        _ => return Err(crate::planner::udf::user_error(sqlstate::INVALID_TEXT_REPRESENTATION, format!("invalid input syntax for type {type_name}: \"{text}\""))),
    };
    let mantissa_nonzero = t.split(['e', 'E']).next().is_some_and(|m| m.chars().any(|c| matches!(c, '1'..='9')));
    let narrowed = if real { f64::from(v as f32) } else { v };
    if narrowed.is_infinite() || (narrowed == 0.0 && mantissa_nonzero) {
        return Err(crate::planner::udf::user_error(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, format!("\"{text}\" is out of range for type {type_name}")));
    }
    Ok(v)
}

/// Fails with "integer out of range" if `e`, integer or decimal `+`, `-` or `*` of constants
/// (and immutable functions of them) only, overflows: the optimizer folds constants with
/// wrapping arithmetic before the checked arithmetic of `planner/overflow.rs` applies
/// (`2147483647::int + 1::int` was -2147483648).
fn constant_overflow(e: &Expr, op: datafusion::logical_expr::Operator, schema: &DFSchema) -> DfResult<()> {
    use datafusion::logical_expr::Operator::{Minus, Multiply, Plus};
    let constant = || {
        let mut plain = true;
        let _ = e.apply(|x| {
            plain &= match x {
                Expr::Literal(..) | Expr::BinaryExpr(_) | Expr::Cast(_) | Expr::TryCast(_) | Expr::Negative(_) => true,
                // `abs(-23) * 100000000`: immutable functions of constants fold too.
                Expr::ScalarFunction(f) => f.func.signature().volatility == Volatility::Immutable,
                _ => false,
            };
            Ok(if plain { datafusion::common::tree_node::TreeNodeRecursion::Continue } else { datafusion::common::tree_node::TreeNodeRecursion::Stop })
        });
        plain
    };
    if !matches!(op, Plus | Minus | Multiply) || !e.get_type(schema).is_ok_and(|t| t.is_integer() || matches!(t, DataType::Decimal128(_, _))) || !constant() {
        return Ok(());
    }
    let empty = DFSchema::empty();
    let Ok(physical) = datafusion::physical_expr::create_physical_expr(e, &empty, &datafusion::execution::context::ExecutionProps::new()) else { return Ok(()) };
    let Ok(physical) = crate::planner::overflow::checked(physical, empty.as_arrow()) else { return Ok(()) };
    let one_row = arrow::array::RecordBatch::try_new_with_options(Arc::new(arrow::datatypes::Schema::empty()), vec![], &arrow::array::RecordBatchOptions::new().with_row_count(Some(1)))?;
    match physical.evaluate(&one_row) {
        Err(err) if err.to_string().to_ascii_lowercase().contains("overflow") => Err(err),
        _ => Ok(()),
    }
}

/// `x` cast to `to` the way `cast` (a `Cast` or a `TryCast`) casts.
fn recast(cast: &Expr, x: Expr, to: &DataType) -> Expr {
    match cast {
        Expr::TryCast(_) => Expr::TryCast(TryCast::new(Box::new(x), to.clone())),
        _ => Expr::Cast(Cast::new(Box::new(x), to.clone())),
    }
}

/// A comparison of a float with a numeric, compared as float8 as in PostgreSQL (coercion made
/// both numeric: 0.30000000000000004::float8 = 0.3 was true).
fn float_comparison(b: &datafusion::logical_expr::BinaryExpr, schema: &DFSchema) -> Option<Expr> {
    use datafusion::logical_expr::Operator::{Eq, Gt, GtEq, IsDistinctFrom, IsNotDistinctFrom, Lt, LtEq, NotEq};
    if !matches!(b.op, Eq | NotEq | Lt | LtEq | Gt | GtEq | IsDistinctFrom | IsNotDistinctFrom) {
        return None;
    }
    // The operand under a coercion's cast to numeric.
    let uncoerced = |x: &Expr| match x {
        Expr::Cast(Cast { expr, field }) if matches!(field.data_type(), DataType::Decimal128(_, _)) => Some(expr.as_ref().clone()),
        _ => None,
    };
    let float_under = |x: &Expr| uncoerced(x).filter(|e| e.get_type(schema).is_ok_and(|t| is_float(&t)));
    let as_float = |x: Expr| if x.get_type(schema).is_ok_and(|t| t == DataType::Float64) { x } else { Expr::Cast(Cast::new(Box::new(x), DataType::Float64)) };
    let other = |x: &Expr| as_float(uncoerced(x).unwrap_or_else(|| x.clone()));
    let (l, r) = match (float_under(&b.left), float_under(&b.right)) {
        (None, None) => return None,
        (l, r) => (l.map(as_float).unwrap_or_else(|| other(&b.left)), r.map(as_float).unwrap_or_else(|| other(&b.right))),
    };
    Some(Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(Box::new(l), b.op, Box::new(r))))
}

/// date ± interval as a timestamp, as in PostgreSQL (DataFusion kept a date and dropped the
/// hours: DATE '2024-01-31' + INTERVAL '1 hour' was 2024-01-31). date ± integer, which coercion
/// made an interval of days, stays a date.
fn date_interval(b: &datafusion::logical_expr::BinaryExpr, schema: &DFSchema) -> Option<Expr> {
    use datafusion::logical_expr::Operator::{Minus, Plus};
    let (lt, rt) = (b.left.get_type(schema), b.right.get_type(schema));
    let from_integer = |x: &Expr| matches!(x, Expr::Cast(Cast { expr, .. }) | Expr::TryCast(TryCast { expr, .. }) if expr.get_type(schema).is_ok_and(|t| t.is_integer() || matches!(t, DataType::Duration(_))));
    let interval = |t: &DfResult<DataType>| matches!(t, Ok(DataType::Interval(_)));
    let date = |t: &DfResult<DataType>| matches!(t, Ok(DataType::Date32 | DataType::Date64));
    let applies = (date(&lt) && interval(&rt)) || (b.op == Plus && interval(&lt) && date(&rt));
    if !matches!(b.op, Plus | Minus) || !applies || from_integer(&b.left) || from_integer(&b.right) {
        return None;
    }
    let ts = |x: &Expr, t: &DfResult<DataType>| if date(t) { Expr::Cast(Cast::new(Box::new(x.clone()), DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None))) } else { x.clone() };
    Some(Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(Box::new(ts(&b.left, &lt)), b.op, Box::new(ts(&b.right, &rt)))))
}

/// `date ± integer` as arithmetic on day numbers, a date again. Type coercion made it
/// `date ± CAST(CAST(CAST(n AS Int64) * 86400 AS Duration(s)) AS Interval)`, which a filter's
/// range analysis cannot compare with a date (`WHERE d - a < DATE '2024-01-02'` was an
/// internal error), and whose durations overflow 292 years from 1970.
fn date_plus_days(b: &datafusion::logical_expr::BinaryExpr, schema: &DFSchema) -> Option<Expr> {
    use datafusion::logical_expr::Operator::{Minus, Multiply, Plus};
    if !matches!(b.op, Plus | Minus) {
        return None;
    }
    // The day count of the coerced form.
    let days = |e: &Expr| -> Option<Expr> {
        let Expr::Cast(Cast { expr: to_interval, field }) = e else { return None };
        if !matches!(field.data_type(), DataType::Interval(_)) {
            return None;
        }
        let Expr::Cast(Cast { expr: seconds, field }) = to_interval.as_ref() else { return None };
        if !matches!(field.data_type(), DataType::Duration(arrow::datatypes::TimeUnit::Second)) {
            return None;
        }
        let Expr::BinaryExpr(m) = seconds.as_ref() else { return None };
        let per_day = matches!(m.right.as_ref(), Expr::Literal(ScalarValue::Int64(Some(86_400)), _));
        (m.op == Multiply && per_day).then(|| m.left.as_ref().clone())
    };
    let is_date = |x: &Expr| x.get_type(schema).is_ok_and(|t| t == DataType::Date32);
    let (date, n, op) = match (days(&b.left), days(&b.right)) {
        (None, Some(n)) if is_date(&b.left) => (b.left.as_ref(), n, b.op),
        (Some(n), None) if b.op == Plus && is_date(&b.right) => (b.right.as_ref(), n, Plus),
        _ => return None,
    };
    let day_number = Expr::Cast(Cast::new(Box::new(Expr::Cast(Cast::new(Box::new(date.clone()), DataType::Int32))), DataType::Int64));
    let sum = Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(Box::new(day_number), op, Box::new(n)));
    let as_int32 = Expr::Cast(Cast::new(Box::new(sum), DataType::Int32));
    Some(Expr::Cast(Cast::new(Box::new(as_int32), DataType::Date32)))
}

/// A comparison of a date with a timestamp compares the date as a timestamp (midnight), as in
/// PostgreSQL: `d < DATE '1994-01-01' + INTERVAL '1' YEAR` compares with the timestamp
/// [`date_interval`] made of the right side (coercion had typed both sides dates).
fn date_timestamp_comparison(b: &datafusion::logical_expr::BinaryExpr, schema: &DFSchema) -> Option<Expr> {
    use datafusion::logical_expr::Operator::{Eq, Gt, GtEq, IsDistinctFrom, IsNotDistinctFrom, Lt, LtEq, NotEq};
    if !matches!(b.op, Eq | NotEq | Lt | LtEq | Gt | GtEq | IsDistinctFrom | IsNotDistinctFrom) {
        return None;
    }
    let (lt, rt) = (b.left.get_type(schema).ok()?, b.right.get_type(schema).ok()?);
    let date = |t: &DataType| matches!(t, DataType::Date32 | DataType::Date64);
    let as_ts = |x: &Expr, to: &DataType| Box::new(Expr::Cast(Cast::new(Box::new(x.clone()), to.clone())));
    let (left, right) = match (&lt, &rt) {
        (l, DataType::Timestamp(..)) if date(l) => (as_ts(&b.left, &rt), b.right.clone()),
        (DataType::Timestamp(..), r) if date(r) => (b.left.clone(), as_ts(&b.right, &lt)),
        _ => return None,
    };
    Some(Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(left, b.op, right)))
}

/// `date BETWEEN a AND b` where a bound became a timestamp ([`date_interval`]): compared as
/// timestamps.
fn date_timestamp_between(b: &datafusion::logical_expr::Between, schema: &DFSchema) -> Option<Expr> {
    let t = b.expr.get_type(schema).ok()?;
    let ts = [&b.low, &b.high].into_iter().find_map(|x| x.get_type(schema).ok().filter(|t| matches!(t, DataType::Timestamp(..))))?;
    let date = |t: &DataType| matches!(t, DataType::Date32 | DataType::Date64);
    let cast = |x: &Expr| -> DfResult<Expr> { Ok(if date(&x.get_type(schema)?) { Expr::Cast(Cast::new(Box::new(x.clone()), ts.clone())) } else { x.clone() }) };
    if !date(&t) && [&b.low, &b.high].iter().all(|x| x.get_type(schema).is_ok_and(|t| !date(&t))) {
        return None;
    }
    Some(Expr::Between(datafusion::logical_expr::Between::new(Box::new(cast(&b.expr).ok()?), b.negated, Box::new(cast(&b.low).ok()?), Box::new(cast(&b.high).ok()?))))
}

/// PostgreSQL's forms of text functions whose DataFusion forms differ:
/// * `to_hex` of an `integer` is of its 32 bits (`to_hex(-1)` is `ffffffff`, not 16 `f`s).
fn text_function(f: &datafusion::logical_expr::expr::ScalarFunction, schema: &DFSchema) -> Option<Expr> {
    use datafusion::logical_expr::expr::ScalarFunction;
    let cast_from = |a: &Expr, want: &dyn Fn(&DataType) -> bool| match a {
        Expr::Cast(Cast { expr, .. }) if expr.get_type(schema).is_ok_and(|t| want(&t)) => Some(expr.as_ref().clone()),
        _ => None,
    };
    match f.name() {
        "to_hex" => {
            let narrow = |t: &DataType| matches!(t, DataType::Int32 | DataType::Int16 | DataType::Int8);
            let first = f.args.first()?;
            let arg = cast_from(first, &narrow).or_else(|| first.get_type(schema).is_ok_and(|t| narrow(&t)).then(|| first.clone()))?;
            let wide = Expr::Cast(Cast::new(Box::new(arg), DataType::Int64));
            let bits = datafusion::logical_expr::binary_expr(wide, datafusion::logical_expr::Operator::BitwiseAnd, datafusion::logical_expr::lit(0xFFFF_FFFF_i64));
            Some(Expr::ScalarFunction(ScalarFunction::new_udf(f.func.clone(), vec![bits])))
        }
        _ => None,
    }
}

/// `eddy_text(e)`: `e` in PostgreSQL's text output (a boolean is `t` / `f`, where a cast to
/// text gives `true` / `false`).
pub fn pg_text_call(e: Expr) -> Expr {
    pg_text_udf().call(vec![e])
}

/// The one `eddy_text` function, for the analyzer rule and [`pg_text_call`].
fn pg_text_udf() -> &'static Arc<ScalarUDF> {
    static UDF: std::sync::OnceLock<Arc<ScalarUDF>> = std::sync::OnceLock::new();
    UDF.get_or_init(|| Arc::new(ScalarUDF::new_from_impl(PgText { signature: Signature::any(1, Volatility::Immutable) })))
}

/// The analyzer rule (see the module docs).
#[derive(Debug, Default)]
pub struct PgTextCasts;

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64)
}

fn rewrite(e: Expr, schema: &DFSchema, udf: &Arc<ScalarUDF>, div: &Arc<ScalarUDF>, rem: &Arc<ScalarUDF>, rint: &Arc<ScalarUDF>) -> DfResult<Transformed<Expr>> {
    e.transform_up(|e| {
        if let Expr::ScalarFunction(f) = &e {
            if let Some(out) = text_function(f, schema) {
                return Ok(Transformed::yes(out));
            }
            if f.name() == "round" && f.args.len() == 1 && f.args[0].get_type(schema).is_ok_and(|t| matches!(t, DataType::Float64 | DataType::Float32)) {
                return Ok(Transformed::yes(rint.call(f.args.clone())));
            }
            // ceil/floor of a numeric are integral numerics: scale 0, as PostgreSQL prints them.
            if matches!(f.name(), "ceil" | "floor") && f.args.len() == 1 {
                if let Ok(DataType::Decimal128(p, s)) = f.args[0].get_type(schema) {
                    if s > 0 {
                        let to = DataType::Decimal128(p, 0);
                        return Ok(Transformed::yes(Expr::Cast(Cast::new(Box::new(e.clone()), to))));
                    }
                }
            }
        }
        if let Expr::Between(b) = &e {
            if let Some(out) = date_timestamp_between(b, schema) {
                return Ok(Transformed::yes(out));
            }
        }
        if let Expr::BinaryExpr(b) = &e {
            constant_overflow(&e, b.op, schema)?;
            if let Some(out) = float_comparison(b, schema).or_else(|| date_interval(b, schema)).or_else(|| date_timestamp_comparison(b, schema)).or_else(|| date_plus_days(b, schema)) {
                return Ok(Transformed::yes(out));
            }
            if b.op == datafusion::logical_expr::Operator::StringConcat {
                // jsonb || jsonb (or an untyped literal) is jsonb concatenation, not text's.
                let is_jsonb = |x: &Expr| x.to_field(schema).is_ok_and(|(_, f)| f.metadata().contains_key(eddy_common::JSONB_METADATA_KEY));
                let literal = |x: &Expr| matches!(x, Expr::Literal(ScalarValue::Utf8(Some(t)), _) if serde_json::from_str::<serde_json::Value>(t).is_ok());
                let (l, r) = (b.left.as_ref(), b.right.as_ref());
                if (is_jsonb(l) && (is_jsonb(r) || literal(r))) || (literal(l) && is_jsonb(r)) {
                    return Ok(Transformed::yes(jsonb_concat().call(vec![l.clone(), r.clone()])));
                }
                return Ok(Transformed::no(e));
            }
            let f = match b.op {
                datafusion::logical_expr::Operator::Divide => div,
                datafusion::logical_expr::Operator::Modulo => rem,
                _ => return Ok(Transformed::no(e)),
            };
            let (Ok(l), Ok(r)) = (b.left.get_type(schema), b.right.get_type(schema)) else { return Ok(Transformed::no(e)) };
            if !(is_float(&l) || is_float(&r)) {
                return Ok(Transformed::no(e));
            }
            let out = f.call(vec![b.left.as_ref().clone(), b.right.as_ref().clone()]);
            // Keep a float4 result float4.
            let out = if l == DataType::Float64 || r == DataType::Float64 { out } else if is_float(&l) { Expr::Cast(Cast::new(Box::new(out), l)) } else { Expr::Cast(Cast::new(Box::new(out), r)) };
            return Ok(Transformed::yes(out));
        }
        let (inner, to) = match &e {
            Expr::Cast(Cast { expr, field }) => (expr.as_ref(), field.data_type()),
            Expr::TryCast(TryCast { expr, field }) => (expr.as_ref(), field.data_type()),
            _ => return Ok(Transformed::no(e)),
        };
        let Ok(from) = inner.get_type(schema) else { return Ok(Transformed::no(e)) };
        // Text read as a number or date may have surrounding whitespace (' 42 '::int is 42).
        let text = matches!(from, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        if text && matches!(e, Expr::Cast(_)) && matches!(to, DataType::Float64 | DataType::Float32) {
            let parsed = text_float(*to == DataType::Float32).call(vec![inner.clone()]);
            return Ok(Transformed::yes(recast(&e, parsed, to)));
        }
        // PostgreSQL's other date forms (`Jan 5 2024`, `2024/01/05`, ...: `date_input`).
        if text && matches!(e, Expr::Cast(_)) && matches!(to, DataType::Date32 | DataType::Timestamp(_, _)) {
            let date_only = *to == DataType::Date32;
            let naive = matches!(to, DataType::Timestamp(_, None));
            match inner {
                Expr::Literal(ScalarValue::Utf8(Some(t)), _) => {
                    let iso = eddy_common::date_text::iso_date_text(t, date_only);
                    // A timestamp without time zone ignores a zone in its text.
                    let unzoned = if naive { eddy_common::date_text::without_zone(iso.as_deref().unwrap_or(t)) } else { None };
                    if let Some(text) = unzoned.or(iso) {
                        return Ok(Transformed::yes(recast(&e, Expr::Literal(ScalarValue::Utf8(Some(text)), None), to)));
                    }
                }
                Expr::ScalarFunction(f) if matches!(f.name(), "eddy_date_input" | "eddy_timestamp_input" | "eddy_timestamptz_input") => {}
                _ => {
                    let read = crate::planner::date_input::date_input_udf(date_only, naive).call(vec![inner.clone()]);
                    return Ok(Transformed::yes(recast(&e, read, to)));
                }
            }
        }
        // A numeric in exponent form ('1e3'::numeric), which Arrow's decimal parser refuses.
        if text && matches!(e, Expr::Cast(_)) && matches!(to, DataType::Decimal128(_, _)) {
            match inner {
                Expr::Literal(ScalarValue::Utf8(Some(t)), _) => {
                    if let Some(plain) = eddy_common::text::plain_decimal(t) {
                        return Ok(Transformed::yes(recast(&e, Expr::Literal(ScalarValue::Utf8(Some(plain)), None), to)));
                    }
                }
                Expr::ScalarFunction(f) if f.name() == "eddy_numeric_text" => {}
                _ => return Ok(Transformed::yes(recast(&e, numeric_text().call(vec![inner.clone()]), to))),
            }
        }
        if text && (to.is_numeric() || matches!(to, DataType::Date32 | DataType::Timestamp(_, _))) && !matches!(inner, Expr::Literal(ScalarValue::Utf8(Some(t)), _) if t.trim() == t) {
            let trimmed = datafusion::functions::string::btrim().call(vec![inner.clone()]);
            return Ok(Transformed::yes(recast(&e, trimmed, to)));
        }
        if text && matches!(to, DataType::List(_)) {
            let parsed = text_array().call(vec![inner.clone()]);
            return Ok(Transformed::yes(recast(&e, parsed, to)));
        }
        // A float or numeric cast to an integer, and a numeric cast to scale 0, round as
        // PostgreSQL does (floats: halves to even, numerics: halves away from zero), where Arrow
        // truncates (1.5::int was 1). The rounding is a function call, not a cast to a numeric
        // of scale 0: the optimizer unwraps casts in comparisons (`n::int < 2` became
        // `n < 2.00`, true for 1.50; `CAST(n AS numeric(3, 0)) = 3` missed n = 2.50).
        let integral = to.is_integer() || matches!(to, DataType::Decimal128(_, 0));
        let rounds = match from {
            DataType::Decimal128(_, s) => s > 0 && !matches!(inner, Expr::ScalarFunction(f) if f.name() == "round"),
            _ => to.is_integer() && is_float(&from),
        };
        if integral && rounds {
            let rounded = match from {
                DataType::Decimal128(p, _) => {
                    let round = datafusion::functions::math::round().call(vec![inner.clone()]);
                    Expr::Cast(Cast::new(Box::new(round), DataType::Decimal128(p, 0)))
                }
                _ => rint.call(vec![inner.clone()]),
            };
            return Ok(Transformed::yes(recast(&e, rounded, to)));
        }
        if !matches!(to, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) {
            return Ok(Transformed::no(e));
        }
        if !differs_from_arrow(&from) {
            return Ok(Transformed::no(e));
        }
        let call = udf.call(vec![inner.clone()]);
        let call = if to == &DataType::Utf8 { call } else { Expr::Cast(Cast::new(Box::new(call), to.clone())) };
        Ok(Transformed::yes(call))
    })
}

impl AnalyzerRule for PgTextCasts {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let udf = pg_text_udf();
        let div = Arc::new(float_div(false));
        let rem = Arc::new(float_div(true));
        let rint = Arc::new(rint());
        let out = plan.transform_up_with_subqueries(|node| {
            // Expressions read the node's inputs; a leaf has none, and VALUES rows are
            // constants (`INSERT ... VALUES (2.9)` into an integer casts there).
            let schema: Arc<DFSchema> = match node.inputs().as_slice() {
                [] if matches!(node, LogicalPlan::Values(_)) => Arc::new(DFSchema::empty()),
                [] => return Ok(Transformed::no(node)),
                [one] => Arc::clone(one.schema()),
                many => {
                    let mut s = many[0].schema().as_ref().clone();
                    for other in &many[1..] {
                        s.merge(other.schema());
                    }
                    Arc::new(s)
                }
            };
            let t = crate::planner::names::map_expressions_keeping_names(node, |e| rewrite(e, &schema, udf, &div, &rem, &rint))?;
            if t.transformed {
                Ok(Transformed::yes(t.data.recompute_schema()?))
            } else {
                Ok(t)
            }
        })?;
        Ok(out.data)
    }

    fn name(&self) -> &str {
        "eddy_pg_text_casts"
    }
}

#[cfg(test)]
mod float_text_tests {
    use super::parse_pg_float;

    fn code(r: datafusion::error::Result<f64>) -> String {
        match r {
            Ok(v) => v.to_string(),
            Err(e) => eddy_common::EddyError::from(e).sqlstate.to_string(),
        }
    }

    #[test]
    fn text_reads_as_postgresql_reads_floats() {
        assert_eq!(code(parse_pg_float("1e400", false, "double precision")), "22003");
        assert_eq!(code(parse_pg_float("-1e400", false, "double precision")), "22003");
        assert_eq!(code(parse_pg_float("1e-400", false, "double precision")), "22003");
        assert_eq!(code(parse_pg_float("1e39", true, "real")), "22003");
        assert_eq!(code(parse_pg_float("1.5x", false, "double precision")), "22P02");
        assert_eq!(code(parse_pg_float("", false, "double precision")), "22P02");
        assert_eq!(code(parse_pg_float(" 1.5 ", false, "double precision")), "1.5");
        assert_eq!(code(parse_pg_float("0.0e10", false, "double precision")), "0");
        assert_eq!(code(parse_pg_float("1e38", true, "real")), "100000000000000000000000000000000000000");
        assert_eq!(code(parse_pg_float("-Infinity", false, "double precision")), "-inf");
        assert_eq!(code(parse_pg_float("inf", false, "double precision")), "inf");
        assert!(parse_pg_float("NaN", false, "double precision").unwrap().is_nan());
    }
}
