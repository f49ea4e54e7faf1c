//! Specs robfig accepts that almost certainly mean something else than they say.
//!
//! The parser stays robfig-exact (stored schedules keep running as they always did, and the
//! conformance cases stay green); these checks run where a user *enters* a spec (the API's
//! create and update, `sexton schedule next`), so a new schedule cannot silently:
//!
//! * run every second because its `@every` duration was zero, negative or under a second, or
//!   run every `n` seconds because robfig dropped the fraction of `@every 1.5s` (errors);
//! * never run, because no month has the day it names (`0 0 30 2 *`, `0 0 31 4,6 *`) or a field
//!   lists nothing at all (`,`) (errors);
//! * run less often than it reads: day 31 in a month set where some months have no 31st
//!   (robfig skips those months), or 29 February (only in leap years) (warnings).

use super::grammar::Kind;
use super::walk::{FieldBits, STAR_BIT};

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// A spec that cannot mean what it says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MeaningError {
    #[error("@every needs a positive duration; robfig would run this every second")]
    EveryNotPositive,
    #[error("@every under one second is not supported; robfig would run this every second")]
    EveryBelowOneSecond,
    #[error(
        "@every takes whole seconds; robfig drops the fraction and would run this every \
         {rounded_seconds}s"
    )]
    EveryFraction { rounded_seconds: u64 },
    #[error("the spec can never fire: the {field} field matches no value")]
    EmptyField { field: &'static str },
    #[error("the spec can never fire: {days} never falls in {months}")]
    NoSuchDay { days: String, months: String },
}

const MONTH_NAMES: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The longest each month can be (february in a leap year).
const MONTH_DAYS: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

pub(crate) fn check(kind: &Kind) -> Result<Vec<String>, MeaningError> {
    match *kind {
        Kind::Every {
            delay_seconds,
            written_nanos,
        } => {
            if written_nanos <= 0 {
                Err(MeaningError::EveryNotPositive)
            } else if written_nanos < NANOS_PER_SECOND {
                Err(MeaningError::EveryBelowOneSecond)
            } else if written_nanos % NANOS_PER_SECOND != 0 {
                Err(MeaningError::EveryFraction {
                    rounded_seconds: delay_seconds,
                })
            } else {
                Ok(Vec::new())
            }
        }
        Kind::Calendar(bits) => check_calendar(&bits),
    }
}

fn values(bits: u64) -> u64 {
    bits & !STAR_BIT
}

fn check_calendar(bits: &FieldBits) -> Result<Vec<String>, MeaningError> {
    for (field, field_bits) in [
        ("second", bits.second),
        ("minute", bits.minute),
        ("hour", bits.hour),
        ("month", bits.month),
    ] {
        if values(field_bits) == 0 {
            return Err(MeaningError::EmptyField { field });
        }
    }
    let dom_star = bits.dom & STAR_BIT != 0;
    let dow_star = bits.dow & STAR_BIT != 0;
    if !dom_star && !dow_star {
        // Both restricted: robfig ORs them, so the weekdays alone make it fire.
        if values(bits.dow) == 0 && values(bits.dom) == 0 {
            return Err(MeaningError::EmptyField {
                field: "day-of-month",
            });
        }
        return Ok(Vec::new());
    }
    if !dow_star && values(bits.dow) == 0 {
        return Err(MeaningError::EmptyField {
            field: "day-of-week",
        });
    }
    if dom_star {
        return Ok(Vec::new());
    }
    // Day-of-month restricted, weekdays any: each chosen month must have one of the days.
    let days = values(bits.dom);
    if days == 0 {
        return Err(MeaningError::EmptyField {
            field: "day-of-month",
        });
    }
    let months: Vec<usize> = (1..=12).filter(|m| bits.month & (1 << m) != 0).collect();
    let has_day = |month: usize| (1..=MONTH_DAYS[month - 1]).any(|d| days & (1 << d) != 0);
    let (possible, impossible): (Vec<usize>, Vec<usize>) =
        months.iter().partition(|&&month| has_day(month));
    let day_list = day_words(days);
    if possible.is_empty() {
        return Err(MeaningError::NoSuchDay {
            days: day_list,
            months: month_words(&impossible),
        });
    }
    let mut warnings = Vec::new();
    if !impossible.is_empty() {
        warnings.push(format!(
            "{day_list} never falls in {}: the schedule does not run in those months",
            month_words(&impossible)
        ));
    }
    let only_leap_day = possible == [2] && (1..=28).all(|d| days & (1 << d) == 0);
    if only_leap_day {
        warnings.push(
            "29 february exists only in leap years: the schedule runs once every four years"
                .to_string(),
        );
    }
    Ok(warnings)
}

fn day_words(days: u64) -> String {
    let list: Vec<String> = (1..=31)
        .filter(|d| days & (1 << d) != 0)
        .map(|d| d.to_string())
        .collect();
    match list.as_slice() {
        [one] => format!("day {one}"),
        _ => format!("days {}", list.join(",")),
    }
}

fn month_words(months: &[usize]) -> String {
    months
        .iter()
        .map(|m| MONTH_NAMES[m - 1])
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use crate::CronSpec;

    /// `Ok(n)`: accepted with `n` warnings; `Err(text)`: refused with a message holding it.
    fn check(spec: &str, expected: Result<usize, &str>) {
        let parsed = CronSpec::parse(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        match (parsed.check_meaning(), expected) {
            (Ok(warnings), Ok(n)) => assert_eq!(warnings.len(), n, "{spec}: {warnings:?}"),
            (Err(err), Err(fragment)) => {
                assert!(err.to_string().contains(fragment), "{spec}: {err}")
            }
            (got, _) => panic!("{spec}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn specs_that_mean_something_else_are_refused_or_warned() {
        check("@every 1s", Ok(0));
        check("@every 1h30m", Ok(0));
        check("@every 0s", Err("positive"));
        check("@every 0", Err("positive"));
        check("@every -1s", Err("positive"));
        check("@every 1ns", Err("under one second"));
        check("@every 1ms", Err("under one second"));
        check("@every 999ms", Err("under one second"));
        check("@every 1.5s", Err("every 1s"));
        check("0 0 30 2 *", Err("day 30 never falls in february"));
        check("0 0 31 4,6,9,11 *", Err("april, june, september, november"));
        check("0 0 30,31 feb *", Err("days 30,31"));
        check("0 0 , * *", Err("day-of-month field matches no value"));
        check(", * * * *", Err("minute field"));
        check("0 0 * * ,", Err("day-of-week"));
        // Fires: on weekdays alone when both day fields are restricted (robfig ORs them).
        check("0 0 30 2 1", Ok(0));
        check("0 0 31 * *", Ok(1));
        check("0 0 29 2 *", Ok(1));
        check("0 0 29,30 1,2 *", Ok(0));
        check("0 3 * * *", Ok(0));
        check("@daily", Ok(0));
        check("CRON_TZ=Europe/Berlin 0 0 30 2 *", Err("never"));
    }
}
