//! A source's `WITH (...)` options: keys are case-insensitive, values are strings.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

/// The options of one source, keys lower-cased.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options(pub BTreeMap<String, String>);

impl Options {
    /// Options from `(key, value)` pairs.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        Options(pairs.into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect())
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// The value of `key`, or a clear error naming it.
    pub fn required(&self, key: &str) -> Result<&str> {
        self.get(key).ok_or_else(|| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "source option '{key}' is required"))
    }

    /// `key` parsed as a number, `default` when unset.
    pub fn number<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "source option '{key}' must be a number, not '{v}'")),
        }
    }

    /// `key` as a boolean (`true`/`false`), `default` when unset.
    pub fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if v == "true" => Ok(true),
            Some(v) if v == "false" => Ok(false),
            Some(v) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "source option '{key}' must be true or false, not '{v}'")),
        }
    }

    /// `ENCODE CSV (delimiter = ..)`: one byte, `,` when unset.
    pub fn csv_delimiter(&self) -> Result<u8> {
        let delimiter = self.get("encode.delimiter").unwrap_or(",");
        match delimiter.as_bytes() {
            &[d] => Ok(d),
            _ => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "a CSV delimiter is one byte, not '{delimiter}'")),
        }
    }

    /// `key` as a duration like `10s`, `5m`, `2h`, `1d` or `'1 day'`, `default` when unset.
    pub fn duration(&self, key: &str, default: Duration) -> Result<Duration> {
        let Some(v) = self.get(key) else { return Ok(default) };
        eddy_common::interval::parse_duration(v, false).ok_or_else(|| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "source option '{key}' must be a duration such as '10s' or '2h', not '{v}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_risingwave_options() {
        assert_eq!(eddy_common::interval::parse_duration("2h", false), Some(Duration::from_secs(7200)));
        assert_eq!(eddy_common::interval::parse_duration("1 day", false), Some(Duration::from_secs(86400)));
        assert_eq!(eddy_common::interval::parse_duration("1500ms", false), Some(Duration::from_millis(1500)));
        assert_eq!(eddy_common::interval::parse_duration("soon", false), None);
    }
}
