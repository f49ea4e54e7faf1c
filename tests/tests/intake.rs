//! Intake (issue 12): Sexton counts only recovery points it has seen. A completed report whose
//! objects are not in the bucket as reported is recorded `failed` with the reasons, never
//! counts, and cannot make retention delete a real backup; a report of a backup already
//! deleted does not bring its record back, whatever the delivery.

use std::{collections::BTreeSet, time::Duration};

use async_nats::jetstream::{self, consumer::PullConsumer, AckKind};
use chrono::Utc;
use futures::StreamExt;
use serde_json::{json, Value};
use sexton_model::{
    names::{BackupId, ClusterName},
    records::BackupStatus,
};
use sexton_shared::{
    catalog::{Catalog, Lookup},
    topology,
};
use sexton_tests::{
    setup::{Setup, World},
    *,
};

fn report(cluster: &str, id: &str, completed_at: chrono::DateTime<Utc>) -> Value {
    json!({
        "schema_version": 1, "backup_id": id, "cluster": cluster, "plan": "full",
        "schedule": "f", "backup_name": "f", "status": "completed", "kind": "full",
        "started_at": (completed_at - chrono::Duration::minutes(5)).to_rfc3339(),
        "completed_at": completed_at.to_rfc3339(),
        "artifacts": [
            format!("backups/{cluster}/f/{id}/backup.xbstream"),
            format!("backups/{cluster}/f/{id}/metadata.json"),
        ],
    })
}

