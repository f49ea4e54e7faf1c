//! Blackout windows: times at which a schedule must not start a backup (a batch window, the
//! business day, the days around a release freeze), in a named zone, correct across DST.
//!
//! A window is either **recurring**, starting at every match of a cron spec and lasting a
//! span (`{"cron": "0 8 * * 1-5", "duration": "10h", "zone": "Europe/Berlin"}`: weekdays from
//! 08:00 to 18:00 Berlin time), or a **calendar range** (`{"from": "2026-12-24", "to":
//! "2026-12-27", "zone": "Europe/Berlin"}`, or `from` with a `duration`). Without `zone` a
//! window is in UTC.
//!
//! Lengths are measured on the **wall clock** of the window's zone: "08:00 for 10h" ends at
//! 18:00 local time on the days the clocks change too (9 or 11 hours of real time then), which
//! is what a window written in local time means. A wall time that does not exist (inside a
//! spring-forward gap) is read with the offset in force before the gap, so it lands as far
//! after the gap as it was into it (02:30 becomes 03:30 in Berlin); a wall time that exists
//! twice (fall-back) is its first occurrence. Start times of recurring windows come from the
//! same robfig walk as schedules, evaluated in the window's zone.
//!
//! Windows are intervals `[start, end)`. Windows that overlap or touch form one blackout: a
//! run deferred to the end of a blackout is deferred to the end of the whole chain.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::cron::CronSpec;
use crate::span::Span;

/// The most windows one schedule may list.
pub const MAX_WINDOWS: usize = 32;
/// The longest a window may last: a year.
pub const MAX_WINDOW_SECONDS: u64 = 366 * 86_400;
/// How many window starts one membership test walks at most. Only a window that starts very
/// often and lasts very long (every minute, for months) gets near it.
const MAX_STARTS_WALKED: u32 = 100_000;
/// How many touching windows one blackout may chain before the search gives up (and the
/// blackout ends there).
const MAX_CHAINED: u32 = 1_000;

/// A window as a schedule document writes it; parsed with [`Window::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    /// A recurring window starts at each match of this 5-field cron spec (in `zone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// A calendar range starts here: `2026-12-24`, `2026-12-24T08:00` (wall time in `zone`),
    /// or an RFC 3339 instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// A calendar range ends here (exclusive); or give `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// How long each window lasts, on the wall clock of `zone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Span>,
    /// An IANA zone name; default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// What a due run inside a blackout does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnBlackout {
    /// The run is skipped, recorded with reason `blackout`.
    #[default]
    Skip,
    /// The run waits for the end of the blackout and fires then (one run for everything the
    /// blackout held back, as after downtime).
    Defer,
}

impl OnBlackout {
    pub fn as_str(self) -> &'static str {
        match self {
            OnBlackout::Skip => "skip",
            OnBlackout::Defer => "defer",
        }
    }

    /// For `skip_serializing_if`: the default is left out of stored documents.
    pub fn is_skip(&self) -> bool {
        *self == OnBlackout::Skip
    }
}

/// Why a window was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowError {
    #[error("a window needs either cron (with duration) or from (with to or duration)")]
    NeitherCronNorRange,
    #[error("a window has either cron or from, not both")]
    BothCronAndRange,
    #[error("a recurring window (cron) needs a duration")]
    CronWithoutDuration,
    #[error("a recurring window (cron) takes a duration, not to")]
    CronWithTo,
    #[error("a calendar range (from) needs either to or duration")]
    RangeWithoutEnd,
    #[error("a calendar range takes to or duration, not both")]
    RangeWithToAndDuration,
    #[error("window cron {spec:?}: {reason}")]
    InvalidCron { spec: String, reason: String },
    #[error("window cron {spec:?}: @every does not mark times of day; write a 5-field spec")]
    EveryInWindow { spec: String },
    #[error("window cron {spec:?} names a zone and so does zone {zone:?}; give it once")]
    TwoZones { spec: String, zone: String },
    #[error("unknown time zone {zone:?} (expected an IANA name such as Europe/Berlin)")]
    UnknownZone { zone: String },
    #[error("window time {text:?} is not a date (2026-12-24), a wall time (2026-12-24T08:00) or an RFC 3339 instant")]
    InvalidTime { text: String },
    #[error("window {from} to {to} ends before it starts")]
    EndsBeforeStart { from: String, to: String },
    #[error("window duration {duration} is longer than a year")]
    TooLong { duration: Span },
    #[error("more than {MAX_WINDOWS} blackout windows")]
    TooMany,
}

