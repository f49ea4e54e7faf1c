//! Merge jobs (seed 001, Trilio's consolidation: "a deleted middle backup consolidated later"),
//! end to end on real NATS and SeaweedFS: with `chain_mode: merge` the retention-worker asks an
//! executor to fold the expired head of a chain into the oldest kept backup; the reference
//! executor writes the target's synthetic full and reports it; the scheduler records the target
//! as a full with no parent; only then does the next retention run delete the sources, through
//! the deleter. Exactly which objects remain is asserted.

use std::{collections::BTreeSet, time::Duration};

use serde_json::json;
use sexton_shared::{
    catalog::Catalog,
    names::ClusterName,
    records::{BackupKind, BackupRecord},
    topology,
    wire::{self, RetentionSweep},
};
use sexton_tests::{
    fixtures::{self, keys_under},
    *,
};

async fn sweep(js: &async_nats::jetstream::Context, cluster: &str) {
    js.publish(
        topology::sweep_subject(&ClusterName::new(cluster).unwrap()),
        wire::encode(&RetentionSweep {
            schema_version: 1,
            cluster: ClusterName::new(cluster).unwrap(),
            requested_at: chrono::Utc::now(),
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
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topology.catalog.clone());
    let store = object_store(&config).await;

    // F ← I1 ← I2 ← I3, keep_last 2 in merge mode: F and I1 expire, folded into I2. The
    // schedule is paused: it only gives the policy.
    let fleet = Fleet::start(
        &config,
        Members {
            scheduler: true,
            retention_worker: true,
            deleter: true,
            executor: false,
        },
    );
    create_schedule(
        &client,
        json!({"name": "sm", "cluster": "cm", "plan": "base", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 2, "chain_mode": "merge"}}),
    )
    .await;
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
    use sexton_shared::wire::{MergeBackup, MergeDone, MergeJob, Report, ReportStatus};
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topology.catalog.clone());
    let store = object_store(&config).await;
    let fleet = Fleet::start(
        &config,
        Members {
            scheduler: true,
            retention_worker: false,
            deleter: false,
            executor: true,
        },
    );
    create_schedule(
        &client,
        json!({"name": "sm", "cluster": "cm", "plan": "base", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 1, "chain_mode": "merge"}}),
    )
    .await;
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
        }),
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
            topology::report_subject(&"cm".parse().unwrap()),
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
    };
    js.publish(
        topology::merge_job_subject(&"cm".parse().unwrap()),
        wire::encode(&job),
    )
    .await
    .unwrap()
    .await
    .unwrap();
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
    assert_eq!(records(&catalog, "cm").await, before_records);
    assert_eq!(keys_under(&store, "backups/cm/").await, before_objects);
    assert!(!store.exists(&synthetic).await.unwrap());
    // The control: the same report, right this time, is recorded.
    js.publish(
        topology::report_subject(&"cm".parse().unwrap()),
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
