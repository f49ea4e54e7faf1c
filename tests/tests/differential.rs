//! Differentials and `keep_diff` on a real fleet (issue 30; pgBackRest's `repo-retention-diff`):
//! executors report `differential: true`, the catalog keeps it, and retention with
//! `{"keep_full": 2, "keep_diff": 1}` deletes the older differential with the incremental built
//! on it, records and objects, while both fulls and the newest differential's chain stay. A
//! report claiming a differential that is a full is refused at the door.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;
use sexton_tests::{fixtures::*, setup::Setup, *};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_diff_deletes_the_older_differential_with_what_builds_on_it() {
    let world = Setup::new(Members {
        scheduler: true,
        retention_worker: true,
        deleter: true,
        executor: false,
    })
    .start()
    .await;
    let client = async_nats::connect(world.nats.url()).await.unwrap();
    let store = object_store(&world.config).await;
    let mut policy = json!({"keep_full": 2, "keep_diff": 1});
    create_policy_schedule(&client, "nightly", "c1", "nightly", policy.take()).await;
    // Its schedule opts in to remote cleanup, so the deleter removes the objects too.
    api(
        &client,
        "schedule",
        "update",
        json!({"schema_version": 1, "name": "nightly", "remote_cleanup": true}),
    )
    .await
    .unwrap();
    // F1 ← D1 ← I1, F2 ← D2 ← I2; D1 and D2 are differentials.
    let backups = [
        (Backup::full("f1", march(1), 10), false),
        (Backup::incremental("d1", "f1", march(2), 10), true),
        (Backup::incremental("i1", "d1", march(3), 10), false),
        (Backup::full("f2", march(4), 10), false),
        (Backup::incremental("d2", "f2", march(5), 10), true),
        (Backup::incremental("i2", "d2", march(6), 10), false),
    ];
    for (backup, differential) in &backups {
        let mut report = completed_report("c1", "nightly", "nightly", backup);
        report.differential = *differential;
        publish_report(&world.js, &store, report).await;
    }
    // One more report claims a full is a differential: refused, never recorded.
    let mut forged = completed_report(
        "c1",
        "nightly",
        "nightly",
        &Backup::full("f3", march(7), 10),
    );
    forged.differential = true;
    publish_report(&world.js, &store, forged).await;

    let expected: BTreeSet<String> = ["f1", "f2", "d2", "i2"].map(String::from).into();
    eventually("d1 and i1 gone", Duration::from_secs(90), || async {
        let left: BTreeSet<String> = records_of(&world.catalog, "c1").await.into_keys().collect();
        (left == expected).then_some(())
    })
    .await;
    let records = records_of(&world.catalog, "c1").await;
    assert!(records["d2"].value.differential && !records["i2"].value.differential);
    for id in ["d1", "i1"] {
        eventually(
            &format!("{id}'s objects gone"),
            Duration::from_secs(30),
            || async {
                keys_under(&store, &format!("backups/c1/nightly/{id}/"))
                    .await
                    .is_empty()
                    .then_some(())
            },
        )
        .await;
    }
    for id in ["f1", "f2", "d2", "i2"] {
        assert!(
            !keys_under(&store, &format!("backups/c1/nightly/{id}/"))
                .await
                .is_empty(),
            "{id} keeps its objects"
        );
    }
    world.fleet.stop().await.unwrap();
}
