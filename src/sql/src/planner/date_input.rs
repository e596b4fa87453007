//! PostgreSQL's date input forms besides ISO `YYYY-MM-DD`, which Arrow's cast reads alone:
//! month names (`Jan 5 2024`, `January 5, 2024`, `5 Jan 2024`, `2024-Jan-05`, `05-Jan-2024`),
//! `YYYY/MM/DD`, `MM/DD/YYYY` (PostgreSQL's default `DateStyle` is `ISO, MDY`), `YYYYMMDD`,
//! and `epoch`. Casts of text to `date` and `timestamp` read such text as the ISO form it
//! names (the time of day after it kept for timestamps); other text is left to the cast and
//! its errors.

use std::sync::Arc;

use arrow::array::{AsArray, StringArray};
use arrow::datatypes::DataType;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarUDF, Signature, Volatility};

const MONTHS: [&str; 12] = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];

/// The month a name or abbreviation of at least three letters names (`Sept` too).
fn month(word: &str) -> Option<u32> {
    let w = word.trim_end_matches('.').to_ascii_lowercase();
    if w.len() < 3 || !w.chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    MONTHS.iter().position(|m| m.starts_with(&w)).map(|i| i as u32 + 1)
}

fn number(field: &str) -> Option<u32> {
    (!field.is_empty() && field.len() <= 4 && field.chars().all(|c| c.is_ascii_digit())).then(|| field.parse().ok()).flatten()
}

/// `text` as `YYYY-MM-DD[ time]` if it is one of the forms of the module docs; `date_only`
/// drops a time of day after the date. `None` for anything else (ISO text among it).
pub(crate) fn iso_date_text(text: &str, date_only: bool) -> Option<String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("epoch") {
        return Some(if date_only { "1970-01-01" } else { "1970-01-01 00:00:00" }.to_string());
    }
    let bytes = t.as_bytes();
    if bytes.len() >= 5 && bytes[..4].iter().all(u8::is_ascii_digit) && bytes[4] == b'-' && bytes.get(5).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    // The date's words come before the time of day (the first word with a colon).
    let words: Vec<&str> = t.split_whitespace().collect();
    let split = words.iter().position(|w| w.contains(':')).unwrap_or(words.len());
    let (date, time) = words.split_at(split);
    let fields: Vec<&str> = date.iter().flat_map(|w| w.split([',', '-', '/', '.'])).filter(|f| !f.is_empty()).collect();
    let (y, m, d) = match fields.as_slice() {
        [one] if one.len() == 8 && one.chars().all(|c| c.is_ascii_digit()) => (one[..4].parse().ok()?, one[4..6].parse().ok()?, one[6..].parse().ok()?),
        [a, b, c] => {
            let named = [a, b, c].iter().position(|f| month(f).is_some());
            match named {
                Some(i) => {
                    let m = month(fields[i])?;
                    let rest: Vec<&str> = fields.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, f)| *f).collect();
                    let (p, q) = (rest[0], rest[1]);
                    let (pn, qn) = (number(p)?, number(q)?);
                    if p.len() == 4 || pn > 31 {
                        (pn, m, qn)
                    } else if q.len() == 4 || qn > 31 {
                        (qn, m, pn)
                    } else {
                        return None;
                    }
                }
                None if a.len() == 4 => (number(a)?, number(b)?, number(c)?),
                None if c.len() == 4 => (number(c)?, number(a)?, number(b)?),
                None => return None,
            }
        }
        _ => return None,
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut out = format!("{y:04}-{m:02}-{d:02}");
    if !date_only && !time.is_empty() {
        out.push(' ');
        out.push_str(&time.join(" "));
    }
    Some(out)
}

/// `eddy_date_input(text)`: [`iso_date_text`] of each value, else the value trimmed.
pub(crate) fn date_input_udf(date_only: bool) -> ScalarUDF {
    let body = move |args: &[ColumnarValue], rows: usize| -> DfResult<ColumnarValue> {
        let a = arrow::compute::cast(&args[0].to_array(rows)?, &DataType::Utf8)?;
        let out: StringArray = a.as_string::<i32>().iter().map(|v| v.map(|t| iso_date_text(t, date_only).unwrap_or_else(|| t.trim().to_string()))).collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    };
    let name = if date_only { "eddy_date_input" } else { "eddy_timestamp_input" };
    crate::planner::udf::closure_udf(name, Signature::any(1, Volatility::Immutable), DataType::Utf8, Arc::new(body))
}

#[cfg(test)]
mod tests {
    use super::iso_date_text;

    #[test]
    fn postgresql_date_forms_read_as_iso() {
        for (text, want) in [
            ("Jan 5 2024", Some("2024-01-05")),
            ("January 5, 2024", Some("2024-01-05")),
            ("5 Jan 2024", Some("2024-01-05")),
            ("Sept 30 2024", Some("2024-09-30")),
            ("2024-Jan-05", Some("2024-01-05")),
            ("05-jan-2024", Some("2024-01-05")),
            ("2020/06/01", Some("2020-06-01")),
            ("06/01/2020", Some("2020-06-01")),
            ("20200601", Some("2020-06-01")),
            (" epoch ", Some("1970-01-01")),
            ("2024-01-05", None),
            ("Jan 5 24", None),
            ("13/01/2020", None),
            ("hello", None),
        ] {
            assert_eq!(iso_date_text(text, true).as_deref(), want, "{text}");
        }
        assert_eq!(iso_date_text("Jan 5 2024 10:30:00", false).as_deref(), Some("2024-01-05 10:30:00"));
        assert_eq!(iso_date_text("Jan 5 2024 10:30:00", true).as_deref(), Some("2024-01-05"));
    }
}
