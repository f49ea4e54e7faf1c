//! The next-time engine: robfig/cron v3.0.1's `SpecSchedule.Next`, ported step by step.
//!
//! robfig does not search for "the smallest matching instant"; it walks the calendar field by
//! field (month, day, hour, minute, second), resetting lower fields the first time it has to move,
//! and wrapping back to the month check whenever a field rolls over. In a time zone with daylight
//! saving time that walk has quirks (a spring-forward hour is skipped, a repeated hour can fire
//! twice, a day that starts at 01:00 is nudged back to midnight) and Velero and Kubernetes users
//! live with exactly those quirks. To reproduce them we do not use chrono's calendar arithmetic;
//! we emulate the handful of Go `time` operations the walk uses, with Go's rules:
//!
//! * a time is an absolute instant; its calendar fields are read in the walk's zone;
//! * `Add` moves the instant; `Truncate` rounds the *instant* (not the wall clock);
//! * `time.Date` builds an instant from wall-clock fields, normalising overflow (day 32 is the 1st
//!   of the next month) and resolving a wall time in a gap or an overlap the way Go does;
//! * `AddDate` is `time.Date` on the shifted fields.
//!
//! Everything is whole seconds: the walk starts at the next whole second and never produces
//! sub-second values. All arithmetic is checked; anything out of chrono's range ends the search
//! with "no next time", as robfig's five-year give-up does.

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, Offset, TimeZone, Timelike, Utc};

/// Set in a field's bitset when the field was written as `*` or `?` (without a step above 1).
/// robfig uses it for one thing: day-of-month and day-of-week are OR-ed only when neither has it.
pub(crate) const STAR_BIT: u64 = 1 << 63;

/// Upper bound on loop iterations of one search. robfig's own walk needs at most a few thousand
/// steps for any satisfiable spec within its five-year horizon (unsatisfiable field sets are
/// answered before walking); the bound only guarantees termination should zone data ever make
/// the walk oscillate.
const MAX_STEPS: u32 = 1_000_000;

/// How many years robfig searches before it gives up and returns Go's zero time.
const YEARS_SEARCHED: i32 = 5;

/// The matching values of each field, one bit per value (bit 0 = value 0), as robfig stores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldBits {
    pub(crate) second: u64,
    pub(crate) minute: u64,
    pub(crate) hour: u64,
    pub(crate) dom: u64,
    pub(crate) month: u64,
    pub(crate) dow: u64,
}

impl FieldBits {
    /// True when no instant can ever match, so robfig's walk would run to its five-year limit
    /// and return the zero time. Answering up front gives the same result without the walk
    /// (an empty field arises from a list of only commas, e.g. `,`, which robfig accepts).
    fn is_unsatisfiable(&self) -> bool {
        let values = |bits: u64| bits & !STAR_BIT;
        let days_impossible = if self.day_fields_are_anded() {
            values(self.dom) == 0 || values(self.dow) == 0
        } else {
            values(self.dom) == 0 && values(self.dow) == 0
        };
        values(self.second) == 0
            || values(self.minute) == 0
            || values(self.hour) == 0
            || values(self.month) == 0
            || days_impossible
    }

    /// robfig's rule: if either day field was a bare `*`/`?`, both must match (which for the
    /// star field means "any day"); only when both are restricted is a day matched by either.
    fn day_fields_are_anded(&self) -> bool {
        self.dom & STAR_BIT != 0 || self.dow & STAR_BIT != 0
    }

    fn day_matches(&self, civil: &Civil) -> bool {
        let dom_match = self.dom & (1 << civil.day) != 0;
        let dow_match = self.dow & (1 << civil.weekday) != 0;
        if self.day_fields_are_anded() {
            dom_match && dow_match
        } else {
            dom_match || dow_match
        }
    }
}

/// The wall-clock reading of an instant in the walk's zone (Go's `t.Date()`, `t.Clock()`,
/// `t.Weekday()`).
#[derive(Debug, Clone, Copy)]
struct Civil {
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    /// 0 = Sunday, as in Go and cron.
    weekday: u32,
}

/// Go's `time` operations over instants held as Unix seconds, read in one zone.
struct GoClock<'z, Z: TimeZone> {
    zone: &'z Z,
}

