//! Why a cron spec was rejected.
//!
//! One typed error for every way robfig/cron v3.0.1 refuses a spec (plus the prefix without a
//! schedule, on which robfig panics instead of returning an error). The messages are ours: they
//! name the field and quote the offending text so an API client can fix the spec without reading
//! Go source. Parse errors are never retryable: the same text always fails the same way.

use std::fmt;

/// The longest excerpt of user text quoted in an error message. Specs are user input of any
/// length; echoing a megabyte back in an API error or a log line helps nobody.
const MAX_EXCERPT_CHARS: usize = 64;

/// A cron spec that robfig/cron's standard parser would not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CronError {
    #[error("empty cron spec")]
    Empty,

    #[error(
        "expected exactly 5 fields (minute hour day-of-month month day-of-week) or a descriptor \
         such as @daily, found {found} fields"
    )]
    FieldCount { found: usize },

    #[error(
        "expected 5 or 6 fields (second minute hour day-of-month month [day-of-week]), found \
         {found} fields"
    )]
    SecondsFieldCount { found: usize },

    #[error(
        "6 fields read as CloudNativePG's (second minute hour day-of-month month day-of-week): \
         the seconds field must be 0, Sexton fires on whole minutes; found {seconds}"
    )]
    SecondsNotZero { seconds: Excerpt },

    #[error("{field}: {value} is neither a number nor a {field} name")]
    NotANumber { field: Field, value: Excerpt },

    #[error("{field}: {value} is below the minimum {min} in {expr}")]
    BelowMinimum {
        field: Field,
        value: u64,
        min: u64,
        expr: Excerpt,
    },

    #[error("{field}: {value} is above the maximum {max} in {expr}")]
    AboveMaximum {
        field: Field,
        value: u64,
        max: u64,
        expr: Excerpt,
    },

    #[error("day-of-week: 7 is not a weekday here, sunday is 0 (0-6 or sun-sat) in {expr}")]
    SundayAsSeven { expr: Excerpt },

    #[error("{field}: range start {start} is after its end {end} in {expr}")]
    ReversedRange {
        field: Field,
        start: u64,
        end: u64,
        expr: Excerpt,
    },

    #[error("{field}: the step must be a positive number in {expr}")]
    ZeroStep { field: Field, expr: Excerpt },

    #[error("{field}: too many hyphens in {expr}")]
    TooManyHyphens { field: Field, expr: Excerpt },

    #[error("{field}: too many slashes in {expr}")]
    TooManySlashes { field: Field, expr: Excerpt },

    #[error("unknown time zone {zone} (expected an IANA name such as Europe/Berlin)")]
    UnknownZone { zone: Excerpt },

    #[error(
        "a CRON_TZ= or TZ= prefix must be followed by a space and the schedule, as in \
         \"CRON_TZ=Europe/Berlin 0 3 * * *\""
    )]
    ZoneWithoutSchedule,

    #[error(
        "unrecognized descriptor {descriptor} (expected @yearly, @annually, @monthly, @weekly, \
         @daily, @midnight, @hourly or @every <duration>)"
    )]
    UnknownDescriptor { descriptor: Excerpt },

    #[error("invalid @every duration {duration}: {reason}")]
    InvalidDuration {
        duration: Excerpt,
        reason: DurationError,
    },
}

/// Why the duration of `@every <duration>` is not a Go duration (`time.ParseDuration`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    #[error("expected a go duration such as 90s, 1h30m or 1.5h")]
    Invalid,
    #[error("missing unit (ns, us, ms, s, m or h)")]
    MissingUnit,
    #[error("unknown unit {unit} (expected ns, us, ms, s, m or h)")]
    UnknownUnit { unit: Excerpt },
    #[error("out of range (at most about 292 years)")]
    Overflow,
}

/// The five (or, for the test-only parser, six) cron fields, named as users know them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
        })
    }
}

/// A quoted, length-bounded copy of the user text an error is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt(String);

impl Excerpt {
    pub(crate) fn new(text: &str) -> Excerpt {
        match text.char_indices().nth(MAX_EXCERPT_CHARS) {
            None => Excerpt(text.to_owned()),
            Some((cut, _)) => Excerpt(format!("{}…", &text[..cut])),
        }
    }

    /// The (possibly shortened) text, without quotes.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Excerpt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug formatting quotes the text and escapes control characters, so a spec with a
        // newline or an escape sequence cannot forge log lines.
        write!(f, "{:?}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_bounded_and_quoted() {
        let long = "x".repeat(10_000);
        let shown = Excerpt::new(&long).to_string();
        assert!(shown.len() < 80, "{shown}");
        assert_eq!(Excerpt::new("a\nb").to_string(), "\"a\\nb\"");
    }
}
