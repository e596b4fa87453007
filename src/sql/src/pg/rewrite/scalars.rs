//! Scalar functions and operators whose PostgreSQL meaning DataFusion lacks or differs from:
//! `mod(a, b)`, `sign(x)`, `array_remove`/`array_replace` (every occurrence), `replace` of '', `min`/`max` over sliding window frames, the fractional seconds of `extract(second ...)`/`date_part('second',
//! ...)` (DataFusion's are whole), and `SIMILAR TO` (DataFusion reads the pattern as a regex;
//! SQL's `%`, `_` and implicit anchoring are translated here).

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, CastKind, DataType as SqlType, DateTimeField, ExactNumberInfo, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, Value,
    WindowType,
};

use super::ast::{call, case_when, string_lit};

fn number(n: &str) -> Expr {
    Expr::value(Value::Number(n.into(), false))
}

fn cast(e: Expr, data_type: SqlType) -> Expr {
    Expr::Cast { kind: CastKind::Cast, expr: Box::new(e), data_type, array: false, format: None }
}

/// `CASE WHEN condition THEN NULL ELSE value END`.
fn null_when(condition: Expr, value: Expr) -> Expr {
    let mut case = case_when(vec![(condition, Expr::value(Value::Null))]);
    if let Expr::Case { else_result, .. } = &mut case {
        *else_result = Some(Box::new(value));
    }
    case
}

/// Microseconds within the minute of `e` (seconds and their fraction).
fn micros(e: Expr) -> Expr {
    call("date_part", vec![string_lit("microsecond"), e])
}

/// Math functions of double precision arguments.
const MATH: [&str; 24] = [
    "sqrt", "cbrt", "exp", "ln", "log", "log10", "log2", "power", "pow", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh",
    "cosh", "tanh", "degrees", "radians", "cot", "asinh", "acosh",
];

