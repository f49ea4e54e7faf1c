//! Invariants over random multi-volume catalogs (issue 8): whatever the policy, no kept backup
//! ever loses an artifact its volumes depend on.
//!
//! Catalogs follow what executors do: volumes join the application at different times (and
//! some leave), a volume's first artifact is a full, later ones are incrementals on the
//! volume's last good artifact, a lost snapshot forces a full, a full comes every few
//! backups, a backup fails when one of its volumes fails (and the next builds on the last
//! good one). On top of that come every status, holds, legal holds, immutable and
//! delete-requested backups, volumes already marked expiring, some backups without volumes,
//! and now and then a parent link that an executor got wrong (to a failed backup, to a backup
//! without that volume, to a backup of the other shape). Policies are random, in keep or
//! merge mode.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::Value;
use sexton_retention::{
    evaluate, plan, BackupKind, BackupRecord, BackupStatus, Catalog, Plan, PlanError, Policy,
    Verdict, VolumeArtifact,
};

const VOLUMES: [&str; 4] = ["pv0", "pv1", "pv2", "pv3"];

#[derive(Clone, Debug)]
struct VolumeSpec {
    /// Lost snapshot, or a cadence full.
    full: bool,
    /// The executor got the parent wrong: a random earlier backup.
    wrong_parent: Option<usize>,
    /// Only in failed backups: this volume's upload failed.
    failed: bool,
    expiring: bool,
}

#[derive(Clone, Debug)]
struct BackupSpec {
    gap_minutes: i64,
    status: BackupStatus,
    /// Which of the application's current volumes this backup covers (a bit per volume).
    volume_mask: u8,
    volumes: [VolumeSpec; 4],
    /// A backup of the single-artifact shape.
    no_volumes: bool,
    legal_hold: bool,
    hold: bool,
    immutable: bool,
    delete_requested: bool,
    tagged: bool,
}

fn status() -> impl Strategy<Value = BackupStatus> {
    prop_oneof![
        14 => Just(BackupStatus::Completed),
        3 => Just(BackupStatus::Failed),
        1 => Just(BackupStatus::InProgress),
        1 => Just(BackupStatus::Expiring),
        1 => Just(BackupStatus::Deleting),
        1 => Just(BackupStatus::DeleteFailed),
    ]
}

fn volume_spec() -> impl Strategy<Value = VolumeSpec> {
    (
        proptest::bool::weighted(0.2),
        proptest::option::weighted(0.04, any::<usize>()),
        proptest::bool::weighted(0.5),
        proptest::bool::weighted(0.04),
    )
        .prop_map(|(full, wrong_parent, failed, expiring)| VolumeSpec {
            full,
            wrong_parent,
            failed,
            expiring,
        })
}

fn backup_spec() -> impl Strategy<Value = BackupSpec> {
    (
        (1i64..3000, status(), 1u8..16),
        [volume_spec(), volume_spec(), volume_spec(), volume_spec()],
        (
            proptest::bool::weighted(0.06),
            proptest::bool::weighted(0.04),
            proptest::bool::weighted(0.04),
            proptest::bool::weighted(0.12),
            proptest::bool::weighted(0.08),
            proptest::bool::weighted(0.2),
        ),
    )
        .prop_map(
            |(
                (gap_minutes, status, volume_mask),
                volumes,
                (no_volumes, legal_hold, hold, immutable, delete_requested, tagged),
            )| BackupSpec {
                gap_minutes,
                status,
                volume_mask,
                volumes,
                no_volumes,
                legal_hold,
                hold,
                immutable,
                delete_requested,
                tagged,
            },
        )
}

