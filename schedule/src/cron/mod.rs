//! `CronSpec`: a parsed, validated cron schedule with robfig/cron v3.0.1's exact semantics.
//!
//! This is the type the rest of Sexton holds instead of a cron string ("parse once, at the
//! boundary"): deserialising one rejects a bad spec, and asking it for the next run time does no
//! string work at all, only a bitset walk over the calendar.
//!
//! Why robfig and not a crate's own dialect: Velero and Kubernetes parse schedules with
//! robfig/cron, so that is the grammar and the next-time behaviour our users already rely on.
//! The `cron` crate differs on every point that matters here (it needs a seconds field, numbers
//! weekdays from 1 = Sunday, ANDs day-of-month with day-of-week, and in a repeated DST hour can
//! return a time before its input), so we port robfig instead of wrapping it.

mod error;
mod go_duration;
mod grammar;
mod meaning;
mod walk;

pub use error::{CronError, DurationError, Excerpt, Field};
pub use meaning::MeaningError;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use grammar::{Kind, Layout, SpecZone};
use std::fmt;
use std::str::FromStr;

/// A cron schedule in robfig/cron's standard syntax: five fields (minute hour day-of-month month
/// day-of-week), a descriptor (`@daily`, `@every 6h`, ...), optionally prefixed by
/// `CRON_TZ=<IANA zone> ` or `TZ=<IANA zone> `.
///
/// A spec without a zone prefix is evaluated in UTC by [`CronSpec::next_after`] (Velero's pods
/// normally run in UTC), or in a zone of the caller's choice by [`CronSpec::next_after_in`].
#[derive(Clone, Debug, PartialEq)]
pub struct CronSpec {
    /// The text exactly as given, for `Display`, serialisation and error reports.
    text: String,
    zone: SpecZone,
    kind: Kind,
}

impl CronSpec {
    /// Parses a spec with robfig/cron's `ParseStandard` grammar: it accepts exactly what robfig
    /// accepts (the one exception: robfig panics on a zone prefix with nothing after it; we return
    /// an error).
    pub fn parse(spec: &str) -> Result<CronSpec, CronError> {
        Self::parse_with(spec, Layout::Standard)
    }

    /// Parses robfig's 6-field test syntax (a leading seconds field, day-of-week optional).
    ///
    /// **Not user-facing.** Velero and Kubernetes never accept a seconds field; this exists only
    /// so the conformance tests can replay robfig's own seconds-based test cases (DST gaps and
    /// repeats, month ends, leap days) through the same next-time engine. Nothing in Sexton may
    /// call it on user input.
    #[doc(hidden)]
    pub fn parse_with_seconds(spec: &str) -> Result<CronSpec, CronError> {
        Self::parse_with(spec, Layout::WithSeconds)
    }

