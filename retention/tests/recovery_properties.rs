//! What a plan costs in restorable time (issue 47), over random catalogs and policies:
//! 1. the window invariant: every instant of the promised recovery window that the catalog can
//!    be restored to before a plan, it can be restored to after it;
//! 2. a hold never loses anything: with one more hold (ordinary or standalone) on any backup,
//!    the plan leaves every instant and every restore point it left without it.
//!
//! "Restorable" is [`sexton_retention::restorable`]'s answer, and "after" is
//! [`sexton_retention::after_plan`]'s catalog.
//!
//! Catalogs: fulls, incrementals and differentials, or per-volume chains (a quarter of them);
//! every status, holds (standalone and ordinary), legal holds, immutable, locked and
//! delete-requested backups, volumes already expiring; a binlog archive of consecutively
//! numbered segments with missing numbers, unknown ends and unknown starts, and a few segments
//! whose names do not compare. Policies always have a `recovery_window`, plus up to three other
//! random rules, in keep or merge mode, and in three cases of ten a `pitr_full` of 1 to 3.
//!
//! Each property runs 5,000 cases (or `PROPTEST_CASES` when larger); the `#[ignore]`d variants
//! run 100,000: `cargo test -p sexton-retention --test recovery_properties -- --ignored`.

use std::collections::BTreeMap;

use chrono::{DateTime, FixedOffset, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};
use sexton_retention::recovery::sample_instants;
use sexton_retention::{
    after_plan, drill, plan, restorable, BackupKind, BackupRecord, BackupStatus, BinlogSegment,
    Catalog, Plan, PlanError, Policy, Recovery, VolumeArtifact,
};

#[derive(Clone, Debug)]
struct BackupSpec {
    gap_minutes: i64,
    full: bool,
    parent_choice: usize,
    status: BackupStatus,
    legal_hold: bool,
    hold: bool,
    immutable: bool,
    delete_requested: bool,
    locked: bool,
    has_start: bool,
    offset: usize,
    /// Per volume: an artifact already marked expiring.
    expiring: [bool; 2],
}

fn status() -> impl Strategy<Value = BackupStatus> {
    prop_oneof![
        14 => Just(BackupStatus::Completed),
        2 => Just(BackupStatus::Failed),
        1 => Just(BackupStatus::InProgress),
        1 => Just(BackupStatus::Expiring),
        1 => Just(BackupStatus::Deleting),
        1 => Just(BackupStatus::DeleteFailed),
        1 => Just(BackupStatus::Missing),
    ]
}

fn backup_spec() -> impl Strategy<Value = BackupSpec> {
    (
        (
            prop_oneof![3 => 20i64..1500, 1 => 1500i64..6000],
            proptest::bool::weighted(0.3),
            any::<usize>(),
        ),
        status(),
        (
            proptest::bool::weighted(0.04),
            proptest::bool::weighted(0.12),
            proptest::bool::weighted(0.08),
            proptest::bool::weighted(0.08),
            proptest::bool::weighted(0.05),
        ),
        (proptest::bool::weighted(0.8), 0usize..3),
        (
            proptest::bool::weighted(0.04),
            proptest::bool::weighted(0.04),
        ),
    )
        .prop_map(
            |(
                (gap_minutes, full, parent_choice),
                status,
                (legal_hold, hold, immutable, delete_requested, locked),
                (has_start, offset),
                (expiring_0, expiring_1),
            )| BackupSpec {
                gap_minutes,
                full,
                parent_choice,
                status,
                legal_hold,
                hold,
                immutable,
                delete_requested,
                locked,
                has_start,
                offset,
                expiring: [expiring_0, expiring_1],
            },
        )
}

/// One segment of the numbered sequence: its length in minutes and what is odd about it.
#[derive(Clone, Copy, Debug)]
enum SegmentOddity {
    None,
    /// Not in the archive: a missing number, a gap.
    Gone,
    UnknownEnd,
}

fn segment_spec() -> impl Strategy<Value = (i64, SegmentOddity)> {
    (
        prop_oneof![3 => 30i64..600, 1 => 600i64..2000],
        prop_oneof![
            40 => Just(SegmentOddity::None),
            3 => Just(SegmentOddity::Gone),
            1 => Just(SegmentOddity::UnknownEnd),
        ],
    )
}

