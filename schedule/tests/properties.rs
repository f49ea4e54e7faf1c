//! Invariants of the next-time engine over random valid specs, times and zones, with the DST
//! zones where robfig's walk is most delicate (Berlin, New York, Sao Paulo's old midnight
//! changes, Lord Howe's half-hour shift, Chatham's quarter-hour offset):
//!
//! * the next run is strictly after its input (a run in the past would fire in a loop);
//! * next runs are monotone: a later input never yields an earlier next run, in every zone
//!   whose clock changes by whole hours (robfig's own walk is not monotone across Lord Howe's
//!   half-hour change; `lord_howe_half_hour_change_follows_robfig` pins that quirk);
//! * the decision never schedules its next run at or before `now` once it fires or skips.

use chrono::{DateTime, TimeDelta, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;
use sexton_schedule::{evaluate, Action, CronSpec, ScheduleState};

const ZONES: &[Tz] = &[
    Tz::UTC,
    Tz::Europe__Berlin,
    Tz::America__New_York,
    Tz::America__Sao_Paulo,
    Tz::Australia__Lord_Howe,
    Tz::Pacific__Chatham,
    Tz::Asia__Kolkata,
    Tz::America__Santiago,
];

/// The zones above whose DST changes are whole hours (all but Lord Howe).
const WHOLE_HOUR_ZONES: &[Tz] = &[
    Tz::UTC,
    Tz::Europe__Berlin,
    Tz::America__New_York,
    Tz::America__Sao_Paulo,
    Tz::Pacific__Chatham,
    Tz::Asia__Kolkata,
    Tz::America__Santiago,
];

/// One list item of a field with values `min..=max`.
fn item(min: u32, max: u32, names: &'static [&'static str]) -> BoxedStrategy<String> {
    let value = min..=max;
    // Some values are written as names, in upper or lower case, where the field has names.
    let name_or_number = move |v: u32| -> String {
        match (names.get((v - min) as usize), v % 6) {
            (Some(name), 0) => name.to_uppercase(),
            (Some(name), 3) => (*name).to_owned(),
            _ => v.to_string(),
        }
    };
    prop_oneof![
        Just("*".to_owned()),
        Just("?".to_owned()),
        (1..=max + 2).prop_map(|step| format!("*/{step}")),
        value.clone().prop_map(name_or_number),
        (value.clone(), value.clone()).prop_map(move |(a, b)| format!(
            "{}-{}",
            name_or_number(a.min(b)),
            name_or_number(a.max(b))
        )),
        (value.clone(), 1..=max + 1).prop_map(|(a, step)| format!("{a}/{step}")),
        (value.clone(), value, 1..=6u32).prop_map(|(a, b, step)| format!(
            "{}-{}/{step}",
            a.min(b),
            a.max(b)
        )),
    ]
    .boxed()
}

fn field(min: u32, max: u32, names: &'static [&'static str]) -> BoxedStrategy<String> {
    prop::collection::vec(item(min, max, names), 1..=3)
        .prop_map(|items| items.join(","))
        .boxed()
}

const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn body() -> impl Strategy<Value = String> {
    let fields = (
        field(0, 59, &[]),
        field(0, 23, &[]),
        field(1, 31, &[]),
        field(1, 12, MONTHS),
        field(0, 6, WEEKDAYS),
    )
        .prop_map(|(minute, hour, dom, month, dow)| format!("{minute} {hour} {dom} {month} {dow}"));
    // Specs users actually write: a fixed minute and hour, maybe weekdays.
    let typical =
        (0..60u32, 0..24u32, prop::option::of(0..7u32)).prop_map(|(minute, hour, dow)| match dow {
            Some(dow) => format!("{minute} {hour} * * {dow}"),
            None => format!("{minute} {hour} * * *"),
        });
    let descriptor = prop_oneof![
        Just("@hourly".to_owned()),
        Just("@daily".to_owned()),
        Just("@weekly".to_owned()),
        Just("@monthly".to_owned()),
        Just("@yearly".to_owned()),
        (1..100_000u32).prop_map(|seconds| format!("@every {seconds}s")),
        (1..48u32, 0..60u32).prop_map(|(h, m)| format!("@every {h}h{m}m")),
    ];
    prop_oneof![4 => fields, 3 => typical, 1 => descriptor]
}

fn spec(zones: &'static [Tz]) -> impl Strategy<Value = CronSpec> {
    let prefix = prop_oneof![
        3 => Just(String::new()),
        1 => (0..zones.len()).prop_map(|i| format!("CRON_TZ={} ", zones[i].name())),
        1 => (0..zones.len()).prop_map(|i| format!("TZ={} ", zones[i].name())),
    ];
    (prefix, body()).prop_map(|(prefix, body)| {
        let text = format!("{prefix}{body}");
        CronSpec::parse(&text).unwrap_or_else(|e| panic!("generated spec {text:?} is invalid: {e}"))
    })
}

