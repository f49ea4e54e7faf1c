//! Velero's and Kubernetes' schedule semantics, end to end on a real nats-server: pause,
//! unpause with and without skip-immediately (request, schedule, server default), creation with
//! skip-immediately, one firing after downtime, overlap, starting deadline, manual trigger,
//! update, and `describe` saying why a tick did not fire.
//!
//! Every test runs the scheduler in-process (stopping and starting it is an outage) and reads
//! what consumers see: the `SEXTON_DUE` stream and the stored schedule.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sexton_model::records::ScheduleRecord;
use sexton_schedule::CronSpec;
use sexton_shared::{api::ErrorCode, topology};
use sexton_tests::*;

struct Setup {
    nats: Nats,
    config: sexton_shared::config::Config,
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
}

async fn setup(server_skip_immediately: bool) -> Setup {
    let nats = Nats::start();
    let mut config = nats_config(&nats);
    config.scheduler.skip_immediately_default = server_skip_immediately;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    Setup {
        nats,
        config,
        client,
        js,
    }
}

impl Setup {
    async fn call(&self, verb: &str, body: Value) -> Result<Value, sexton_shared::api::ApiError> {
        let mut body = body;
        body["schema_version"] = json!(1);
        let (resource, verb) = verb.split_once('.').unwrap();
        api(&self.client, resource, verb, body).await
    }

    async fn events(&self, schedule: &str) -> Vec<DueEvent> {
        let mut events: Vec<DueEvent> = due_events(&self.js)
            .await
            .into_iter()
            .filter(|e| e.schedule == schedule)
            .collect();
        events.sort_by_key(|e| e.tick);
        events
    }

    async fn record(&self, name: &str) -> ScheduleRecord {
        schedule_record(&self.js, name)
            .await
            .expect("the schedule")
            .0
    }

    async fn wait_for_record(
        &self,
        what: &str,
        name: &str,
        check: impl Fn(&ScheduleRecord) -> bool,
    ) -> ScheduleRecord {
        let check = &check;
        eventually(what, Duration::from_secs(20), || async move {
            let (record, _) = schedule_record(&self.js, name).await?;
            check(&record).then_some(record)
        })
        .await
    }

    async fn wait_for_events(&self, what: &str, name: &str, n: usize) -> Vec<DueEvent> {
        eventually(what, Duration::from_secs(20), || async move {
            let events = self.events(name).await;
            (events.len() >= n).then_some(events)
        })
        .await
    }

    async fn describe(&self, name: &str) -> Value {
        self.call("schedule.describe", json!({"name": name}))
            .await
            .unwrap()
    }

