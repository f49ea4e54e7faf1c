//! Merge jobs (seed 001, Trilio's consolidation: "a deleted middle backup consolidated later"),
//! end to end on real NATS and SeaweedFS: with `chain_mode: merge` the retention-worker asks an
//! executor to fold the expired head of a chain into the oldest kept backup; the reference
//! executor writes the target's synthetic full and reports it; the scheduler records the target
//! as a full with no parent; only then does the next retention run delete the sources, through
//! the deleter. Exactly which objects remain is asserted.

use std::{collections::BTreeSet, time::Duration};

use serde_json::json;
use sexton_model::{
    names::ClusterName,
    records::{BackupKind, BackupRecord},
    wire::{self, RetentionSweep},
};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{
    fixtures::{self, keys_under},
    setup::{Setup, World},
    *,
};

async fn sweep(js: &async_nats::jetstream::Context, cluster: &str) {
    js.publish(
        sexton_shared::channels::SWEEPS.subject(&ClusterName::new(cluster).unwrap()),
        wire::encode(&RetentionSweep {
            schema_version: 1,
            cluster: ClusterName::new(cluster).unwrap(),
            requested_at: chrono::Utc::now(),
            scrub: false,
        }),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

async fn records(catalog: &Catalog, cluster: &str) -> Vec<BackupRecord> {
    let mut out: Vec<BackupRecord> = catalog
        .list_cluster(&ClusterName::new(cluster).unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.value)
        .collect();
    out.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merged_chain_head_goes_only_after_the_merge_is_recorded() {
    // F ← I1 ← I2 ← I3, keep_last 2 in merge mode: F and I1 expire, folded into I2. The
    // schedule is paused: it only gives the policy.
    let world = Setup::new(Members {
        scheduler: true,
        retention_worker: true,
        deleter: true,
        executor: false,
    })
    .schedule(
        json!({"name": "sm", "cluster": "cm", "plan": "base", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 2, "chain_mode": "merge"}}),
    )
    .start()
    .await;
    let World {
        config,
        fleet,
        client,
        js,
        catalog,
        ..
    } = world;
    let store = object_store(&config).await;
    let chain: Vec<BackupRecord> = [
        ("F", None),
        ("I1", Some("F")),
        ("I2", Some("I1")),
        ("I3", Some("I2")),
    ]
    .iter()
    .enumerate()
    .map(|(minute, (id, parent))| {
        let mut record = fixtures::backup("cm", "base", id, *parent, minute as i64 + 1, 1);
        record.schedule = Some("sm".parse().unwrap());
        record
    })
    .collect();
    fixtures::put_backups(&catalog, &store, &chain).await;
    let object = |id: &str, name: &str| format!("backups/cm/base/{id}/{name}");
    // Each data object holds its own bytes, so the synthetic full's content can be checked.
    for id in ["F", "I1", "I2", "I3"] {
        store
            .put(
                &object(id, "data-0000.xbstream"),
                format!("{id} data\n").into(),
            )
            .await
            .unwrap();
    }
    let before = keys_under(&store, "backups/cm/").await;

    // Without an executor the merge stays pending: nothing is deleted, however often
    // retention runs (the sources are kept: "merge into I2 pending").
    sweep(&js, "cm").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    sweep(&js, "cm").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    let now = records(&catalog, "cm").await;
    assert_eq!(now.len(), 4, "{now:?}");
    assert!(now.iter().all(|r| !r.status.is_being_deleted()), "{now:?}");
    assert_eq!(keys_under(&store, "backups/cm/").await, before);
    // One job waits for an executor, however many runs asked for it.
    let mut waiting = js
        .get_stream(topology::STREAM_JOBS)
        .await
        .unwrap()
        .info_with_subjects("sexton.v1.job.merge.cm")
        .await
        .unwrap();
    let mut counts = Vec::new();
    while let Some((subject, count)) = futures::TryStreamExt::try_next(&mut waiting).await.unwrap()
    {
        counts.push((subject, count));
    }
    assert_eq!(counts, [("sexton.v1.job.merge.cm".to_string(), 1)]);
    let preview = api(
        &client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": "cm"}),
    )
    .await
    .unwrap();
    assert!(
        preview.to_string().contains("merge into I2 pending"),
        "{preview}"
    );

    // The executor comes: it performs the pending merge and reports it; the scheduler records
    // I2 as a synthetic full, and the next run deletes F and I1 through the deleter.
    let executor = Fleet::start(
        &config,
        Members {
            scheduler: false,
            retention_worker: false,
            deleter: false,
            executor: true,
        },
    );
    eventually("F and I1 deleted", Duration::from_secs(60), || async {
        let ids: Vec<String> = records(&catalog, "cm")
            .await
            .into_iter()
            .map(|r| r.id.to_string())
            .collect();
        (ids == ["I2", "I3"]).then_some(())
    })
    .await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    let now = records(&catalog, "cm").await;
    let i2 = &now[0];
    assert_eq!(i2.kind, BackupKind::Full, "{i2:?}");
    assert_eq!(i2.parent, None, "{i2:?}");
    assert!(i2.tags.contains(&"synthetic-full".to_string()), "{i2:?}");
    let synthetic = object("I2", "synthetic-full.xbstream");
    assert_eq!(
        i2.artifacts.iter().cloned().collect::<BTreeSet<_>>(),
        BTreeSet::from([
            object("I2", "data-0000.xbstream"),
            object("I2", "metadata.json"),
            synthetic.clone(),
        ])
    );
    assert_eq!(now[1].parent.as_ref().map(|p| p.as_str()), Some("I2"));
    assert_eq!(
        keys_under(&store, "backups/cm/").await,
        BTreeSet::from([
            object("I2", "data-0000.xbstream"),
            object("I2", "metadata.json"),
            synthetic.clone(),
            object("I3", "data-0000.xbstream"),
            object("I3", "metadata.json"),
        ])
    );
    // The synthetic full holds the chain's data, oldest first (what the sources held).
    let body = store.get(&synthetic).await.unwrap().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&body),
        "F data\nI1 data\nI2 data\n",
        "the sources' data, oldest first, then the target's"
    );
    executor.stop().await.unwrap();
    fleet.stop().await.unwrap();
}

