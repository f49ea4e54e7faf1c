//! A due-backup delivered again after its backup was taken, recorded and deleted.
//!
//! JetStream delivers at least once: an executor's acknowledgement can be lost (the node leading
//! its consumer dies in between, as in the node-loss scenario), and a message can wait in the
//! client's prefetch buffer past its ack wait (before consumers started their backoff at
//! ack_wait, that wait was one second). The executor then sees the same due-backup again — by
//! then retention may have deleted the backup. Taking it a second time rewrote its objects, and
//! the second report was dropped by the report stream's de-duplication, so the objects stayed
//! with no catalog record: what the node-loss scenario found (objects of a few consecutive
//! backups, their records removed by the deleter after a proper `deleting` claim).
//!
//! The test delivers the due-backup of a deleted backup to the executor again (published anew,
//! which is what a redelivery looks like to it) and requires the audit to find nothing: no
//! object without a record, no backup lost.

use std::time::Duration;

use async_nats::jetstream::{self, message::PublishMessage};
use sexton_shared::topology;
use sexton_tests::{fault::*, *};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_backup_delivered_again_after_its_deletion_leaves_no_orphan() {
    delivered_again_after_deletion(false).await
}

/// The same, to an executor that does not remember taking it (restarted, or another replica
/// after the first died before acknowledging): it asks the catalog (`backup.taken`), which
/// still knows the backup was taken and deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_executor_does_not_take_a_deleted_backup_again() {
    delivered_again_after_deletion(true).await
}

async fn delivered_again_after_deletion(restart_executor: bool) {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let mut fleet = ProcessFleet::start(&config, 1);
    fleet.wait_ready(Duration::from_secs(120));
    let client = client(&nats.url()).await;
    let js = jetstream::new(client.clone());
    let schedules = create_schedules(&client, "again", 1, Duration::from_secs(1), 1).await;
    let catalog = topology::ensure(&js, 1).await.expect("topology").catalog;

    // The first due-backup, once its backup has been taken, recorded and deleted.
    let first = loop {
        let due = read_stream(&js, topology::STREAM_DUE, ">").await;
        if let Some(message) = due.first() {
            break message.clone();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let event: serde_json::Value = serde_json::from_slice(&first.payload).expect("due event");
    let key = format!(
        "{}.{}",
        event["cluster"].as_str().unwrap(),
        event["backup_id"].as_str().unwrap()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let entry = catalog.entry(key.as_str()).await.expect("catalog read");
        if entry.is_some_and(|e| e.operation != jetstream::kv::Operation::Put) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "backup {key} not deleted within 60 s\n{}",
            fleet.warnings(40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    if restart_executor {
        for executor in fleet.of(Role::Executor) {
            executor.process.restart();
        }
        fleet.wait_ready(Duration::from_secs(60));
    }
    // The same due-backup reaches the executor again.
    js.send_publish(
        first.subject.to_string(),
        PublishMessage::build()
            .payload(first.payload.clone())
            .message_id(format!("again.{key}")),
    )
    .await
    .expect("publishing the due-backup again")
    .await
    .expect("stored");
    // Let the pipeline run on a few more ticks, then drain.
    tokio::time::sleep(Duration::from_secs(3)).await;
    pause_all(&client, &schedules).await;
    let settled = wait_settled(&js, Duration::from_secs(120)).await;
    assert!(settled.is_some(), "the fleet did not settle");

    // The duplicate in the stream is ours, not the scheduler's: the audit counts ticks by
    // schedule, so take it out before auditing.
    let due = read_stream(&js, topology::STREAM_DUE, ">").await;
    let replayed = due
        .iter()
        .filter(|m| m.payload == first.payload)
        .filter_map(|m| m.info().ok().map(|i| i.stream_sequence))
        .max()
        .expect("the replayed due-backup");
    js.get_stream(topology::STREAM_DUE)
        .await
        .expect("due stream")
        .delete_message(replayed)
        .await
        .expect("removing the replayed due-backup");

    let audit = audit(&js, &config, &schedules, &fleet.logs(Role::Scheduler)).await;
    let executor = fleet.logs(Role::Executor);
    let id = event["backup_id"].as_str().unwrap();
    let takes = executor
        .lines()
        .filter(|l| l.contains("backup taken and reported") && l.contains(id))
        .count();
    audit.assert_clean(&fleet.context(&audit));
    assert_eq!(takes, 1, "backup {id} taken {takes} times");
    assert!(fleet.exited().is_empty(), "services exited");
}