/// A rewrite of the call `f` (named `name`, lower case) with arguments `args`, if it needs one.
pub(super) fn function(f: &mut Function, name: &str, args: &[Expr]) -> Option<Expr> {
    // A quoted literal given to a math function is a double, as PostgreSQL resolves an
    // unknown-type argument (`sqrt('1004.3')`; DataFusion found no signature for text).
    if MATH.contains(&name) {
        if let FunctionArguments::List(list) = &mut f.args {
            for a in list.args.iter_mut() {
                if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = a {
                    if matches!(e, Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_))) {
                        *e = cast(e.clone(), SqlType::DoublePrecision);
                    }
                }
            }
        }
    }
    match (name, args) {
        ("mod", [a, b]) => Some(Expr::Nested(Box::new(Expr::BinaryOp { left: Box::new(a.clone()), op: BinaryOperator::Modulo, right: Box::new(b.clone()) }))),
        // PostgreSQL removes and replaces every occurrence (DataFusion's: the first only).
        // Removing NULL removes the NULL elements (DataFusion's gave NULL).
        ("array_remove", [arr, x]) if is_null_literal(x) || matches!(strip(x), Expr::Cast { expr, .. } if is_null_literal(expr)) => Some(call("array_compact", vec![arr.clone()])),
        ("array_remove" | "array_replace", _) => {
            f.name = ObjectName::from(vec![Ident::new(format!("{name}_all"))]);
            None
        }
        // An empty search string leaves the text as it is (Rust's replace would insert between
        // every character).
        ("replace", [x, Expr::Value(v), _]) if matches!(&v.value, Value::SingleQuotedString(p) if p.is_empty()) => Some(x.clone()),
        // PostgreSQL's replacement text: `\1`..`\9` and `\&` (the whole match) refer to the match,
        // `$` is literal; in the regex crate's (which DataFusion's `\N` translation feeds) `$`
        // starts a reference.
        ("regexp_replace", [_, _, Expr::Value(v), ..]) if matches!(&v.value, Value::SingleQuotedString(r) if r.contains('$') || r.contains('\\')) => {
            let Value::SingleQuotedString(r) = &v.value else { return None };
            let replacement = pg_replacement(r);
            if let datafusion::sql::sqlparser::ast::FunctionArguments::List(list) = &mut f.args {
                list.args[2] = datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(string_lit(&replacement)));
            }
            None
        }
        // An empty array has no dimensions in PostgreSQL: its length and ndims are NULL.
        ("array_length" | "array_ndims", [a, ..]) => {
            let empty = Expr::BinaryOp { left: Box::new(call("cardinality", vec![a.clone()])), op: BinaryOperator::Eq, right: Box::new(number("0")) };
            Some(null_when(empty, Expr::Function(f.clone())))
        }
        // `ROW(a, b)`: a record whose fields are f1, f2, ... as PostgreSQL names them
        // (`row_to_json(ROW(1, 'a'))` is `{"f1":1,"f2":"a"}`; DataFusion's struct said c0, c1).
        ("row", [_, ..]) => {
            let fields = args.iter().enumerate().flat_map(|(i, a)| [string_lit(&format!("f{}", i + 1)), a.clone()]).collect();
            Some(call("named_struct", fields))
        }
        // A record's JSON object (a whole-row reference is a struct: frontend::whole_row).
        ("row_to_json", [_]) => {
            f.name = ObjectName::from(vec![Ident::new("to_json")]);
            None
        }
        // How many arguments are (not) NULL, an integer: a sum of one per argument.
        ("num_nulls" | "num_nonnulls", [_, ..]) => {
            let counted = args.iter().map(|a| {
                let test = if name == "num_nulls" { Expr::IsNull(Box::new(a.clone())) } else { Expr::IsNotNull(Box::new(a.clone())) };
                cast(Expr::Nested(Box::new(test)), SqlType::Int(None))
            });
            let sum = counted.reduce(|l, r| Expr::BinaryOp { left: Box::new(l), op: BinaryOperator::Plus, right: Box::new(r) })?;
            Some(Expr::Nested(Box::new(sum)))
        }
        // quote_literal(x) / quote_nullable(x) of a non-text value quote its text output
        // (an interval was quoted in Arrow's debug form).
        ("quote_literal" | "quote_nullable", [x]) if !matches!(x, Expr::Cast { data_type: SqlType::Text, .. }) => {
            if let datafusion::sql::sqlparser::ast::FunctionArguments::List(list) = &mut f.args {
                list.args[0] = datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(cast(x.clone(), SqlType::Text)));
            }
            None
        }
        ("sign", [_]) => {
            f.name = ObjectName::from(vec![Ident::new("signum")]);
            None
        }
        ("date_part", [Expr::Value(v), x]) if year_count(&v.value).is_some() => extract(&year_count(&v.value)?, x),
        // date_part('second', x) is double precision with the fraction (56.789).
        ("date_part", [Expr::Value(v), x]) if matches!(&v.value, Value::SingleQuotedString(p) if p.eq_ignore_ascii_case("second") || p.eq_ignore_ascii_case("seconds")) => {
            let seconds = cast(micros(x.clone()), SqlType::DoublePrecision);
            Some(Expr::Nested(Box::new(Expr::BinaryOp { left: Box::new(seconds), op: BinaryOperator::Divide, right: Box::new(number("1000000.0")) })))
        }
        // date_part('epoch', x) is extract's epoch as double precision (DataFusion's counted a
        // year of an interval as 360 days; PostgreSQL's is 365.25).
        ("date_part", [Expr::Value(v), x]) if matches!(&v.value, Value::SingleQuotedString(p) if p.eq_ignore_ascii_case("epoch")) => {
            Some(cast(extract(&DateTimeField::Epoch, x)?, SqlType::DoublePrecision))
        }
        // date_part is double precision in PostgreSQL (DataFusion's fields are integers).
        ("date_part", [Expr::Value(_), _]) => Some(cast(Expr::Function(f.clone()), SqlType::DoublePrecision)),
        // min/max over a sliding frame: DataFusion's sliding accumulators keep the last value
        // once every row of the frame is NULL (or has left it); PostgreSQL says NULL there.
        ("min" | "max", [x]) => {
            let Some(WindowType::WindowSpec(spec)) = &f.over else { return None };
            spec.window_frame.as_ref()?;
            let mut count = call("count", vec![x.clone()]);
            if let Expr::Function(c) = &mut count {
                c.over = f.over.clone();
            }
            let empty = Expr::BinaryOp { left: Box::new(count), op: BinaryOperator::Eq, right: Box::new(number("0")) };
            Some(null_when(empty, Expr::Function(f.clone())))
        }
        _ => None,
    }
}

