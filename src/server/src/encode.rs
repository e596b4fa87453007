//! Arrow values ↔ PostgreSQL wire values, in text and binary format, for every type Eddy
//! reports. Text output follows PostgreSQL's own output functions (`t`/`f`, shortest floats
//! with exponents past 1e15, ISO timestamps, `1 year 2 mons 3 days 04:05:06` intervals, `\x`
//! bytea) so clients and test expectations see what PostgreSQL would print.

use std::fmt::Write;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::*;
use bytes::{BufMut, BytesMut};
use datafusion::scalar::ScalarValue;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, ColumnType, EddyError, Result};
use pgwire::api::Type;

pub use eddy_common::text_out::{write_float, write_interval, write_text};
use eddy_common::text_out::{interval_parts, time_micros, timestamp_micros};

/// Microseconds between 1970-01-01 and 2000-01-01 (PostgreSQL's binary epoch).
const PG_EPOCH_US: i64 = 946_684_800_000_000;
/// Days between 1970-01-01 and 2000-01-01.
const PG_EPOCH_DAYS: i32 = 10_957;

/// The PostgreSQL type a result column is reported as.
pub fn pg_type_of(field: &Field) -> Type {
    // Catalog columns whose Arrow type is shared with int4/text name their PostgreSQL type.
    match field.metadata().get(eddy_common::types::JSONB_METADATA_KEY).map(String::as_str) {
        Some("oid") => return Type::OID,
        Some("name") => return Type::NAME,
        Some("char") => return Type::CHAR,
        Some("regproc") => return Type::REGPROC,
        Some("uuid") => return Type::UUID,
        Some(tag) => {
            if let Some((oid, name)) = eddy_sql::planner::enums::parse_enum_tag(tag) {
                return Type::new(name.to_string(), oid, postgres_types::Kind::Simple, "public".to_string());
            }
        }
        _ => {}
    }
    // One-dimensional arrays (catalog columns, array_agg) as PostgreSQL's array types, so
    // drivers decode `{a,b}` into a list.
    if let DataType::List(elem) | DataType::LargeList(elem) = field.data_type() {
        return match elem.data_type() {
            DataType::UInt32 => Type::OID_ARRAY,
            DataType::Date32 | DataType::Date64 => Type::DATE_ARRAY,
            DataType::Time64(_) | DataType::Time32(_) => Type::TIME_ARRAY,
            DataType::Timestamp(_, None) => Type::TIMESTAMP_ARRAY,
            DataType::Timestamp(_, Some(_)) => Type::TIMESTAMPTZ_ARRAY,
            DataType::Interval(_) => Type::INTERVAL_ARRAY,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => Type::BYTEA_ARRAY,
            DataType::Boolean => Type::BOOL_ARRAY,
            DataType::Int8 | DataType::Int16 => Type::INT2_ARRAY,
            DataType::Int32 => Type::INT4_ARRAY,
            DataType::Int64 => Type::INT8_ARRAY,
            DataType::Float32 => Type::FLOAT4_ARRAY,
            DataType::Float64 => Type::FLOAT8_ARRAY,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Type::TEXT_ARRAY,
            DataType::Decimal128(_, _) | DataType::Decimal256(_, _) => Type::NUMERIC_ARRAY,
            _ => Type::TEXT,
        };
    }
    if field.data_type() == &DataType::UInt32 {
        return Type::OID;
    }
    match ColumnType::from_arrow_field(field) {
        Some(ColumnType::Varchar(_)) => Type::TEXT,
        Some(t) => Type::from_oid(t.pg_oid()).unwrap_or(Type::TEXT),
        None => Type::TEXT,
    }
}


