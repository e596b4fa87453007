//! Text → typed values with PostgreSQL's input syntax where it differs from Arrow's
//! (`bytea` as `\x` hex or escape format, intervals), Arrow's casts elsewhere. Used wherever
//! text enters as data: COPY, text-format parameters, literal casts.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, IntervalMonthDayNanoArray, StringArray};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, IntervalUnit};
use arrow::util::display::FormatOptions;

use crate::error::sqlstate;
use crate::interval::parse_interval;
use crate::{user_err, Result};

/// Parses PostgreSQL `bytea` input: `\x0aff` (hex) or the escape format (`\\`, `\123`).
pub fn parse_bytea(s: &str) -> Result<Vec<u8>> {
    let bad = || user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type bytea");
    if let Some(hex) = s.strip_prefix("\\x").or_else(|| s.strip_prefix("\\X")) {
        let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if digits.len() % 2 != 0 {
            return Err(user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid hexadecimal data: odd number of digits"));
        }
        return digits
            .chunks(2)
            .map(|p| {
                let h = (p[0] as char).to_digit(16).ok_or_else(|| {
                    user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid hexadecimal digit: \"{}\"", p[0] as char)
                })?;
                let l = (p[1] as char).to_digit(16).ok_or_else(|| {
                    user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid hexadecimal digit: \"{}\"", p[1] as char)
                })?;
                Ok((h * 16 + l) as u8)
            })
            .collect();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
        } else if b.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else if i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') as u32 * 64 + (b[i + 2] - b'0') as u32 * 8 + (b[i + 3] - b'0') as u32;
            out.push(u8::try_from(v).map_err(|_| bad())?);
            i += 4;
        } else {
            return Err(bad());
        }
    }
    Ok(out)
}

/// Casts text values to `target` using PostgreSQL input syntax.
pub fn cast_text(strings: &StringArray, target: &DataType) -> Result<ArrayRef> {
    match target {
        DataType::Binary => {
            let v: BinaryArray = strings
                .iter()
                .map(|s| s.map(parse_bytea).transpose())
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .collect();
            Ok(Arc::new(v))
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let v: IntervalMonthDayNanoArray =
                strings.iter().map(|s| s.map(parse_interval).transpose()).collect::<Result<Vec<_>>>()?.into_iter().collect();
            Ok(Arc::new(v))
        }
        DataType::Boolean => {
            let lowered: StringArray = strings.iter().map(|s| s.map(|v| v.trim().to_ascii_lowercase())).collect();
            Ok(cast_with_options(&lowered, target, &strict())?)
        }
        _ => {
            let out = cast_with_options(strings, target, &strict())?;
            if out.null_count() != strings.null_count() {
                return Err(user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type {target}"));
            }
            Ok(out)
        }
    }
}

fn strict() -> CastOptions<'static> {
    CastOptions { safe: false, format_options: FormatOptions::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytea_hex_and_escape_formats() {
        assert_eq!(parse_bytea("\\xdeadBEEF").unwrap(), vec![0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(parse_bytea("a\\\\b\\001").unwrap(), b"a\\b\x01".to_vec());
        assert!(parse_bytea("\\x0").is_err());
        assert!(parse_bytea("\\q").is_err());
    }
}
