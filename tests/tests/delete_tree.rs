//! `sexton backup delete ID --with-dependents` (issue 30; pgBackRest's `expire --set`,
//! barman's `delete`) with the real binary against a real fleet (NATS, SeaweedFS, scheduler,
//! retention-worker, deleter): the backup and every backup that builds on it go together,
//! records and objects; a held dependent refuses the whole delete; the last full backup of a
//! plan is never deleted this way; a dry run names what would go and changes nothing;
//! `--oldest` (barman's `delete SERVER oldest`) picks the oldest set and is judged the same.

mod support;

use std::path::Path;
use std::time::Duration;

use sexton_tests::{fixtures::*, setup::Setup, *};
use support::*;

async fn sexton(nats_url: &str, dir: &Path, args: &[&str]) -> CliRun {
    sexton_against(nats_url, Some(dir), args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_goes_with_what_builds_on_it_or_not_at_all() {
    let world = Setup::new(Members {
        scheduler: true,
        retention_worker: true,
        deleter: true,
        executor: false,
    })
    .start()
    .await;
    let url = world.nats.url();
    let url = url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    eventually("the scheduler api", Duration::from_secs(30), || async {
        (sexton(url, root, &["schedule", "list"]).await.code == 0).then_some(())
    })
    .await;
    // Retention keeps everything here: only the user deletes.
    sexton(
        url,
        root,
        &[
            "schedule",
            "create",
            "nightly",
            "--cluster",
            "c1",
            "--plan",
            "nightly",
            "--cron",
            "0 3 * * *",
            "--keep-last",
            "50",
            "--minimum-redundancy",
            "2",
            "--paused",
        ],
    )
    .await
    .expect(0, "schedule create");
    // f1 ← i2 ← i3, f1 ← d4 (a second branch), f5 ← i6.
    let store = object_store(&world.config).await;
    let backups = [
        Backup::full("f1", march(1), 10),
        Backup::incremental("i2", "f1", march(2), 10),
        Backup::incremental("i3", "i2", march(3), 10),
        Backup::incremental("d4", "f1", march(4), 10),
        Backup::full("f5", march(5), 10),
        Backup::incremental("i6", "f5", march(6), 10),
    ];
    for backup in &backups {
        report_backup(&world.js, &store, "c1", "nightly", "nightly", backup).await;
    }
    wait_for_completed(&world.catalog, "c1", 6).await;
    let objects = |id: &'static str| {
        let store = store.clone();
        async move { keys_under(&store, &format!("backups/c1/nightly/{id}/")).await }
    };
    for backup in &backups {
        let id: &'static str = Box::leak(backup.id.clone().into_boxed_str());
        assert!(!objects(id).await.is_empty(), "{id} has objects");
    }

    // A held dependent: refused whole, nothing marked.
    sexton(
        url,
        root,
        &[
            "backup",
            "hold",
            "i3",
            "--cluster",
            "c1",
            "--reason",
            "restore:r1",
        ],
    )
    .await
    .expect(0, "hold i3");
    let refused = sexton(
        url,
        root,
        &[
            "backup",
            "delete",
            "f1",
            "--cluster",
            "c1",
            "--with-dependents",
            "--remote",
            "--yes",
        ],
    )
    .await;
    refused.expect(2, "a delete with a held dependent");
    assert!(
        refused.stderr.contains("backup i3 is held: restore:r1")
            && refused.stderr.contains("nothing is deleted"),
        "{}",
        refused.stderr
    );
    let records = records_of(&world.catalog, "c1").await;
    assert_eq!(records.len(), 6);
    assert!(records.values().all(|r| !r.value.delete_requested));
    sexton(
        url,
        root,
        &[
            "backup",
            "release",
            "i3",
            "--cluster",
            "c1",
            "--reason",
            "restore:r1",
        ],
    )
    .await
    .expect(0, "release i3");

    // The dry run names what would go, oldest first, and changes nothing.
    let preview = sexton(
        url,
        root,
        &[
            "backup",
            "delete",
            "f1",
            "--cluster",
            "c1",
            "--with-dependents",
            "--remote",
            "--dry-run",
        ],
    )
    .await;
    preview.expect(0, "dry run");
    assert!(
        preview
            .stdout
            .contains("the 3 backup(s) that build on it (i2, i3, d4) go"),
        "{}",
        preview.stdout
    );
    assert!(records_of(&world.catalog, "c1")
        .await
        .values()
        .all(|r| !r.value.delete_requested));
    // barman's `delete SERVER oldest`: the oldest set is f1's, the same delete.
    let oldest = sexton(
        url,
        root,
        &[
            "backup",
            "delete",
            "--oldest",
            "--cluster",
            "c1",
            "--remote",
            "--dry-run",
        ],
    )
    .await;
    oldest.expect(0, "--oldest dry run");
    assert!(
        oldest
            .stderr
            .contains("the oldest backup set of cluster c1 starts at f1")
            && oldest
                .stdout
                .contains("the 3 backup(s) that build on it (i2, i3, d4) go"),
        "{}\n{}",
        oldest.stderr,
        oldest.stdout
    );
    for (args, says) in [
        (
            vec!["backup", "delete", "f1", "--oldest", "--cluster", "c1"],
            "cannot be used with",
        ),
        (
            vec!["backup", "delete", "--cluster", "c1", "--plan", "nightly"],
            "--oldest",
        ),
        (
            vec!["backup", "delete", "--oldest", "--cluster", "c1", "--force"],
            "cannot be used with",
        ),
        (
            vec![
                "backup",
                "delete",
                "--oldest",
                "--cluster",
                "c1",
                "--plan",
                "other",
                "--dry-run",
            ],
            "no completed full backup",
        ),
    ] {
        let out = sexton(url, root, &args).await;
        out.expect(2, &args.join(" "));
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
    // pgBackRest's `expire --set` of a set that does not exist: not found (exit 1, as every
    // command that names a missing backup), nothing marked.
    let ghost = sexton(
        url,
        root,
        &[
            "backup",
            "delete",
            "ghost",
            "--cluster",
            "c1",
            "--with-dependents",
            "--remote",
            "--yes",
        ],
    )
    .await;
    ghost.expect(1, "a set that does not exist");
    assert!(
        ghost
            .stderr
            .contains("backup ghost of cluster c1 not found"),
        "{}",
        ghost.stderr
    );
    assert!(records_of(&world.catalog, "c1")
        .await
        .values()
        .all(|r| !r.value.delete_requested));
    // Flags that make no sense together are refused by the CLI.
    sexton(
        url,
        root,
        &[
            "backup",
            "delete",
            "f1",
            "--cluster",
            "c1",
            "--with-dependents",
            "--force",
        ],
    )
    .await
    .expect(2, "--with-dependents --force");

    // Carried out: f1 and all that builds on it go, records and objects; f5 and i6 stay.
    let done = sexton(
        url,
        root,
        &[
            "backup",
            "delete",
            "f1",
            "--cluster",
            "c1",
            "--with-dependents",
            "--remote",
            "--yes",
        ],
    )
    .await;
    done.expect(0, "delete with dependents");
    eventually("the tree gone", Duration::from_secs(90), || async {
        let records = records_of(&world.catalog, "c1").await;
        let left: Vec<&str> = records.keys().map(String::as_str).collect();
        (left == ["f5", "i6"]).then_some(())
    })
    .await;
    for id in ["f1", "i2", "i3", "d4"] {
        eventually(
            &format!("{id}'s objects gone"),
            Duration::from_secs(30),
            || async { objects(id).await.is_empty().then_some(()) },
        )
        .await;
    }
    for id in ["f5", "i6"] {
        assert!(!objects(id).await.is_empty(), "{id} keeps its objects");
    }

    // barman's minimum_redundancy 2: deleting i6 would leave one completed backup; refused,
    // forced or not.
    for force in [false, true] {
        let mut args = vec![
            "backup",
            "delete",
            "i6",
            "--cluster",
            "c1",
            "--remote",
            "--yes",
        ];
        if force {
            args.push("--force");
        }
        let below = sexton(url, root, &args).await;
        below.expect(2, "a delete below the minimum redundancy");
        assert!(
            below.stderr.contains("c1/nightly has 2 completed backup(s) and its policy's minimum_redundancy is 2: this delete would leave 1"),
            "{}",
            below.stderr
        );
    }

    // The last full backup of the plan, with what builds on it: refused, nothing marked.
    let last = sexton(
        url,
        root,
        &[
            "backup",
            "delete",
            "f5",
            "--cluster",
            "c1",
            "--with-dependents",
            "--remote",
            "--yes",
        ],
    )
    .await;
    last.expect(2, "the last full with its dependents");
    assert!(
        last.stderr
            .contains("would leave c1/nightly without a completed full backup"),
        "{}",
        last.stderr
    );
    // --oldest now names f5, the last full: refused the same way.
    let last = sexton(
        url,
        root,
        &[
            "backup",
            "delete",
            "--oldest",
            "--cluster",
            "c1",
            "--remote",
            "--yes",
        ],
    )
    .await;
    last.expect(2, "the oldest set is the last full");
    assert!(
        last.stderr.contains("starts at f5")
            && last
                .stderr
                .contains("would leave c1/nightly without a completed full backup"),
        "{}",
        last.stderr
    );
    let records = records_of(&world.catalog, "c1").await;
    assert_eq!(records.len(), 2);
    assert!(records.values().all(|r| !r.value.delete_requested));
    world.fleet.stop().await.unwrap();
}