/// The application's volumes over time: volume `v` is covered from backup `joins[v]` on
/// (and only by the backups whose mask has it, as when a volume is detached for a while).
fn build_catalog(specs: &[BackupSpec], joins: &[usize; 4]) -> (Catalog, DateTime<Utc>) {
    let base = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
    let mut minutes = 0;
    let mut backups: Vec<BackupRecord> = Vec::new();
    let mut last_good: HashMap<&str, String> = HashMap::new();
    let mut last_good_whole: Option<String> = None;
    for (index, spec) in specs.iter().enumerate() {
        minutes += spec.gap_minutes;
        let time = (base + TimeDelta::minutes(minutes)).fixed_offset();
        let id = format!("b{index}");
        let failed = spec.status == BackupStatus::Failed;
        let mut volumes = Vec::new();
        if !spec.no_volumes {
            for (slot, name) in VOLUMES.iter().enumerate() {
                if index < joins[slot] || spec.volume_mask & (1 << slot) == 0 {
                    continue;
                }
                let volume_spec = &spec.volumes[slot];
                let keys = vec![format!("app/{id}/{name}.qcow2")];
                let mut volume = match (last_good.get(name), volume_spec.full) {
                    (Some(parent), false) => VolumeArtifact::incremental(*name, parent, keys),
                    _ => VolumeArtifact::full(*name, keys),
                };
                if let (Some(choice), false) = (volume_spec.wrong_parent, backups.is_empty()) {
                    volume.kind = BackupKind::Incremental;
                    volume.parent = Some(backups[choice % backups.len()].id.clone());
                }
                volume.failed = failed && volume_spec.failed;
                volume.expiring = volume_spec.expiring;
                volumes.push(volume);
            }
            if failed && !volumes.iter().any(|volume| volume.failed) {
                if let Some(first) = volumes.first_mut() {
                    first.failed = true;
                }
            }
        }
        let (kind, parent) = if spec.no_volumes {
            match (&last_good_whole, spec.volumes[0].full) {
                (Some(parent), false) => (BackupKind::Incremental, Some(parent.clone())),
                _ => (BackupKind::Full, None),
            }
        } else if volumes.iter().all(|volume| volume.kind == BackupKind::Full) {
            (BackupKind::Full, None)
        } else {
            (BackupKind::Incremental, None)
        };
        // A wrong parent of the other shape: a backup without volumes built on one with.
        let parent = match (spec.no_volumes, spec.volumes[1].wrong_parent) {
            (true, Some(choice)) if !backups.is_empty() => {
                Some(backups[choice % backups.len()].id.clone())
            }
            _ => parent,
        };
        let kind = if parent.is_some() {
            BackupKind::Incremental
        } else {
            kind
        };
        if !failed {
            if spec.no_volumes {
                last_good_whole = Some(id.clone());
            }
            for volume in &volumes {
                let name = VOLUMES.iter().find(|name| **name == volume.name).unwrap();
                last_good.insert(name, id.clone());
            }
        }
        let in_progress = spec.status == BackupStatus::InProgress;
        backups.push(BackupRecord {
            id,
            completed_at: (!in_progress).then_some(time),
            started_at: Some(time - TimeDelta::minutes(if in_progress { 0 } else { 5 })),
            status: spec.status,
            kind,
            parent,
            tags: if spec.tagged {
                vec!["a".to_owned()]
            } else {
                Vec::new()
            },
            legal_hold: spec.legal_hold,
            holds: if spec.hold {
                vec!["restore:r1".to_owned()]
            } else {
                Vec::new()
            },
            immutable: spec.immutable,
            locked_until: None,
            delete_requested: spec.delete_requested,
            volumes,
            verification: Default::default(),
            log_range: None,
            differential: false,
        });
    }
    let newest = base + TimeDelta::minutes(minutes);
    (
        Catalog {
            backups,
            binlog_segments: Vec::new(),
        },
        newest,
    )
}

fn rule() -> impl Strategy<Value = (&'static str, Value)> {
    let count = prop_oneof![4 => (1i64..6).prop_map(Value::from), 1 => Just(Value::from(-1))];
    let duration = prop_oneof![
        (1u32..72).prop_map(|h| Value::from(format!("{h}h"))),
        (1u32..20).prop_map(|d| Value::from(format!("{d}d"))),
    ];
    prop_oneof![
        count.clone().prop_map(|v| ("keep_last", v)),
        count.clone().prop_map(|v| ("keep_hourly", v)),
        count.clone().prop_map(|v| ("keep_daily", v)),
        count.prop_map(|v| ("keep_weekly", v)),
        duration.clone().prop_map(|v| ("keep_within", v)),
        duration.prop_map(|v| ("keep_within_daily", v)),
        Just(("keep_tags", serde_json::json!([["a"]]))),
        (1u32..20).prop_map(|d| ("retention_duration", Value::from(d.to_string()))),
        (1u32..20).prop_map(|d| ("recovery_window", Value::from(format!("{d}d")))),
    ]
}