/// A parsed window.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    zone: Tz,
    kind: WindowKind,
}

#[derive(Debug, Clone, PartialEq)]
enum WindowKind {
    Recurring {
        starts: CronSpec,
        length: Span,
    },
    Range {
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    },
}

/// One blackout: a window occurrence, or several that overlap or touch, as `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Blackout {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Window {
    pub fn parse(spec: &WindowSpec) -> Result<Window, WindowError> {
        let zone = match spec.zone.as_deref() {
            None | Some("UTC") | Some("") => Tz::UTC,
            Some(name) => name.parse::<Tz>().map_err(|_| WindowError::UnknownZone {
                zone: excerpt(name),
            })?,
        };
        if let Some(duration) = spec.duration {
            if duration.seconds() > MAX_WINDOW_SECONDS {
                return Err(WindowError::TooLong { duration });
            }
        }
        let kind = match (&spec.cron, &spec.from) {
            (None, None) => return Err(WindowError::NeitherCronNorRange),
            (Some(_), Some(_)) => return Err(WindowError::BothCronAndRange),
            (Some(text), None) => {
                let length = spec.duration.ok_or(WindowError::CronWithoutDuration)?;
                if spec.to.is_some() {
                    return Err(WindowError::CronWithTo);
                }
                let starts = CronSpec::parse(text).map_err(|err| WindowError::InvalidCron {
                    spec: excerpt(text),
                    reason: err.to_string(),
                })?;
                if starts.every().is_some() {
                    return Err(WindowError::EveryInWindow {
                        spec: excerpt(text),
                    });
                }
                if let (Some(_), Some(zone)) = (starts.zone(), &spec.zone) {
                    return Err(WindowError::TwoZones {
                        spec: excerpt(text),
                        zone: excerpt(zone),
                    });
                }
                WindowKind::Recurring { starts, length }
            }
            (None, Some(from)) => {
                let start = parse_time(from, &zone)?;
                let end = match (&spec.to, spec.duration) {
                    (Some(_), Some(_)) => return Err(WindowError::RangeWithToAndDuration),
                    (None, None) => return Err(WindowError::RangeWithoutEnd),
                    (Some(to), None) => parse_time(to, &zone)?,
                    (None, Some(length)) => {
                        wall_add(&zone, start, length).ok_or(WindowError::InvalidTime {
                            text: excerpt(from),
                        })?
                    }
                };
                if end <= start {
                    return Err(WindowError::EndsBeforeStart {
                        from: excerpt(from),
                        to: spec.to.as_deref().map_or_else(|| end.to_rfc3339(), excerpt),
                    });
                }
                WindowKind::Range { start, end }
            }
        };
        Ok(Window { zone, kind })
    }

    /// Parses a schedule's whole list.
    pub fn parse_all(specs: &[WindowSpec]) -> Result<Vec<Window>, WindowError> {
        if specs.len() > MAX_WINDOWS {
            return Err(WindowError::TooMany);
        }
        specs.iter().map(Window::parse).collect()
    }

    /// The occurrence of this window that holds `t`, if any (the one ending last, when
    /// occurrences overlap).
    pub fn covering(&self, t: DateTime<Utc>) -> Option<Blackout> {
        match &self.kind {
            WindowKind::Range { start, end } => (*start <= t && t < *end).then_some(Blackout {
                start: *start,
                end: *end,
            }),
            WindowKind::Recurring { starts, length } => {
                // The latest start at or before `t` has the latest end (ends are starts plus
                // the same wall-clock length), so it alone decides. Starts further back than
                // the length (plus a margin for clock changes) cannot reach `t`.
                let reach = length.delta() + TimeDelta::hours(3);
                let mut cursor = t.checked_sub_signed(reach)?;
                let mut latest = None;
                for _ in 0..MAX_STARTS_WALKED {
                    match starts.next_after_in(cursor, &self.zone) {
                        Some(start) if start <= t => {
                            latest = Some(start);
                            cursor = start;
                        }
                        _ => break,
                    }
                }
                let start = latest?;
                let end = wall_add(&self.zone, start, *length)?;
                (t < end).then_some(Blackout { start, end })
            }
        }
    }

    /// The window in words, for `describe` and `schedule next`.
    pub fn describe(&self) -> String {
        match &self.kind {
            WindowKind::Recurring { starts, length } => {
                format!(
                    "from {:?} for {length} ({})",
                    starts.as_str(),
                    self.zone.name()
                )
            }
            WindowKind::Range { start, end } => format!(
                "from {} to {} ({})",
                start.with_timezone(&self.zone).format("%Y-%m-%dT%H:%M"),
                end.with_timezone(&self.zone).format("%Y-%m-%dT%H:%M"),
                self.zone.name()
            ),
        }
    }

    pub fn zone(&self) -> Tz {
        self.zone
    }
}

