//! Invariants over random catalogs and policies: what must hold whatever the rules say.
//!
//! Catalogs have distinct times, mixed offsets, fulls and incrementals built on an earlier
//! backup, every status, holds, immutable and delete-requested backups, and binlog segments
//! with and without known ends. Policies are random, non-empty sets of rules, in keep or
//! merge mode.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, FixedOffset, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{json, Value};
use sexton_retention::{
    plan, BackupKind, BackupRecord, BackupStatus, BinlogSegment, Catalog, LogRange, Plan,
    PlanError, Policy, Reason, VerificationState,
};

#[derive(Clone, Debug)]
struct BackupSpec {
    gap_minutes: i64,
    offset: usize,
    full: bool,
    parent_choice: usize,
    status: BackupStatus,
    legal_hold: bool,
    hold: bool,
    immutable: bool,
    delete_requested: bool,
    /// Under an Object Lock that outlives the plan's `now` (issue 29).
    locked: bool,
    tags: u8,
    has_start: bool,
    verification: VerificationState,
}

fn status() -> impl Strategy<Value = BackupStatus> {
    prop_oneof![
        12 => Just(BackupStatus::Completed),
        2 => Just(BackupStatus::Failed),
        1 => Just(BackupStatus::InProgress),
        1 => Just(BackupStatus::Expiring),
        1 => Just(BackupStatus::Deleting),
        1 => Just(BackupStatus::DeleteFailed),
        1 => Just(BackupStatus::Missing),
    ]
}

fn verification() -> impl Strategy<Value = VerificationState> {
    prop_oneof![
        6 => Just(VerificationState::Unverified),
        3 => Just(VerificationState::Verified),
        1 => Just(VerificationState::Failed),
    ]
}

fn backup_spec() -> impl Strategy<Value = BackupSpec> {
    (
        (
            1i64..4000,
            0usize..4,
            proptest::bool::weighted(0.3),
            any::<usize>(),
        ),
        status(),
        (
            proptest::bool::weighted(0.05),
            proptest::bool::weighted(0.05),
            proptest::bool::weighted(0.15),
            proptest::bool::weighted(0.08),
            proptest::bool::weighted(0.06),
        ),
        (0u8..8, proptest::bool::weighted(0.8), verification()),
    )
        .prop_map(
            |(
                (gap_minutes, offset, full, parent_choice),
                status,
                (legal_hold, hold, immutable, delete_requested, locked),
                (tags, has_start, verification),
            )| BackupSpec {
                gap_minutes,
                offset,
                full,
                parent_choice,
                status,
                legal_hold,
                hold,
                immutable,
                delete_requested,
                locked,
                tags,
                has_start,
                verification,
            },
        )
}

const OFFSETS: [i32; 4] = [0, 2 * 3600, -5 * 3600, 5 * 3600 + 1800];
const TAGS: [&str; 3] = ["a", "b", "c"];

/// Builds a catalog with strictly increasing times; returns it and the newest time.
/// A segment: first event (minutes from the base), length (unknown end if `None`), whether
/// the first event is known, and optionally a backup whose start the segment ends exactly at.
type SegmentSpec = (i64, Option<i64>, bool, Option<usize>);

