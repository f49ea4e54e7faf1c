//! Full or incremental (issue 8, seed 001): the scheduler's per-volume choice, across
//! `full_every`, new volumes, failures, lost parents and merges; then many days of the
//! scheduler and retention together.

mod common;

use chrono::TimeDelta;
use common::{at, utc};
use sexton_retention::cadence::{
    backup_kind, next_backup_kind, next_volume_kinds, FullEvery, KindChoice, KindReason,
    VolumeChoice,
};
use sexton_retention::{
    plan, BackupKind, BackupRecord, BackupStatus, Catalog, Policy, VolumeArtifact,
};

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|name| (*name).to_owned()).collect()
}

fn every(n: u32) -> Option<FullEvery> {
    Some(FullEvery::new(n).unwrap())
}

/// The backup an executor records for day `day` after taking what `choices` asked for.
fn taken(day: usize, choices: &[VolumeChoice], status: BackupStatus) -> BackupRecord {
    let id = format!("d{day}");
    BackupRecord {
        status,
        kind: backup_kind(choices),
        volumes: choices
            .iter()
            .map(|volume| VolumeArtifact {
                name: volume.name.clone(),
                kind: volume.choice.kind,
                parent: volume.choice.parent.clone(),
                keys: vec![format!("app/{id}/{}.qcow2", volume.name)],
                ..VolumeArtifact::default()
            })
            .collect(),
        ..BackupRecord::completed_full(
            id,
            at("2024-01-01T02:00:00Z") + TimeDelta::days(day as i64 - 1),
        )
    }
}

/// A compact view: `F`, or `I<parent>`, per volume.
fn kinds(choices: &[VolumeChoice]) -> Vec<String> {
    choices
        .iter()
        .map(
            |volume| match (&volume.choice.kind, &volume.choice.parent) {
                (BackupKind::Full, _) => format!("{}=F", volume.name),
                (BackupKind::Incremental, Some(parent)) => format!("{}=I{parent}", volume.name),
                (BackupKind::Incremental, None) => panic!("an incremental without a parent"),
            },
        )
        .collect()
}

/// Runs `n_days` of a schedule with every day succeeding; returns the kinds of one volume.
fn cadence(full_every: Option<FullEvery>, n_days: usize) -> String {
    let mut backups = Vec::new();
    let mut pattern = String::new();
    for day in 1..=n_days {
        let choices = next_volume_kinds(full_every, &backups, &names(&["pv1"]));
        pattern.push(match choices[0].choice.kind {
            BackupKind::Full => 'F',
            BackupKind::Incremental => 'I',
        });
        backups.push(taken(day, &choices, BackupStatus::Completed));
    }
    pattern
}

#[test]
fn the_first_backup_is_always_full() {
    let choices = next_volume_kinds(every(3), &[], &names(&["pv1", "pv2"]));
    for volume in &choices {
        assert_eq!(
            volume.choice,
            KindChoice {
                kind: BackupKind::Full,
                parent: None,
                reason: KindReason::NoArtifact,
                because_of: None,
                chain_length: 1,
            }
        );
    }
    assert_eq!(backup_kind(&choices), BackupKind::Full);
    let choice = next_backup_kind(None, &[]);
    assert_eq!(
        (choice.kind, choice.reason),
        (BackupKind::Full, KindReason::NoArtifact)
    );
}

#[test]
fn full_every_n_is_a_full_then_n_minus_one_incrementals() {
    assert_eq!(cadence(every(3), 9), "FIIFIIFII");
    assert_eq!(cadence(every(2), 6), "FIFIFI");
    assert_eq!(cadence(every(1), 4), "FFFF");
    assert_eq!(cadence(None, 6), "FIIIII");
}