/// The blackout holding `t`: every window occurrence that holds it, extended through the
/// occurrences that overlap or touch its end. `None` when `t` is outside every window.
pub fn blackout_at(windows: &[Window], t: DateTime<Utc>) -> Option<Blackout> {
    let mut blackout = windows
        .iter()
        .filter_map(|window| window.covering(t))
        .reduce(|a, b| Blackout {
            start: a.start.min(b.start),
            end: a.end.max(b.end),
        })?;
    for _ in 0..MAX_CHAINED {
        let further = windows
            .iter()
            .filter_map(|window| window.covering(blackout.end))
            .map(|b| b.end)
            .max();
        match further {
            Some(end) if end > blackout.end => blackout.end = end,
            _ => break,
        }
    }
    Some(blackout)
}

/// `start` plus `length` on the wall clock of `zone`.
fn wall_add(zone: &Tz, start: DateTime<Utc>, length: Span) -> Option<DateTime<Utc>> {
    let wall = start
        .with_timezone(zone)
        .naive_local()
        .checked_add_signed(length.delta())?;
    Some(resolve(zone, wall))
}

/// A wall time in `zone` as an instant: the first of two in a fall-back overlap; in a
/// spring-forward gap, read with the offset in force a day before (so it moves past the gap).
fn resolve(zone: &Tz, wall: NaiveDateTime) -> DateTime<Utc> {
    match zone.from_local_datetime(&wall) {
        chrono::LocalResult::Single(t) => t.with_timezone(&Utc),
        chrono::LocalResult::Ambiguous(first, _) => first.with_timezone(&Utc),
        chrono::LocalResult::None => {
            let before = wall - TimeDelta::days(1);
            let offset = zone
                .offset_from_utc_datetime(&before)
                .fix()
                .local_minus_utc();
            (wall - TimeDelta::seconds(i64::from(offset))).and_utc()
        }
    }
}