/// A PostgreSQL regexp_replace replacement in the regex crate's syntax: `\&` is `${0}`, `\N`
/// is `${N}`, `\\` is one backslash, `$` is `$$`. (A backslash written before a digit, `\\1`,
/// would still be read as a reference by DataFusion's own `\N` translation.)
fn pg_replacement(r: &str) -> String {
    let mut out = String::with_capacity(r.len());
    let mut chars = r.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek().copied()) {
            ('\\', Some('&')) => {
                chars.next();
                out.push_str("${0}");
            }
            ('\\', Some(d)) if d.is_ascii_digit() => {
                chars.next();
                out.push_str(&format!("${{{d}}}"));
            }
            ('\\', Some('\\')) => {
                chars.next();
                out.push('\\');
            }
            ('$', _) => out.push_str("$$"),
            _ => out.push(c),
        }
    }
    out
}

/// `date_part`'s field names that [`extract`] counts from the year.
fn year_count(field: &Value) -> Option<DateTimeField> {
    let Value::SingleQuotedString(p) = field else { return None };
    match p.to_ascii_lowercase().as_str() {
        "century" => Some(DateTimeField::Century),
        "millennium" => Some(DateTimeField::Millennium),
        "decade" => Some(DateTimeField::Decade),
        _ => None,
    }
}

/// `extract(second FROM x)`: numeric with six decimals, as PostgreSQL gives it (56.789000).
pub(super) fn extract(field: &DateTimeField, x: &Expr) -> Option<Expr> {
    // The epoch and milliseconds are exact numerics with PostgreSQL's scale (pg::extract).
    match field {
        DateTimeField::Epoch => return Some(call(crate::pg::extract::EXTRACT_EPOCH, vec![x.clone()])),
        DateTimeField::Millisecond | DateTimeField::Milliseconds => return Some(call(crate::pg::extract::EXTRACT_MILLISECOND, vec![x.clone()])),
        DateTimeField::Second | DateTimeField::Seconds => {}
        // From the year, as PostgreSQL counts them: the 21st century starts in 2001, year 1 BC
        // (-1) is in century -1.
        DateTimeField::Century | DateTimeField::Millennium | DateTimeField::Millenium | DateTimeField::Decade => {
            let y = format!("CAST(extract(year FROM {x}) AS BIGINT)");
            // (divisor, rounding up of AD years, of BC years)
            let (n, ad, bc) = match field {
                DateTimeField::Century => (100, 99, 99),
                DateTimeField::Decade => (10, 0, 9),
                _ => (1000, 999, 999),
            };
            let sql = format!("SELECT CASE WHEN {y} > 0 THEN ({y} + {ad}) / {n} ELSE -(({bc} - {y}) / {n}) END");
            let datafusion::sql::sqlparser::ast::SetExpr::Select(select) = *super::ast::parse_query(&sql)?.body else { return None };
            let Some(datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(e)) = select.projection.into_iter().next() else { return None };
            return Some(cast(Expr::Nested(Box::new(e)), SqlType::Decimal(ExactNumberInfo::PrecisionAndScale(20, 0))));
        }
        // The other fields are whole numbers: numeric in PostgreSQL (DataFusion's are integers,
        // so `extract(hour FROM ts) / 4` divided as integers).
        _ => {
            let whole = Expr::Extract { field: field.clone(), syntax: datafusion::sql::sqlparser::ast::ExtractSyntax::From, expr: Box::new(x.clone()) };
            return Some(cast(whole, SqlType::Decimal(ExactNumberInfo::PrecisionAndScale(20, 0))));
        }
    }
    let whole = cast(micros(x.clone()), SqlType::Decimal(ExactNumberInfo::PrecisionAndScale(20, 0)));
    let scale = cast(number("0.000001"), SqlType::Decimal(ExactNumberInfo::PrecisionAndScale(7, 6)));
    Some(Expr::Nested(Box::new(Expr::BinaryOp { left: Box::new(whole), op: BinaryOperator::Multiply, right: Box::new(scale) })))
}

