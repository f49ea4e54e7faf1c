//! Seed 001's scenarios at volume level (issue 8): an application backup covers several
//! volumes, each with its own chain. Retention decides which backups to keep; the plan keeps
//! every artifact a kept backup depends on and deletes the others, possibly only some
//! volumes of a backup. Each test says exactly which object keys go and which stay.

mod common;

use std::collections::BTreeSet;

use common::{catalog, kept, policy, reasons, utc};
use sexton_retention::{
    evaluate, plan, BackupRecord, BackupStatus, Catalog, ChainMode, Decision, Plan, Policy,
    Verdict, VolumeArtifact, VolumeDecision, VolumeMerge,
};

const NOW: &str = "2024-02-01T00:00:00Z";

/// An application's daily backups. Each day is a list of `volume=kind` words, kind `F` (full)
/// or `I` (incremental on the volume's last good artifact); a day starting with `!` failed,
/// and a volume word ending in `!` is the volume whose upload failed. Day `k` has id `d<k>`,
/// completes at `2024-01-<k>T02:00:00Z`, and volume `v` has the single key `app/d<k>/v.qcow2`.
fn app_chain(days: &[&str]) -> Vec<BackupRecord> {
    let mut last_good: std::collections::HashMap<String, String> = Default::default();
    let mut backups = Vec::new();
    for (day, words) in days.iter().enumerate() {
        let id = format!("d{}", day + 1);
        let failed = words.starts_with('!');
        let mut volumes = Vec::new();
        for word in words.trim_start_matches('!').split_whitespace() {
            let (name, kind) = word.split_once('=').expect("volume=kind");
            let volume_failed = kind.ends_with('!');
            let keys = vec![format!("app/{id}/{name}.qcow2")];
            let mut volume = match kind.trim_end_matches('!') {
                "F" => VolumeArtifact::full(name, keys),
                "I" => VolumeArtifact::incremental(
                    name,
                    last_good
                        .get(name)
                        .unwrap_or_else(|| panic!("{id}: {name} has no good artifact yet")),
                    keys,
                ),
                other => panic!("unknown kind {other}"),
            };
            volume.failed = volume_failed;
            volumes.push(volume);
        }
        if !failed {
            for volume in &volumes {
                last_good.insert(volume.name.clone(), id.clone());
            }
        }
        let time = common::at(&format!("2024-01-{:02}T02:00:00Z", day + 1));
        backups.push(BackupRecord {
            status: if failed {
                BackupStatus::Failed
            } else {
                BackupStatus::Completed
            },
            volumes,
            ..BackupRecord::completed_full(id, time)
        });
    }
    backups
}

/// Plans and checks the plan's own consistency: every backup decided once; every volume of a
/// backup decided once; the lists agree with the verdicts.
fn run(catalog: &Catalog, policy: &Policy) -> Plan {
    let plan = plan(catalog, policy, utc(NOW)).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        plan.keep.len() + plan.partial.len() + plan.delete.len(),
        catalog.backups.len(),
        "every backup is decided once"
    );
    for backup in &catalog.backups {
        let (verdict, decision) = plan.decision(&backup.id).unwrap();
        let n_volumes = decision.volumes_keep.len() + decision.volumes_delete.len();
        assert_eq!(n_volumes, backup.volumes.len(), "{}", backup.id);
        match verdict {
            Verdict::Keep => assert!(decision.volumes_delete.is_empty(), "{}", backup.id),
            Verdict::Delete => assert!(decision.volumes_keep.is_empty(), "{}", backup.id),
            Verdict::Partial => assert!(
                !decision.volumes_keep.is_empty() && !decision.volumes_delete.is_empty(),
                "{}",
                backup.id
            ),
        }
        for volume in decision.volumes_keep.iter().chain(&decision.volumes_delete) {
            assert!(!volume.reasons.is_empty(), "{} {}", backup.id, volume.name);
        }
    }
    // The evaluation answers the same as the rendered plan.
    let evaluation = evaluate(catalog, policy, utc(NOW)).unwrap();
    assert_eq!(evaluation.summary(), plan.summary());
    for backup in &catalog.backups {
        for volume in &backup.volumes {
            assert_eq!(
                evaluation.deletes_volume(&backup.id, &volume.name),
                plan.deletes_volume(&backup.id, &volume.name),
                "{} {}",
                backup.id,
                volume.name
            );
        }
    }
    plan
}