/// Writes value `row` of `array` in binary format for `ty`; `false` if it is NULL.
pub fn write_binary(array: &ArrayRef, row: usize, ty: &Type, field: &Field, out: &mut BytesMut) -> Result<bool> {
    if array.is_null(row) {
        return Ok(false);
    }
    match *ty {
        Type::BOOL => out.put_u8(u8::from(array.as_boolean().value(row))),
        Type::INT2 => out.put_i16(int_value(array, row)? as i16),
        Type::INT4 => out.put_i32(int_value(array, row)? as i32),
        Type::OID | Type::REGPROC if array.data_type().is_integer() => out.put_u32(int_value(array, row)? as u32),
        Type::INT8 => out.put_i64(int_value(array, row)?),
        Type::FLOAT4 => out.put_f32(float_value(array, row)? as f32),
        Type::FLOAT8 => out.put_f64(float_value(array, row)?),
        Type::DATE => {
            let d = match array.data_type() {
                DataType::Date64 => (array.as_primitive::<Date64Type>().value(row) / 86_400_000) as i32,
                _ => array.as_primitive::<Date32Type>().value(row),
            };
            out.put_i32(d - PG_EPOCH_DAYS)
        }
        Type::TIME => out.put_i64(time_micros(array, row)),
        Type::TIMESTAMP | Type::TIMESTAMPTZ => out.put_i64(timestamp_micros(array, row) - PG_EPOCH_US),
        Type::INTERVAL => {
            let (m, d, us) = interval_parts(array, row);
            out.put_i64(us);
            out.put_i32(d);
            out.put_i32(m);
        }
        Type::NUMERIC => {
            let mut s = String::new();
            write_text(array, row, field, &mut s)?;
            write_numeric_binary(&s, out)?;
        }
        Type::BYTEA => match array.data_type() {
            DataType::Binary => out.put_slice(array.as_binary::<i32>().value(row)),
            DataType::LargeBinary => out.put_slice(array.as_binary::<i64>().value(row)),
            DataType::BinaryView => out.put_slice(array.as_binary_view().value(row)),
            _ => out.put_slice(array.as_fixed_size_binary().value(row)),
        },
        _ if array_element(ty).is_some() && matches!(array.data_type(), DataType::List(_) | DataType::LargeList(_)) => {
            let Some(elem) = array_element(ty) else { return Ok(true) };
            write_array_binary(array, row, &elem, out)?
        }
        // The 16 bytes of the canonical text's 32 hex digits.
        Type::UUID => {
            let mut s = String::new();
            write_text(array, row, field, &mut s)?;
            out.put_slice(&eddy_common::text::uuid_bytes(&s).ok_or_else(|| eddy_common::internal_err!("uuid column holds {s:?}"))?);
        }
        Type::JSONB => {
            out.put_u8(1);
            let mut s = String::new();
            write_text(array, row, field, &mut s)?;
            out.put_slice(s.as_bytes());
        }
        _ => {
            let mut s = String::new();
            write_text(array, row, field, &mut s)?;
            out.put_slice(s.as_bytes());
        }
    }
    Ok(true)
}

