//! PostgreSQL date/time templates (`to_char(ts, 'YYYY-MM-DD HH24:MI:SS')`) as strftime patterns.

/// Translates a PostgreSQL date/time template (`YYYY-MM-DD HH24:MI:SS`, `FMMonth DD, YYYY`,
/// `"text"`) into a strftime pattern. Unknown letters are copied as text, as PostgreSQL does.
pub fn pg_datetime_pattern(pg: &str) -> String {
    const CODES: &[(&str, &str, &str)] = &[
        // (PostgreSQL, strftime, strftime without padding for FM)
        ("HH24", "%H", "%-H"),
        ("HH12", "%I", "%-I"),
        ("YYYY", "%Y", "%Y"),
        ("IYYY", "%G", "%G"),
        ("Month", "%B", "%B"),
        ("MONTH", "%B", "%B"),
        ("month", "%B", "%B"),
        ("Day", "%A", "%A"),
        ("DAY", "%A", "%A"),
        ("day", "%A", "%A"),
        ("DDD", "%j", "%-j"),
        ("Mon", "%b", "%b"),
        ("MON", "%b", "%b"),
        ("mon", "%b", "%b"),
        ("Dy", "%a", "%a"),
        ("DY", "%a", "%a"),
        ("dy", "%a", "%a"),
        ("YY", "%y", "%y"),
        ("MM", "%m", "%-m"),
        ("DD", "%d", "%-d"),
        ("HH", "%I", "%-I"),
        ("MI", "%M", "%-M"),
        ("SS", "%S", "%-S"),
        ("MS", "%3f", "%3f"),
        ("US", "%6f", "%6f"),
        ("AM", "%p", "%p"),
        ("PM", "%p", "%p"),
        ("am", "%P", "%P"),
        ("pm", "%P", "%P"),
        ("IW", "%V", "%-V"),
        ("TZ", "%Z", "%Z"),
        ("tz", "%Z", "%Z"),
        ("OF", "%:z", "%:z"),
    ];
    let mut out = String::new();
    let mut rest = pg;
    let mut fill_mode = false;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("FM") {
            fill_mode = true;
            rest = r;
            continue;
        }
        if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').unwrap_or(r.len());
            out.push_str(&r[..end].replace('%', "%%"));
            rest = r.get(end + 1..).unwrap_or("");
            continue;
        }
        if let Some((code, padded, unpadded)) = CODES.iter().find(|(c, _, _)| rest.starts_with(c)) {
            out.push_str(if fill_mode { unpadded } else { padded });
            rest = &rest[code.len()..];
            fill_mode = false;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c == '%' {
            out.push_str("%%");
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    // A 12-hour field without an AM/PM marker reads the hour as written (PostgreSQL takes it
    // as AM); chrono cannot resolve `%I` without `%p` and dropped the time.
    if !out.contains("%p") && !out.contains("%P") {
        out = out.replace("%-I", "%-H").replace("%I", "%H");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn postgres_templates_become_strftime() {
        assert_eq!(super::pg_datetime_pattern("YYYY-MM-DD HH24:MI:SS"), "%Y-%m-%d %H:%M:%S");
        assert_eq!(super::pg_datetime_pattern("FMMonth FMDD, YYYY"), "%B %-d, %Y");
        assert_eq!(super::pg_datetime_pattern("\"at\" HH12 AM 100%"), "at %I %p 100%%");
        assert_eq!(super::pg_datetime_pattern("Dy DD Mon YY.MS"), "%a %d %b %y.%3f");
    }
}