fn all_keys(catalog: &Catalog) -> BTreeSet<String> {
    catalog
        .backups
        .iter()
        .flat_map(|backup| &backup.volumes)
        .flat_map(|volume| volume.keys.iter().cloned())
        .collect()
}

/// The object keys the plan deletes.
fn deleted_keys(plan: &Plan) -> BTreeSet<String> {
    plan.partial
        .iter()
        .chain(&plan.delete)
        .flat_map(|decision| &decision.volumes_delete)
        .flat_map(|volume| volume.keys.iter().cloned())
        .collect()
}

/// The object keys left in the bucket once the plan is carried out.
fn remaining_keys(catalog: &Catalog, plan: &Plan) -> BTreeSet<String> {
    all_keys(catalog)
        .difference(&deleted_keys(plan))
        .cloned()
        .collect()
}

fn keys(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|key| (*key).to_owned()).collect()
}

fn decision<'p>(plan: &'p Plan, id: &str) -> (Verdict, &'p Decision) {
    plan.decision(id)
        .unwrap_or_else(|| panic!("{id} is not in the plan"))
}

fn partial(plan: &Plan) -> Vec<&str> {
    plan.partial.iter().map(|d| d.id.as_str()).collect()
}

fn deleted(plan: &Plan) -> Vec<&str> {
    plan.delete.iter().map(|d| d.id.as_str()).collect()
}

fn volume<'p>(list: &'p [VolumeDecision], name: &str) -> &'p VolumeDecision {
    list.iter()
        .find(|volume| volume.name == name)
        .unwrap_or_else(|| panic!("no volume {name}"))
}

/// What the scheduler records when the executor reports a volume merge done.
fn apply_volume_merge(catalog: &mut Catalog, merge: &VolumeMerge) {
    let target = catalog
        .backups
        .iter_mut()
        .find(|backup| backup.id == merge.target)
        .unwrap();
    let volume = target
        .volumes
        .iter_mut()
        .find(|volume| volume.name == merge.volume)
        .unwrap();
    volume.parent = merge.new_parent.clone();
    if merge.new_parent.is_none() {
        volume.kind = sexton_retention::BackupKind::Full;
    }
}

/// What the deleter records after deleting a partial backup's volumes: the record lists only
/// the artifacts that remain; a backup deleted whole loses its record.
fn carry_out(catalog: &mut Catalog, plan: &Plan) {
    catalog.backups.retain(|backup| !plan.deletes(&backup.id));
    for backup in &mut catalog.backups {
        let id = backup.id.clone();
        backup
            .volumes
            .retain(|volume| !plan.deletes_volume(&id, &volume.name));
    }
}

fn merge_mode(json: &str) -> Policy {
    let mut policy = policy(json);
    policy.chain_mode = ChainMode::Merge;
    policy
}

/// Seed 001's application: PV1 from day 1, PV2 from day 2, PV3 from day 3, forever
/// incremental; on day 4 PV1 has four backups, PV2 three and PV3 two... as of day 4 PV3 has
/// two artifacts (days 3 and 4).
fn three_volumes_added_at_different_times() -> Catalog {
    catalog(app_chain(&[
        "pv1=F",
        "pv1=I pv2=F",
        "pv1=I pv2=I pv3=F",
        "pv1=I pv2=I pv3=I",
    ]))
}

#[test]
fn three_volumes_added_at_different_times_keep_three_keeps_every_chain() {
    let catalog = three_volumes_added_at_different_times();
    let plan = run(&catalog, &Policy::keep_last(3));
    // d1 is expired, but its only artifact (PV1's full) is the base of PV1's chain.
    assert_eq!(kept(&plan), vec!["d4", "d3", "d2", "d1"]);
    assert_eq!(reasons(&plan, "d1"), vec!["volume pv1: needed by d2"]);
    assert_eq!(
        reasons(&plan, "d4"),
        vec!["last snapshot", "floor: newest completed backup"]
    );
    let (_, d4) = decision(&plan, "d4");
    assert_eq!(
        volume(&d4.volumes_keep, "pv3").reasons,
        vec!["kept with the backup"]
    );
    assert!(deleted_keys(&plan).is_empty());
    assert_eq!(remaining_keys(&catalog, &plan), all_keys(&catalog));
}