#[derive(Clone, Debug)]
struct Scenario {
    catalog: Catalog,
    rules: BTreeMap<&'static str, Value>,
    extra_rule: (&'static str, Value),
    merge: bool,
    now: DateTime<Utc>,
    shuffle_keys: Vec<u64>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        proptest::collection::vec(backup_spec(), 0..24),
        [0usize..4, 0usize..10, 0usize..16, 0usize..24],
        proptest::collection::vec(rule(), 1..4),
        rule(),
        any::<bool>(),
        0i64..1000,
        proptest::collection::vec(any::<u64>(), 32),
    )
        .prop_map(
            |(specs, joins, rules, extra_rule, merge, hours_after, shuffle_keys)| {
                let (catalog, newest) = build_catalog(&specs, &joins);
                Scenario {
                    catalog,
                    rules: rules.into_iter().collect(),
                    extra_rule,
                    merge,
                    now: newest + TimeDelta::hours(hours_after),
                    shuffle_keys,
                }
            },
        )
}

fn make_policy(rules: &BTreeMap<&'static str, Value>, merge: bool) -> Policy {
    let mut object = serde_json::Map::new();
    for (key, value) in rules {
        object.insert((*key).to_owned(), value.clone());
    }
    object.insert(
        "chain_mode".to_owned(),
        Value::from(if merge { "merge" } else { "keep" }),
    );
    Policy::from_json(&Value::Object(object).to_string()).expect("generated policies are valid")
}

/// The floor's candidates: completed backups that are full or have volumes.
fn newest_floor_candidate(catalog: &Catalog) -> Option<&BackupRecord> {
    catalog
        .backups
        .iter()
        .filter(|b| {
            b.status == BackupStatus::Completed
                && (b.kind == BackupKind::Full || !b.volumes.is_empty())
        })
        .max_by_key(|b| b.completed_at)
}

fn plan_or_refusal(scenario: &Scenario, policy: &Policy) -> Result<Option<Plan>, TestCaseError> {
    match plan(&scenario.catalog, policy, scenario.now) {
        Ok(plan) => Ok(Some(plan)),
        Err(PlanError::WouldDeleteAll) => {
            prop_assert!(newest_floor_candidate(&scenario.catalog).is_none());
            Ok(None)
        }
        Err(PlanError::ParentCycle { .. }) => Ok(None),
        Err(other) => Err(TestCaseError::fail(format!("unexpected error: {other}"))),
    }
}

/// Every (backup, volume) the plan deletes.
fn deleted_artifacts(plan: &Plan) -> BTreeSet<(String, String)> {
    plan.partial
        .iter()
        .chain(&plan.delete)
        .flat_map(|decision| {
            decision
                .volumes_delete
                .iter()
                .map(|volume| (decision.id.clone(), volume.name.clone()))
        })
        .collect()
}

/// Is artifact `volume` of backup `id` still there after the plan?
fn artifact_kept(plan: &Plan, id: &str, volume: &str) -> bool {
    match plan.decision(id) {
        Some((Verdict::Keep, _)) => true,
        Some((Verdict::Partial, decision)) => {
            decision.volumes_keep.iter().any(|kept| kept.name == volume)
        }
        _ => false,
    }
}

// `PROPTEST_CASES` from the environment, as proptest itself reads it: a test's setting, not
// the crate's (its clippy.toml forbids the environment to the crate).
#[allow(clippy::disallowed_methods)]
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(500);
    ProptestConfig::with_cases(cases)
}