/// `x [NOT] SIMILAR TO 'pattern'` with a literal pattern and the default escape (backslash) as
/// a regular-expression match: `%` is `.*`, `_` is `.`, the pattern matches the whole string,
/// `|`, `*`, `+`, `?`, `{m,n}`, `()` and `[...]` keep their regex meaning, other characters
/// match themselves.
/// Another pattern is translated when the query runs, by [`SIMILAR_REGEX`] (DataFusion's own
/// SIMILAR TO took it as an unanchored regex, so `'abc' SIMILAR TO '%(b|d)%'` was false).
pub(super) fn similar_to(negated: bool, x: &Expr, pattern: &Expr) -> Option<Expr> {
    let op = if negated { BinaryOperator::PGRegexNotMatch } else { BinaryOperator::PGRegexMatch };
    let regex = match pattern {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(p) => string_lit(&similar_regex(p)),
            _ => call(SIMILAR_REGEX, vec![pattern.clone()]),
        },
        _ => call(SIMILAR_REGEX, vec![pattern.clone()]),
    };
    Some(Expr::Nested(Box::new(Expr::BinaryOp { left: Box::new(x.clone()), op, right: Box::new(regex) })))
}

/// `eddy_similar_regex(pattern)`: the regex of a SIMILAR TO pattern (see [`similar_regex`]).
pub const SIMILAR_REGEX: &str = "eddy_similar_regex";

/// The anchored regex of a SIMILAR TO pattern.
pub fn similar_regex(p: &str) -> String {
    let mut out = String::from("^(?:");
    let mut chars = p.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n) => out.push_str(&regex_escape(n)),
                None => out.push_str("\\\\"),
            },
            _ if in_class => {
                if c == ']' {
                    in_class = false;
                }
                out.push(c);
            }
            '[' => {
                in_class = true;
                out.push(c);
            }
            '%' => out.push_str(".*"),
            '_' => out.push('.'),
            '|' | '*' | '+' | '?' | '{' | '}' | '(' | ')' => out.push(c),
            _ => out.push_str(&regex_escape(c)),
        }
    }
    out.push_str(")$");
    out
}

fn regex_escape(c: char) -> String {
    if c.is_ascii_alphanumeric() || !c.is_ascii() || c == ' ' {
        c.to_string()
    } else {
        format!("\\{c}")
    }
}

/// A comparison of two row constructors of one length, `(a, b) op (c, d)`, as PostgreSQL
/// evaluates it: `=` is every pair equal, `<>` some pair different, and `<`, `<=`, `>`, `>=`
/// compare pair by pair from the left — so a NULL in a deciding pair makes the result NULL
/// (DataFusion compared the rows as structs: a NULL member made `=` false).
pub(super) fn row_comparison(left: &Expr, op: &BinaryOperator, right: &Expr) -> Option<Expr> {
    let (ls, rs) = (row_items(left)?, row_items(right)?);
    if ls.len() != rs.len() || ls.is_empty() {
        return None;
    }
    let bin = |l: &Expr, op: BinaryOperator, r: &Expr| Expr::BinaryOp { left: Box::new(l.clone()), op, right: Box::new(r.clone()) };
    let nested = |e: Expr| Expr::Nested(Box::new(e));
    let pairs = ls.iter().zip(rs.iter());
    let out = match op {
        BinaryOperator::Eq | BinaryOperator::NotEq => {
            let (pair_op, join) = if *op == BinaryOperator::Eq { (BinaryOperator::Eq, BinaryOperator::And) } else { (BinaryOperator::NotEq, BinaryOperator::Or) };
            pairs.map(|(l, r)| nested(bin(l, pair_op.clone(), r))).reduce(|a, b| bin(&a, join.clone(), &b))?
        }
        BinaryOperator::Lt | BinaryOperator::LtEq | BinaryOperator::Gt | BinaryOperator::GtEq => {
            let strict = if matches!(op, BinaryOperator::Lt | BinaryOperator::LtEq) { BinaryOperator::Lt } else { BinaryOperator::Gt };
            // From the last pair back: last op, then `l strict r OR (l = r AND rest)`.
            let mut pairs: Vec<_> = pairs.collect();
            let (l, r) = pairs.pop()?;
            let mut out = nested(bin(l, op.clone(), r));
            for (l, r) in pairs.into_iter().rev() {
                let tie = nested(bin(&nested(bin(l, BinaryOperator::Eq, r)), BinaryOperator::And, &out));
                out = bin(&nested(bin(l, strict.clone(), r)), BinaryOperator::Or, &tie);
            }
            out
        }
        _ => return None,
    };
    Some(nested(out))
}