    /// A user's spec as Sexton stores it: CloudNativePG's 6-field form (a seconds field first,
    /// as `ScheduledBackup.spec.schedule` takes it) becomes the 5-field spec, when its seconds
    /// field is `0`: a schedule fires on whole minutes, so any other second is refused rather
    /// than rounded. Five fields, descriptors and `CRON_TZ=` prefixes pass unchanged (so does
    /// anything else: [`CronSpec::parse`] judges it). The door of the API's create and update
    /// and of the CLI's offline commands; [`CronSpec::parse`] itself stays robfig's grammar.
    pub fn five_field_form(spec: &str) -> Result<std::borrow::Cow<'_, str>, CronError> {
        use std::borrow::Cow;
        let (prefix, body) = match spec.find(' ') {
            Some(space) if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") => {
                (&spec[..space], spec[space..].trim())
            }
            _ => ("", spec.trim()),
        };
        if body.starts_with('@') {
            return Ok(Cow::Borrowed(spec));
        }
        let fields: Vec<&str> = body.split_whitespace().collect();
        let [seconds, rest @ ..] = fields.as_slice() else {
            return Ok(Cow::Borrowed(spec));
        };
        if fields.len() != 6 {
            return Ok(Cow::Borrowed(spec));
        }
        if !seconds.chars().all(|c| c == '0') {
            return Err(CronError::SecondsNotZero {
                seconds: Excerpt::new(seconds),
            });
        }
        let five = rest.join(" ");
        Ok(Cow::Owned(if prefix.is_empty() {
            five
        } else {
            format!("{prefix} {five}")
        }))
    }

    fn parse_with(spec: &str, layout: Layout) -> Result<CronSpec, CronError> {
        let (zone, kind) = grammar::parse(spec, layout)?;
        Ok(CronSpec {
            text: spec.to_owned(),
            zone,
            kind,
        })
    }

    /// The spec as it was written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The zone named by a `CRON_TZ=`/`TZ=` prefix, if any (`TZ=Local` counts as none).
    pub fn zone(&self) -> Option<Tz> {
        match self.zone {
            SpecZone::Inherit => None,
            SpecZone::Named(tz) => Some(tz),
        }
    }

    /// For `@every <duration>`: the delay between runs, after robfig's rounding (whole seconds,
    /// at least one second, so `@every 0s` and `@every -5m` run every second, as in robfig).
    pub fn every(&self) -> Option<std::time::Duration> {
        match self.kind {
            Kind::Every { delay_seconds, .. } => {
                Some(std::time::Duration::from_secs(delay_seconds))
            }
            Kind::Calendar(_) => None,
        }
    }

    /// Whether the spec means what it says, for a spec a user is entering (the parser itself
    /// accepts whatever robfig accepts): refuses `@every` durations that robfig rounds into
    /// something else and specs that can never fire; warns (the list) about specs that run
    /// less often than they read, such as day 31 or 29 february.
    pub fn check_meaning(&self) -> Result<Vec<String>, MeaningError> {
        meaning::check(&self.kind)
    }

    /// The first run strictly after `after`, evaluating a spec without a zone prefix in UTC.
    ///
    /// `None` when robfig would give up: no matching time within five years of `after` (for
    /// example `0 0 30 2 *`), or past the end of chrono's calendar.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_after_in(after, &Utc)
    }

    /// Like [`CronSpec::next_after`], but a spec without a zone prefix is evaluated in `zone`
    /// (robfig evaluates such a spec in the zone of the time it is given). A `CRON_TZ=` prefix
    /// always wins over `zone`.
    pub fn next_after_in<Z: TimeZone>(
        &self,
        after: DateTime<Utc>,
        zone: &Z,
    ) -> Option<DateTime<Utc>> {
        let next = match (&self.kind, self.zone) {
            (Kind::Every { delay_seconds, .. }, _) => {
                // robfig's ConstantDelaySchedule: drop the sub-second part, add the delay.
                let delay = TimeDelta::try_seconds(i64::try_from(*delay_seconds).ok()?)?;
                let whole_second = after.timestamp();
                DateTime::from_timestamp(whole_second, 0)?.checked_add_signed(delay)
            }
            (Kind::Calendar(bits), SpecZone::Named(tz)) => walk::next_matching(bits, &tz, after),
            (Kind::Calendar(bits), SpecZone::Inherit) => walk::next_matching(bits, zone, after),
        }?;
        // Both schedules move forward by construction (the walk starts at the next whole second
        // and only ever adds; @every adds at least one second). Should that reasoning ever fail,
        // answering "no next run" is safer than a run in the past, which a scheduler loop would
        // fire over and over.
        (next > after).then_some(next)
    }

    /// The next `n` runs after `after` (fewer if the schedule gives up), evaluated as by
    /// [`CronSpec::next_after`].
    pub fn upcoming(&self, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        self.upcoming_in(after, n, &Utc)
    }

    /// The next `n` runs after `after`, evaluated as by [`CronSpec::next_after_in`].
    pub fn upcoming_in<Z: TimeZone>(
        &self,
        after: DateTime<Utc>,
        n: usize,
        zone: &Z,
    ) -> Vec<DateTime<Utc>> {
        // The capacity is capped: `n` comes from a CLI flag and need not be sane.
        let mut runs = Vec::with_capacity(n.min(1024));
        let mut cursor = after;
        while runs.len() < n {
            match self.next_after_in(cursor, zone) {
                Some(next) => {
                    runs.push(next);
                    cursor = next;
                }
                None => break,
            }
        }
        runs
    }

    /// Whether some run after `base` falls in `[now - window, now)`: that is, whether the newest
    /// run missed since `base` is at most `window` old. Used for Kubernetes-style starting
    /// deadlines; `first_missed` must be `self.next_after(base)` and before `now`.
    pub(crate) fn missed_run_within(
        &self,
        base: DateTime<Utc>,
        first_missed: DateTime<Utc>,
        now: DateTime<Utc>,
        window: TimeDelta,
    ) -> bool {
        match self.kind {
            Kind::Every { delay_seconds, .. } => {
                // The runs after `base` are first_missed + k * delay; the newest one before
                // `now` is found by division rather than by walking (a week of downtime on
                // `@every 1s` is 600,000 runs).
                let nanos = |delta: TimeDelta| {
                    i128::from(delta.num_seconds()) * 1_000_000_000
                        + i128::from(delta.subsec_nanos())
                };
                let since_first = nanos(now - first_missed);
                let delay = i128::from(delay_seconds) * 1_000_000_000;
                if since_first <= 0 || delay <= 0 {
                    return false;
                }
                let newest_age = since_first - (since_first - 1) / delay * delay;
                newest_age <= nanos(window)
            }
            Kind::Calendar(_) => {
                // The first run at or after `now - window` (and after `base`) is the answer's
                // witness: the walk finds the first run strictly after a time, so start it one
                // nanosecond earlier.
                let window_start = now
                    .checked_sub_signed(window)
                    .and_then(|start| start.checked_sub_signed(TimeDelta::nanoseconds(1)));
                let probe_from = match window_start {
                    Some(start) if start > base => start,
                    _ => base,
                };
                self.next_after(probe_from).is_some_and(|run| run < now)
            }
        }
    }
}

