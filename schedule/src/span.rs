//! `Span`: a whole number of seconds as schedule settings write it (`90s`, `15m`, `1h30m`,
//! `2d`), parsed once where it enters the system.
//!
//! Jitter, a blackout window's length and a starting deadline are all lengths of time a user
//! types. They are whole seconds because everything they are compared with is (cron ticks and
//! backup ids carry the second), and a fraction that would be dropped silently is refused
//! instead. `d` is a day of 24 hours here; a blackout window measures its length on the wall
//! clock of its zone instead (see `blackout`). JSON may also give a plain number of seconds,
//! which is what the old `starting_deadline_seconds` field holds.

use std::fmt;

/// The longest span accepted: ten years, far beyond any sensible setting, and well inside
/// chrono's range so arithmetic with it never overflows.
pub const MAX_SPAN_SECONDS: u64 = 10 * 366 * 86_400;

/// A length of time of at least one second, in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span(u64);

/// Why a span was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpanError {
    #[error("{text:?} is not a duration such as 90s, 15m, 1h30m or 2d")]
    Invalid { text: String },
    #[error("{text:?} has the unit {unit:?}; use d, h, m or s (whole seconds)")]
    UnknownUnit { text: String, unit: String },
    #[error("{text:?} is zero; give at least 1s")]
    Zero { text: String },
    #[error("{text:?} is longer than ten years")]
    TooLong { text: String },
}

impl Span {
    /// A span of `seconds` (at least 1, at most [`MAX_SPAN_SECONDS`]).
    pub fn from_seconds(seconds: u64) -> Result<Span, SpanError> {
        let text = || format!("{seconds}s");
        match seconds {
            0 => Err(SpanError::Zero { text: text() }),
            s if s > MAX_SPAN_SECONDS => Err(SpanError::TooLong { text: text() }),
            s => Ok(Span(s)),
        }
    }

    /// Parses `90s`, `15m`, `1h30m`, `2d`, `1d12h`: one or more `<digits><unit>` with units
    /// `d` (24 h), `h`, `m`, `s`. A bare number is refused in text (is `90` seconds or
    /// minutes?); JSON numbers are seconds.
    pub fn parse(text: &str) -> Result<Span, SpanError> {
        let invalid = || SpanError::Invalid {
            text: excerpt(text),
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(invalid());
        }
        let mut total: u64 = 0;
        let mut rest = trimmed;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(invalid());
            }
            let value: u64 = rest[..digits].parse().map_err(|_| SpanError::TooLong {
                text: excerpt(text),
            })?;
            rest = &rest[digits..];
            let unit_len = rest.bytes().take_while(|b| !b.is_ascii_digit()).count();
            let unit = &rest[..unit_len];
            rest = &rest[unit_len..];
            let scale = match unit {
                "d" => 86_400,
                "h" => 3_600,
                "m" => 60,
                "s" => 1,
                "" => return Err(invalid()),
                other => {
                    return Err(SpanError::UnknownUnit {
                        text: excerpt(text),
                        unit: other.chars().take(16).collect(),
                    })
                }
            };
            total = value
                .checked_mul(scale)
                .and_then(|part| total.checked_add(part))
                .ok_or_else(|| SpanError::TooLong {
                    text: excerpt(text),
                })?;
        }
        match total {
            0 => Err(SpanError::Zero {
                text: excerpt(text),
            }),
            t if t > MAX_SPAN_SECONDS => Err(SpanError::TooLong {
                text: excerpt(text),
            }),
            t => Ok(Span(t)),
        }
    }

    pub fn seconds(self) -> u64 {
        self.0
    }

    /// As a chrono delta (always in range: see [`MAX_SPAN_SECONDS`]).
    pub fn delta(self) -> chrono::TimeDelta {
        chrono::TimeDelta::seconds(self.0 as i64)
    }
}

fn excerpt(text: &str) -> String {
    text.chars().take(64).collect()
}