#[test]
fn the_reasons_name_the_chain_and_its_length() {
    let mut backups = Vec::new();
    for day in 1..=3 {
        let choices = next_volume_kinds(every(3), &backups, &names(&["pv1"]));
        backups.push(taken(day, &choices, BackupStatus::Completed));
    }
    let choice = &next_volume_kinds(every(3), &backups, &names(&["pv1"]))[0].choice;
    assert_eq!(choice.reason, KindReason::FullEvery);
    assert_eq!(choice.because_of.as_deref(), Some("d3"));
    backups.pop();
    let choice = &next_volume_kinds(every(3), &backups, &names(&["pv1"]))[0].choice;
    assert_eq!(
        choice,
        &KindChoice {
            kind: BackupKind::Incremental,
            parent: Some("d2".to_owned()),
            reason: KindReason::ChainContinues,
            because_of: Some("d2".to_owned()),
            chain_length: 3,
        }
    );
    assert_eq!(KindReason::ChainContinues.to_string(), "chain_continues");
}

#[test]
fn a_volume_added_later_starts_with_a_full_while_the_others_go_on() {
    let mut backups = Vec::new();
    let mut days = Vec::new();
    for (day, volumes) in [
        &["pv1"][..],
        &["pv1"],
        &["pv1", "pv2"],
        &["pv1", "pv2", "pv3"],
    ]
    .iter()
    .enumerate()
    {
        let choices = next_volume_kinds(None, &backups, &names(volumes));
        days.push(kinds(&choices));
        backups.push(taken(day + 1, &choices, BackupStatus::Completed));
    }
    assert_eq!(
        days,
        vec![
            vec!["pv1=F"],
            vec!["pv1=Id1"],
            vec!["pv1=Id2", "pv2=F"],
            vec!["pv1=Id3", "pv2=Id3", "pv3=F"],
        ]
    );
    // A backup with a new volume is incremental as a whole.
    assert_eq!(backups[2].kind, BackupKind::Incremental);
}

#[test]
fn a_failed_volume_gets_a_full_and_the_others_build_on_the_last_good_backup() {
    let known = names(&["pv1", "pv2"]);
    let mut backups = Vec::new();
    for day in 1..=2 {
        let choices = next_volume_kinds(None, &backups, &known);
        backups.push(taken(day, &choices, BackupStatus::Completed));
    }
    // Day 3: PV2's upload failed, so the backup failed.
    let choices = next_volume_kinds(None, &backups, &known);
    let mut failed = taken(3, &choices, BackupStatus::Failed);
    failed.volumes[1].failed = true;
    backups.push(failed);
    let choices = next_volume_kinds(None, &backups, &known);
    assert_eq!(kinds(&choices), vec!["pv1=Id2", "pv2=F"]);
    assert_eq!(choices[1].choice.reason, KindReason::LastAttemptFailed);
    assert_eq!(choices[1].choice.because_of.as_deref(), Some("d3"));
    assert_eq!(choices[0].choice.reason, KindReason::ChainContinues);
    backups.push(taken(4, &choices, BackupStatus::Completed));
    // Day 5: back to normal.
    let choices = next_volume_kinds(None, &backups, &known);
    assert_eq!(kinds(&choices), vec!["pv1=Id4", "pv2=Id4"]);
}

#[test]
fn a_failed_backup_that_names_no_volume_makes_every_volume_full() {
    let known = names(&["pv1", "pv2"]);
    let mut backups = vec![taken(
        1,
        &next_volume_kinds(None, &[], &known),
        BackupStatus::Completed,
    )];
    let mut failed = taken(2, &[], BackupStatus::Failed);
    failed.volumes.clear();
    backups.push(failed);
    let choices = next_volume_kinds(None, &backups, &known);
    assert_eq!(kinds(&choices), vec!["pv1=F", "pv2=F"]);
    assert!(choices
        .iter()
        .all(|volume| volume.choice.reason == KindReason::LastAttemptFailed));
}