#[test]
fn three_volumes_keep_three_in_merge_mode_merges_pv1_then_deletes_day_one() {
    let mut catalog = three_volumes_added_at_different_times();
    let policy = merge_mode(r#"{"keep_last": 3}"#);
    let plan = run(&catalog, &policy);
    // Only PV1's chain reaches below the oldest kept backup.
    assert_eq!(
        plan.volume_merges,
        vec![VolumeMerge {
            volume: "pv1".to_owned(),
            chain: "d1".to_owned(),
            target: "d2".to_owned(),
            sources: vec!["d1".to_owned()],
            new_parent: None,
        }]
    );
    assert!(plan.merges.is_empty());
    assert_eq!(
        reasons(&plan, "d1"),
        vec!["volume pv1: merge into d2 pending"]
    );
    assert!(deleted_keys(&plan).is_empty());

    // The executor reports the merge; the next plan deletes day 1.
    apply_volume_merge(&mut catalog, &plan.volume_merges[0]);
    let plan = run(&catalog, &policy);
    assert_eq!(deleted(&plan), vec!["d1"]);
    assert_eq!(deleted_keys(&plan), keys(&["app/d1/pv1.qcow2"]));
    assert!(plan.volume_merges.is_empty());
}

#[test]
fn a_volume_added_mid_chain_starts_its_own_chain() {
    // PV2 joins on day 3 with a full while PV1 goes on incrementally; PV1 takes a full on
    // day 5 (full every four).
    let catalog = catalog(app_chain(&[
        "pv1=F",
        "pv1=I",
        "pv1=I pv2=F",
        "pv1=I pv2=I",
        "pv1=F pv2=I",
        "pv1=I pv2=I",
    ]));
    let plan = run(&catalog, &Policy::keep_last(2));
    // d6 and d5 are kept. PV2's chain reaches back to day 3; PV1's stops at day 5's full.
    assert_eq!(kept(&plan), vec!["d6", "d5"]);
    assert_eq!(partial(&plan), vec!["d4", "d3"]);
    assert_eq!(deleted(&plan), vec!["d2", "d1"]);
    let (_, d4) = decision(&plan, "d4");
    assert_eq!(
        volume(&d4.volumes_keep, "pv2").reasons,
        vec!["needed by d5"]
    );
    assert_eq!(
        volume(&d4.volumes_delete, "pv1").reasons,
        vec!["no rule keeps it"]
    );
    assert_eq!(
        volume(&d4.volumes_delete, "pv1").keys,
        vec!["app/d4/pv1.qcow2"]
    );
    assert_eq!(
        d4.reasons,
        vec!["no rule keeps it", "volume pv2: needed by d5"]
    );
    assert_eq!(
        deleted_keys(&plan),
        keys(&[
            "app/d1/pv1.qcow2",
            "app/d2/pv1.qcow2",
            "app/d3/pv1.qcow2",
            "app/d4/pv1.qcow2",
        ])
    );
    assert_eq!(
        remaining_keys(&catalog, &plan),
        keys(&[
            "app/d3/pv2.qcow2",
            "app/d4/pv2.qcow2",
            "app/d5/pv1.qcow2",
            "app/d5/pv2.qcow2",
            "app/d6/pv1.qcow2",
            "app/d6/pv2.qcow2",
        ])
    );
    // The deleter's re-check: it may delete d4's PV1, not d4's PV2, not d4's record.
    assert!(plan.deletes_volume("d4", "pv1"));
    assert!(!plan.deletes_volume("d4", "pv2"));
    assert!(!plan.deletes("d4"));
    assert!(plan.deletes("d1") && plan.deletes_volume("d1", "pv1"));
    assert_eq!(plan.summary().n_partial, 2);
    assert_eq!(plan.summary().n_volumes_delete, 4);

    // Carried out, the next plan is stable: nothing more goes, the partial records stay.
    let mut after = catalog.clone();
    carry_out(&mut after, &plan);
    let again = run(&after, &Policy::keep_last(2));
    assert_eq!(kept(&again), vec!["d6", "d5", "d4", "d3"]);
    // `needed by` names the kept backup whose walk reached it first: d5 walks through d4.
    assert_eq!(reasons(&again, "d4"), vec!["volume pv2: needed by d5"]);
    assert_eq!(reasons(&again, "d3"), vec!["volume pv2: needed by d5"]);
    assert!(deleted_keys(&again).is_empty());
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
}

#[test]
fn a_lost_snapshot_forces_a_full_and_frees_the_old_chain_of_that_volume_only() {
    // Day 4: PV1's CSI snapshot was deleted, so the executor took a full of PV1; PV2 and PV3
    // went on incrementally.
    let catalog = catalog(app_chain(&[
        "pv1=F pv2=F pv3=F",
        "pv1=I pv2=I pv3=I",
        "pv1=I pv2=I pv3=I",
        "pv1=F pv2=I pv3=I",
        "pv1=I pv2=I pv3=I",
    ]));
    let plan = run(&catalog, &Policy::keep_last(2));
    assert_eq!(kept(&plan), vec!["d5", "d4"]);
    assert_eq!(partial(&plan), vec!["d3", "d2", "d1"]);
    assert!(deleted(&plan).is_empty());
    assert_eq!(
        deleted_keys(&plan),
        keys(&["app/d1/pv1.qcow2", "app/d2/pv1.qcow2", "app/d3/pv1.qcow2"])
    );
    let (_, d1) = decision(&plan, "d1");
    assert_eq!(
        volume(&d1.volumes_keep, "pv2").reasons,
        vec!["needed by d4"]
    );
    assert_eq!(
        volume(&d1.volumes_keep, "pv3").reasons,
        vec!["needed by d4"]
    );
}

#[test]
fn one_volume_failing_fails_the_backup_and_none_of_its_volumes_joins_a_chain() {
    // Day 3: PV2's upload failed. The backup failed; day 4 builds every volume on day 2.
    let catalog = catalog(app_chain(&[
        "pv1=F pv2=F",
        "pv1=I pv2=I",
        "!pv1=I pv2=I!",
        "pv1=I pv2=I",
        "pv1=I pv2=I",
    ]));
    assert_eq!(catalog.backups[3].volumes[0].parent.as_deref(), Some("d2"));
    let plan = run(&catalog, &Policy::keep_last(2));
    assert_eq!(kept(&plan), vec!["d5", "d4", "d2", "d1"]);
    assert_eq!(deleted(&plan), vec!["d3"]);
    let (_, d3) = decision(&plan, "d3");
    assert_eq!(d3.reasons, vec!["failed"]);
    assert_eq!(volume(&d3.volumes_delete, "pv2").reasons, vec!["failed"]);
    assert_eq!(
        deleted_keys(&plan),
        keys(&["app/d3/pv1.qcow2", "app/d3/pv2.qcow2"])
    );
    assert_eq!(
        reasons(&plan, "d2"),
        vec!["volume pv1: needed by d4", "volume pv2: needed by d4"]
    );
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);

    // Within the grace period the failed backup's artifacts are left alone.
    let early =
        sexton_retention::plan(&catalog, &Policy::keep_last(2), utc("2024-01-03T02:30:00Z"))
            .unwrap();
    assert!(early.keeps("d3"));
    assert!(deleted_keys(&early).is_empty());
}

