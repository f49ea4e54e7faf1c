//! Calendar arithmetic exactly as restic (Go) does it, so that `keep_within` and the
//! grandfather-father-son buckets agree with `restic forget` to the nanosecond.
//!
//! Two things differ from what chrono does by default and are the reason this module exists:
//! Go's `AddDate` normalises an impossible date forward (2016-03-31 minus one month is
//! "2016-02-31", which is 2016-03-02) where chrono clamps to the month end; and bucket values
//! are read in each backup's own recorded UTC offset. The bucket functions work on plain
//! integers (nanoseconds since the epoch plus an offset in seconds) because they run once per
//! backup in the engine's hot loop.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, TimeDelta};

/// A restic duration: years, months, days and hours, applied with Go's calendar arithmetic.
///
/// Written `1y2m3d4h`; the parts may come in any order (`1y1d1m` is `1y1m1d`), each at most
/// once. `m` is months, not minutes; there is no week unit (write `7d`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CalendarDuration {
    pub years: u32,
    pub months: u32,
    pub days: u32,
    pub hours: u32,
}

/// Why a duration string was rejected. Messages are lowercase and say what to write instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration; write e.g. \"7d\" or \"1y2m3d4h\"")]
    Empty,
    #[error("expected a number in {text:?}; write e.g. \"7d\" or \"1y2m3d4h\"")]
    ExpectedNumber { text: String },
    #[error("missing unit after {number} in {text:?}; units are y, m or mo (months), d and h")]
    MissingUnit { number: u64, text: String },
    #[error("unknown unit {unit:?} in {text:?}; units are y (years), m or mo (months), d (days) and h (hours), and a week is 7d")]
    UnknownUnit { unit: char, text: String },
    #[error("{text:?}: minutes are not a unit here (m and mo are months); the units are y, m or mo, d and h, the smallest an hour")]
    Minutes { text: String },
    #[error("unit {unit:?} appears twice in {text:?}")]
    RepeatedUnit { unit: char, text: String },
    #[error("number too large in {text:?}")]
    TooLarge { text: String },
    #[error("duration {text:?} is zero; leave the rule out instead")]
    Zero { text: String },
}

impl CalendarDuration {
    /// Parses `1y2m3d4h`. Negative numbers, unknown units, repeated units and zero are errors.
    pub fn parse(text: &str) -> Result<CalendarDuration, DurationError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(DurationError::Empty);
        }
        let mut duration = CalendarDuration::default();
        let mut seen = [false; 4];
        let mut rest = trimmed;
        while !rest.is_empty() {
            let n_digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if n_digits == 0 {
                return Err(DurationError::ExpectedNumber {
                    text: trimmed.to_owned(),
                });
            }
            let number: u64 = rest[..n_digits]
                .parse()
                .map_err(|_| DurationError::TooLarge {
                    text: trimmed.to_owned(),
                })?;
            let number = u32::try_from(number).map_err(|_| DurationError::TooLarge {
                text: trimmed.to_owned(),
            })?;
            rest = &rest[n_digits..];
            let Some(unit) = rest.chars().next() else {
                return Err(DurationError::MissingUnit {
                    number: u64::from(number),
                    text: trimmed.to_owned(),
                });
            };
            // Minutes are not a unit here (restic's durations have none): said plainly, not
            // read as months followed by garbage.
            if rest.starts_with("min") {
                return Err(DurationError::Minutes {
                    text: trimmed.to_owned(),
                });
            }
            // `mo`: months, spelled so that nobody reads minutes (issue 50).
            let unit_len = if rest.starts_with("mo") {
                2
            } else {
                unit.len_utf8()
            };
            let (slot, field) = match unit {
                'y' => (0, &mut duration.years),
                'm' => (1, &mut duration.months),
                'd' => (2, &mut duration.days),
                'h' => (3, &mut duration.hours),
                _ => {
                    return Err(DurationError::UnknownUnit {
                        unit,
                        text: trimmed.to_owned(),
                    })
                }
            };
            if seen[slot] {
                return Err(DurationError::RepeatedUnit {
                    unit,
                    text: trimmed.to_owned(),
                });
            }
            seen[slot] = true;
            *field = number;
            rest = &rest[unit_len..];
        }
        if duration.is_zero() {
            return Err(DurationError::Zero {
                text: trimmed.to_owned(),
            });
        }
        Ok(duration)
    }

    pub fn is_zero(&self) -> bool {
        self.years == 0 && self.months == 0 && self.days == 0 && self.hours == 0
    }

    /// `reference.AddDate(-years, -months, -days).Add(-hours)` in Go, computed in the
    /// reference's own offset. `None` when the result is outside chrono's range, which callers
    /// treat as "earlier than any backup".
    pub fn before(&self, reference: DateTime<FixedOffset>) -> Option<DateTime<FixedOffset>> {
        let local = go_add_date(
            reference.naive_local(),
            -i64::from(self.years),
            -i64::from(self.months),
            -i64::from(self.days),
        )?;
        let shifted = local.checked_sub_signed(TimeDelta::hours(i64::from(self.hours)))?;
        shifted.and_local_timezone(*reference.offset()).single()
    }
}