#[test]
fn failures_do_not_count_towards_full_every() {
    // F I, then a failure in which PV1 uploaded fine, then I on day 2 (the third artifact
    // of the chain), then the full.
    let known = names(&["pv1", "pv2"]);
    let mut backups = Vec::new();
    let mut pattern = Vec::new();
    for day in 1..=6 {
        let choices = next_volume_kinds(every(3), &backups, &known);
        pattern.push(kinds(&choices).join(" "));
        let mut backup = taken(day, &choices, BackupStatus::Completed);
        if day == 3 {
            backup.status = BackupStatus::Failed;
            backup.volumes[1].failed = true;
        }
        backups.push(backup);
    }
    assert_eq!(
        pattern,
        vec![
            "pv1=F pv2=F",
            "pv1=Id1 pv2=Id1",
            "pv1=Id2 pv2=Id2",
            "pv1=Id2 pv2=F",
            "pv1=F pv2=Id4",
            "pv1=Id5 pv2=Id5",
        ]
    );
}

#[test]
fn a_volume_seen_only_in_failed_backups_has_no_good_artifact() {
    let mut failed = taken(
        1,
        &next_volume_kinds(None, &[], &names(&["pv1"])),
        BackupStatus::Failed,
    );
    failed.volumes.push(VolumeArtifact {
        failed: true,
        ..VolumeArtifact::full("pv2", Vec::new())
    });
    let mut backups = vec![failed];
    // Day 2 succeeded but did not cover PV1 (detached for a day).
    backups.push(taken(
        2,
        &next_volume_kinds(None, &[], &names(&["pv2"])),
        BackupStatus::Completed,
    ));
    let choices = next_volume_kinds(None, &backups, &names(&["pv1"]));
    assert_eq!(choices[0].choice.reason, KindReason::NoGoodArtifact);
}

#[test]
fn running_backups_are_not_built_on() {
    let known = names(&["pv1"]);
    let mut backups = vec![taken(
        1,
        &next_volume_kinds(None, &[], &known),
        BackupStatus::Completed,
    )];
    let mut running = taken(
        2,
        &next_volume_kinds(None, &backups, &known),
        BackupStatus::InProgress,
    );
    running.started_at = running.completed_at.take();
    backups.push(running);
    assert_eq!(
        kinds(&next_volume_kinds(None, &backups, &known)),
        vec!["pv1=Id1"]
    );
}

#[test]
fn a_chain_being_deleted_is_not_built_on() {
    let known = names(&["pv1"]);
    let mut backups = Vec::new();
    for day in 1..=3 {
        let choices = next_volume_kinds(None, &backups, &known);
        backups.push(taken(day, &choices, BackupStatus::Completed));
    }
    let choose = |backups: &[BackupRecord]| next_volume_kinds(None, backups, &known)[0].clone();

    let mut marked = backups.clone();
    marked[2].volumes[0].expiring = true;
    assert_eq!(choose(&marked).choice.reason, KindReason::ChainBeingDeleted);

    let mut expiring = backups.clone();
    expiring[2].status = BackupStatus::Expiring;
    assert_eq!(
        choose(&expiring).choice.reason,
        KindReason::ChainBeingDeleted
    );

    // A user asked to delete day 2: a new incremental would keep it forever.
    let mut requested = backups.clone();
    requested[1].delete_requested = true;
    let choice = choose(&requested).choice;
    assert_eq!(
        (choice.kind, choice.reason),
        (BackupKind::Full, KindReason::ChainBeingDeleted)
    );
    assert_eq!(choice.because_of.as_deref(), Some("d2"));

    assert_eq!(kinds(&[choose(&backups)]), vec!["pv1=Id3"]);
}

#[test]
fn a_broken_chain_gets_a_full() {
    let known = names(&["pv1"]);
    let mut backups = Vec::new();
    for day in 1..=3 {
        let choices = next_volume_kinds(None, &backups, &known);
        backups.push(taken(day, &choices, BackupStatus::Completed));
    }
    // Day 2's record is not among the backups given: the chain cannot be checked.
    let mut missing = backups.clone();
    missing.remove(1);
    let choice = next_volume_kinds(None, &missing, &known)[0].choice.clone();
    assert_eq!(
        (choice.kind, choice.reason, choice.because_of.as_deref()),
        (BackupKind::Full, KindReason::ChainBroken, Some("d3"))
    );
    // Day 2 has no artifact of the volume.
    let mut without = backups.clone();
    without[1].volumes.clear();
    without[1]
        .volumes
        .push(VolumeArtifact::full("other", Vec::new()));
    assert_eq!(
        next_volume_kinds(None, &without, &known)[0].choice.reason,
        KindReason::ChainBroken
    );
    // With full_every 2 the walk stops at the length that asks for a full anyway: a gap
    // further back (day 1) does not matter.
    let mut oldest_missing = backups.clone();
    oldest_missing.remove(0);
    assert_eq!(
        next_volume_kinds(every(2), &oldest_missing, &known)[0]
            .choice
            .reason,
        KindReason::FullEvery
    );
    assert_eq!(
        next_volume_kinds(None, &oldest_missing, &known)[0]
            .choice
            .reason,
        KindReason::ChainBroken
    );
}