    async fn report(&self, body: Value) {
        let mut body = body;
        body["schema_version"] = json!(1);
        self.js
            .publish(
                format!("sexton.v1.report.{}", body["cluster"].as_str().unwrap()),
                serde_json::to_vec(&body).unwrap().into(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }
}

fn schedule(name: &str, cron: &str) -> Value {
    json!({"name": name, "cluster": "c1", "plan": "full", "cron": cron})
}

fn with(mut value: Value, key: &str, field: Value) -> Value {
    value[key] = field;
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_schedule_fires_nothing_and_records_nothing() {
    let t = setup(false).await;
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    create_schedule(&t.client, schedule("s", "@every 1s")).await;
    t.wait_for_events("two firings", "s", 2).await;
    let paused = t
        .call("schedule.pause", json!({"name": "s"}))
        .await
        .unwrap();
    assert_eq!(paused["schedule"]["status"]["phase"], "paused");
    let paused_at = Utc::now();
    // A firing already under way when the pause landed may finish; then nothing.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (before, revision) = schedule_record(&t.js, "s").await.unwrap();
    let count = t.events("s").await.len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let events = t.events("s").await;
    assert_eq!(events.len(), count, "fired while paused");
    assert!(events.iter().all(|e| e.tick <= paused_at));
    assert_eq!(
        schedule_record(&t.js, "s").await.unwrap(),
        (before, revision),
        "recorded something while paused"
    );
    let described = t.describe("s").await;
    assert_eq!(described["explain"]["action"], "paused");
    assert!(described["explain"]["reason"]
        .as_str()
        .unwrap()
        .contains("nothing fires and nothing is recorded"));
    fleet.stop().await.unwrap();
}

/// Unpausing a schedule whose run came due while paused (velero 6517): with
/// `--skip-immediately=false` or no flag and the server default false it fires at once, for the
/// missed tick; with `--skip-immediately=true` it records a skip and fires at the next tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpause_fires_the_missed_run_unless_skip_immediately() {
    let t = setup(false).await;
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    let cron = CronSpec::parse("@every 3s").unwrap();
    for name in ["flag-false", "flag-true", "no-flag"] {
        create_schedule(
            &t.client,
            with(schedule(name, "@every 3s"), "paused", json!(true)),
        )
        .await;
    }
    let created = t.record("no-flag").await.created_at;
    // Paused past the first run.
    while Utc::now() < cron.next_after(created).unwrap() + chrono::Duration::milliseconds(500) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let unpaused_at = Utc::now();
    for (name, flag) in [
        ("flag-false", Some(false)),
        ("flag-true", Some(true)),
        ("no-flag", None),
    ] {
        let mut body = json!({"name": name});
        if let Some(flag) = flag {
            body["skip_immediately"] = json!(flag);
        }
        t.call("schedule.unpause", body).await.unwrap();
    }
    for name in ["flag-false", "no-flag"] {
        let events = t.wait_for_events("the missed run", name, 1).await;
        let record = t.record(name).await;
        assert_eq!(events[0].tick, cron.next_after(record.created_at).unwrap());
        assert!(
            events[0].fired_at - unpaused_at < chrono::Duration::milliseconds(1_500),
            "{name} fired at {} for an unpause at {unpaused_at}",
            events[0].fired_at
        );
    }
    let skipped = t
        .wait_for_record("the skip recorded", "flag-true", |r| {
            r.status.last_skipped.is_some()
        })
        .await;
    assert_eq!(
        skipped.status.last_skip_reason.as_deref(),
        Some("skip_immediately")
    );
    assert_eq!(
        skipped.skip_immediately, None,
        "the flag is consumed and reset"
    );
    assert!(!skipped.status.activation_pending);
    let last_skipped = skipped.status.last_skipped.unwrap();
    assert!(last_skipped >= unpaused_at);
    let next = cron.next_after(last_skipped).unwrap();
    assert_eq!(skipped.status.next_run_time, Some(next));
    let described = t.describe("flag-true").await;
    assert_eq!(
        described["schedule"]["status"]["last_skip_reason"],
        "skip_immediately"
    );
    // It fires at the next tick, not before.
    let events = t.wait_for_events("the next run", "flag-true", 1).await;
    assert_eq!(events[0].tick, next);
    fleet.stop().await.unwrap();
}

/// With the server default `true`: an unpause without a flag skips; the schedule's own `false`
/// and a request's `--skip-immediately=false` both override the default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_default_applies_only_when_neither_request_nor_schedule_says() {
    let t = setup(true).await;
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    let cron = CronSpec::parse("@every 2s").unwrap();
    create_schedule(
        &t.client,
        with(schedule("default", "@every 2s"), "paused", json!(true)),
    )
    .await;
    create_schedule(
        &t.client,
        json!({"name": "own-false", "cluster": "c1", "plan": "full", "cron": "@every 2s",
               "paused": true, "skip_immediately": false}),
    )
    .await;
    create_schedule(
        &t.client,
        with(
            schedule("request-false", "@every 2s"),
            "paused",
            json!(true),
        ),
    )
    .await;
    let created = t.record("default").await.created_at;
    while Utc::now() < cron.next_after(created).unwrap() + chrono::Duration::milliseconds(500) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let unpaused_at = Utc::now();
    t.call("schedule.unpause", json!({"name": "default"}))
        .await
        .unwrap();
    t.call("schedule.unpause", json!({"name": "own-false"}))
        .await
        .unwrap();
    t.call(
        "schedule.unpause",
        json!({"name": "request-false", "skip_immediately": false}),
    )
    .await
    .unwrap();
    for name in ["own-false", "request-false"] {
        let events = t.wait_for_events("the missed run", name, 1).await;
        assert!(events[0].fired_at - unpaused_at < chrono::Duration::milliseconds(1_500));
    }
    let skipped = t
        .wait_for_record("the default's skip", "default", |r| {
            r.status.last_skipped.is_some()
        })
        .await;
    assert_eq!(
        skipped.status.last_skip_reason.as_deref(),
        Some("skip_immediately")
    );
    // The default was not copied into the schedule (velero 10241).
    assert_eq!(skipped.skip_immediately, None);
    let first = t.wait_for_events("the next run", "default", 1).await;
    assert_eq!(
        first[0].tick,
        cron.next_after(skipped.status.last_skipped.unwrap())
            .unwrap()
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creation_with_skip_immediately_counts_runs_from_the_skip() {
    let t = setup(false).await;
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    let cron = CronSpec::parse("@every 2s").unwrap();
    create_schedule(
        &t.client,
        with(
            schedule("skip", "@every 2s"),
            "skip_immediately",
            json!(true),
        ),
    )
    .await;
    create_schedule(&t.client, schedule("plain", "@every 2s")).await;
    let skipped = t
        .wait_for_record("the creation skip", "skip", |r| {
            r.status.last_skipped.is_some()
        })
        .await;
    assert_eq!(
        skipped.status.last_skip_reason.as_deref(),
        Some("skip_immediately")
    );
    assert_eq!(skipped.skip_immediately, None);
    let first = t.wait_for_events("the first run", "skip", 1).await;
    assert_eq!(
        first[0].tick,
        cron.next_after(skipped.status.last_skipped.unwrap())
            .unwrap()
    );
    let plain = t.wait_for_events("the first run", "plain", 1).await;
    let plain_record = t.record("plain").await;
    assert_eq!(
        plain[0].tick,
        cron.next_after(plain_record.created_at).unwrap()
    );
    assert_eq!(plain_record.status.last_skipped, None);
    fleet.stop().await.unwrap();
}

/// Kubernetes 42649: a controller down for a while must neither stop the schedule nor replay
/// every missed run. One firing covers the whole missed period; the next counts from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_downtime_the_missed_period_fires_once() {
    let t = setup(false).await;
    let cron = CronSpec::parse("@every 1s").unwrap();
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    create_schedule(&t.client, schedule("s", "@every 1s")).await;
    t.wait_for_events("two firings", "s", 2).await;
    fleet.stop().await.unwrap();
    let stopped_at = Utc::now();
    let before = t.events("s").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let restarted_at = Utc::now();
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    let events = t
        .wait_for_events("firings after the outage", "s", before.len() + 2)
        .await;
    fleet.stop().await.unwrap();
    let last_before = before.last().unwrap();
    let catch_up = &events[before.len()];
    assert_eq!(
        catch_up.tick,
        cron.next_after(last_before.fired_at).unwrap(),
        "the first missed run fires"
    );
    assert!(catch_up.tick < stopped_at + chrono::Duration::seconds(2));
    assert!(catch_up.fired_at >= restarted_at);
    let missed_between = events
        .iter()
        .filter(|e| e.tick > last_before.tick && e.tick < restarted_at)
        .count();
    assert_eq!(
        missed_between, 1,
        "one firing for the missed period: {events:#?}"
    );
    let next = &events[before.len() + 1];
    assert_eq!(next.tick, cron.next_after(catch_up.fired_at).unwrap());
    assert!(next.tick > restarted_at);
}

/// A scheduler answers its API before it fires anything. An executor handed a due-backup asks
/// `backup.taken` at once, and a question nobody answers makes it take the backup without
/// knowing whether it was taken before, so a redelivered due-backup would write a deleted
/// backup's objects again. Found in `deploy/local/run`: a restarted scheduler's catch-up firing
/// went out 38 ms after start, before its API had subscribed, and the executor logged "no
/// responders".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_scheduler_answers_backup_taken_before_its_first_firing() {
    use futures::StreamExt;
    let mut t = setup(false).await;
    // A scheduler process with an object store, as it runs (intake reads the store): its
    // start-up, connecting to the store included, is what the API must not wait behind.
    let s3 = S3::start();
    t.config = config(&t.nats, &s3);
    let logs = tempfile::tempdir().unwrap();
    let mut scheduler = ServiceProcess::start("sexton-scheduler", &[], &t.config, logs.path());
    create_schedule(&t.client, schedule("s", "@every 1s")).await;
    t.wait_for_events("a firing", "s", 1).await;
    scheduler.kill();
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The executor's side: each due-backup as it is published, asked about at once.
    let cluster = sexton_model::names::ClusterName::new("c1").unwrap();
    let mut due = t
        .client
        .subscribe(sexton_shared::channels::DUES.subject(&cluster))
        .await
        .unwrap();
    t.client.flush().await.unwrap();
    scheduler.restart();
    let message = tokio::time::timeout(Duration::from_secs(30), due.next())
        .await
        .expect("the catch-up firing within 30 s")
        .expect("the subscription is open");
    let fired: sexton_model::wire::DueBackup =
        sexton_model::wire::decode(&message.payload).unwrap();
    let question = sexton_shared::api::BackupRef {
        schema_version: 1,
        cluster,
        id: fired.backup_id.clone(),
    };
    let answer = t
        .client
        .request(
            topology::api_subject("backup", "taken"),
            serde_json::to_vec(&question).unwrap().into(),
        )
        .await;
    scheduler.kill();
    let answer = answer
        .unwrap_or_else(|err| panic!("backup.taken for {} unanswered: {err}", fired.backup_id));
    let reply: sexton_shared::api::Reply = serde_json::from_slice(&answer.payload).unwrap();
    reply.into_result().expect("backup.taken answers");
}

/// Overlap policy `skip` (the default): while a backup of the schedule is in progress, a due
/// tick is recorded as skipped with the reason, and `describe` says so; `allow` keeps firing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_during_a_running_backup_is_skipped_with_the_reason() {
    let mut t = setup(false).await;
    // The completion below is checked against the bucket before it counts.
    let s3 = S3::start();
    t.config = config(&t.nats, &s3);
    let store = object_store(&t.config).await;
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    create_schedule(&t.client, schedule("skip", "@every 1s")).await;
    create_schedule(
        &t.client,
        with(
            schedule("allow", "@every 1s"),
            "overlap_policy",
            json!("allow"),
        ),
    )
    .await;
    let mut running = Vec::new();
    for name in ["skip", "allow"] {
        let first = t.wait_for_events("a first firing", name, 1).await;
        let backup_id = first[0].backup_id.clone();
        t.report(
            json!({"backup_id": backup_id, "cluster": "c1", "plan": "full",
                        "schedule": name, "backup_name": name, "status": "started",
                        "started_at": Utc::now().to_rfc3339()}),
        )
        .await;
        running.push(backup_id);
    }
    let skipped = t
        .wait_for_record("a tick skipped as an overlap", "skip", |r| {
            r.status.last_skip_reason.as_deref() == Some("in_flight")
        })
        .await;
    assert!(skipped.status.in_flight.is_some());
    let count = t.events("skip").await.len();
    let allowed = t.events("allow").await.len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        t.events("skip").await.len(),
        count,
        "fired during its backup"
    );
    assert!(
        t.events("allow").await.len() >= allowed + 2,
        "overlap policy allow stopped firing"
    );
    let described = t.describe("skip").await;
    assert_eq!(
        described["schedule"]["status"]["last_skip_reason"],
        "in_flight"
    );
    assert!(
        described["last_skip"]["explanation"]
            .as_str()
            .unwrap()
            .contains("still in progress"),
        "{described:#}"
    );
    // The backup completes: the schedule fires again.
    let mut completed = json!({"schema_version": 1, "backup_id": running[0], "cluster": "c1",
                    "plan": "full", "schedule": "skip", "backup_name": "skip",
                    "status": "completed", "completed_at": Utc::now().to_rfc3339(),
                    "artifacts": [format!("backups/c1/skip/{}/backup.xbstream", running[0])]});
    fixtures::upload_genuine_json(&store, &mut completed).await;
    t.report(completed).await;
    t.wait_for_events("firing again", "skip", count + 1).await;
    fleet.stop().await.unwrap();
}