fn int_value(array: &ArrayRef, row: usize) -> Result<i64> {
    Ok(match array.data_type() {
        DataType::Int8 => i64::from(array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => i64::from(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => i64::from(array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => array.as_primitive::<Int64Type>().value(row),
        DataType::UInt8 => i64::from(array.as_primitive::<UInt8Type>().value(row)),
        DataType::UInt16 => i64::from(array.as_primitive::<UInt16Type>().value(row)),
        DataType::UInt32 => i64::from(array.as_primitive::<UInt32Type>().value(row)),
        DataType::UInt64 => i64::try_from(array.as_primitive::<UInt64Type>().value(row))
            .map_err(|_| eddy_common::user_err!(eddy_common::error::sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "bigint out of range"))?,
        other => return Err(EddyError::internal(format!("no integer encoding for {other}"))),
    })
}

fn float_value(array: &ArrayRef, row: usize) -> Result<f64> {
    Ok(match array.data_type() {
        DataType::Float16 => f64::from(array.as_primitive::<Float16Type>().value(row).to_f32()),
        DataType::Float32 => f64::from(array.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => array.as_primitive::<Float64Type>().value(row),
        other => return Err(EddyError::internal(format!("no float encoding for {other}"))),
    })
}















/// The elements of a one-dimensional array in PostgreSQL's binary format (see
/// [`write_array_binary`]), each `None` for NULL.
fn read_array_binary(b: &[u8]) -> Result<Vec<Option<&[u8]>>> {
    let bad = || user_err!(sqlstate::INVALID_BINARY_REPRESENTATION, "invalid binary array parameter");
    let i32_at = |at: usize| -> Result<i32> {
        Ok(i32::from_be_bytes(b.get(at..at + 4).ok_or_else(bad)?.try_into().map_err(|_| bad())?))
    };
    let ndim = i32_at(0)?;
    if ndim == 0 {
        return Ok(vec![]);
    }
    if ndim != 1 {
        return Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "multidimensional array parameters are not supported"));
    }
    let n = usize::try_from(i32_at(12)?).map_err(|_| bad())?;
    // Each element takes at least its 4-byte length: a count the value cannot hold is a lie.
    if n > b.len().saturating_sub(20) / 4 {
        return Err(bad());
    }
    let mut at = 20;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = i32_at(at)?;
        at += 4;
        if len < 0 {
            out.push(None);
            continue;
        }
        let len = len as usize;
        out.push(Some(b.get(at..at.saturating_add(len)).ok_or_else(bad)?));
        at += len;
    }
    Ok(out)
}

/// The element type of the array types [`pg_type_of`] reports.
fn array_element(ty: &Type) -> Option<Type> {
    Some(match *ty {
        Type::OID_ARRAY => Type::OID,
        Type::DATE_ARRAY => Type::DATE,
        Type::TIME_ARRAY => Type::TIME,
        Type::TIMESTAMP_ARRAY => Type::TIMESTAMP,
        Type::TIMESTAMPTZ_ARRAY => Type::TIMESTAMPTZ,
        Type::INTERVAL_ARRAY => Type::INTERVAL,
        Type::BYTEA_ARRAY => Type::BYTEA,
        Type::VARCHAR_ARRAY => Type::VARCHAR,
        Type::NAME_ARRAY => Type::NAME,
        Type::BOOL_ARRAY => Type::BOOL,
        Type::INT2_ARRAY => Type::INT2,
        Type::INT4_ARRAY => Type::INT4,
        Type::INT8_ARRAY => Type::INT8,
        Type::FLOAT4_ARRAY => Type::FLOAT4,
        Type::FLOAT8_ARRAY => Type::FLOAT8,
        Type::TEXT_ARRAY => Type::TEXT,
        Type::NUMERIC_ARRAY => Type::NUMERIC,
        _ => return None,
    })
}

/// Writes a one-dimensional array in PostgreSQL's binary array format: dimensions, a has-NULLs
/// flag, the element type OID, then (length, lower bound 1) and each element as a
/// length-prefixed binary value (-1 for NULL). An empty array has zero dimensions.
fn write_array_binary(array: &ArrayRef, row: usize, elem: &Type, out: &mut BytesMut) -> Result<()> {
    let values: ArrayRef = match array.data_type() {
        DataType::LargeList(_) => array.as_list::<i64>().value(row),
        _ => array.as_list::<i32>().value(row),
    };
    let field = Field::new("item", values.data_type().clone(), true);
    let n = values.len();
    out.put_i32(i32::from(n > 0));
    out.put_i32(i32::from(values.null_count() > 0));
    out.put_u32(elem.oid());
    if n > 0 {
        out.put_i32(n as i32);
        out.put_i32(1);
    }
    for i in 0..n {
        let len_at = out.len();
        out.put_i32(-1);
        if write_binary(&values, i, elem, &field, out)? {
            let len = (out.len() - len_at - 4) as i32;
            out[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
        }
    }
    Ok(())
}



/// Encodes a decimal string in PostgreSQL's binary `numeric` format.
fn write_numeric_binary(s: &str, out: &mut BytesMut) -> Result<()> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (int_part, frac_part) = s.split_once('.').unwrap_or((s, ""));
    let dscale = frac_part.len() as u16;
    let int_part = int_part.trim_start_matches('0');
    // Pad the integer part on the left and the fraction on the right to multiples of 4.
    let int_pad = (4 - int_part.len() % 4) % 4;
    let frac_pad = (4 - frac_part.len() % 4) % 4;
    let digits_str = format!("{}{}{}{}", "0".repeat(int_pad), int_part, frac_part, "0".repeat(frac_pad));
    let mut groups: Vec<i16> = digits_str
        .as_bytes()
        .chunks(4)
        // A decimal's text holds only ASCII digits besides the sign and point stripped above,
        // so neither conversion can fail.
        .map(|c| std::str::from_utf8(c).ok().and_then(|t| t.parse::<i16>().ok()).unwrap_or(0))
        .collect();
    let mut weight = ((int_part.len() + int_pad) / 4) as i16 - 1;
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    out.put_i16(groups.len() as i16);
    out.put_i16(weight);
    out.put_u16(if neg && !groups.is_empty() { 0x4000 } else { 0 });
    out.put_u16(dscale);
    for g in groups {
        out.put_i16(g);
    }
    Ok(())
}

fn read_numeric_binary(b: &[u8]) -> Result<String> {
    let bad = |what: &str| user_err!(sqlstate::INVALID_BINARY_REPRESENTATION, "invalid {what} in external \"numeric\" value");
    if b.len() < 8 {
        return Err(bad("length"));
    }
    let rd = |i: usize| i16::from_be_bytes([b[i], b[i + 1]]);
    // PostgreSQL's numeric_recv: a digit count, a base-10000 weight, a sign word, a display
    // scale, then the digits; every field is checked before it sizes anything.
    let ndigits = usize::try_from(rd(0)).map_err(|_| bad("length"))?;
    let weight = i32::from(rd(2));
    let sign = rd(4) as u16;
    let dscale = usize::try_from(rd(6)).ok().filter(|d| *d <= 0x3FFF).ok_or_else(|| bad("scale"))?;
    if b.len() != 8 + 2 * ndigits {
        return Err(bad("length"));
    }
    match sign {
        0x0000 | 0x4000 => {}
        0xC000 => return Ok("NaN".into()),
        0xD000 => return Ok("Infinity".into()),
        0xF000 => return Ok("-Infinity".into()),
        _ => return Err(bad("sign")),
    }
    if (0..ndigits).any(|i| !(0..10_000).contains(&rd(8 + 2 * i))) {
        return Err(bad("digit"));
    }
    let digits: Vec<i16> = (0..ndigits).map(|i| rd(8 + 2 * i)).collect();
    let mut int_part = String::new();
    for w in 0..=weight.max(-1) {
        let d = digits.get(w as usize).copied().unwrap_or(0);
        if int_part.is_empty() {
            if d != 0 {
                int_part = d.to_string();
            }
        } else {
            let _ = write!(int_part, "{d:04}"); // writing to a String cannot fail
        }
    }
    if int_part.is_empty() {
        int_part.push('0');
    }
    let mut frac = String::new();
    let mut idx = weight + 1;
    while (frac.len()) < dscale {
        let d = if idx < 0 { 0 } else { digits.get(idx as usize).copied().unwrap_or(0) };
        let _ = write!(frac, "{d:04}"); // writing to a String cannot fail
        idx += 1;
    }
    frac.truncate(dscale);
    let mut s = String::new();
    if sign == 0x4000 {
        s.push('-');
    }
    s.push_str(&int_part);
    if dscale > 0 {
        s.push('.');
        s.push_str(&frac);
    }
    Ok(s)
}

/// Decodes one bound parameter. `ty` is the type the client declared, or the type Eddy
/// inferred; text-format values are parsed by casting to `target`.
pub fn decode_param(bytes: Option<&[u8]>, binary: bool, ty: &Type, target: Option<&DataType>) -> Result<ScalarValue> {
    let Some(b) = bytes else {
        return Ok(match target {
            Some(t) => ScalarValue::try_from(t).unwrap_or(ScalarValue::Null),
            None => ScalarValue::Utf8(None),
        });
    };
    let bad = |what: &str| user_err!(sqlstate::INVALID_BINARY_REPRESENTATION, "incorrect binary data format for type {what}");
    let range = |what: &str| user_err!(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "{what} out of range");
    let value = if binary {
        let fixed = |n: usize| -> Result<&[u8]> { if b.len() == n { Ok(b) } else { Err(bad(ty.name())) } };
        match *ty {
            Type::BOOL => ScalarValue::Boolean(Some(fixed(1)?[0] != 0)),
            Type::INT2 => ScalarValue::Int16(Some(i16::from_be_bytes(fixed(2)?.try_into().map_err(|_| bad("int2"))?))),
            Type::INT4 => ScalarValue::Int32(Some(i32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad("int4"))?))),
            Type::INT8 => ScalarValue::Int64(Some(i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad("int8"))?))),
            Type::FLOAT4 => ScalarValue::Float32(Some(f32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad("float4"))?))),
            Type::FLOAT8 => ScalarValue::Float64(Some(f64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad("float8"))?))),
            Type::DATE => ScalarValue::Date32(Some(
                i32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad("date"))?).checked_add(PG_EPOCH_DAYS).ok_or_else(|| range("date"))?,
            )),
            Type::TIME => ScalarValue::Time64Microsecond(Some(i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad("time"))?))),
            Type::TIMESTAMP => ScalarValue::TimestampMicrosecond(
                Some(i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad("timestamp"))?).checked_add(PG_EPOCH_US).ok_or_else(|| range("timestamp"))?),
                None,
            ),
            Type::TIMESTAMPTZ => ScalarValue::TimestampMicrosecond(
                Some(i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad("timestamptz"))?).checked_add(PG_EPOCH_US).ok_or_else(|| range("timestamp"))?),
                Some(Arc::from(eddy_common::types::UTC)),
            ),
            Type::INTERVAL => {
                let b = fixed(16)?;
                let us = i64::from_be_bytes(b[0..8].try_into().map_err(|_| bad("interval"))?);
                let days = i32::from_be_bytes(b[8..12].try_into().map_err(|_| bad("interval"))?);
                let months = i32::from_be_bytes(b[12..16].try_into().map_err(|_| bad("interval"))?);
                let nanos = us.checked_mul(1_000).ok_or_else(|| range("interval"))?;
                ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(months, days, nanos)))
            }
            Type::OID | Type::REGPROC | Type::REGTYPE | Type::REGCLASS => {
                ScalarValue::Int64(Some(i64::from(u32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad("oid"))?))))
            }
            Type::NUMERIC => ScalarValue::Utf8(Some(read_numeric_binary(b)?)),
            Type::BYTEA => ScalarValue::Binary(Some(b.to_vec())),
            _ if array_element(ty).is_some() => {
                let elem = array_element(ty).unwrap_or(Type::TEXT);
                let elem_type = match target {
                    Some(DataType::List(f) | DataType::LargeList(f)) => f.data_type().clone(),
                    _ if elem == Type::OID => DataType::UInt32,
                    _ => ColumnType::from_pg_oid(elem.oid()).map(|c| c.to_arrow()).unwrap_or(DataType::Utf8),
                };
                let items = read_array_binary(b)?
                    .into_iter()
                    .map(|item| decode_param(item, true, &elem, Some(&elem_type)))
                    .collect::<Result<Vec<_>>>()?;
                let values = if items.is_empty() {
                    arrow::array::new_empty_array(&elem_type)
                } else {
                    ScalarValue::iter_to_array(items)?
                };
                let field = Arc::new(Field::new_list_field(elem_type, true));
                let offsets = arrow::buffer::OffsetBuffer::from_lengths([values.len()]);
                ScalarValue::List(Arc::new(arrow::array::ListArray::try_new(field, offsets, values, None)?))
            }
            Type::UUID => {
                let bytes: &[u8; 16] = b.try_into().map_err(|_| bad("uuid"))?;
                ScalarValue::Utf8(Some(eddy_common::text::uuid_text(bytes)))
            }
            Type::JSONB => {
                let body = b.strip_prefix(&[1u8]).ok_or_else(|| bad("jsonb"))?;
                ScalarValue::Utf8(Some(String::from_utf8(body.to_vec()).map_err(|_| bad("jsonb"))?))
            }
            _ => ScalarValue::Utf8(Some(
                String::from_utf8(b.to_vec()).map_err(|_| user_err!("22021", "invalid UTF-8 in parameter"))?,
            )),
        }
    } else {
        let text = String::from_utf8(b.to_vec()).map_err(|_| user_err!("22021", "invalid UTF-8 in parameter"))?;
        let target = target.cloned().or_else(|| ColumnType::from_pg_oid(ty.oid()).map(|c| c.to_arrow()));
        return match target {
            Some(t) if t != DataType::Utf8 => {
                let arr = eddy_common::text::cast_text(&arrow::array::StringArray::from(vec![text.as_str()]), &t)?;
                Ok(ScalarValue::try_from_array(&arr, 0)?)
            }
            _ => Ok(ScalarValue::Utf8(Some(text))),
        };
    };
    let target = match target {
        Some(t) => Some(t.clone()),
        None => ColumnType::from_pg_oid(ty.oid()).map(|c| c.to_arrow()),
    };
    match target {
        Some(t) if value.data_type() != t => value.cast_to(&t).map_err(|e| {
            user_err!(sqlstate::INVALID_TEXT_REPRESENTATION, "invalid input syntax for type {}: {e}", ty.name())
        }),
        _ => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::text_out::{format_decimal, trim_decimal};

    fn f8(v: f64) -> String {
        let mut s = String::new();
        write_float(v, 15, &mut s);
        s
    }

    #[test]
    fn floats_print_like_postgres() {
        assert_eq!(f8(1.5), "1.5");
        assert_eq!(f8(0.1), "0.1");
        assert_eq!(f8(100.0), "100");
        assert_eq!(f8(1e20), "1e+20");
        assert_eq!(f8(1.5e-5), "1.5e-05");
        assert_eq!(f8(0.001), "0.001");
        assert_eq!(f8(-2.25), "-2.25");
        assert_eq!(f8(123456789012345.0), "123456789012345");
        assert_eq!(f8(1234567890123456.0), "1.234567890123456e+15");
    }

    #[test]
    fn intervals_print_like_postgres() {
        let mut s = String::new();
        write_interval(14, 3, 4 * 3_600_000_000 + 5 * 60_000_000 + 6_000_000, &mut s);
        assert_eq!(s, "1 year 2 mons 3 days 04:05:06");
        s.clear();
        write_interval(0, 0, 0, &mut s);
        assert_eq!(s, "00:00:00");
        s.clear();
        write_interval(0, -1, 0, &mut s);
        assert_eq!(s, "-1 days");
    }

    #[test]
    fn numeric_binary_round_trips() {
        for v in ["0", "1.5", "-123.4500", "10000", "0.0001", "12345678.9", "-0.5"] {
            let mut b = BytesMut::new();
            write_numeric_binary(v, &mut b).unwrap();
            let back = read_numeric_binary(&b).unwrap();
            assert_eq!(back.parse::<f64>().unwrap(), v.parse::<f64>().unwrap(), "{v} -> {back}");
            let scale = v.split_once('.').map(|(_, f)| f.len()).unwrap_or(0);
            assert_eq!(back.split_once('.').map(|(_, f)| f.len()).unwrap_or(0), scale, "{v} -> {back}");
        }
    }

    #[test]
    fn binary_parameters_that_do_not_decode_are_22p03_not_panics() {
        let cases: Vec<(Type, Vec<u8>)> = vec![
            (Type::NUMERIC, vec![0xff; 8]),
            (Type::NUMERIC, vec![0, 1, 0, 0, 0, 0, 0, 0]),
            (Type::NUMERIC, vec![0, 1, 0, 0, 0x12, 0x34, 0, 0, 0, 1]),
            (Type::NUMERIC, vec![0, 1, 0, 0, 0, 0, 0, 0, 0x7f, 0xff]),
            (Type::INT4, vec![1, 2, 3]),
            // A one-dimensional array claiming 2^31 - 1 elements.
            (Type::INT4_ARRAY, [1i32, 0, 23, i32::MAX, 1].iter().flat_map(|v| v.to_be_bytes()).collect()),
            (Type::INT4_ARRAY, [1i32, 0, 23, 2, 1, 4].iter().flat_map(|v| v.to_be_bytes()).collect()),
        ];
        for (ty, bytes) in cases {
            let e = decode_param(Some(&bytes), true, &ty, None).expect_err(&format!("{ty} {bytes:?}"));
            assert_eq!(e.sqlstate, "22P03", "{ty} {bytes:?}: {e:?}");
        }
        let e = decode_param(Some(&[0x7f; 16]), true, &Type::INTERVAL, None).expect_err("overflows");
        assert_eq!(e.sqlstate, "22003");
        let e = decode_param(Some(&i64::MAX.to_be_bytes()), true, &Type::TIMESTAMP, None).expect_err("overflows");
        assert_eq!(e.sqlstate, "22003");
    }

    #[test]
    fn decimals_format_with_their_scale() {
        assert_eq!(format_decimal(12345, 2), "123.45");
        assert_eq!(format_decimal(-5, 2), "-0.05");
        assert_eq!(trim_decimal("1.5000000000"), "1.5");
        assert_eq!(trim_decimal("2.0000000000"), "2");
    }
}
