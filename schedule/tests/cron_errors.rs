//! Malformed and odd cron specs: what is rejected, how it is reported, and the oddities robfig
//! accepts that we must accept too (a spec Velero runs must not fail validation in Sexton).

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use sexton_schedule::{CronError, CronSpec, DurationError, Field};
use std::time::{Duration, Instant};

fn rejected(spec: &str) -> CronError {
    match CronSpec::parse(spec) {
        Ok(parsed) => panic!("{spec:?} should be rejected, parsed as {parsed:?}"),
        Err(error) => {
            let message = error.to_string();
            // Style: lowercase, no trailing period, bounded.
            assert!(
                message.starts_with(|c: char| !c.is_uppercase()),
                "{spec:?}: message not lowercase: {message}"
            );
            assert!(
                !message.ends_with('.'),
                "{spec:?}: trailing period: {message}"
            );
            assert!(
                message.len() < 300,
                "{spec:?}: message too long: {} bytes",
                message.len()
            );
            error
        }
    }
}

fn accepted(spec: &str) -> CronSpec {
    CronSpec::parse(spec).unwrap_or_else(|error| panic!("{spec:?} should be accepted: {error}"))
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn empty_and_blank_specs() {
    assert_eq!(rejected(""), CronError::Empty);
    assert_eq!(rejected("   "), CronError::FieldCount { found: 0 });
    assert_eq!(rejected("\t\n"), CronError::FieldCount { found: 0 });
}

#[test]
fn wrong_number_of_fields() {
    assert_eq!(rejected("* * * *"), CronError::FieldCount { found: 4 });
    assert_eq!(rejected("0 0 0 * * *"), CronError::FieldCount { found: 6 });
    assert_eq!(
        rejected("0 0 * * * 2024"),
        CronError::FieldCount { found: 6 }
    );
    assert_eq!(rejected("xyz"), CronError::FieldCount { found: 1 });
    assert_eq!(rejected("CRON_TZ=UTC "), CronError::FieldCount { found: 0 });
    let message = rejected("* * * *").to_string();
    assert!(
        message.contains("exactly 5 fields") && message.contains("found 4"),
        "{message}"
    );
}

#[test]
fn values_out_of_range() {
    for (spec, field) in [
        ("60 * * * *", Field::Minute),
        ("* 24 * * *", Field::Hour),
        ("* * 32 * *", Field::DayOfMonth),
        ("* * * 13 *", Field::Month),
        ("* * 1-32 * *", Field::DayOfMonth),
    ] {
        match rejected(spec) {
            CronError::AboveMaximum { field: got, .. } => assert_eq!(got, field, "{spec}"),
            other => panic!("{spec}: {other:?}"),
        }
    }
    for (spec, field) in [
        ("* * 0 * *", Field::DayOfMonth),
        ("* * * 0 *", Field::Month),
    ] {
        match rejected(spec) {
            CronError::BelowMinimum { field: got, .. } => assert_eq!(got, field, "{spec}"),
            other => panic!("{spec}: {other:?}"),
        }
    }
    let message = rejected("60 0 * * *").to_string();
    assert_eq!(message, "minute: 60 is above the maximum 59 in \"60\"");
}

#[test]
fn weekday_seven_is_rejected_with_a_hint() {
    for spec in ["0 0 * * 7", "0 0 * * 6-7", "0 0 * * 0,7"] {
        assert!(
            matches!(rejected(spec), CronError::SundayAsSeven { .. }),
            "{spec}"
        );
    }
    assert!(rejected("0 0 * * 7").to_string().contains("sunday is 0"));
    // 7 can never sneak in as a range start either.
    assert!(matches!(
        rejected("0 0 * * 7-7"),
        CronError::SundayAsSeven { .. }
    ));
    assert!(matches!(
        rejected("0 0 * * 7/2"),
        CronError::ReversedRange { .. }
    ));
}

#[test]
fn bad_names_and_non_numbers() {
    for spec in [
        "* * * foo *",
        "* * * * funday",
        "* * * JANUARY *",
        "* * * mon *",
        "* * * * jan",
        "jan * * * *",
        "5 j * * *",
        "0 0 * * XYZ",
        "0 0 L * *",
        "0 0 * * 5#2",
        "0 0 ? * 1W",
        "0x10 * * * *",
        "1.5 * * * *",
        "\u{661} * * * *",
    ] {
        assert!(
            matches!(rejected(spec), CronError::NotANumber { .. }),
            "{spec}"
        );
    }
    assert_eq!(
        rejected("0 0 * * XYZ").to_string(),
        "day-of-week: \"XYZ\" is neither a number nor a day-of-week name"
    );
}

#[test]
fn bad_ranges_and_steps() {
    assert!(matches!(
        rejected("*/0 * * * *"),
        CronError::ZeroStep { .. }
    ));
    assert!(matches!(
        rejected("TZ=America/New_York 15/0 * * * *"),
        CronError::ZeroStep { .. }
    ));
    assert!(matches!(
        rejected("*/x * * * *"),
        CronError::NotANumber { .. }
    ));
    assert!(matches!(
        rejected("*/-1 * * * *"),
        CronError::NotANumber { .. }
    ));
    assert!(matches!(
        rejected("*/ * * * *"),
        CronError::NotANumber { .. }
    ));
    assert!(matches!(
        rejected("1/2/3 * * * *"),
        CronError::TooManySlashes { .. }
    ));
    assert!(matches!(
        rejected("1-2-3 * * * *"),
        CronError::TooManyHyphens { .. }
    ));
    assert!(matches!(
        rejected("0 0 * * 5-1"),
        CronError::ReversedRange { .. }
    ));
    assert!(matches!(
        rejected("-5 * * * *"),
        CronError::NotANumber { .. }
    ));
    assert!(matches!(
        rejected("5- * * * *"),
        CronError::NotANumber { .. }
    ));
}

#[test]
fn bad_zones() {
    assert!(matches!(
        rejected("CRON_TZ=Nowhere/Bogus 0 0 * * *"),
        CronError::UnknownZone { .. }
    ));
    // Zone names are case-sensitive, as Go's LoadLocation on Linux.
    assert!(matches!(
        rejected("TZ=europe/berlin 0 0 * * *"),
        CronError::UnknownZone { .. }
    ));
    // robfig panics here (no space after the zone); we return an error.
    assert_eq!(
        rejected("CRON_TZ=Europe/Berlin"),
        CronError::ZoneWithoutSchedule
    );
    assert_eq!(rejected("TZ="), CronError::ZoneWithoutSchedule);
    // The zone runs to the first space, so a tab does not end it.
    assert!(matches!(
        rejected("TZ=UTC\t0 0 * * *"),
        CronError::UnknownZone { .. }
    ));
    // The prefix must come first and is case-sensitive.
    assert!(matches!(
        rejected(" CRON_TZ=UTC 0 0 * * *"),
        CronError::FieldCount { found: 6 }
    ));
    assert!(matches!(
        rejected("cron_tz=UTC 0 0 * * *"),
        CronError::FieldCount { found: 6 }
    ));
    assert_eq!(
        rejected("CRON_TZ=Nowhere/Bogus 0 0 * * *").to_string(),
        "unknown time zone \"Nowhere/Bogus\" (expected an IANA name such as Europe/Berlin)"
    );
}

#[test]
fn bad_descriptors_and_durations() {
    for spec in [
        "@fortnightly",
        "@DAILY",
        "@daily ",
        "@every",
        "@every5m",
        "@ daily",
    ] {
        assert!(
            matches!(rejected(spec), CronError::UnknownDescriptor { .. }),
            "{spec:?}"
        );
    }
    for (spec, reason) in [
        ("@every ", DurationError::Invalid),
        ("@every Xm", DurationError::Invalid),
        ("@every  5m", DurationError::Invalid),
        ("@every 5", DurationError::MissingUnit),
        ("@every -", DurationError::Invalid),
        ("@every 10000000h", DurationError::Overflow),
    ] {
        match rejected(spec) {
            CronError::InvalidDuration { reason: got, .. } => assert_eq!(got, reason, "{spec:?}"),
            other => panic!("{spec:?}: {other:?}"),
        }
    }
    // Go's unit runs to the next digit or period, so the space belongs to it.
    assert!(matches!(
        rejected("@every 5 m"),
        CronError::InvalidDuration {
            reason: DurationError::UnknownUnit { .. },
            ..
        }
    ));
    assert!(matches!(
        rejected("@every 1d"),
        CronError::InvalidDuration {
            reason: DurationError::UnknownUnit { .. },
            ..
        }
    ));
}

#[test]
fn zero_and_negative_every_run_every_second_as_in_robfig() {
    // robfig's Every() raises any delay under a second, zero and negative ones included, to one
    // second instead of rejecting it. Velero accepts these specs, so we must too.
    for spec in [
        "@every 0",
        "@every 0s",
        "@every -5m",
        "@every 500ms",
        "@every 1.9s",
    ] {
        assert_eq!(
            accepted(spec).every(),
            Some(Duration::from_secs(1)),
            "{spec}"
        );
    }
    let every = accepted("@every -5m");
    assert_eq!(
        every.next_after(at("2024-01-01T00:00:00.7Z")),
        Some(at("2024-01-01T00:00:01Z"))
    );
}

#[test]
// It times the parser, so it reads the real clock (the crate's clippy.toml forbids the clock
// to the crate, not to a test of its speed).
#[allow(clippy::disallowed_methods)]
fn absurdly_long_input_is_handled_quickly_and_reported_briefly() {
    let started = Instant::now();
    let many_fields = "0 ".repeat(500_000);
    assert_eq!(
        rejected(&many_fields),
        CronError::FieldCount { found: 500_000 }
    );
    let huge_token = format!("{} * * * *", "9".repeat(1_000_000));
    assert!(matches!(
        rejected(&huge_token),
        CronError::NotANumber { .. }
    ));
    let huge_zone = format!("CRON_TZ={} 0 0 * * *", "A".repeat(1_000_000));
    assert!(matches!(
        rejected(&huge_zone),
        CronError::UnknownZone { .. }
    ));
    let huge_duration = format!("@every {}", "100000h".repeat(100_000));
    assert!(matches!(
        rejected(&huge_duration),
        CronError::InvalidDuration {
            reason: DurationError::Overflow,
            ..
        }
    ));
    // robfig has no length limit, so a long but valid list is accepted (and means minute 0).
    let long_list = format!("0{} * * * *", ",0".repeat(200_000));
    let spec = accepted(&long_list);
    assert_eq!(
        spec.next_after(at("2024-01-01T00:30:00Z")),
        Some(at("2024-01-01T01:00:00Z"))
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn robfig_oddities_are_accepted() {
    // "*" ignores whatever follows a hyphen.
    assert_eq!(
        accepted("*-5 * * * *").next_after(at("2024-01-01T00:00:30Z")),
        Some(at("2024-01-01T00:01:00Z"))
    );
    // Empty list items are dropped; a '+' sign is a number; leading zeros are fine.
    accepted("1,,2 * * * *");
    accepted("+5 +1 * * *");
    accepted("05 09 * * *");
    // Names are case-insensitive, with Go's lower-casing (U+0130 lower-cases to 'i').
    accepted("0 0 * jAn fRi");
    accepted("0 0 * * FR\u{130}");
    // `?` is `*` anywhere; `*/60` is just minute 0.
    accepted("? ? ? ? ?");
    assert_eq!(
        accepted("*/60 * * * *").next_after(at("2024-01-01T10:07:00Z")),
        Some(at("2024-01-01T11:00:00Z"))
    );
    // Descriptors and fields after a zone prefix; extra spaces after the prefix are trimmed.
    assert_eq!(
        accepted("CRON_TZ=Asia/Tokyo   @daily").zone(),
        Some(Tz::Asia__Tokyo)
    );
    // TZ=Local means "no zone given"; an empty zone name means UTC.
    assert_eq!(accepted("TZ=Local 0 0 * * *").zone(), None);
    assert_eq!(accepted("CRON_TZ= 0 0 * * *").zone(), Some(Tz::UTC));
}

#[test]
fn a_list_of_only_commas_parses_but_never_runs() {
    // robfig accepts "," (an empty set of minutes) and its Next gives up after five years.
    let never = accepted(", * * * *");
    assert_eq!(never.next_after(at("2024-01-01T00:00:00Z")), None);
    assert!(never.upcoming(at("2024-01-01T00:00:00Z"), 3).is_empty());
}

#[test]
fn display_and_from_str_round_trip() {
    let text = "CRON_TZ=Europe/Berlin 30 2 * * MON-FRI";
    let spec: CronSpec = text.parse().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.to_string(), text);
    assert_eq!(spec.as_str(), text);
    assert!("0 0 * * 7".parse::<CronSpec>().is_err());
}

/// CloudNativePG's 6-field specs (seconds first) as the API and the CLI take them: seconds 0
/// becomes the 5-field spec; any other seconds value is refused with a clear error; the robfig
/// grammar itself (`CronSpec::parse`) still refuses six fields.
#[test]
fn cloudnativepg_six_field_specs_are_accepted_only_with_seconds_zero() {
    fn check(spec: &str, expected: Result<&str, &str>) {
        let got = CronSpec::five_field_form(spec);
        match (got, expected) {
            (Ok(form), Ok(wanted)) => {
                assert_eq!(form, wanted, "{spec:?}");
                CronSpec::parse(&form).unwrap_or_else(|err| panic!("{spec:?} -> {form:?}: {err}"));
            }
            (Err(err), Err(wanted)) => {
                let message = err.to_string();
                assert!(message.contains(wanted), "{spec:?}: {message}");
                assert!(!message.ends_with('.'), "{message}");
            }
            (got, wanted) => panic!("{spec:?}: got {got:?}, wanted {wanted:?}"),
        }
    }
    check("0 0 3 * * *", Ok("0 3 * * *"));
    check("00 30 2 * * 1-5", Ok("30 2 * * 1-5"));
    check(
        "CRON_TZ=Europe/Berlin 0 0 3 * * *",
        Ok("CRON_TZ=Europe/Berlin 0 3 * * *"),
    );
    check("0 3 * * *", Ok("0 3 * * *"));
    check("@daily", Ok("@daily"));
    check("CRON_TZ=UTC @every 6h", Ok("CRON_TZ=UTC @every 6h"));
    check("30 0 3 * * *", Err("the seconds field must be 0"));
    check("*/10 * * * * *", Err("found \"*/10\""));
    // Seven fields are not CloudNativePG's: left for the grammar to refuse.
    assert_eq!(
        CronSpec::five_field_form("0 0 3 * * * *").unwrap(),
        "0 0 3 * * * *"
    );
    assert!(matches!(
        CronSpec::parse("0 0 3 * * *"),
        Err(CronError::FieldCount { found: 6 })
    ));
}
