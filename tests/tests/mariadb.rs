//! A real MariaDB backed up, expired and restored through Sexton (issue 14), with the recipe in
//! `deploy/executors/mariadb/` exactly as a user runs it:
//!
//! 1. A private MariaDB (Debian's packages, installed when missing) with binary logging, and a
//!    table written every 150 ms for the whole test.
//! 2. `sexton exec` runs `backup.sh` (`mariabackup --backup --stream=xbstream`; an incremental
//!    from its parent's `to_lsn`, which `sexton exec` hands it from the parent's
//!    `metadata.json`). A schedule with `full_every: 3`, `keep_last: 3` and a recovery window
//!    takes seven backups: F I I F I I F. After each, `ship-binlogs.sh --flush` ships the closed
//!    binlogs with `sexton binlog append`.
//! 3. Retention expires the first chain (F I I) and the deleter removes it; the binlog segments
//!    that end before the horizon (the start of the oldest kept full) go, the others stay.
//! 4. `restore-verify.sh` restores the oldest kept backup from the bucket and replays the
//!    shipped binlogs up to a whole second between two writes: the table holds exactly the rows
//!    written before that instant. It also restores the newest incremental chain.

use std::{
    collections::BTreeSet,
    io::Write as _,
    path::Path,
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, SubsecRound as _, Utc};
use sexton_model::{
    metadata::BackupMetadata,
    names::ClusterName,
    records::{BackupKind, BackupRecord, BackupStatus},
};
use sexton_shared::{
    binlog::{self, BinlogIndex},
    catalog::Catalog,
    config::Config,
    object_store::ObjectStore,
    topology,
};
use sexton_tests::{mariadb::MariaDb, *};

const CLUSTER: &str = "db1";
const DR_KEY: &str = "mariadb-dr-key";
const DR_SECRET: &str = "mariadb-dr-secret";

fn recipe(script: &str) -> String {
    repo_root()
        .join("deploy/executors/mariadb")
        .join(script)
        .display()
        .to_string()
}

