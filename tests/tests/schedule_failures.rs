//! Issue 19, end to end with the reference executor: a schedule pauses after
//! `pause_after_failures` consecutive failed backups (with an incident), unpausing resets the
//! count; and a backfill with overlap `skip` takes one backup at a time, each recorded with the
//! nominal tick it was for.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use sexton_model::{
    names::ClusterName,
    records::{BackupRecord, BackupStatus, SchedulePhase},
};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{
    setup::{Setup, World},
    *,
};

/// The reference executor fails every backup of a schedule without volumes that carries this
/// annotation with `*`.
const FAIL: &str = "sexton.io/executor-fail-volumes";

async fn backups_of(catalog: &Catalog, schedule: &str) -> Vec<BackupRecord> {
    let cluster = ClusterName::new("c1").unwrap();
    catalog
        .list_cluster(&cluster)
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.value)
        .filter(|r| r.schedule.as_ref().is_some_and(|s| s.as_str() == schedule))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_pauses_after_n_consecutive_failures_and_unpausing_resets_the_count() {
    let world = Setup::new(Members::ALL)
        .schedule(
            json!({"name": "flaky", "cluster": "c1", "plan": "full", "cron": "@every 2s",
                   "annotations": {FAIL: "*"}, "pause_after_failures": 3}),
        )
        .start()
        .await;
    let World {
        fleet,
        client,
        js,
        catalog,
        ..
    } = world;

    let paused = eventually("the schedule paused", Duration::from_secs(90), || {
        let js = js.clone();
        async move {
            let (record, _) = schedule_record(&js, "flaky").await?;
            record.paused.then_some(record)
        }
    })
    .await;
    assert_eq!(paused.status.phase, SchedulePhase::Paused);
    // A tick published before the pause may still fail afterwards and count on.
    assert!(
        paused.status.consecutive_failures >= 3,
        "{:?}",
        paused.status
    );
    let reason = paused.status.paused_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("paused after 3 consecutive failed backups"),
        "{reason}"
    );
    let failed = backups_of(&catalog, "flaky").await;
    assert!(failed.len() >= 3, "{failed:?}");
    assert!(failed.iter().all(|b| b.status == BackupStatus::Failed));

    // One incident says so, naming the schedule and the failure that paused it.
    let incidents = eventually("the incident", Duration::from_secs(20), || {
        let js = js.clone();
        async move {
            let incidents: Vec<serde_json::Value> =
                read_stream(&js, topology::STREAM_EVENTS, "sexton.v1.event.incident.c1")
                    .await
                    .iter()
                    .map(|m| serde_json::from_slice(&m.payload).unwrap())
                    .filter(|i: &serde_json::Value| i["kind"] == "schedule-paused-after-failures")
                    .collect();
            (!incidents.is_empty()).then_some(incidents)
        }
    })
    .await;
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    let text = incidents[0]["reason"].as_str().unwrap_or_default();
    assert!(text.starts_with("schedule flaky: paused after 3"), "{text}");
    assert!(text.contains("upload failed"), "{text}");

    // Nothing fires while it is paused, and describe says why it is paused.
    let fired = due_events(&js).await.len();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        due_events(&js).await.len(),
        fired,
        "a paused schedule fired"
    );
    let described = api(
        &client,
        "schedule",
        "describe",
        json!({"schema_version": 1, "name": "flaky"}),
    )
    .await
    .unwrap();
    assert_eq!(
        described["schedule"]["status"]["paused_reason"],
        json!(reason)
    );

    // Mend the executor's side and unpause: the count starts afresh, backups complete.
    api(
        &client,
        "schedule",
        "update",
        json!({"schema_version": 1, "name": "flaky", "annotations": {}}),
    )
    .await
    .unwrap();
    let unpaused = api(
        &client,
        "schedule",
        "unpause",
        json!({"schema_version": 1, "name": "flaky"}),
    )
    .await
    .unwrap();
    assert_eq!(
        unpaused["schedule"]["status"]["consecutive_failures"],
        json!(null)
    );
    assert_eq!(unpaused["schedule"]["status"]["paused_reason"], json!(null));
    let completed = eventually("a completed backup", Duration::from_secs(60), || {
        let catalog = catalog.clone();
        async move {
            let backups = backups_of(&catalog, "flaky").await;
            backups
                .into_iter()
                .find(|b| b.status == BackupStatus::Completed)
        }
    })
    .await;
    assert_eq!(
        completed
            .tick
            .map(|t| t <= completed.completed_at.unwrap().with_timezone(&Utc)),
        Some(true),
        "the record keeps its nominal tick"
    );
    let (record, _) = schedule_record(&js, "flaky").await.unwrap();
    assert!(!record.paused);
    assert_eq!(record.status.consecutive_failures, 0);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_with_overlap_skip_takes_one_backup_at_a_time() {
    // Paused: a backfill is an explicit request and runs anyway; the schedule's own runs do not.
    let world = Setup::new(Members::ALL)
        .schedule(
            json!({"name": "hourly", "cluster": "c1", "plan": "full", "cron": "0 * * * *",
                   "paused": true, "policy": {"keep_last": 10}}),
        )
        .start()
        .await;
    let World {
        fleet,
        client,
        js,
        catalog,
        ..
    } = world;
    let to = DateTime::from_timestamp(Utc::now().timestamp() / 3_600 * 3_600, 0).unwrap();
    let from = to - chrono::Duration::hours(6);
    let reply = api(
        &client,
        "schedule",
        "backfill",
        json!({"schema_version": 1, "name": "hourly", "from": from, "to": to,
               "overlap": "skip"}),
    )
    .await
    .unwrap();
    assert_eq!(reply["backfill"]["ticks"], 6);
    // A second backfill while one runs is refused.
    let again = api(
        &client,
        "schedule",
        "backfill",
        json!({"schema_version": 1, "name": "hourly", "from": from, "to": to}),
    )
    .await;
    assert!(
        again
            .as_ref()
            .is_err_and(|e| e.message.contains("still backfilling")),
        "{again:?}"
    );

    let backups = eventually("six backfilled backups", Duration::from_secs(90), || {
        let catalog = catalog.clone();
        async move {
            let backups = backups_of(&catalog, "hourly").await;
            (backups.len() == 6 && backups.iter().all(|b| b.status == BackupStatus::Completed))
                .then_some(backups)
        }
    })
    .await;
    let mut backups = backups;
    backups.sort_by_key(|b| b.started_at);
    let ticks: Vec<DateTime<Utc>> = backups.iter().filter_map(|b| b.tick).collect();
    let expected: Vec<DateTime<Utc>> = (0..6).map(|n| from + chrono::Duration::hours(n)).collect();
    assert_eq!(
        ticks, expected,
        "each tick once, in order, kept on its record"
    );
    for pair in backups.windows(2) {
        assert!(
            pair[1].started_at >= pair[0].completed_at,
            "{} started before {} completed",
            pair[1].id,
            pair[0].id
        );
    }
    for backup in &backups {
        assert!(backup.id.as_str().contains("-backfill-"), "{}", backup.id);
    }
    let record = eventually("the backfill done", Duration::from_secs(20), || {
        let js = js.clone();
        async move {
            let (record, _) = schedule_record(&js, "hourly").await?;
            record
                .status
                .backfill
                .as_ref()?
                .finished_at
                .is_some()
                .then_some(record)
        }
    })
    .await;
    assert!(record.paused);
    assert_eq!(record.status.last_backup, None);
    fleet.stop().await.unwrap();
}