async fn publish(js: &jetstream::Context, subject: &str, body: &Value, id: &str) {
    js.send_publish(
        subject.to_string(),
        jetstream::message::PublishMessage::build()
            .payload(serde_json::to_vec(body).unwrap().into())
            .message_id(id),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

async fn reports_drained(js: &jetstream::Context) {
    eventually(
        "the reports consumer drained",
        Duration::from_secs(30),
        || {
            let js = js.clone();
            async move {
                let backlog =
                    consumer_backlog(&js, topology::STREAM_REPORTS, topology::CONSUMER_REPORTS)
                        .await?;
                (backlog == 0).then_some(())
            }
        },
    )
    .await;
}

/// The outside test's scenario, as written, plus a partial upload and a wrong size: four real
/// backups kept by the policy; newer completed reports whose objects were never uploaded (or
/// only partly, or with another size). Nothing real is deleted, and each phantom is `failed`
/// with a reason naming its keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_of_objects_never_uploaded_delete_no_real_backup() {
    let world = Setup::new(Members {
        executor: false,
        ..Members::ALL
    })
    .schedule(
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 3, "keep_hourly": 2, "keep_within": "5h"}}),
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
    let now = Utc::now();
    let real: Vec<String> = (1..=4).map(|n| format!("f-real{n}")).collect();
    for (n, id) in real.iter().enumerate() {
        let mut body = report("c1", id, now - chrono::Duration::hours(4 - n as i64));
        fixtures::upload_genuine_json(&store, &mut body).await;
        publish(&js, "sexton.v1.report.c1", &body, &format!("real-{n}")).await;
    }
    eventually(
        "four real backups recorded",
        Duration::from_secs(30),
        || async {
            let records = fixtures::records_of(&catalog, "c1").await;
            (records.len() == 4
                && records
                    .values()
                    .all(|r| r.value.status == BackupStatus::Completed))
            .then_some(())
        },
    )
    .await;
    let real_objects = fixtures::keys_under(&store, "backups/c1/").await;
    assert_eq!(real_objects.len(), 8);

    // Three phantoms, newer than every real backup, exactly as the outside test sent them.
    let mut phantoms = Vec::new();
    for n in 1..=3 {
        let id = format!("f-phantom{n}");
        let body = report("c1", &id, now - chrono::Duration::seconds(30 - n));
        publish(&js, "sexton.v1.report.c1", &body, &id).await;
        phantoms.push(id);
    }
    // A partial upload: the data object is there, metadata.json is not.
    let mut partial = report("c1", "f-partial", now - chrono::Duration::seconds(20));
    fixtures::upload_genuine_json(&store, &mut partial).await;
    store
        .delete_batch(&["backups/c1/f/f-partial/metadata.json".to_string()])
        .await
        .unwrap();
    publish(&js, "sexton.v1.report.c1", &partial, "partial").await;
    // A wrong size: the data object was overwritten by a shorter one after the report was made.
    let mut short = report("c1", "f-short", now - chrono::Duration::seconds(10));
    fixtures::upload_genuine_json(&store, &mut short).await;
    store
        .put("backups/c1/f/f-short/backup.xbstream", "x".into())
        .await
        .unwrap();
    publish(&js, "sexton.v1.report.c1", &short, "short").await;

    reports_drained(&js).await;
    // Retention ran for each report; let the deleter finish whatever it was given.
    tokio::time::sleep(Duration::from_secs(3)).await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;

    let records = fixtures::records_of(&catalog, "c1").await;
    for id in &real {
        let record = records
            .get(id)
            .unwrap_or_else(|| panic!("real backup {id} deleted: {records:#?}"));
        assert_eq!(record.value.status, BackupStatus::Completed, "{id}");
        assert_eq!(record.value.objects.len(), 2, "{id}: objects as seen");
        assert!(record.value.seen_at.is_some());
    }
    let after = fixtures::keys_under(&store, "backups/c1/").await;
    let lost: BTreeSet<&String> = real_objects
        .iter()
        .filter(|k| real.iter().any(|id| k.contains(id.as_str())) && !after.contains(*k))
        .collect();
    assert!(lost.is_empty(), "real objects deleted: {lost:?}");
    let reason = |id: &str| {
        let record = &records
            .get(id)
            .unwrap_or_else(|| panic!("{id} not recorded"))
            .value;
        assert_eq!(record.status, BackupStatus::Failed, "{id}: {record:?}");
        assert!(record.objects.is_empty(), "{id} has seen objects");
        record.last_error.clone().unwrap_or_default()
    };
    for id in &phantoms {
        let why = reason(id);
        for file in ["backup.xbstream", "metadata.json"] {
            assert!(
                why.contains(&format!(
                    "object backups/c1/f/{id}/{file} is not in the bucket"
                )),
                "{id}: {why}"
            );
        }
    }
    let why = reason("f-partial");
    assert!(
        why.contains("backups/c1/f/f-partial/metadata.json is not in the bucket")
            && !why.contains("backup.xbstream is not"),
        "{why}"
    );
    let why = reason("f-short");
    assert!(
        why.contains("backups/c1/f/f-short/backup.xbstream holds 1 bytes in the bucket"),
        "{why}"
    );
    // Each refusal is an incident naming the backup.
    let incidents = fixtures::incidents(&js).await;
    for id in phantoms
        .iter()
        .map(String::as_str)
        .chain(["f-partial", "f-short"])
    {
        assert!(
            incidents
                .iter()
                .any(|i| i.kind == "intake-refused" && i.backup_id.as_deref() == Some(id)),
            "no incident for {id}: {incidents:#?}"
        );
    }
    fleet.stop().await.unwrap();
}