impl CalendarDuration {
    /// `reference.AddDate(years, months, days).Add(hours)` in Go, in the reference's own
    /// offset: when a lock of this length set at `reference` expires. `None` when the result is
    /// outside chrono's range.
    pub fn after(&self, reference: DateTime<FixedOffset>) -> Option<DateTime<FixedOffset>> {
        let local = go_add_date(
            reference.naive_local(),
            i64::from(self.years),
            i64::from(self.months),
            i64::from(self.days),
        )?;
        let shifted = local.checked_add_signed(TimeDelta::hours(i64::from(self.hours)))?;
        shifted.and_local_timezone(*reference.offset()).single()
    }
}

impl fmt::Display for CalendarDuration {
    /// Non-zero parts in the order y, m, d, h, like restic (`1m14d`, `13d23h`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (value, unit) in [
            (self.years, 'y'),
            (self.months, 'm'),
            (self.days, 'd'),
            (self.hours, 'h'),
        ] {
            if value != 0 {
                write!(f, "{value}{unit}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for CalendarDuration {
    type Err = DurationError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        CalendarDuration::parse(text)
    }
}

/// Go's `time.Date(year+y, month+m, day+d, …)`: months overflow into years first, then the
/// day count is added to the first of the resulting month, so "February 31" rolls forward.
pub fn go_add_date(
    local: NaiveDateTime,
    years: i64,
    months: i64,
    days: i64,
) -> Option<NaiveDateTime> {
    let total_months = i64::from(local.year())
        .checked_mul(12)?
        .checked_add(i64::from(local.month0()))?
        .checked_add(years.checked_mul(12)?)?
        .checked_add(months)?;
    let year = i32::try_from(total_months.div_euclid(12)).ok()?;
    let month = u32::try_from(total_months.rem_euclid(12)).ok()? + 1;
    let first_of_month = NaiveDate::from_ymd_opt(year, month, 1)?;
    let day_offset = i64::from(local.day0()).checked_add(days)?;
    let date = first_of_month.checked_add_signed(TimeDelta::try_days(day_offset)?)?;
    Some(date.and_time(local.time()))
}

const NANOS_PER_SECOND: i64 = 1_000_000_000;
const SECONDS_PER_DAY: i64 = 86_400;

/// restic's bucket values of one instant read in one UTC offset, computed without chrono
/// because this runs for every backup a bucket rule looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalFields {
    pub year: i64,
    pub month: i64,
    pub day: i64,
    pub hour: i64,
    /// Days since 1970-01-01 of the local date.
    pub epoch_day: i64,
}