const OFFSETS: [i32; 3] = [0, 2 * 3600, -5 * 3600];
const VOLUMES: [&str; 2] = ["pv0", "pv1"];

fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap()
}

/// Builds the backups, oldest first; returns them and the newest time.
fn build_backups(specs: &[BackupSpec], with_volumes: bool) -> (Vec<BackupRecord>, DateTime<Utc>) {
    let mut minutes = 0;
    let mut backups: Vec<BackupRecord> = Vec::new();
    for (index, spec) in specs.iter().enumerate() {
        minutes += spec.gap_minutes;
        let offset = FixedOffset::east_opt(OFFSETS[spec.offset]).unwrap();
        let time = (base() + TimeDelta::minutes(minutes)).with_timezone(&offset);
        let good: Vec<&BackupRecord> = backups
            .iter()
            .filter(|b| b.status != BackupStatus::Failed)
            .collect();
        // Mostly the latest good backup, sometimes an older one.
        let parent = (!spec.full && !good.is_empty()).then(|| {
            let pick = if spec.parent_choice % 4 == 0 {
                spec.parent_choice / 4 % good.len()
            } else {
                good.len() - 1
            };
            good[pick].id.clone()
        });
        let failed = spec.status == BackupStatus::Failed;
        let in_progress = spec.status == BackupStatus::InProgress;
        let volumes = if with_volumes {
            VOLUMES
                .iter()
                .enumerate()
                .map(|(v, name)| {
                    let mut artifact = match &parent {
                        Some(parent) => VolumeArtifact::incremental(*name, parent.clone(), vec![]),
                        None => VolumeArtifact::full(*name, vec![]),
                    };
                    artifact.failed = failed && v == 0;
                    artifact.expiring = !failed && spec.expiring[v];
                    artifact
                })
                .collect()
        } else {
            Vec::new()
        };
        let differential = parent.as_ref().is_some_and(|p| {
            backups
                .iter()
                .any(|b| b.id == *p && b.kind == BackupKind::Full)
        }) && spec.parent_choice % 2 == 1;
        backups.push(BackupRecord {
            id: format!("b{index}"),
            completed_at: (!in_progress).then_some(time),
            started_at: if in_progress {
                Some(time)
            } else {
                spec.has_start.then(|| time - TimeDelta::minutes(7))
            },
            status: spec.status,
            kind: if parent.is_some() && !with_volumes {
                BackupKind::Incremental
            } else {
                BackupKind::Full
            },
            parent: if with_volumes { None } else { parent },
            legal_hold: spec.legal_hold,
            holds: match (spec.hold, index % 2) {
                (false, _) => Vec::new(),
                (true, 0) => vec!["standalone:yearly".to_owned()],
                (true, _) => vec!["restore:r".to_owned()],
            },
            immutable: spec.immutable,
            locked_until: spec
                .locked
                .then(|| Utc.with_ymd_and_hms(2100, 1, 1, 0, 0, 0).unwrap()),
            delete_requested: spec.delete_requested,
            volumes,
            differential: differential && !with_volumes,
            ..BackupRecord::default()
        });
    }
    (backups, base() + TimeDelta::minutes(minutes))
}

/// A numbered archive from a day before the first backup on, each segment starting where the
/// one before it ended (as a server's binlogs do), until `until` or the specs run out; and a
/// few segments whose names do not compare, anywhere, some with an unknown first event.
///
/// Numbered segments always have a first event. One without is proven to cover its last
/// instant only, and only its predecessor's end says where it starts; the engine may delete
/// that predecessor (it ends before the horizon) although a kept base replays from the
/// segment, and the model could then no longer prove what it did before. That is a limit of
/// what the catalog records, not a lost segment, so it is left out here.
fn build_segments(
    specs: &[(i64, SegmentOddity)],
    loose: &[(i64, i64)],
    until: DateTime<Utc>,
) -> Vec<BinlogSegment> {
    let mut segments = Vec::new();
    let mut cursor = base() - TimeDelta::days(1);
    for (number, &(length, oddity)) in specs.iter().enumerate() {
        if cursor > until {
            break;
        }
        let first = cursor.fixed_offset();
        let last = (cursor + TimeDelta::minutes(length)).fixed_offset();
        cursor += TimeDelta::minutes(length);
        let (first_event, last_event) = match oddity {
            SegmentOddity::Gone => continue,
            SegmentOddity::None => (Some(first), Some(last)),
            SegmentOddity::UnknownEnd => (Some(first), None),
        };
        segments.push(BinlogSegment {
            key: format!("g/binlog/mysql-bin.{:06}", number + 1),
            first_event,
            last_event,
        });
    }
    for (index, &(start, length)) in loose.iter().enumerate() {
        let first = base() + TimeDelta::minutes(start);
        segments.push(BinlogSegment {
            key: format!("g/binlog/loose-{index}"),
            first_event: (length % 5 != 0).then(|| first.fixed_offset()),
            last_event: Some((first + TimeDelta::minutes(length)).fixed_offset()),
        });
    }
    segments
}

