//! PostgreSQL's date input forms besides ISO `YYYY-MM-DD`, which Arrow's cast reads alone:
//! month names (`Jan 5 2024`, `January 5, 2024`, `5 Jan 2024`, `2024-Jan-05`, `05-Jan-2024`),
//! `YYYY/MM/DD`, `MM/DD/YYYY` (PostgreSQL's default `DateStyle` is `ISO, MDY`), `YYYYMMDD`,
//! and `epoch`, written as the ISO text they name. Casts of text to `date` and `timestamp`
//! (queries, views, INSERT, COPY, text parameters) read them through this.

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
pub fn iso_date_text(text: &str, date_only: bool) -> Option<String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("epoch") {
        return Some(if date_only { "1970-01-01" } else { "1970-01-01 00:00:00" }.to_string());
    }
    let bytes = t.as_bytes();
    if bytes.len() >= 5 && bytes[..4].iter().all(u8::is_ascii_digit) && bytes[4] == b'-' && bytes.get(5).is_some_and(u8::is_ascii_digit) {
        // ISO already; a date is read from ISO text with a time of day too (`2024-01-05
        // 10:30`), which the cast to a date refuses. Not with an era, which is not read.
        let date = t.split([' ', 'T']).next().unwrap_or(t);
        let dated = date.len() < t.len() && date.chars().all(|c| c.is_ascii_digit() || c == '-') && !t.to_ascii_uppercase().contains("BC");
        return (date_only && dated).then(|| date.to_string());
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

/// `text` without the time zone after its time of day (`+02`, `-05:30`, `Z`, `UTC`,
/// `Europe/Berlin`), if it has one: PostgreSQL's `timestamp` (without time zone) ignores a
/// zone in its input, where Arrow's cast moved the time to UTC (`'2024-01-05 10:30+02'` was
/// 08:30). `None` when there is no zone to drop.
pub fn without_zone(text: &str) -> Option<String> {
    let t = text.trim();
    let colon = t.find(':')?;
    // The time of day: from its first digit before the colon to its last digit, colon or dot.
    let start = t[..colon].rfind(|c: char| !c.is_ascii_digit()).map_or(0, |i| i + 1);
    let end = t[start..].find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.')).map_or(t.len(), |i| start + i);
    let zone = t[end..].trim();
    if zone.is_empty() {
        return None;
    }
    let upper = zone.to_ascii_uppercase();
    let offset = (zone.starts_with('+') || zone.starts_with('-')) && zone[1..].chars().next().is_some_and(|c| c.is_ascii_digit()) && zone[1..].chars().all(|c| c.is_ascii_digit() || c == ':');
    let named = matches!(upper.as_str(), "Z" | "UTC" | "GMT") || (zone.contains('/') && zone.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+')));
    (offset || named).then(|| t[..end].to_string())
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
        assert_eq!(iso_date_text("2024-01-05 10:30", true).as_deref(), Some("2024-01-05"));
        assert_eq!(iso_date_text("2024-01-05T10:30:00+02", true).as_deref(), Some("2024-01-05"));
        assert_eq!(iso_date_text("2024-01-05 10:30", false), None);
        assert_eq!(iso_date_text("2024-01-05 BC", true), None);
        use super::without_zone;
        assert_eq!(without_zone("2024-01-05 10:30:15+02").as_deref(), Some("2024-01-05 10:30:15"));
        assert_eq!(without_zone("2024-01-05T10:30:15.5-05:30").as_deref(), Some("2024-01-05T10:30:15.5"));
        assert_eq!(without_zone("2024-01-05 10:30:15 America/New_York").as_deref(), Some("2024-01-05 10:30:15"));
        assert_eq!(without_zone("2024-01-05 10:30Z").as_deref(), Some("2024-01-05 10:30"));
        assert_eq!(without_zone("2024-01-05 10:30:15"), None);
        assert_eq!(without_zone("2024-01-05 10:30 PM"), None);
        assert_eq!(without_zone("2024-01-05"), None);
    }
}