/// The replica-kill race behind `fault_replica_kills`' "live record whose objects are gone"
/// (issue 12 item 2), made deterministic: a scheduler records a completed report and dies
/// before acknowledging it; retention deletes the backup (objects, then record); the report is
/// delivered again. Before the fix the second delivery created the record anew, pointing at
/// objects that no longer exist, and the de-duplicated checkpoint never let retention see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_delivered_again_after_its_backup_was_deleted_does_not_bring_it_back() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let store = object_store(&config).await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let c1 = ClusterName::new("c1").unwrap();
    let id = BackupId::new("f-1").unwrap();

    let fleet = Fleet::start(&config, SCHEDULER_ONLY);
    create_schedule(
        &client,
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true}),
    )
    .await;
    let mut body = report("c1", "f-1", Utc::now() - chrono::Duration::minutes(1));
    fixtures::upload_genuine_json(&store, &mut body).await;
    publish(&js, "sexton.v1.report.c1", &body, "first").await;
    let recorded = wait_reported(&catalog, "c1", "f-1").await;
    assert_eq!(recorded.status, BackupStatus::Completed);
    reports_drained(&js).await;
    fleet.stop().await.unwrap();

    // Retention deletes it, as the deleter does: objects, then the record.
    let current = catalog.get(&c1, &id).await.unwrap().unwrap();
    let failures = store.delete_batch(&recorded.artifacts).await.unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    catalog.remove(&c1, &id, current.revision).await.unwrap();

    // The report comes back as a redelivery: taken from the scheduler's own durable and handed
    // back, as a scheduler that died before acknowledging leaves it.
    publish(&js, "sexton.v1.report.c1", &body, "again").await;
    let stream = js.get_stream(topology::STREAM_REPORTS).await.unwrap();
    let consumer: PullConsumer = stream
        .get_consumer(topology::CONSUMER_REPORTS)
        .await
        .unwrap();
    let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
    let message = batch.next().await.unwrap().unwrap();
    assert_eq!(message.info().unwrap().delivered, 1);
    message.ack_with(AckKind::Nak(None)).await.unwrap();
    drop(batch);

    let fleet = Fleet::start(&config, SCHEDULER_ONLY);
    reports_drained(&js).await;
    assert!(
        matches!(catalog.lookup(&c1, &id).await.unwrap(), Lookup::Removed),
        "a redelivered report brought the deleted backup back"
    );
    let incidents_before = fixtures::incidents(&js).await.len();

    // A late duplicate (a first delivery of the same report): refused, and an operator hears.
    publish(&js, "sexton.v1.report.c1", &body, "late").await;
    let incident = eventually(
        "an incident for the late report",
        Duration::from_secs(20),
        || {
            let js = js.clone();
            async move {
                fixtures::incidents(&js)
                    .await
                    .into_iter()
                    .skip(incidents_before)
                    .find(|i| i.reason.contains("was deleted from the catalog"))
            }
        },
    )
    .await;
    assert_eq!(incident.subject, "sexton.v1.report.c1");
    assert!(matches!(
        catalog.lookup(&c1, &id).await.unwrap(),
        Lookup::Removed
    ));

    // A new backup that re-uses the id (taken at another time) is a backup like any other.
    let mut reused = report("c1", "f-1", Utc::now());
    fixtures::upload_genuine_json(&store, &mut reused).await;
    publish(&js, "sexton.v1.report.c1", &reused, "reused").await;
    let again = wait_reported(&catalog, "c1", "f-1").await;
    assert_eq!(again.status, BackupStatus::Completed);
    assert_ne!(again.uid, recorded.uid);
    fleet.stop().await.unwrap();
}

/// A report whose body names another cluster than its subject is poison (issue 12 item 4):
/// an executor's NATS user scoped to `sexton.v1.report.c1` must not write `c2`'s catalog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_for_another_cluster_than_its_subject_is_refused() {
    let world = Setup::new(SCHEDULER_ONLY)
        .schedule(
            json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily",
                         "paused": true}),
        )
        .schedule(
            json!({"name": "g", "cluster": "c2", "plan": "full", "cron": "@daily",
                         "paused": true}),
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
    let mut body = report("c2", "r-sub", Utc::now());
    body.as_object_mut().unwrap().remove("schedule");
    fixtures::upload_genuine_json(&store, &mut body).await;
    publish(&js, "sexton.v1.report.c1", &body, "mismatch").await;
    let incident = eventually("an incident", Duration::from_secs(20), || {
        let js = js.clone();
        async move { fixtures::incidents(&js).await.into_iter().next() }
    })
    .await;
    assert!(
        incident
            .reason
            .contains("report for cluster c2 arrived on \"sexton.v1.report.c1\""),
        "{incident:?}"
    );
    reports_drained(&js).await;
    assert!(catalog.list_all().await.unwrap().is_empty());
    fleet.stop().await.unwrap();
}

