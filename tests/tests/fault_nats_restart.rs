//! Scenario 2, whole NATS restart: under a steady load of schedules firing every second, the
//! single nats-server is killed with SIGKILL and started again on the same store. Every service
//! (a child process) must reconnect by itself, none may exit, all work must finish, and the
//! audit must find no tick lost or doubled, no backup lost, no delete job lost, and a catalog
//! that matches the bucket.
//!
//! CI: one kill, 5 s down. `SEXTON_SOAK=1`: three kills, 20 s down each.

use std::time::{Duration, Instant};

use serde_json::json;
use sexton_tests::{fault::*, *};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_survives_a_whole_nats_restart() {
    let mut nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let mut fleet = ProcessFleet::start(&config, 1);
    fleet.wait_ready(Duration::from_secs(120));
    let client = client(&nats.url()).await;
    let js = async_nats::jetstream::new(client.clone());

    let schedules = create_schedules(&client, "restart", 4, Duration::from_secs(1), 2).await;
    let warm_up = pick(Duration::from_secs(8), Duration::from_secs(30));
    let down_for = pick(Duration::from_secs(5), Duration::from_secs(20));
    let cycles = pick(1, 3);
    tokio::time::sleep(warm_up).await;

    let mut recoveries: Vec<serde_json::Value> = Vec::new();
    let mut restarts = Vec::new();
    for _ in 0..cycles {
        nats.server.kill();
        tokio::time::sleep(down_for).await;
        let restarted = Instant::now();
        restarts.push(now_ms());
        nats.restart();
        fleet.wait_ready(Duration::from_secs(120));
        recoveries.push(json!({ "all_ready_ms": ms(restarted.elapsed()) }));
        tokio::time::sleep(warm_up).await;
    }

    pause_all(&client, &schedules).await;
    let settled = wait_settled(&js, Duration::from_secs(180)).await;
    let exited = fleet.exited();
    let audit = audit(&js, &config, &schedules, &fleet.logs(Role::Scheduler)).await;
    for (recovery, at) in recoveries.iter_mut().zip(&restarts) {
        recovery["resumed"] = audit.resumed_after(*at);
    }
    record_figures(
        "nats-restart",
        json!({
            "faults_injected": cycles,
            "down_for_ms": ms(down_for),
            "recoveries": recoveries,
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
    audit.assert_clean(&fleet.context(&audit));
    for at in &restarts {
        let (firing, deleting) = audit.resumption(*at);
        assert!(
            firing.is_some_and(|d| d < Duration::from_secs(20))
                && deleting.is_some_and(|d| d < Duration::from_secs(20)),
            "the fleet did not resume after the restart: firing {firing:?}, deleting {deleting:?}\n{}",
            fleet.warnings(60)
        );
    }
    assert!(audit.due_ticks >= 4 * 10, "too little load: {audit:?}");
    assert!(
        audit.backups_deleted >= 4 * 5,
        "too few deletions: {audit:?}"
    );
}