/// A window's `from` or `to`: an RFC 3339 instant, or a wall time or date in `zone`.
fn parse_time(text: &str, zone: &Tz) -> Result<DateTime<Utc>, WindowError> {
    if let Ok(instant) = DateTime::parse_from_rfc3339(text) {
        return Ok(instant.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"] {
        if let Ok(wall) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(resolve(zone, wall));
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(resolve(zone, date.and_time(chrono::NaiveTime::MIN)));
    }
    Err(WindowError::InvalidTime {
        text: excerpt(text),
    })
}

fn excerpt(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn window(json: serde_json::Value) -> Window {
        let spec: WindowSpec = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
        Window::parse(&spec).unwrap_or_else(|e| panic!("{e}"))
    }

    fn check(windows: &[Window], t: &str, expected: Option<(&str, &str)>) {
        let got = blackout_at(windows, at(t)).map(|b| (b.start, b.end));
        assert_eq!(got, expected.map(|(s, e)| (at(s), at(e))), "at {t}");
    }

    #[test]
    fn a_recurring_window_keeps_its_wall_clock_hours_across_dst() {
        // 01:00 to 04:00 Berlin time, every night.
        let nightly = [window(
            serde_json::json!({"cron": "0 1 * * *", "duration": "3h", "zone": "Europe/Berlin"}),
        )];
        // An ordinary winter night: 00:00Z to 03:00Z.
        check(
            &nightly,
            "2026-03-28T00:00:00Z",
            Some(("2026-03-28T00:00:00Z", "2026-03-28T03:00:00Z")),
        );
        check(
            &nightly,
            "2026-03-28T02:59:59Z",
            Some(("2026-03-28T00:00:00Z", "2026-03-28T03:00:00Z")),
        );
        check(&nightly, "2026-03-28T03:00:00Z", None);
        check(&nightly, "2026-03-27T23:59:59Z", None);
        // The spring-forward night: 01:00 CET is 00:00Z, 04:00 CEST is 02:00Z (2 h of real time).
        check(
            &nightly,
            "2026-03-29T01:30:00Z",
            Some(("2026-03-29T00:00:00Z", "2026-03-29T02:00:00Z")),
        );
        check(&nightly, "2026-03-29T02:00:00Z", None);
        // The fall-back night: 01:00 CEST is 23:00Z, 04:00 CET is 03:00Z (4 h of real time).
        check(
            &nightly,
            "2026-10-25T02:30:00Z",
            Some(("2026-10-24T23:00:00Z", "2026-10-25T03:00:00Z")),
        );
        check(&nightly, "2026-10-25T03:00:00Z", None);
    }

    #[test]
    fn calendar_ranges_and_chains() {
        let freeze = window(serde_json::json!(
            {"from": "2026-12-24", "to": "2026-12-27", "zone": "Europe/Berlin"}));
        let after = window(serde_json::json!(
            {"from": "2026-12-27T00:00", "duration": "1d", "zone": "Europe/Berlin"}));
        let windows = [freeze, after];
        // Two touching ranges are one blackout, from the first start to the last end.
        check(
            &windows,
            "2026-12-25T12:00:00Z",
            Some(("2026-12-23T23:00:00Z", "2026-12-27T23:00:00Z")),
        );
        check(&windows, "2026-12-23T22:59:59Z", None);
        check(&windows, "2026-12-27T23:00:00Z", None);
    }

    #[test]
    fn refusals_say_what_is_wrong() {
        let refuse = |json: serde_json::Value, fragment: &str| {
            let spec: WindowSpec = match serde_json::from_value(json.clone()) {
                Ok(spec) => spec,
                Err(err) => {
                    assert!(err.to_string().contains(fragment), "{json}: {err}");
                    return;
                }
            };
            match Window::parse(&spec) {
                Ok(_) => panic!("{json} accepted"),
                Err(err) => assert!(err.to_string().contains(fragment), "{json}: {err}"),
            }
        };
        refuse(serde_json::json!({}), "either cron");
        refuse(serde_json::json!({"cron": "0 1 * * *"}), "needs a duration");
        refuse(
            serde_json::json!({"cron": "@every 1h", "duration": "1h"}),
            "@every",
        );
        refuse(
            serde_json::json!({"cron": "0 1 * * *", "duration": "1h", "zone": "Mars/Base"}),
            "unknown time zone",
        );
        refuse(
            serde_json::json!({"cron": "CRON_TZ=UTC 0 1 * * *", "duration": "1h", "zone": "UTC"}),
            "give it once",
        );
        refuse(
            serde_json::json!({"from": "2026-12-24"}),
            "needs either to or duration",
        );
        refuse(
            serde_json::json!({"from": "2026-12-24", "to": "2026-12-23"}),
            "ends before it starts",
        );
        refuse(
            serde_json::json!({"from": "christmas", "to": "2026-12-23"}),
            "is not a date",
        );
        refuse(
            serde_json::json!({"cron": "0 1 * * *", "duration": "400d"}),
            "longer than a year",
        );
        refuse(
            serde_json::json!({"cron": "0 1 * * *", "duration": "1h", "until": "x"}),
            "unknown field",
        );
    }
}
