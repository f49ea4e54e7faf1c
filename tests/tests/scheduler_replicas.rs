//! Exactly-once firing across scheduler replicas that are killed and restarted at random.
//!
//! Three `sexton-scheduler` processes share a handful of schedules that fire every second or
//! few; for a bounded time a random replica is SIGKILLed (sometimes SIGTERMed, sometimes all at
//! once) and restarted. The `SEXTON_DUE` stream must then hold every tick exactly once:
//!
//! * **no duplicate**: one message per (schedule, tick), one per backup id;
//! * **no spurious or lost tick**: with `last_backup = the firing instant` (Velero), the tick
//!   published after a firing at instant `f` must be exactly `cron.next(f)`, and the first
//!   must be `cron.next(created_at)`. A lost tick breaks this chain (the next firing counts from
//!   a state nobody published), a replayed or extra tick breaks it too;
//! * **promptly**: a tick must be stored within `SLACK` of the first instant at which some
//!   replica had been up for `GRACE` and stayed up for `SLACK` — so while at least one replica
//!   is alive nothing is late, and after all replicas were down, the missed period fires once
//!   (the chain forbids a second firing for it) as soon as one replica is back;
//! * **to the end**: the tick that should follow each schedule's last firing is not overdue.
//!
//! A backfill is held to the same standard: every tick of its interval once, across three
//! replicas of which two are SIGKILLed while it runs.
//!
//! `SEXTON_SOAK=1` runs the chaos for 10 minutes (`SEXTON_SOAK_SECS` to choose) instead of 30 s.
//! `SEXTON_CHAOS_SEED` replays a run (the seed is printed).

use std::{collections::BTreeMap, time::Duration};

use chrono::{DateTime, Utc};
use serde_json::json;
use sexton_schedule::CronSpec;
use sexton_shared::topology;
use sexton_tests::{
    setup::{Setup, World},
    *,
};

/// How long a started replica may take to connect, load the schedules and be ready to fire.
const GRACE: chrono::Duration = chrono::Duration::milliseconds(3_000);
/// How late a tick may be stored once a ready replica is up (a debug build on a busy machine).
const SLACK: chrono::Duration = chrono::Duration::milliseconds(2_500);

const SCHEDULES: &[(&str, &str)] = &[
    ("every-1s-a", "@every 1s"),
    ("every-1s-b", "@every 1s"),
    ("every-2s", "@every 2s"),
    ("every-3s", "@every 3s"),
    ("berlin-every-2s", "CRON_TZ=Europe/Berlin @every 2s"),
    ("each-minute", "* * * * *"),
];

/// One life of a replica process: `[start, end)`, `end = None` while it still runs.
type Run = (DateTime<Utc>, Option<DateTime<Utc>>);

/// When each replica was running.
#[derive(Default)]
struct Timeline {
    runs: Vec<Vec<Run>>,
}

impl Timeline {
    fn started(&mut self, replica: usize) {
        self.runs[replica].push((Utc::now(), None));
    }

    fn stopped(&mut self, replica: usize) {
        if let Some(run) = self.runs[replica].last_mut() {
            run.1.get_or_insert_with(Utc::now);
        }
    }