/// `hour` o'clock (UTC) `n` days before today.
fn day(n: i64, hour: i64) -> chrono::DateTime<Utc> {
    let midnight = Utc::now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    midnight - chrono::Duration::days(n) + chrono::Duration::hours(hour)
}

/// A real backup of schedule `f` completed at `at`, as the catalog records it.
fn real(id: &str, at: chrono::DateTime<Utc>) -> sexton_model::records::BackupRecord {
    let mut record = fixtures::backup("c1", "full", id, None, 0, 1);
    record.schedule = Some("f".parse().unwrap());
    record.started_at = Some((at - chrono::Duration::minutes(5)).fixed_offset());
    record.completed_at = Some(at.fixed_offset());
    record
}

/// A real backup four days old, which the policy lets go, is deleted by the next run: retention
/// ran over the catalog as the attack left it; and every one of `reals` is still kept.
async fn retention_ran_and_kept(
    catalog: &Catalog,
    store: &sexton_shared::object_store::ObjectStore,
    reals: &[sexton_model::records::BackupRecord],
) {
    let old = real("real-d4", day(4, 1));
    fixtures::put_backups(catalog, store, std::slice::from_ref(&old)).await;
    eventually(
        "the oldest real backup deleted",
        Duration::from_secs(60),
        || async {
            let records = fixtures::records_of(catalog, "c1").await;
            (!records.contains_key("real-d4")).then_some(())
        },
    )
    .await;
    let records = fixtures::records_of(catalog, "c1").await;
    for real in reals {
        assert_eq!(
            records[real.id.as_str()].value.status,
            BackupStatus::Completed,
            "{} not kept",
            real.id
        );
    }
}

/// The restic#22057 shape (issue 29): an executor's key reports real, uploaded backups whose
/// completion times are forged days into the past, each the last of a day that holds a real
/// backup, so that `keep_daily` would keep them and let the real ones go. With
/// `scheduler.max_report_delay` (1h) every one is refused, by the server's clock when the
/// report was published, and no real backup is deleted. A later deletion that the policy asks
/// for itself (a fourth, older real backup) shows retention ran over the catalog as the attack
/// left it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_with_forged_past_times_push_no_real_backup_out() {
    let world = Setup::new(Members {
        executor: false,
        ..Members::ALL
    })
    .configure(|config| {
        config.scheduler.retention_sweep_interval = Duration::from_secs(2);
        config.scheduler.max_report_delay = Duration::from_secs(3600);
    })
    .schedule(
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily",
                     "paused": true, "policy": {"keep_daily": 3}}),
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
    // Taken on each of the last three days, recorded then.
    let reals = vec![
        real("real-d1", day(1, 1)),
        real("real-d2", day(2, 1)),
        real("real-d3", day(3, 1)),
    ];
    fixtures::put_backups(&catalog, &store, &reals).await;

    // Uploaded now, reported as completed late on each of those days.
    let forged: Vec<String> = (1..=3).map(|n| format!("f-forged-d{n}")).collect();
    for (n, id) in forged.iter().enumerate() {
        let mut body = report("c1", id, day(n as i64 + 1, 23));
        fixtures::upload_genuine_json(&store, &mut body).await;
        publish(&js, "sexton.v1.report.c1", &body, id).await;
    }
    let records = eventually(
        "the forged reports judged",
        Duration::from_secs(60),
        || async {
            let records = fixtures::records_of(&catalog, "c1").await;
            forged
                .iter()
                .all(|id| {
                    records
                        .get(id)
                        .is_some_and(|r| r.value.status == BackupStatus::Failed)
                })
                .then_some(records)
        },
    )
    .await;
    for id in &forged {
        let why = records[id].value.last_error.clone().unwrap_or_default();
        assert!(why.contains("scheduler.max_report_delay"), "{id}: {why}");
    }

    // The policy's own deletion: a real backup four days old goes at the next run.
    retention_ran_and_kept(&catalog, &store, &reals).await;
    fleet.stop().await.unwrap();
}

