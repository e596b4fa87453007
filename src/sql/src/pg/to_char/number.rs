//! `to_char` of numbers with PostgreSQL's numeric template patterns: digit positions `9` and
//! `0`, the decimal point (`.`, `D`), group separators (`,`, `G`), signs (`S`, `MI`, `PL`,
//! `SG`, `PR`), `FM`, `V`, `EEEE`, `RN` and `TH`, in the C locale.
//!
//! A value comes in as its digits (already rounded to the template's decimals); a digit
//! position before the value's first digit is a blank (a zero after a `0` position), and a
//! value with more integer digits than the template has positions prints `#` in each.

use datafusion::error::Result as DfResult;
use eddy_common::error::sqlstate;

use super::datetime::ordinal;
use crate::pg::udf::user_error;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Item {
    Nine,
    Zero,
    Point,
    Group,
    /// `S`: anchored to the number when it comes before the digits, else where it stands.
    Sign,
    Minus,
    Plus,
    SignBoth,
    Brackets,
    Currency,
    Shift,
    Exponent,
    Roman(bool),
    Ordinal(bool),
    Text(String),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Template {
    items: Vec<Item>,
    fill: bool,
    /// Digit positions before the decimal point (with those after `V`).
    pub pre: usize,
    /// Digit positions after the decimal point.
    pub post: usize,
    /// Digits `V` shifts the value by.
    pub shift: u32,
    pub exponent: bool,
    roman: bool,
    has_point: bool,
}

const KEYWORDS: &[(&str, Option<Item>)] = &[
    ("EEEE", Some(Item::Exponent)),
    ("eeee", Some(Item::Exponent)),
    ("FM", None),
    ("fm", None),
    ("MI", Some(Item::Minus)),
    ("mi", Some(Item::Minus)),
    ("PL", Some(Item::Plus)),
    ("pl", Some(Item::Plus)),
    ("SG", Some(Item::SignBoth)),
    ("sg", Some(Item::SignBoth)),
    ("PR", Some(Item::Brackets)),
    ("pr", Some(Item::Brackets)),
    ("RN", Some(Item::Roman(true))),
    ("rn", Some(Item::Roman(false))),
    ("TH", Some(Item::Ordinal(true))),
    ("th", Some(Item::Ordinal(false))),
    ("SP", Some(Item::Text(String::new()))),
    ("sp", Some(Item::Text(String::new()))),
    ("9", Some(Item::Nine)),
    ("0", Some(Item::Zero)),
    (".", Some(Item::Point)),
    ("D", Some(Item::Point)),
    ("d", Some(Item::Point)),
    (",", Some(Item::Group)),
    ("G", Some(Item::Group)),
    ("g", Some(Item::Group)),
    ("S", Some(Item::Sign)),
    ("s", Some(Item::Sign)),
    ("L", Some(Item::Currency)),
    ("l", Some(Item::Currency)),
    ("V", Some(Item::Shift)),
    ("v", Some(Item::Shift)),
    // `B` and `C` are keywords PostgreSQL accepts and prints nothing for.
    ("B", Some(Item::Text(String::new()))),
    ("b", Some(Item::Text(String::new()))),
    ("C", Some(Item::Text(String::new()))),
    ("c", Some(Item::Text(String::new()))),
];

fn syntax(msg: &str) -> datafusion::error::DataFusionError {
    user_error(sqlstate::SYNTAX_ERROR, msg.to_string())
}

/// Parses a numeric template.
pub(super) fn parse(template: &str) -> DfResult<Template> {
    let mut t = Template { items: Vec::new(), fill: false, pre: 0, post: 0, shift: 0, exponent: false, roman: false, has_point: false };
    let mut rest = template;
    let mut after_shift = false;
    while !rest.is_empty() {
        if let Some((k, item)) = KEYWORDS.iter().find(|(k, _)| rest.starts_with(k)) {
            rest = &rest[k.len()..];
            let Some(item) = item.clone() else {
                t.fill = true;
                continue;
            };
            match item {
                Item::Nine | Item::Zero if after_shift => {
                    t.shift += 1;
                    t.pre += 1;
                }
                Item::Nine | Item::Zero if t.has_point => t.post += 1,
                Item::Nine | Item::Zero => t.pre += 1,
                Item::Point if t.has_point => return Err(syntax("multiple decimal points")),
                Item::Point if after_shift => return Err(syntax("cannot use \"V\" and decimal point together")),
                Item::Point => t.has_point = true,
                Item::Shift if t.has_point => return Err(syntax("cannot use \"V\" and decimal point together")),
                Item::Shift => after_shift = true,
                Item::Exponent => t.exponent = true,
                Item::Roman(_) => t.roman = true,
                _ => {}
            }
            t.items.push(item);
            continue;
        }
        let mut text = String::new();
        match rest.chars().next() {
            Some('"') => rest = super::quoted(&rest[1..], &mut text),
            Some(c) => {
                text.push(c);
                rest = &rest[c.len_utf8()..];
            }
            None => {}
        }
        t.items.push(Item::Text(text));
    }
    // The sign patterns PostgreSQL refuses to combine.
    let count = |f: fn(&Item) -> bool| t.items.iter().filter(|i| f(i)).count();
    let (signs, minus, plus, both, brackets) = (
        count(|i| *i == Item::Sign),
        count(|i| *i == Item::Minus),
        count(|i| *i == Item::Plus),
        count(|i| *i == Item::SignBoth),
        count(|i| *i == Item::Brackets),
    );
    if signs > 1 {
        return Err(syntax("cannot use \"S\" twice"));
    }
    if signs > 0 && minus + plus + both + brackets > 0 {
        return Err(syntax("cannot use \"S\" and \"PL\"/\"MI\"/\"SG\"/\"PR\" together"));
    }
    if brackets > 0 && minus + plus + both > 0 {
        return Err(syntax("cannot use \"PR\" and \"S\"/\"PL\"/\"MI\"/\"SG\" together"));
    }
    if count(|i| *i == Item::Exponent) > 1 {
        return Err(syntax("cannot use \"EEEE\" twice"));
    }
    if t.exponent {
        let other = t.items.iter().any(|i| !matches!(i, Item::Nine | Item::Zero | Item::Point | Item::Exponent | Item::Text(_)));
        if other || t.fill {
            return Err(syntax("\"EEEE\" is incompatible with other formats: it may only be used together with digit and decimal point patterns"));
        }
    }
    Ok(t)
}

/// A value's digits, rounded to the template's decimals (after its `V` shift).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Digits {
    pub negative: bool,
    /// The integer part without leading zeros (empty for zero).
    pub int: String,
    /// Exactly `post` digits.
    pub frac: String,
}