    /// The first instant at or after `at` from which some replica, up for `GRACE` already,
    /// stays up for `SLACK` (runs still going count as lasting until `horizon`).
    fn first_covered(&self, at: DateTime<Utc>, horizon: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.runs
            .iter()
            .flatten()
            .filter_map(|(start, end)| {
                let from = at.max(*start + GRACE);
                (from + SLACK <= end.unwrap_or(horizon)).then_some(from)
            })
            .min()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tick_is_published_exactly_once_while_replicas_are_killed() {
    let soak = std::env::var("SEXTON_SOAK").is_ok_and(|v| v == "1");
    let chaos_for = Duration::from_secs(if soak {
        std::env::var("SEXTON_SOAK_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(600)
    } else {
        30
    });
    let mut rng = Rng::from_env();
    let test_started = std::time::Instant::now();
    let nats = Nats::start();
    let config = nats_config(&nats);
    let logs = tempfile::tempdir().unwrap();
    let mut timeline = Timeline {
        runs: vec![Vec::new(); 3],
    };
    let mut replicas: Vec<ServiceProcess> = (0..3)
        .map(|replica| {
            let process = ServiceProcess::start("sexton-scheduler", &[], &config, logs.path());
            timeline.started(replica);
            process
        })
        .collect();

    eprintln!("replicas started after {:?}", test_started.elapsed());
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    for (name, cron) in SCHEDULES {
        create_schedule(
            &client,
            json!({"name": name, "cluster": "c1", "plan": "full", "cron": cron}),
        )
        .await;
    }

    eprintln!("schedules created after {:?}", test_started.elapsed());
    // The chaos: each replica is either up or down until a chosen instant.
    let started = std::time::Instant::now();
    let mut down_until: Vec<Option<std::time::Instant>> = vec![None; 3];
    let mut next_action = std::time::Instant::now() + rng.millis(300, 2_500);
    let (mut kills, mut terms, mut all_down) = (0, 0, 0);
    while started.elapsed() < chaos_for {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = std::time::Instant::now();
        for replica in 0..3 {
            if down_until[replica].is_some_and(|until| until <= now) {
                replicas[replica].restart();
                timeline.started(replica);
                down_until[replica] = None;
            }
        }
        if now < next_action {
            continue;
        }
        next_action = now + rng.millis(300, 2_500);
        let up: Vec<usize> = (0..3).filter(|r| down_until[*r].is_none()).collect();
        match rng.below(10) {
            // Everyone down at once, now and then: the "fire once for the missed period" case.
            0 if up.len() == 3 && all_down < 1 + started.elapsed().as_secs() / 20 => {
                let back = now + rng.millis(2_000, 5_000);
                for replica in 0..3 {
                    replicas[replica].kill();
                    timeline.stopped(replica);
                    down_until[replica] = Some(back + rng.millis(0, 1_000));
                }
                all_down += 1;
            }
            1 if !up.is_empty() => {
                let replica = up[rng.below(up.len() as u64) as usize];
                replicas[replica].terminate(Duration::from_secs(10));
                timeline.stopped(replica);
                down_until[replica] = Some(now + rng.millis(0, 1_500));
                terms += 1;
            }
            2..=8 if !up.is_empty() => {
                let replica = up[rng.below(up.len() as u64) as usize];
                replicas[replica].kill();
                timeline.stopped(replica);
                down_until[replica] = Some(now + rng.millis(0, 1_500));
                kills += 1;
            }
            _ => {}
        }
    }
    for replica in 0..3 {
        if down_until[replica].is_some() {
            replicas[replica].restart();
            timeline.started(replica);
        }
    }
    // Everyone up long enough for every tick due by now to be published.
    tokio::time::sleep((GRACE + SLACK).to_std().unwrap() + Duration::from_secs(1)).await;
    let horizon = Utc::now();
    let events = due_events(&js).await;
    eprintln!("events read after {:?}", test_started.elapsed());
    eprintln!(
        "{} kills, {} sigterms, {} total outages, {} due events",
        kills,
        terms,
        all_down,
        events.len()
    );
    for replica in &mut replicas {
        assert!(
            replica.is_running(),
            "a replica died by itself:\n{}",
            replica.logs()
        );
    }

    let mut problems = Vec::new();
    let mut by_schedule: BTreeMap<&str, Vec<&DueEvent>> = BTreeMap::new();
    for event in &events {
        by_schedule.entry(&event.schedule).or_default().push(event);
    }
    let distinct: std::collections::BTreeSet<(&str, DateTime<Utc>)> = events
        .iter()
        .map(|e| (e.schedule.as_str(), e.tick))
        .collect();
    let distinct_ids: std::collections::BTreeSet<&str> =
        events.iter().map(|e| e.backup_id.as_str()).collect();
    if distinct.len() != events.len() || distinct_ids.len() != events.len() {
        problems.push(format!(
            "{} messages for {} distinct (schedule, tick) pairs and {} backup ids",
            events.len(),
            distinct.len(),
            distinct_ids.len()
        ));
    }

    for (name, cron) in SCHEDULES {
        let cron = CronSpec::parse(cron).unwrap();
        let (record, _) = schedule_record(&js, name).await.expect("the schedule");
        let mut fired = by_schedule.remove(name).unwrap_or_default();
        fired.sort_by_key(|e| e.tick);
        fired.dedup_by_key(|e| e.tick);
        // The tick each firing must be for, and the firing before it.
        let mut expected = cron.next_after(record.created_at).unwrap();
        for event in &fired {
            if event.tick != expected {
                problems.push(format!(
                    "{name}: published tick {} where the chain expects {expected} \
                     (a lost, replayed or extra tick)",
                    event.tick
                ));
            }
            if let Some(covered) = timeline.first_covered(event.tick, horizon) {
                if event.stored_at > covered + SLACK {
                    problems.push(format!(
                        "{name}: tick {} stored at {}, though a replica was ready from {covered}",
                        event.tick, event.stored_at
                    ));
                }
            }
            expected = cron.next_after(event.fired_at).unwrap();
        }
        // The tick after the last firing must not be overdue.
        if let Some(covered) = timeline.first_covered(expected, horizon) {
            if covered + SLACK < horizon {
                problems.push(format!(
                    "{name}: tick {expected} was never published, though a replica was ready from {covered}"
                ));
            }
        }
        if name.starts_with("every-1s") {
            let minimum = chaos_for.as_secs() / 3;
            if (fired.len() as u64) < minimum {
                problems.push(format!(
                    "{name}: only {} firings in {chaos_for:?}",
                    fired.len()
                ));
            }
        }
    }
    if !problems.is_empty() {
        let mut logs = String::new();
        for replica in &replicas {
            logs.push_str(&replica.logs());
        }
        let tail: String = logs
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .take(50)
            .collect::<Vec<_>>()
            .join("\n");
        panic!(
            "{} problems:\n{}\nwarnings in the replicas' logs:\n{tail}",
            problems.len(),
            problems.join("\n")
        );
    }
    assert!(
        topology::DUPLICATE_WINDOW > Duration::from_secs(60),
        "outages here are far shorter than the de-duplication window"
    );
}

/// A replica that published a tick and died before recording it leaves the schedule's state
/// behind the stream. Whoever records the tick next must record the *first publication's*
/// instant: then, after an outage spanning further ticks, the missed period fires once (a
/// survivor that recorded its own clock would swallow that firing into the duplicate). The
/// same holds when the executor's `started` report for that very tick got in first: that
/// backup is this tick's, not an overlapping one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_published_by_a_replica_that_died_is_recorded_with_its_firing_instant() {
    let world = Setup::new(SCHEDULER_ONLY)
        .without_s3()
        .schedule(json!({"name": "crashed", "cluster": "c1", "plan": "full", "cron": "@every 2s"}))
        .schedule(
            json!({"name": "crashed-in-flight", "cluster": "c1", "plan": "full", "cron": "@every 2s"}),
        )
        .start()
        .await;
    let World {
        config, fleet, js, ..
    } = world;
    // Let both fire once, so their state is an ordinary "last backup" state.
    for name in ["crashed", "crashed-in-flight"] {
        eventually("a first firing", Duration::from_secs(20), || {
            let js = js.clone();
            async move {
                let (record, _) = schedule_record(&js, name).await?;
                record.status.last_backup.map(|_| ())
            }
        })
        .await;
    }
    fleet.stop().await.unwrap();
    let topo = topology::ensure(&js, 1).await.unwrap();
    let dues = topology::dues_bucket(&js, 1).await.unwrap();

    // What a replica does just before dying: publish the next tick, 10 ms after it came due.
    let mut crashed_at = BTreeMap::new();
    for name in ["crashed", "crashed-in-flight"] {
        let (mut record, revision) = schedule_record(&js, name).await.unwrap();
        let tick = record.status.next_run_time.expect("a next run");
        let fired_at = tick + chrono::Duration::milliseconds(10);
        while Utc::now() <= fired_at {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let backup_id = sexton_scheduler::timers::backup_id_for(
            &record.name,
            sexton_scheduler::timers::Asking::Scheduled,
            fired_at,
            tick,
        );
        let ack = sexton_scheduler::timers::publish_due(
            &topo,
            &dues,
            &config,
            &(&record).into(),
            &sexton_scheduler::timers::DueRequest {
                tick,
                fired_at,
                backup_id: backup_id.clone(),
                message_id: format!("due.{name}.{}", tick.timestamp_millis()),
                backfill: None,
            },
            None,
        )
        .await
        .unwrap();
        assert!(!ack.duplicate);
        if name == "crashed-in-flight" {
            // The executor's `started` report for that tick is recorded before the firing.
            record.status.in_flight = Some(sexton_model::records::InFlight {
                backup_id,
                since: fired_at,
                tick: Some(tick),
            });
            topo.schedules
                .update(name, serde_json::to_vec(&record).unwrap().into(), revision)
                .await
                .unwrap();
        }
        crashed_at.insert(name, (tick, fired_at));
    }
    // An outage spanning two more ticks.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let restarted_at = Utc::now();
    let fleet = Fleet::start(&config, SCHEDULER_ONLY);
    let cron = CronSpec::parse("@every 2s").unwrap();

    // "crashed": the published tick is recorded as fired at its instant, then the missed period
    // fires once, for the tick after that instant.
    let (tick, fired_at) = crashed_at["crashed"];
    let catch_up = cron.next_after(fired_at).unwrap();
    let events = eventually(
        "the missed period's firing",
        Duration::from_secs(20),
        || {
            let js = js.clone();
            async move {
                let events: Vec<DueEvent> = due_events(&js)
                    .await
                    .into_iter()
                    .filter(|e| e.schedule == "crashed" && e.tick >= tick)
                    .collect();
                (events.len() >= 2).then_some(events)
            }
        },
    )
    .await;
    assert_eq!(events[0].tick, tick);
    assert_eq!(events[0].fired_at, fired_at);
    assert_eq!(
        events[1].tick, catch_up,
        "after the outage the missed period fires once, counted from the real firing"
    );
    assert!(events[1].fired_at >= restarted_at);
    if let Some(third) = events.get(2) {
        assert_eq!(third.tick, cron.next_after(events[1].fired_at).unwrap());
    }

    // "crashed-in-flight": the tick is recorded as fired (not skipped as an overlap with
    // itself); the next, missed tick is then skipped because that backup is still running.
    let (tick, fired_at) = crashed_at["crashed-in-flight"];
    let record = eventually(
        "the in-flight tick recorded",
        Duration::from_secs(20),
        || {
            let js = js.clone();
            async move {
                let (record, _) = schedule_record(&js, "crashed-in-flight").await?;
                (record.status.last_skip_reason.as_deref() == Some("in_flight")).then_some(record)
            }
        },
    )
    .await;
    assert_eq!(record.status.last_fired_tick, Some(tick));
    assert_eq!(record.status.last_backup, Some(fired_at));
    assert!(record.status.last_skipped.unwrap() >= restarted_at);
    let later: Vec<DueEvent> = due_events(&js)
        .await
        .into_iter()
        .filter(|e| e.schedule == "crashed-in-flight" && e.tick > tick)
        .collect();
    assert!(
        later.is_empty(),
        "nothing fires while its backup runs: {later:?}"
    );
    fleet.stop().await.unwrap();
}

/// `sexton schedule backfill` across three scheduler processes, two of them SIGKILLed while it
/// runs (each restarted): every tick of the interval is published exactly once, under one
/// backup id each, and the backfill's record says it is done. The schedule is paused, so every
/// event in the stream is the backfill's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_fires_each_tick_exactly_once_while_replicas_are_killed() {
    let nats = Nats::start();
    let config = nats_config(&nats);
    let logs = tempfile::tempdir().unwrap();
    let mut replicas: Vec<ServiceProcess> = (0..3)
        .map(|_| ServiceProcess::start("sexton-scheduler", &[], &config, logs.path()))
        .collect();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    create_schedule(
        &client,
        json!({"name": "bf", "cluster": "c1", "plan": "full", "cron": "* * * * *",
               "paused": true}),
    )
    .await;
    // The 1,000 minutes before the last whole minute: the most one backfill takes.
    let to = DateTime::from_timestamp(Utc::now().timestamp() / 60 * 60, 0).unwrap();
    let from = to - chrono::Duration::minutes(1_000);
    let expected: Vec<DateTime<Utc>> = (0..1_000)
        .map(|n| from + chrono::Duration::minutes(n))
        .collect();
    let reply = api(
        &client,
        "schedule",
        "backfill",
        json!({"schema_version": 1, "name": "bf", "from": from, "to": to, "overlap": "allow"}),
    )
    .await
    .unwrap();
    assert_eq!(reply["backfill"]["ticks"], 1_000);

    // Kill one replica after a tenth of the ticks, another after a third; both come back.
    for (victim, after) in [(0usize, 100usize), (1, 333)] {
        let seen = eventually(
            &format!("{after} backfill ticks"),
            Duration::from_secs(120),
            || {
                let js = js.clone();
                async move {
                    let n = due_events(&js).await.len();
                    (n >= after).then_some(n)
                }
            },
        )
        .await;
        let (record, _) = schedule_record(&js, "bf").await.unwrap();
        let done = record.status.backfill.as_ref().map_or(0, |b| b.done);
        assert!(
            done < 1_000,
            "the backfill finished before the kill ({seen} events): make it longer"
        );
        replicas[victim].kill();
        eprintln!("killed replica {victim} after {seen} events ({done} ticks recorded done)");
        tokio::time::sleep(Duration::from_millis(700)).await;
        replicas[victim].restart();
    }
    let record = eventually("the backfill done", Duration::from_secs(180), || {
        let js = js.clone();
        async move {
            let (record, _) = schedule_record(&js, "bf").await?;
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
    let backfill = record.status.backfill.unwrap();
    assert_eq!((backfill.done, backfill.fired), (1_000, 1_000));
    assert_eq!(
        record.status.last_backup, None,
        "a backfill is not the schedule's own run"
    );

    let events = due_events(&js).await;
    let mut ticks: Vec<DateTime<Utc>> = events.iter().map(|e| e.tick).collect();
    ticks.sort();
    let ids: std::collections::BTreeSet<&str> =
        events.iter().map(|e| e.backup_id.as_str()).collect();
    assert_eq!(events.len(), 1_000, "one event per tick, no more");
    assert_eq!(ticks, expected, "every tick of the interval, once");
    assert_eq!(ids.len(), 1_000, "one backup id per tick");
    for event in &events {
        assert_eq!(event.backfill, Some(backfill.id));
        let stamp = |t: DateTime<Utc>| t.format("%Y%m%d%H%M%S").to_string();
        assert_eq!(
            event.backup_id,
            format!(
                "bf-{}-backfill-{}",
                stamp(event.fired_at),
                stamp(event.tick)
            )
        );
    }
    for replica in &mut replicas {
        assert!(
            replica.is_running(),
            "a replica died by itself:\n{}",
            replica.logs()
        );
    }
    let duplicates: usize = replicas
        .iter()
        .map(|r| r.logs().matches("backfill tick already published").count())
        .sum();
    eprintln!("{duplicates} publications were de-duplicated by the stream");
}