/// `ship-binlogs.sh --flush`, with the real `sexton` binary and the test's S3 configuration.
fn ship_binlogs(db: &MariaDb, config: &Config) -> String {
    let output = Command::new(recipe("ship-binlogs.sh"))
        .args(["--cluster", CLUSTER, "--flush"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(config_env(config))
        .env("MARIADB_SOCKET", &db.socket)
        .env("SEXTON_BIN", service_binary("sexton"))
        .output()
        .expect("running ship-binlogs.sh");
    assert!(
        output.status.success(),
        "ship-binlogs.sh failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// A `mariadb` client fed one insert every 150 ms until stopped.
struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(db: &MariaDb) -> Writer {
        let mut child = db
            .client()
            .arg("shop")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("a mariadb client");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut stdin = child.stdin.take().expect("stdin");
            while !stopping.load(Ordering::Relaxed) {
                stdin
                    .write_all(b"INSERT INTO w (ts) VALUES (NOW(6));\n")
                    .expect("writing an insert");
                stdin.flush().expect("flushing");
                std::thread::sleep(Duration::from_millis(150));
            }
            drop(stdin);
            let status = child.wait().expect("the client ends");
            assert!(status.success(), "the writing client failed: {status}");
        });
        Writer {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the writer thread");
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

async fn record(catalog: &Catalog, id: &str) -> Option<BackupRecord> {
    let cluster: ClusterName = CLUSTER.parse().unwrap();
    catalog
        .get(&cluster, &id.parse().unwrap())
        .await
        .unwrap()
        .map(|r| r.value)
}

async fn index(store: &ObjectStore) -> BinlogIndex {
    let cluster: ClusterName = CLUSTER.parse().unwrap();
    let body = store
        .get(&binlog::index_key("backups", &cluster))
        .await
        .unwrap()
        .expect("the binlog index exists");
    BinlogIndex::parse(&body).unwrap()
}

/// The binlog index at a location whose prefix is `prefix`, once there is one.
async fn index_at(store: &ObjectStore, prefix: &str) -> Option<BinlogIndex> {
    let cluster: ClusterName = CLUSTER.parse().unwrap();
    let body = store
        .get(&binlog::index_key(prefix, &cluster))
        .await
        .unwrap()?;
    Some(BinlogIndex::parse(&body).unwrap())
}

async fn download(store: &ObjectStore, key: &str, to: &Path) {
    store
        .get_to_file(key, to)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{key} is not in the bucket"));
}

/// Runs `restore-verify.sh` and returns what its check query printed.
fn restore_verify(work: &Path, args: &[&str], files: &[&Path]) -> String {
    std::fs::create_dir_all(work).unwrap();
    let started = Instant::now();
    let output = Command::new(recipe("restore-verify.sh"))
        .arg("--work")
        .arg(work)
        .args(["--port", &free_port().to_string()])
        .args(args)
        .args(files)
        .output()
        .expect("running restore-verify.sh");
    eprintln!(
        "restore-verify.sh took {:?}:\n{}",
        started.elapsed(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "restore-verify.sh failed");
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

fn ids(text: &str) -> BTreeSet<u64> {
    text.split([',', '\n'])
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_backed_up_expired_and_restored_to_a_point_in_time() {
    let test_started = Instant::now();
    if std::env::var_os("RUST_LOG").is_some() {
        sexton_shared::telemetry::init_logging(sexton_shared::config::LogFormat::Text);
    }
    sexton_tests::mariadb::ensure_installed();
    let nats = Nats::start();
    let s3 = S3::start();
    // A second region (issue 28): every backup and the binlog archive are copied to `dr`,
    // which keeps all seven; at the end the primary and the catalog are lost, and the oldest
    // backup is restored from `dr` alone to an instant between two writes.
    let dr_server = S3::start_as(DR_KEY, DR_SECRET);
    let mut config = config(&nats, &s3);
    add_location(&mut config, "dr", &dr_server, DR_KEY, DR_SECRET);
    // dr locks what it keeps (issue 29): a bucket created with Object Lock, each copy locked
    // for a day, the binlog archive there as long as the copies that need it.
    let dr_location = config.locations.get_mut("dr").unwrap();
    dr_location.s3.bucket = "dr-locked".into();
    ObjectStore::connect(&dr_location.s3)
        .await
        .unwrap()
        .client()
        .create_bucket()
        .bucket("dr-locked")
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();
    dr_location.s3.lock = Some(sexton_shared::config::LockConfig {
        mode: sexton_retention::lock::LockMode::Governance,
        tiers: sexton_retention::lock::LockTiers {
            min: Some(sexton_retention::lock::parse_lock_duration("1d").unwrap()),
            ..Default::default()
        },
    });
    config.copier.binlog_interval = Duration::from_secs(1);
    let fleet = Fleet::start(
        &config,
        Members {
            executor: false,
            ..Members::ALL
        },
    );
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let catalog = Catalog::new(topology::ensure(&js, 1).await.expect("topology").catalog);
    let store = object_store(&config).await;
    let dr = ObjectStore::connect(&config.locations["dr"].s3)
        .await
        .unwrap();
    let (stop_copier, copier) = {
        let (trigger, shutdown) = sexton_shared::Shutdown::new();
        (
            trigger,
            tokio::spawn(sexton_copier::run(config.clone(), shutdown)),
        )
    };
    let dir = tempfile::tempdir().unwrap();

    let mut db = MariaDb::start(&dir.path().join("db"));
    db.sql(
        "CREATE DATABASE shop; \
         CREATE TABLE shop.w (id BIGINT AUTO_INCREMENT PRIMARY KEY, ts DATETIME(6) NOT NULL)",
    );
    let mut writer = Writer::start(&db);
    let command = format!(
        "MARIADB_SOCKET={} {}",
        db.socket.display(),
        recipe("backup.sh")
    );
    let work = dir.path().join("exec");
    // Restore tests with the recipe's verify.sh: the same restore a person would run.
    let verify_port = free_port().to_string();
    let verify_command = format!(
        "MARIADB_VERIFY_PORT={verify_port} MARIADB_VERIFY_QUERY='SELECT COUNT(*) FROM shop.w' {}",
        recipe("verify.sh")
    );
    let exec = ServiceProcess::start(
        "sexton",
        &[
            "exec",
            "--backup-command",
            &command,
            "--verify-command",
            &verify_command,
            "--cluster",
            CLUSTER,
            "--work-dir",
            work.to_str().unwrap(),
            "--timeout",
            "120s",
        ],
        &config,
        dir.path(),
    );
    create_schedule(
        &client,
        serde_json::json!({"name": "base", "cluster": CLUSTER, "plan": "base",
                           "cron": "@every 1h", "full_every": 3,
                           "policy": {"keep_last": 3, "recovery_window": "5s"},
                           "copies": [{"to": "dr", "policy": {"keep_last": 10}}]}),
    )
    .await;
    eprintln!("set up in {:?}", test_started.elapsed());

    // Seven backups, binlogs shipped after each.
    let mut taken: Vec<BackupRecord> = Vec::new();
    let mut executor_facts: Vec<serde_json::Value> = Vec::new();
    for n in 0..7 {
        let id = trigger_backup(&client, "base").await;
        let deadline = Instant::now() + Duration::from_secs(90);
        let done = loop {
            if let Some(r) = record(&catalog, &id).await {
                if matches!(r.status, BackupStatus::Completed | BackupStatus::Failed) {
                    break r;
                }
            }
            assert!(
                Instant::now() < deadline,
                "backup {id} not reported\n{}",
                exec.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            done.status,
            BackupStatus::Completed,
            "{id}: {:?}\n{}",
            done.last_error,
            exec.logs()
        );
        let expected = if n % 3 == 0 {
            BackupKind::Full
        } else {
            BackupKind::Incremental
        };
        assert_eq!(done.kind, expected, "backup {n}");
        if expected == BackupKind::Incremental {
            assert_eq!(done.parent.as_ref(), Some(&taken[n - 1].id));
        }
        // metadata.json records the command's facts; an incremental starts at its parent's
        // checkpoint (read now: retention may delete the parent later).
        let body = store
            .get(&format!("backups/{CLUSTER}/base/{id}/metadata.json"))
            .await
            .unwrap()
            .unwrap();
        let facts = BackupMetadata::decode(&body).unwrap().executor.unwrap();
        assert_eq!(facts["tool"], "mariabackup");
        if let Some(parent) = executor_facts
            .last()
            .filter(|_| expected == BackupKind::Incremental)
        {
            assert_eq!(facts["from_lsn"], parent["to_lsn"], "{id}");
        }
        // The binlog segment a replay starts in is the backup's own range (issue 30): carried
        // from backup.sh's facts through the report onto the record and into metadata.json.
        let file = facts["binlog_file"].as_str().unwrap().to_string();
        assert!(file.starts_with("mysql-bin."), "{facts}");
        let range = done
            .log_range
            .clone()
            .expect("the record carries its log range");
        assert_eq!(
            (range.first.as_str(), range.last.as_str()),
            (file.as_str(), file.as_str())
        );
        assert_eq!(
            BackupMetadata::decode(&body).unwrap().log_range,
            Some(range),
            "{id}"
        );
        executor_facts.push(facts);
        taken.push(done);
        ship_binlogs(&db, &config);
        // The next backup starts in a later second than the binlogs shipped end.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    eprintln!("seven backups taken by {:?}", test_started.elapsed());

    // Retention: the first chain goes (keep_last 3 keeps I5 I6 F7, which need F4; the 5 s
    // window reaches back to F4 at most), and the binlogs before F4 started.
    let kept: BTreeSet<String> = taken[3..].iter().map(|r| r.id.to_string()).collect();
    let oldest_kept = &taken[3];
    let horizon = oldest_kept.started_at.expect("a started_at");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let mut live = BTreeSet::new();
        for r in &taken {
            // Gone from primary, a record stays for its copy at dr (`copies-only`).
            if record(&catalog, r.id.as_str())
                .await
                .is_some_and(|r| r.held_at_primary())
            {
                live.insert(r.id.to_string());
            }
        }
        let objects = store
            .list(&format!("backups/{CLUSTER}/base/"))
            .await
            .unwrap();
        let dirs: BTreeSet<String> = objects
            .iter()
            .filter_map(|o| o.key.split('/').nth(3).map(str::to_string))
            .collect();
        let segments = index(&store).await.segments;
        let early = segments
            .iter()
            .filter(|s| s.last_event.is_some_and(|l| l < horizon))
            .count();
        if live == kept && dirs == kept && early == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "retention did not settle: records {live:?}, objects {dirs:?}, {early} early segments, kept should be {kept:?}; horizon {horizon}, segments {:#?}",
            segments.iter().map(|s| (&s.key, s.first_event, s.last_event)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let segments = index(&store).await.segments;
    let shipped = segments
        .iter()
        .map(|s| s.key.rsplit('/').next().unwrap().to_string())
        .collect::<Vec<_>>();
    eprintln!(
        "retention settled by {:?}; segments kept: {shipped:?}",
        test_started.elapsed()
    );
    // Issue 47: the first full, which only dr keeps now, is fetched from dr through the live
    // fleet, each object checked (before: "backup … is deleting: only a completed backup can
    // be restored"); primary says where it is.
    let first = dir.path().join("first-from-dr");
    let fetched = sexton_cli(
        &config,
        &[
            "backup",
            "fetch",
            taken[0].id.as_str(),
            "--cluster",
            CLUSTER,
            "--location",
            "dr",
            "--to",
            first.to_str().unwrap(),
            "-o",
            "json",
        ],
    );
    assert!(
        fetched.status.success(),
        "fetching the first full from dr: {}",
        String::from_utf8_lossy(&fetched.stderr)
    );
    let from_primary = sexton_cli(
        &config,
        &[
            "backup",
            "fetch",
            taken[0].id.as_str(),
            "--cluster",
            CLUSTER,
            "--to",
            first.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&from_primary.stderr).to_string();
    assert!(
        !from_primary.status.success() && stderr.contains("it is held at dr"),
        "{stderr}"
    );
    assert!(
        !shipped.contains(&"mysql-bin.000001".to_string()),
        "the first binlog should be collected: {shipped:?}"
    );
    let bucket_segments: BTreeSet<String> = store
        .list(&format!("backups/{CLUSTER}/binlog/"))
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .filter(|k| !k.ends_with("_index.json"))
        .collect();
    assert_eq!(
        bucket_segments,
        segments.iter().map(|s| s.key.clone()).collect(),
        "the bucket holds exactly the indexed segments"
    );

    // The instant to restore to: a whole second after the newest incremental of the oldest
    // kept chain completed, well before the last shipped event.
    let target: DateTime<Utc> = (taken[5].completed_at.unwrap().with_timezone(&Utc)
        + chrono::Duration::seconds(2))
    .trunc_subsecs(0);
    let last_shipped = segments.iter().filter_map(|s| s.last_event).max().unwrap();
    assert!(
        target + chrono::Duration::seconds(1) < last_shipped,
        "{target} is not covered by the shipped binlogs (up to {last_shipped})"
    );
    writer.stop();
    let stop = target.format("%Y-%m-%d %H:%M:%S").to_string();
    let expected = ids(&db.sql(&format!(
        "SELECT id FROM shop.w WHERE ts < '{stop}' ORDER BY id"
    )));
    let after = ids(&db.sql(&format!(
        "SELECT id FROM shop.w WHERE ts >= '{stop}' ORDER BY id"
    )));
    assert!(
        !expected.is_empty() && !after.is_empty(),
        "rows on both sides of {stop}"
    );

    // Restore the oldest kept backup from the bucket and replay to the instant.
    let restore = dir.path().join("restore");
    let binlogs = restore.join("binlog");
    std::fs::create_dir_all(&binlogs).unwrap();
    let full = restore.join("full.xbstream");
    download(
        &store,
        &format!("backups/{CLUSTER}/base/{}/backup.xbstream", oldest_kept.id),
        &full,
    )
    .await;
    for segment in &segments {
        let name = segment.key.rsplit('/').next().unwrap();
        download(&store, &segment.key, &binlogs.join(name)).await;
    }
    let check = "SELECT COALESCE(GROUP_CONCAT(id ORDER BY id), '') FROM shop.w";
    let restored = ids(&restore_verify(
        &restore.join("pitr"),
        &[
            "--check-query",
            check,
            "--binlog-dir",
            binlogs.to_str().unwrap(),
            "--stop-datetime",
            &stop,
        ],
        &[&full],
    ));
    assert_eq!(
        restored,
        expected,
        "restored to {stop}: {} rows, {} expected; extra {:?}, missing {:?}",
        restored.len(),
        expected.len(),
        restored.difference(&expected).collect::<Vec<_>>(),
        expected.difference(&restored).collect::<Vec<_>>()
    );
    eprintln!(
        "point-in-time restore checked by {:?}: {} rows up to {stop}",
        test_started.elapsed(),
        restored.len()
    );

    // The newest incremental chain (F4 + I5 + I6) restores too, with its incrementals applied:
    // every row written before I6 started is there, none written after it completed.
    let mut chain = vec![full.clone()];
    for r in &taken[4..6] {
        let file = restore.join(format!("{}.xbstream", r.id));
        download(
            &store,
            &format!("backups/{CLUSTER}/base/{}/backup.xbstream", r.id),
            &file,
        )
        .await;
        chain.push(file);
    }
    let chain_refs: Vec<&Path> = chain.iter().map(|p| p.as_path()).collect();
    let restored = ids(&restore_verify(
        &restore.join("chain"),
        &["--check-query", check],
        &chain_refs,
    ));
    let at = |t: chrono::DateTime<chrono::FixedOffset>| {
        t.with_timezone(&Utc)
            .format("%Y-%m-%d %H:%M:%S%.6f")
            .to_string()
    };
    let before = ids(&db.sql(&format!(
        "SELECT id FROM shop.w WHERE ts < '{}'",
        at(taken[5].started_at.unwrap())
    )));
    let later = ids(&db.sql(&format!(
        "SELECT id FROM shop.w WHERE ts > '{}'",
        at(taken[5].completed_at.unwrap())
    )));
    assert!(restored.is_superset(&before), "rows before I6 missing");
    assert!(restored.is_disjoint(&later), "rows after I6 present");

    // The same restore proves a backup through Sexton (issue 13): a restore test of I6 restores
    // its chain (F4 + I5 + I6) with verify.sh and records the verdict on the chain.
    let verify_started = std::time::Instant::now();
    let asked = api(
        &client,
        "backup",
        "verify",
        serde_json::json!({"schema_version": 1, "cluster": CLUSTER, "id": taken[5].id.as_str()}),
    )
    .await
    .expect("backup.verify");
    let request = asked["request_id"].as_str().unwrap().to_string();
    let entry = eventually(
        "the restore test's verdict",
        Duration::from_secs(120),
        || {
            let catalog = catalog.clone();
            let (id, request) = (taken[5].id.to_string(), request.clone());
            async move {
                record(&catalog, &id)
                    .await?
                    .verification?
                    .history
                    .into_iter()
                    .find(|e| e.request_id == request)
            }
        },
    )
    .await;
    assert_eq!(entry.outcome, "verified", "{entry:?}\n{}", exec.logs());
    assert!(
        entry
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("of 3 backups"),
        "{entry:?}"
    );
    eprintln!(
        "restore test of {} through sexton exec: {:?} ({})",
        taken[5].id,
        verify_started.elapsed(),
        entry.reason.unwrap_or_default()
    );

    // The primary is lost, and the catalog with it: the oldest backup, which only dr still
    // holds, comes back from dr alone, to an instant between two writes after it.
    let dr_target: DateTime<Utc> = (taken[1].completed_at.unwrap().with_timezone(&Utc)
        + chrono::Duration::seconds(2))
    .trunc_subsecs(0);
    let dr_stop = dr_target.format("%Y-%m-%d %H:%M:%S").to_string();
    let dr_index = eventually(
        "dr's binlog archive past the last shipped event",
        Duration::from_secs(60),
        || async {
            let index = index_at(&dr, "dr-copies").await?;
            (index.newest_last_event() >= Some(last_shipped)).then_some(index)
        },
    )
    .await;
    // Every segment of dr's archive is locked, as long as the copies there that need it.
    eventually(
        "dr's binlog archive locked",
        Duration::from_secs(60),
        || async {
            for segment in &dr_index.segments {
                dr.retention_of(&segment.key, None).await.ok()??;
            }
            Some(())
        },
    )
    .await;
    drop(exec);
    stop_copier.trigger();
    copier.await.unwrap().unwrap();
    fleet.stop().await.unwrap();
    let everything: Vec<String> = store
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    let report = store.delete_keys_each(&everything).await.unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert!(
        store.list("").await.unwrap().is_empty(),
        "the primary is empty"
    );
    let recovery_nats = Nats::start();
    let mut recovery_config = config.clone();
    recovery_config.nats.url = recovery_nats.url();
    let recovery = Fleet::start(
        &recovery_config,
        Members {
            scheduler: true,
            retention_worker: false,
            deleter: false,
            executor: false,
        },
    );
    let recovery_client = async_nats::connect(recovery_nats.url()).await.unwrap();
    let recovery_catalog = Catalog::new(
        topology::ensure(&async_nats::jetstream::new(recovery_client.clone()), 1)
            .await
            .unwrap()
            .catalog,
    );
    let imported = eventually(
        "catalog import from dr",
        Duration::from_secs(60),
        || async {
            api(
                &recovery_client,
                "catalog",
                "import",
                serde_json::json!({"schema_version": 1, "cluster": CLUSTER, "from": "dr"}),
            )
            .await
            .ok()
        },
    )
    .await;
    let imported: BTreeSet<String> = imported["imported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().or(i.as_str()).unwrap().to_string())
        .collect();
    let all: BTreeSet<String> = taken.iter().map(|r| r.id.to_string()).collect();
    assert_eq!(imported, all, "every backup comes back from dr");
    let first = record(&recovery_catalog, taken[0].id.as_str())
        .await
        .expect("imported");
    assert_eq!(first.status_text(), "copies-only");
    let dr_name = sexton_model::names::LocationName::new("dr").unwrap();
    let data = first.copies[&dr_name]
        .objects
        .iter()
        .find(|o| o.key.ends_with("/backup.xbstream"))
        .expect("the copy's data object");
    let data_version = data
        .version_id
        .clone()
        .expect("the import recorded the version it listed at dr");

    // Then an attacker with dr's admin keys writes over every object there and marks each
    // deleted: the backups, the binlog segments, the index. The locked versions stay.
    let dr_prefix = format!("dr-copies/{CLUSTER}/");
    let current: Vec<String> = dr
        .list_versions(&dr_prefix)
        .await
        .unwrap()
        .into_iter()
        .filter(|v| v.latest && !v.delete_marker)
        .map(|v| v.key)
        .collect();
    assert!(current.len() > dr_index.segments.len(), "{current:?}");
    for key in &current {
        dr.client()
            .put_object()
            .bucket("dr-locked")
            .key(key)
            .body(aws_sdk_s3::primitives::ByteStream::from_static(b"ransom"))
            .send()
            .await
            .unwrap();
        dr.client()
            .delete_object()
            .bucket("dr-locked")
            .key(key)
            .send()
            .await
            .unwrap();
    }
    assert!(
        dr.list(&dr_prefix).await.unwrap().is_empty(),
        "dr looks empty"
    );
    let refused = dr
        .client()
        .delete_object()
        .bucket("dr-locked")
        .key(&data.key)
        .version_id(&data_version)
        .send()
        .await;
    assert!(refused.is_err(), "the locked version at dr was deleted");

    // A person's restore from dr: `sexton backup fetch` and `sexton binlog fetch` read the
    // recorded (locked) versions from under the ransom notes, each checked.
    let from_dr = dir.path().join("from-dr");
    let dr_binlogs = from_dr.join("binlog");
    let fetched = sexton_cli(
        &recovery_config,
        &[
            "backup",
            "fetch",
            taken[0].id.as_str(),
            "--cluster",
            CLUSTER,
            "--location",
            "dr",
            "--to",
            from_dr.to_str().unwrap(),
            "-o",
            "json",
        ],
    );
    assert!(
        fetched.status.success(),
        "backup fetch: {}",
        String::from_utf8_lossy(&fetched.stderr)
    );
    let dr_full = from_dr.join(taken[0].id.as_str()).join("backup.xbstream");
    assert_eq!(
        sexton_model::digest::sha256_hex(&std::fs::read(&dr_full).unwrap()),
        data.sha256.clone().unwrap(),
        "the copy at dr is the backup intake recorded"
    );
    let fetched = sexton_cli(
        &recovery_config,
        &[
            "binlog",
            "fetch",
            "--cluster",
            CLUSTER,
            "--location",
            "dr",
            "--until",
            &dr_target.to_rfc3339(),
            "--to",
            dr_binlogs.to_str().unwrap(),
            "-o",
            "json",
        ],
    );
    let stderr = String::from_utf8_lossy(&fetched.stderr).to_string();
    assert!(fetched.status.success(), "binlog fetch: {stderr}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&fetched.stdout).unwrap();
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r["version_id"].is_string()),
        "every segment read from beneath the ransom note: {rows:?}"
    );
    let expected = ids(&db.sql(&format!(
        "SELECT id FROM shop.w WHERE ts < '{dr_stop}' ORDER BY id"
    )));
    let after = ids(&db.sql(&format!(
        "SELECT id FROM shop.w WHERE ts >= '{dr_stop}' ORDER BY id"
    )));
    assert!(!expected.is_empty() && !after.is_empty());
    let restored = ids(&restore_verify(
        &from_dr.join("pitr"),
        &[
            "--check-query",
            check,
            "--binlog-dir",
            dr_binlogs.to_str().unwrap(),
            "--stop-datetime",
            &dr_stop,
        ],
        &[&dr_full],
    ));
    assert_eq!(
        restored,
        expected,
        "restored from dr to {dr_stop}: {} rows, {} expected; extra {:?}, missing {:?}",
        restored.len(),
        expected.len(),
        restored.difference(&expected).collect::<Vec<_>>(),
        expected.difference(&restored).collect::<Vec<_>>()
    );
    eprintln!(
        "restored {} from dr alone to {dr_stop}: {} rows, by {:?}",
        taken[0].id,
        restored.len(),
        test_started.elapsed()
    );

    // The same recovery as a drill through the fleet (issue 47): `sexton recovery drill` asks
    // for a restore test to that instant at dr; Sexton picks what dr restores it from, an
    // executor with only dr's credentials restores the chain with verify.sh, replays dr's
    // binlogs (from beneath the ransom notes) to the instant, and a query checks the rows.
    let drill_started = Instant::now();
    let (count, low, high, sum) = (
        expected.len(),
        expected.first().unwrap(),
        expected.last().unwrap(),
        expected.iter().sum::<u64>(),
    );
    let drill_query = format!(
        "SELECT 1 FROM shop.w HAVING COUNT(*) = {count} AND MIN(id) = {low} \
         AND MAX(id) = {high} AND SUM(id) = {sum}"
    );
    let drill_command = format!(
        "MARIADB_VERIFY_PORT={} MARIADB_VERIFY_QUERY='{drill_query}' {}",
        free_port(),
        recipe("verify.sh")
    );
    let drill_exec = ServiceProcess::start(
        "sexton",
        &[
            "exec",
            "--backup-command",
            "false",
            "--verify-command",
            &drill_command,
            "--cluster",
            CLUSTER,
            "--work-dir",
            dir.path().join("drill").to_str().unwrap(),
            "--timeout",
            "120s",
        ],
        &recovery_config,
        dir.path(),
    );
    let drill_at = dr_target.to_rfc3339();
    let drilled = sexton_cli(
        &recovery_config,
        &[
            "recovery",
            "drill",
            "--cluster",
            CLUSTER,
            "--at",
            &drill_at,
            "--location",
            "dr",
            "--timeout",
            "5m",
            "--wait",
            "-o",
            "json",
        ],
    );
    let stdout = String::from_utf8_lossy(&drilled.stdout).to_string();
    assert!(
        drilled.status.success(),
        "recovery drill: {stdout}\n{}\n{}",
        String::from_utf8_lossy(&drilled.stderr),
        drill_exec.logs()
    );
    let verdict: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(verdict["outcome"], "verified", "{verdict}");
    assert_eq!(verdict["location"], "dr", "{verdict}");
    assert_eq!(
        verdict["until"]
            .as_str()
            .map(|t| t.parse::<DateTime<Utc>>().unwrap()),
        Some(dr_target),
        "{verdict}"
    );
    let reason = verdict["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("log segments") && reason.contains("recovering to"),
        "{verdict}"
    );
    // The verdict is on the backup the drill restored, with the instant.
    let drilled_base = recovery_catalog
        .lookup(&CLUSTER.parse().unwrap(), &taken[1].id)
        .await
        .unwrap();
    let sexton_shared::catalog::Lookup::Live(drilled_base) = drilled_base else {
        panic!("{} left the catalog", taken[1].id);
    };
    let entry = drilled_base
        .value
        .verification
        .and_then(|v| v.history.into_iter().find(|e| e.until.is_some()))
        .expect("the drill's verdict on the backup it restored");
    assert_eq!(entry.until, Some(dr_target));
    // A drill to an instant nothing at dr reaches is refused, saying why.
    let too_early = (taken[0].started_at.unwrap().with_timezone(&Utc) - chrono::Duration::hours(1))
        .to_rfc3339();
    let refused = sexton_cli(
        &recovery_config,
        &[
            "recovery",
            "drill",
            "--cluster",
            CLUSTER,
            "--at",
            &too_early,
            "--location",
            "dr",
        ],
    );
    let stderr = String::from_utf8_lossy(&refused.stderr).to_string();
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("before the oldest restorable instant"),
        "{stderr}"
    );
    eprintln!(
        "drill from dr to {drill_at} through the fleet: {:?} ({reason})",
        drill_started.elapsed()
    );
    drop(drill_exec);

    db.stop();
    recovery.stop().await.unwrap();
    eprintln!("whole test: {:?}", test_started.elapsed());
}
