//! Scenario 1, NATS node loss: the fleet runs against a three-node JetStream cluster (streams and
//! buckets with three replicas, the services given all three URLs) under a steady load of
//! schedules firing every second, backups reported, retention and deletions. The node leading
//! the catalog bucket is killed with SIGKILL while the load goes on, a schedule is created while
//! it is down, and the node is started again later. The audit must find no due tick lost or
//! doubled, no backup or delete job lost, and a catalog that matches the bucket.
//!
//! CI: one node killed for 15 s. `SEXTON_SOAK=1`: each node in turn (the catalog's leader at
//! that moment) killed for 60 s.

use std::time::{Duration, Instant};

use serde_json::json;
use sexton_shared::topology;
use sexton_tests::{
    cluster::{self, NatsCluster},
    fault::*,
    *,
};

/// How long the fleet may stall after losing a node (leader elections take a few seconds).
const MAX_STALL: Duration = Duration::from_secs(20);

// This scenario used to leave objects of a few consecutive backups without records: the
// reference executor took a backup again when its due-backup was delivered again (a lost
// acknowledgement, or, before consumers' backoff started at ack_wait, one second in the prefetch
// buffer) after retention had deleted it, and the second report was dropped as a duplicate.
// The executor now remembers what it reported (tests/tests/fault_due_redelivery.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_survives_the_loss_of_a_nats_node() {
    let mut cluster = NatsCluster::start();
    let s3 = S3::start();
    let config = config_for(&cluster.url(), 3, &s3);
    let mut fleet = ProcessFleet::start(&config, 1);
    fleet.wait_ready(Duration::from_secs(120));
    let client = client(&cluster.url()).await;
    let js = async_nats::jetstream::new(client.clone());

    let mut schedules = create_schedules(&client, "node", 4, Duration::from_secs(1), 2).await;
    let warm_up = pick(Duration::from_secs(8), Duration::from_secs(30));
    let down_for = pick(Duration::from_secs(15), Duration::from_secs(60));
    let cycles = pick(1, 3);
    // Stalls are measured from a kill to shortly after the node is back.
    let stall_window = down_for + Duration::from_secs(4);
    tokio::time::sleep(warm_up).await;

    let mut outages: Vec<serde_json::Value> = Vec::new();
    let mut kills = Vec::new();
    for cycle in 0..cycles {
        // Kill the node leading the deleter's consumer of the first cluster's delete jobs (its
        // partition's durable) while the deleter is connected to another node: the deleter
        // must be served by the new leader without reconnecting.
        let durable = topology::delete_partition_durable(topology::partition_of(
            &schedules[0].cluster,
            topology::DELETE_PARTITIONS,
        ));
        let (leader, index) = deleter_leader_elsewhere(&cluster, &client, &js, &durable).await;
        let leaders = cluster::leaders(&js).await;
        let connections: serde_json::Map<String, serde_json::Value> = [
            "sexton-scheduler",
            "sexton-retention-worker",
            "sexton-deleter",
            "sexton-reference-executor",
        ]
        .iter()
        .map(|name| {
            let node = cluster
                .connected_node(name)
                .map(|i| cluster.nodes[i].name.clone());
            (name.to_string(), node.into())
        })
        .collect();
        let killed = Instant::now();
        kills.push(now_ms());
        cluster.kill(index);
        // The API keeps working with a node down: a new schedule joins the load.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let created = Instant::now();
        let extra = LoadSchedule {
            name: format!("node-late-{cycle}"),
            cluster: format!("node-late-c{cycle}"),
            interval: Duration::from_secs(1),
            keep_last: 2,
        };
        fault::create_schedule(&client, &extra).await;
        let api_ms = ms(created.elapsed());
        schedules.push(extra);
        if let Some(rest) = down_for.checked_sub(killed.elapsed()) {
            tokio::time::sleep(rest).await;
        }
        let restarted = Instant::now();
        cluster.restart(index);
        let caught_up = cluster.wait_caught_up(Duration::from_secs(120)).await;
        outages.push(json!({
            "killed": leader,
            "leaders_before": leaders,
            "connections_before": connections,
            "down_ms": ms(restarted - killed),
            "schedule_create_during_outage_ms": api_ms,
            "node_caught_up_ms": ms(caught_up),
        }));
        tokio::time::sleep(warm_up).await;
    }

    pause_all(&client, &schedules).await;
    let settled = wait_settled(&js, Duration::from_secs(180)).await;
    let exited = fleet.exited();
    let audit = audit(&js, &config, &schedules, &fleet.logs(Role::Scheduler)).await;
    for (outage, at) in outages.iter_mut().zip(&kills) {
        outage["stalls"] = audit.stalls_json(*at, stall_window);
    }
    record_figures(
        "nats-node-loss",
        json!({
            "faults_injected": cycles * 2,
            "outages": outages,
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
    // Losing a node costs a leader election, not the 30 s a lost pull request waits.
    for at in &kills {
        let (firing, deleting) = audit.stalls_after(*at, stall_window);
        assert!(
            firing < MAX_STALL && deleting < MAX_STALL,
            "the fleet stalled after losing a node: firing {firing:?}, deleting {deleting:?}\n{}",
            fleet.warnings(60)
        );
    }
    assert!(audit.due_ticks >= 4 * 20, "too little load: {audit:?}");
    assert!(
        audit.backups_deleted >= 4 * 15,
        "too few deletions: {audit:?}"
    );
}

/// Moves the leadership of the deleter's `durable` until it sits on a node the deleter process
/// is not connected to; returns that node's name and index.
async fn deleter_leader_elsewhere(
    cluster: &NatsCluster,
    client: &async_nats::Client,
    js: &async_nats::jetstream::Context,
    durable: &str,
) -> (String, usize) {
    for _ in 0..20 {
        let leader = cluster::consumer_leader(js, topology::STREAM_JOBS, durable).await;
        let connected = cluster.connected_node("sexton-deleter");
        if let (Some(leader), Some(connected)) = (leader, connected) {
            let index = cluster.index_of(&leader).expect("the leader is a node");
            if index != connected {
                return (leader, index);
            }
            cluster::consumer_step_down(client, topology::STREAM_JOBS, durable).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("could not place the deleter's consumer leader away from the deleter's connection");
}