impl<Z: TimeZone> GoClock<'_, Z> {
    /// The zone's UTC offset, in seconds, at an instant.
    fn offset_at(&self, unix: i64) -> Option<i64> {
        let utc = DateTime::from_timestamp(unix, 0)?.naive_utc();
        Some(i64::from(
            self.zone
                .offset_from_utc_datetime(&utc)
                .fix()
                .local_minus_utc(),
        ))
    }

    fn civil(&self, unix: i64) -> Option<Civil> {
        let local = unix.checked_add(self.offset_at(unix)?)?;
        let wall = DateTime::from_timestamp(local, 0)?.naive_utc();
        Some(Civil {
            year: wall.year(),
            month: wall.month(),
            day: wall.day(),
            hour: wall.hour(),
            minute: wall.minute(),
            second: wall.second(),
            weekday: wall.weekday().num_days_from_sunday(),
        })
    }

    /// Go's `time.Date(year, month, day, hour, min, sec, 0, loc)`.
    ///
    /// Out-of-range fields are normalised (month 13 is January of the next year, day 32 rolls
    /// into the next month). A wall time that does not exist or exists twice is resolved as Go
    /// does: take the offset in force at the wall time read as if it were UTC, step back by it,
    /// and use the offset in force at *that* instant. In a spring-forward gap this lands on the
    /// wall time shifted by the size of the gap; in a fall-back overlap it usually picks the
    /// first occurrence. robfig's DST behaviour follows from this rule.
    fn date(
        &self,
        year: i32,
        month: i64,
        day: i64,
        hour: i64,
        minute: i64,
        second: i64,
    ) -> Option<i64> {
        let month0 = month.checked_sub(1)?;
        let year = i64::from(year).checked_add(month0.div_euclid(12))?;
        let month = u32::try_from(month0.rem_euclid(12) + 1).ok()?;
        let first_of_month = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, 1)?
            .and_time(NaiveTime::MIN)
            .and_utc()
            .timestamp();
        let wall = first_of_month
            .checked_add(day.checked_sub(1)?.checked_mul(86_400)?)?
            .checked_add(hour.checked_mul(3_600)?)?
            .checked_add(minute.checked_mul(60)?)?
            .checked_add(second)?;
        let guess = self.offset_at(wall)?;
        let offset = self.offset_at(wall.checked_sub(guess)?)?;
        wall.checked_sub(offset)
    }

    /// Go's `t.AddDate(0, months, days)`: `time.Date` on the shifted wall-clock fields.
    fn add_date(&self, unix: i64, months: i64, days: i64) -> Option<i64> {
        let c = self.civil(unix)?;
        self.date(
            c.year,
            i64::from(c.month) + months,
            i64::from(c.day) + days,
            i64::from(c.hour),
            i64::from(c.minute),
            i64::from(c.second),
        )
    }
}