#[test]
fn a_volume_that_builds_on_a_failed_backup_is_a_broken_chain_not_a_dependency() {
    let mut backups = app_chain(&["pv1=F", "!pv1=I", "pv1=I"]);
    // A faulty executor built day 3 on the failed day 2.
    backups[2].volumes[0].parent = Some("d2".to_owned());
    let plan = run(&catalog(backups), &Policy::keep_last(1));
    assert_eq!(
        plan.warnings,
        vec!["backup d3 volume pv1: parent d2 failed; failed backups are never part of a chain"]
    );
    assert!(plan.deletes("d2"));
}

#[test]
fn a_deleted_middle_backup_waits_for_its_dependents_then_is_consolidated() {
    // The user deletes day 3. Its artifacts are needed by day 4: the delete is deferred.
    let mut backups = app_chain(&[
        "pv1=F pv2=F",
        "pv1=I pv2=I",
        "pv1=I pv2=I",
        "pv1=I pv2=I",
        "pv1=I pv2=I",
    ]);
    backups[2].delete_requested = true;
    let mut catalog = catalog(backups);
    let policy = merge_mode(r#"{"keep_last": 3}"#);
    let plan = run(&catalog, &policy);
    // keep 3 counts d5, d4 and d2 (d3 was deleted by the user). d1 merges into d2.
    assert_eq!(
        reasons(&plan, "d3"),
        vec![
            "volume pv1: needed by d4",
            "volume pv2: needed by d4",
            "delete requested, deferred"
        ]
    );
    assert_eq!(plan.volume_merges.len(), 2);
    for merge in &plan.volume_merges {
        assert_eq!(
            (merge.target.as_str(), merge.sources.clone()),
            ("d2", vec!["d1".to_owned()])
        );
    }
    assert!(deleted_keys(&plan).is_empty());
    for merge in plan.volume_merges.clone() {
        apply_volume_merge(&mut catalog, &merge);
    }
    let plan = run(&catalog, &policy);
    assert_eq!(deleted(&plan), vec!["d1"]);
    carry_out(&mut catalog, &plan);

    // Two more days: keep 3 now counts d7, d6 and d5; d2, d3 and d4 are merged into d5.
    for day in [6, 7] {
        let id = format!("d{day}");
        let parent = format!("d{}", day - 1);
        catalog.backups.push(BackupRecord {
            volumes: vec![
                VolumeArtifact::incremental("pv1", &parent, vec![format!("app/{id}/pv1.qcow2")]),
                VolumeArtifact::incremental("pv2", &parent, vec![format!("app/{id}/pv2.qcow2")]),
            ],
            ..BackupRecord::completed_full(id, common::at(&format!("2024-01-{day:02}T02:00:00Z")))
        });
    }
    let plan = run(&catalog, &policy);
    assert_eq!(plan.volume_merges.len(), 2);
    for merge in &plan.volume_merges {
        assert_eq!(merge.target, "d5");
        assert_eq!(merge.sources, vec!["d2", "d3", "d4"]);
        assert_eq!(merge.new_parent, None);
    }
    assert_eq!(
        reasons(&plan, "d3"),
        vec![
            "volume pv1: merge into d5 pending",
            "volume pv2: merge into d5 pending",
            "delete requested, deferred"
        ]
    );
    for merge in plan.volume_merges.clone() {
        apply_volume_merge(&mut catalog, &merge);
    }
    let plan = run(&catalog, &policy);
    assert_eq!(deleted(&plan), vec!["d4", "d3", "d2"]);
    assert_eq!(reasons(&plan, "d3"), vec!["delete requested"]);
    assert_eq!(
        remaining_keys(&catalog, &plan),
        keys(&[
            "app/d5/pv1.qcow2",
            "app/d5/pv2.qcow2",
            "app/d6/pv1.qcow2",
            "app/d6/pv2.qcow2",
            "app/d7/pv1.qcow2",
            "app/d7/pv2.qcow2",
        ])
    );
}

#[test]
fn a_deleted_middle_backup_loses_what_nothing_needs_at_once() {
    // Day 3 is deleted by the user; PV1 took a full on day 4, so day 3's PV1 is needed by
    // nothing and goes now, while its PV2 waits for day 4.
    let mut backups = app_chain(&["pv1=F pv2=F", "pv1=I pv2=I", "pv1=I pv2=I", "pv1=F pv2=I"]);
    backups[2].delete_requested = true;
    let catalog = catalog(backups);
    let plan = run(&catalog, &Policy::keep_last(10));
    assert_eq!(partial(&plan), vec!["d3"]);
    assert_eq!(deleted_keys(&plan), keys(&["app/d3/pv1.qcow2"]));
    let (_, d3) = decision(&plan, "d3");
    assert_eq!(
        d3.reasons,
        vec!["delete requested", "volume pv2: needed by d4"]
    );
    assert_eq!(
        volume(&d3.volumes_delete, "pv1").reasons,
        vec!["delete requested"]
    );
}

#[test]
fn immutable_volume_chains_expire_together_and_lose_only_their_records() {
    let mut backups = app_chain(&[
        "pv1=F pv2=F",
        "pv1=I pv2=I",
        "pv1=F pv2=I",
        "pv1=I pv2=F",
        "pv1=I pv2=I",
    ]);
    for backup in &mut backups {
        backup.immutable = true;
    }
    let catalog = catalog(backups);
    let plan = run(&catalog, &Policy::keep_last(1));
    // d5 is kept. PV1's chain d3-d4-d5 and PV2's chain d4-d5 are kept whole; PV1's chain
    // d1-d2 and PV2's chain d1-d2-d3 expire together, record only.
    assert_eq!(kept(&plan), vec!["d5", "d4"]);
    assert_eq!(partial(&plan), vec!["d3"]);
    assert_eq!(deleted(&plan), vec!["d2", "d1"]);
    let (_, d3) = decision(&plan, "d3");
    assert_eq!(
        volume(&d3.volumes_keep, "pv1").reasons,
        vec!["immutable chain kept with d5"]
    );
    let pv2 = volume(&d3.volumes_delete, "pv2");
    assert!(!pv2.remove_objects);
    assert_eq!(
        pv2.reasons,
        vec!["no rule keeps it", "immutable: catalog record only"]
    );
    for decision in &plan.delete {
        assert!(!decision.remove_objects);
        assert!(decision.volumes_delete.iter().all(|v| !v.remove_objects));
    }
}

#[test]
fn holds_keep_a_backup_and_its_volume_chains() {
    let mut backups = app_chain(&["pv1=F", "pv1=I", "pv1=I", "pv1=F"]);
    backups[2].holds = vec!["restore:r42".to_owned()];
    let plan = run(&catalog(backups), &Policy::keep_last(1));
    assert_eq!(kept(&plan), vec!["d4", "d3", "d2", "d1"]);
    assert_eq!(reasons(&plan, "d3"), vec!["hold restore:r42"]);
    assert_eq!(reasons(&plan, "d2"), vec!["volume pv1: needed by d3"]);
}

#[test]
fn an_in_progress_backup_keeps_the_artifacts_it_builds_on() {
    // The scheduler records the running backup with the volumes it asked for, so that
    // retention keeps their parents while it runs. Here d2 (overlap allowed) still runs,
    // built on d1, while d3, a new full, has completed.
    let mut backups = app_chain(&["pv1=F pv2=F", "pv1=I pv2=I", "pv1=F pv2=F"]);
    backups[1].status = BackupStatus::InProgress;
    backups[1].started_at = backups[1].completed_at.take();
    let plan = run(&catalog(backups), &Policy::keep_last(1));
    assert_eq!(kept(&plan), vec!["d3", "d2", "d1"]);
    assert_eq!(reasons(&plan, "d2"), vec!["in progress"]);
    assert_eq!(
        reasons(&plan, "d1"),
        vec!["volume pv1: needed by d2", "volume pv2: needed by d2"]
    );
}

#[test]
fn a_volume_marked_expiring_that_is_needed_again_is_kept_with_a_warning() {
    let mut backups = app_chain(&["pv1=F pv2=F", "pv1=I pv2=I"]);
    backups[0].volumes[0].expiring = true;
    backups[0].volumes[1].expiring = true;
    backups[1].volumes[1] = VolumeArtifact::full("pv2", vec!["app/d2/pv2.qcow2".to_owned()]);
    let catalog = catalog(backups);
    let plan = run(&catalog, &Policy::keep_last(1));
    assert_eq!(partial(&plan), vec!["d1"]);
    let (_, d1) = decision(&plan, "d1");
    assert_eq!(
        volume(&d1.volumes_delete, "pv2").reasons,
        vec!["already expiring", "no rule keeps it"]
    );
    assert_eq!(
        plan.warnings,
        vec!["backup d1 volume pv1: marked expiring but kept by this plan"]
    );
}

#[test]
fn catalogs_without_volumes_keep_issue_threes_json_shape() {
    let catalog = catalog(common::daily_chain("F I"));
    let json = serde_json::to_value(run(&catalog, &Policy::keep_last(1))).unwrap();
    let object = json.as_object().unwrap();
    let mut fields: Vec<&str> = object.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(fields, vec!["binlog", "delete", "keep", "merges"]);
    for decision in object["keep"].as_array().unwrap() {
        assert!(decision.get("volumes_keep").is_none());
    }
}

#[test]
fn the_json_of_a_partial_backup() {
    let catalog = catalog(app_chain(&["pv1=F pv2=F", "pv1=F pv2=I"]));
    let plan = run(&catalog, &Policy::keep_last(1));
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(
        json["partial"],
        serde_json::json!([{
            "id": "d1",
            "reasons": ["no rule keeps it", "volume pv2: needed by d2"],
            "status": "completed",
            "kind": "full",
            "completed_at": "2024-01-01T02:00:00Z",
            "volumes_keep": [{"name": "pv2", "reasons": ["needed by d2"]}],
            "volumes_delete": [{"name": "pv1", "reasons": ["no rule keeps it"],
                                "keys": ["app/d1/pv1.qcow2"]}]
        }])
    );
    let back: Plan = serde_json::from_value(json).unwrap();
    assert_eq!(back, plan);
    assert_eq!(back.decision("d1").map(|(v, _)| v), Some(Verdict::Partial));
}

#[test]
fn the_catalog_file_reads_volumes() {
    let catalog = Catalog::from_json(
        r#"{"backups": [
              {"id": "b1", "completed_at": "2024-01-01T02:00:00Z", "status": "completed",
               "volumes": [{"name": "pv1", "kind": "full", "keys": ["a/b1/pv1"]}]},
              {"id": "b2", "completed_at": "2024-01-02T02:00:00Z", "status": "completed",
               "kind": "incremental", "parent": "b1",
               "volumes": [{"name": "pv1", "kind": "incremental", "parent": "b1",
                            "keys": ["a/b2/pv1"]},
                           {"name": "pv2", "keys": ["a/b2/pv2"]}]}]}"#,
    )
    .unwrap();
    assert_eq!(catalog.backups[1].volumes.len(), 2);
    let plan = run(&catalog, &Policy::keep_last(1));
    assert_eq!(reasons(&plan, "b1"), vec!["volume pv1: needed by b2"]);
    let again = Catalog::from_json(&serde_json::to_string(&catalog).unwrap()).unwrap();
    assert_eq!(again, catalog);
}