impl Digits {
    /// `value` at `scale` (value / 10^scale), shifted left `shift` digits and rounded half
    /// away from zero to `post` decimals.
    pub fn decimal(value: i128, scale: i32, post: usize) -> Digits {
        let negative = value < 0;
        let mut v = value.unsigned_abs();
        let want = post as i32;
        let mut s = scale;
        while s > want {
            let (q, r) = (v / 10, v % 10);
            v = q;
            s -= 1;
            if s == want && r >= 5 {
                v += 1;
            }
        }
        let mut text = v.to_string();
        for _ in s..want {
            text.push('0');
        }
        Self::from_text(negative, &text, post)
    }

    /// A float's digits as C's `%.*f` writes them (a negative rounded to zero keeps its sign).
    pub fn float(value: f64, post: usize) -> Digits {
        let text = format!("{:.*}", post, value.abs());
        let mut d = Self::from_text(false, &text.replace('.', ""), post);
        d.negative = value.is_sign_negative() && !value.is_nan();
        d
    }

    fn from_text(negative: bool, digits: &str, post: usize) -> Digits {
        let split = digits.len().saturating_sub(post);
        let int = digits[..split].trim_start_matches('0').to_string();
        let frac = format!("{:0>post$}", &digits[split..]);
        let zero = int.is_empty() && frac.bytes().all(|b| b == b'0');
        Digits { negative: negative && !zero, int, frac }
    }
}