/// `x IS [NOT] DISTINCT FROM y AND z` as PostgreSQL reads it, `(x IS DISTINCT FROM y) AND z`:
/// the parser binds AND/OR tighter there (`x IS DISTINCT FROM (y AND z)`). A parenthesized
/// right side stays as written.
pub(super) fn distinct_from_precedence(e: &Expr) -> Option<Expr> {
    let (l, r, not) = match e {
        Expr::IsDistinctFrom(l, r) => (l, r, false),
        Expr::IsNotDistinctFrom(l, r) => (l, r, true),
        _ => return None,
    };
    let Expr::BinaryOp { left, op: op @ (BinaryOperator::And | BinaryOperator::Or), right } = r.as_ref() else { return None };
    let inner = if not { Expr::IsNotDistinctFrom(l.clone(), left.clone()) } else { Expr::IsDistinctFrom(l.clone(), left.clone()) };
    let inner = distinct_from_precedence(&inner).unwrap_or(inner);
    Some(Expr::BinaryOp { left: Box::new(inner), op: op.clone(), right: right.clone() })
}

/// `a[-n]` (a negative constant subscript) is NULL in PostgreSQL, where DataFusion counts from
/// the end: `CASE WHEN false THEN a[1] END` keeps the element type.
pub(super) fn negative_subscript(e: &Expr) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::{AccessExpr, Subscript, UnaryOperator};
    let Expr::CompoundFieldAccess { root, access_chain } = e else { return None };
    let [AccessExpr::Subscript(Subscript::Index { index })] = access_chain.as_slice() else { return None };
    let negative = match strip(index) {
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => matches!(strip(expr), Expr::Value(v) if matches!(&v.value, Value::Number(..))),
        _ => false,
    };
    if !negative {
        return None;
    }
    let first = Expr::CompoundFieldAccess { root: root.clone(), access_chain: vec![AccessExpr::Subscript(Subscript::Index { index: number("1") })] };
    Some(case_when(vec![(Expr::value(Value::Boolean(false)), first)]))
}

/// The members of a row constructor, `(a, b)` or `ROW(a, ...)`.
fn row_items(e: &Expr) -> Option<Vec<Expr>> {
    match strip(e) {
        Expr::Tuple(items) => Some(items.clone()),
        Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("row") && f.over.is_none() && f.filter.is_none() => {
            let datafusion::sql::sqlparser::ast::FunctionArguments::List(list) = &f.args else { return None };
            if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
                return None;
            }
            list.args
                .iter()
                .map(|a| match a {
                    datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(e)) => Some(e.clone()),
                    _ => None,
                })
                .collect()
        }
        _ => None,
    }
}

fn is_null_literal(e: &Expr) -> bool {
    matches!(strip(e), Expr::Value(v) if v.value == Value::Null)
}

