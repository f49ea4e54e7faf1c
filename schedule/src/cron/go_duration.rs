//! Go's `time.ParseDuration`, because `@every <duration>` is whatever Go accepts.
//!
//! robfig/cron hands the text after `@every ` to Go's parser, so `1h30m`, `1.5h`, `.5m`, `+90s`,
//! `-5m` and `0` are all valid and `5 m`, `1d` or `5M` are not. A Rust duration crate would accept
//! a different language; this is a line-by-line port of Go 1.19's parser (the version the
//! conformance data was produced with), including its overflow rules.

use super::error::{DurationError, Excerpt};

/// Nanoseconds per unit, as in Go's `unitMap`.
fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        _ => return None,
    })
}

const LIMIT: u64 = 1 << 63;

/// Parses a Go duration into signed nanoseconds (Go's `time.Duration`).
pub(crate) fn parse_go_duration(text: &str) -> Result<i64, DurationError> {
    let mut s = text.as_bytes();
    let mut total: u64 = 0;
    let mut negative = false;

    // Consume [-+]?
    if let Some(&sign) = s.first() {
        if sign == b'-' || sign == b'+' {
            negative = sign == b'-';
            s = &s[1..];
        }
    }
    // Go special-cases a bare "0": the only duration that needs no unit.
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(DurationError::Invalid);
    }
    while !s.is_empty() {
        // The next character must be [0-9.]
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(DurationError::Invalid);
        }
        // Consume [0-9]*
        let before_int = s.len();
        let (mut value, rest) = leading_int(s).ok_or(DurationError::Overflow)?;
        s = rest;
        let had_int = before_int != s.len();

        // Consume (\.[0-9]*)?
        let mut had_fraction = false;
        let mut fraction: u64 = 0;
        let mut scale: f64 = 1.0;
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let before_fraction = s.len();
            let (f, sc, rest) = leading_fraction(s);
            fraction = f;
            scale = sc;
            s = rest;
            had_fraction = before_fraction != s.len();
        }
        if !had_int && !had_fraction {
            // No digits at all, e.g. ".s".
            return Err(DurationError::Invalid);
        }

        // Consume the unit: everything up to the next digit or period.
        let unit_len = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(DurationError::MissingUnit);
        }
        let (unit_bytes, rest) = s.split_at(unit_len);
        s = rest;
        // The unit ends at an ASCII byte or at the end of the text, so it is whole UTF-8; the
        // fallback only guards against that reasoning being wrong.
        let unit_text = std::str::from_utf8(unit_bytes).unwrap_or("\u{fffd}");
        let unit = unit_nanos(unit_text).ok_or_else(|| DurationError::UnknownUnit {
            unit: Excerpt::new(unit_text),
        })?;
        if value > LIMIT / unit {
            return Err(DurationError::Overflow);
        }
        value *= unit;
        if fraction > 0 {
            // Go computes the fractional part in float64, truncating; so do we.
            value += (fraction as f64 * (unit as f64 / scale)) as u64;
            if value > LIMIT {
                return Err(DurationError::Overflow);
            }
        }
        total += value;
        if total > LIMIT {
            return Err(DurationError::Overflow);
        }
    }
    if negative {
        // total <= 2^63, so the wrapping negation is exact (2^63 becomes i64::MIN, as in Go).
        return Ok((total as i64).wrapping_neg());
    }
    i64::try_from(total).map_err(|_| DurationError::Overflow)
}

/// Go's `leadingInt`: the leading decimal digits, or `None` on overflow past 2^63.
fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
    let mut x: u64 = 0;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(s[i] - b'0');
        if x > LIMIT {
            return None;
        }
        i += 1;
    }
    Some((x, &s[i..]))
}

/// Go's `leadingFraction`: digits after the period; on overflow it stops gaining precision
/// instead of failing.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let mut x: u64 = 0;
    let mut scale: f64 = 1.0;
    let mut overflow = false;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if !overflow {
            if x > (LIMIT - 1) / 10 {
                overflow = true;
            } else {
                let y = x * 10 + u64::from(s[i] - b'0');
                if y > LIMIT {
                    overflow = true;
                } else {
                    x = y;
                    scale *= 10.0;
                }
            }
        }
        i += 1;
    }
    (x, scale, &s[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn accepts_what_go_accepts() {
        for (text, nanos) in [
            ("0", 0),
            ("+0", 0),
            ("-0", 0),
            ("0s", 0),
            ("5m", 300 * S),
            ("1h30m", 5_400 * S),
            ("90s", 90 * S),
            ("1.5h", 5_400 * S),
            (".5m", 30 * S),
            ("5.m", 300 * S),
            ("-5m", -300 * S),
            ("+5m", 300 * S),
            ("1h1h", 7_200 * S),
            ("300ms", 300_000_000),
            ("1\u{b5}s", 1_000),
            ("1\u{3bc}s", 1_000),
            ("1us", 1_000),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("0.0000000001s", 0),
        ] {
            assert_eq!(parse_go_duration(text), Ok(nanos), "{text}");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for text in [
            "",
            "-",
            "+",
            "s",
            ".s",
            "5",
            "5 m",
            " 5m",
            "5m ",
            "1d",
            "5M",
            "Xm",
            "1h-5m",
            "5mm",
            "9223372036854775808ns",
            "3000000h",
            "1e3s",
        ] {
            assert!(
                parse_go_duration(text).is_err(),
                "{text:?} should be rejected"
            );
        }
    }
}
