//! restic's 40 `forget` golden files, run through the engine's restic core with Sexton's own
//! rules off. Every keep list, match string and counter must be restic's. See
//! `tests/data/restic/README.md` for where the data comes from.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, FixedOffset, TimeZone, Utc};
use serde::Deserialize;
use serde_json::{json, Value};
use sexton_retention::gfs::{restic_keep, Counters, Snapshot};
use sexton_retention::{Policy, PolicyError};

#[derive(Deserialize)]
struct InputSnapshot {
    index: usize,
    time: String,
    tags: Option<Vec<String>>,
    paths: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Case {
    index: usize,
    file: String,
    policy: Value,
}

#[derive(Deserialize)]
struct Golden {
    keep: Option<Vec<GoldenSnapshot>>,
    #[serde(default)]
    reasons: Vec<GoldenReason>,
}

#[derive(Deserialize, Debug)]
struct GoldenSnapshot {
    time: String,
    paths: Option<Vec<String>>,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Deserialize)]
struct GoldenReason {
    snapshot: GoldenSnapshot,
    matches: Vec<String>,
    counters: BTreeMap<String, i64>,
}

#[derive(Deserialize)]
struct FlatCase {
    index: usize,
    keep: Vec<FlatKeep>,
}

#[derive(Deserialize)]
struct FlatKeep {
    input_index: usize,
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/restic")
}

// The conformance cases are restic's own files, read as the test runs (the crate's clippy.toml
// forbids reading files to the crate, not to its tests' fixtures).
#[allow(clippy::disallowed_methods)]
fn read<T: for<'de> Deserialize<'de>>(name: &str) -> T {
    let path = data_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("parsing {}: {error}", path.display()))
}

/// restic's policy row as Sexton's policy JSON.
fn sexton_policy(restic: &Value) -> Value {
    let mut policy = serde_json::Map::new();
    for (restic_name, sexton_name) in [
        ("last", "keep_last"),
        ("hourly", "keep_hourly"),
        ("daily", "keep_daily"),
        ("weekly", "keep_weekly"),
        ("monthly", "keep_monthly"),
        ("yearly", "keep_yearly"),
    ] {
        let count = restic[restic_name].as_i64().unwrap();
        if count != 0 {
            policy.insert(sexton_name.to_owned(), json!(count));
        }
    }
    for (restic_name, sexton_name) in [
        ("within", "keep_within"),
        ("within_hourly", "keep_within_hourly"),
        ("within_daily", "keep_within_daily"),
        ("within_weekly", "keep_within_weekly"),
        ("within_monthly", "keep_within_monthly"),
        ("within_yearly", "keep_within_yearly"),
    ] {
        if let Some(spec) = restic[restic_name].get("spec") {
            policy.insert(sexton_name.to_owned(), spec.clone());
        }
    }
    let tags = restic["tags"].as_array().unwrap();
    if !tags.is_empty() {
        policy.insert("keep_tags".to_owned(), Value::Array(tags.clone()));
    }
    Value::Object(policy)
}

fn counters_as_map(counters: &Counters) -> BTreeMap<String, i64> {
    [
        ("last", counters.last),
        ("hourly", counters.hourly),
        ("daily", counters.daily),
        ("weekly", counters.weekly),
        ("monthly", counters.monthly),
        ("yearly", counters.yearly),
    ]
    .into_iter()
    .filter(|&(_, value)| value != 0)
    .map(|(name, value)| (name.to_owned(), value))
    .collect()
}

fn parse_time(text: &str) -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339(text).unwrap_or_else(|error| panic!("time {text}: {error}"))
}