/// One more rule of a policy, as a JSON key and value (properties.rs's, less keep_tags and
/// keep_verified, which these catalogs do not exercise).
fn rule() -> impl Strategy<Value = (&'static str, Value)> {
    let count = prop_oneof![4 => (1i64..6).prop_map(Value::from), 1 => Just(Value::from(-1))];
    let duration = prop_oneof![
        (1u32..72).prop_map(|h| Value::from(format!("{h}h"))),
        (1u32..40).prop_map(|d| Value::from(format!("{d}d"))),
    ];
    prop_oneof![
        count.clone().prop_map(|v| ("keep_last", v)),
        count.clone().prop_map(|v| ("keep_daily", v)),
        count.clone().prop_map(|v| ("keep_weekly", v)),
        count.clone().prop_map(|v| ("keep_full", v)),
        count.prop_map(|v| ("keep_monthly", v)),
        duration.clone().prop_map(|v| ("keep_within", v)),
        duration.prop_map(|v| ("keep_within_daily", v)),
        (1u32..30).prop_map(|d| ("retention_duration", Value::from(d.to_string()))),
    ]
}

fn window() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u32..30).prop_map(|d| format!("{d}d")),
        (1u32..4).prop_map(|w| format!("{w}w")),
        (2u32..72).prop_map(|h| format!("{h}h")),
        Just("1m".to_owned()),
    ]
}

#[derive(Clone, Debug)]
struct Scenario {
    catalog: Catalog,
    policy_json: String,
    now: DateTime<Utc>,
    /// Property 2: the backup that gets one more hold, and whether it is standalone.
    extra_hold: (usize, bool),
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        proptest::collection::vec(backup_spec(), 1..22),
        proptest::bool::weighted(0.25),
        proptest::collection::vec(segment_spec(), 0..110),
        proptest::collection::vec((-1440i64..40_000, 10i64..3000), 0..3),
        (
            window(),
            proptest::collection::vec(rule(), 0..3),
            proptest::option::weighted(0.3, 1u32..4),
        ),
        (any::<bool>(), prop_oneof![Just("1h"), Just("2d")]),
        0i64..2880,
        (any::<usize>(), any::<bool>()),
    )
        .prop_map(
            |(
                specs,
                with_volumes,
                segment_specs,
                loose,
                (window, rules, pitr_full),
                (merge, grace),
                minutes_after,
                extra_hold,
            )| {
                let (backups, newest) = build_backups(&specs, with_volumes);
                let now = newest + TimeDelta::minutes(minutes_after);
                let binlog_segments = build_segments(&segment_specs, &loose, now);
                let mut object: BTreeMap<&str, Value> = BTreeMap::new();
                object.extend(rules);
                object.insert("recovery_window", Value::from(window));
                if let Some(n) = pitr_full {
                    object.insert("pitr_full", Value::from(n));
                }
                object.insert(
                    "chain_mode",
                    Value::from(if merge { "merge" } else { "keep" }),
                );
                object.insert("failed_grace", Value::from(grace));
                Scenario {
                    catalog: Catalog {
                        backups,
                        binlog_segments,
                    },
                    policy_json: json!(object).to_string(),
                    now,
                    extra_hold: (extra_hold.0 % specs.len(), extra_hold.1),
                }
            },
        )
}

fn policy_of(scenario: &Scenario) -> Policy {
    Policy::from_json(&scenario.policy_json).expect("generated policies are valid")
}