/// Instants around DST transitions in the zones above, where the walk's special cases live.
const TRANSITIONS: &[i64] = &[
    1_711_846_800, // 2024-03-31 01:00Z Berlin spring forward
    1_729_990_800, // 2024-10-27 01:00Z Berlin fall back
    1_710_054_000, // 2024-03-10 07:00Z New York spring forward
    1_730_613_600, // 2024-11-03 06:00Z New York fall back
    1_539_486_000, // 2018-11-04 03:00Z Sao Paulo midnight spring forward
    1_550_368_800, // 2019-02-17 02:00Z Sao Paulo fall back to midnight
    1_712_415_600, // 2024-04-06 15:00Z Lord Howe fall back (30 minutes)
    1_727_881_200, // 2024-10-02 15:00Z approximately Lord Howe spring forward
    1_712_412_000, // 2024-04-06 14:00Z Chatham fall back
    1_725_159_600, // 2024-09-01 03:00Z Santiago spring forward at midnight
];

fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    let anywhere = (631_152_000i64..2_208_988_800, 0..1_000_000_000u32);
    let near_transition = (
        0..TRANSITIONS.len(),
        -3 * 86_400..3 * 86_400i64,
        0..1_000_000_000u32,
    )
        .prop_map(|(i, delta, nanos)| (TRANSITIONS[i] + delta, nanos));
    prop_oneof![anywhere, near_transition].prop_map(|(secs, nanos)| {
        DateTime::from_timestamp(secs, nanos).unwrap_or_else(|| panic!("bad instant {secs}"))
    })
}

fn zone(zones: &'static [Tz]) -> impl Strategy<Value = Tz> {
    (0..zones.len()).prop_map(|i| zones[i])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]

    #[test]
    fn next_is_strictly_after_its_input(spec in spec(ZONES), after in instant(), zone in zone(ZONES)) {
        if let Some(next) = spec.next_after_in(after, &zone) {
            prop_assert!(next > after, "{spec} in {zone}: next after {after} is {next}");
            // Chaining also moves forward (the path the scheduler takes run after run).
            if let Some(following) = spec.next_after_in(next, &zone) {
                prop_assert!(following > next, "{spec} in {zone}: next after {next} is {following}");
            }
        }
    }

    #[test]
    fn next_is_monotone(
        spec in spec(WHOLE_HOUR_ZONES),
        first in instant(),
        gap in prop_oneof![0..120i64, 0..7_200i64, 0..40_000_000i64],
        zone in zone(WHOLE_HOUR_ZONES),
    ) {
        let second = first + TimeDelta::seconds(gap);
        if let (Some(a), Some(b)) = (spec.next_after_in(first, &zone), spec.next_after_in(second, &zone)) {
            prop_assert!(a <= b, "{spec} in {zone}: next({first}) = {a} but next({second}) = {b}");
        }
    }

    #[test]
    fn a_recorded_decision_is_not_due_again(
        spec in spec(ZONES),
        created in instant(),
        gap in 0..100_000_000i64,
        in_flight in any::<bool>(),
        deadline in prop::option::of(0..100_000u64),
    ) {
        let state = ScheduleState {
            created_at: created,
            paused: false,
            skip_immediately: None,
            last_backup: None,
            last_skipped: None,
            in_flight,
            starting_deadline_seconds: deadline,
            activation_pending: false,
        };
        let now = created + TimeDelta::seconds(gap);
        let decision = evaluate(&spec, &state, now, false);
        if matches!(decision.action, Action::Fire | Action::Skip) {
            prop_assert_eq!(decision.tick, decision.next_run_time);
            if let Some(next) = decision.next_run_after {
                prop_assert!(next > now, "{} recorded at {}: next run {}", spec, now, next);
            }
            let recorded = ScheduleState {
                last_backup: decision.last_backup_after,
                last_skipped: decision.last_skipped_after,
                ..state
            };
            prop_assert!(!evaluate(&spec, &recorded, now, false).due);
        }
    }
}

/// Lord Howe moves its clocks by half an hour. robfig steps hours as absolute hours, so after
/// the fall-back change an hour step from 01:00 lands on 03:30 rather than 03:00; the minute walk
/// then rolls on to 04:00 and the day's 03:00 run is missed, while a start half an hour later
/// finds it. We reproduce robfig, quirk included; the test pins it so a change is deliberate.
#[test]
fn lord_howe_half_hour_change_follows_robfig() {
    let at = |text: &str| {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    };
    let spec =
        CronSpec::parse("CRON_TZ=Australia/Lord_Howe 0 3 * * *").unwrap_or_else(|e| panic!("{e}"));
    // 2024-04-07 01:00 +11:00 (before the change) and 01:59:59 +10:30 (after it).
    assert_eq!(
        spec.next_after(at("2024-04-06T14:00:00Z")),
        Some(at("2024-04-07T16:30:00Z"))
    );
    assert_eq!(
        spec.next_after(at("2024-04-06T15:29:59Z")),
        Some(at("2024-04-06T16:30:00Z"))
    );
}