/// Comparisons and NULL tests of `ROW(...)` constructors, as PostgreSQL evaluates them (see
/// [`row_comparison`]; DataFusion compared the rows as structs): `row IS NULL` is every member
/// NULL, `row IS NOT NULL` every member not NULL (`ROW(1, NULL)` is neither).
pub(super) fn row_predicate(e: &Expr) -> Option<Expr> {
    let test = |items: Vec<Expr>, not_null: bool| -> Option<Expr> {
        let out = items
            .into_iter()
            .map(|x| if not_null { Expr::IsNotNull(Box::new(x)) } else { Expr::IsNull(Box::new(x)) })
            .reduce(|a, b| Expr::BinaryOp { left: Box::new(a), op: BinaryOperator::And, right: Box::new(b) })?;
        Some(Expr::Nested(Box::new(out)))
    };
    match e {
        // `x [NOT] IN (VALUES (1), (2))`: the list `x IN (1, 2)` (DataFusion: 42601 "single
        // expression required").
        Expr::InSubquery { expr, subquery, negated } if subquery.with.is_none() && subquery.order_by.is_none() && subquery.limit_clause.is_none() => {
            let datafusion::sql::sqlparser::ast::SetExpr::Values(v) = subquery.body.as_ref() else { return None };
            let list = v.rows.iter().map(|r| match r.content.as_slice() {
                [one] => Some(one.clone()),
                _ => None,
            });
            Some(Expr::InList { expr: expr.clone(), list: list.collect::<Option<Vec<_>>>()?, negated: *negated })
        }
        // `(a, b) [NOT] IN ((1, 2), ...)`: an OR of row equalities (a NULL member makes a
        // non-matching row's test NULL, not false).
        Expr::InList { expr, list, negated } if row_items(expr).is_some() && !list.is_empty() => {
            let any = list.iter().map(|item| row_comparison(expr, &BinaryOperator::Eq, item)).collect::<Option<Vec<_>>>()?;
            let any = any.into_iter().reduce(|a, b| Expr::BinaryOp { left: Box::new(a), op: BinaryOperator::Or, right: Box::new(b) })?;
            let any = Expr::Nested(Box::new(any));
            Some(if *negated { Expr::Nested(Box::new(Expr::UnaryOp { op: datafusion::sql::sqlparser::ast::UnaryOperator::Not, expr: Box::new(any) })) } else { any })
        }
        // `x [NOT] IN (NULL, 3)`: the list without its NULLs, OR NULL (AND NULL when negated),
        // which is PostgreSQL's answer; DataFusion's simplifier merged such lists as sets and
        // dropped the NULL (`k NOT IN (1) OR k NOT IN (NULL, 3)` became TRUE).
        Expr::InList { expr, list, negated } if row_items(expr).is_none() && list.iter().any(is_null_literal) => {
            let null = Expr::Cast { kind: datafusion::sql::sqlparser::ast::CastKind::Cast, expr: Box::new(Expr::value(Value::Null)), data_type: datafusion::sql::sqlparser::ast::DataType::Boolean, array: false, format: None };
            let rest: Vec<Expr> = list.iter().filter(|x| !is_null_literal(x)).cloned().collect();
            if rest.is_empty() {
                return Some(null);
            }
            let within = Expr::InList { expr: expr.clone(), list: rest, negated: *negated };
            let op = if *negated { BinaryOperator::And } else { BinaryOperator::Or };
            Some(Expr::Nested(Box::new(Expr::BinaryOp { left: Box::new(within), op, right: Box::new(null) })))
        }
        Expr::IsNull(x) => test(row_items(x)?, false),
        Expr::IsNotNull(x) => test(row_items(x)?, true),
        Expr::BinaryOp { left, op, right } if !matches!(strip(left), Expr::Tuple(_)) => row_comparison(left, op, right),
        _ => None,
    }
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Nested(n) => strip(n),
        other => other,
    }
}

/// `make_interval(days => 3, secs => 1.5)`: named arguments in their positions, the missing
/// ones 0 (PostgreSQL's defaults), as the function takes them.
pub(super) fn positional_make_interval(f: &mut Function) {
    const NAMES: [&str; 7] = ["years", "months", "weeks", "days", "hours", "mins", "secs"];
    let FunctionArguments::List(list) = &mut f.args else { return };
    if !list.args.iter().any(|a| matches!(a, FunctionArg::Named { .. })) {
        return;
    }
    let mut values: Vec<Option<Expr>> = vec![None; NAMES.len()];
    for (i, a) in list.args.iter().enumerate() {
        let (slot, value) = match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => (Some(i), e),
            FunctionArg::Named { name, arg: FunctionArgExpr::Expr(e), .. } => {
                (NAMES.iter().position(|n| name.value.eq_ignore_ascii_case(n)), e)
            }
            _ => (None, &Expr::Value(Value::Null.into())),
        };
        match slot.and_then(|k| values.get_mut(k)) {
            Some(v) => *v = Some(value.clone()),
            // An unknown name: left for the function's own error.
            None => return,
        }
    }
    let last = values.iter().rposition(Option::is_some).map_or(0, |k| k + 1);
    list.args = values[..last]
        .iter()
        .map(|v| FunctionArg::Unnamed(FunctionArgExpr::Expr(v.clone().unwrap_or_else(|| Expr::value(Value::Number("0".into(), false))))))
        .collect();
}

/// `substring(x FROM 'pattern')` (a text pattern, no FOR): the first match of the POSIX
/// regular expression, or of its first parenthesized group, as PostgreSQL reads it; NULL
/// without a match (DataFusion took the pattern for a start position).
pub(super) fn substring_pattern(e: &Expr) -> Option<Expr> {
    let Expr::Substring { expr, substring_from: Some(from), substring_for: None, .. } = e else { return None };
    let Expr::Value(v) = from.as_ref() else { return None };
    let Value::SingleQuotedString(pattern) = &v.value else { return None };
    // A whole-match group when the pattern has none of its own (`\(` is a literal parenthesis).
    let grouped = pattern.replace("\\(", "").contains('(');
    let pattern = if grouped { pattern.clone() } else { format!("({pattern})") };
    let matched = call("regexp_match", vec![expr.as_ref().clone(), string_lit(&pattern)]);
    Some(Expr::CompoundFieldAccess {
        root: Box::new(Expr::Nested(Box::new(matched))),
        access_chain: vec![datafusion::sql::sqlparser::ast::AccessExpr::Subscript(datafusion::sql::sqlparser::ast::Subscript::Index { index: number("1") })],
    })
}

