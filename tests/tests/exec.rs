//! `sexton exec` (issue 14) as a user runs it: the real binary, a shell script as the backup
//! command, the scheduler on real NATS and SeaweedFS.
//!
//! - A full and an incremental: the incremental's command sees its parent's facts; every
//!   object is in the bucket with the size and SHA-256 the record gives (a 12 MiB file went up
//!   in three parts); `metadata.json` carries the command's facts; nothing the command wrote
//!   outside its output directory is uploaded.
//! - Every way a command can fail ends in a `failed` record with the reason, and nothing but
//!   the failed backup's `metadata.json` in the bucket: a non-zero exit, a timeout, a symbolic
//!   link out of the output, a reserved or malicious name, an empty or oversized output, bad
//!   facts.
//! - Redelivery: another executor that sees the same due-backups asks the catalog and takes
//!   none of them again.
//! - SIGTERM: a command that finishes within the grace period is reported before the executor
//!   exits; one that does not is stopped with everything it started, its due-backup handed
//!   back and taken by the next executor.

use std::{path::Path, time::Duration};

use sexton_model::{
    digest,
    metadata::BackupMetadata,
    records::{BackupKind, BackupRecord, BackupStatus},
};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{setup::World, *};

/// The backup command: what it does depends on the schedule that asked.
fn script(dir: &Path) -> String {
    let marker = dir.join("finish-now");
    let pids = dir.join("pids");
    let counter = dir.join("invocations");
    format!(
        r#"#!/bin/sh
set -eu
echo "$SEXTON_SCHEDULE $SEXTON_BACKUP_ID" >> {counter}
cat > "$SEXTON_SCRATCH_DIR/event.json"
out="$SEXTON_OUTPUT_DIR"
case "$SEXTON_SCHEDULE" in
  good)
    # The executor's own credentials never reach the command.
    test -z "${{SEXTON_S3_SECRET_ACCESS_KEY:-}}" || {{ echo "credentials leaked" >&2; exit 8; }}
    if [ "$SEXTON_KIND" = incremental ]; then
      test -n "${{SEXTON_PARENT_FACT_TO_LSN:-}}" || {{ echo "no parent facts" >&2; exit 9; }}
      grep -q '"to_lsn"' "$SEXTON_PARENT_METADATA"
      lsn=$((SEXTON_PARENT_FACT_TO_LSN + 1))
    else
      lsn=100
    fi
    head -c 12582912 /dev/urandom > "$out/backup.bin"
    mkdir -p "$out/logs" "$out/empty-dir"
    echo "$SEXTON_BACKUP_ID" > "$out/logs/id.txt"
    cp "$SEXTON_SCRATCH_DIR/event.json" "$out/event.json"
    echo escaped > "$out/../escaped"
    printf 'to_lsn=%s\nkind=%s\n' "$lsn" "$SEXTON_KIND" > "$SEXTON_FACTS_FILE"
    echo "took a $SEXTON_KIND backup"
    ;;
  fails) echo "mariabackup: cannot connect to the server" >&2; exit 3 ;;
  hangs) sleep 60 ;;
  symlink) echo x > "$out/ok"; ln -s /etc/passwd "$out/passwd" ;;
  reserved) echo '{{}}' > "$out/metadata.json" ;;
  backslash) echo x > "$out/a\\b" ;;
  empty) mkdir "$out/nothing" ;;
  huge) truncate -s 40M "$out/big" ;;
  badfacts) echo x > "$out/ok"; echo "kind=differential" > "$SEXTON_FACTS_FILE" ;;
  merged) echo "data of $SEXTON_BACKUP_ID" > "$out/backup.bin"; echo "to_lsn=7" > "$SEXTON_FACTS_FILE" ;;
  slow|short)
    echo $$ > {pids}.$SEXTON_SCHEDULE
    if [ ! -e {marker} ]; then
      if [ "$SEXTON_SCHEDULE" = slow ]; then sleep 30; else sleep 2; fi
    fi
    echo done > "$out/backup.bin"
    ;;
  *) echo "unknown schedule" >&2; exit 1 ;;
esac
"#,
        counter = counter.display(),
        pids = pids.display(),
        marker = marker.display(),
    )
}

struct Setup {
    _nats: Nats,
    _s3: S3,
    config: sexton_shared::config::Config,
    fleet: Option<Fleet>,
    client: async_nats::Client,
    catalog: Catalog,
    dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    setup_with(SCHEDULER_ONLY).await
}