fn roman(mut n: i64) -> String {
    const TABLE: [(i64, &str); 13] =
        [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")];
    let mut out = String::new();
    for (v, s) in TABLE {
        while n >= v {
            out.push_str(s);
            n -= v;
        }
    }
    out
}

/// Writes `d` (rounded for `t`) as template `t` says; `exponent` is the value in scientific
/// notation for `EEEE` (with its sign or a blank), `integer` the value rounded to an integer for `RN`.
pub(super) fn format(t: &Template, d: &Digits, exponent: Option<&str>, integer: Option<i64>, out: &mut String) {
    let fill = t.fill;
    let lead = t.pre.saturating_sub(d.int.len());
    let overflow = d.int.len() > t.pre;
    // In FM, trailing zeros at `9` positions after the point are left out.
    let mut frac_len = d.frac.len();
    if fill {
        let kinds: Vec<bool> = t.items.iter().skip_while(|i| **i != Item::Point).filter_map(|i| match i {
            Item::Nine => Some(true),
            Item::Zero => Some(false),
            _ => None,
        }).collect();
        while frac_len > 0 && d.frac.as_bytes()[frac_len - 1] == b'0' && kinds.get(frac_len - 1) == Some(&true) {
            frac_len -= 1;
        }
    }
    // Where the sign goes: anchored before the number unless a positional sign says otherwise.
    let positional = t.items.iter().any(|i| matches!(i, Item::Minus | Item::SignBoth))
        || t.items.iter().skip_while(|i| !matches!(i, Item::Nine | Item::Zero | Item::Point)).any(|i| *i == Item::Sign);
    let anchored_sign = t.items.iter().take_while(|i| !matches!(i, Item::Nine | Item::Zero | Item::Point)).any(|i| *i == Item::Sign);
    let brackets = t.items.contains(&Item::Brackets);
    let mut sign: Option<&str> = if positional && !anchored_sign {
        None
    } else if anchored_sign {
        Some(if d.negative { "-" } else { "+" })
    } else if brackets {
        Some(if d.negative { "<" } else if fill { "" } else { " " })
    } else {
        Some(if d.negative { "-" } else if fill { "" } else { " " })
    };
    if t.roman {
        for item in &t.items {
            match item {
                Item::Roman(upper) => match integer.filter(|n| (1..=3999).contains(n)) {
                    Some(n) => {
                        let r = roman(n);
                        let r = if *upper { r } else { r.to_ascii_lowercase() };
                        if !fill {
                            out.push_str(&" ".repeat(15 - r.len()));
                        }
                        out.push_str(&r);
                    }
                    None => out.push_str(&"#".repeat(15)),
                },
                Item::Text(s) => out.push_str(s),
                _ => {}
            }
        }
        return;
    }
    let mut int_pos = 0;
    let mut frac_pos = 0;
    let mut started = false;
    let mut zero_from = usize::MAX;
    let mut in_frac = false;
    let mut exponent_written = false;
    for item in &t.items {
        match item {
            Item::Nine | Item::Zero if t.exponent => {
                if !exponent_written {
                    exponent_written = true;
                    if let Some(e) = exponent {
                        out.push_str(e);
                    }
                }
            }
            Item::Nine | Item::Zero if in_frac => {
                if overflow {
                    out.push('#');
                } else if frac_pos < frac_len {
                    out.push(char::from(d.frac.as_bytes()[frac_pos]));
                }
                frac_pos += 1;
            }
            Item::Nine | Item::Zero => {
                let k = int_pos;
                int_pos += 1;
                if *item == Item::Zero {
                    zero_from = zero_from.min(k);
                }
                let last = k + 1 == t.pre;
                if overflow {
                    out.push_str(sign.take().unwrap_or(""));
                    out.push('#');
                } else if k >= lead {
                    out.push_str(sign.take().unwrap_or(""));
                    out.push(char::from(d.int.as_bytes()[k - lead]));
                    started = true;
                } else if zero_from <= k || (last && d.int.is_empty() && (d.frac.is_empty() || (fill && frac_len == 0))) {
                    out.push_str(sign.take().unwrap_or(""));
                    out.push('0');
                    started = true;
                } else if !fill {
                    out.push(' ');
                }
            }
            Item::Point => {
                in_frac = true;
                if t.exponent {
                    continue;
                }
                // PostgreSQL ends the output at a point with no digit positions after it,
                // unless the value overflowed the template (then the point is written).
                if d.frac.is_empty() {
                    if overflow {
                        out.push('.');
                        continue;
                    }
                    break;
                }
                out.push_str(sign.take().unwrap_or(""));
                out.push('.');
            }
            Item::Group => {
                if started || overflow || in_frac {
                    out.push(',');
                } else if !fill {
                    out.push(' ');
                }
            }
            Item::Sign if !anchored_sign || started || in_frac => out.push(if d.negative { '-' } else { '+' }),
            Item::Sign => {}
            Item::Minus => out.push_str(if d.negative { "-" } else if fill { "" } else { " " }),
            Item::Plus => out.push_str(if !d.negative { "+" } else if fill { "" } else { " " }),
            Item::SignBoth => out.push(if d.negative { '-' } else { '+' }),
            Item::Brackets => out.push_str(if d.negative { ">" } else if fill { "" } else { " " }),
            Item::Currency => out.push(' '),
            Item::Ordinal(upper) => {
                if !d.negative && d.frac.is_empty() && !overflow {
                    let digits = if d.int.is_empty() { "0" } else { d.int.as_str() };
                    out.push_str(ordinal(digits, *upper));
                }
            }
            Item::Text(s) => out.push_str(s),
            Item::Shift | Item::Exponent | Item::Roman(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(value: i128, scale: i32, template: &str) -> String {
        let t = parse(template).unwrap();
        let d = Digits::decimal(value, scale - t.shift as i32, t.post);
        let mut out = String::new();
        format(&t, &d, None, None, &mut out);
        out
    }

    #[test]
    fn numbers_format_as_postgresql_does() {
        // Each expected string is PostgreSQL 15's answer.
        let cases: &[(i128, i32, &str, &str)] = &[
            (12345, 1, "9999.99", " 1234.50"),
            (12, 0, "000", " 012"),
            (-12, 0, "9999", "  -12"),
            (-12, 0, "0000", "-0012"),
            (12345, 0, "999", " ###"),
            (5, 1, "9.99", "  .50"),
            (5, 1, "0.99", " 0.50"),
            (15, 1, "FM9.99", "1.5"),
            (1, 0, "FM9.99", "1."),
            (15, 1, "FM9.00", "1.50"),
            (1234567891, 3, "9,999,999.99", " 1,234,567.89"),
            (12, 0, "9,999", "    12"),
            (-12345, 1, "S9999.9", "-1234.5"),
            (12345, 1, "9999.9S", "1234.5+"),
            (-12345, 1, "9999.9MI", "1234.5-"),
            (12345, 1, "PL9999.9", "+ 1234.5"),
            (-12345, 1, "PL9999.9", " -1234.5"),
            (-12345, 1, "9999.9PR", "<1234.5>"),
            (12345, 1, "9999.9PR", " 1234.5 "),
            (12, 0, "L99", "  12"),
            (12345, 3, "99V99", " 1235"),
            (3, 0, "9th", " 3rd"),
            (21, 0, "FM99TH", "21ST"),
            (-5, 1, "FM9.9", "-.5"),
            (0, 0, "9.99", "  .00"),
            (0, 0, "FM9.99", "0."),
            (0, 0, "FM999", "0"),
            (0, 0, "999", "   0"),
            (25, 1, "9", " 3"),
            (-25, 1, "9", "-3"),
            (12345, 0, "9,999", " #,###"),
            (-12345, 0, "9,999", "-#,###"),
            (100, 0, "999.", " 100"),
            (5, 1, "FM9.99", ".5"),
            (-5, 0, "FM999MI", "5-"),
            (5, 0, "999MI", "  5 "),
            (-5, 0, "999S", "  5-"),
            (5, 0, "FMS999", "+5"),
            (-5, 1, "9.9", " -.5"),
            (-5, 1, "0.9", "-0.5"),
            (12, 0, "9099", "  012"),
            (12, 0, "99,099", "    012"),
            (12, 0, "099th", " 012th"),
            (-1, 3, "9.99", "  .00"),
            (-1, 3, "FM9.99", "0."),
            (15, 1, "FMD99", ".##"),
            (5, 0, "BB99", "  5"),
            (12, 0, "s99", "+12"),
            (12, 0, "99mi", "12 "),
        ];
        for (v, s, template, want) in cases {
            assert_eq!(num(*v, *s, template), *want, "to_char({v}e-{s}, '{template}')");
        }
    }

    #[test]
    fn exponent_and_roman() {
        let t = parse("9.99EEEE").unwrap();
        let mut out = String::new();
        format(&t, &Digits::decimal(12345, 1, 2), Some(" 1.23e+03"), None, &mut out);
        assert_eq!(out, " 1.23e+03");
        let t = parse("FMRN").unwrap();
        let mut out = String::new();
        format(&t, &Digits::decimal(1994, 0, 0), None, Some(1994), &mut out);
        assert_eq!(out, "MCMXCIV");
        assert!(parse("9.9.9").is_err());
        assert!(parse("FM9.99EEEE").is_err());
    }
}