/// `-x ^ y` is `(-x) ^ y` in PostgreSQL, whose unary minus binds tighter than `^` (the
/// parser read `-(x ^ y)`: `-3 ^ 2` gave -9, not 9).
pub(super) fn unary_minus_power(e: &Expr) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::UnaryOperator;
    let Expr::UnaryOp { op: UnaryOperator::Minus, expr } = e else { return None };
    let Expr::BinaryOp { left, op: BinaryOperator::PGExp, right } = expr.as_ref() else { return None };
    let negated = Expr::UnaryOp { op: UnaryOperator::Minus, expr: left.clone() };
    Some(Expr::BinaryOp { left: Box::new(negated), op: BinaryOperator::PGExp, right: right.clone() })
}

/// `x op ANY (array)` with PostgreSQL's NULLs: true if an element compares true, else NULL if
/// `x`, the array or an element is NULL (and the array is not empty), else false. DataFusion's
/// skipped NULL elements (`1 = ANY(ARRAY[2, NULL])` was false, PostgreSQL says NULL).
pub(super) fn any_with_nulls(e: &Expr) -> Option<Expr> {
    let Expr::AnyOp { left, right, .. } = e else { return None };
    if matches!(strip(right), Expr::Subquery(_)) {
        return None;
    }
    let arr = right.as_ref().clone();
    let is_null = |x: Expr| Expr::IsNull(Box::new(x));
    let null = Expr::value(Value::Null);
    let empty = Expr::BinaryOp { left: Box::new(call("cardinality", vec![arr.clone()])), op: BinaryOperator::Eq, right: Box::new(number("0")) };
    let null_element = Expr::IsNotNull(Box::new(call("array_position", vec![arr.clone(), null.clone()])));
    let unknown = Expr::BinaryOp { left: Box::new(is_null(left.as_ref().clone())), op: BinaryOperator::Or, right: Box::new(null_element) };
    let mut out = case_when(vec![
        (Expr::Nested(Box::new(e.clone())), Expr::value(Value::Boolean(true))),
        (is_null(arr), null.clone()),
        (empty, Expr::value(Value::Boolean(false))),
        (unknown, null),
    ]);
    if let Expr::Case { else_result, .. } = &mut out {
        *else_result = Some(Box::new(Expr::value(Value::Boolean(false))));
    }
    Some(out)
}

/// A numeric literal with an exponent (`1e5`, `1.5E-3`) as the numeric PostgreSQL reads,
/// written out: `CAST(100000 AS NUMERIC(6, 0))`, `CAST(0.0015 AS NUMERIC(5, 4))` (its digits
/// and scale; past numeric's 38 digits, the digits alone, a wide decimal). DataFusion reads
/// `1e5` as a decimal of negative scale, which its optimizer mishandles (a power of ten by the
/// scale as `u32`: a panic, or a wrapped number in a release build). Past the 76 digits of the
/// widest decimal (`1e300`, `1.5e-200`), a double precision value: the nearest Eddy holds
/// (DataFusion refused it, so even `INSERT INTO t (float8_column) VALUES (1e300)` failed).
pub(super) fn exponent_literal(e: &Expr) -> Option<Expr> {
    let Expr::Value(v) = e else { return None };
    let Value::Number(n, _) = &v.value else { return None };
    if !n.contains(['e', 'E']) {
        return None;
    }
    let plain = crate::planner::jsonb_value::canonical_number(n).ok()?;
    let digits = plain.bytes().filter(u8::is_ascii_digit).count();
    let scale = plain.split_once('.').map_or(0, |(_, f)| f.len());
    let number = Expr::value(Value::Number(plain, false));
    match digits {
        0..=38 => Some(Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(number),
            data_type: SqlType::Numeric(ExactNumberInfo::PrecisionAndScale(digits as u64, scale as i64)),
            array: false,
            format: None,
        }),
        39..=76 => Some(number),
        _ => Some(cast(Expr::value(Value::SingleQuotedString(n.clone())), SqlType::DoublePrecision)),
    }
}


