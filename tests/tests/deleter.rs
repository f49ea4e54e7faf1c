//! The deleter trusts no job, never stops on a plugin, and never leaves a backup silently
//! half-cleaned — against a real nats-server and SeaweedFS:
//!
//! - forged and stale jobs (another unique id, an old revision, a backup the plan now keeps or
//!   a new backup depends on, keys with `..` or under another cluster, a backup in progress, a
//!   duplicate delivery) delete nothing extra;
//! - a legal hold on one object: `delete-failed` with the reason, the record kept and listing
//!   what remains;
//! - delete plugins: called in name order, one failing and one too slow, recorded, and the
//!   deletion goes on;
//! - a job that runs out of deliveries is recorded `delete-failed` and removed from the stream.

use std::{collections::BTreeSet, time::Duration};

use async_nats::jetstream;
use serde_json::json;
use sexton_model::{
    names::{BackupId, ClusterName},
    records::{BackupRecord, BackupStatus},
    wire::DeleteJob,
};
use sexton_shared::{
    catalog::{Catalog, Versioned},
    topology,
};
use sexton_tests::{
    fixtures::*,
    setup::{Setup, World},
    *,
};

fn metric(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name_and_labels)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_stale_and_duplicate_jobs_delete_nothing_extra() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;

    put_schedule(&topo, "nightly", "c1", "full", json!({"keep_last": 1})).await;
    let mut records = vec![
        backup("c1", "full", "b-newest", None, 100, 1),
        backup("c1", "full", "b-expiring", None, 10, 2),
        backup("c1", "full", "b-kept-now", None, 90, 1),
        backup("c1", "full", "b-parent", None, 5, 1),
        backup("c1", "full", "i-new", Some("b-parent"), 99, 1),
        backup("c1", "full", "b-completed", None, 20, 1),
        backup("c1", "full", "b-other-uid", None, 21, 1),
        backup("c1", "full", "b-stale", None, 22, 1),
        backup("c1", "full", "b-dotdot", None, 23, 1),
        backup("c1", "full", "b-c2", None, 24, 1),
    ];
    let tag = |records: &mut Vec<sexton_model::records::BackupRecord>, id: &str| {
        let r = records.iter_mut().find(|r| r.id.as_str() == id).unwrap();
        r.tags = vec!["keep".into()];
    };
    tag(&mut records, "b-kept-now");
    tag(&mut records, "i-new");
    let c2_key = "backups/c2/full/x/backup.xbstream".to_string();
    // Forged artifact lists: these records have no objects of their own.
    let (forged, genuine): (Vec<_>, Vec<_>) = records
        .into_iter()
        .partition(|r| ["b-dotdot", "b-c2"].contains(&r.id.as_str()));
    put_backups(&catalog, &store, &genuine).await;
    for mut r in forged {
        r.artifacts = match r.id.as_str() {
            "b-dotdot" => vec!["backups/c1/../c2/full/x/backup.xbstream".into()],
            _ => vec![c2_key.clone()],
        };
        catalog.create(&r).await.unwrap();
    }
    let mut running = backup("c1", "full", "b-running", None, 25, 1);
    running.status = BackupStatus::InProgress;
    put_backups(&catalog, &store, &[running]).await;
    put_objects(&store, std::slice::from_ref(&c2_key)).await;
    let before_c1 = keys_under(&store, "backups/c1/").await;
    let n_records = records_of(&catalog, "c1").await.len();

    // Retention (keep_last 1, no tag rule yet) marked these expiring and published their jobs.
    let current = records_of(&catalog, "c1").await;
    let mut jobs = std::collections::BTreeMap::new();
    for id in [
        "b-expiring",
        "b-kept-now",
        "b-parent",
        "b-other-uid",
        "b-stale",
        "b-dotdot",
        "b-c2",
    ] {
        // Only forged jobs for these two: the genuine ones would be carried out.
        let mut job = mark_expiring(&catalog, &current[id]).await;
        match id {
            "b-other-uid" => job.uid = "someone-else".into(),
            "b-stale" => job.revision -= 1,
            _ => {}
        }
        publish_job(&js, &job, &format!("{id}-1")).await;
        jobs.insert(id, job);
    }
    // The same job again, as a distinct message, so both are delivered.
    publish_job(&js, &jobs["b-expiring"], "b-expiring-again").await;
    // Jobs for a backup that is not expiring, one in progress, and one that does not exist.
    let job_for = |id: &str, revision: u64| DeleteJob {
        schema_version: 1,
        cluster: ClusterName::new("c1").unwrap(),
        backup_id: BackupId::new(id).unwrap(),
        uid: format!("uid-{id}"),
        revision,
        reasons: vec![],
        volumes: Vec::new(),
    };
    publish_job(
        &js,
        &job_for("b-completed", current["b-completed"].revision),
        "c",
    )
    .await;
    publish_job(
        &js,
        &job_for("b-running", current["b-running"].revision),
        "r",
    )
    .await;
    publish_job(&js, &job_for("b-unknown", 1), "u").await;
    // Before the deleter runs, the policy changes: tagged backups are kept now, so b-kept-now
    // is kept, and b-parent is needed by the tagged i-new.
    put_schedule(
        &topo,
        "nightly",
        "c1",
        "full",
        json!({"keep_last": 1, "keep_tags": [["keep"]]}),
    )
    .await;

    let fleet = Fleet::start(&config, DELETER_ONLY);
    deleter_drained(&js, Duration::from_secs(60)).await;

    let after_c1 = keys_under(&store, "backups/c1/").await;
    let expected: BTreeSet<String> = before_c1
        .iter()
        .filter(|k| !k.contains("/b-expiring/"))
        .cloned()
        .collect();
    assert_eq!(after_c1, expected, "only b-expiring's objects may go");
    assert!(keys_under(&store, "backups/c2/").await.contains(&c2_key));
    let after = records_of(&catalog, "c1").await;
    assert!(!after.contains_key("b-expiring"));
    assert_eq!(after.len(), n_records - 1);
    for (id, record) in &after {
        assert_ne!(
            record.value.status,
            BackupStatus::Deleting,
            "{id} left claimed"
        );
    }
    // The plan made now keeps these: their mark is taken off.
    for id in ["b-kept-now", "b-parent"] {
        assert_eq!(after[id].value.status, BackupStatus::Completed, "{id}");
    }

    let reasons: Vec<String> = incidents(&js).await.into_iter().map(|i| i.reason).collect();
    for needle in [
        "b-completed is completed, not expiring",
        "unique id",
        "stale job",
        "keeps backup b-kept-now",
        "needed by i-new",
        "'..' segment",
        "not under the cluster's prefix",
        "b-running is in progress",
    ] {
        assert!(
            reasons.iter().any(|r| r.contains(needle)),
            "no incident says {needle:?}: {reasons:#?}"
        );
    }
    assert!(fleet.all_running());
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legal_hold_fails_the_deletion_and_the_record_lists_what_remains() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    // Object Lock needs a bucket created with it.
    config.s3.bucket = "locked".into();
    let metrics_port = free_port();
    config.http.listen = format!("127.0.0.1:{metrics_port}");
    let store = object_store(&config).await;
    store
        .client()
        .create_bucket()
        .bucket("locked")
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());

    put_schedule(&topo, "nightly", "c1", "full", json!({"keep_last": 1})).await;
    let newest = backup("c1", "full", "b2", None, 60, 1);
    let old = backup("c1", "full", "b1", None, 10, 3);
    put_backups(&catalog, &store, &[newest, old.clone()]).await;
    let held = old.artifacts[1].clone();
    store
        .client()
        .put_object_legal_hold()
        .bucket("locked")
        .key(&held)
        .legal_hold(
            aws_sdk_s3::types::ObjectLockLegalHold::builder()
                .status(aws_sdk_s3::types::ObjectLockLegalHoldStatus::On)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let current = records_of(&catalog, "c1").await;
    expire(&js, &catalog, &current["b1"], "b1").await;

    let fleet = Fleet::start(&config, DELETER_ONLY);
    deleter_drained(&js, Duration::from_secs(60)).await;

    let record = records_of(&catalog, "c1").await["b1"].value.clone();
    assert_eq!(record.status, BackupStatus::DeleteFailed);
    let reason = record.last_error.clone().unwrap_or_default();
    assert!(reason.contains("AccessDenied"), "{reason}");
    assert!(reason.contains(&held), "{reason}");
    // The other data objects are gone; the held one and metadata.json stay, and the record
    // says exactly that.
    let metadata = old.artifacts[3].clone();
    assert_eq!(record.artifacts, vec![held.clone(), metadata.clone()]);
    let left = keys_under(&store, "backups/c1/full/b1/").await;
    assert_eq!(left, BTreeSet::from([held, metadata]));
    let incident = incidents(&js)
        .await
        .into_iter()
        .find(|i| i.kind == "delete-failed")
        .expect("a delete-failed incident");
    assert_eq!(incident.backup_id.as_deref(), Some("b1"));
    let (_, text) = http_get(metrics_port, "/metrics").unwrap();
    assert_eq!(
        metric(&text, "sexton_delete_failures_total{kind=\"permanent\"}"),
        1.0
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_run_in_name_order_with_a_timeout_and_never_stop_the_deletion() {
    use futures::StreamExt;
    let metrics_port = free_port();
    let world = Setup::new(DELETER_ONLY)
        .configure(move |config| config.http.listen = format!("127.0.0.1:{metrics_port}"))
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
    // The buckets themselves: put_schedule writes a schedule, the test reads catalog history.
    let topo = topology::ensure(&js, 1).await.unwrap();
    let store = object_store(&config).await;

    // Four plugins; "d-silver" selects other backups. Registered out of order.
    let (calls_tx, mut calls_rx) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    for (name, answer) in [
        ("c-ok", "ok"),
        ("a-fails", "error"),
        ("b-slow", "slow"),
        ("d-silver", "ok"),
    ] {
        let subject = format!("sexton.v1.plugin.{name}");
        let mut requests = client.subscribe(subject.clone()).await.unwrap();
        let (responder, calls_tx) = (client.clone(), calls_tx.clone());
        tokio::spawn(async move {
            while let Some(request) = requests.next().await {
                let call: serde_json::Value = serde_json::from_slice(&request.payload).unwrap();
                let backup = call["backup_id"].as_str().unwrap().to_string();
                calls_tx.send((name.to_string(), backup)).unwrap();
                let body = match answer {
                    "error" => r#"{"error":"snapshot api said no"}"#,
                    "slow" => {
                        tokio::time::sleep(Duration::from_secs(3)).await;
                        "{}"
                    }
                    _ => "{}",
                };
                if let Some(reply) = request.reply {
                    responder.publish(reply, body.into()).await.unwrap();
                }
            }
        });
        let mut spec = json!({"schema_version": 1, "name": name, "subject": subject,
                              "selector": {"tier": "gold"}});
        if name == "b-slow" {
            spec["timeout_seconds"] = json!(1);
        }
        if name == "d-silver" {
            spec["selector"] = json!({"tier": "silver"});
        }
        eventually("plugin registration", Duration::from_secs(30), || {
            let (client, spec) = (client.clone(), spec.clone());
            async move { api(&client, "plugin", "register", spec).await.ok() }
        })
        .await;
    }
    client.flush().await.unwrap();
    // Malformed registrations are refused with the reason.
    for (spec, needle) in [
        (
            json!({"schema_version": 1, "name": "x", "subject": "sexton.v1.job.delete.c1"}),
            "must start with",
        ),
        (
            json!({"schema_version": 1, "name": "x", "subject": "sexton.v1.plugin.>"}),
            "no wildcards",
        ),
        (
            json!({"schema_version": 1, "name": "../x", "subject": "sexton.v1.plugin.x"}),
            "invalid plugin name",
        ),
        (
            json!({"schema_version": 1, "name": "x", "subject": "sexton.v1.plugin.x", "timeout_seconds": 9999}),
            "timeout_seconds",
        ),
    ] {
        let err = api(&client, "plugin", "register", spec).await.unwrap_err();
        assert_eq!(err.code, sexton_shared::api::ErrorCode::Invalid);
        assert!(err.message.contains(needle), "{err:?}");
    }
    let listed = api(&client, "plugin", "list", json!({"schema_version": 1}))
        .await
        .unwrap();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a-fails", "b-slow", "c-ok", "d-silver"]);

    put_schedule(&topo, "nightly", "c1", "full", json!({"keep_last": 1})).await;
    let mut old = backup("c1", "full", "b1", None, 10, 2);
    old.labels.insert("tier".into(), "gold".into());
    old.size_bytes = Some(3 * 1024 * 1024);
    put_backups(
        &catalog,
        &store,
        &[backup("c1", "full", "b2", None, 60, 1), old.clone()],
    )
    .await;
    let current = records_of(&catalog, "c1").await;
    expire(&js, &catalog, &current["b1"], "b1").await;
    deleter_drained(&js, Duration::from_secs(60)).await;

    // Deleted despite two failing plugins.
    assert!(!records_of(&catalog, "c1").await.contains_key("b1"));
    assert!(keys_under(&store, "backups/c1/full/b1/").await.is_empty());
    let mut calls = Vec::new();
    while let Ok(call) = calls_rx.try_recv() {
        calls.push(call);
    }
    let order: Vec<&str> = calls.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(order, ["a-fails", "b-slow", "c-ok"], "{calls:?}");
    // Recorded on the backup (the revision before its record was removed) and in incidents.
    let mut history = topo.catalog.history("c1.b1").await.unwrap();
    let mut recorded = Vec::new();
    while let Some(entry) = history.next().await {
        let entry = entry.unwrap();
        if let Ok(record) =
            serde_json::from_slice::<sexton_model::records::BackupRecord>(&entry.value)
        {
            recorded = record.plugin_errors;
        }
    }
    let failed: Vec<(&str, &str)> = recorded
        .iter()
        .map(|f| (f.plugin.as_str(), f.error.as_str()))
        .collect();
    assert_eq!(
        failed,
        [
            ("a-fails", "snapshot api said no"),
            ("b-slow", "no answer within 1s")
        ]
    );
    let plugin_incidents: Vec<String> = incidents(&js)
        .await
        .into_iter()
        .filter(|i| i.kind == "plugin-failed")
        .map(|i| i.reason)
        .collect();
    assert_eq!(plugin_incidents.len(), 2, "{plugin_incidents:?}");
    let (_, text) = http_get(metrics_port, "/metrics").unwrap();
    for (outcome, n) in [("ok", 1.0), ("error", 1.0), ("timeout", 1.0)] {
        assert_eq!(
            metric(
                &text,
                &format!("sexton_plugin_calls_total{{outcome=\"{outcome}\"}}")
            ),
            n,
            "{outcome}"
        );
    }
    assert_eq!(metric(&text, "sexton_backups_deleted_total"), 1.0);
    assert_eq!(
        metric(&text, "sexton_bytes_deleted_total"),
        (3 * 1024 * 1024) as f64
    );

    // A plugin registered after the deleter read the registry is called at the next deletion:
    // the deleter reuses its listing only while the bucket has stored nothing since (issue 32).
    let subject = "sexton.v1.plugin.e-late";
    let mut requests = client.subscribe(subject).await.unwrap();
    let (responder, late_tx) = (client.clone(), calls_tx.clone());
    tokio::spawn(async move {
        while let Some(request) = requests.next().await {
            let call: serde_json::Value = serde_json::from_slice(&request.payload).unwrap();
            let backup = call["backup_id"].as_str().unwrap().to_string();
            late_tx.send(("e-late".to_string(), backup)).unwrap();
            if let Some(reply) = request.reply {
                responder.publish(reply, "{}".into()).await.unwrap();
            }
        }
    });
    client.flush().await.unwrap();
    api(
        &client,
        "plugin",
        "register",
        json!({"schema_version": 1, "name": "e-late", "subject": subject,
               "selector": {"tier": "gold"}}),
    )
    .await
    .unwrap();
    let mut later = backup("c1", "full", "b3", None, 20, 2);
    later.labels.insert("tier".into(), "gold".into());
    put_backups(&catalog, &store, std::slice::from_ref(&later)).await;
    let current = records_of(&catalog, "c1").await;
    expire(&js, &catalog, &current["b3"], "b3").await;
    deleter_drained(&js, Duration::from_secs(60)).await;
    assert!(!records_of(&catalog, "c1").await.contains_key("b3"));
    let mut calls = Vec::new();
    while let Ok(call) = calls_rx.try_recv() {
        calls.push(call);
    }
    assert!(
        calls.contains(&("e-late".to_string(), "b3".to_string())),
        "the plugin registered late was not called: {calls:?}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_out_of_deliveries_is_recorded_and_removed_from_the_stream() {
    let nats = Nats::start();
    let mut s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    // Two deliveries instead of twenty, so the test does not wait for the whole backoff. The
    // deleter opens the existing durable as it is.
    few_deliveries(&js, 2, Duration::from_secs(60)).await;
    let (old, current) = b1_expirable(&topo, &catalog, &store).await;
    // The object store goes away: every attempt fails, transiently.
    s3.server.kill();
    expire(&js, &catalog, &current["b1"], "b1").await;
    let fleet = Fleet::start(&config, DELETER_ONLY);

    let record = b1_delete_failed(&catalog).await;
    let reason = record.last_error.unwrap();
    assert!(reason.contains("gave up after 2 deliveries"), "{reason}");
    assert!(reason.contains("objects not checked"), "{reason}");
    // Nothing is known to be deleted: every object is still listed.
    assert_eq!(record.artifacts, old.artifacts);
    // The dead job is gone from the work queue.
    eventually("the dead job removed", Duration::from_secs(30), || {
        let js = js.clone();
        async move {
            let mut stream = js.get_stream(topology::STREAM_JOBS).await.ok()?;
            (stream.info().await.ok()?.state.messages == 0).then_some(())
        }
    })
    .await;
    assert!(incidents(&js)
        .await
        .iter()
        .any(|i| i.kind == "delete-failed" && i.backup_id.as_deref() == Some("b1")));
    fleet.stop().await.unwrap();
}

/// A job that runs out of deliveries while no deleter runs (the last one died holding it) is
/// still recorded: the advisory waits in `SEXTON_DEAD_LETTERS` until a deleter starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_runs_out_of_deliveries_while_no_deleter_runs_is_recorded_later() {
    use futures::StreamExt as _;
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    // One delivery, a short ack wait: the delivery below is the job's only one.
    let consumer = few_deliveries(&js, 1, Duration::from_secs(1)).await;
    let (old, current) = b1_expirable(&topo, &catalog, &store).await;
    expire(&js, &catalog, &current["b1"], "b1").await;
    // A "deleter" takes the job and dies without a word.
    let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
    let taken = batch.next().await.unwrap().unwrap();
    assert_eq!(
        topology::published_subject(&taken.subject),
        "sexton.v1.job.delete.c1"
    );
    drop(batch);
    // The advisory is raised and kept while nobody listens.
    eventually("the advisory kept", Duration::from_secs(30), || {
        let js = js.clone();
        async move {
            let mut stream = js.get_stream(topology::STREAM_DEAD_LETTERS).await.ok()?;
            (stream.info().await.ok()?.state.messages == 1).then_some(())
        }
    })
    .await;
    assert_eq!(
        records_of(&catalog, "c1").await["b1"].value.status,
        BackupStatus::Expiring
    );

    let fleet = Fleet::start(&config, DELETER_ONLY);
    let record = b1_delete_failed(&catalog).await;
    let reason = record.last_error.unwrap();
    assert!(reason.contains("gave up after 1 deliveries"), "{reason}");
    // Nothing was deleted: every object is still there.
    assert_eq!(
        keys_under(&store, "backups/c1/full/b1/").await.len(),
        old.artifacts.len()
    );
    for stream in [topology::STREAM_JOBS, topology::STREAM_DEAD_LETTERS] {
        eventually(
            "the dead job and its advisory removed",
            Duration::from_secs(30),
            || {
                let js = js.clone();
                async move {
                    let mut stream = js.get_stream(stream).await.ok()?;
                    (stream.info().await.ok()?.state.messages == 0).then_some(())
                }
            },
        )
        .await;
    }
    fleet.stop().await.unwrap();
}

/// Replaces the deleter's durable for c1 with one that gives up after `max_deliver`
/// deliveries.
async fn few_deliveries(
    js: &jetstream::Context,
    max_deliver: i64,
    ack_wait: Duration,
) -> async_nats::jetstream::consumer::PullConsumer {
    sexton_tests::delete_durable_with(js, "c1", max_deliver, ack_wait).await
}

/// Cluster c1 keeping one backup, with b2 (newest) and b1 (which keep_last 1 lets go); returns
/// b1 as written and the catalog as read back.
async fn b1_expirable(
    topo: &topology::Topology,
    catalog: &Catalog,
    store: &sexton_shared::object_store::ObjectStore,
) -> (
    BackupRecord,
    std::collections::BTreeMap<String, Versioned<BackupRecord>>,
) {
    put_schedule(topo, "nightly", "c1", "full", json!({"keep_last": 1})).await;
    let old = backup("c1", "full", "b1", None, 10, 2);
    put_backups(
        catalog,
        store,
        &[backup("c1", "full", "b2", None, 60, 1), old.clone()],
    )
    .await;
    (old, records_of(catalog, "c1").await)
}

/// Waits for b1 of c1 to be recorded `delete-failed` and returns its record.
async fn b1_delete_failed(catalog: &Catalog) -> BackupRecord {
    eventually("b1 recorded delete-failed", Duration::from_secs(60), || {
        let catalog = catalog.clone();
        async move {
            let record = catalog
                .get(
                    &ClusterName::new("c1").unwrap(),
                    &BackupId::new("b1").unwrap(),
                )
                .await
                .ok()??;
            (record.value.status == BackupStatus::DeleteFailed).then_some(record.value)
        }
    })
    .await
}
