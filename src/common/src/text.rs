//! Text → typed values with PostgreSQL's input syntax where it differs from Arrow's
//! (`bytea` as `\x` hex or escape format, intervals), Arrow's casts elsewhere. Used wherever
//! text enters as data: COPY, text-format parameters, literal casts.

use std::sync::Arc;

use arrow::array::{new_empty_array, Array, ArrayRef, BinaryArray, IntervalMonthDayNanoArray, ListArray, StringArray};
use arrow::buffer::OffsetBuffer;
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field, IntervalUnit};
use arrow::util::display::FormatOptions;

use crate::error::sqlstate;
use crate::interval::parse_interval;
use crate::{user_err, Result};

/// Parses PostgreSQL `bytea` input: `\x0aff` (hex) or the escape format (`\\`, `\123`).
pub fn parse_bytea(s: &str) -> Result<Vec<u8>> {
    let bad = || user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type bytea");
    if let Some(hex) = s.strip_prefix("\\x").or_else(|| s.strip_prefix("\\X")) {
        let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if !digits.len().is_multiple_of(2) {
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

/// Parses a one-dimensional PostgreSQL array literal (`{1,2,NULL}`, `{"a b","c\\"d"}`) into
/// its elements' text (`None` for NULL).
pub fn parse_array_text(s: &str) -> Result<Vec<Option<String>>> {
    let bad = |why: &str| user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "malformed array literal: \"{s}\" ({why})");
    let t = s.trim();
    let body = t.strip_prefix('{').and_then(|b| b.strip_suffix('}')).ok_or_else(|| bad("array value must start with \"{\""))?;
    let mut out = Vec::new();
    if body.trim().is_empty() {
        return Ok(out);
    }
    let mut chars = body.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut item = String::new();
        let mut quoted = false;
        match chars.peek() {
            Some('"') => {
                quoted = true;
                chars.next();
                loop {
                    match chars.next() {
                        Some('\\') => item.push(chars.next().ok_or_else(|| bad("unexpected end of input"))?),
                        Some('"') => break,
                        Some(c) => item.push(c),
                        None => return Err(bad("unterminated quoted element")),
                    }
                }
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
            }
            Some('{') => return Err(bad("multidimensional arrays are not supported")),
            _ => {
                while let Some(&c) = chars.peek() {
                    if c == ',' {
                        break;
                    }
                    if c == '{' || c == '}' || c == '"' {
                        return Err(bad("unexpected character"));
                    }
                    if c == '\\' {
                        chars.next();
                        item.push(chars.next().ok_or_else(|| bad("unexpected end of input"))?);
                        continue;
                    }
                    item.push(c);
                    chars.next();
                }
                item = item.trim_end().to_string();
                if item.is_empty() {
                    return Err(bad("empty element"));
                }
            }
        }
        out.push(if !quoted && item.eq_ignore_ascii_case("null") { None } else { Some(item) });
        match chars.next() {
            Some(',') => continue,
            None => return Ok(out),
            Some(_) => return Err(bad("junk after element")),
        }
    }
}

/// A `uuid` in PostgreSQL's input forms (any case, optional braces, hyphens between groups of
/// four digits or none) as its canonical text: lower case, 8-4-4-4-12.
pub fn parse_uuid(s: &str) -> Result<String> {
    let bad = || user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type uuid: \"{s}\"");
    let t = s.trim();
    let t = t.strip_prefix('{').map_or(Ok(t), |inner| inner.strip_suffix('}').ok_or_else(bad))?;
    if t.starts_with('-') || t.ends_with('-') || t.split('-').any(|g| g.is_empty() || g.len() % 4 != 0) {
        return Err(bad());
    }
    let hex: String = t.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let h = hex.to_ascii_lowercase();
    Ok(format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..]))
}