fn build_catalog(specs: &[BackupSpec], segments: &[SegmentSpec]) -> (Catalog, DateTime<Utc>) {
    let base = Utc.with_ymd_and_hms(2023, 12, 25, 0, 0, 0).unwrap();
    let mut minutes = 0;
    let mut backups: Vec<BackupRecord> = Vec::new();
    for (index, spec) in specs.iter().enumerate() {
        minutes += spec.gap_minutes;
        let offset = FixedOffset::east_opt(OFFSETS[spec.offset]).unwrap();
        let time = (base + TimeDelta::minutes(minutes)).with_timezone(&offset);
        let chain_parents: Vec<&BackupRecord> = backups
            .iter()
            .filter(|b| b.status != BackupStatus::Failed)
            .collect();
        let parent = if spec.full || chain_parents.is_empty() {
            None
        } else {
            Some(
                chain_parents[spec.parent_choice % chain_parents.len()]
                    .id
                    .clone(),
            )
        };
        let in_progress = spec.status == BackupStatus::InProgress;
        // Half the incrementals taken against a full are differentials (issue 30).
        let differential = parent.as_ref().is_some_and(|p| {
            backups
                .iter()
                .any(|b| b.id == *p && b.kind == BackupKind::Full)
        }) && spec.parent_choice % 2 == 1;
        backups.push(BackupRecord {
            id: format!("b{index}"),
            completed_at: (!in_progress).then_some(time),
            // An in-progress backup sorts by its start: keep it distinct from other times.
            started_at: if in_progress {
                Some(time)
            } else {
                spec.has_start.then(|| time - TimeDelta::minutes(7))
            },
            status: spec.status,
            kind: if parent.is_some() {
                BackupKind::Incremental
            } else {
                BackupKind::Full
            },
            parent,
            tags: TAGS
                .iter()
                .enumerate()
                .filter(|(bit, _)| spec.tags & (1 << bit) != 0)
                .map(|(_, tag)| (*tag).to_owned())
                .collect(),
            legal_hold: spec.legal_hold,
            // Every other hold makes a standalone backup (issue 30).
            holds: match (spec.hold, index % 2) {
                (false, _) => Vec::new(),
                (true, 0) => vec!["standalone:yearly".to_owned()],
                (true, _) => vec!["restore:r".to_owned()],
            },
            // A third of the backups name the segments they need (`seg-<i>`, as built below).
            log_range: (spec.parent_choice % 3 == 0).then(|| {
                let first = spec.parent_choice / 3 % 8;
                let last = (first + spec.parent_choice / 24 % 3).min(7);
                LogRange {
                    first: format!("seg-{first}"),
                    last: format!("seg-{last}"),
                }
            }),
            immutable: spec.immutable,
            locked_until: spec
                .locked
                .then(|| Utc.with_ymd_and_hms(2100, 1, 1, 0, 0, 0).unwrap()),
            delete_requested: spec.delete_requested,
            volumes: Vec::new(),
            verification: spec.verification,
            differential,
        });
    }
    let newest = base + TimeDelta::minutes(minutes);
    let binlog_segments = segments
        .iter()
        .enumerate()
        .map(|(index, &(first, length, known_first, ends_at_backup))| {
            let first_event = base + TimeDelta::minutes(first);
            let mut last_event =
                length.map(|length| (first_event + TimeDelta::minutes(length)).fixed_offset());
            // Ending exactly where a backup starts puts segments on the horizon itself.
            if let (Some(_), Some(choice)) = (last_event, ends_at_backup) {
                if !backups.is_empty() {
                    let backup = &backups[choice % backups.len()];
                    last_event = backup.started_at.or(backup.completed_at).or(last_event);
                }
            }
            BinlogSegment {
                key: format!("seg-{index}"),
                first_event: known_first
                    .then(|| first_event.fixed_offset())
                    .filter(|first| last_event.is_none_or(|last| *first <= last)),
                last_event,
            }
        })
        .collect();
    (
        Catalog {
            backups,
            binlog_segments,
        },
        newest,
    )
}