#[test]
fn a_merge_into_a_synthetic_full_restarts_the_count() {
    let known = names(&["pv1"]);
    let mut backups = Vec::new();
    for day in 1..=3 {
        let choices = next_volume_kinds(every(4), &backups, &known);
        backups.push(taken(day, &choices, BackupStatus::Completed));
    }
    // Retention merged day 1 into day 2: day 2 is now a full.
    backups[1].volumes[0].kind = BackupKind::Full;
    backups[1].volumes[0].parent = None;
    backups.remove(0);
    let choice = next_volume_kinds(every(4), &backups, &known)[0]
        .choice
        .clone();
    assert_eq!(choice.kind, BackupKind::Incremental);
    assert_eq!(choice.chain_length, 3);
}

#[test]
fn only_known_volumes_are_answered_in_the_order_given() {
    let backups = vec![taken(
        1,
        &next_volume_kinds(None, &[], &names(&["pv1", "pv2"])),
        BackupStatus::Completed,
    )];
    let choices = next_volume_kinds(None, &backups, &names(&["pv3", "pv1"]));
    assert_eq!(kinds(&choices), vec!["pv3=F", "pv1=Id1"]);
}

#[test]
fn schedules_without_volumes_follow_the_same_rules() {
    let mut backups: Vec<BackupRecord> = Vec::new();
    let mut pattern = String::new();
    for day in 1..=7 {
        let choice = next_backup_kind(every(3), &backups);
        pattern.push(if choice.kind == BackupKind::Full {
            'F'
        } else {
            'I'
        });
        let mut backup = BackupRecord {
            kind: choice.kind,
            parent: choice.parent.clone(),
            ..BackupRecord::completed_full(
                format!("d{day}"),
                at("2024-01-01T02:00:00Z") + TimeDelta::days(day),
            )
        };
        if day == 5 {
            backup.status = BackupStatus::Failed;
        }
        backups.push(backup);
    }
    // Day 5 (an incremental) failed: day 6 is a full, and the count restarts.
    assert_eq!(pattern, "FIIFIFI");
    assert_eq!(
        next_backup_kind(every(3), &backups[..5]).reason,
        KindReason::LastAttemptFailed
    );
}

#[test]
fn full_every_reads_numbers_and_numeric_strings_and_rejects_the_rest() {
    for (json, expected) in [("3", 3), ("\"3\"", 3), ("1", 1)] {
        let full_every: FullEvery = serde_json::from_str(json).unwrap();
        assert_eq!(full_every.get(), expected);
        assert_eq!(
            serde_json::to_string(&full_every).unwrap(),
            expected.to_string()
        );
    }
    for json in [
        "0",
        "\"0\"",
        "-1",
        "\"-1\"",
        "\"three\"",
        "1.5",
        "\"\"",
        "true",
        "null",
    ] {
        let error = serde_json::from_str::<FullEvery>(json)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("full_every: expected a positive whole number of backups"),
            "{json}: {error}"
        );
    }
    assert!(FullEvery::new(0).is_err());
}

