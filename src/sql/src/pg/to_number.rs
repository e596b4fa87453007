//! PostgreSQL's `to_number(text, format)` and `decode(text, format)` (DataFusion has no
//! `to_number`, and its `decode` knows neither `escape` nor PostgreSQL's base64 line breaks).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder, StringBuilder};
use arrow::datatypes::DataType;
use datafusion::error::Result as DfResult;
use eddy_common::error::sqlstate;
use eddy_common::types::DEFAULT_NUMERIC;

use super::udf::user_error;

/// One element of a numeric format, as `to_number` reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Token {
    /// `9` or `0`: one input character, a digit if it is one.
    Digit,
    /// `D` or `.`: the decimal point, if the input has one here.
    Point,
    /// `G` or `,`: a group separator, if the input has one here.
    Group,
    /// `S`, `SG`, `PL`, `MI`: a sign, if the input has one here.
    Sign,
    /// `PR`: negative in angle brackets.
    Brackets,
    /// `L` or `$`: a currency symbol, if the input has one here.
    Currency,
    /// Anything else: skips one input character.
    Other,
}

/// The tokens of `format` (case-insensitive; `FM`, `TH`, `V` read nothing).
fn tokens(format: &str) -> DfResult<Vec<Token>> {
    let upper: Vec<char> = format.to_uppercase().chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < upper.len() {
        let two: String = upper[i..(i + 2).min(upper.len())].iter().collect();
        let (token, width) = match (upper[i], two.as_str()) {
            (_, "FM" | "TH") => (None, 2),
            (_, "SG" | "PL" | "MI") => (Some(Token::Sign), 2),
            (_, "PR") => (Some(Token::Brackets), 2),
            (_, "EE") => {
                return Err(user_error(sqlstate::FEATURE_NOT_SUPPORTED, "\"EEEE\" not supported for input".into()));
            }
            ('9' | '0', _) => (Some(Token::Digit), 1),
            ('D' | '.', _) => (Some(Token::Point), 1),
            ('G' | ',', _) => (Some(Token::Group), 1),
            ('S', _) => (Some(Token::Sign), 1),
            ('L' | '$', _) => (Some(Token::Currency), 1),
            ('V' | 'B', _) => (None, 1),
            _ => (Some(Token::Other), 1),
        };
        out.extend(token);
        i += width;
    }
    Ok(out)
}

/// The number `input` holds under `format`, as numeric text (`-12454.8`), or the error
/// PostgreSQL gives when it holds no digit.
fn read_number(input: &str, format: &[Token]) -> DfResult<String> {
    let chars: Vec<char> = input.chars().collect();
    let explicit_sign = format.iter().any(|t| matches!(t, Token::Sign | Token::Brackets));
    let brackets = format.contains(&Token::Brackets);
    let (mut i, mut negative, mut fraction, mut seen_digit) = (0, false, false, false);
    let (mut whole, mut frac) = (String::new(), String::new());
    for &token in format {
        let Some(&c) = chars.get(i) else { break };
        match token {
            Token::Digit => {
                // A leading sign without a sign in the format (`to_number('-12', '99')`), or
                // the `<` of `PR`, before the first digit.
                let mut c = c;
                let leading_sign = !explicit_sign && (c == '-' || c == '+');
                if !seen_digit && (leading_sign || (c == '<' && brackets)) {
                    negative = c != '+';
                    i += 1;
                    let Some(&next) = chars.get(i) else { break };
                    c = next;
                }
                if c.is_ascii_digit() {
                    (if fraction { &mut frac } else { &mut whole }).push(c);
                    seen_digit = true;
                }
                i += 1;
            }
            Token::Point if c == '.' => {
                fraction = true;
                i += 1;
            }
            Token::Point => fraction = true,
            Token::Group | Token::Currency if !c.is_ascii_digit() => i += 1,
            Token::Sign if c == '-' || c == '+' => {
                negative = c == '-';
                i += 1;
            }
            Token::Sign if c == ' ' => i += 1,
            Token::Brackets if c == '<' => {
                negative = true;
                i += 1;
            }
            Token::Other => i += 1,
            _ => {}
        }
    }
    if !seen_digit {
        return Err(user_error(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type numeric: \" \"".into()));
    }
    let whole = if whole.is_empty() { "0".to_string() } else { whole };
    let sign = if negative { "-" } else { "" };
    Ok(if frac.is_empty() { format!("{sign}{whole}") } else { format!("{sign}{whole}.{frac}") })
}

