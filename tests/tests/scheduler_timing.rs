//! Scheduling for fleets, end to end on a real nats-server (issue 19): the jitter offset and
//! `@daily-random` are the same on every replica and after a restart; blackout windows skip or
//! defer live runs; a backup id carries the instant the backup was asked for while the event
//! keeps the nominal tick.
//!
//! The schedulers run in-process; two fleets on one server are two replicas, and stopping
//! and starting them is a restart.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sexton_schedule::spread::{jitter_offset_seconds, resolve_random_descriptor};
use sexton_tests::{
    setup::{Setup, World},
    *,
};

struct Replicas {
    fleets: Vec<Fleet>,
}

impl Replicas {
    fn start(config: &sexton_shared::config::Config, n: usize) -> Replicas {
        Replicas {
            fleets: (0..n)
                .map(|_| Fleet::start(config, SCHEDULER_ONLY))
                .collect(),
        }
    }

    async fn stop(self) {
        for fleet in self.fleets {
            fleet.stop().await.unwrap();
        }
    }
}

async fn call(client: &async_nats::Client, verb: &str, body: Value) -> Value {
    let mut body = body;
    body["schema_version"] = json!(1);
    let (resource, verb) = verb.split_once('.').unwrap();
    api(client, resource, verb, body)
        .await
        .unwrap_or_else(|e| panic!("{verb}: {e}"))
}

async fn events_of(js: &async_nats::jetstream::Context, schedule: &str) -> Vec<DueEvent> {
    let mut events: Vec<DueEvent> = due_events(js)
        .await
        .into_iter()
        .filter(|e| e.schedule == schedule)
        .collect();
    events.sort_by_key(|e| e.tick);
    events
}

async fn wait_for_events(
    js: &async_nats::jetstream::Context,
    schedule: &str,
    n: usize,
) -> Vec<DueEvent> {
    eventually(
        &format!("{n} firings of {schedule}"),
        Duration::from_secs(40),
        || async move {
            let events = events_of(js, schedule).await;
            (events.len() >= n).then_some(events)
        },
    )
    .await
}

/// The id of a scheduled backup: the schedule and the second it was asked for.
fn id_at(schedule: &str, fired_at: DateTime<Utc>) -> String {
    format!("{schedule}-{}", fired_at.format("%Y%m%d%H%M%S"))
}

