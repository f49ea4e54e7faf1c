//! Replays the 155 robfig/cron v3.0.1 cases of `data/cron_cases.json` through `CronSpec`.
//!
//! `standard` cases go through the public parser (16 of them must be rejected); `seconds` cases
//! come from robfig's 6-field test parser and go through the test-only `parse_with_seconds`,
//! which shares the next-time engine. Each valid case checks the chain next(from),
//! next(next(from)), next(next(next(from))) and the UTC offset of each run in the zone robfig
//! evaluated it in (which also checks chrono-tz's zone data against Go's).
//!
//! The zone a spec without `CRON_TZ` is evaluated in is the zone of the input time, as in robfig:
//! `from_tz` when the case gives one, else the fixed offset written in `from_` (UTC for `Z`).

use chrono::{DateTime, FixedOffset, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::Value;
use sexton_schedule::CronSpec;

const DATA: &str = include_str!("data/cron_cases.json");

/// The zone robfig evaluated a case in.
enum EvalZone {
    Named(Tz),
    Fixed(FixedOffset),
}

impl EvalZone {
    fn next(&self, spec: &CronSpec, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            EvalZone::Named(tz) => spec.next_after_in(after, tz),
            EvalZone::Fixed(offset) => spec.next_after_in(after, offset),
        }
    }

    fn offset_at(&self, instant: DateTime<Utc>) -> FixedOffset {
        match self {
            EvalZone::Named(tz) => tz.offset_from_utc_datetime(&instant.naive_utc()).fix(),
            EvalZone::Fixed(offset) => *offset,
        }
    }

    fn name(&self) -> String {
        match self {
            EvalZone::Named(tz) => tz.name().to_owned(),
            EvalZone::Fixed(offset) if offset.local_minus_utc() == 0 => "UTC".to_owned(),
            EvalZone::Fixed(offset) => offset.to_string(),
        }
    }
}

fn text<'a>(case: &'a Value, key: &str) -> Result<&'a str, String> {
    case[key]
        .as_str()
        .ok_or_else(|| format!("field {key} missing or not a string"))
}

fn instant(text: &str) -> Result<DateTime<FixedOffset>, String> {
    DateTime::parse_from_rfc3339(text).map_err(|e| format!("bad time {text}: {e}"))
}

/// Checks one case and returns how many run times it compared; `Err` describes the first
/// mismatch.
fn check(case: &Value) -> Result<usize, String> {
    let spec_text = text(case, "spec")?;
    let parsed = match text(case, "parser")? {
        "standard" => CronSpec::parse(spec_text),
        "seconds" => CronSpec::parse_with_seconds(spec_text),
        other => return Err(format!("unknown parser {other}")),
    };
    let expect = &case["expect"];
    let valid = expect["valid"].as_bool().ok_or("expect.valid missing")?;

    let spec = match (parsed, valid) {
        (Ok(spec), true) => spec,
        (Err(_), false) => return Ok(0),
        (Ok(_), false) => {
            return Err(format!(
                "accepted a spec robfig rejects ({})",
                expect["robfig_error"]
            ))
        }
        (Err(error), true) => return Err(format!("rejected a spec robfig accepts: {error}")),
    };
    if spec.to_string() != spec_text {
        return Err(format!(
            "Display gives {:?}, not the original text",
            spec.to_string()
        ));
    }

    let from = instant(text(case, "from_")?)?;
    let zone = match (spec.zone(), case["from_tz"].as_str()) {
        (Some(tz), _) => EvalZone::Named(tz),
        (None, Some(name)) => EvalZone::Named(
            name.parse::<Tz>()
                .map_err(|e| format!("bad from_tz {name}: {e}"))?,
        ),
        (None, None) => EvalZone::Fixed(*from.offset()),
    };
    let eval_zone = text(case, "eval_zone")?;
    if zone.name() != eval_zone {
        return Err(format!(
            "evaluated in {}, robfig in {eval_zone}",
            zone.name()
        ));
    }

    let mut cursor = from.with_timezone(&Utc);
    if expect["no_next_within_5y"].as_bool() == Some(true) {
        return match zone.next(&spec, cursor) {
            None => Ok(0),
            Some(next) => Err(format!("expected no run within 5 years, got {next}")),
        };
    }
    let expected_utc = expect["next_utc"]
        .as_array()
        .ok_or("expect.next_utc missing")?;
    let expected_local = expect["next_local"]
        .as_array()
        .ok_or("expect.next_local missing")?;
    if expected_utc.is_empty() || expected_utc.len() != expected_local.len() {
        return Err("expect.next_utc / next_local malformed".to_owned());
    }
    for (step, (want_utc, want_local)) in expected_utc.iter().zip(expected_local).enumerate() {
        let want_utc = instant(want_utc.as_str().ok_or("next_utc item not a string")?)?;
        let want_local = instant(want_local.as_str().ok_or("next_local item not a string")?)?;
        let got = zone.next(&spec, cursor).ok_or_else(|| {
            format!("step {step}: no next run after {cursor}, expected {want_utc}")
        })?;
        if got != want_utc {
            return Err(format!(
                "step {step}: next after {cursor} is {got}, expected {want_utc}"
            ));
        }
        if zone.offset_at(got) != *want_local.offset() {
            return Err(format!(
                "step {step}: {got} is at offset {} in {}, robfig saw {want_local}",
                zone.offset_at(got),
                zone.name()
            ));
        }
        cursor = got;
    }
    Ok(expected_utc.len())
}

#[test]
fn all_robfig_cases_pass() {
    let data: Value = serde_json::from_str(DATA).unwrap_or_else(|e| panic!("cron_cases.json: {e}"));
    let cases = data["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("no cases array"));
    assert_eq!(cases.len(), 155, "the data file should hold 155 cases");

    let mut failures = Vec::new();
    let mut runs_compared = 0;
    for case in cases {
        let id = case["id"].as_str().unwrap_or("<no id>");
        match check(case) {
            Ok(runs) => runs_compared += runs,
            Err(why) => failures.push(format!(
                "{id} ({:?}): {why}",
                case["spec"].as_str().unwrap_or("")
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cron cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    // 155 cases - 20 rejected - 4 with no run within five years = 131 chains of three.
    assert_eq!(runs_compared, 131 * 3);
}

#[test]
fn the_expected_cases_are_rejected() {
    // A guard on the data itself: 16 standard and 4 seconds cases are invalid in robfig.
    let data: Value = serde_json::from_str(DATA).unwrap_or_else(|e| panic!("cron_cases.json: {e}"));
    let cases = data["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("no cases array"));
    let rejected_by = |parser: &str| {
        cases
            .iter()
            .filter(|case| case["parser"] == parser && case["expect"]["valid"] == false)
            .count()
    };
    assert_eq!(rejected_by("standard"), 16);
    assert_eq!(rejected_by("seconds"), 4);
    let rejected_publicly = cases
        .iter()
        .filter(|case| case["parser"] == "standard")
        .filter(|case| CronSpec::parse(case["spec"].as_str().unwrap_or("")).is_err())
        .count();
    assert_eq!(rejected_publicly, 16);
}