impl LocalFields {
    #[cfg(test)]
    pub fn new(nanos_since_epoch: i64, offset_seconds: i32) -> LocalFields {
        CalendarCache::new().fields(nanos_since_epoch, offset_seconds)
    }

    /// restic's `ymdh`: `YYYYMMDDHH`.
    pub fn hourly(&self) -> i64 {
        self.year * 1_000_000 + self.month * 10_000 + self.day * 100 + self.hour
    }

    /// restic's `ymd`: `YYYYMMDD`.
    pub fn daily(&self) -> i64 {
        self.year * 10_000 + self.month * 100 + self.day
    }

    /// restic's `yw`: ISO-8601 year × 100 + ISO week (Monday start; 2021-01-03 is 2020-W53).
    pub fn weekly(&self) -> i64 {
        let (iso_year, iso_week) = iso_week(self.epoch_day);
        iso_year * 100 + iso_week
    }

    /// restic's `ym`: `YYYYMM`.
    pub fn monthly(&self) -> i64 {
        self.year * 100 + self.month
    }

    /// restic's `y`.
    pub fn yearly(&self) -> i64 {
        self.year
    }
}

/// Remembers the date and ISO week of the last local day seen: backups sorted by time come
/// many to a day, so most of them skip the date arithmetic.
#[derive(Clone, Copy, Debug)]
pub struct CalendarCache {
    epoch_day: i64,
    year_month_day: (i64, i64, i64),
    weekly: Option<i64>,
}

impl Default for CalendarCache {
    fn default() -> Self {
        CalendarCache::new()
    }
}

impl CalendarCache {
    pub fn new() -> CalendarCache {
        CalendarCache {
            epoch_day: i64::MIN,
            year_month_day: (0, 0, 0),
            weekly: None,
        }
    }

    pub fn fields(&mut self, nanos_since_epoch: i64, offset_seconds: i32) -> LocalFields {
        let local_seconds =
            nanos_since_epoch.div_euclid(NANOS_PER_SECOND) + i64::from(offset_seconds);
        let epoch_day = local_seconds.div_euclid(SECONDS_PER_DAY);
        if epoch_day != self.epoch_day {
            self.epoch_day = epoch_day;
            self.year_month_day = civil_from_days(epoch_day);
            self.weekly = None;
        }
        let (year, month, day) = self.year_month_day;
        LocalFields {
            year,
            month,
            day,
            hour: local_seconds.rem_euclid(SECONDS_PER_DAY) / 3600,
            epoch_day,
        }
    }

    /// The weekly bucket of `fields`, which must come from the last call to [`Self::fields`].
    pub fn weekly(&mut self, fields: &LocalFields) -> i64 {
        *self.weekly.get_or_insert_with(|| fields.weekly())
    }
}