#[test]
fn all_forty_golden_files_match() {
    let inputs: Vec<InputSnapshot> = read("input_snapshots.json");
    let cases: Vec<Case> = read("cases.json");
    let flat: Vec<FlatCase> = read("expected_flat.json");
    assert_eq!(inputs.len(), 103);
    assert_eq!(cases.len(), 40);
    for (position, input) in inputs.iter().enumerate() {
        assert_eq!(input.index, position);
    }
    let times: Vec<DateTime<FixedOffset>> = inputs.iter().map(|s| parse_time(&s.time)).collect();
    let tags: Vec<Vec<String>> = inputs
        .iter()
        .map(|s| s.tags.clone().unwrap_or_default())
        .collect();
    let snapshots: Vec<Snapshot<'_>> = times
        .iter()
        .zip(&tags)
        .map(|(&time, tags)| Snapshot { time, tags })
        .collect();
    // restic ran at "now"; every input snapshot is in the past.
    let now = Utc.with_ymd_and_hms(2100, 1, 1, 0, 0, 0).unwrap();

    let mut failures = Vec::new();
    for case in &cases {
        let policy_json = sexton_policy(&case.policy);
        let policy = if case.index == 0 {
            // restic's empty policy keeps nothing; Sexton refuses it at the boundary.
            assert_eq!(
                Policy::from_json(&policy_json.to_string()),
                Err(PolicyError::NoRule)
            );
            Policy::default()
        } else {
            Policy::from_json(&policy_json.to_string())
                .unwrap_or_else(|error| panic!("case {}: {error}", case.index))
        };
        let kept = restic_keep(&snapshots, &policy, now).unwrap();
        let golden: Golden = read(&case.file);
        let golden_keep = golden.keep.unwrap_or_default();

        let mut problems = Vec::new();
        if kept.len() != golden_keep.len() {
            problems.push(format!(
                "kept {} snapshots, restic kept {}",
                kept.len(),
                golden_keep.len()
            ));
        }
        if golden.reasons.len() != golden_keep.len() {
            problems.push("golden file has as many reasons as kept snapshots".to_owned());
        }
        for (rank, (ours, theirs)) in kept.iter().zip(&golden_keep).enumerate() {
            let input = &inputs[ours.input_index];
            let our_time = times[ours.input_index];
            let their_time = parse_time(&theirs.time);
            if our_time != their_time
                || our_time.timestamp_subsec_nanos() != their_time.timestamp_subsec_nanos()
            {
                problems.push(format!("#{rank}: time {our_time} != {their_time}"));
            }
            if tags[ours.input_index] != theirs.tags {
                problems.push(format!(
                    "#{rank}: tags {:?} != {:?}",
                    tags[ours.input_index], theirs.tags
                ));
            }
            if input.paths != theirs.paths {
                problems.push(format!(
                    "#{rank}: paths {:?} != {:?}",
                    input.paths, theirs.paths
                ));
            }
            if let Some(reason) = golden.reasons.get(rank) {
                if parse_time(&reason.snapshot.time) != their_time {
                    problems.push(format!("#{rank}: golden reason is for another snapshot"));
                }
                if ours.matches != reason.matches {
                    problems.push(format!(
                        "#{rank}: matches {:?} != {:?}",
                        ours.matches, reason.matches
                    ));
                }
                let our_counters = counters_as_map(&ours.counters);
                if our_counters != reason.counters {
                    problems.push(format!(
                        "#{rank}: counters {our_counters:?} != {:?}",
                        reason.counters
                    ));
                }
            }
        }
        // The flat expectation pins which of several identical snapshots is kept (ties stay
        // in input order).
        let flat_case = flat.iter().find(|flat| flat.index == case.index).unwrap();
        let flat_indices: Vec<usize> = flat_case.keep.iter().map(|k| k.input_index).collect();
        let our_indices: Vec<usize> = kept.iter().map(|k| k.input_index).collect();
        if flat_indices != our_indices {
            problems.push(format!("input indices {our_indices:?} != {flat_indices:?}"));
        }
        if !problems.is_empty() {
            failures.push(format!(
                "case {} {}:\n  {}",
                case.index,
                policy_json,
                problems.join("\n  ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