/// robfig's `SpecSchedule.Next(after)` evaluated in `zone`: the next activation strictly after
/// `after`, or `None` where robfig returns the zero time (nothing within five years).
pub(crate) fn next_matching<Z: TimeZone>(
    bits: &FieldBits,
    zone: &Z,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if bits.is_unsatisfiable() {
        return None;
    }
    let clock = GoClock { zone };
    let mut steps = 0u32;
    let mut step = || {
        steps += 1;
        steps <= MAX_STEPS
    };

    // Start at the earliest possible time: the upcoming whole second.
    let mut t = after.timestamp().checked_add(1)?;
    // Whether a field has been moved yet; the first move resets all lower fields to their
    // minimum (the current time is irrelevant once we are past it).
    let mut added = false;
    let year_limit = clock.civil(t)?.year.checked_add(YEARS_SEARCHED)?;

    'wrap: loop {
        let mut c = clock.civil(t)?;
        if c.year > year_limit {
            return None;
        }

        // Find the first applicable month.
        while bits.month & (1 << c.month) == 0 {
            if !step() {
                return None;
            }
            if !added {
                added = true;
                t = clock.date(c.year, i64::from(c.month), 1, 0, 0, 0)?;
            }
            t = clock.add_date(t, 1, 0)?;
            c = clock.civil(t)?;
            if c.month == 1 {
                continue 'wrap;
            }
        }

        // Then a day in that month.
        while !bits.day_matches(&c) {
            if !step() {
                return None;
            }
            if !added {
                added = true;
                t = clock.date(c.year, i64::from(c.month), i64::from(c.day), 0, 0, 0)?;
            }
            t = clock.add_date(t, 0, 1)?;
            c = clock.civil(t)?;
            // Where DST moves midnight (the day starts at 01:00, or the previous day ends at
            // 23:00), robfig nudges the time back to the day's first hour.
            if c.hour != 0 {
                let hour = i64::from(c.hour);
                let shift = if hour > 12 { 24 - hour } else { -hour };
                t = t.checked_add(shift * 3_600)?;
                c = clock.civil(t)?;
            }
            if c.day == 1 {
                continue 'wrap;
            }
        }

        while bits.hour & (1 << c.hour) == 0 {
            if !step() {
                return None;
            }
            if !added {
                added = true;
                t = clock.date(
                    c.year,
                    i64::from(c.month),
                    i64::from(c.day),
                    i64::from(c.hour),
                    0,
                    0,
                )?;
            }
            t = t.checked_add(3_600)?;
            c = clock.civil(t)?;
            if c.hour == 0 {
                continue 'wrap;
            }
        }

        while bits.minute & (1 << c.minute) == 0 {
            if !step() {
                return None;
            }
            if !added {
                added = true;
                // Go's Truncate works on the instant, not on the wall clock.
                t -= t.rem_euclid(60);
            }
            t = t.checked_add(60)?;
            c = clock.civil(t)?;
            if c.minute == 0 {
                continue 'wrap;
            }
        }

        while bits.second & (1 << c.second) == 0 {
            if !step() {
                return None;
            }
            // The instant is already a whole second, so Go's Truncate(time.Second) is a no-op.
            added = true;
            t = t.checked_add(1)?;
            c = clock.civil(t)?;
            if c.second == 0 {
                continue 'wrap;
            }
        }

        return DateTime::from_timestamp(t, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::Tz;

    fn ts(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.timestamp())
            .unwrap_or(i64::MIN)
    }

    #[test]
    fn go_date_resolves_a_spring_forward_gap_like_go() {
        // 02:30 does not exist in New York on 2012-03-11; Go lands on 01:30 EST (06:30Z).
        let ny = GoClock {
            zone: &Tz::America__New_York,
        };
        assert_eq!(
            ny.date(2012, 3, 11, 2, 30, 0),
            Some(ts("2012-03-11T06:30:00Z"))
        );
        // In Berlin (east of UTC) the same rule lands after the gap: 02:30 -> 03:30 CEST.
        let berlin = GoClock {
            zone: &Tz::Europe__Berlin,
        };
        assert_eq!(
            berlin.date(2024, 3, 31, 2, 30, 0),
            Some(ts("2024-03-31T01:30:00Z"))
        );
    }

    #[test]
    fn go_date_resolves_a_fall_back_overlap_to_the_first_occurrence() {
        let ny = GoClock {
            zone: &Tz::America__New_York,
        };
        assert_eq!(
            ny.date(2012, 11, 4, 1, 0, 0),
            Some(ts("2012-11-04T05:00:00Z"))
        );
    }

    #[test]
    fn go_date_normalises_overflowing_fields() {
        let utc = GoClock { zone: &Utc };
        assert_eq!(
            utc.date(2023, 13, 1, 0, 0, 0),
            Some(ts("2024-01-01T00:00:00Z"))
        );
        assert_eq!(
            utc.date(2024, 1, 32, 0, 0, 0),
            Some(ts("2024-02-01T00:00:00Z"))
        );
        assert_eq!(
            utc.date(2024, 2, 30, 0, 0, 0),
            Some(ts("2024-03-01T00:00:00Z"))
        );
    }

    #[test]
    fn empty_fields_never_match() {
        let bits = FieldBits {
            second: 1,
            minute: 0,
            hour: u64::MAX,
            dom: u64::MAX,
            month: u64::MAX,
            dow: u64::MAX,
        };
        assert!(bits.is_unsatisfiable());
        assert_eq!(next_matching(&bits, &Utc, DateTime::UNIX_EPOCH), None);
    }
}