/// A uuid's 16 bytes as its canonical text.
pub fn uuid_text(bytes: &[u8; 16]) -> String {
    let h: String = bytes.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// The 16 bytes of a uuid's canonical text (`None` if it is not canonical hex).
pub fn uuid_bytes(canonical: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = canonical.bytes().filter(|b| *b != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (o, pair) in out.iter_mut().zip(hex.chunks(2)) {
        *o = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// PostgreSQL timestamp text in a form Arrow parses: a time of day without seconds
/// (`2024-03-02 10:00`, `...T10:00+02`) gets `:00`; `infinity` spellings are refused clearly.
pub fn normalize_timestamp_text(s: &str) -> std::borrow::Cow<'_, str> {
    let t = s.trim();
    let b = t.as_bytes();
    // `YYYY-MM-DD[ T]H[H]:MM` followed by end, an offset, a zone or fraction-less suffix.
    let date_len = 10;
    if b.len() > date_len + 3 && b[4] == b'-' && b[7] == b'-' && (b[date_len] == b' ' || b[date_len] == b'T') {
        let rest = &t[date_len + 1..];
        let hour_len = rest.find(':').unwrap_or(0);
        if (1..=2).contains(&hour_len) && rest[..hour_len].bytes().all(|c| c.is_ascii_digit()) {
            let after_minutes = hour_len + 3;
            let minutes_ok = rest.len() >= after_minutes && rest[hour_len + 1..after_minutes].bytes().all(|c| c.is_ascii_digit());
            let no_seconds = rest.as_bytes().get(after_minutes).is_none_or(|c| *c != b':');
            if minutes_ok && no_seconds {
                let hour = if hour_len == 1 { format!("0{}", &rest[..1]) } else { rest[..2].to_string() };
                return format!("{} {hour}:{}:00{}", &t[..date_len], &rest[hour_len + 1..after_minutes], &rest[after_minutes..]).into();
            }
        }
    }
    std::borrow::Cow::Borrowed(s)
}

/// A numeric in exponent form (`1e3`, `-2.5E-2`, ` 12e+1 `) as plain decimal text (`1000`,
/// `-0.025`, `120`), which Arrow's decimal parser reads; `None` for any other text.
pub fn plain_decimal(text: &str) -> Option<String> {
    let t = text.trim();
    let (mantissa, exponent) = t.split_once(['e', 'E'])?;
    let exponent: i32 = exponent.strip_prefix('+').unwrap_or(exponent).parse().ok().filter(|e: &i32| e.abs() <= 1000)?;
    let (sign, digits) = match mantissa.as_bytes().first()? {
        b'-' => ("-", &mantissa[1..]),
        b'+' => ("", &mantissa[1..]),
        _ => ("", mantissa),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    // All digits, and where the point goes in them.
    let all = format!("{int}{frac}");
    let point = int.len() as i64 + i64::from(exponent);
    let (int, frac) = if point <= 0 {
        (String::from("0"), format!("{}{all}", "0".repeat(point.unsigned_abs() as usize)))
    } else if point as usize >= all.len() {
        (format!("{all}{}", "0".repeat(point as usize - all.len())), String::new())
    } else {
        (all[..point as usize].to_string(), all[point as usize..].to_string())
    };
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    Some(if frac.is_empty() { format!("{sign}{int}") } else { format!("{sign}{int}.{frac}") })
}

/// Casts text values to `target` using PostgreSQL input syntax.
pub fn cast_text(strings: &StringArray, target: &DataType) -> Result<ArrayRef> {
    match target {
        DataType::Timestamp(_, zone) => {
            let naive = zone.is_none();
            let iso = |v: &str| {
                let v = crate::date_text::iso_date_text(v, false).unwrap_or_else(|| v.to_string());
                let v = if naive { crate::date_text::without_zone(&v).unwrap_or(v) } else { v };
                normalize_timestamp_text(&v).into_owned()
            };
            let normalized: StringArray = strings.iter().map(|s| s.map(iso)).collect();
            let out = cast_with_options(&normalized, target, &strict())?;
            Ok(out)
        }
        DataType::List(elem) => {
            let mut offsets = vec![0i32];
            let mut items: Vec<Option<String>> = Vec::new();
            let mut valid = Vec::with_capacity(strings.len());
            for s in strings.iter() {
                if let Some(s) = s {
                    items.extend(parse_array_text(s)?);
                }
                valid.push(s.is_some());
                offsets.push(items.len() as i32);
            }
            let values = if items.is_empty() {
                new_empty_array(elem.data_type())
            } else {
                cast_text(&items.into_iter().collect::<StringArray>(), elem.data_type())?
            };
            let field = Arc::new(Field::new(elem.name(), elem.data_type().clone(), true));
            Ok(Arc::new(ListArray::try_new(field, OffsetBuffer::new(offsets.into()), values, Some(valid.into()))?))
        }
        DataType::Date32 if strings.iter().flatten().any(|v| crate::date_text::iso_date_text(v, true).is_some()) => {
            let normalized: StringArray = strings.iter().map(|s| s.map(|v| crate::date_text::iso_date_text(v, true).unwrap_or_else(|| v.to_string()))).collect();
            Ok(cast_with_options(&normalized, target, &strict())?)
        }
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
        DataType::Decimal128(_, _) | DataType::Decimal256(_, _) if strings.iter().flatten().any(|v| plain_decimal(v).is_some()) => {
            let plain: StringArray = strings.iter().map(|s| s.map(|v| plain_decimal(v).unwrap_or_else(|| v.to_string()))).collect();
            cast_text(&plain, target)
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
    fn numerics_in_exponent_form_are_plain_decimals() {
        for (text, plain) in [("1e3", "1000"), ("-2.5E-2", "-0.025"), (" 12e+1 ", "120"), ("1.5e0", "1.5"), (".5e1", "5"), ("123.45e-5", "0.0012345"), ("0e5", "0")] {
            assert_eq!(plain_decimal(text).as_deref(), Some(plain), "{text}");
        }
        for text in ["1.5", "e3", "1e", "1e3.5", "abc", "1x3e2", "1e99999"] {
            assert_eq!(plain_decimal(text), None, "{text}");
        }
    }

    #[test]
    fn uuids_are_read_in_postgres_input_forms() {
        let canonical = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        for text in [canonical, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}", "a0eebc999c0b4ef8bb6d6bb9bd380a11", "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11"] {
            assert_eq!(parse_uuid(text).unwrap(), canonical, "{text}");
        }
        let bytes = uuid_bytes(canonical).unwrap();
        assert_eq!((bytes[0], bytes[15]), (0xa0, 0x11));
        assert_eq!(uuid_text(&bytes), canonical);
        for bad in ["", "a0eebc99", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g", "-a0eebc999c0b4ef8bb6d6bb9bd380a11", "a0eeb-c999c0b4ef8bb6d6bb9bd380a11", "{a0eebc999c0b4ef8bb6d6bb9bd380a11"] {
            assert!(parse_uuid(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn array_literals_parse_as_postgresql_does() {
        let some = |v: &[&str]| v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>();
        assert_eq!(parse_array_text("{1, 2 ,3}").unwrap(), some(&["1", "2", "3"]));
        assert_eq!(parse_array_text("{}").unwrap(), vec![]);
        assert_eq!(parse_array_text(r#"{"a b",NULL,"NULL","x\"y",c\,d}"#).unwrap(), vec![
            Some("a b".into()),
            None,
            Some("NULL".into()),
            Some("x\"y".into()),
            Some("c,d".into())
        ]);
        assert!(parse_array_text("1,2").is_err());
        assert!(parse_array_text("{{1},{2}}").is_err());
        assert!(parse_array_text("{1,,2}").is_err());
        let cast = cast_text(&StringArray::from(vec![Some("{1,NULL}"), None, Some("{}")]), &DataType::new_list(DataType::Int32, true)).unwrap();
        let list = cast.as_any().downcast_ref::<ListArray>().unwrap();
        assert_eq!(list.len(), 3);
        assert!(list.is_null(1) && list.value(2).is_empty());
        assert_eq!(list.value(0).as_any().downcast_ref::<arrow::array::Int32Array>().unwrap().iter().collect::<Vec<_>>(), vec![Some(1), None]);
    }

    #[test]
    fn timestamps_without_seconds_get_them() {
        assert_eq!(normalize_timestamp_text("2024-03-02 10:00"), "2024-03-02 10:00:00");
        assert_eq!(normalize_timestamp_text("2024-03-02T9:05+02"), "2024-03-02 09:05:00+02");
        assert_eq!(normalize_timestamp_text("2024-03-02 10:00:01"), "2024-03-02 10:00:01");
        assert_eq!(normalize_timestamp_text("2024-03-02"), "2024-03-02");
        let ts = DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None);
        let out = cast_text(&StringArray::from(vec!["2024-03-02 10:00", "2024-03-02"]), &ts).unwrap();
        assert_eq!(out.len(), 2);
        assert!(cast_text(&StringArray::from(vec!["2024-13-02"]), &ts).is_err());
    }

    #[test]
    fn bytea_hex_and_escape_formats() {
        assert_eq!(parse_bytea("\\xdeadBEEF").unwrap(), vec![0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(parse_bytea("a\\\\b\\001").unwrap(), b"a\\b\x01".to_vec());
        assert!(parse_bytea("\\x0").is_err());
        assert!(parse_bytea("\\q").is_err());
    }
}
