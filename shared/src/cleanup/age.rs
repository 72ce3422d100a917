//! Parsing the safety age a cleanup keeps files for (`72h`, `3d`, `1d12h`, ...).

use std::str::FromStr;
use std::time::Duration;

use crate::{Error, Result};

/// Parses an age such as `72h`, `3d`, `90m`, `0s` or `1d12h` (units `s`, `m`, `h`, `d`).
///
/// ```
/// use std::time::Duration;
/// use eqdv::cleanup::parse_age;
/// assert_eq!(parse_age("72h").unwrap(), Duration::from_secs(72 * 3600));
/// assert_eq!(parse_age("1d12h").unwrap(), Duration::from_secs(36 * 3600));
/// assert_eq!(parse_age("0s").unwrap(), Duration::ZERO);
/// assert!(parse_age("72").is_err());
/// assert!(parse_age("3w").is_err());
/// ```
pub fn parse_age(text: &str) -> Result<Duration> {
    let bad = |why: &str| {
        Error::InvalidInput(format!(
            "age '{text}' {why}: use a number with a unit s, m, h or d, e.g. 72h, 3d, 30m, 0s"
        ))
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(bad("is empty"));
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad(&format!("has an unknown unit '{c}'"))),
        };
        if digits.is_empty() {
            return Err(bad("has a unit without a number"));
        }
        let n = u64::from_str(&digits).map_err(|_| bad("is too large"))?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(|| bad("is too large"))?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(bad("ends without a unit"));
    }
    Ok(Duration::from_secs(total))
}