impl fmt::Display for CronSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for CronSpec {
    type Err = CronError;

    fn from_str(spec: &str) -> Result<CronSpec, CronError> {
        CronSpec::parse(spec)
    }
}

impl serde::Serialize for CronSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for CronSpec {
    /// Deserialising parses, so a bad spec is rejected where it enters the system.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<CronSpec, D::Error> {
        let text = String::deserialize(deserializer)?;
        CronSpec::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or(DateTime::UNIX_EPOCH)
    }

    fn spec(text: &str) -> CronSpec {
        match CronSpec::parse(text) {
            Ok(spec) => spec,
            Err(error) => panic!("{text}: {error}"),
        }
    }

    #[test]
    fn every_truncates_to_the_second_then_adds() {
        let every = spec("@every 5m");
        assert_eq!(
            every.next_after(at("2024-01-01T00:00:00.5Z")),
            Some(at("2024-01-01T00:05:00Z"))
        );
        assert_eq!(every.every(), Some(std::time::Duration::from_secs(300)));
    }

    #[test]
    fn missed_run_window_for_calendar_specs() {
        let hourly = spec("0 * * * *");
        let base = at("2024-01-01T05:30:00Z");
        let first = at("2024-01-01T06:00:00Z");
        let minutes = |m| TimeDelta::minutes(m);
        // Down from 05:30 to 10:05: the 10:00 run is five minutes old.
        assert!(hourly.missed_run_within(base, first, at("2024-01-01T10:05:00Z"), minutes(10)));
        assert!(hourly.missed_run_within(base, first, at("2024-01-01T10:10:00Z"), minutes(10)));
        assert!(!hourly.missed_run_within(base, first, at("2024-01-01T10:10:01Z"), minutes(10)));
    }

    #[test]
    fn missed_run_window_for_every() {
        let every = spec("@every 10m");
        let base = at("2024-01-01T00:00:00Z");
        let first = at("2024-01-01T00:10:00Z");
        // Runs at 00:10, 00:20, ...; at 01:03 the newest missed one (01:00) is 3 minutes old.
        let now = at("2024-01-01T01:03:00Z");
        assert!(every.missed_run_within(base, first, now, TimeDelta::minutes(3)));
        assert!(!every.missed_run_within(base, first, now, TimeDelta::seconds(179)));
        // Exactly on a run, that run is not missed yet (due means strictly after).
        let on_run = at("2024-01-01T01:00:00Z");
        assert!(!every.missed_run_within(base, first, on_run, TimeDelta::seconds(599)));
        assert!(every.missed_run_within(base, first, on_run, TimeDelta::minutes(10)));
    }

    #[test]
    fn serde_round_trips_as_the_original_text() {
        let parsed: CronSpec = serde_json::from_str("\"CRON_TZ=Europe/Berlin  0 3 * * *\"")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parsed.zone(), Some(Tz::Europe__Berlin));
        assert_eq!(
            serde_json::to_string(&parsed).ok().as_deref(),
            Some("\"CRON_TZ=Europe/Berlin  0 3 * * *\"")
        );
        assert!(serde_json::from_str::<CronSpec>("\"0 0 * * 7\"").is_err());
    }
}