/// Each firing is due `offset` after its nominal tick and fires promptly then; its backup id
/// names the firing, not the tick.
fn check_firings(events: &[DueEvent], offset: i64) {
    for event in events {
        let after_tick = (event.fired_at - event.tick).num_milliseconds();
        assert!(
            after_tick >= offset * 1_000 && after_tick < offset * 1_000 + 2_000,
            "{} fired {after_tick} ms after its tick {}, expected the offset {offset}s: {events:?}",
            event.backup_id,
            event.tick
        );
        assert_eq!(event.backup_id, id_at(&event.schedule, event.fired_at));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jitter_and_random_descriptors_are_the_same_on_every_replica_and_after_a_restart() {
    let nats = Nats::start();
    let config = nats_config(&nats);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    // A name whose offset within 6 s is clearly not zero.
    let jittered = (0..100)
        .map(|n| format!("spread-{n}"))
        .find(|name| (2..=5).contains(&jitter_offset_seconds(name, 6)))
        .unwrap();
    let offset = jitter_offset_seconds(&jittered, 6) as i64;

    let replicas = Replicas::start(&config, 2);
    create_schedule(
        &client,
        json!({"name": jittered, "cluster": "c1", "plan": "full", "cron": "@every 8s",
               "jitter": "6s"}),
    )
    .await;
    let created = create_schedule(
        &client,
        json!({"name": "nightly-random", "cluster": "c1", "plan": "full",
               "cron": "CRON_TZ=Europe/Berlin @daily-random", "jitter": "1h"}),
    )
    .await;
    let drawn =
        resolve_random_descriptor("CRON_TZ=Europe/Berlin @daily-random", "nightly-random").unwrap();
    assert_eq!(created["timing"]["cron"], json!(drawn));
    let expected_offset = jitter_offset_seconds("nightly-random", 3_600);

    // Whichever replica answers (a queue group), the same offset and the same drawn spec.
    let same_everywhere = |described: &Value, offset: u64, cron: Option<&str>| {
        assert_eq!(
            described["timing"]["offset_seconds"],
            json!(offset),
            "{described}"
        );
        if let Some(cron) = cron {
            assert_eq!(described["timing"]["cron"], json!(cron), "{described}");
        }
    };
    for _ in 0..6 {
        let described = call(&client, "schedule.describe", json!({"name": jittered})).await;
        same_everywhere(&described, offset as u64, None);
        let described = call(
            &client,
            "schedule.describe",
            json!({"name": "nightly-random"}),
        )
        .await;
        same_everywhere(&described, expected_offset, Some(&drawn));
    }
    let before = wait_for_events(&js, &jittered, 2).await;
    check_firings(&before, offset);
    replicas.stop().await;

    // A restart: new processes, nothing in memory.
    let replicas = Replicas::start(&config, 2);
    let n = before.len();
    let after = wait_for_events(&js, &jittered, n + 2).await;
    check_firings(&after, offset);
    for _ in 0..4 {
        let described = call(
            &client,
            "schedule.describe",
            json!({"name": "nightly-random"}),
        )
        .await;
        same_everywhere(&described, expected_offset, Some(&drawn));
        // The next run is the drawn time plus the offset.
        let next: DateTime<Utc> =
            serde_json::from_value(described["timing"]["upcoming"][0]["at"].clone()).unwrap();
        let nominal: DateTime<Utc> =
            serde_json::from_value(described["timing"]["upcoming"][0]["nominal"].clone()).unwrap();
        assert_eq!((next - nominal).num_seconds(), expected_offset as i64);
    }
    replicas.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_blackout_skips_runs_or_defers_them_to_its_end() {
    let nats = Nats::start();
    let config = nats_config(&nats);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let fleet = Fleet::start(&config, SCHEDULER_ONLY);
    // A calendar window from an hour ago to 10 s from now, in a named zone.
    let end = Utc::now() + chrono::Duration::seconds(10);
    let end = DateTime::from_timestamp(end.timestamp(), 0).unwrap();
    let window = json!([{"from": (end - chrono::Duration::hours(1)).to_rfc3339(),
                         "to": end.to_rfc3339(), "zone": "Europe/Berlin"}]);
    for (name, on_blackout) in [("skipping", "skip"), ("deferring", "defer")] {
        create_schedule(
            &client,
            json!({"name": name, "cluster": "c1", "plan": "full", "cron": "@every 2s",
                   "exclude": window, "on_blackout": on_blackout}),
        )
        .await;
    }
    // Inside the window: the skipping schedule records its skips and why; the deferring one
    // says it waits for the end.
    let skipped = eventually("a blackout skip", Duration::from_secs(20), || async {
        let (record, _) = schedule_record(&js, "skipping").await?;
        (record.status.last_skip_reason.as_deref() == Some("blackout")).then_some(record)
    })
    .await;
    assert!(skipped.status.last_skipped.is_some());
    let described = call(&client, "schedule.describe", json!({"name": "skipping"})).await;
    assert_eq!(described["last_skip"]["reason"], "blackout");
    let described = call(&client, "schedule.describe", json!({"name": "deferring"})).await;
    assert_eq!(
        described["explain"]["reason_code"], "blackout_deferred",
        "{described}"
    );
    assert_eq!(described["explain"]["next_run_after"], json!(end));
    assert!(Utc::now() < end, "the machine was too slow for the window");

    // After the window both fire; nothing fired inside it.
    let skipping = wait_for_events(&js, "skipping", 2).await;
    let deferring = wait_for_events(&js, "deferring", 2).await;
    for event in skipping.iter().chain(&deferring) {
        assert!(
            event.fired_at >= end,
            "fired inside the blackout: {event:?}"
        );
    }
    // The deferred run fires at the end, once, under the tick it was due for (inside the
    // window); the next run counts from that firing.
    let first = &deferring[0];
    assert!(first.tick < end, "{first:?}");
    assert!(
        first.fired_at - end < chrono::Duration::milliseconds(1_500),
        "{first:?}"
    );
    assert!(deferring[1].tick > first.fired_at, "{deferring:?}");
    // The skipping schedule's first run after the window is an ordinary tick after it.
    assert!(
        skipping[0].tick >= end - chrono::Duration::seconds(2),
        "{skipping:?}"
    );
    fleet.stop().await.unwrap();
}

/// Issue 19's example: after an unpause the backup was named after the first missed tick, so
/// an id no longer told when the backup was taken. The event still carries that tick; the id
/// names the firing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_unpause_the_backup_is_named_after_its_firing_and_keeps_its_tick() {
    let world = Setup::new(SCHEDULER_ONLY)
        .without_s3()
        .schedule(
            json!({"name": "s1", "cluster": "c1", "plan": "full", "cron": "@every 2s",
                   "paused": true}),
        )
        .start()
        .await;
    let World {
        fleet, client, js, ..
    } = world;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let unpaused_at = Utc::now();
    call(&client, "schedule.unpause", json!({"name": "s1"})).await;
    let events = wait_for_events(&js, "s1", 1).await;
    let first = &events[0];
    assert!(
        first.tick < unpaused_at - chrono::Duration::seconds(2),
        "{first:?}"
    );
    assert!(first.fired_at >= unpaused_at, "{first:?}");
    assert_eq!(first.backup_id, id_at("s1", first.fired_at));
    assert_ne!(first.backup_id, id_at("s1", first.tick));
    fleet.stop().await.unwrap();
}