#[test]
fn bad_volume_lists_are_clear_errors() {
    let cases: Vec<(Vec<VolumeArtifact>, BackupStatus, &str)> = vec![
        (
            vec![VolumeArtifact::full("", Vec::new())],
            BackupStatus::Completed,
            "backup b: volume at position 0 has no name",
        ),
        (
            vec![
                VolumeArtifact::full("pv1", Vec::new()),
                VolumeArtifact::full("pv1", Vec::new()),
            ],
            BackupStatus::Completed,
            "backup b: volume pv1 is listed twice",
        ),
        (
            vec![VolumeArtifact {
                kind: sexton_retention::BackupKind::Incremental,
                ..VolumeArtifact::full("pv1", Vec::new())
            }],
            BackupStatus::Completed,
            "backup b: incremental volume pv1 has no parent",
        ),
        (
            vec![VolumeArtifact::incremental("pv1", "b", Vec::new())],
            BackupStatus::Completed,
            "backup b: volume pv1 is its own parent",
        ),
        (
            vec![VolumeArtifact {
                failed: true,
                ..VolumeArtifact::full("pv1", Vec::new())
            }],
            BackupStatus::Completed,
            "backup b: volume pv1 failed but the backup is completed",
        ),
    ];
    for (volumes, status, expected) in cases {
        let catalog = catalog(vec![BackupRecord {
            status,
            volumes,
            ..BackupRecord::completed_full("b", common::at("2024-01-01T00:00:00Z"))
        }]);
        let error = plan(&catalog, &Policy::keep_last(1), utc(NOW)).unwrap_err();
        assert!(error.to_string().starts_with(expected), "{error}");
        assert!(!error.is_retryable());
    }
}