/// Plans, accepting the one legitimate refusal (no completed full to keep as the floor).
fn plan_of(
    catalog: &Catalog,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<Option<Plan>, TestCaseError> {
    match plan(catalog, policy, now) {
        Ok(plan) => Ok(Some(plan)),
        Err(PlanError::WouldDeleteAll) => Ok(None),
        Err(other) => Err(TestCaseError::fail(format!("unexpected error: {other}"))),
    }
}

/// The instants to compare in `from..=to`: every point and interval boundary and gap end of
/// `recovery` inside it, and nine evenly spaced ones (both ends included).
fn samples(recovery: &Recovery, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    sample_instants(recovery, from, to, 8)
}

/// The catalog less the backups a user asked to delete: what only they restore to is not
/// promised (the user's word beats the window), so the window invariant compares against
/// what the catalog restores to without them.
fn without_delete_requested(catalog: &Catalog) -> Catalog {
    Catalog {
        backups: catalog
            .backups
            .iter()
            .filter(|b| !b.delete_requested)
            .cloned()
            .collect(),
        binlog_segments: catalog.binlog_segments.clone(),
    }
}

/// Under `pitr_full: N`, where point-in-time recovery is promised from: the end of the N-th
/// newest full backup the plan keeps (any status but failed or in progress), the first instant
/// a replay from it reaches, or `None` when fewer than N are kept and `pitr_full` limits
/// nothing. (The horizon is that full's start, for the segments that make it consistent;
/// what lies between its start and its end is restored from older bases only.)
///
/// Every kept full counts here, also those the engine leaves out of its own count (held
/// standalone, or kept only by holds): counting more fulls only moves the N-th newest newer,
/// so this is the latest instant the promise may begin at, whatever the engine counts.
fn pitr_promised_from(after: &Catalog, n: u32) -> Option<DateTime<Utc>> {
    let mut ends: Vec<DateTime<Utc>> = after
        .backups
        .iter()
        .filter(|b| b.kind == BackupKind::Full || !b.volumes.is_empty())
        .filter(|b| !matches!(b.status, BackupStatus::Failed | BackupStatus::InProgress))
        .filter_map(|b| b.completed_at.map(|at| at.to_utc()))
        .collect();
    ends.sort_unstable_by(|a, b| b.cmp(a));
    ends.get(n as usize - 1).copied()
}

fn window_invariant(scenario: &Scenario) -> Result<(), TestCaseError> {
    let policy = policy_of(scenario);
    let Some(plan) = plan_of(&scenario.catalog, &policy, scenario.now)? else {
        return Ok(());
    };
    let window = policy.recovery_window.expect("always drawn").as_delta();
    let start = scenario.now - window;
    let before = restorable(&without_delete_requested(&scenario.catalog), scenario.now);
    let after_catalog = after_plan(&scenario.catalog, &plan);
    let after = restorable(&after_catalog, scenario.now);
    // Narrowed for pitr_full, by its documented meaning (policy.rs, binlog.rs): point-in-time
    // recovery is promised from the newest N kept fulls only, and of every older kept backup
    // the archive keeps its own range, restorable to its own end. pgBackRest's archive
    // retention (repo-retention-archive) limits the time-based retention of backups the same
    // way. A window reaching back past the N-th newest kept full is then kept whole from that
    // full's end on, and before it only at its restore points (the window's backups stay):
    // the replay from older bases is what pitr_full asks to let go.
    let promised_from = policy
        .pitr_full
        .and_then(|n| pitr_promised_from(&after_catalog, n.get()));
    let point_at = |t: DateTime<Utc>| before.points.iter().any(|p| p.at.to_utc() == t);
    for t in samples(&before, start, scenario.now) {
        let promised = promised_from.is_none_or(|from| t >= from) || point_at(t);
        if promised && before.restorable_at(t) {
            prop_assert!(
                after.restorable_at(t),
                "{} is in the window from {} and restorable before the plan, not after\n\
                 before: {:?}\nafter: {:?}\nplan: {}",
                t,
                start,
                before,
                after,
                serde_json::to_string(&plan).unwrap()
            );
        }
    }
    Ok(())
}

fn hold_invariant(scenario: &Scenario) -> Result<(), TestCaseError> {
    let policy = policy_of(scenario);
    let (index, standalone) = scenario.extra_hold;
    let mut held = scenario.catalog.clone();
    let reason = if standalone { "standalone:x" } else { "keep:x" };
    held.backups[index].holds.push(reason.to_owned());
    let Some(plan_without) = plan_of(&scenario.catalog, &policy, scenario.now)? else {
        return Ok(());
    };
    let plan_with = plan(&held, &policy, scenario.now)
        .map_err(|error| TestCaseError::fail(format!("the held catalog failed: {error}")))?;
    let without = restorable(&after_plan(&scenario.catalog, &plan_without), scenario.now);
    let with = restorable(&after_plan(&held, &plan_with), scenario.now);
    let id = &held.backups[index].id;
    for point in &without.points {
        prop_assert!(
            with.point(&point.id).is_some(),
            "hold {} on {} lost restore point {}",
            reason,
            id,
            point.id
        );
    }
    let Some(oldest) = without.oldest() else {
        return Ok(());
    };
    // Whole, also under pitr_full: a full kept only by holds is not one of the newest N that
    // point-in-time recovery is promised from (issue 47; binlog.rs, held.rs), so a hold never
    // pushes a full out of the count and the archive after it with it.
    for t in samples(&without, oldest, scenario.now) {
        if without.restorable_at(t) {
            prop_assert!(
                with.restorable_at(t),
                "hold {} on {} lost {}\nwithout: {:?}\nwith: {:?}\nplan without: {}\nplan with: {}\ncatalog: {}",
                reason,
                id,
                t,
                without,
                with,
                serde_json::to_string(&plan_without).unwrap(),
                serde_json::to_string(&plan_with).unwrap(),
                serde_json::to_string(&scenario.catalog).unwrap()
            );
        }
    }
    Ok(())
}

/// A drill (what a restore to one instant reads) exists exactly at the instants the recovery
/// value calls restorable, and reads what it claims: a point restorable as it is, at or before
/// the instant, and a replay from a segment started no later than the point that stops at it.
fn drill_invariant(scenario: &Scenario) -> Result<(), TestCaseError> {
    let catalog = &scenario.catalog;
    let recovery = restorable(catalog, scenario.now);
    let from = recovery
        .oldest()
        .map_or(scenario.now - TimeDelta::days(2), |t| {
            t - TimeDelta::hours(1)
        });
    for t in samples(&recovery, from, scenario.now) {
        let drill = drill(catalog, scenario.now, t);
        prop_assert_eq!(
            drill.is_ok(),
            recovery.restorable_at(t),
            "{}: drill {:?}\nrecovery {:?}",
            t,
            drill,
            recovery
        );
        let Ok(drill) = drill else { continue };
        prop_assert!(recovery.point(&drill.base.id) == Some(&drill.base));
        let at = drill.base.at.to_utc();
        prop_assert!(at <= t);
        match drill.replay {
            None => prop_assert_eq!(at, t),
            Some(replay) => {
                let backup = catalog
                    .backups
                    .iter()
                    .find(|b| b.id == drill.base.id)
                    .unwrap();
                prop_assert!(at < t);
                prop_assert_eq!(replay.until, t);
                prop_assert!(replay.since <= backup.started_at.unwrap_or(drill.base.at).to_utc());
            }
        }
    }
    Ok(())
}

/// `cases`, or `PROPTEST_CASES` when it asks for more.
// `PROPTEST_CASES` from the environment, as proptest itself reads it: a test's setting, not
// the crate's (its clippy.toml forbids the environment to the crate).
#[allow(clippy::disallowed_methods)]
fn config(cases: u32) -> Config {
    let asked = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0);
    Config {
        cases: cases.max(asked),
        failure_persistence: None,
        ..Config::default()
    }
}

fn check(cases: u32, property: fn(&Scenario) -> Result<(), TestCaseError>) {
    let mut runner = TestRunner::new(config(cases));
    if let Err(error) = runner.run(&scenario(), |scenario| property(&scenario)) {
        panic!("{error}");
    }
}

#[test]
fn a_plan_keeps_every_restorable_instant_of_the_window() {
    check(5_000, window_invariant);
}

#[test]
fn a_hold_never_loses_a_restorable_instant() {
    check(5_000, hold_invariant);
}

#[test]
fn a_drill_reads_exactly_what_the_recovery_value_promises() {
    check(5_000, drill_invariant);
}

#[test]
#[ignore = "100,000 cases: minutes"]
fn a_plan_keeps_every_restorable_instant_of_the_window_long() {
    check(100_000, window_invariant);
}

#[test]
#[ignore = "100,000 cases: minutes"]
fn a_hold_never_loses_a_restorable_instant_long() {
    check(100_000, hold_invariant);
}