/// A merge report or job that does not match the catalog changes nothing: the scheduler
/// refuses a report for another backup (uid), one that drops an object of the target, one
/// whose chain is not the catalog's, and one that is not a full; the executor refuses a job
/// naming another cluster's objects. The chain stays as it was, objects and records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_merge_reports_and_jobs_change_nothing() {
    use sexton_model::wire::{MergeBackup, MergeDone, MergeJob, Report, ReportStatus};
    let world = Setup::new(Members {
        scheduler: true,
        retention_worker: false,
        deleter: false,
        executor: true,
    })
    .schedule(
        json!({"name": "sm", "cluster": "cm", "plan": "base", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 1, "chain_mode": "merge"}}),
    )
    .start()
    .await;
    let World {
        config,
        fleet,
        js,
        catalog,
        ..
    } = world;
    let store = object_store(&config).await;
    let chain: Vec<BackupRecord> = [("F", None), ("I1", Some("F")), ("I2", Some("I1"))]
        .iter()
        .enumerate()
        .map(|(minute, (id, parent))| {
            fixtures::backup("cm", "base", id, *parent, minute as i64 + 1, 1)
        })
        .collect();
    fixtures::put_backups(&catalog, &store, &chain).await;
    let before_records = records(&catalog, "cm").await;
    let before_objects = keys_under(&store, "backups/cm/").await;
    let i2 = &before_records[2];
    assert_eq!(i2.id.as_str(), "I2");
    let synthetic = "backups/cm/base/I2/synthetic-full.xbstream".to_string();
    let mut good_artifacts = i2.artifacts.clone();
    good_artifacts.push(synthetic.clone());
    let report = |uid: &str, artifacts: Vec<String>, sources: &[&str], kind: BackupKind| Report {
        schema_version: 1,
        backup_id: "I2".parse().unwrap(),
        cluster: "cm".parse().unwrap(),
        plan: "base".parse().unwrap(),
        schedule: None,
        backup_name: "base".into(),
        status: ReportStatus::Completed,
        kind,
        parent: (kind == BackupKind::Incremental).then(|| "I1".parse().unwrap()),
        started_at: Some(chrono::Utc::now().fixed_offset()),
        completed_at: Some(chrono::Utc::now().fixed_offset()),
        tick: None,
        artifacts,
        size_bytes: Some(1),
        labels: Default::default(),
        tags: Vec::new(),
        error: None,
        volumes: Vec::new(),
        holds: Vec::new(),
        merge: Some(MergeDone {
            target_uid: uid.into(),
            sources: sources.iter().map(|s| s.parse().unwrap()).collect(),
            volume: None,
        }),
        objects: Vec::new(),
        log_range: None,
        differential: false,
    };
    let forged = [
        report(
            "someone-else",
            good_artifacts.clone(),
            &["F", "I1"],
            BackupKind::Full,
        ),
        report(
            &i2.uid,
            vec![synthetic.clone(), "backups/cm/base/I2/metadata.json".into()],
            &["F", "I1"],
            BackupKind::Full,
        ),
        report(&i2.uid, good_artifacts.clone(), &["I1"], BackupKind::Full),
        report(
            &i2.uid,
            good_artifacts.clone(),
            &["F", "I1"],
            BackupKind::Incremental,
        ),
    ];
    for report in &forged {
        js.publish(
            sexton_shared::channels::REPORTS.subject(&"cm".parse().unwrap()),
            wire::encode(report),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    // A job naming another cluster's object as the target's.
    let backup = |record: &BackupRecord| MergeBackup {
        id: record.id.clone(),
        uid: record.uid.clone(),
        backup_name: record.backup_name.clone(),
        parent: record.parent.clone(),
        artifacts: record.artifacts.clone(),
    };
    let mut target = backup(i2);
    target
        .artifacts
        .push("backups/other/base/X/data-0000.xbstream".into());
    let job = MergeJob {
        schema_version: 1,
        cluster: "cm".parse().unwrap(),
        plan: "base".parse().unwrap(),
        target,
        sources: vec![backup(&before_records[0]), backup(&before_records[1])],
        volume: None,
    };
    // A job naming an object of the chain that is not in the bucket: refused at once, never
    // waited for (issue 26: the reference executor retried it until its deliveries ran out).
    let mut gone = backup(&before_records[0]);
    gone.artifacts
        .push("backups/cm/base/F/gone.xbstream".into());
    let missing = MergeJob {
        target: backup(i2),
        sources: vec![gone, backup(&before_records[1])],
        ..job.clone()
    };
    for job in [&job, &missing] {
        js.publish(
            sexton_shared::channels::MERGE_JOBS.subject(&"cm".parse().unwrap()),
            wire::encode(job),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    eventually(
        "every forged message handled",
        Duration::from_secs(30),
        || async {
            let reports =
                consumer_backlog(&js, topology::STREAM_REPORTS, topology::CONSUMER_REPORTS).await;
            let jobs = consumer_backlog(
                &js,
                topology::STREAM_JOBS,
                topology::CONSUMER_EXECUTOR_MERGE,
            )
            .await;
            (reports == Some(0) && jobs == Some(0)).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let incidents = read_stream(&js, topology::STREAM_EVENTS, "sexton.v1.event.incident.>").await;
    assert!(
        incidents.iter().any(|m| String::from_utf8_lossy(&m.payload)
            .contains("gone.xbstream of backup F is missing; the chain cannot be merged")),
        "no incident for the merge job naming a missing object"
    );
    assert_eq!(records(&catalog, "cm").await, before_records);
    assert_eq!(keys_under(&store, "backups/cm/").await, before_objects);
    assert!(!store.exists(&synthetic).await.unwrap());
    // The control: the same report, right this time (its synthetic full written), is recorded.
    store
        .put(&synthetic, "F data\nI1 data\nI2 data\n".into())
        .await
        .unwrap();
    js.publish(
        sexton_shared::channels::REPORTS.subject(&"cm".parse().unwrap()),
        wire::encode(&report(
            &i2.uid,
            good_artifacts.clone(),
            &["F", "I1"],
            BackupKind::Full,
        )),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    eventually(
        "the right report recorded",
        Duration::from_secs(30),
        || async {
            let now = records(&catalog, "cm").await;
            (now[2].kind == BackupKind::Full && now[2].parent.is_none()).then_some(now)
        },
    )
    .await;
    let now = records(&catalog, "cm").await;
    assert_eq!(now[2].artifacts, good_artifacts);
    assert_eq!(now[..2], before_records[..2], "the sources are untouched");
    fleet.stop().await.unwrap();
}

/// Seed 001's "deleted middle backup consolidated later", at volume level, end to end: an
/// application with volumes pv1 and pv2 (forever incremental), `keep_last: 3` in merge mode.
/// The user deletes backup 3 while backup 4 still builds on it: the delete is deferred. Each
/// volume's expired chain head is merged, per volume, into the oldest kept backup by the
/// reference executor (one job per volume), the scheduler records that volume as a synthetic
/// full, and only then do the sources' artifacts go. Two backups later backup 3 is
/// consolidated into backup 5 with backups 2 and 4 and deleted. Exactly which objects remain,
/// and what the synthetic fulls hold, is asserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_middle_backup_is_consolidated_per_volume_later() {
    // The retention-worker runs only when the test says so, so that the plans are the seed's.
    let world = Setup::new(Members {
        scheduler: true,
        retention_worker: false,
        deleter: true,
        executor: true,
    })
    .schedule(
        json!({"name": "app", "cluster": "cv", "plan": "vols", "cron": "@daily", "paused": true,
               "volumes": ["pv1", "pv2"],
               "policy": {"keep_last": 3, "chain_mode": "merge"}}),
    )
    .start()
    .await;
    let World {
        config,
        fleet,
        client,
        js,
        catalog,
        ..
    } = world;
    let store = object_store(&config).await;
    let retention_only = Members {
        scheduler: false,
        retention_worker: true,
        deleter: false,
        executor: false,
    };
    let mut ids: Vec<String> = Vec::new();
    let mut images = std::collections::BTreeMap::new();
    let object = |id: &str, name: &str| format!("backups/cv/app/{id}/{name}");
    for step in 0..5 {
        let id = trigger_backup(&client, "app").await;
        let record = wait_reported(&catalog, "cv", &id).await;
        for volume in &record.volumes {
            let expected = if step == 0 {
                (BackupKind::Full, None)
            } else {
                (BackupKind::Incremental, Some(ids[step - 1].clone()))
            };
            assert_eq!((volume.kind, volume.parent.clone()), expected, "{record:?}");
        }
        for volume in ["pv1", "pv2"] {
            let key = object(&id, &format!("vol-{volume}.img"));
            let body = store.get(&key).await.unwrap().expect("the volume's image");
            images.insert((id.clone(), volume), body);
        }
        ids.push(id);
    }
    let ids_now = |records: &[BackupRecord]| -> Vec<String> {
        records.iter().map(|r| r.id.to_string()).collect()
    };
    // The user deletes backup 3, objects too; backup 4 builds on it.
    api(
        &client,
        "backup",
        "delete",
        json!({"schema_version": 1, "cluster": "cv", "id": ids[2], "remote": true}),
    )
    .await
    .unwrap();

    // Retention: keep 3 counts 5, 4 and 2 (3 is deleted by the user, but 4 needs it); backup
    // 1's two artifacts are merged into backup 2, one job per volume, and then backup 1 goes.
    let worker = Fleet::start(&config, retention_only);
    eventually("backup 1 merged away", Duration::from_secs(60), || async {
        let now = ids_now(&records(&catalog, "cv").await);
        (now == ids[1..]).then_some(())
    })
    .await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    let now = records(&catalog, "cv").await;
    for volume in &now[0].volumes {
        assert_eq!(
            (volume.kind, volume.parent.as_deref()),
            (BackupKind::Full, None)
        );
    }
    assert_eq!(
        now[0].kind,
        BackupKind::Full,
        "both volumes are synthetic fulls"
    );
    assert!(now[1].delete_request.is_some(), "{:?}", now[1]);
    assert!(!now[1].status.is_being_deleted(), "{:?}", now[1]);
    let described = api(
        &client,
        "backup",
        "describe",
        json!({"schema_version": 1, "cluster": "cv", "id": ids[2]}),
    )
    .await
    .unwrap();
    let why = described["retention"].to_string();
    assert!(why.contains("delete requested, deferred"), "{described}");
    assert!(
        why.contains(&format!("needed by {}", ids[3])),
        "{described}"
    );
    worker.stop().await.unwrap();

    // Two more backups, then retention again: keep 3 counts 7, 6 and 5; backups 2, 3 and 4
    // are merged into 5, per volume, and then go, the user's deleted backup 3 with them (a
    // whole deletion of 4 lets the deferred request on 3 go in the same run).
    for _ in 0..2 {
        let id = trigger_backup(&client, "app").await;
        wait_reported(&catalog, "cv", &id).await;
        ids.push(id);
    }
    let worker = Fleet::start(&config, retention_only);
    eventually(
        "backups 2 to 4 merged away",
        Duration::from_secs(60),
        || async {
            let now = ids_now(&records(&catalog, "cv").await);
            (now == ids[4..]).then_some(())
        },
    )
    .await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    let now = records(&catalog, "cv").await;
    let fifth = &now[0];
    assert_eq!(fifth.kind, BackupKind::Full, "{fifth:?}");
    for volume in &fifth.volumes {
        assert_eq!(
            (volume.kind, volume.parent.as_deref()),
            (BackupKind::Full, None)
        );
        assert_eq!(
            volume.keys.iter().cloned().collect::<BTreeSet<_>>(),
            BTreeSet::from([
                object(&ids[4], &format!("vol-{}.img", volume.name)),
                object(&ids[4], &format!("vol-{}.synthetic-full.img", volume.name)),
            ]),
            "{fifth:?}"
        );
        assert!(
            fifth
                .tags
                .contains(&format!("synthetic-full:{}", volume.name)),
            "{fifth:?}"
        );
    }
    // Backups 6 and 7 are incrementals: in merge mode the user's deleted backup 3 in backup
    // 5's chain is no reason for a full, since it is consolidated before it goes.
    for (n, later) in now[1..].iter().enumerate() {
        for volume in &later.volumes {
            assert_eq!(
                (volume.kind, volume.parent.as_deref()),
                (BackupKind::Incremental, Some(ids[4 + n].as_str())),
                "{later:?}"
            );
        }
    }
    let mut expected = BTreeSet::new();
    for id in &ids[4..] {
        expected.insert(object(id, "metadata.json"));
        for volume in ["pv1", "pv2"] {
            expected.insert(object(id, &format!("vol-{volume}.img")));
        }
    }
    for volume in ["pv1", "pv2"] {
        expected.insert(object(&ids[4], &format!("vol-{volume}.synthetic-full.img")));
    }
    assert_eq!(keys_under(&store, "backups/cv/app/").await, expected);
    // Sizes follow the objects: each merged volume holds its image and its synthetic full,
    // and the backup what all its objects hold.
    let size = |key: String| {
        let store = store.clone();
        async move { store.get(&key).await.unwrap().unwrap().len() as u64 }
    };
    let mut total = 0;
    for key in &fifth.artifacts {
        total += size(key.clone()).await;
    }
    assert_eq!(fifth.size_bytes, Some(total), "{fifth:?}");
    for volume in &fifth.volumes {
        let mut bytes = 0;
        for key in &volume.keys {
            bytes += size(key.clone()).await;
        }
        assert_eq!(volume.size_bytes, Some(bytes), "{volume:?}");
    }
    // Each synthetic full holds its volume's whole chain, oldest first: backup 2's synthetic
    // (backups 1 and 2), then backups 3, 4 and 5.
    for volume in ["pv1", "pv2"] {
        let body = store
            .get(&object(
                &ids[4],
                &format!("vol-{volume}.synthetic-full.img"),
            ))
            .await
            .unwrap()
            .unwrap();
        let chain: Vec<u8> = ids[..5]
            .iter()
            .flat_map(|id| images[&(id.clone(), volume)].to_vec())
            .collect();
        assert_eq!(
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&chain),
            "volume {volume}"
        );
    }
    worker.stop().await.unwrap();
    fleet.stop().await.unwrap();
}

/// A volume merge report that does not match the catalog changes nothing: another backup
/// (uid), a report that drops the volume's object, one that claims the other volume's object
/// (deleting the merged volume later would take it too), a chain that is not the catalog's,
/// a report of two volumes, and an incremental. The control, right, is recorded: that volume
/// becomes a full and the other volume is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_volume_merge_reports_change_nothing() {
    use sexton_model::wire::{MergeDone, Report, ReportStatus, ReportVolume};
    let world = Setup::new(Members {
        scheduler: true,
        retention_worker: false,
        deleter: false,
        executor: false,
    })
    .schedule(
        json!({"name": "sv", "cluster": "cm", "plan": "base", "cron": "@daily", "paused": true,
               "volumes": ["pv1", "pv2"], "policy": {"keep_last": 1, "chain_mode": "merge"}}),
    )
    .start()
    .await;
    let World {
        config,
        fleet,
        js,
        catalog,
        ..
    } = world;
    let store = object_store(&config).await;
    let key = |id: &str, name: &str| format!("backups/cm/base/{id}/{name}");
    let chain: Vec<BackupRecord> = [("F", None), ("I1", Some("F")), ("I2", Some("I1"))]
        .iter()
        .enumerate()
        .map(|(minute, (id, parent))| {
            let mut record = fixtures::backup("cm", "base", id, *parent, minute as i64 + 1, 0);
            record.parent = None;
            record.volumes = ["pv1", "pv2"]
                .iter()
                .map(|volume| {
                    let keys = vec![key(id, &format!("vol-{volume}.img"))];
                    match parent {
                        None => sexton_retention::VolumeArtifact::full(*volume, keys),
                        Some(parent) => {
                            sexton_retention::VolumeArtifact::incremental(*volume, *parent, keys)
                        }
                    }
                })
                .collect();
            record
                .artifacts
                .extend(record.volumes.iter().flat_map(|v| v.keys.clone()));
            record
        })
        .collect();
    fixtures::put_backups(&catalog, &store, &chain).await;
    let before_records = records(&catalog, "cm").await;
    let before_objects = keys_under(&store, "backups/cm/").await;
    let i2 = before_records[2].clone();
    assert_eq!(i2.id.as_str(), "I2");
    let synthetic = key("I2", "vol-pv1.synthetic-full.img");
    let good_keys = vec![key("I2", "vol-pv1.img"), synthetic.clone()];
    let report = |uid: &str, volumes: Vec<ReportVolume>, sources: &[&str]| Report {
        schema_version: 1,
        backup_id: "I2".parse().unwrap(),
        cluster: "cm".parse().unwrap(),
        plan: "base".parse().unwrap(),
        schedule: None,
        backup_name: "base".into(),
        status: ReportStatus::Completed,
        kind: BackupKind::Full,
        parent: None,
        started_at: Some(chrono::Utc::now().fixed_offset()),
        completed_at: Some(chrono::Utc::now().fixed_offset()),
        tick: None,
        artifacts: volumes.iter().flat_map(|v| v.keys.clone()).collect(),
        size_bytes: Some(1),
        labels: Default::default(),
        tags: Vec::new(),
        error: None,
        volumes,
        holds: Vec::new(),
        merge: Some(MergeDone {
            target_uid: uid.into(),
            sources: sources.iter().map(|s| s.parse().unwrap()).collect(),
            volume: Some("pv1".into()),
        }),
        objects: Vec::new(),
        log_range: None,
        differential: false,
    };
    let volume = |name: &str, kind: BackupKind, keys: Vec<String>| ReportVolume {
        name: name.into(),
        kind,
        parent: (kind == BackupKind::Incremental).then(|| "I1".parse().unwrap()),
        keys,
        failed: false,
        size_bytes: None,
    };
    let full = BackupKind::Full;
    let forged = [
        report(
            "someone-else",
            vec![volume("pv1", full, good_keys.clone())],
            &["F", "I1"],
        ),
        report(
            &i2.uid,
            vec![volume("pv1", full, vec![synthetic.clone()])],
            &["F", "I1"],
        ),
        report(
            &i2.uid,
            vec![volume(
                "pv1",
                full,
                vec![
                    key("I2", "vol-pv1.img"),
                    synthetic.clone(),
                    key("I2", "vol-pv2.img"),
                ],
            )],
            &["F", "I1"],
        ),
        report(
            &i2.uid,
            vec![volume("pv1", full, good_keys.clone())],
            &["I1"],
        ),
        report(
            &i2.uid,
            vec![
                volume("pv1", full, good_keys.clone()),
                volume("pv2", full, vec![key("I2", "vol-pv2.synthetic-full.img")]),
            ],
            &["F", "I1"],
        ),
        report(
            &i2.uid,
            vec![volume("pv1", BackupKind::Incremental, good_keys.clone())],
            &["F", "I1"],
        ),
    ];
    let publish = |report: Report| {
        let js = js.clone();
        async move {
            js.publish(
                sexton_shared::channels::REPORTS.subject(&"cm".parse().unwrap()),
                wire::encode(&report),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        }
    };
    for report in forged {
        publish(report).await;
    }
    // A merge naming a volume that is no valid name.
    let mut bad_name = report(
        &i2.uid,
        vec![volume("pv1", full, good_keys.clone())],
        &["F", "I1"],
    );
    if let Some(merge) = bad_name.merge.as_mut() {
        merge.volume = Some("../pv1".into());
    }
    publish(bad_name).await;
    eventually(
        "every forged report handled",
        Duration::from_secs(30),
        || async {
            let reports =
                consumer_backlog(&js, topology::STREAM_REPORTS, topology::CONSUMER_REPORTS).await;
            (reports == Some(0)).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(records(&catalog, "cm").await, before_records);
    assert_eq!(keys_under(&store, "backups/cm/").await, before_objects);
    let incidents = fixtures::incidents(&js).await;
    assert!(
        incidents
            .iter()
            .filter(|i| i.reason.contains("merge of volume pv1 into I2"))
            .count()
            == 6,
        "{incidents:#?}"
    );
    assert!(
        incidents
            .iter()
            .any(|i| i.reason.contains("merge of volume ../pv1 into I2")
                && i.reason.contains("volume name")),
        "{incidents:#?}"
    );

    // The control: the right report (its synthetic full written) is recorded; pv2 and the
    // sources are untouched.
    store.put(&synthetic, "pv1 chain".into()).await.unwrap();
    publish(report(
        &i2.uid,
        vec![volume("pv1", full, good_keys.clone())],
        &["F", "I1"],
    ))
    .await;
    let now = eventually(
        "the right report recorded",
        Duration::from_secs(30),
        || async {
            let now = records(&catalog, "cm").await;
            let pv1 = &now[2].volumes[0];
            (pv1.kind == BackupKind::Full && pv1.parent.is_none()).then_some(now)
        },
    )
    .await;
    let merged = &now[2];
    assert_eq!(merged.volumes[0].keys, good_keys);
    assert_eq!(merged.volumes[1], i2.volumes[1], "pv2 is untouched");
    assert_eq!(
        merged.kind,
        BackupKind::Incremental,
        "pv2 still builds on I1"
    );
    assert!(merged.artifacts.contains(&synthetic), "{merged:?}");
    assert!(merged.tags.contains(&"synthetic-full:pv1".to_string()));
    assert_eq!(now[..2], before_records[..2], "the sources are untouched");
    fleet.stop().await.unwrap();
}