/// The same attack with no setting to choose (issue 29): the executor's key answers the
/// due-backups Sexton really issued, with real uploads, but claims each completed late on a
/// past day. Intake judges each report against the due it answers (remembered by the
/// scheduler, out of the executor's reach) and refuses it: it claims to have been taken before
/// Sexton asked for it. With `scheduler.require_due`, a report that answers no due at all is
/// refused too; an honest answer counts; no real backup is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_backdated_before_their_due_are_refused_against_it() {
    let world = Setup::new(Members {
        executor: false,
        ..Members::ALL
    })
    .configure(|config| {
        config.scheduler.retention_sweep_interval = Duration::from_secs(2);
        config.scheduler.require_due = true;
    })
    .schedule(
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily",
                     "paused": true, "policy": {"keep_daily": 4}}),
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
    let reals = vec![
        real("real-d1", day(1, 1)),
        real("real-d2", day(2, 1)),
        real("real-d3", day(3, 1)),
    ];
    fixtures::put_backups(&catalog, &store, &reals).await;

    // Three dues really issued (`backup create`), each answered as if taken late on a past day.
    let mut forged = Vec::new();
    for n in 1..=3 {
        let id = trigger_backup(&client, "f").await;
        let mut body = report("c1", &id, day(n, 23));
        fixtures::upload_genuine_json(&store, &mut body).await;
        publish(&js, "sexton.v1.report.c1", &body, &id).await;
        forged.push(id);
    }
    // One that answers no due, and one honest answer.
    let mut unsolicited = report("c1", "f-unsolicited", Utc::now());
    fixtures::upload_genuine_json(&store, &mut unsolicited).await;
    publish(&js, "sexton.v1.report.c1", &unsolicited, "f-unsolicited").await;
    let honest = trigger_backup(&client, "f").await;
    let mut body = report("c1", &honest, Utc::now() + chrono::Duration::seconds(1));
    fixtures::upload_genuine_json(&store, &mut body).await;
    publish(&js, "sexton.v1.report.c1", &body, &honest).await;

    let judged: Vec<String> = forged
        .iter()
        .cloned()
        .chain(["f-unsolicited".to_string(), honest.clone()])
        .collect();
    let records = eventually("the reports judged", Duration::from_secs(60), || async {
        let records = fixtures::records_of(&catalog, "c1").await;
        judged
            .iter()
            .all(|id| {
                records.get(id).is_some_and(|r| {
                    matches!(
                        r.value.status,
                        BackupStatus::Failed | BackupStatus::Completed
                    )
                })
            })
            .then_some(records)
    })
    .await;
    for id in &forged {
        let record = &records[id].value;
        let why = record.last_error.clone().unwrap_or_default();
        assert_eq!(record.status, BackupStatus::Failed, "{id}");
        assert!(
            why.contains("is before Sexton asked for backup"),
            "{id}: {why}"
        );
        // Timed by when Sexton saw it: its failed grace counts from now, not from the past.
        let at = record.completed_at.unwrap().with_timezone(&Utc);
        assert!(at > Utc::now() - chrono::Duration::minutes(5), "{id}: {at}");
    }
    let why = records["f-unsolicited"]
        .value
        .last_error
        .clone()
        .unwrap_or_default();
    assert!(why.contains("scheduler.require_due"), "{why}");
    assert_eq!(
        records[honest.as_str()].value.status,
        BackupStatus::Completed,
        "{:?}",
        records[honest.as_str()].value.last_error
    );

    // The policy's own deletion (today's honest backup and the three real days are the four
    // dailies) runs over the catalog as the attack left it.
    retention_ran_and_kept(&catalog, &store, &reals).await;
    fleet.stop().await.unwrap();
}