/// What a kept backup, or a kept volume of a partial backup, depends on.
enum Need<'c> {
    Whole(&'c BackupRecord),
    Artifact(&'c BackupRecord, &'c VolumeArtifact),
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn no_kept_backup_loses_an_artifact_it_depends_on(scenario in scenario()) {
        let policy = make_policy(&scenario.rules, scenario.merge);
        let Some(plan) = plan_or_refusal(&scenario, &policy)? else { return Ok(()) };
        let catalog = &scenario.catalog;
        let by_id: HashMap<&str, &BackupRecord> =
            catalog.backups.iter().map(|b| (b.id.as_str(), b)).collect();

        let mut work: Vec<(Need, String)> = Vec::new();
        for decision in &plan.keep {
            work.push((Need::Whole(by_id[decision.id.as_str()]), decision.id.clone()));
        }
        for decision in &plan.partial {
            let backup = by_id[decision.id.as_str()];
            for kept in &decision.volumes_keep {
                let volume = backup.volumes.iter().find(|v| v.name == kept.name).unwrap();
                work.push((Need::Artifact(backup, volume), decision.id.clone()));
            }
        }
        let mut seen: HashSet<(String, String)> = HashSet::new();
        while let Some((need, by)) = work.pop() {
            match need {
                Need::Whole(backup) => {
                    prop_assert!(
                        plan.keeps(&backup.id),
                        "{} is needed whole by {} but not kept", backup.id, by
                    );
                    if !seen.insert((backup.id.clone(), String::new())) {
                        continue;
                    }
                    if backup.status == BackupStatus::Failed {
                        continue;
                    }
                    if !backup.volumes.is_empty() {
                        for volume in &backup.volumes {
                            work.push((Need::Artifact(backup, volume), by.clone()));
                        }
                    } else if backup.kind == BackupKind::Incremental {
                        if let Some(parent) = backup.parent.as_deref().and_then(|p| by_id.get(p)) {
                            if parent.status != BackupStatus::Failed {
                                work.push((Need::Whole(parent), by.clone()));
                            }
                        }
                    }
                }
                Need::Artifact(backup, volume) => {
                    prop_assert!(
                        artifact_kept(&plan, &backup.id, &volume.name),
                        "{} lost {} {} that it depends on", by, backup.id, volume.name
                    );
                    if !seen.insert((backup.id.clone(), volume.name.clone())) {
                        continue;
                    }
                    if backup.status == BackupStatus::Failed || volume.kind == BackupKind::Full {
                        continue;
                    }
                    let Some(parent) = volume.parent.as_deref().and_then(|p| by_id.get(p)) else {
                        continue;
                    };
                    if parent.status == BackupStatus::Failed {
                        continue;
                    }
                    if parent.volumes.is_empty() {
                        work.push((Need::Whole(parent), by.clone()));
                    } else if let Some(up) = parent.volumes.iter().find(|v| v.name == volume.name) {
                        work.push((Need::Artifact(parent, up), by.clone()));
                    }
                }
            }
        }
    }

    #[test]
    fn volume_decisions_are_complete_and_safe(scenario in scenario()) {
        let policy = make_policy(&scenario.rules, scenario.merge);
        let Some(plan) = plan_or_refusal(&scenario, &policy)? else { return Ok(()) };
        let catalog = &scenario.catalog;
        prop_assert_eq!(
            plan.keep.len() + plan.partial.len() + plan.delete.len(),
            catalog.backups.len()
        );
        let evaluation = evaluate(catalog, &policy, scenario.now).unwrap();
        prop_assert_eq!(evaluation.summary(), plan.summary());
        for backup in &catalog.backups {
            let (verdict, decision) = plan.decision(&backup.id).unwrap();
            // The volumes of the decision are exactly the record's, each decided once.
            let mut names: Vec<&str> = decision
                .volumes_keep
                .iter()
                .chain(&decision.volumes_delete)
                .map(|v| v.name.as_str())
                .collect();
            names.sort_unstable();
            let mut expected: Vec<&str> = backup.volumes.iter().map(|v| v.name.as_str()).collect();
            expected.sort_unstable();
            prop_assert_eq!(names, expected);
            prop_assert!(!decision.reasons.is_empty(), "{} has no reason", backup.id);
            for volume in decision.volumes_keep.iter().chain(&decision.volumes_delete) {
                prop_assert!(!volume.reasons.is_empty(), "{} {} has no reason", backup.id, volume.name);
            }
            match verdict {
                Verdict::Keep => prop_assert!(decision.volumes_delete.is_empty()),
                Verdict::Delete => prop_assert!(decision.volumes_keep.is_empty()),
                Verdict::Partial => prop_assert!(
                    !decision.volumes_keep.is_empty() && !decision.volumes_delete.is_empty()
                ),
            }
            // Deleted volumes carry their keys; immutable objects are never removed.
            for deleted in &decision.volumes_delete {
                let volume = backup.volumes.iter().find(|v| v.name == deleted.name).unwrap();
                prop_assert_eq!(&deleted.keys, &volume.keys);
                prop_assert_eq!(deleted.remove_objects, !backup.immutable);
                prop_assert!(evaluation.deletes_volume(&backup.id, &volume.name));
                prop_assert!(plan.deletes_volume(&backup.id, &volume.name));
            }
            for kept in &decision.volumes_keep {
                prop_assert!(!plan.deletes_volume(&backup.id, &kept.name));
            }
            prop_assert_eq!(evaluation.verdict(&backup.id), Some(verdict));
            // Holds, legal holds and running backups keep everything.
            if backup.legal_hold || !backup.holds.is_empty() || backup.status == BackupStatus::InProgress {
                prop_assert_eq!(verdict, Verdict::Keep, "{} is protected", backup.id);
            }
        }
        // The floor: the newest completed backup with volumes (or full) is kept whole.
        if let Some(floor) = newest_floor_candidate(catalog) {
            prop_assert!(plan.keeps(&floor.id), "floor {} not kept", floor.id);
        }
    }

    #[test]
    fn adding_a_rule_never_deletes_more_artifacts(scenario in scenario()) {
        if scenario.rules.contains_key(scenario.extra_rule.0) {
            // Not an added rule; skipped rather than rejected (few rule kinds repeat often).
            return Ok(());
        }
        let policy = make_policy(&scenario.rules, scenario.merge);
        let mut more_rules = scenario.rules.clone();
        more_rules.insert(scenario.extra_rule.0, scenario.extra_rule.1.clone());
        let more = make_policy(&more_rules, scenario.merge);
        let Some(before) = plan_or_refusal(&scenario, &policy)? else { return Ok(()) };
        let after = plan(&scenario.catalog, &more, scenario.now)
            .map_err(|error| TestCaseError::fail(format!("the larger policy failed: {error}")))?;
        let (before_artifacts, after_artifacts) = (deleted_artifacts(&before), deleted_artifacts(&after));
        prop_assert!(
            after_artifacts.is_subset(&before_artifacts),
            "newly deleted: {:?}", after_artifacts.difference(&before_artifacts).collect::<Vec<_>>()
        );
        let deleted = |plan: &Plan| plan.delete.iter().map(|d| d.id.clone()).collect::<BTreeSet<_>>();
        prop_assert!(deleted(&after).is_subset(&deleted(&before)));
    }

    #[test]
    fn the_plan_does_not_depend_on_input_order(scenario in scenario()) {
        let policy = make_policy(&scenario.rules, scenario.merge);
        let mut shuffled = scenario.catalog.clone();
        let key = |index: usize| scenario.shuffle_keys[index % scenario.shuffle_keys.len()] ^ index as u64;
        let mut order: Vec<usize> = (0..shuffled.backups.len()).collect();
        order.sort_by_key(|&i| key(i));
        shuffled.backups = order.iter().map(|&i| scenario.catalog.backups[i].clone()).collect();
        let original = plan(&scenario.catalog, &policy, scenario.now);
        let reordered = plan(&shuffled, &policy, scenario.now);
        match (original, reordered) {
            (Ok(a), Ok(b)) => prop_assert_eq!(
                serde_json::to_string(&a).unwrap(),
                serde_json::to_string(&b).unwrap()
            ),
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "{:?} vs {:?}", a.map(|_| ()), b.map(|_| ())),
        }
    }

    /// `sexton retention plan` streams the plan from the evaluation (issue 17): what it writes
    /// is exactly the owned plan's JSON, compact and pretty.
    #[test]
    fn the_streamed_plan_is_the_owned_plan(scenario in scenario()) {
        let policy = make_policy_for_streaming(&scenario);
        let Ok(evaluation) = sexton_retention::evaluate(&scenario.catalog, &policy, scenario.now) else {
            return Ok(());
        };
        let owned = evaluation.to_plan();
        prop_assert_eq!(
            serde_json::to_string(&evaluation.plan_json()).unwrap(),
            serde_json::to_string(&owned).unwrap()
        );
        prop_assert_eq!(
            serde_json::to_string_pretty(&evaluation.plan_json()).unwrap(),
            serde_json::to_string_pretty(&owned).unwrap()
        );
    }
}

fn make_policy_for_streaming(scenario: &Scenario) -> Policy {
    make_policy(&scenario.rules, scenario.merge)
}