/// Kubernetes' `startingDeadlineSeconds`: after an outage, a missed run older than the deadline
/// is skipped and recorded with the reason; with a longer deadline it fires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_run_older_than_the_starting_deadline_is_skipped() {
    let t = setup(false).await;
    let cron = CronSpec::parse("@every 4s").unwrap();
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    for (name, deadline) in [("strict", 1), ("lenient", 30)] {
        create_schedule(
            &t.client,
            with(
                schedule(name, "@every 4s"),
                "starting_deadline_seconds",
                json!(deadline),
            ),
        )
        .await;
    }
    fleet.stop().await.unwrap();
    let created = t.record("strict").await.created_at;
    let missed = cron.next_after(created).unwrap();
    // Restart 2 s after the missed run, before the one after it.
    while Utc::now() < missed + chrono::Duration::seconds(2) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    let strict = t
        .wait_for_record("the stale run skipped", "strict", |r| {
            r.status.last_skipped.is_some()
        })
        .await;
    assert_eq!(
        strict.status.last_skip_reason.as_deref(),
        Some("starting_deadline_exceeded")
    );
    let lenient = t.wait_for_events("the late run", "lenient", 1).await;
    let lenient_created = t.record("lenient").await.created_at;
    assert_eq!(lenient[0].tick, cron.next_after(lenient_created).unwrap());
    let strict_events: Vec<DateTime<Utc>> =
        t.events("strict").await.iter().map(|e| e.tick).collect();
    assert!(
        strict_events.iter().all(|tick| *tick > missed),
        "the stale run fired: {strict_events:?}"
    );
    let described = t.describe("strict").await;
    assert_eq!(
        described["schedule"]["status"]["last_skip_reason"],
        "starting_deadline_exceeded"
    );
    assert!(described["last_skip"]["explanation"]
        .as_str()
        .unwrap()
        .contains("older than the starting deadline of 1s"));
    fleet.stop().await.unwrap();
}