/// One optional rule of a policy, as a JSON key and value.
fn rule() -> impl Strategy<Value = (&'static str, Value)> {
    let count = prop_oneof![4 => (1i64..6).prop_map(Value::from), 1 => Just(Value::from(-1))];
    let duration = prop_oneof![
        (1u32..72).prop_map(|h| Value::from(format!("{h}h"))),
        (1u32..40).prop_map(|d| Value::from(format!("{d}d"))),
        (1u32..3).prop_map(|m| Value::from(format!("{m}m"))),
        (1u32..4, 1u32..20).prop_map(|(m, d)| Value::from(format!("{m}m{d}d"))),
    ];
    prop_oneof![
        count.clone().prop_map(|v| ("keep_last", v)),
        count.clone().prop_map(|v| ("keep_hourly", v)),
        count.clone().prop_map(|v| ("keep_daily", v)),
        count.clone().prop_map(|v| ("keep_weekly", v)),
        count.clone().prop_map(|v| ("keep_monthly", v)),
        count.clone().prop_map(|v| ("keep_full", v)),
        count.prop_map(|v| ("keep_yearly", v)),
        duration.clone().prop_map(|v| ("keep_within", v)),
        duration.clone().prop_map(|v| ("keep_within_hourly", v)),
        duration.clone().prop_map(|v| ("keep_within_daily", v)),
        duration.clone().prop_map(|v| ("keep_within_weekly", v)),
        duration.clone().prop_map(|v| ("keep_within_monthly", v)),
        duration.prop_map(|v| ("keep_within_yearly", v)),
        prop_oneof![
            Just(json!([["a"]])),
            Just(json!([["a", "b"], ["c"]])),
            Just(json!([[""]])),
        ]
        .prop_map(|v| ("keep_tags", v)),
        (1u32..60).prop_map(|d| ("retention_duration", Value::from(d.to_string()))),
        prop_oneof![
            (1u32..40).prop_map(|d| format!("{d}d")),
            (1u32..6).prop_map(|w| format!("{w}w")),
            Just("1m".to_owned()),
        ]
        .prop_map(|v| ("recovery_window", Value::from(v))),
        prop_oneof![4 => (1i64..4).prop_map(Value::from), 1 => Just(Value::from(-1))]
            .prop_map(|v| ("keep_verified", v)),
    ]
}

#[derive(Clone, Debug)]
struct Scenario {
    catalog: Catalog,
    rules: BTreeMap<&'static str, Value>,
    extra_rule: (&'static str, Value),
    merge: bool,
    grace: &'static str,
    now: DateTime<Utc>,
    shuffle_keys: Vec<u64>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        proptest::collection::vec(backup_spec(), 0..28),
        proptest::collection::vec(
            (
                0i64..60_000,
                proptest::option::weighted(0.8, 0i64..3000),
                any::<bool>(),
                proptest::option::weighted(0.5, any::<usize>()),
            ),
            0..8,
        ),
        proptest::collection::vec(rule(), 1..4),
        rule(),
        any::<bool>(),
        prop_oneof![Just("1h"), Just("0s"), Just("2d")],
        0i64..3000,
        proptest::collection::vec(any::<u64>(), 40),
        proptest::option::weighted(0.3, 1u32..4),
    )
        .prop_map(
            |(
                specs,
                segments,
                rules,
                extra_rule,
                merge,
                grace,
                hours_after,
                shuffle_keys,
                pitr_full,
            )| {
                let (catalog, newest) = build_catalog(&specs, &segments);
                let mut rules: BTreeMap<&'static str, Value> = rules.into_iter().collect();
                if let Some(n) = pitr_full {
                    rules.insert("pitr_full", Value::from(n));
                }
                // keep_diff narrows keep_full (issue 30): drawn with it, from the same draw.
                if rules.contains_key("keep_full") && pitr_full.is_some_and(|n| n != 2) {
                    rules.insert("keep_diff", Value::from(pitr_full.unwrap_or(1)));
                }
                Scenario {
                    catalog,
                    rules,
                    extra_rule,
                    merge,
                    grace,
                    now: newest + TimeDelta::hours(hours_after),
                    shuffle_keys,
                }
            },
        )
}

fn make_policy(rules: &BTreeMap<&'static str, Value>, merge: bool, grace: &str) -> Policy {
    let mut object = serde_json::Map::new();
    for (key, value) in rules {
        object.insert((*key).to_owned(), value.clone());
    }
    object.insert(
        "chain_mode".to_owned(),
        Value::from(if merge { "merge" } else { "keep" }),
    );
    object.insert("failed_grace".to_owned(), Value::from(grace));
    Policy::from_json(&Value::Object(object).to_string()).expect("generated policies are valid")
}

