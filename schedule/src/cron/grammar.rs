//! The cron grammar of robfig/cron v3.0.1's `ParseStandard` (and, for tests, its 6-field parser).
//!
//! Velero and Kubernetes accept whatever this parser accepts, including its oddities, so we
//! reproduce it rule for rule rather than writing a "nicer" grammar:
//!
//! * an optional `CRON_TZ=<zone> ` or `TZ=<zone> ` prefix; the zone name runs from the first `=`
//!   to the first space; `""` means UTC and `Local` means "no zone given";
//! * then either a descriptor (`@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
//!   `@midnight`, `@hourly`, `@every <go duration>`), matched exactly, or whitespace-separated
//!   fields;
//! * a field is a comma-separated list (empty items are ignored, so `1,,2` is `1,2` and `,` is
//!   an empty set) of `*`, `?`, `N`, `N-M`, each optionally followed by `/step`; `N/step` means
//!   `N-max/step`; a `*` or `?` ignores anything after a hyphen (`*-5` is `*`);
//! * numbers are Go `strconv.Atoi` numbers (an optional `+`, ASCII digits); month and weekday
//!   names are the three-letter English names, compared after Go's `strings.ToLower`;
//! * day-of-week is 0-6 with 0 = Sunday; 7 is rejected.
//!
//! Parsing allocates nothing: it walks the text with iterators and builds the bitsets directly.

use super::error::{CronError, Excerpt, Field};
use super::go_duration::parse_go_duration;
use super::walk::{FieldBits, STAR_BIT};
use chrono_tz::Tz;

/// Which of robfig's parsers to emulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `cron.ParseStandard`: exactly 5 fields, the seconds field fixed at 0.
    Standard,
    /// `cron.NewParser(Second|Minute|Hour|Dom|Month|DowOptional|Descriptor)`: robfig's test
    /// parser, 6 fields with seconds first, day-of-week optional.
    WithSeconds,
}

/// The zone a spec is evaluated in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpecZone {
    /// No prefix (or `TZ=Local`): the caller's evaluation zone.
    Inherit,
    /// `CRON_TZ=<zone>`: always this zone, whatever the caller's.
    Named(Tz),
}

/// What a spec schedules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A calendar spec (fields or a calendar descriptor such as `@daily`).
    Calendar(FieldBits),
    /// `@every <duration>`: robfig's `ConstantDelaySchedule`, a whole number of seconds >= 1.
    /// `written_nanos` is the duration as written, before robfig's rounding, so that input
    /// checks can refuse what the rounding would silently change.
    Every {
        delay_seconds: u64,
        written_nanos: i64,
    },
}

