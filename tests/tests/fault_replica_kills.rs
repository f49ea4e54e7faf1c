//! Scenario 4, replica kills: three replicas of every service (scheduler, retention-worker,
//! deleter, reference executor) as child processes under a steady load of schedules firing
//! every second. At random moments one replica of each service is killed with SIGKILL and
//! started again a few seconds later. The audit must then find what scenario 1 requires: no
//! due tick lost or doubled, no backup or delete job lost, and a catalog that matches the
//! bucket.
//!
//! CI: two rounds (one kill per service in each 15 s window). `SEXTON_SOAK=1`: six rounds of
//! 45 s.
//! `SEXTON_SEED=<n>` replays the kill times of an earlier run (the figures print the seed).

use std::time::{Duration, Instant};

use serde_json::json;
use sexton_tests::{fault::*, *};

/// A small deterministic generator, so a failing run can be replayed from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_survives_replica_kills() {
    let seed = std::env::var("SEXTON_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| now_ms() as u64 | 1);
    let mut rng = Rng(seed);
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let mut fleet = ProcessFleet::start(&config, 3);
    fleet.wait_ready(Duration::from_secs(180));
    let client = client(&nats.url()).await;
    let js = async_nats::jetstream::new(client.clone());

    let schedules = create_schedules(&client, "kill", 6, Duration::from_secs(1), 2).await;
    let rounds = pick(2, 6);
    let window = pick(Duration::from_secs(15), Duration::from_secs(45));
    tokio::time::sleep(Duration::from_secs(6)).await;

    // Each round: one replica of each service killed at a random moment of the window, and
    // started again 1 to 5 s later.
    let mut kills = Vec::new();
    for round in 0..rounds {
        let mut plan: Vec<(Duration, Duration, Role, usize)> = Role::ALL
            .iter()
            .map(|role| {
                let at = Duration::from_millis(rng.below(window.as_millis() as u64 - 5000));
                let down = Duration::from_millis(1000 + rng.below(4000));
                (at, down, *role, rng.below(3) as usize)
            })
            .collect();
        plan.sort_by_key(|p| p.0);
        let started = Instant::now();
        let mut down: Vec<(Instant, Role, usize)> = Vec::new();
        let mut next = 0;
        while next < plan.len() || !down.is_empty() {
            let now = started.elapsed();
            if next < plan.len() && plan[next].0 <= now {
                let (at, for_, role, index) = plan[next];
                let replica = fleet
                    .of(role)
                    .find(|r| r.index == index)
                    .expect("the replica exists");
                replica.process.kill();
                down.push((Instant::now() + for_, role, index));
                kills.push(json!({
                    "round": round, "service": role.name(), "replica": index,
                    "at_ms": ms(at), "down_ms": ms(for_),
                }));
                next += 1;
            }
            down.retain(|(until, role, index)| {
                if Instant::now() < *until {
                    return true;
                }
                let replica = fleet
                    .of(*role)
                    .find(|r| r.index == *index)
                    .expect("the replica exists");
                replica.process.restart();
                false
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some(rest) = window.checked_sub(started.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(4)).await;

    pause_all(&client, &schedules).await;
    let settled = wait_settled(&js, Duration::from_secs(180)).await;
    let exited = fleet.exited();
    let audit = audit(&js, &config, &schedules, &fleet.logs(Role::Scheduler)).await;
    record_figures(
        "replica-kills",
        json!({
            "seed": seed,
            "replicas_per_service": 3,
            "faults_injected": kills.len(),
            "kills": kills,
            "settled_after_pause_ms": settled.map(ms),
            "services_exited": exited.len(),
            "audit": audit,
        }),
    );
    assert!(exited.is_empty(), "services exited: {exited:#?}");
    assert!(
        settled.is_some(),
        "the fleet did not settle\n{}",
        fleet.warnings(60)
    );
    audit.assert_clean(&format!("seed {seed}\n{}", fleet.context(&audit)));
    assert_eq!(kills.len(), 4 * rounds);
    assert!(audit.due_ticks >= 6 * 20, "too little load: {audit:?}");
    assert!(
        audit.backups_deleted >= 6 * 15,
        "too few deletions: {audit:?}"
    );
}