impl Span {
    /// The span in words, `1 hour 30 minutes`: what a flag's `m` means (minutes), said next to
    /// a policy whose `m` means months (issue 26).
    pub fn in_words(&self) -> String {
        let mut rest = self.0;
        let mut words = Vec::new();
        for (unit, size) in [
            ("day", 86_400),
            ("hour", 3_600),
            ("minute", 60),
            ("second", 1),
        ] {
            let n = rest / size;
            if n > 0 {
                words.push(format!("{n} {unit}{}", if n == 1 { "" } else { "s" }));
                rest -= n * size;
            }
        }
        if words.is_empty() {
            "0 seconds".into()
        } else {
            words.join(" ")
        }
    }
}

impl fmt::Display for Span {
    /// The shortest canonical text: `1h30m`, `2d`, `45s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
            let n = rest / size;
            if n > 0 {
                write!(f, "{n}{unit}")?;
                rest -= n * size;
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for Span {
    type Err = SpanError;

    fn from_str(text: &str) -> Result<Span, SpanError> {
        Span::parse(text)
    }
}

impl serde::Serialize for Span {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Span {
    /// A string (`"15m"`) or a number of seconds (`900`).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Span, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Span;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"15m\" or a number of seconds")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Span, E> {
                Span::parse(text).map_err(E::custom)
            }

            fn visit_u64<E: serde::de::Error>(self, seconds: u64) -> Result<Span, E> {
                Span::from_seconds(seconds).map_err(E::custom)
            }

            fn visit_i64<E: serde::de::Error>(self, seconds: i64) -> Result<Span, E> {
                u64::try_from(seconds)
                    .map_err(|_| E::custom(format!("{seconds} is negative; give at least 1s")))
                    .and_then(|s| Span::from_seconds(s).map_err(E::custom))
            }

            fn visit_f64<E: serde::de::Error>(self, seconds: f64) -> Result<Span, E> {
                Err(E::custom(format!(
                    "{seconds} is not a whole number of seconds"
                )))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<u64, &str>) {
        let got = Span::parse(text)
            .map(Span::seconds)
            .map_err(|e| e.to_string());
        match (&got, expected) {
            (Ok(got), Ok(want)) => assert_eq!(*got, want, "{text}"),
            (Err(message), Err(fragment)) => {
                assert!(message.contains(fragment), "{text}: {message}")
            }
            _ => panic!("{text}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn spans_parse_as_written() {
        check("90s", Ok(90));
        check("15m", Ok(900));
        check("1h30m", Ok(5_400));
        check("2d", Ok(172_800));
        check("1d12h", Ok(129_600));
        check(" 45s ", Ok(45));
        check("90", Err("not a duration"));
        check("", Err("not a duration"));
        check("1.5h", Err("unit \".\""));
        check("500ms", Err("unit \"ms\""));
        check("3w", Err("unit \"w\""));
        check("0s", Err("is zero"));
        check("-5m", Err("not a duration"));
        check("99999999999999999999s", Err("longer than ten years"));
        check("4000d", Err("longer than ten years"));
    }

    #[test]
    fn display_is_canonical_and_round_trips() {
        for (seconds, text) in [(90, "1m30s"), (5_400, "1h30m"), (86_400, "1d"), (7, "7s")] {
            let span = Span::from_seconds(seconds).unwrap();
            assert_eq!(span.to_string(), text);
            assert_eq!(Span::parse(text), Ok(span));
        }
    }

    #[test]
    fn json_takes_text_or_seconds() {
        let from = |json: &str| serde_json::from_str::<Span>(json).map(Span::seconds);
        assert_eq!(from("\"15m\"").ok(), Some(900));
        assert_eq!(from("900").ok(), Some(900));
        assert!(from("0").is_err());
        assert!(from("-3").is_err());
        assert!(from("1.5").is_err());
        assert_eq!(
            serde_json::to_string(&Span::from_seconds(900).unwrap()).ok(),
            Some("\"15m\"".to_string())
        );
    }
}
