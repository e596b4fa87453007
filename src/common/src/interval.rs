//! PostgreSQL interval input: `1 year 2 mons 3 days 04:05:06`, `-1 day +02:00`, `1.5 hours`,
//! `3 weeks`, `00:00:01.5`, `2 days ago`, and ISO 8601 `P1Y2M3DT4H5M6S`. Arrow's own parser
//! accepts only part of this, so Eddy parses intervals itself everywhere text becomes an
//! interval (literals, casts, parameters, COPY).

use arrow::datatypes::IntervalMonthDayNano;

use crate::error::sqlstate;
use crate::{user_err, Result};

const US_PER_SEC: f64 = 1_000_000.0;

fn bad(s: &str) -> crate::EddyError {
    user_err!(sqlstate::INVALID_DATETIME_FORMAT, "invalid input syntax for type interval: \"{s}\"")
}

/// The units [`Acc::add`] knows, singular.
const UNITS: &[&str] = &[
    "millennium", "millennia", "centurie", "century", "cent", "c", "decade", "dec", "year", "yr", "y", "month", "mon",
    "week", "w", "day", "d", "hour", "hr", "h", "minute", "min", "m", "second", "sec", "s", "", "millisecond", "msec",
    "ms", "microsecond", "usec", "us", "u", "nanosecond", "nsec", "n",
];

/// Accumulates interval fields; fractional months/days spill into smaller units like PostgreSQL.
#[derive(Default)]
struct Acc {
    months: f64,
    days: f64,
    micros: f64,
}

impl Acc {
    fn add(&mut self, amount: f64, unit: &str, src: &str) -> Result<()> {
        let u = unit.to_ascii_lowercase();
        // A unit as written (`ms`, `us`, `s`), else its singular (`mins`, `days`): stripping
        // the `s` first read `5 ms` as five minutes.
        let known = |u: &str| UNITS.contains(&u);
        let u = if known(&u) { u.as_str() } else { u.strip_suffix('s').filter(|u| known(u)).unwrap_or(&u) };
        match u {
            "millennium" | "millennia" | "millennium_" => self.months += amount * 12_000.0,
            "centurie" | "century" | "cent" | "c" => self.months += amount * 1_200.0,
            "decade" | "dec" => self.months += amount * 120.0,
            "year" | "yr" | "y" => self.months += amount * 12.0,
            "month" | "mon" => self.months += amount,
            "week" | "w" => self.days += amount * 7.0,
            "day" | "d" => self.days += amount,
            "hour" | "hr" | "h" => self.micros += amount * 3_600.0 * US_PER_SEC,
            "minute" | "min" | "m" => self.micros += amount * 60.0 * US_PER_SEC,
            "second" | "sec" | "s" | "" => self.micros += amount * US_PER_SEC,
            "millisecond" | "msec" | "ms" => self.micros += amount * 1_000.0,
            "microsecond" | "usec" | "us" | "u" => self.micros += amount,
            "nanosecond" | "nsec" | "n" => self.micros += amount / 1_000.0,
            _ => return Err(bad(src)),
        }
        Ok(())
    }

    fn finish(self, negate: bool) -> Result<IntervalMonthDayNano> {
        let sign = if negate { -1.0 } else { 1.0 };
        let whole_months = self.months.trunc();
        let days = self.days + (self.months - whole_months) * 30.0;
        let whole_days = days.trunc();
        let micros = self.micros + (days - whole_days) * 86_400.0 * US_PER_SEC;
        let micros = micros.round();
        if whole_months.abs() > f64::from(i32::MAX) || whole_days.abs() > f64::from(i32::MAX) || micros.abs() > 9.2e18 / 1000.0 {
            return Err(user_err!(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "interval out of range"));
        }
        Ok(IntervalMonthDayNano::new(
            (sign * whole_months) as i32,
            (sign * whole_days) as i32,
            (sign * micros) as i64 * 1_000,
        ))
    }
}

/// Parses `hh:mm[:ss[.f]]` (with optional sign) into microseconds.
fn parse_clock(tok: &str) -> Option<f64> {
    let (neg, body) = match tok.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, tok.strip_prefix('+').unwrap_or(tok)),
    };
    let parts: Vec<&str> = body.split(':').collect();
    if parts.len() < 2 || parts.len() > 3 {
        return None;
    }
    let h: f64 = parts[0].parse().ok()?;
    let m: f64 = parts[1].parse().ok()?;
    let s: f64 = if parts.len() == 3 { parts[2].parse().ok()? } else { 0.0 };
    let v = (h * 3_600.0 + m * 60.0 + s) * US_PER_SEC;
    Some(if neg { -v } else { v })
}