async fn setup_with(members: Members) -> Setup {
    setup_configured(members, |_| {}).await
}

async fn setup_configured(
    members: Members,
    change: impl FnOnce(&mut sexton_shared::config::Config) + 'static,
) -> Setup {
    let world = setup::Setup::new(members).configure(change).start().await;
    let World {
        nats,
        s3,
        config,
        fleet,
        client,
        catalog,
        ..
    } = world;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("backup.sh"), script(dir.path())).unwrap();
    std::fs::write(
        dir.path().join("merge.sh"),
        "#!/bin/sh\nset -eu\ntest \"$SEXTON_JOB\" = merge\n\
         cat \"$SEXTON_INPUT_DIR\"/*/backup.bin > \"$SEXTON_OUTPUT_DIR/synthetic-full.bin\"\n\
         echo \"merged_sources=$SEXTON_SOURCES\" > \"$SEXTON_FACTS_FILE\"\n",
    )
    .unwrap();
    Setup {
        _nats: nats,
        _s3: s3.expect("S3 is started unless without_s3"),
        config,
        fleet: Some(fleet),
        client,
        catalog,
        dir,
    }
}

impl Setup {
    fn exec(&self, extra: &[&str]) -> ServiceProcess {
        let command = format!("sh {}", self.dir.path().join("backup.sh").display());
        let work = self.dir.path().join("work");
        let mut args = vec![
            "exec",
            "--backup-command",
            &command,
            "--cluster",
            "c1",
            "--work-dir",
            work.to_str().unwrap(),
            "--part-size",
            "5MiB",
            "--max-output-bytes",
            "32MiB",
            "--ack-wait",
            "10s",
        ];
        args.extend_from_slice(extra);
        ServiceProcess::start("sexton", &args, &self.config, self.dir.path())
    }

    async fn schedule(&self, name: &str) {
        create_schedule(
            &self.client,
            serde_json::json!({"name": name, "cluster": "c1", "plan": name,
                               "cron": "@every 1h", "full_every": 2,
                               "policy": {"keep_last": 10}}),
        )
        .await;
    }