/// Howard Hinnant's `civil_from_days`: proleptic Gregorian (year, month, day) of a day count
/// since 1970-01-01.
pub fn civil_from_days(epoch_day: i64) -> (i64, i64, i64) {
    let z = epoch_day + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Hinnant's `days_from_civil`, the inverse of [`civil_from_days`].
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_index = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// ISO-8601 (year, week) of a day: the week belongs to the year that holds its Thursday.
pub fn iso_week(epoch_day: i64) -> (i64, i64) {
    // 1970-01-01 was a Thursday; Monday = 0.
    let weekday_from_monday = (epoch_day + 3).rem_euclid(7);
    let thursday = epoch_day - weekday_from_monday + 3;
    let (iso_year, _, _) = civil_from_days(thursday);
    let week = (thursday - days_from_civil(iso_year, 1, 1)) / 7 + 1;
    (iso_year, week)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{IsoWeek, Timelike};

    fn at(text: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(text).unwrap()
    }

    #[test]
    fn months_are_m_or_mo_and_minutes_are_refused_by_name() {
        let parse = |text: &str| CalendarDuration::parse(text);
        assert_eq!(parse("15mo").unwrap(), parse("15m").unwrap());
        assert_eq!(parse("1y2mo3d4h").unwrap(), parse("1y2m3d4h").unwrap());
        assert_eq!(parse("15mo").unwrap().months, 15);
        for text in ["15min", "1d30min", "2mins"] {
            let err = parse(text).unwrap_err();
            assert!(
                matches!(err, DurationError::Minutes { .. }),
                "{text}: {err}"
            );
            assert!(err.to_string().contains("minutes are not a unit"), "{err}");
        }
        // `mo` twice, or `m` and `mo`, is the same unit twice.
        assert!(matches!(
            parse("1m2mo"),
            Err(DurationError::RepeatedUnit { .. })
        ));
        assert!(matches!(
            parse("1mx"),
            Err(DurationError::ExpectedNumber { .. })
        ));
    }

    #[test]
    fn go_month_arithmetic_rolls_forward() {
        let one_month = CalendarDuration::parse("1m").unwrap();
        assert_eq!(
            one_month.before(at("2016-03-31T12:00:00Z")),
            Some(at("2016-03-02T12:00:00Z"))
        );
        let one_year = CalendarDuration::parse("1y").unwrap();
        assert_eq!(
            one_year.before(at("2016-02-29T00:00:00+05:00")),
            Some(at("2015-03-01T00:00:00+05:00"))
        );
        let days_and_hours = CalendarDuration::parse("1d25h").unwrap();
        assert_eq!(
            days_and_hours.before(at("2016-03-01T00:30:00-03:00")),
            Some(at("2016-02-27T23:30:00-03:00"))
        );
    }

    #[test]
    fn far_past_is_none_not_a_panic() {
        let huge = CalendarDuration::parse("4000000000y").unwrap();
        assert_eq!(huge.before(at("2016-01-01T00:00:00Z")), None);
    }

    #[test]
    fn parses_and_renders_like_restic() {
        let d = CalendarDuration::parse("1y1d1m").unwrap();
        assert_eq!(
            d,
            CalendarDuration {
                years: 1,
                months: 1,
                days: 1,
                hours: 0
            }
        );
        assert_eq!(d.to_string(), "1y1m1d");
        assert_eq!(
            CalendarDuration::parse("13d23h").unwrap().to_string(),
            "13d23h"
        );
        for bad in [
            "",
            "4w",
            "-1d",
            "1d2d",
            "d",
            "7",
            "1.5d",
            "0d",
            "99999999999y",
            "7d ",
        ] {
            // A trailing space is trimmed, so "7d " is accepted; the rest are errors.
            if bad == "7d " {
                assert!(CalendarDuration::parse(bad).is_ok());
                continue;
            }
            let error = CalendarDuration::parse(bad).unwrap_err().to_string();
            assert_eq!(error, error.to_lowercase(), "{error}");
        }
    }

    proptest::proptest! {
        #[test]
        fn local_fields_agree_with_chrono(seconds in -5_000_000_000i64..10_000_000_000i64,
                                          nanos in 0u32..1_000_000_000,
                                          offset_minutes in -14 * 60i32..=14 * 60) {
            let offset = FixedOffset::east_opt(offset_minutes * 60).unwrap();
            let instant = DateTime::from_timestamp(seconds, nanos).unwrap().with_timezone(&offset);
            let fields = LocalFields::new(instant.timestamp_nanos_opt().unwrap_or(0), offset_minutes * 60);
            if instant.timestamp_nanos_opt().is_some() {
                let local = instant.naive_local();
                proptest::prop_assert_eq!(fields.year, i64::from(local.year()));
                proptest::prop_assert_eq!(fields.month, i64::from(local.month()));
                proptest::prop_assert_eq!(fields.day, i64::from(local.day()));
                proptest::prop_assert_eq!(fields.hour, i64::from(local.hour()));
                let week: IsoWeek = local.date().iso_week();
                proptest::prop_assert_eq!(fields.weekly(), i64::from(week.year()) * 100 + i64::from(week.week()));
            }
        }
    }
}