/// A backup's own range, written apart from the engine: its named segments (`seg-<i>`), and
/// every segment whose events may fall within five minutes of its start..end.
fn own_range_needs(backup: &BackupRecord, segment: &BinlogSegment) -> bool {
    let number = |name: &str| {
        name.strip_prefix("seg-")
            .and_then(|n| n.parse::<u32>().ok())
    };
    if let Some(range) = &backup.log_range {
        if let (Some(first), Some(last), Some(this)) = (
            number(&range.first),
            number(&range.last),
            number(&segment.key),
        ) {
            if first <= this && this <= last {
                return true;
            }
        }
    }
    let margin = TimeDelta::minutes(5);
    let (Some(start), Some(end)) = (
        backup.started_at.or(backup.completed_at),
        backup.completed_at.or(backup.started_at),
    ) else {
        return true;
    };
    segment.last_event.is_none_or(|last| last >= start - margin)
        && segment
            .first_event
            .is_none_or(|first| first <= end + margin)
}

/// Held standalone, and kept by nothing else: no other hold, no rule, no kept backup that builds
/// on it (issue 47).
/// Only such a backup is restorable to its own end only.
fn kept_only_by_standalone_hold(backup: &BackupRecord, plan: &Plan, catalog: &Catalog) -> bool {
    let kept_child = catalog.backups.iter().any(|child| {
        child.kind == BackupKind::Incremental
            && child.status != BackupStatus::Failed
            && child.parent.as_deref() == Some(backup.id.as_str())
            && plan.keeps(&child.id)
    });
    !kept_child
        && !backup.holds.is_empty()
        && backup.holds.iter().all(|h| h.starts_with("standalone:"))
        && plan.decision(&backup.id).is_some_and(|(_, decision)| {
            decision
                .reasons
                .iter()
                // Besides the hold, only notes about the record's status, which keep nothing.
                .all(|reason| {
                    matches!(
                        reason,
                        Reason::Hold(_)
                            | Reason::DeleteDeferred
                            | Reason::DeleteRequested
                            | Reason::AlreadyExpiring
                            | Reason::DeletionUnderWay
                            | Reason::RetryingDelete
                    )
                })
        })
}

/// The catalog with every hold and legal hold lifted: what the rules keep on their own.
fn without_holds(catalog: &Catalog) -> Catalog {
    let mut unheld = catalog.clone();
    for backup in &mut unheld.backups {
        backup.holds.clear();
        backup.legal_hold = false;
    }
    unheld
}

fn newest_completed_full(catalog: &Catalog) -> Option<&BackupRecord> {
    catalog
        .backups
        .iter()
        .filter(|b| b.status == BackupStatus::Completed && b.kind == BackupKind::Full)
        .max_by_key(|b| b.completed_at)
}

/// Plans, and accepts the one legitimate refusal: nothing completed would be kept because no
/// completed full exists to anchor the floor.
fn plan_or_refusal(scenario: &Scenario, policy: &Policy) -> Result<Option<Plan>, TestCaseError> {
    match plan(&scenario.catalog, policy, scenario.now) {
        Ok(plan) => Ok(Some(plan)),
        Err(PlanError::WouldDeleteAll) => {
            prop_assert!(newest_completed_full(&scenario.catalog).is_none());
            Ok(None)
        }
        Err(other) => Err(TestCaseError::fail(format!("unexpected error: {other}"))),
    }
}

fn deleted_set(plan: &Plan) -> HashSet<String> {
    plan.delete.iter().map(|d| d.id.clone()).collect()
}

/// 500 cases per property unless `PROPTEST_CASES` says otherwise.
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