/// `to_number(text, format)`: a numeric.
pub fn to_number(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    let (text, format) = (arrow::compute::cast(&a[0], &DataType::Utf8)?, arrow::compute::cast(&a[1], &DataType::Utf8)?);
    let (text, format) = (text.as_string::<i32>(), format.as_string::<i32>());
    let mut out = StringBuilder::with_capacity(n, n * 8);
    for i in 0..n {
        if text.is_null(i) || format.is_null(i) {
            out.append_null();
            continue;
        }
        out.append_value(read_number(text.value(i), &tokens(format.value(i))?)?);
    }
    let numbers: ArrayRef = Arc::new(out.finish());
    Ok(arrow::compute::cast(&numbers, &DataType::Decimal128(DEFAULT_NUMERIC.0, DEFAULT_NUMERIC.1))?)
}

/// `decode(text, format)` with PostgreSQL's formats: `base64` (whitespace ignored), `hex`,
/// `escape`.
pub fn decode(a: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    use base64::Engine;
    let bytea = |t: &str| eddy_common::text::parse_bytea(t).map_err(|e| user_error(e.sqlstate, e.message));
    let (text, format) = (arrow::compute::cast(&a[0], &DataType::Utf8)?, arrow::compute::cast(&a[1], &DataType::Utf8)?);
    let (text, format) = (text.as_string::<i32>(), format.as_string::<i32>());
    let mut out = BinaryBuilder::with_capacity(n, n * 8);
    for i in 0..n {
        if text.is_null(i) || format.is_null(i) {
            out.append_null();
            continue;
        }
        let t = text.value(i);
        let bytes = match format.value(i).to_ascii_lowercase().as_str() {
            "base64" => {
                let flat: String = t.chars().filter(|c| !c.is_ascii_whitespace()).collect();
                base64::engine::general_purpose::STANDARD
                    .decode(flat)
                    .map_err(|_| user_error(sqlstate::INVALID_PARAMETER_VALUE, "invalid base64 sequence".into()))?
            }
            // The bytea input's hex and escape forms (`\x` starts only the hex one).
            "hex" => bytea(&format!("\\x{t}"))?,
            "escape" if t.starts_with("\\x") || t.starts_with("\\X") => {
                return Err(user_error(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type bytea".into()));
            }
            "escape" => bytea(t)?,
            other => return Err(user_error(sqlstate::INVALID_PARAMETER_VALUE, format!("unrecognized encoding: \"{other}\""))),
        };
        out.append_value(bytes);
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(text: &str, format: &str) -> String {
        read_number(text, &tokens(format).unwrap()).unwrap()
    }

    #[test]
    fn to_number_reads_as_postgresql() {
        assert_eq!(number("12,454.8-", "99G999D9S"), "-12454.8");
        assert_eq!(number("12345", "99"), "12");
        assert_eq!(number("-12", "99"), "-12");
        assert_eq!(number("$1,234.56", "L9,999.99"), "1234.56");
        assert_eq!(number("<123>", "999PR"), "-123");
        assert_eq!(number("123-", "999MI"), "-123");
        assert_eq!(number(" 1 2", "9999"), "12");
        assert_eq!(number("1a2", "999"), "12");
        assert_eq!(number("1234.567", "9999D9"), "1234.5");
        assert_eq!(number("-1234.567", "FM9999.999"), "-1234.567");
        assert_eq!(number("+5", "S9"), "5");
        assert!(read_number("abc", &tokens("999").unwrap()).is_err());
        assert!(tokens("9.9EEEE").is_err());
    }
}