/// Thirty days of a three-volume application, `full_every: 3`, keep 3: the scheduler
/// chooses, some days fail (one volume's upload), PV3 joins on day 8, PV1's snapshot is lost
/// on day 15; each day retention plans and the deleter carries the plan out. Every kept
/// backup stays restorable and nothing outlives its use.
#[test]
fn thirty_days_of_the_scheduler_and_retention_together() {
    let policy = Policy::keep_last(3);
    let mut catalog = Catalog::default();
    let mut deleted_keys = Vec::new();
    for day in 1..=30usize {
        let known = if day < 8 {
            names(&["pv1", "pv2"])
        } else {
            names(&["pv1", "pv2", "pv3"])
        };
        let mut choices = next_volume_kinds(every(3), &catalog.backups, &known);
        if day == 15 {
            // The executor found PV1's CSI snapshot gone and took a full.
            choices[0].choice.kind = BackupKind::Full;
            choices[0].choice.parent = None;
        }
        let fails = [4, 5, 11, 20].contains(&day);
        let mut backup = taken(day, &choices, BackupStatus::Completed);
        if fails {
            backup.status = BackupStatus::Failed;
            let which = day % backup.volumes.len();
            backup.volumes[which].failed = true;
        }
        catalog.backups.push(backup);

        let now = utc("2024-01-01T04:00:00Z") + TimeDelta::days(day as i64 - 1);
        let plan = plan(&catalog, &policy, now).unwrap();
        assert!(plan.warnings.is_empty(), "day {day}: {:?}", plan.warnings);
        // Carry it out: whole backups go, partial ones lose the volumes listed.
        for decision in plan.delete.iter().chain(&plan.partial) {
            for volume in &decision.volumes_delete {
                deleted_keys.extend(volume.keys.iter().cloned());
            }
        }
        catalog.backups.retain(|backup| !plan.deletes(&backup.id));
        for backup in &mut catalog.backups {
            let id = backup.id.clone();
            backup
                .volumes
                .retain(|volume| !plan.deletes_volume(&id, &volume.name));
        }
        // Every volume of every remaining completed backup has its whole chain.
        for backup in &catalog.backups {
            if backup.status != BackupStatus::Completed {
                continue;
            }
            for volume in &backup.volumes {
                let mut node = volume;
                while node.kind == BackupKind::Incremental {
                    let parent = node.parent.as_deref().unwrap();
                    let holder = catalog
                        .backups
                        .iter()
                        .find(|b| b.id == parent)
                        .unwrap_or_else(|| panic!("day {day}: {} lost {parent}", backup.id));
                    node = holder
                        .volumes
                        .iter()
                        .find(|v| v.name == volume.name)
                        .unwrap_or_else(|| {
                            panic!("day {day}: {} lost {parent} {}", backup.id, volume.name)
                        });
                }
            }
        }
    }
    // The three newest completed backups are there, and with full_every 3 no chain is
    // longer than three, so little else is.
    let completed: Vec<&str> = catalog
        .backups
        .iter()
        .filter(|b| b.status == BackupStatus::Completed)
        .map(|b| b.id.as_str())
        .collect();
    assert_eq!(completed.len(), 5, "{completed:?}");
    assert!(completed.ends_with(&["d28", "d29", "d30"]), "{completed:?}");
    assert!(deleted_keys.contains(&"app/d4/pv1.qcow2".to_owned()));
    let remaining: usize = catalog.backups.iter().map(|b| b.volumes.len()).sum();
    assert!(remaining <= 15, "{remaining} artifacts remain");
}

/// Two backups completed within the same second, listed oldest first: the newer one (by the
/// nanosecond) is the parent, and the chain's length counts both.
#[test]
fn backups_within_one_second_are_ordered_by_their_instants() {
    let base = at("2024-01-01T02:00:00.100Z");
    let d1 = BackupRecord::completed_full("d1", base);
    let d2 = BackupRecord::completed_incremental("d2", base + TimeDelta::milliseconds(500), "d1");
    let choice = next_backup_kind(every(2), &[d1.clone(), d2.clone()]);
    assert_eq!(choice.kind, BackupKind::Full, "{choice:?}");
    assert_eq!(choice.reason, KindReason::FullEvery);
    let choice = next_backup_kind(every(3), &[d1, d2]);
    assert_eq!(choice.parent.as_deref(), Some("d2"), "{choice:?}");
}