/// A field's range of values and, for month and weekday, its names.
struct Bounds {
    field: Field,
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const SECONDS: Bounds = Bounds {
    field: Field::Second,
    min: 0,
    max: 59,
    names: &[],
};
const MINUTES: Bounds = Bounds {
    field: Field::Minute,
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    field: Field::Hour,
    min: 0,
    max: 23,
    names: &[],
};
const DAYS_OF_MONTH: Bounds = Bounds {
    field: Field::DayOfMonth,
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    field: Field::Month,
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DAYS_OF_WEEK: Bounds = Bounds {
    field: Field::DayOfWeek,
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// Parses a whole spec, prefix included.
pub(crate) fn parse(spec: &str, layout: Layout) -> Result<(SpecZone, Kind), CronError> {
    if spec.is_empty() {
        return Err(CronError::Empty);
    }

    let mut zone = SpecZone::Inherit;
    let mut rest = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // robfig slices from the first '=' to the first space; with no space at all it panics
        // (index out of range), which we report as an error instead.
        let space = spec.find(' ').ok_or(CronError::ZoneWithoutSchedule)?;
        let equals = spec.find('=').ok_or(CronError::ZoneWithoutSchedule)?;
        let name = spec
            .get(equals + 1..space)
            .ok_or(CronError::ZoneWithoutSchedule)?;
        zone = load_location(name)?;
        rest = spec[space..].trim();
    }

    if rest.starts_with('@') {
        return parse_descriptor(rest).map(|kind| (zone, kind));
    }

    // Split on whitespace, keeping at most six fields: a count above six is an error for both
    // layouts, and counting the rest needs no storage.
    let mut fields = [""; 6];
    let mut found = 0usize;
    for field in rest.split_whitespace() {
        if let Some(slot) = fields.get_mut(found) {
            *slot = field;
        }
        found += 1;
    }
    let [second, minute, hour, dom, month, dow] = match (layout, found) {
        (Layout::Standard, 5) => ["0", fields[0], fields[1], fields[2], fields[3], fields[4]],
        (Layout::Standard, _) => return Err(CronError::FieldCount { found }),
        (Layout::WithSeconds, 5) => [fields[0], fields[1], fields[2], fields[3], fields[4], "*"],
        (Layout::WithSeconds, 6) => fields,
        (Layout::WithSeconds, _) => return Err(CronError::SecondsFieldCount { found }),
    };

    let bits = FieldBits {
        second: parse_field(second, &SECONDS)?,
        minute: parse_field(minute, &MINUTES)?,
        hour: parse_field(hour, &HOURS)?,
        dom: parse_field(dom, &DAYS_OF_MONTH)?,
        month: parse_field(month, &MONTHS)?,
        dow: parse_field(dow, &DAYS_OF_WEEK)?,
    };
    Ok((zone, Kind::Calendar(bits)))
}

/// Go's `time.LoadLocation`, over the IANA database compiled into chrono-tz.
fn load_location(name: &str) -> Result<SpecZone, CronError> {
    match name {
        // Go returns UTC for the empty name.
        "" | "UTC" => Ok(SpecZone::Named(Tz::UTC)),
        // Go returns time.Local, which robfig treats exactly like "no zone given".
        "Local" => Ok(SpecZone::Inherit),
        _ => name
            .parse::<Tz>()
            .map(SpecZone::Named)
            .map_err(|_| CronError::UnknownZone {
                zone: Excerpt::new(name),
            }),
    }
}

fn parse_descriptor(descriptor: &str) -> Result<Kind, CronError> {
    let all = |bounds: &Bounds| bit_range(bounds.min, bounds.max, 1) | STAR_BIT;
    let first = |bounds: &Bounds| 1u64 << bounds.min;
    let bits = match descriptor {
        "@yearly" | "@annually" => FieldBits {
            second: first(&SECONDS),
            minute: first(&MINUTES),
            hour: first(&HOURS),
            dom: first(&DAYS_OF_MONTH),
            month: first(&MONTHS),
            dow: all(&DAYS_OF_WEEK),
        },
        "@monthly" => FieldBits {
            second: first(&SECONDS),
            minute: first(&MINUTES),
            hour: first(&HOURS),
            dom: first(&DAYS_OF_MONTH),
            month: all(&MONTHS),
            dow: all(&DAYS_OF_WEEK),
        },
        "@weekly" => FieldBits {
            second: first(&SECONDS),
            minute: first(&MINUTES),
            hour: first(&HOURS),
            dom: all(&DAYS_OF_MONTH),
            month: all(&MONTHS),
            dow: first(&DAYS_OF_WEEK),
        },
        "@daily" | "@midnight" => FieldBits {
            second: first(&SECONDS),
            minute: first(&MINUTES),
            hour: first(&HOURS),
            dom: all(&DAYS_OF_MONTH),
            month: all(&MONTHS),
            dow: all(&DAYS_OF_WEEK),
        },
        "@hourly" => FieldBits {
            second: first(&SECONDS),
            minute: first(&MINUTES),
            hour: all(&HOURS),
            dom: all(&DAYS_OF_MONTH),
            month: all(&MONTHS),
            dow: all(&DAYS_OF_WEEK),
        },
        _ => {
            let Some(duration) = descriptor.strip_prefix("@every ") else {
                return Err(CronError::UnknownDescriptor {
                    descriptor: Excerpt::new(descriptor),
                });
            };
            let nanos =
                parse_go_duration(duration).map_err(|reason| CronError::InvalidDuration {
                    duration: Excerpt::new(duration),
                    reason,
                })?;
            return Ok(Kind::Every {
                delay_seconds: every_delay_seconds(nanos),
                written_nanos: nanos,
            });
        }
    };
    Ok(Kind::Calendar(bits))
}

/// robfig's `Every`: delays under a second (zero and negative ones included) become one second,
/// and sub-second parts are dropped.
fn every_delay_seconds(nanos: i64) -> u64 {
    const NANOS_PER_SECOND: i64 = 1_000_000_000;
    u64::try_from(nanos.max(NANOS_PER_SECOND) / NANOS_PER_SECOND).unwrap_or(1)
}

/// `getField`: the union of a comma-separated list of ranges.
fn parse_field(field: &str, bounds: &Bounds) -> Result<u64, CronError> {
    field
        .split(',')
        .filter(|item| !item.is_empty())
        .try_fold(0u64, |bits, item| Ok(bits | parse_range(item, bounds)?))
}

/// `getRange`: `*`, `?`, `N` or `N-M`, optionally with `/step`.
fn parse_range(expr: &str, bounds: &Bounds) -> Result<u64, CronError> {
    let field = bounds.field;
    let mut range_and_step = expr.split('/');
    let range = range_and_step.next().unwrap_or("");
    let step_text = range_and_step.next();
    let too_many_slashes = range_and_step.next().is_some();

    let mut low_and_high = range.split('-');
    let low = low_and_high.next().unwrap_or("");
    let high = low_and_high.next();
    let too_many_hyphens = low_and_high.next().is_some();
    let single_value = high.is_none();

    let (start, mut end, mut star) = if low == "*" || low == "?" {
        // robfig looks no further than the star: "*-5" is "*".
        (bounds.min, bounds.max, STAR_BIT)
    } else {
        let start = parse_int_or_name(low, bounds)?;
        let end = match high {
            None => start,
            Some(_) if too_many_hyphens => {
                return Err(CronError::TooManyHyphens {
                    field,
                    expr: Excerpt::new(expr),
                })
            }
            Some(high) => parse_int_or_name(high, bounds)?,
        };
        (start, end, 0)
    };

    let step = match step_text {
        None => 1,
        Some(_) if too_many_slashes => {
            return Err(CronError::TooManySlashes {
                field,
                expr: Excerpt::new(expr),
            })
        }
        Some(step_text) => {
            let step = parse_int(step_text, field)?;
            // "N/step" means "N-max/step".
            if single_value {
                end = bounds.max;
            }
            // "*/2" is a restriction, not a star: it takes part in the day-field OR.
            if step > 1 {
                star = 0;
            }
            step
        }
    };

    if start < bounds.min {
        return Err(CronError::BelowMinimum {
            field,
            value: start,
            min: bounds.min,
            expr: Excerpt::new(expr),
        });
    }
    if end > bounds.max {
        if field == Field::DayOfWeek && end == 7 {
            return Err(CronError::SundayAsSeven {
                expr: Excerpt::new(expr),
            });
        }
        return Err(CronError::AboveMaximum {
            field,
            value: end,
            max: bounds.max,
            expr: Excerpt::new(expr),
        });
    }
    if start > end {
        return Err(CronError::ReversedRange {
            field,
            start,
            end,
            expr: Excerpt::new(expr),
        });
    }
    if step == 0 {
        return Err(CronError::ZeroStep {
            field,
            expr: Excerpt::new(expr),
        });
    }
    Ok(bit_range(start, end, step) | star)
}

/// `parseIntOrName`: a month or weekday name (case-insensitive), else a number.
fn parse_int_or_name(text: &str, bounds: &Bounds) -> Result<u64, CronError> {
    if !bounds.names.is_empty() {
        if let Some(lowered) = go_lowercase_ascii3(text) {
            if let Some(&(_, value)) = bounds
                .names
                .iter()
                .find(|(name, _)| name.as_bytes() == lowered)
            {
                return Ok(value);
            }
        }
    }
    parse_int(text, bounds.field)
}

/// The three ASCII letters Go's `strings.ToLower(text)` would produce, if it produces exactly
/// three ASCII letters. Besides A-Z only two characters lower-case into ASCII in Go: U+0130
/// (capital I with dot) into `i` and U+212A (Kelvin sign) into `k`; so `FR\u{130}` is Friday
/// to robfig and therefore to us.
fn go_lowercase_ascii3(text: &str) -> Option<[u8; 3]> {
    let mut out = [0u8; 3];
    let mut chars = text.chars();
    for slot in &mut out {
        *slot = match chars.next()? {
            c @ ('a'..='z' | 'A'..='Z') => c.to_ascii_lowercase() as u8,
            '\u{130}' => b'i',
            '\u{212a}' => b'k',
            _ => return None,
        };
    }
    chars.next().is_none().then_some(out)
}

/// `mustParseInt`: Go's `strconv.Atoi` (optional sign, ASCII digits, fits in an int64), then
/// "negative numbers are not allowed". A '-' never reaches here (it splits ranges), so only '+'
/// can appear as a sign.
fn parse_int(text: &str, field: Field) -> Result<u64, CronError> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    let not_a_number = || CronError::NotANumber {
        field,
        value: Excerpt::new(text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not_a_number());
    }
    // Go's Atoi fails on values beyond int64 with a range error.
    digits
        .parse::<i64>()
        .ok()
        .and_then(|value| u64::try_from(value).ok())
        .ok_or_else(not_a_number)
}

/// `getBits`: every `step`-th value from `min` to `max` inclusive.
fn bit_range(min: u64, max: u64, step: u64) -> u64 {
    let mut bits = 0u64;
    let mut value = min;
    while value <= max {
        bits |= 1 << value;
        value = match value.checked_add(step) {
            Some(next) => next,
            None => break,
        };
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(spec: &str) -> FieldBits {
        match parse(spec, Layout::Standard) {
            Ok((_, Kind::Calendar(bits))) => bits,
            other => panic!("{spec}: {other:?}"),
        }
    }

    #[test]
    fn steps_and_stars_set_robfigs_bits() {
        assert_eq!(bits("*/15 * * * *").minute, 1 | 1 << 15 | 1 << 30 | 1 << 45);
        assert_eq!(bits("5/20 * * * *").minute, 1 << 5 | 1 << 25 | 1 << 45);
        // "*" and "*/1" keep the star bit; "*/2" drops it.
        assert_ne!(bits("0 0 * * *").dom & STAR_BIT, 0);
        assert_ne!(bits("0 0 */1 * *").dom & STAR_BIT, 0);
        assert_eq!(bits("0 0 */2 * *").dom & STAR_BIT, 0);
        assert_eq!(bits("0 0 * * *-3").dow, bits("0 0 * * *").dow);
        assert_eq!(bits("0 0 1,,15 * *").dom, 1 << 1 | 1 << 15);
        assert_eq!(bits("0 0 , * *").dom, 0);
    }

    #[test]
    fn names_follow_go_lower_casing() {
        assert_eq!(bits("0 0 * JaN Fri").month, 1 << 1);
        assert_eq!(bits("0 0 * * FR\u{130}").dow, 1 << 5);
        assert!(parse("0 0 * * friday", Layout::Standard).is_err());
        assert!(parse("0 0 * * \u{ff26}ri", Layout::Standard).is_err());
    }

    #[test]
    fn numbers_follow_go_atoi() {
        assert_eq!(bits("+5 * * * *").minute, 1 << 5);
        assert_eq!(bits("007 * * * *").minute, 1 << 7);
        assert!(parse("+ * * * *", Layout::Standard).is_err());
        assert!(parse("99999999999999999999 * * * *", Layout::Standard).is_err());
        assert!(parse("*/99999999999999999999 * * * *", Layout::Standard).is_err());
        assert_eq!(bits("*/9223372036854775807 * * * *").minute, 1);
    }

    #[test]
    fn every_rounds_like_robfig() {
        assert_eq!(every_delay_seconds(0), 1);
        assert_eq!(every_delay_seconds(-5_000_000_000), 1);
        assert_eq!(every_delay_seconds(1_500_000_000), 1);
        assert_eq!(every_delay_seconds(90_000_000_000), 90);
    }
}