proptest! {
    #![proptest_config(config())]

    #[test]
    fn safety_invariants_hold(scenario in scenario()) {
        let policy = make_policy(&scenario.rules, scenario.merge, scenario.grace);
        let Some(plan) = plan_or_refusal(&scenario, &policy)? else { return Ok(()) };
        let catalog = &scenario.catalog;
        let by_id: HashMap<&str, &BackupRecord> =
            catalog.backups.iter().map(|b| (b.id.as_str(), b)).collect();
        // Under pitr_full, what the plan would keep without any hold is kept by the rules,
        // whatever its hold hides (issue 47: a standalone hold on the window's base moved the
        // base; a held member of an immutable chain carries only its hold): it is no
        // standalone-only backup, and pitr_full counts it.
        let unheld_plan = sexton_retention::plan(&without_holds(catalog), &policy, scenario.now).ok();
        let pitr_full = scenario.rules.contains_key("pitr_full");
        let standalone_only = |backup: &BackupRecord| {
            kept_only_by_standalone_hold(backup, &plan, catalog)
                && !(pitr_full && unheld_plan.as_ref().is_some_and(|p| p.keeps(&backup.id)))
        };

        // Every backup is decided exactly once.
        let mut seen = HashSet::new();
        for decision in plan.keep.iter().chain(&plan.delete) {
            prop_assert!(seen.insert(decision.id.as_str()), "{} decided twice", decision.id);
        }
        prop_assert_eq!(seen.len(), catalog.backups.len());

        // The newest completed full backup is never deleted.
        if let Some(newest) = newest_completed_full(catalog) {
            prop_assert!(plan.keeps(&newest.id), "newest full {} deleted", newest.id);
        }

        // The newest backup a restore test proved (completed, not asked to be deleted) is never
        // deleted while no newer one is proven; nor is a missing one, unless a user asked.
        let newest_verified = catalog
            .backups
            .iter()
            .filter(|b| b.status == BackupStatus::Completed && !b.delete_requested)
            .filter(|b| b.verification == VerificationState::Verified)
            .max_by_key(|b| b.completed_at);
        if let Some(newest) = newest_verified {
            prop_assert!(plan.keeps(&newest.id), "newest verified {} deleted", newest.id);
        }
        for backup in &catalog.backups {
            if backup.status == BackupStatus::Missing && !backup.delete_requested {
                prop_assert!(plan.keeps(&backup.id), "missing {} deleted", backup.id);
            }
        }

        // Legal hold, in-use holds and in-progress backups are never deleted.
        for backup in &catalog.backups {
            if backup.legal_hold || !backup.holds.is_empty() || backup.status == BackupStatus::InProgress {
                prop_assert!(plan.keeps(&backup.id), "{} deleted", backup.id);
            }
        }

        // A backup under an unexpired Object Lock is never deleted: the store would refuse.
        for backup in &catalog.backups {
            if backup.locked_until.is_some()
                && !matches!(backup.status, BackupStatus::Failed | BackupStatus::InProgress)
            {
                prop_assert!(plan.keeps(&backup.id), "locked {} deleted", backup.id);
            }
        }

        // No kept backup loses an ancestor (failed backups are never part of a chain).
        for decision in &plan.keep {
            let mut node = by_id[decision.id.as_str()];
            while node.kind == BackupKind::Incremental && node.status != BackupStatus::Failed {
                let Some(parent) = node.parent.as_deref().and_then(|p| by_id.get(p)) else { break };
                if parent.status == BackupStatus::Failed {
                    break;
                }
                prop_assert!(plan.keeps(&parent.id), "{} kept but its ancestor {} deleted", decision.id, parent.id);
                node = parent;
            }
        }

        // Deleting an immutable backup never removes objects; nothing else is record-only.
        for decision in &plan.delete {
            prop_assert_eq!(decision.remove_objects, !by_id[decision.id.as_str()].immutable);
        }

        // Binlog: nothing at or after the horizon, nothing of unknown end, is deleted; what is
        // before it is.
        let segments: HashMap<&str, &BinlogSegment> =
            catalog.binlog_segments.iter().map(|s| (s.key.as_str(), s)).collect();
        prop_assert_eq!(plan.binlog.keep.len() + plan.binlog.delete.len(), segments.len());
        for key in &plan.binlog.delete {
            let last = segments[key.as_str()].last_event;
            let horizon = plan.binlog.horizon;
            prop_assert!(horizon.is_some(), "{} deleted without a horizon", key);
            prop_assert!(last.is_some(), "{} of unknown end deleted", key);
            prop_assert!(last < horizon, "{} ends at or after the horizon", key);
        }
        // What is kept before the horizon is kept for a backup restorable to its own end only.
        let range_only: HashSet<&str> =
            plan.binlog.range_only.iter().map(|r| r.backup.as_str()).collect();
        for key in &plan.binlog.keep {
            let segment = segments[key.as_str()];
            if let (Some(last), Some(horizon)) = (segment.last_event, plan.binlog.horizon) {
                prop_assert!(
                    last >= horizon
                        || range_only.iter().any(|id| own_range_needs(by_id[id], segment)),
                    "{} ends before the horizon, no backup's own range needs it, and it is kept",
                    key
                );
            }
        }
        // A backup gets its own range for its standalone hold exactly when nothing else keeps it.
        for backup in &catalog.backups {
            if !plan.keeps(&backup.id)
                || matches!(backup.status, BackupStatus::Failed | BackupStatus::InProgress)
            {
                continue;
            }
            let listed = plan.binlog.range_only.iter().any(|r| {
                r.backup == backup.id && r.reason.starts_with("standalone")
            });
            prop_assert_eq!(
                listed,
                standalone_only(backup),
                "{}: {:?}",
                backup.id,
                plan.decision(&backup.id).map(|(_, d)| d.reasons.clone())
            );
        }
        // Nothing a kept backup needs is deleted: a backup that starts before the horizon
        // keeps its own range (by name and by time), one kept only by a standalone hold
        // wherever it starts.
        for backup in &catalog.backups {
            if !plan.keeps(&backup.id)
                || matches!(backup.status, BackupStatus::Failed | BackupStatus::InProgress)
            {
                continue;
            }
            let start = backup.started_at.or(backup.completed_at);
            let before_horizon = match (start, plan.binlog.horizon) {
                (Some(start), Some(horizon)) => start < horizon,
                _ => true,
            };
            if before_horizon || standalone_only(backup) {
                for key in &plan.binlog.delete {
                    prop_assert!(
                        !own_range_needs(backup, segments[key.as_str()]),
                        "{} is deleted and kept backup {} needs it to be consistent",
                        key,
                        backup.id
                    );
                }
            }
        }
        // The horizon is the start of a kept full backup that is not kept only by a standalone
        // hold (issue 47: a backup the rules keep stays a base whatever its hold), the earliest
        // such start, or with pitr_full N the earliest of the newest N that restore (a kept
        // full whose chain is broken, say one marked expiring that something needs, is no
        // base to replay from and does not count; issue 47) and that the plan keeps without
        // any hold (a hold only ever keeps more: a full kept only by holds is not counted).
        if let Some(horizon_backup) = &plan.binlog.horizon_backup {
            let backup = by_id[horizon_backup.as_str()];
            prop_assert_eq!(backup.kind, BackupKind::Full);
            prop_assert!(plan.keeps(horizon_backup));
            prop_assert!(!standalone_only(backup));
            prop_assert_eq!(plan.binlog.horizon, backup.started_at.or(backup.completed_at));
            if let Some(n) = scenario.rules.get("pitr_full").and_then(Value::as_u64) {
                let restores = sexton_retention::restorable(catalog, scenario.now);
                let newer = catalog
                    .backups
                    .iter()
                    .filter(|b| {
                        b.kind == BackupKind::Full
                            && plan.keeps(&b.id)
                            && unheld_plan.as_ref().is_some_and(|p| p.keeps(&b.id))
                            && !standalone_only(b)
                            && restores.point(&b.id).is_some()
                            && b.started_at.or(b.completed_at) > plan.binlog.horizon
                    })
                    .count();
                prop_assert!(newer < n as usize, "{} kept fulls are newer than the horizon with pitr_full {}", newer, n);
            }
        }
    }

    #[test]
    fn adding_a_rule_never_deletes_more(scenario in scenario()) {
        prop_assume!(!scenario.rules.contains_key(scenario.extra_rule.0));
        let policy = make_policy(&scenario.rules, scenario.merge, scenario.grace);
        let mut more_rules = scenario.rules.clone();
        more_rules.insert(scenario.extra_rule.0, scenario.extra_rule.1.clone());
        let more = make_policy(&more_rules, scenario.merge, scenario.grace);
        let Some(before) = plan_or_refusal(&scenario, &policy)? else { return Ok(()) };
        let after = plan(&scenario.catalog, &more, scenario.now)
            .map_err(|error| TestCaseError::fail(format!("the larger policy failed: {error}")))?;
        let (before, after) = (deleted_set(&before), deleted_set(&after));
        prop_assert!(after.is_subset(&before), "newly deleted: {:?}", after.difference(&before).collect::<Vec<_>>());
    }

    #[test]
    fn the_plan_does_not_depend_on_input_order(scenario in scenario()) {
        let policy = make_policy(&scenario.rules, scenario.merge, scenario.grace);
        let mut shuffled = scenario.catalog.clone();
        let key = |index: usize| scenario.shuffle_keys[index % scenario.shuffle_keys.len()] ^ index as u64;
        let mut order: Vec<usize> = (0..shuffled.backups.len()).collect();
        order.sort_by_key(|&i| key(i));
        shuffled.backups = order.iter().map(|&i| scenario.catalog.backups[i].clone()).collect();
        let mut segment_order: Vec<usize> = (0..shuffled.binlog_segments.len()).collect();
        segment_order.sort_by_key(|&i| key(i + 7));
        shuffled.binlog_segments = segment_order.iter().map(|&i| scenario.catalog.binlog_segments[i].clone()).collect();

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
    make_policy(&scenario.rules, scenario.merge, scenario.grace)
}

proptest! {
    #![proptest_config(config())]

    /// barman's `minimum_redundancy` (issue 30): whatever the rules, at least N counted
    /// backups (completed, not asked to be deleted) stay, or all of them when there are
    /// fewer; and the floor never deletes what the rules alone keep.
    #[test]
    fn minimum_redundancy_is_a_floor(scenario in scenario(), floor in 1u32..8) {
        let mut rules = scenario.rules.clone();
        // A floor above keep_last is refused as contradictory; stay below it.
        let floor = match rules.get("keep_last").and_then(Value::as_i64) {
            Some(last) if last > 0 => floor.min(last as u32),
            _ => floor,
        };
        let without = make_policy(&rules, scenario.merge, scenario.grace);
        rules.insert("minimum_redundancy", Value::from(floor));
        let with = make_policy(&rules, scenario.merge, scenario.grace);
        prop_assert_eq!(with.minimum_redundancy.map(|n| n.get()), Some(floor));
        let Some(plan_with) = plan_or_refusal(&scenario, &with)? else { return Ok(()) };
        let counted: Vec<&BackupRecord> = scenario
            .catalog
            .backups
            .iter()
            .filter(|b| b.status == BackupStatus::Completed && !b.delete_requested)
            .collect();
        let kept = counted.iter().filter(|b| plan_with.keeps(&b.id)).count();
        prop_assert!(
            kept >= counted.len().min(floor as usize),
            "{} counted backups kept, floor {}, {} counted", kept, floor, counted.len()
        );
        if let Some(plan_without) = plan_or_refusal(&scenario, &without)? {
            for decision in &plan_without.keep {
                prop_assert!(plan_with.keeps(&decision.id), "the floor deleted {}", decision.id);
            }
        }
    }
}