fn parse_iso(s: &str) -> Result<IntervalMonthDayNano> {
    let body = &s[1..];
    let mut acc = Acc::default();
    let mut in_time = false;
    let mut num = String::new();
    for c in body.chars() {
        match c {
            'T' | 't' => in_time = true,
            c if c.is_ascii_digit() || c == '.' || c == '-' => num.push(c),
            u => {
                let amount: f64 = num.parse().map_err(|_| bad(s))?;
                num.clear();
                let unit = match (u.to_ascii_uppercase(), in_time) {
                    ('Y', false) => "year",
                    ('M', false) => "month",
                    ('W', false) => "week",
                    ('D', false) => "day",
                    ('H', true) => "hour",
                    ('M', true) => "minute",
                    ('S', true) => "second",
                    _ => return Err(bad(s)),
                };
                acc.add(amount, unit, s)?;
            }
        }
    }
    if !num.is_empty() {
        return Err(bad(s));
    }
    acc.finish(false)
}

/// Parses PostgreSQL interval text.
pub fn parse_interval(s: &str) -> Result<IntervalMonthDayNano> {
    let t = s.trim();
    if t.is_empty() {
        return Err(bad(s));
    }
    if t.starts_with(['P', 'p']) {
        return parse_iso(t);
    }
    let t = t.strip_prefix('@').unwrap_or(t).trim();
    let mut tokens: Vec<String> = Vec::new();
    // Split "10days" / "1.5h" into number and unit tokens.
    for w in t.split_whitespace() {
        let split = w.find(|c: char| c.is_ascii_alphabetic());
        match split {
            Some(i) if i > 0 && !w.contains(':') => {
                tokens.push(w[..i].to_string());
                tokens.push(w[i..].to_string());
            }
            _ => tokens.push(w.to_string()),
        }
    }
    let mut acc = Acc::default();
    let mut negate = false;
    let mut i = 0;
    while i < tokens.len() {
        let tok = tokens[i].trim_end_matches(',');
        if tok.eq_ignore_ascii_case("ago") {
            negate = true;
            i += 1;
            continue;
        }
        if tok.contains(':') {
            acc.micros += parse_clock(tok).ok_or_else(|| bad(s))?;
            i += 1;
            continue;
        }
        // SQL's year-month form: `1-2` is 1 year 2 months.
        if let Some((years, months)) = year_month(tok) {
            acc.months += years * 12.0 + if years < 0.0 || tok.starts_with('-') { -months } else { months };
            i += 1;
            continue;
        }
        let amount: f64 = tok.parse().map_err(|_| bad(s))?;
        match tokens.get(i + 1) {
            // A bare number before a time of day is days (`1 02:00:00`).
            Some(next) if next.contains(':') => {
                acc.days += amount;
                i += 1;
            }
            Some(unit) if unit.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && !unit.eq_ignore_ascii_case("ago") => {
                acc.add(amount, unit.trim_end_matches(','), s)?;
                i += 2;
            }
            _ => {
                // A bare number is seconds.
                acc.micros += amount * US_PER_SEC;
                i += 1;
            }
        }
    }
    acc.finish(negate)
}

/// `Y-M` (years and months, as SQL writes a year-month interval), if `tok` is one.
fn year_month(tok: &str) -> Option<(f64, f64)> {
    let body = tok.strip_prefix(['-', '+']).unwrap_or(tok);
    let (y, m) = body.split_once('-')?;
    if y.is_empty() || m.is_empty() || !y.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let years: f64 = y.parse().ok()?;
    Some((if tok.starts_with('-') { -years } else { years }, m.parse().ok()?))
}

/// A form of `v` that Arrow's interval parser reads back exactly.
pub fn canonical_text(v: IntervalMonthDayNano) -> String {
    format!("{} months {} days {} nanoseconds", v.months, v.days, v.nanoseconds)
}

/// A duration written as a number and a unit (`250ms`, `1.5s`, `2 min`, `1 day`), as option
/// values (`nexmark.min.event.gap`, `FETCH ... WITH (timeout = ...)`) take them. A bare number
/// is read in seconds when `bare_seconds`, refused otherwise. `None` for anything else,
/// including negative, non-finite and out-of-range values.
pub fn parse_duration(v: &str, bare_seconds: bool) -> Option<std::time::Duration> {
    let v = v.trim().to_ascii_lowercase();
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: f64 = num.parse().ok()?;
    let secs = match unit.trim() {
        "" if bare_seconds => n,
        "us" | "microsecond" | "microseconds" => n / 1e6,
        "ms" | "millisecond" | "milliseconds" => n / 1000.0,
        "s" | "sec" | "secs" | "second" | "seconds" => n,
        "m" | "min" | "mins" | "minute" | "minutes" => n * 60.0,
        "h" | "hour" | "hours" => n * 3600.0,
        "d" | "day" | "days" => n * 86400.0,
        _ => return None,
    };
    std::time::Duration::try_from_secs_f64(secs).ok()
}