/// Constant arguments PostgreSQL refuses (it does so on the first row; a constant is refused
/// while planning): `date_trunc`'s unit, and `ntile`'s and `nth_value`'s count below 1.
pub(super) fn check_arguments(f: &Function) -> eddy_common::Result<()> {
    use eddy_common::error::sqlstate;
    let name = super::base_name(&f.name);
    let (position, code) = match name.as_str() {
        "date_trunc" => return super::clock::check_date_trunc_unit(f),
        "ntile" => (0, sqlstate::INVALID_ARGUMENT_FOR_NTILE),
        "nth_value" => (1, sqlstate::INVALID_ARGUMENT_FOR_NTH_VALUE),
        _ => return Ok(()),
    };
    let count = match super::function_args(f).get(position) {
        Some(Expr::Value(v)) => match &v.value {
            Value::Number(n, _) => n.parse::<f64>().ok(),
            _ => None,
        },
        Some(Expr::UnaryOp { op: datafusion::sql::sqlparser::ast::UnaryOperator::Minus, expr }) => match expr.as_ref() {
            Expr::Value(v) => match &v.value {
                Value::Number(n, _) => n.parse::<f64>().ok().map(|n| -n),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    };
    match count {
        Some(n) if n < 1.0 => Err(eddy_common::user_err!(code, "argument of {name} must be greater than zero")),
        _ => Ok(()),
    }
}

/// True for an expression that is an interval by its syntax (`INTERVAL '1 day'`, `'1 day'::interval`).
pub(super) fn is_interval_expr(e: &Expr) -> bool {
    match e {
        Expr::Interval(_) => true,
        Expr::Cast { data_type: SqlType::Interval { .. }, .. } => true,
        Expr::TypedString(ts) => matches!(ts.data_type, SqlType::Interval { .. }),
        Expr::Nested(inner) => is_interval_expr(inner),
        Expr::UnaryOp { expr, .. } => is_interval_expr(expr),
        // Arithmetic on intervals (`INTERVAL '1' DAY * 365 * 2000`), before or after its rewrite.
        Expr::BinaryOp { op: BinaryOperator::Multiply, left, right } => is_interval_expr(left) || is_interval_expr(right),
        Expr::BinaryOp { op: BinaryOperator::Divide, left, .. } => is_interval_expr(left),
        Expr::BinaryOp { op: BinaryOperator::Plus | BinaryOperator::Minus, left, right } => is_interval_expr(left) && is_interval_expr(right),
        Expr::Function(f) => matches!(f.name.to_string().as_str(), "eddy_interval_mul" | "eddy_interval_div"),
        _ => false,
    }
}

/// A scalar subquery (or `x IN (subquery)`) returns one column: PostgreSQL's 42601 for one of
/// none (`(SELECT FROM t)`), which DataFusion met with a panic.
pub(super) fn check_subquery_width(e: &Expr) -> eddy_common::Result<()> {
    use datafusion::sql::sqlparser::ast::SetExpr;
    let (query, message) = match e {
        Expr::Subquery(q) => (q, "subquery must return only one column"),
        Expr::InSubquery { subquery, .. } => (subquery, "subquery has too few columns"),
        _ => return Ok(()),
    };
    match query.body.as_ref() {
        SetExpr::Select(s) if s.projection.is_empty() => Err(eddy_common::user_err!(eddy_common::error::sqlstate::SYNTAX_ERROR, "{message}")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn similar_to_patterns_become_anchored_regexes() {
        assert_eq!(super::similar_regex("a%"), "^(?:a.*)$");
        assert_eq!(super::similar_regex("(a|b)_"), "^(?:(a|b).)$");
        assert_eq!(super::similar_regex("a.b\\%[x-z]*"), "^(?:a\\.b\\%[x-z]*)$");
    }

    #[test]
    fn postgres_replacements_become_regex_crate_ones() {
        assert_eq!(super::pg_replacement("\\2 \\1 \\& \\\\ \\x"), "${2} ${1} ${0} \\ \\x");
        assert_eq!(super::pg_replacement("$1 costs $"), "$$1 costs $$");
    }
}