    async fn take(&self, schedule: &str, exec: &ServiceProcess) -> BackupRecord {
        let id = trigger_backup(&self.client, schedule).await;
        let catalog = self.catalog.clone();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let cluster = "c1".parse().unwrap();
            if let Some(record) = catalog.get(&cluster, &id.parse().unwrap()).await.unwrap() {
                if matches!(
                    record.value.status,
                    BackupStatus::Completed | BackupStatus::Failed
                ) {
                    return record.value;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "backup {id} not reported within 60s\n{}",
                exec.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn invocations(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("invocations"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_and_an_incremental_through_a_users_command() {
    let setup = setup().await;
    setup.schedule("good").await;
    let exec = setup.exec(&["--timeout", "60s"]);
    let store = object_store(&setup.config).await;

    let full = setup.take("good", &exec).await;
    assert_eq!(
        full.status,
        BackupStatus::Completed,
        "{:?}\n{}",
        full.last_error,
        exec.logs()
    );
    assert_eq!(full.kind, BackupKind::Full);
    let incremental = setup.take("good", &exec).await;
    assert_eq!(
        incremental.status,
        BackupStatus::Completed,
        "{:?}\n{}",
        incremental.last_error,
        exec.logs()
    );
    assert_eq!(incremental.kind, BackupKind::Incremental);
    assert_eq!(incremental.parent.as_ref(), Some(&full.id));

    for (record, lsn) in [(&full, "100"), (&incremental, "101")] {
        let directory = format!("backups/c1/good/{}/", record.id);
        let mut listed: Vec<String> = store
            .list(&directory)
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key.trim_start_matches(&directory).to_string())
            .collect();
        listed.sort();
        assert_eq!(
            listed,
            ["backup.bin", "event.json", "logs/id.txt", "metadata.json"],
            "{}",
            exec.logs()
        );
        // Every object as the record says: size and SHA-256 of the bytes in the bucket.
        for object in &record.objects {
            let body = store.get(&object.key).await.unwrap().unwrap();
            assert_eq!(body.len() as u64, object.size, "{}", object.key);
            assert_eq!(
                object.sha256.as_deref(),
                Some(digest::sha256_hex(&body).as_str())
            );
        }
        let big = record
            .objects
            .iter()
            .find(|o| o.key.ends_with("backup.bin"))
            .unwrap();
        assert_eq!(big.size, 12 * 1024 * 1024);
        let document = BackupMetadata::decode(
            &store
                .get(&format!("{directory}metadata.json"))
                .await
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(document.executor.as_ref().unwrap()["to_lsn"], lsn);
        // The command read the due-backup's JSON on stdin.
        let event: serde_json::Value = serde_json::from_slice(
            &store
                .get(&format!("{directory}event.json"))
                .await
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(event["backup_id"], record.id.as_str());
    }
    // Nothing outside the backups' directories; the file written next to the output is not
    // uploaded anywhere.
    for object in store.list("").await.unwrap() {
        assert!(object.key.starts_with("backups/c1/good/"), "{}", object.key);
        assert!(!object.key.contains("escaped"), "{}", object.key);
    }
    // The command's output is in the executor's log, with its backup.
    let logs = exec.logs();
    assert!(
        logs.lines().any(|l| l.contains("took a incremental backup") && l.contains(incremental.id.as_str())),
        "{logs}"
    );

    // Another executor (another durable) sees the same due-backups and takes none again.
    let second = setup.exec(&["--durable", "second", "--timeout", "60s"]);
    let js = async_nats::jetstream::new(setup.client.clone());
    eventually(
        "the second executor caught up",
        Duration::from_secs(60),
        || {
            let js = js.clone();
            async move {
                let backlog = consumer_backlog(&js, topology::STREAM_DUE, "second").await?;
                (backlog == 0).then_some(())
            }
        },
    )
    .await;
    assert_eq!(
        setup.invocations().len(),
        2,
        "{:?}\n{}",
        setup.invocations(),
        second.logs()
    );
    assert!(
        second.logs().contains("the catalog says it was taken"),
        "{}",
        second.logs()
    );
    drop((exec, second));
    setup.fleet.unwrap().stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failure_is_reported_failed_and_leaves_nothing_but_its_metadata() {
    let setup = setup().await;
    let exec = setup.exec(&["--timeout", "3s", "--concurrency", "3"]);
    let store = object_store(&setup.config).await;
    let cases = [
        (
            "fails",
            "exited with status 3; stderr ends: mariabackup: cannot connect",
        ),
        ("hangs", "did not finish within 3s"),
        ("symlink", "passwd is a symbolic link"),
        ("reserved", "metadata.json is written by Sexton itself"),
        ("backslash", "a control character or a backslash"),
        ("empty", "left no file"),
        ("huge", "more than the 33554432 allowed"),
        ("badfacts", "kind must be"),
    ];
    for (name, _) in cases {
        setup.schedule(name).await;
    }
    let mut ids = Vec::new();
    for (name, _) in cases {
        ids.push(trigger_backup(&setup.client, name).await);
    }
    for ((name, reason), id) in cases.iter().zip(&ids) {
        let record = wait_reported_long(&setup.catalog, id, &exec).await;
        assert_eq!(record.status, BackupStatus::Failed, "{name}");
        let error = record.last_error.clone().unwrap_or_default();
        assert!(error.contains(reason), "{name}: {error}");
        let directory = format!("backups/c1/{name}/{id}/");
        let listed: Vec<String> = store
            .list(&directory)
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        assert_eq!(listed, [format!("{directory}metadata.json")], "{name}");
        assert_eq!(
            record.artifacts,
            [format!("{directory}metadata.json")],
            "{name}"
        );
    }
    // The hanging command was stopped, not left behind: no `sleep 60` of ours survives.
    assert!(exec.logs().contains("command timed out"), "{}", exec.logs());
    drop(exec);
    setup.fleet.unwrap().stop().await.unwrap();
}

async fn wait_reported_long(catalog: &Catalog, id: &str, exec: &ServiceProcess) -> BackupRecord {
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let cluster = "c1".parse().unwrap();
        if let Some(record) = catalog.get(&cluster, &id.parse().unwrap()).await.unwrap() {
            if matches!(
                record.value.status,
                BackupStatus::Completed | BackupStatus::Failed
            ) {
                return record.value;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "backup {id} not reported within 90s\n{}",
            exec.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn alive(pid_file: &Path) -> bool {
    let Ok(pid) = std::fs::read_to_string(pid_file) else {
        return false;
    };
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    !stat.is_empty() && !stat.contains(") Z ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_what_fits_the_grace_period_and_hands_back_the_rest() {
    let setup = setup().await;
    setup.schedule("short").await;
    setup.schedule("slow").await;
    let grace = ["--timeout", "60s", "--shutdown-grace", "5s"];
    let mut exec = setup.exec(&grace);
    let pids = |name: &str| setup.dir.path().join(format!("pids.{name}"));

    // A command that ends within the grace period is reported before the executor exits.
    let short = trigger_backup(&setup.client, "short").await;
    eventually("the short command started", Duration::from_secs(30), || {
        let started = pids("short").exists();
        async move { started.then_some(()) }
    })
    .await;
    let status = exec
        .terminate(Duration::from_secs(30))
        .expect("exec exited");
    assert!(status.success(), "{status:?}\n{}", exec.logs());
    let record = wait_reported_long(&setup.catalog, &short, &exec).await;
    assert_eq!(
        record.status,
        BackupStatus::Completed,
        "{:?}",
        record.last_error
    );

    // One that does not is stopped with its children and handed back.
    exec.restart();
    let slow = trigger_backup(&setup.client, "slow").await;
    eventually("the slow command started", Duration::from_secs(30), || {
        let started = pids("slow").exists();
        async move { started.then_some(()) }
    })
    .await;
    assert!(alive(&pids("slow")));
    let stopping = std::time::Instant::now();
    let status = exec
        .terminate(Duration::from_secs(30))
        .expect("exec exited");
    assert!(status.success(), "{status:?}\n{}", exec.logs());
    assert!(
        stopping.elapsed() < Duration::from_secs(15),
        "{:?}",
        stopping.elapsed()
    );
    assert!(!alive(&pids("slow")), "the command outlived its executor");
    assert!(exec.logs().contains("handed back"), "{}", exec.logs());
    let cluster = "c1".parse().unwrap();
    let record = setup
        .catalog
        .get(&cluster, &slow.parse().unwrap())
        .await
        .unwrap();
    assert!(
        record.is_none_or(|r| r.value.status == BackupStatus::InProgress),
        "the interrupted backup was reported"
    );

    // The next executor takes it at once (the nak asked for no ack-wait).
    std::fs::write(setup.dir.path().join("finish-now"), b"").unwrap();
    exec.restart();
    let record = wait_reported_long(&setup.catalog, &slow, &exec).await;
    assert_eq!(
        record.status,
        BackupStatus::Completed,
        "{:?}",
        record.last_error
    );
    assert_eq!(
        setup
            .invocations()
            .iter()
            .filter(|l| l.contains(&slow))
            .count(),
        2,
        "{:?}",
        setup.invocations()
    );
    drop(exec);
    setup.fleet.unwrap().stop().await.unwrap();
}

/// `--merge-command` (chain_mode: merge): the chain's data objects reach the command oldest
/// first, its output becomes the target's synthetic full, and retention then deletes the
/// folded source through the usual pipeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_command_folds_an_expired_chain_head_into_the_oldest_kept_backup() {
    let setup = setup_with(Members {
        executor: false,
        ..Members::ALL
    })
    .await;
    create_schedule(
        &setup.client,
        serde_json::json!({"name": "merged", "cluster": "c1", "plan": "merged",
                           "cron": "@every 1h", "full_every": 100,
                           "policy": {"keep_last": 2, "chain_mode": "merge"}}),
    )
    .await;
    let merge = format!("sh {}", setup.dir.path().join("merge.sh").display());
    let exec = setup.exec(&["--timeout", "60s", "--merge-command", &merge]);
    let store = object_store(&setup.config).await;
    let mut taken = Vec::new();
    for _ in 0..3 {
        let record = setup.take("merged", &exec).await;
        assert_eq!(
            record.status,
            BackupStatus::Completed,
            "{:?}",
            record.last_error
        );
        taken.push(record);
    }
    let (full, target) = (&taken[0], &taken[1]);
    assert_eq!(target.parent.as_ref(), Some(&full.id));
    // The target becomes a synthetic full and the source goes.
    let merged = eventually(
        "the merge recorded and the source deleted",
        Duration::from_secs(90),
        || {
            let catalog = setup.catalog.clone();
            let (full, target) = (full.id.clone(), target.id.clone());
            let cluster: sexton_model::names::ClusterName = "c1".parse().unwrap();
            async move {
                let record = catalog.get(&cluster, &target).await.ok()??.value;
                let gone = catalog.get(&cluster, &full).await.ok()?.is_none();
                (record.kind == BackupKind::Full && gone).then_some(record)
            }
        },
    )
    .await;
    assert!(merged.parent.is_none());
    assert!(
        merged.tags.contains(&"synthetic-full".to_string()),
        "{:?}",
        merged.tags
    );
    let synthetic = format!("backups/c1/merged/{}/synthetic-full.bin", target.id);
    assert!(
        merged.artifacts.contains(&synthetic),
        "{:?}",
        merged.artifacts
    );
    let body = store.get(&synthetic).await.unwrap().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&body),
        format!("data of {}\ndata of {}\n", full.id, target.id),
        "the chain's data, oldest first"
    );
    let document = BackupMetadata::decode(
        &store
            .get(&format!("backups/c1/merged/{}/metadata.json", target.id))
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(document.kind, BackupKind::Full);
    let facts = document.executor.unwrap();
    assert_eq!(facts["to_lsn"], "7", "the backup's own facts stay");
    assert_eq!(facts["merged_sources"], full.id.as_str());
    assert!(store
        .list(&format!("backups/c1/merged/{}/", full.id))
        .await
        .unwrap()
        .is_empty());
    drop(exec);
    setup.fleet.unwrap().stop().await.unwrap();
}

/// `--verify-command` answers restore tests: the chain's objects are downloaded and checked
/// against their recorded checksums, the command restores them (here: checks the data is
/// whole) and its exit status is the verdict. A corrupted object fails the test without running
/// the command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verify_command_answers_restore_tests() {
    let setup = setup().await;
    setup.schedule("good").await;
    std::fs::write(
        setup.dir.path().join("verify.sh"),
        "#!/bin/sh\nset -eu\ntest \"$SEXTON_JOB\" = verify\n\
         n=$(ls \"$SEXTON_INPUT_DIR\" | wc -l)\n\
         test \"$n\" -eq $(echo $SEXTON_CHAIN | wc -w)\n\
         for dir in \"$SEXTON_INPUT_DIR\"/*; do test -s \"$dir/backup.bin\"; test -s \"$dir/metadata.json\"; done\n\
         echo \"$SEXTON_REQUEST_ID\" >> \"$SEXTON_EVENT_FILE.seen\"\n",
    )
    .unwrap();
    let verify = format!("sh {}", setup.dir.path().join("verify.sh").display());
    let exec = setup.exec(&["--verify-command", &verify]);
    let full = setup.take("good", &exec).await;
    let incremental = setup.take("good", &exec).await;
    assert_eq!(incremental.kind, BackupKind::Incremental);
    let ask = |id: String| {
        let client = setup.client.clone();
        async move {
            api(
                &client,
                "backup",
                "verify",
                serde_json::json!({"schema_version": 1, "cluster": "c1", "id": id}),
            )
            .await
            .unwrap()["request_id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let verdict = |id: String, request: String| {
        let catalog = setup.catalog.clone();
        async move {
            eventually("the verdict", Duration::from_secs(60), || {
                let (catalog, id, request) = (catalog.clone(), id.clone(), request.clone());
                async move {
                    let record = catalog
                        .get(&"c1".parse().unwrap(), &id.parse().unwrap())
                        .await
                        .ok()??;
                    record
                        .value
                        .verification?
                        .history
                        .into_iter()
                        .find(|e| e.request_id == request)
                }
            })
            .await
        }
    };
    // The incremental's test restores its chain: two backups' objects.
    let request = ask(incremental.id.to_string()).await;
    let entry = verdict(incremental.id.to_string(), request).await;
    assert_eq!(entry.outcome, "verified", "{entry:?}\n{}", exec.logs());
    assert!(
        entry
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("of 2 backups"),
        "{entry:?}"
    );
    // A corrupted object: the test fails, naming it, and the command does not run.
    let store = object_store(&setup.config).await;
    let data = full
        .artifacts
        .iter()
        .find(|k| k.ends_with("backup.bin"))
        .unwrap()
        .clone();
    let size = store.get(&data).await.unwrap().unwrap().len();
    store.put(&data, vec![0u8; size].into()).await.unwrap();
    let request = ask(full.id.to_string()).await;
    let entry = verdict(full.id.to_string(), request).await;
    assert_eq!(entry.outcome, "failed");
    let reason = entry.reason.unwrap_or_default();
    assert!(
        reason.contains(&data) && reason.contains("sha256"),
        "{reason}"
    );
    drop(exec);
}

/// A restore test of a backup's copy at another location (issue 28): `sexton exec` reads the
/// chain's copies there with that location's keys, the same verify command restores them, and
/// a copy damaged there fails the test naming the object at that location.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verify_command_reads_the_copies_at_a_location() {
    let dr = S3::start_as("exec-dr-key", "exec-dr-secret");
    let endpoint = dr.endpoint();
    let setup = setup_configured(SCHEDULER_ONLY, move |config| {
        config.locations.insert(
            "dr".into(),
            sexton_shared::config::LocationConfig {
                s3: sexton_shared::config::S3Config {
                    endpoint: Some(endpoint),
                    bucket: BUCKET.into(),
                    prefix: "dr-copies".into(),
                    access_key_id: Some("exec-dr-key".into()),
                    secret_access_key: Some("exec-dr-secret".into()),
                    ..Default::default()
                },
                storage_class: None,
            },
        );
    })
    .await;
    create_schedule(
        &setup.client,
        serde_json::json!({"name": "good", "cluster": "c1", "plan": "good",
                           "cron": "@every 1h", "full_every": 2, "policy": {"keep_last": 10},
                           "copies": [{"to": "dr", "policy": {"keep_last": 10}}]}),
    )
    .await;
    std::fs::write(
        setup.dir.path().join("verify.sh"),
        "#!/bin/sh\nset -eu\ntest \"$SEXTON_JOB\" = verify\n\
         for dir in \"$SEXTON_INPUT_DIR\"/*; do test -s \"$dir/backup.bin\"; done\n",
    )
    .unwrap();
    let verify = format!("sh {}", setup.dir.path().join("verify.sh").display());
    let exec = setup.exec(&["--verify-command", &verify]);
    let full = setup.take("good", &exec).await;
    let incremental = setup.take("good", &exec).await;
    let (stop, copier) = {
        let (trigger, shutdown) = sexton_shared::Shutdown::new();
        (
            trigger,
            tokio::spawn(sexton_copier::run(setup.config.clone(), shutdown)),
        )
    };
    let dr_name = sexton_model::names::LocationName::new("dr").unwrap();
    let catalog = setup.catalog.clone();
    let copied = |id: String| {
        let (catalog, dr_name) = (catalog.clone(), dr_name.clone());
        async move {
            eventually("the copy at dr", Duration::from_secs(60), || {
                let (catalog, id, dr_name) = (catalog.clone(), id.clone(), dr_name.clone());
                async move {
                    let record = catalog
                        .get(&"c1".parse().unwrap(), &id.parse().unwrap())
                        .await
                        .ok()??;
                    record
                        .value
                        .copies
                        .contains_key(&dr_name)
                        .then_some(record.value)
                }
            })
            .await
        }
    };
    let full_copy = copied(full.id.to_string()).await;
    copied(incremental.id.to_string()).await;
    let ask_and_wait = |id: String| {
        let (client, catalog) = (setup.client.clone(), setup.catalog.clone());
        async move {
            let request = api(
                &client,
                "backup",
                "verify",
                serde_json::json!({"schema_version": 1, "cluster": "c1", "id": id,
                                   "location": "dr"}),
            )
            .await
            .unwrap()["request_id"]
                .as_str()
                .unwrap()
                .to_string();
            eventually("the verdict", Duration::from_secs(60), || {
                let (catalog, id, request) = (catalog.clone(), id.clone(), request.clone());
                async move {
                    catalog
                        .get(&"c1".parse().unwrap(), &id.parse().unwrap())
                        .await
                        .ok()??
                        .value
                        .verification?
                        .history
                        .into_iter()
                        .find(|e| e.request_id == request && e.via.is_none())
                }
            })
            .await
        }
    };
    let entry = ask_and_wait(incremental.id.to_string()).await;
    assert_eq!(entry.outcome, "verified", "{entry:?}\n{}", exec.logs());
    assert_eq!(entry.location.as_ref(), Some(&dr_name));
    assert!(
        entry
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("of 2 backups"),
        "{entry:?}"
    );
    // The full's data damaged at dr only: the test there fails naming the object there.
    let at_dr = sexton_shared::object_store::ObjectStore::connect(&setup.config.locations["dr"].s3)
        .await
        .unwrap();
    let data = full_copy.copies[&dr_name]
        .objects
        .iter()
        .find(|o| o.key.ends_with("backup.bin"))
        .unwrap()
        .clone();
    assert!(data.key.starts_with("dr-copies/"), "{data:?}");
    at_dr
        .put(&data.key, vec![0u8; data.size as usize].into())
        .await
        .unwrap();
    let entry = ask_and_wait(full.id.to_string()).await;
    assert_eq!(entry.outcome, "failed", "{entry:?}");
    assert!(
        entry
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains(&data.key),
        "{entry:?}"
    );
    stop.trigger();
    copier.await.unwrap().unwrap();
    drop(exec);
    drop(dr);
}