/// `backup create --from-schedule`: a backup now, with the schedule's settings; the schedule's
/// own timing is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_trigger_fires_now_and_leaves_the_schedule_alone() {
    let t = setup(false).await;
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    create_schedule(
        &t.client,
        with(
            schedule("nightly", "0 3 * * *"),
            "labels",
            json!({"team": "db"}),
        ),
    )
    .await;
    let (before, revision) = schedule_record(&t.js, "nightly").await.unwrap();
    let triggered = t
        .call("backup.create", json!({"name": "nightly"}))
        .await
        .unwrap();
    assert_eq!(triggered["duplicate"], false);
    let backup_id = triggered["backup_id"].as_str().unwrap().to_string();
    assert!(backup_id.starts_with("nightly-"));
    let events = t.events("nightly").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].backup_id, backup_id);
    assert!(Utc::now() - events[0].fired_at < chrono::Duration::seconds(5));
    let stored = due_events(&t.js).await;
    assert_eq!(stored.len(), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        schedule_record(&t.js, "nightly").await.unwrap(),
        (before, revision),
        "a manual backup moved the schedule"
    );
    let missing = t
        .call("backup.create", json!({"name": "ghost"}))
        .await
        .unwrap_err();
    assert_eq!(missing.code, ErrorCode::NotFound);
    // The event carries the schedule's settings.
    let messages = read_stream(&t.js, topology::STREAM_DUE, "sexton.v1.due.c1").await;
    let event: Value = serde_json::from_slice(&messages[0].payload).unwrap();
    assert_eq!(event["labels"]["team"], "db");
    assert_eq!(
        event["object_prefix"],
        format!("backups/c1/nightly/{backup_id}/")
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_moves_the_timer_and_a_bad_update_changes_nothing() {
    let t = setup(false).await;
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    create_schedule(&t.client, schedule("s", "@daily")).await;
    let refused = t
        .call(
            "schedule.update",
            json!({"name": "s", "cron": "61 * * * *"}),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Invalid);
    assert!(
        refused.message.contains("invalid cron"),
        "{}",
        refused.message
    );
    assert_eq!(t.record("s").await.cron, "@daily");
    let refused = t
        .call(
            "schedule.update",
            json!({"name": "s", "policy": {"keep_last": -3}}),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Invalid, "{}", refused.message);
    let missing = t
        .call(
            "schedule.update",
            json!({"name": "ghost", "cron": "@hourly"}),
        )
        .await
        .unwrap_err();
    assert_eq!(missing.code, ErrorCode::NotFound);
    assert!(t.events("s").await.is_empty());

    let updated = t
        .call(
            "schedule.update",
            json!({"name": "s", "cron": "@every 1s", "policy": {"keep_last": 5}}),
        )
        .await
        .unwrap();
    assert_eq!(updated["schedule"]["cron"], "@every 1s");
    assert_eq!(updated["schedule"]["policy"]["keep_last"], 5);
    let events = t.wait_for_events("firings on the new spec", "s", 2).await;
    assert!(Utc::now() - events[0].fired_at < chrono::Duration::seconds(5));
    fleet.stop().await.unwrap();
}

/// A schedule whose spec stopped parsing (written before a zone was removed, or by hand) is
/// marked with validation errors, kept, listed and explained; fixing it brings it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_that_became_invalid_is_marked_not_dropped() {
    let t = setup(false).await;
    let fleet = Fleet::start(&t.config, SCHEDULER_ONLY);
    create_schedule(&t.client, schedule("s", "@daily")).await;
    let (mut record, revision) = schedule_record(&t.js, "s").await.unwrap();
    record.cron = "CRON_TZ=Mars/Olympus_Mons 0 3 * * *".into();
    let topo = topology::ensure(&t.js, 1).await.unwrap();
    topo.schedules
        .update("s", serde_json::to_vec(&record).unwrap().into(), revision)
        .await
        .unwrap();
    let marked = t
        .wait_for_record("marked invalid", "s", |r| {
            r.status.phase == sexton_model::records::SchedulePhase::FailedValidation
        })
        .await;
    assert_eq!(marked.status.validation_errors.len(), 1);
    assert!(
        marked.status.validation_errors[0].contains("Mars/Olympus_Mons"),
        "{:?}",
        marked.status.validation_errors
    );
    let listed = t.call("schedule.list", json!({})).await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "dropped from the list");
    let described = t.describe("s").await;
    assert_eq!(described["explain"]["action"], "invalid");
    assert!(described["explain"]["error"]
        .as_str()
        .unwrap()
        .contains("Mars/Olympus_Mons"));
    // Marked once, not rewritten on every evaluation.
    let (_, marked_revision) = schedule_record(&t.js, "s").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        schedule_record(&t.js, "s").await.unwrap().1,
        marked_revision
    );

    t.call("schedule.update", json!({"name": "s", "cron": "@every 1s"}))
        .await
        .unwrap();
    t.wait_for_events("firings once fixed", "s", 1).await;
    let fixed = t
        .wait_for_record("enabled again", "s", |r| {
            r.status.phase == sexton_model::records::SchedulePhase::Enabled
        })
        .await;
    assert!(fixed.status.validation_errors.is_empty());
    fleet.stop().await.unwrap();
}