#[test]
fn volume_parent_loops_are_errors() {
    let mut backups = app_chain(&["pv1=F", "pv1=I", "pv1=I"]);
    backups[1].volumes[0].parent = Some("d3".to_owned());
    let error = plan(&catalog(backups), &Policy::keep_last(1), utc(NOW)).unwrap_err();
    assert!(
        matches!(error, sexton_retention::PlanError::ParentCycle { .. }),
        "{error}"
    );
}

#[test]
fn a_volume_built_on_a_backup_without_volumes_keeps_that_backup_and_its_chain() {
    // Mixed shapes: the first volume backup was taken against a single-artifact backup.
    let mut backups = common::daily_chain("F I");
    let mut with_volumes = BackupRecord {
        volumes: vec![VolumeArtifact::incremental(
            "pv1",
            "d2",
            vec!["k".to_owned()],
        )],
        ..BackupRecord::completed_full("d3", common::at("2024-01-03T02:00:00Z"))
    };
    with_volumes.kind = sexton_retention::BackupKind::Incremental;
    backups.push(with_volumes);
    let plan = run(&catalog(backups), &Policy::keep_last(1));
    assert_eq!(kept(&plan), vec!["d3", "d2", "d1"]);
    assert_eq!(reasons(&plan, "d2"), vec!["needed by d3"]);
    assert_eq!(reasons(&plan, "d1"), vec!["needed by d3"]);
}