/// `v * factor` as PostgreSQL multiplies an interval: fractional months spill into days (30 to
/// the month), fractional days into time (24 hours to the day), time kept to microseconds.
/// A field leaving its range (or a factor that is not finite) is PostgreSQL's 22008.
pub fn scale(v: IntervalMonthDayNano, factor: f64) -> Result<IntervalMonthDayNano> {
    let months = f64::from(v.months) * factor;
    let whole_months = months.trunc();
    let days = f64::from(v.days) * factor + (months - whole_months) * 30.0;
    let whole_days = days.trunc();
    let nanos = v.nanoseconds as f64 * factor + (days - whole_days) * 86_400e9;
    let nanos = (nanos / 1_000.0).round() * 1_000.0;
    let fits = |x: f64, limit: f64| x.is_finite() && x.abs() <= limit;
    if !(fits(whole_months, f64::from(i32::MAX)) && fits(whole_days, f64::from(i32::MAX)) && fits(nanos, 9.2e18)) {
        return Err(user_err!(sqlstate::DATETIME_FIELD_OVERFLOW, "interval out of range"));
    }
    Ok(IntervalMonthDayNano::new(whole_months as i32, whole_days as i32, nanos as i64))
}

/// What `sum(interval)` / `avg(interval)` keep: months, days and nanoseconds summed apart (so
/// retracting a value is exact), with the count of values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntervalSums {
    pub months: i64,
    pub days: i64,
    pub nanos: i128,
    pub n: i64,
}

impl IntervalSums {
    /// Adds `x` (`sign` 1) or takes it away (`sign` -1).
    pub fn add(&mut self, x: IntervalMonthDayNano, sign: i64) {
        self.months += sign * i64::from(x.months);
        self.days += sign * i64::from(x.days);
        self.nanos += i128::from(sign) * i128::from(x.nanoseconds);
        self.n += sign;
    }

    /// The sum (`avg` false) or the average: NULL over no values, `22008` when a field of the
    /// sum leaves an interval's range, as in PostgreSQL.
    pub fn value(&self, avg: bool) -> Result<Option<IntervalMonthDayNano>> {
        if self.n == 0 {
            return Ok(None);
        }
        let sum = match (i32::try_from(self.months), i32::try_from(self.days), i64::try_from(self.nanos)) {
            (Ok(m), Ok(d), Ok(n)) => IntervalMonthDayNano::new(m, d, n),
            _ => return Err(user_err!(sqlstate::DATETIME_FIELD_OVERFLOW, "interval out of range")),
        };
        Ok(Some(if avg { scale(sum, 1.0 / self.n as f64)? } else { sum }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> (i32, i32, i64) {
        let v = parse_interval(s).unwrap();
        (v.months, v.days, v.nanoseconds / 1_000)
    }

    #[test]
    fn postgres_output_format_parses_back() {
        assert_eq!(p("1 year 2 mons 3 days 04:05:06"), (14, 3, 14_706_000_000));
        assert_eq!(p("-1 days"), (0, -1, 0));
        assert_eq!(p("00:00:01.5"), (0, 0, 1_500_000));
        assert_eq!(p("1 day -01:00:00"), (0, 1, -3_600_000_000));
    }

    #[test]
    fn unit_spellings_and_fractions_are_accepted() {
        assert_eq!(p("1.5 hours"), (0, 0, 5_400_000_000));
        assert_eq!(p("3 weeks"), (0, 21, 0));
        assert_eq!(p("10 min 5 secs"), (0, 0, 605_000_000));
        assert_eq!(p("2 days ago"), (0, -2, 0));
        assert_eq!(p("1.5 months"), (1, 15, 0));
        assert_eq!(p("5"), (0, 0, 5_000_000));
        assert_eq!(p("P1Y2M3DT4H5M6S"), (14, 3, 14_706_000_000));
        assert_eq!(p("10days"), (0, 10, 0));
        // Units as written before their singular: `ms` is milliseconds, not minutes.
        assert_eq!(p("5 ms"), (0, 0, 5_000));
        assert_eq!(p("3 us"), (0, 0, 3));
        assert_eq!(p("10 s"), (0, 0, 10_000_000));
        assert_eq!(p("2 mins 1 hrs"), (0, 0, 3_720_000_000));
        // A number before a time of day is days; SQL's year-month form.
        assert_eq!(p("1 02:00:00"), (0, 1, 7_200_000_000));
        assert_eq!(p("2 -00:00:01"), (0, 2, -1_000_000));
        assert_eq!(p("1-2"), (14, 0, 0));
        assert_eq!(p("-1-2"), (-14, 0, 0));
        let v = parse_interval("1 year 2 mons -3 days 04:05:06.5").unwrap();
        assert_eq!(parse_interval(&canonical_text(v)).unwrap(), v);
    }

    #[test]
    fn durations_read_with_units() {
        use std::time::Duration;
        assert_eq!(parse_duration("2h", false), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1 day", false), Some(Duration::from_secs(86400)));
        assert_eq!(parse_duration("250ms", true), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5", true), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10", false), None);
        assert_eq!(parse_duration("soon", true), None);
        // Too large for a Duration: refused, not a panic.
        assert_eq!(parse_duration("99999999999999999999999999h", false), None);
    }

    #[test]
    fn garbage_is_an_invalid_datetime_format_error() {
        assert_eq!(parse_interval("soon").unwrap_err().sqlstate, "22007");
        assert!(parse_interval("1 fortnight").is_err());
    }
}
