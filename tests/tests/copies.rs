//! Copies to a second location (issue 28), against two SeaweedFS servers as two regions, each
//! with its own credentials: copies land whole (chains and `metadata.json` last), the source
//! keeps what awaits a copy, a corrupt source object is refused and copied once mended, forged
//! jobs copy and count nothing, a copier killed mid-object and mid-chain leaves nothing counted
//! that is not whole, copy rules that cannot work are refused where they are written, each
//! location keeps what its own policy keeps (a record goes with the last place that holds its
//! backup), forged copy delete jobs delete nothing, the catalog comes back from a location
//! after the primary and the catalog are lost, and a location down for a while (minutes under
//! SEXTON_SOAK=1) delays copies and loses nothing.

mod support;

use std::time::Duration;

use async_nats::jetstream;
use chrono::{DateTime, FixedOffset};
use serde_json::json;
use sexton_model::{
    copies::{CopyDeleteJob, CopyJob, CopyState},
    names::{BackupId, ClusterName, LocationName},
    records::BackupRecord,
    wire::{self, ObjectDigest, RetentionSweep},
};
use sexton_shared::{
    binlog, catalog::Catalog, config::Config, nats::publish_once, object_store::ObjectStore,
    topology,
};
use sexton_tests::*;
use support::*;

const DR_KEY: &str = "dr-only-key";
const DR_SECRET: &str = "dr-only-secret";

fn at(text: &str) -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339(text).unwrap()
}

/// The primary and `dr` servers, the configuration naming both, and the fleet without an
/// executor or a copier (each test starts its copier when it wants one).
struct Regions {
    nats: Nats,
    _primary: S3,
    dr_server: S3,
    config: Config,
    fleet: Option<Fleet>,
    client: async_nats::Client,
    js: jetstream::Context,
    catalog: Catalog,
    source: ObjectStore,
    dr: ObjectStore,
}

const FLEET: Members = Members {
    scheduler: true,
    retention_worker: true,
    deleter: true,
    executor: false,
};

async fn regions(change: impl FnOnce(&mut Config)) -> Regions {
    let nats = Nats::start();
    let primary = S3::start();
    let dr_server = S3::start_as(DR_KEY, DR_SECRET);
    let mut config = config(&nats, &primary);
    add_location(&mut config, "dr", &dr_server, DR_KEY, DR_SECRET);
    change(&mut config);
    let fleet = Fleet::start(&config, FLEET);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topology = topology::ensure(&js, 1).await.unwrap();
    let source = object_store(&config).await;
    let dr = ObjectStore::connect(&config.locations["dr"].s3)
        .await
        .unwrap();
    Regions {
        nats,
        _primary: primary,
        dr_server,
        config,
        fleet: Some(fleet),
        client,
        js,
        catalog: Catalog::new(topology.catalog),
        source,
        dr,
    }
}

async fn create_copying_schedule(
    client: &async_nats::Client,
    name: &str,
    cluster: &str,
    keep_last: u32,
) {
    create_schedule(
        client,
        json!({"name": name, "cluster": cluster, "plan": "base",
               "cron": "0 3 * * *", "paused": true, "policy": {"keep_last": keep_last},
               "copies": [{"to": "dr", "policy": {"keep_last": 10}}]}),
    )
    .await;
}

fn id(text: &str) -> BackupId {
    BackupId::new(text).unwrap()
}

async fn record(catalog: &Catalog, cluster_name: &str, backup: &str) -> Option<BackupRecord> {
    catalog
        .get(&cluster(cluster_name), &id(backup))
        .await
        .unwrap()
        .map(|entry| entry.value)
}

/// Waits until backup `backup` counts at `dr`, and returns its record.
async fn copied(catalog: &Catalog, cluster_name: &str, backup: &str) -> BackupRecord {
    let dr = LocationName::new("dr").unwrap();
    eventually(
        &format!("backup {backup} copied to dr"),
        Duration::from_secs(90),
        || async {
            record(catalog, cluster_name, backup)
                .await
                .filter(|r| r.copies.contains_key(&dr))
        },
    )
    .await
}

/// Every object the record counts at dr is there with the size and SHA-256 intake recorded
/// at the source, under the same path below dr's prefix.
async fn check_whole_at_dr(dr: &ObjectStore, record: &BackupRecord) {
    let dr_name = LocationName::new("dr").unwrap();
    let copy = &record.copies[&dr_name];
    assert_eq!(copy.objects.len(), record.objects.len(), "{record:?}");
    for source in &record.objects {
        let key = sexton_model::copies::destination_key("backups", "dr-copies", &source.key)
            .expect("under the source's prefix");
        let body = dr.get(&key).await.unwrap().unwrap_or_else(|| {
            panic!(
                "{key} is not at dr though backup {} counts there",
                record.id
            )
        });
        assert_eq!(body.len() as u64, source.size, "{key}");
        assert_eq!(
            Some(sexton_model::digest::sha256_hex(&body)),
            source.sha256,
            "{key} at dr is not the object intake recorded"
        );
        assert!(
            copy.objects.iter().any(|o| o.key == key),
            "{key} not in the copy's objects"
        );
    }
}

async fn sweep(js: &jetstream::Context, cluster_name: &str, n: usize) {
    publish_once(
        js,
        sexton_shared::channels::SWEEPS.subject(&cluster(cluster_name)),
        &format!("test-sweep.{cluster_name}.{n}"),
        wire::encode(&RetentionSweep {
            schema_version: 1,
            cluster: cluster(cluster_name),
            requested_at: chrono::Utc::now(),
            scrub: false,
        }),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copies_land_whole_and_the_source_keeps_what_awaits_them() {
    let world = regions(|_| {}).await;
    // The two stores do not share credentials: the primary's keys are refused at dr.
    let mut borrowed = world.config.locations["dr"].s3.clone();
    borrowed.access_key_id = world.config.s3.access_key_id.clone();
    borrowed.secret_access_key = world.config.s3.secret_access_key.clone();
    let borrowed = ObjectStore::connect(&borrowed).await.unwrap();
    assert!(borrowed.put("dr-copies/probe", "x".into()).await.is_err());

    create_copying_schedule(&world.client, "db", "c1", 1).await;
    let b1 = Backup::full("b1", at("2026-03-01T00:00:00Z"), 10);
    let b2 = Backup::incremental("b2", "b1", at("2026-03-02T00:00:00Z"), 10);
    let b3 = Backup::full("b3", at("2026-03-03T00:00:00Z"), 10);
    for backup in [&b1, &b2, &b3] {
        report_backup(&world.js, &world.source, "c1", "base", "db", backup).await;
    }
    wait_for_completed(&world.catalog, "c1", 3).await;
    let first = record(&world.catalog, "c1", "b1").await.unwrap();
    assert_eq!(first.copy_to, vec![LocationName::new("dr").unwrap()]);

    // No copier yet: keep_last 1 would delete b1 and b2, but both await their copy to dr.
    sweep(&world.js, "c1", 1).await;
    let preview = api(
        &world.client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    let kept = preview[0]["decision"]["keep"].to_string();
    assert!(kept.contains("awaiting copy to dr"), "{preview:#}");
    assert_eq!(preview[0]["decision"]["delete"], json!([]), "{preview:#}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    for backup in ["b1", "b2", "b3"] {
        assert!(
            record(&world.catalog, "c1", backup).await.is_some(),
            "{backup} was deleted while it awaited its copy"
        );
    }

    let (stop, copier) = start_copier(&world.config);
    for backup in ["b1", "b2", "b3"] {
        let record = copied(&world.catalog, "c1", backup).await;
        check_whole_at_dr(&world.dr, &record).await;
    }

    // Copied, they are the source's policy's again: keep_last 1 keeps b3 alone there, and the
    // copies at dr stay, their records with them (dr's keep_last 10 keeps all three).
    sweep(&world.js, "c1", 2).await;
    eventually(
        "b1 and b2 deleted at the source",
        Duration::from_secs(60),
        || async {
            let b1 = record(&world.catalog, "c1", "b1").await?;
            let b2 = record(&world.catalog, "c1", "b2").await?;
            (!b1.held_at_primary() && !b2.held_at_primary()).then_some(())
        },
    )
    .await;
    let dr_name = LocationName::new("dr").unwrap();
    for backup in ["b1", "b2"] {
        let kept = record(&world.catalog, "c1", backup).await.unwrap();
        assert_eq!(kept.status_text(), "copies-only");
        assert_eq!(kept.copies[&dr_name].state, CopyState::Copied, "{backup}");
    }
    let at_dr = object_keys(&world.dr, "dr-copies/c1/").await;
    for backup in ["b1", "b2", "b3"] {
        assert!(
            at_dr.contains(&format!("dr-copies/c1/db/{backup}/metadata.json")),
            "{backup}'s copy left dr: {at_dr:?}"
        );
    }
    let primary = object_keys(&world.source, "backups/c1/").await;
    assert!(!primary.iter().any(|k| k.contains("/b1/")), "{primary:?}");
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
    drop(world.nats);
}

/// A backup reported now (completed `ago` before now), for rules that delay by real time.
fn recent(id: &str, parent: Option<&str>, ago: Duration) -> Backup {
    let completed = chrono::Utc::now().fixed_offset() - chrono::Duration::from_std(ago).unwrap();
    Backup {
        id: id.into(),
        full: parent.is_none(),
        parent: parent.map(str::to_string),
        started: completed - chrono::Duration::seconds(1),
        completed,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kept_rule_copies_after_its_delay_only_what_the_policy_there_keeps() {
    let world = regions(|config| {
        config.copier.binlog_interval = Duration::from_secs(1);
    })
    .await;
    let dr = LocationName::new("dr").unwrap();
    create_schedule(
        &world.client,
        json!({"name": "db", "cluster": "c1", "plan": "base",
               "cron": "0 3 * * *", "paused": true, "policy": {"keep_last": 10},
               "copies": [{"to": "dr", "policy": {"keep_last": 1}, "select": "kept",
                           "delay": "8s"}]}),
    )
    .await;
    let (stop, copier) = start_copier(&world.config);
    let b1 = recent("b1", None, Duration::from_secs(2));
    let b2 = recent("b2", None, Duration::from_secs(1));
    for backup in [&b1, &b2] {
        report_backup(&world.js, &world.source, "c1", "base", "db", backup).await;
    }
    wait_for_completed(&world.catalog, "c1", 2).await;
    // Their jobs came before their time: nothing is copied yet, both await at the source.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for backup in ["b1", "b2"] {
        let record = record(&world.catalog, "c1", backup).await.unwrap();
        assert!(
            record.copies.is_empty(),
            "{backup} copied before its delay: {record:?}"
        );
        assert_eq!(
            record.awaiting_copy().collect::<Vec<_>>(),
            [&dr],
            "{backup}"
        );
    }
    assert!(object_keys(&world.dr, "dr-copies/c1/").await.is_empty());

    // Once due: dr's keep_last 1, over what dr holds and what awaits it, keeps b2 alone, so
    // b1 is never copied (skipped, with the policy's reasons) and no longer awaited.
    let b2_copy = copied(&world.catalog, "c1", "b2").await;
    assert_eq!(b2_copy.copies[&dr].state, CopyState::Copied);
    check_whole_at_dr(&world.dr, &b2_copy).await;
    let skipped = copied(&world.catalog, "c1", "b1").await;
    let copy = &skipped.copies[&dr];
    assert_eq!(copy.state, CopyState::Skipped, "{skipped:?}");
    assert!(!copy.delete_reasons.is_empty(), "{copy:?}");
    assert!(skipped.awaiting_copy().next().is_none());
    assert!(!skipped.held_elsewhere());
    let at_dr = object_keys(&world.dr, "dr-copies/c1/").await;
    assert!(!at_dr.iter().any(|k| k.contains("/b1/")), "{at_dr:?}");
    let describe = api(
        &world.client,
        "backup",
        "describe",
        json!({"schema_version": 1, "cluster": "c1", "id": "b1"}),
    )
    .await
    .unwrap();
    assert!(describe.to_string().contains("skipped"), "{describe:#}");

    // An incremental built on the skipped b1 is the newest, so dr keeps it, and it cannot
    // count there without its parent: b1 is copied after all, first.
    let b3 = recent("b3", Some("b1"), Duration::from_secs(1));
    report_backup(&world.js, &world.source, "c1", "base", "db", &b3).await;
    let b3_copy = copied(&world.catalog, "c1", "b3").await;
    check_whole_at_dr(&world.dr, &b3_copy).await;
    let parent = record(&world.catalog, "c1", "b1").await.unwrap();
    assert_eq!(parent.copies[&dr].state, CopyState::Copied, "{parent:?}");
    assert!(parent.copies[&dr].copied_at <= b3_copy.copies[&dr].copied_at);
    check_whole_at_dr(&world.dr, &parent).await;
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
    drop(world.nats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_copier_replicas_copy_each_backup_once_and_leave_nothing_uncounted() {
    let world = regions(|config| {
        config.copier.binlog_interval = Duration::from_secs(1);
    })
    .await;
    // A lease no copier took, claiming the cluster for a year: a claim, not a reason to wait.
    let leases = topology::copy_leases_bucket(&world.js, 1).await.unwrap();
    leases
        .put(
            "c1",
            serde_json::to_vec(&json!({"holder": "intruder", "until": "2027-11-28T00:00:00Z"}))
                .unwrap()
                .into(),
        )
        .await
        .unwrap();
    // dr keeps only the newest copy: each copy that lands lets the one before it go, while
    // both replicas' jobs and passes work on the same cluster.
    create_schedule(
        &world.client,
        json!({"name": "db", "cluster": "c1", "plan": "base",
               "cron": "0 3 * * *", "paused": true, "policy": {"keep_last": 1},
               "copies": [{"to": "dr", "policy": {"keep_last": 1}}]}),
    )
    .await;
    let (stop_a, copier_a) = start_copier(&world.config);
    // The second replica is `sexton serve copier`, a process of its own (issue 48: `serve`
    // starts every service, the copier included).
    let mut copier_b = std::process::Command::new(service_binary("sexton"))
        .args(["serve", "copier"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(config_env(&world.config))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting sexton serve copier");
    let ids: Vec<String> = (1..=8).map(|n| format!("b{n}")).collect();
    for (n, id) in ids.iter().enumerate() {
        let backup = Backup::full(
            id,
            at("2026-03-01T00:00:00Z") + chrono::Duration::days(n as i64),
            10,
        );
        report_backup(&world.js, &world.source, "c1", "base", "db", &backup).await;
        if n % 3 == 2 {
            sweep(&world.js, "c1", n).await;
        }
    }
    let newest = copied(&world.catalog, "c1", "b8").await;
    check_whole_at_dr(&world.dr, &newest).await;
    // Settled: each place down to its newest, every record but b8's gone with its places.
    sweep(&world.js, "c1", 100).await;
    eventually(
        "both places down to b8",
        Duration::from_secs(120),
        || async {
            for id in &ids[..7] {
                if record(&world.catalog, "c1", id).await.is_some() {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    // Nothing at dr that no copy counts: every object there is b8's.
    let at_dr = object_keys(&world.dr, "dr-copies/c1/").await;
    let dr = LocationName::new("dr").unwrap();
    let counted: Vec<String> = record(&world.catalog, "c1", "b8").await.unwrap().copies[&dr]
        .objects
        .iter()
        .map(|o| o.key.clone())
        .collect();
    let uncounted: Vec<&String> = at_dr
        .iter()
        .filter(|key| !counted.contains(key) && !key.contains("/binlog/"))
        .collect();
    assert!(
        uncounted.is_empty(),
        "objects at dr that no copy counts: {uncounted:?}"
    );
    stop_a.trigger();
    copier_a.await.unwrap().unwrap();
    assert!(
        copier_b.try_wait().unwrap().is_none(),
        "sexton serve copier died"
    );
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &copier_b.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || copier_b.wait().unwrap())
        .await
        .unwrap();
    assert!(
        status.success(),
        "sexton serve copier stopped with {status}"
    );
    world.fleet.unwrap().stop().await.unwrap();
    drop(world.nats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_copy_jobs_copy_and_count_nothing() {
    let world = regions(|_| {}).await;
    create_copying_schedule(&world.client, "db", "c1", 5).await;
    // A schedule without copy rules: its backups go nowhere.
    create_policy_schedule(
        &world.client,
        "plain",
        "c2",
        "base",
        json!({"keep_last": 5}),
    )
    .await;
    let b1 = Backup::full("b1", at("2026-03-01T00:00:00Z"), 10);
    report_backup(&world.js, &world.source, "c2", "base", "plain", &b1).await;
    wait_for_completed(&world.catalog, "c2", 1).await;
    let real = record(&world.catalog, "c2", "b1").await.unwrap();
    assert!(real.copy_to.is_empty());

    let job = |cluster_name: &str, backup: &str, uid: &str, location: &str| CopyJob {
        schema_version: 1,
        cluster: ClusterName::new(cluster_name).unwrap(),
        backup_id: id(backup),
        uid: uid.into(),
        location: LocationName::new(location).unwrap(),
    };
    let forged: Vec<(String, bytes::Bytes)> = vec![
        // A backup that was never recorded.
        (
            "c1".into(),
            wire::encode(&job("c1", "ghost", "u-ghost", "dr")),
        ),
        // A real backup whose schedule has no copy rule.
        ("c2".into(), wire::encode(&job("c2", "b1", &real.uid, "dr"))),
        // The right backup with another uid.
        (
            "c2".into(),
            wire::encode(&job("c2", "b1", "not-its-uid", "dr")),
        ),
        // A location this fleet does not have.
        (
            "c2".into(),
            wire::encode(&job("c2", "b1", &real.uid, "elsewhere")),
        ),
        // The body names another cluster than the subject.
        ("c1".into(), wire::encode(&job("c2", "b1", &real.uid, "dr"))),
        // Not a copy job at all.
        (
            "c1".into(),
            bytes::Bytes::from_static(b"{\"schema_version\": 1, \"cluster\": 5}"),
        ),
        ("c1".into(), bytes::Bytes::from_static(b"not json")),
    ];
    let count = forged.len();
    for (n, (subject_cluster, body)) in forged.into_iter().enumerate() {
        publish_once(
            &world.js,
            sexton_shared::channels::COPY_JOBS.subject(&cluster(&subject_cluster)),
            &format!("forged.{n}"),
            body,
        )
        .await
        .unwrap();
    }
    let (stop, copier) = start_copier(&world.config);
    // Each is refused once (terminated, an incident), never retried for ever.
    eventually(
        "the forged jobs refused",
        Duration::from_secs(60),
        || async {
            let refused = incidents(&world.js)
                .await
                .iter()
                .filter(|i| i.contains("\"service\":\"copier\""))
                .count();
            let backlog = consumer_backlog(
                &world.js,
                topology::STREAM_COPIES,
                topology::CONSUMER_COPIER,
            )
            .await
            .unwrap_or(u64::MAX);
            (refused >= count && backlog == 0).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        object_keys(&world.dr, "").await.is_empty(),
        "forged jobs wrote at dr"
    );
    let after = record(&world.catalog, "c2", "b1").await.unwrap();
    assert_eq!(after, real, "a forged job changed the record");
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_corrupt_source_object_is_refused_then_copied_once_mended() {
    let world = regions(|_| {}).await;
    create_copying_schedule(&world.client, "db", "c1", 5).await;
    let b1 = Backup::full("b1", at("2026-03-01T00:00:00Z"), 10);
    report_backup(&world.js, &world.source, "c1", "base", "db", &b1).await;
    wait_for_completed(&world.catalog, "c1", 1).await;
    let data_key = b1.artifacts("c1", "db")[0].clone();
    let genuine = world.source.get(&data_key).await.unwrap().unwrap();
    // Same size, other bytes: only the checksum can tell.
    let mut rotten = genuine.to_vec();
    rotten[0] ^= 0xff;
    world.source.put(&data_key, rotten.into()).await.unwrap();

    let (stop, copier) = start_copier(&world.config);
    eventually(
        "the corrupt object refused",
        Duration::from_secs(60),
        || async {
            incidents(&world.js)
                .await
                .iter()
                .any(|i| i.contains("copy-refused") && i.contains("b1"))
                .then_some(())
        },
    )
    .await;
    let record_now = record(&world.catalog, "c1", "b1").await.unwrap();
    assert!(record_now.copies.is_empty(), "a corrupt copy counted");
    assert!(
        object_keys(&world.dr, "").await.is_empty(),
        "a refused object was written at dr"
    );
    // Mended at the source: the job, retried, copies it.
    world.source.put(&data_key, genuine).await.unwrap();
    let record = copied(&world.catalog, "c1", "b1").await;
    check_whole_at_dr(&world.dr, &record).await;
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
}

/// Issue 54: a source object gone is evidence, not a transient failure. The copy is refused
/// (an incident), the copier asks for a scrub, the backup is found `missing`, and its copy is
/// not attempted again; the others are copied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_source_object_gone_makes_the_backup_missing_not_a_copy_retried_forever() {
    let world = regions(|config| {
        // No scheduled scrub: the copier's evidence is what finds it.
        config.scheduler.scrub_interval = Duration::ZERO;
    })
    .await;
    create_copying_schedule(&world.client, "db", "c1", 5).await;
    let b1 = Backup::full("b1", at("2026-03-01T00:00:00Z"), 10);
    let b2 = Backup::full("b2", at("2026-03-02T00:00:00Z"), 10);
    report_backup(&world.js, &world.source, "c1", "base", "db", &b1).await;
    report_backup(&world.js, &world.source, "c1", "base", "db", &b2).await;
    wait_for_completed(&world.catalog, "c1", 2).await;
    let data_key = b1.artifacts("c1", "db")[0].clone();
    let report = world
        .source
        .delete_keys_each(std::slice::from_ref(&data_key))
        .await
        .unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed);

    let (stop, copier) = start_copier(&world.config);
    let missing = eventually(
        "b1 found missing after its copy was refused",
        Duration::from_secs(60),
        || async {
            let record = record(&world.catalog, "c1", "b1").await?;
            (record.status == sexton_model::records::BackupStatus::Missing).then_some(record)
        },
    )
    .await;
    assert!(
        missing
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains(&data_key),
        "{:?}",
        missing.last_error
    );
    assert!(missing
        .copies
        .values()
        .all(|c| c.state != CopyState::Copied));
    assert!(
        incidents(&world.js)
            .await
            .iter()
            .any(|i| i.contains("copy-refused") && i.contains("b1")),
        "no copy-refused incident"
    );
    let b2_copied = copied(&world.catalog, "c1", "b2").await;
    check_whole_at_dr(&world.dr, &b2_copied).await;
    // b1's job is settled: nothing of it waits in the copy stream.
    eventually("the copy jobs settled", Duration::from_secs(60), || async {
        (consumer_backlog(
            &world.js,
            topology::STREAM_COPIES,
            topology::CONSUMER_COPIER,
        )
        .await
            == Some(0))
        .then_some(())
    })
    .await;
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
}

/// Writes a backup with one large object (a multipart copy) and reports it.
async fn report_large(world: &Regions, cluster_name: &str, backup: &Backup, size: usize) {
    let [data_key, metadata_key] = backup.artifacts(cluster_name, "db");
    let mut body = vec![0u8; size];
    let mut rng = Rng::seeded(size as u64 ^ backup.id.len() as u64);
    for chunk in body.chunks_mut(8) {
        let n = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&n[..chunk.len()]);
    }
    let digest = ObjectDigest {
        key: data_key.clone(),
        size: body.len() as u64,
        sha256: Some(sexton_model::digest::sha256_hex(&body)),
        version_id: None,
    };
    world.source.put(&data_key, body.into()).await.unwrap();
    let mut report = completed_report(cluster_name, "base", "db", backup);
    report.size_bytes = Some(size as u64);
    report.objects = vec![digest];
    let document =
        sexton_model::metadata::BackupMetadata::describe(&report, chrono::Utc::now()).encode();
    report.objects.push(ObjectDigest {
        key: metadata_key.clone(),
        size: document.len() as u64,
        sha256: Some(sexton_model::digest::sha256_hex(&document)),
        version_id: None,
    });
    world
        .source
        .put(&metadata_key, document.into())
        .await
        .unwrap();
    publish_once(
        &world.js,
        sexton_shared::channels::REPORTS.subject(&cluster(cluster_name)),
        &format!("large-report.{}", backup.id),
        wire::encode(&report),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copier_killed_mid_object_and_mid_chain_leaves_nothing_counted_that_is_not_whole() {
    let world = regions(|config| {
        // 5 MiB parts, two in flight: a 12 MiB object is a three-part upload.
        config.copier.part_size = 5 * 1024 * 1024;
        config.copier.parts_in_flight = 2;
        config.copier.concurrency = 1;
        config.copier.ack_wait = Duration::from_secs(5);
    })
    .await;
    create_copying_schedule(&world.client, "db", "c1", 10).await;
    let chain = [
        Backup::full("k1", at("2026-03-01T00:00:00Z"), 10),
        Backup::incremental("k2", "k1", at("2026-03-02T00:00:00Z"), 10),
        Backup::incremental("k3", "k2", at("2026-03-03T00:00:00Z"), 10),
        Backup::full("k4", at("2026-03-04T00:00:00Z"), 10),
    ];
    // The chain's tip reported first: its job must copy k1 and k2 before it.
    for backup in chain.iter().rev() {
        report_large(&world, "c1", backup, 12 * 1024 * 1024).await;
    }
    wait_for_completed(&world.catalog, "c1", chain.len()).await;

    let dir = tempfile::tempdir().unwrap();
    let mut copier = ServiceProcess::start("sexton-copier", &[], &world.config, dir.path());
    let mut rng = Rng::from_env();
    let dr_name = LocationName::new("dr").unwrap();
    for round in 0..6 {
        tokio::time::sleep(rng.millis(300, 2500)).await;
        copier.kill();
        // Whatever counts at dr now is whole there; a chain counts only with its ancestors.
        for backup in &chain {
            let record = record(&world.catalog, "c1", &backup.id).await.unwrap();
            if record.copies.contains_key(&dr_name) {
                check_whole_at_dr(&world.dr, &record).await;
                if let Some(parent) = &record.parent {
                    let parent = self::record(&world.catalog, "c1", parent.as_str())
                        .await
                        .unwrap();
                    assert!(
                        parent.copies.contains_key(&dr_name),
                        "round {round}: {} counts at dr without its parent {}",
                        record.id,
                        parent.id
                    );
                }
            }
        }
        copier.restart();
    }
    for backup in &chain {
        let record = copied(&world.catalog, "c1", &backup.id).await;
        check_whole_at_dr(&world.dr, &record).await;
    }
    copier.kill();
    world.fleet.unwrap().stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_rules_that_cannot_work_are_refused_where_they_are_written() {
    let nats = Nats::start();
    let dr = S3::start_as(DR_KEY, DR_SECRET);
    let mut config = nats_config(&nats);
    add_location(&mut config, "dr", &dr, DR_KEY, DR_SECRET);
    let fleet = Fleet::start(&config, SCHEDULER_ONLY);
    let client = async_nats::connect(nats.url()).await.unwrap();
    // The API answers once the scheduler runs.
    create_schedule(
        &client,
        json!({"name": "other", "cluster": "c0", "plan": "base",
                                    "cron": "@daily"}),
    )
    .await;
    let refused = [
        (
            json!([{"to": "moon", "policy": {"keep_last": 3}}]),
            "no such location",
        ),
        (
            json!([{"to": "primary", "policy": {"keep_last": 3}}]),
            "already at primary",
        ),
        (json!([{"to": "dr", "policy": {}}]), "no retention rule"),
        (
            json!([{"to": "dr", "policy": {"keep_daily": 7}, "storage_class": "GLACIER_IR"}]),
            "at least 90 days",
        ),
        (
            json!([{"to": "dr", "policy": {"keep_yearly": 7}, "storage_class": "DEEP_ARCHIVE"}]),
            "select: fulls",
        ),
        (
            json!([{"to": "dr", "policy": {"keep_last": 3}, "storage_class": "COLD"}]),
            "unknown storage class",
        ),
        (
            json!([{"to": "dr", "policy": {"keep_last": 3}, "colour": "red"}]),
            "unknown field",
        ),
        (
            json!([{"to": "dr", "policy": {"keep_daily": 14},
                    "transitions": [{"after_days": 30, "storage_class": "STANDARD_IA"}]}]),
            "never happens",
        ),
        (
            json!([{"to": "dr", "policy": {"keep_yearly": 7},
                    "transitions": [{"after_days": 30, "storage_class": "GLACIER"}]}]),
            "select: fulls",
        ),
        (
            json!([{"to": "dr", "policy": {"keep_yearly": 7},
                    "transitions": [{"after_days": 90, "storage_class": "GLACIER_IR"},
                                    {"after_days": 30, "storage_class": "STANDARD_IA"}]}]),
            "increasing",
        ),
        (
            json!([{"to": "dr", "policy": {"keep_last": 3}}, {"to": "dr", "policy": {"keep_last": 4}}]),
            "two copy rules",
        ),
        (
            json!([{"to": "dr", "policy": {"keep_last": 3}, "select": "kept", "delay": "5d"}]),
            "nothing would ever be copied",
        ),
        (
            json!([{"to": "dr", "policy": {"keep_last": 3}, "delay": "400d"}]),
            "longer than 366 days",
        ),
        (
            json!([{"to": "dr", "policy": {"keep_last": 3}, "select": "newest"}]),
            "unknown variant",
        ),
    ];
    for (copies, why) in &refused {
        let err = api(
            &client,
            "schedule",
            "create",
            json!({"schema_version": 1, "name": "db", "cluster": "c1", "plan": "base",
                   "cron": "@daily", "policy": {"keep_last": 3}, "copies": copies}),
        )
        .await
        .expect_err(&format!("{copies} accepted"));
        assert!(err.to_string().contains(why), "{copies}: {err}");
        assert!(
            api(
                &client,
                "schedule",
                "get",
                json!({"schema_version": 1, "name": "db"})
            )
            .await
            .is_err(),
            "{copies}: a refused schedule was created"
        );
    }
    // A good rule is taken; an update to a bad one is refused and changes nothing.
    api(
        &client,
        "schedule",
        "create",
        json!({"schema_version": 1, "name": "db", "cluster": "c1", "plan": "base",
               "cron": "@daily", "policy": {"keep_last": 3},
               "copies": [{"to": "dr", "policy": {"keep_monthly": 12}, "storage_class": "GLACIER_IR"}]}),
    )
    .await
    .unwrap();
    for (copies, why) in &refused {
        let err = api(
            &client,
            "schedule",
            "update",
            json!({"schema_version": 1, "name": "db", "copies": copies}),
        )
        .await
        .expect_err(&format!("update to {copies} accepted"));
        assert!(err.to_string().contains(why), "update {copies}: {err}");
    }
    let js = jetstream::new(client.clone());
    let (stored, _) = schedule_record(&js, "db").await.expect("the schedule");
    assert_eq!(stored.copies.len(), 1);
    assert_eq!(
        stored.copies[0].storage_class.as_deref(),
        Some("GLACIER_IR")
    );
    fleet.stop().await.unwrap();
}

/// The keys of backup `backup` of c1 at dr.
async fn at_dr(world: &Regions, backup: &str) -> Vec<String> {
    object_keys(&world.dr, &format!("dr-copies/c1/db/{backup}/"))
        .await
        .into_iter()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_location_keeps_by_its_own_policy_and_a_record_goes_with_its_last_place() {
    let world = regions(|_| {}).await;
    // primary keeps the newest; dr the newest two.
    create_schedule(
        &world.client,
        json!({"name": "db", "cluster": "c1", "plan": "base",
               "cron": "0 3 * * *", "paused": true, "policy": {"keep_last": 1},
               "copies": [{"to": "dr", "policy": {"keep_last": 2}}]}),
    )
    .await;
    let b1 = Backup::full("b1", at("2026-03-01T00:00:00Z"), 10);
    let b2 = Backup::incremental("b2", "b1", at("2026-03-02T00:00:00Z"), 10);
    let b3 = Backup::full("b3", at("2026-03-03T00:00:00Z"), 10);
    let b4 = Backup::full("b4", at("2026-03-04T00:00:00Z"), 10);
    for backup in [&b1, &b2, &b3, &b4] {
        report_backup(&world.js, &world.source, "c1", "base", "db", backup).await;
    }
    wait_for_completed(&world.catalog, "c1", 4).await;
    let (stop, copier) = start_copier(&world.config);
    for backup in ["b1", "b2", "b3", "b4"] {
        copied(&world.catalog, "c1", backup).await;
    }

    // The next runs: primary lets b1..b3 go, dr lets b1 and b2 go (b2's chain with it).
    sweep(&world.js, "c1", 1).await;
    eventually(
        "each place down to what its policy keeps",
        Duration::from_secs(90),
        || async {
            let gone = record(&world.catalog, "c1", "b1").await.is_none()
                && record(&world.catalog, "c1", "b2").await.is_none();
            let b3 = record(&world.catalog, "c1", "b3").await?;
            (gone && !b3.held_at_primary()).then_some(())
        },
    )
    .await;
    let dr = LocationName::new("dr").unwrap();
    let b3_record = record(&world.catalog, "c1", "b3").await.unwrap();
    assert_eq!(b3_record.copies[&dr].state, CopyState::Copied);
    let b4_record = record(&world.catalog, "c1", "b4").await.unwrap();
    assert!(b4_record.held_at_primary());
    assert_eq!(b4_record.copies[&dr].state, CopyState::Copied);
    let primary = object_keys(&world.source, "backups/c1/").await;
    for backup in ["b1", "b2", "b3"] {
        assert!(
            !primary.iter().any(|k| k.contains(&format!("/{backup}/"))),
            "{backup} still at primary: {primary:?}"
        );
        if backup != "b3" {
            assert!(at_dr(&world, backup).await.is_empty(), "{backup} at dr");
        }
    }
    assert!(primary.iter().any(|k| k.contains("/b4/")));
    check_whole_at_dr(&world.dr, &b3_record).await;
    check_whole_at_dr(&world.dr, &b4_record).await;
    // describe says where b3 is and what each place decides about it.
    let described = api(
        &world.client,
        "backup",
        "describe",
        json!({"schema_version": 1, "cluster": "c1", "id": "b3"}),
    )
    .await
    .unwrap();
    assert_eq!(
        described["retention"]["verdict"],
        json!("gone"),
        "{described:#}"
    );
    assert_eq!(
        described["copies_retention"]["dr"]["verdict"],
        json!("keep"),
        "{described:#}"
    );
    // A user's delete of a backup gone from primary is refused, and names where it is.
    let refused = api(
        &world.client,
        "backup",
        "delete",
        json!({"schema_version": 1, "cluster": "c1", "id": "b3", "remote": true}),
    )
    .await
    .unwrap_err();
    assert!(refused.message.contains("copies at dr"), "{refused:?}");

    // dr now keeps one: b3's copy goes, and with it the record (nothing holds b3 any more).
    // The change deletes a copy at once, so it needs a confirmation, as a policy change does.
    let change = json!({"schema_version": 1, "name": "db",
                        "copies": [{"to": "dr", "policy": {"keep_last": 1}}]});
    let refused = api(&world.client, "schedule", "update", change.clone())
        .await
        .unwrap_err();
    assert!(refused.needs_confirmation(), "{refused:?}");
    assert!(
        refused.message.contains("copies at dr") && refused.message.contains("b3"),
        "{refused:?}"
    );
    assert!(record(&world.catalog, "c1", "b3").await.is_some());
    let mut confirmed = change;
    confirmed["confirm"] = json!(true);
    let reply = api(&world.client, "schedule", "update", confirmed)
        .await
        .unwrap();
    assert_eq!(
        reply["copy_changes"]["dr"]["deleted"][0]["id"],
        json!("b3"),
        "{reply:#}"
    );
    sweep(&world.js, "c1", 2).await;
    eventually(
        "b3's record gone with its last copy",
        Duration::from_secs(60),
        || async {
            record(&world.catalog, "c1", "b3")
                .await
                .is_none()
                .then_some(())
        },
    )
    .await;
    assert!(at_dr(&world, "b3").await.is_empty(), "b3's copy left at dr");
    let b4_after = record(&world.catalog, "c1", "b4").await.unwrap();
    assert!(b4_after.held_at_primary());
    assert_eq!(b4_after.copies[&dr].state, CopyState::Copied);
    check_whole_at_dr(&world.dr, &b4_after).await;

    // The audit says what went where: marks, claims before anything went, deletions.
    let audit: Vec<sexton_shared::audit::AuditEntry> =
        read_stream(&world.js, topology::STREAM_AUDIT, "sexton.v1.audit.>")
            .await
            .iter()
            .map(|m| serde_json::from_slice(&m.payload).unwrap())
            .collect();
    // In order: each mark audited when made (a run that publishes its job again does not
    // audit it again), before any deleter could claim it.
    let kinds_for = |id: &str| -> Vec<&str> {
        let mut kinds: Vec<&str> = audit
            .iter()
            .filter(|e| e.mentions(id) && e.event.kind().starts_with("cop"))
            .map(|e| e.event.kind())
            .collect();
        kinds.dedup();
        kinds
    };
    for backup in ["b1", "b2", "b3"] {
        assert_eq!(
            kinds_for(backup),
            ["copies-marked", "copy-claimed", "copy-deleted"],
            "{backup}"
        );
    }
    assert!(kinds_for("b4").is_empty());
    let removed_with_b3 = audit.iter().any(|e| {
        matches!(&e.event, sexton_shared::audit::AuditEvent::CopyDeleted { record_removed: true, backups, .. } if backups[0].id == "b3")
    });
    assert!(removed_with_b3, "b3's record went with its last copy");
    assert!(
        !audit
            .iter()
            .any(|e| e.event.kind() == "records-removed" && e.mentions("b3")),
        "the deleter at primary said it removed b3's record, which stayed for its copy"
    );
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_copy_delete_jobs_delete_nothing() {
    let world = regions(|_| {}).await;
    create_copying_schedule(&world.client, "db", "c1", 5).await;
    let b1 = Backup::full("b1", at("2026-03-01T00:00:00Z"), 10);
    report_backup(&world.js, &world.source, "c1", "base", "db", &b1).await;
    wait_for_completed(&world.catalog, "c1", 1).await;
    let (stop, copier) = start_copier(&world.config);
    let real = copied(&world.catalog, "c1", "b1").await;
    let before = at_dr(&world, "b1").await;
    assert!(!before.is_empty());
    let revision = world
        .catalog
        .get(&cluster("c1"), &id("b1"))
        .await
        .unwrap()
        .unwrap()
        .revision;

    let job = |backup: &str, uid: &str, location: &str, revision: u64| CopyDeleteJob {
        schema_version: 1,
        cluster: cluster("c1"),
        backup_id: id(backup),
        uid: uid.into(),
        location: LocationName::new(location).unwrap(),
        revision,
        reasons: vec!["forged".into()],
    };
    let forged: Vec<(String, bytes::Bytes)> = vec![
        // The copy is not marked: a real revision claims a mark that was never made.
        (
            "c1".into(),
            wire::encode(&job("b1", &real.uid, "dr", revision)),
        ),
        // A revision never stored.
        (
            "c1".into(),
            wire::encode(&job("b1", &real.uid, "dr", revision + 1000)),
        ),
        // Another uid.
        (
            "c1".into(),
            wire::encode(&job("b1", "not-its-uid", "dr", revision)),
        ),
        // A location this fleet does not have.
        (
            "c1".into(),
            wire::encode(&job("b1", &real.uid, "elsewhere", revision)),
        ),
        // The body names another cluster than the subject.
        (
            "c2".into(),
            wire::encode(&job("b1", &real.uid, "dr", revision)),
        ),
        ("c1".into(), bytes::Bytes::from_static(b"not json")),
    ];
    let count = forged.len();
    for (n, (subject_cluster, body)) in forged.into_iter().enumerate() {
        publish_once(
            &world.js,
            sexton_shared::channels::COPY_DELETE_JOBS.subject(&cluster(&subject_cluster)),
            &format!("forged-delete.{n}"),
            body,
        )
        .await
        .unwrap();
    }
    eventually(
        "the forged copy delete jobs refused",
        Duration::from_secs(60),
        || async {
            let refused = incidents(&world.js)
                .await
                .iter()
                .filter(|i| i.contains("\"service\":\"deleter\"") && i.contains("copy-delete"))
                .count();
            let backlog = consumer_backlog(
                &world.js,
                topology::STREAM_JOBS,
                topology::CONSUMER_DELETER_COPIES,
            )
            .await
            .unwrap_or(u64::MAX);
            (refused >= count && backlog == 0).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        at_dr(&world, "b1").await,
        before,
        "a forged job deleted at dr"
    );
    let after = record(&world.catalog, "c1", "b1").await.unwrap();
    assert_eq!(after, real, "a forged job changed the record");
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
}

/// A fleet on a fresh NATS server (a lost catalog) over the same two stores: its client,
/// catalog and fleet; the caller keeps the server.
/// A closed log file as `sexton binlog append` ships it: the object first, then its entry in
/// the index with its size and SHA-256. `indexed` is the body the entry describes (a corrupt
/// object differs from it).
async fn ship_segment(
    store: &ObjectStore,
    name: &str,
    first: &str,
    last: Option<&str>,
    body: &[u8],
    indexed: &[u8],
) {
    let key = format!("backups/c1/binlog/{name}");
    store.put(&key, body.to_vec().into()).await.unwrap();
    let mut segment = binlog::IndexSegment::new(key, Some(at(first)), last.map(at));
    segment.extra.insert(
        "sha256".into(),
        json!(sexton_model::digest::sha256_hex(indexed)),
    );
    segment
        .extra
        .insert("size".into(), json!(indexed.len() as u64));
    binlog::store::update(
        store,
        "backups/c1/binlog/_index.json",
        "backups/c1/binlog/",
        |index| index.apply_appends(std::slice::from_ref(&segment)) > 0,
    )
    .await
    .unwrap();
}

/// The segment names dr's index lists, after checking the index parses there.
async fn dr_segments(dr: &ObjectStore) -> Vec<String> {
    match dr.get("dr-copies/c1/binlog/_index.json").await.unwrap() {
        None => Vec::new(),
        Some(body) => binlog::BinlogIndex::parse_for(&body, "dr-copies/c1/binlog/")
            .expect("dr's index parses")
            .segments
            .iter()
            .map(|s| s.key.rsplit('/').next().unwrap().to_string())
            .collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_binlog_archive_follows_its_backups_segment_by_segment_index_last() {
    let world = regions(|config| {
        config.copier.binlog_interval = Duration::from_secs(1);
    })
    .await;
    create_copying_schedule(&world.client, "db", "c1", 10).await;
    let body = |name: &str| format!("binlog events of {name} ").repeat(500).into_bytes();
    // s1 ends before the only backup starts: no copy there needs it. s4 is still being
    // written (no last event).
    for (name, first, last) in [
        ("s1", "2026-02-28T20:00:00Z", Some("2026-02-28T23:00:00Z")),
        ("s2", "2026-02-28T23:00:00Z", Some("2026-03-01T12:00:00Z")),
        ("s3", "2026-03-01T12:00:00Z", Some("2026-03-02T00:00:00Z")),
        ("s4", "2026-03-02T00:00:00Z", None),
    ] {
        ship_segment(&world.source, name, first, last, &body(name), &body(name)).await;
    }
    let (stop, copier) = start_copier(&world.config);
    // No backup at dr yet: no segment is needed there.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(dr_segments(&world.dr).await, Vec::<String>::new());

    let b1 = Backup::full("b1", at("2026-03-01T00:00:00Z"), 10);
    report_backup(&world.js, &world.source, "c1", "base", "db", &b1).await;
    copied(&world.catalog, "c1", "b1").await;
    eventually(
        "s2 and s3 indexed at dr",
        Duration::from_secs(30),
        || async { (dr_segments(&world.dr).await == ["s2", "s3"]).then_some(()) },
    )
    .await;
    for name in ["s2", "s3"] {
        let there = world
            .dr
            .get(&format!("dr-copies/c1/binlog/{name}"))
            .await
            .unwrap()
            .expect("indexed, so there");
        assert_eq!(there, body(name), "{name} at dr is not the source's");
    }
    let index = world
        .dr
        .get("dr-copies/c1/binlog/_index.json")
        .await
        .unwrap()
        .unwrap();
    let index = binlog::BinlogIndex::parse(&index).unwrap();
    assert_eq!(
        index.segments[0].first_event,
        Some(at("2026-02-28T23:00:00Z"))
    );
    assert_eq!(
        index.segments[1].last_event,
        Some(at("2026-03-02T00:00:00Z"))
    );
    assert_eq!(
        index.segments[1].extra["sha256"],
        json!(sexton_model::digest::sha256_hex(&body("s3")))
    );
    assert!(!object_keys(&world.dr, "dr-copies/c1/binlog/")
        .await
        .iter()
        .any(|key| key.ends_with("/s1") || key.ends_with("/s4")));

    // Shipped later, between backups: the periodic pass copies it. s5 is corrupt at the
    // source (same size, other bytes): refused with an incident, and s6 after it waits, so
    // the archive at dr never has a hole the source's has not.
    let good = body("s5");
    let mut bad = good.clone();
    bad[7] ^= 1;
    ship_segment(
        &world.source,
        "s5",
        "2026-03-02T00:00:00Z",
        Some("2026-03-02T06:00:00Z"),
        &bad,
        &good,
    )
    .await;
    ship_segment(
        &world.source,
        "s6",
        "2026-03-02T06:00:00Z",
        Some("2026-03-02T12:00:00Z"),
        &body("s6"),
        &body("s6"),
    )
    .await;
    let incident = eventually(
        "the corrupt segment refused",
        Duration::from_secs(30),
        || async {
            sexton_tests::fixtures::incidents(&world.js)
                .await
                .into_iter()
                .find(|i| i.kind == "copy-binlog-refused" && i.reason.contains("binlog/s5"))
        },
    )
    .await;
    assert_eq!(incident.cluster.as_deref(), Some("c1"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(dr_segments(&world.dr).await, ["s2", "s3"]);
    // One incident for the problem, not one per pass.
    let reported = sexton_tests::fixtures::incidents(&world.js)
        .await
        .into_iter()
        .filter(|i| i.kind == "copy-binlog-refused")
        .count();
    assert_eq!(reported, 1);

    // Mended at the source: both land, in order.
    world
        .source
        .put("backups/c1/binlog/s5", good.clone().into())
        .await
        .unwrap();
    eventually(
        "s5 and s6 indexed at dr",
        Duration::from_secs(30),
        || async { (dr_segments(&world.dr).await == ["s2", "s3", "s5", "s6"]).then_some(()) },
    )
    .await;
    assert_eq!(
        world
            .dr
            .get("dr-copies/c1/binlog/s5")
            .await
            .unwrap()
            .unwrap(),
        good
    );
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
    drop(world.nats);
}

/// Whether the primary's binlog index lists segment `name`.
async fn primary_lists(source: &ObjectStore, name: &str) -> bool {
    let body = source
        .get("backups/c1/binlog/_index.json")
        .await
        .unwrap()
        .unwrap();
    binlog::BinlogIndex::parse(&body)
        .unwrap()
        .contains(&format!("backups/c1/binlog/{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_source_keeps_binlog_segments_a_location_still_lacks() {
    let world = regions(|config| {
        config.copier.binlog_interval = Duration::from_secs(1);
    })
    .await;
    create_copying_schedule(&world.client, "db", "c1", 1).await;
    let body = |name: &str| format!("events of {name} ").repeat(300).into_bytes();
    // s1 is corrupt at the source: the copier cannot copy it, so dr lacks it.
    let good = body("s1");
    let mut bad = good.clone();
    bad[3] ^= 1;
    ship_segment(
        &world.source,
        "s1",
        "2026-02-28T23:00:00Z",
        Some("2026-03-01T12:00:00Z"),
        &bad,
        &good,
    )
    .await;
    ship_segment(
        &world.source,
        "s2",
        "2026-03-01T12:00:00Z",
        Some("2026-03-02T12:00:00Z"),
        &body("s2"),
        &body("s2"),
    )
    .await;
    let (stop, copier) = start_copier(&world.config);
    for backup in [
        Backup::full("b1", at("2026-03-01T00:00:00Z"), 10),
        Backup::full("b2", at("2026-03-02T00:00:00Z"), 10),
    ] {
        report_backup(&world.js, &world.source, "c1", "base", "db", &backup).await;
        copied(&world.catalog, "c1", &backup.id).await;
    }
    // keep_last 1 lets b1 go at the source (its copy at dr stays), and with it the segments
    // that end before b2 started: s1. dr still needs s1 (its b1 started before s1 ended) and
    // has no copy of it, so the source keeps it.
    sweep(&world.js, "c1", 1).await;
    eventually(
        "b1 gone from the source",
        Duration::from_secs(60),
        || async { (!record(&world.catalog, "c1", "b1").await?.held_at_primary()).then_some(()) },
    )
    .await;
    // Without the hold the collector's job (retried every 2 s while b1 was being deleted)
    // would take s1 within seconds of b1's deletion.
    for _ in 0..16 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            primary_lists(&world.source, "s1").await,
            "s1 collected while dr lacks it"
        );
    }
    assert!(world
        .source
        .get("backups/c1/binlog/s1")
        .await
        .unwrap()
        .is_some());
    assert!(dr_segments(&world.dr).await.is_empty());

    // Mended, s1 and s2 land at dr; the next collection at the source lets s1 go.
    world
        .source
        .put("backups/c1/binlog/s1", good.clone().into())
        .await
        .unwrap();
    eventually("s1 and s2 at dr", Duration::from_secs(30), || async {
        (dr_segments(&world.dr).await == ["s1", "s2"]).then_some(())
    })
    .await;
    // The collector's job waited for it (growing delays): s1 goes at the source now.
    eventually(
        "s1 collected at the source",
        Duration::from_secs(90),
        || async { (!primary_lists(&world.source, "s1").await).then_some(()) },
    )
    .await;
    assert!(world
        .source
        .get("backups/c1/binlog/s1")
        .await
        .unwrap()
        .is_none());
    assert!(primary_lists(&world.source, "s2").await);
    assert_eq!(
        world
            .dr
            .get("dr-copies/c1/binlog/s1")
            .await
            .unwrap()
            .unwrap(),
        good
    );
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
    drop(world.nats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copies_move_to_colder_classes_as_their_backups_age() {
    let world = regions(|config| {
        config.copier.binlog_interval = Duration::from_secs(1);
    })
    .await;
    create_schedule(
        &world.client,
        json!({"name": "db", "cluster": "c1", "plan": "base",
               "cron": "0 3 * * *", "paused": true, "policy": {"keep_last": 10},
               "copies": [{"to": "dr", "policy": {"keep_yearly": 7},
                           "transitions": [{"after_days": 30, "storage_class": "STANDARD_IA"}]}]}),
    )
    .await;
    let (stop, copier) = start_copier(&world.config);
    // Taken long ago: its copy is due to move as soon as it lands. One taken now is not.
    let old = Backup::full("old", at("2026-03-01T00:00:00Z"), 10);
    let now = chrono::Utc::now().fixed_offset();
    let young = Backup::incremental("young", "old", now - chrono::Duration::minutes(20), 10);
    for backup in [&old, &young] {
        report_backup(&world.js, &world.source, "c1", "base", "db", backup).await;
    }
    let dr_name = LocationName::new("dr").unwrap();
    let moved = eventually(
        "old's copy moved to STANDARD_IA",
        Duration::from_secs(60),
        || async {
            record(&world.catalog, "c1", "old").await.filter(|r| {
                r.copies
                    .get(&dr_name)
                    .is_some_and(|c| c.storage_class.as_deref() == Some("STANDARD_IA"))
            })
        },
    )
    .await;
    let copy = &moved.copies[&dr_name];
    assert!(copy.transitioned_at.is_some());
    // Moved in place: every object still there, the same bytes, in the class asked for
    // (SeaweedFS stores and reports the class it is given, though it stores every class
    // alike).
    check_whole_at_dr(&world.dr, &moved).await;
    for object in &copy.objects {
        let class = world.dr.storage_class_of(&object.key).await.unwrap();
        assert_eq!(class.as_deref(), Some("STANDARD_IA"), "{}", object.key);
    }
    let young = copied(&world.catalog, "c1", "young").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let young = record(&world.catalog, "c1", "young").await.unwrap_or(young);
    assert_eq!(young.copies[&dr_name].storage_class, None, "moved too soon");
    assert_eq!(young.copies[&dr_name].transitioned_at, None);
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
    drop(world.nats);
}

/// The restore test of `request` on backup `id` once recorded.
async fn verdict_of(
    catalog: &Catalog,
    id: &str,
    request: &str,
) -> sexton_model::records::VerificationEntry {
    eventually(
        &format!("the verdict of {request}"),
        Duration::from_secs(60),
        || async {
            record(catalog, "c1", id)
                .await?
                .verification?
                .history
                .into_iter()
                .find(|e| e.request_id == request && e.via.is_none())
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restore_test_at_a_location_reads_the_copies_there() {
    use sexton_model::records::VerificationState;
    let world = regions(|_| {}).await;
    create_copying_schedule(&world.client, "db", "c1", 10).await;
    let b1 = Backup::full("b1", at("2026-03-01T00:00:00Z"), 10);
    let b2 = Backup::incremental("b2", "b1", at("2026-03-02T00:00:00Z"), 10);
    for backup in [&b1, &b2] {
        report_backup(&world.js, &world.source, "c1", "base", "db", backup).await;
    }
    let (stop, copier) = start_copier(&world.config);
    let b1_copy = copied(&world.catalog, "c1", "b1").await;
    copied(&world.catalog, "c1", "b2").await;
    // The reference executor, with dr's settings: it reads the copies with dr's keys.
    let (stop_executor, executor) = {
        let (trigger, shutdown) = sexton_shared::Shutdown::new();
        (
            trigger,
            tokio::spawn(sexton_executor::reference::run(
                world.config.clone(),
                shutdown,
            )),
        )
    };
    let verify = |id: &'static str, location: serde_json::Value| {
        let client = world.client.clone();
        async move {
            api(
                &client,
                "backup",
                "verify",
                json!({"schema_version": 1, "cluster": "c1", "id": id, "location": location}),
            )
            .await
        }
    };
    let dr = LocationName::new("dr").unwrap();

    // Bad input first: a location the fleet does not have.
    let err = verify("b2", json!("moon")).await.unwrap_err();
    assert!(err.message.contains("no such location"), "{err:?}");
    let err = api(
        &world.client,
        "schedule",
        "create",
        json!({"schema_version": 1, "name": "tested", "cluster": "c1", "plan": "other",
               "cron": "@daily", "policy": {"keep_last": 3},
               "verify": {"cron": "@daily", "location": "dr"}}),
    )
    .await
    .unwrap_err();
    assert!(err.message.contains("no copy rule"), "{err:?}");

    let asked = verify("b2", json!("dr")).await.unwrap();
    let request = asked["request_id"].as_str().unwrap().to_string();
    let entry = verdict_of(&world.catalog, "b2", &request).await;
    assert_eq!(entry.outcome, "verified", "{entry:?}");
    assert_eq!(entry.location.as_ref(), Some(&dr));
    let b2 = record(&world.catalog, "c1", "b2").await.unwrap();
    assert_eq!(
        b2.copies[&dr]
            .verification
            .as_ref()
            .map(|v| v.outcome.as_str()),
        Some("verified")
    );
    // A test of the copy is not a test of the primary's objects.
    assert_eq!(
        b2.verification.as_ref().unwrap().state,
        VerificationState::Unverified
    );
    let b1 = record(&world.catalog, "c1", "b1").await.unwrap();
    assert!(b1
        .verification
        .unwrap()
        .history
        .iter()
        .any(|e| e.request_id == request && e.location.as_ref() == Some(&dr)));

    // b1's data gone at dr (behind Sexton's back): the test there fails, naming the key at
    // dr; the primary's objects still restore.
    let data = b1_copy.copies[&dr]
        .objects
        .iter()
        .find(|o| o.key.ends_with("/backup.xbstream"))
        .unwrap()
        .key
        .clone();
    assert!(data.starts_with("dr-copies/"), "{data}");
    world
        .dr
        .delete_keys_each(std::slice::from_ref(&data))
        .await
        .unwrap();
    let asked = verify("b2", json!("dr")).await.unwrap();
    let request = asked["request_id"].as_str().unwrap().to_string();
    let entry = verdict_of(&world.catalog, "b2", &request).await;
    assert_eq!(entry.outcome, "failed", "{entry:?}");
    assert!(
        entry.reason.as_deref().unwrap_or_default().contains(&data),
        "{entry:?}"
    );
    let b2 = record(&world.catalog, "c1", "b2").await.unwrap();
    assert_eq!(
        b2.copies[&dr]
            .verification
            .as_ref()
            .map(|v| v.outcome.as_str()),
        Some("failed")
    );
    assert_ne!(
        b2.verification.as_ref().unwrap().state,
        VerificationState::Failed,
        "a failed copy is not a failed backup at primary"
    );
    let asked = verify("b2", serde_json::Value::Null).await.unwrap();
    let request = asked["request_id"].as_str().unwrap().to_string();
    let entry = verdict_of(&world.catalog, "b2", &request).await;
    assert_eq!(entry.outcome, "verified", "{entry:?}");
    assert_eq!(entry.location, None);
    let b2 = record(&world.catalog, "c1", "b2").await.unwrap();
    assert_eq!(
        b2.verification.as_ref().unwrap().state,
        VerificationState::Verified
    );

    stop_executor.trigger();
    executor.await.unwrap().unwrap();
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
    drop(world.nats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_scrub_of_a_location_finds_a_copy_gone_there_and_it_is_copied_again() {
    let world = regions(|config| {
        config.copier.binlog_interval = Duration::from_secs(1);
    })
    .await;
    create_copying_schedule(&world.client, "db", "c1", 10).await;
    for backup in [
        Backup::full("b1", at("2026-03-01T00:00:00Z"), 10),
        Backup::full("b2", at("2026-03-02T00:00:00Z"), 10),
    ] {
        report_backup(&world.js, &world.source, "c1", "base", "db", &backup).await;
    }
    let (stop, copier) = start_copier(&world.config);
    let b1 = copied(&world.catalog, "c1", "b1").await;
    copied(&world.catalog, "c1", "b2").await;
    stop.trigger();
    copier.await.unwrap().unwrap();

    // b1's data at dr deleted behind Sexton's back.
    let dr = LocationName::new("dr").unwrap();
    let data = b1.copies[&dr]
        .objects
        .iter()
        .find(|o| o.key.ends_with("/backup.xbstream"))
        .unwrap()
        .key
        .clone();
    world
        .dr
        .delete_keys_each(std::slice::from_ref(&data))
        .await
        .unwrap();
    let scrub = |dry_run: bool| {
        let client = world.client.clone();
        async move {
            api(
                &client,
                "catalog",
                "scrub",
                json!({"schema_version": 1, "cluster": "c1", "dry_run": dry_run}),
            )
            .await
            .unwrap()
        }
    };
    let dry = scrub(true).await;
    assert_eq!(dry["copies"][0]["id"], "b1", "{dry:#}");
    assert_eq!(dry["copies"][0]["location"], "dr");
    assert_eq!(dry["copies"][0]["becomes"], "missing");
    assert_eq!(
        record(&world.catalog, "c1", "b1").await.unwrap().copies[&dr].state,
        CopyState::Copied,
        "a dry run changes nothing"
    );
    let report = scrub(false).await;
    assert_eq!(report["copies"].as_array().unwrap().len(), 1, "{report:#}");
    // Missing there, and only there: the backup still counts at primary, and the source keeps
    // it (the copy is awaited again).
    let b1 = record(&world.catalog, "c1", "b1").await.unwrap();
    assert_eq!(b1.copies[&dr].state, CopyState::Missing);
    assert!(
        b1.copies[&dr].problems[0].contains(&data),
        "{:?}",
        b1.copies[&dr].problems
    );
    assert_eq!(b1.status, sexton_model::records::BackupStatus::Completed);
    assert!(b1
        .holds_with_copies()
        .contains(&"awaiting copy to dr".to_string()));
    assert!(sexton_tests::fixtures::incidents(&world.js)
        .await
        .iter()
        .any(|i| i.kind == "copy-missing" && i.reason.contains(&data)));
    // A second pass finds nothing new.
    let again = scrub(false).await;
    assert!(again.get("copies").is_none(), "{again:#}");

    // The copier's next pass copies it again from the source.
    let (stop, copier) = start_copier(&world.config);
    let b1 = eventually("b1 copied to dr again", Duration::from_secs(30), || async {
        record(&world.catalog, "c1", "b1")
            .await
            .filter(|r| r.copies[&dr].state == CopyState::Copied)
    })
    .await;
    check_whole_at_dr(&world.dr, &b1).await;
    assert!(b1.copies[&dr].problems.is_empty());
    assert!(scrub(false).await.get("copies").is_none());
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
    drop(world.nats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copy_deleted_by_hand_goes_once_no_copy_there_builds_on_it() {
    let world = regions(|_| {}).await;
    create_copying_schedule(&world.client, "db", "c1", 10).await;
    for backup in [
        Backup::full("b1", at("2026-03-01T00:00:00Z"), 10),
        Backup::incremental("b2", "b1", at("2026-03-02T00:00:00Z"), 10),
        Backup::full("b3", at("2026-03-03T00:00:00Z"), 10),
    ] {
        report_backup(&world.js, &world.source, "c1", "base", "db", &backup).await;
    }
    let (stop, copier) = start_copier(&world.config);
    for backup in ["b1", "b2", "b3"] {
        copied(&world.catalog, "c1", backup).await;
    }
    let dr = LocationName::new("dr").unwrap();
    let delete = |id: &'static str, extra: serde_json::Value| {
        let client = world.client.clone();
        async move {
            let mut body =
                json!({"schema_version": 1, "cluster": "c1", "id": id, "location": "dr"});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            api(&client, "backup", "delete", body).await
        }
    };
    // Bad input: a location it has no copy at; --force for a copy.
    let mut body = json!({"schema_version": 1, "cluster": "c1", "id": "b1", "location": "vault"});
    let err = api(&world.client, "backup", "delete", body.clone())
        .await
        .unwrap_err();
    assert!(err.message.contains("no copy at vault"), "{err:?}");
    body["location"] = json!("dr");
    body["force"] = json!(true);
    let err = api(&world.client, "backup", "delete", body)
        .await
        .unwrap_err();
    assert!(err.message.contains("--force"), "{err:?}");
    let dry = delete("b1", json!({"dry_run": true})).await.unwrap();
    assert_eq!(dry["location"], "dr", "{dry:#}");
    assert_eq!(
        record(&world.catalog, "c1", "b1").await.unwrap().copies[&dr].delete_requested_at,
        None,
        "a dry run changes nothing"
    );

    // b1's copy is asked to go, but b2's copy there builds on it: it stays for now.
    delete("b1", json!({})).await.unwrap();
    sweep(&world.js, "c1", 1).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let b1 = record(&world.catalog, "c1", "b1").await.unwrap();
    assert!(b1.copies[&dr].delete_requested_at.is_some());
    assert_eq!(b1.copies[&dr].state, CopyState::Copied, "b2 at dr needs it");
    // With b2's copy asked to go too, both go at dr; nothing changes at primary, and b3's
    // copy stays.
    delete("b2", json!({})).await.unwrap();
    for backup in ["b1", "b2"] {
        eventually(
            &format!("{backup}'s copy deleted at dr"),
            Duration::from_secs(60),
            || async {
                record(&world.catalog, "c1", backup)
                    .await
                    .filter(|r| r.copies[&dr].state == CopyState::Deleted)
            },
        )
        .await;
    }
    let left = object_keys(&world.dr, "dr-copies/c1/db/").await;
    assert!(
        left.iter().all(|k| k.contains("/b3/")) && !left.is_empty(),
        "{left:?}"
    );
    for backup in ["b1", "b2", "b3"] {
        let kept = record(&world.catalog, "c1", backup).await.unwrap();
        assert!(kept.held_at_primary(), "{backup} left primary");
        assert_eq!(kept.status, sexton_model::records::BackupStatus::Completed);
    }
    assert_eq!(
        record(&world.catalog, "c1", "b3").await.unwrap().copies[&dr].state,
        CopyState::Copied
    );
    let again = delete("b1", json!({})).await.unwrap_err();
    assert!(again.message.contains("deleted already"), "{again:?}");
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
    drop(world.nats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_preview_prices_copies_deleted_before_their_class_minimum() {
    let world = regions(|_| {}).await;
    // dr keeps copies 60 days in STANDARD_IA (30 days minimum): a backup already older than
    // that is deleted there as soon as it lands, 30 days early.
    create_schedule(
        &world.client,
        json!({"name": "db", "cluster": "c1", "plan": "base",
               "cron": "0 3 * * *", "paused": true, "policy": {"keep_last": 10},
               "copies": [{"to": "dr", "policy": {"keep_within": "60d"},
                           "storage_class": "STANDARD_IA"}]}),
    )
    .await;
    // keep_within counts back from the newest backup: b1 is three months older than b3.
    for backup in [
        Backup::full("b1", at("2025-12-01T00:00:00Z"), 10),
        Backup::full("b2", at("2026-03-01T00:00:00Z"), 10),
        Backup::full("b3", at("2026-03-02T00:00:00Z"), 10),
    ] {
        report_backup(&world.js, &world.source, "c1", "base", "db", &backup).await;
    }
    let (stop, copier) = start_copier(&world.config);
    for backup in ["b1", "b2", "b3"] {
        copied(&world.catalog, "c1", backup).await;
    }
    stop.trigger();
    copier.await.unwrap().unwrap();
    let preview = api(
        &world.client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": "c1", "location": "dr"}),
    )
    .await
    .unwrap();
    let early = &preview[0]["early_deletions"];
    let ids: Vec<&str> = early
        .as_array()
        .unwrap_or_else(|| panic!("{preview:#}"))
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["b1"], "{preview:#}");
    assert_eq!(early[0]["storage_class"], "STANDARD_IA");
    assert_eq!(early[0]["minimum_days"], 30);
    assert_eq!(early[0]["days_in_class"], 0);
    assert!(early[0]["bytes"].as_u64().unwrap() > 0);
    // At primary nothing is priced: its copies' classes are not the source's.
    let at_primary = api(
        &world.client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    assert!(
        at_primary[0].get("early_deletions").is_none(),
        "{at_primary:#}"
    );
    world.fleet.unwrap().stop().await.unwrap();
    drop(world.nats);
}

async fn on_fresh_nats(world: &Regions) -> (Nats, async_nats::Client, Catalog, Fleet) {
    let nats = Nats::start();
    let mut config = world.config.clone();
    config.nats.url = nats.url();
    let fleet = Fleet::start(&config, FLEET);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let topology = topology::ensure(&jetstream::new(client.clone()), 1)
        .await
        .unwrap();
    (nats, client, Catalog::new(topology.catalog), fleet)
}

async fn import(
    client: &async_nats::Client,
    from: Option<&str>,
) -> Result<serde_json::Value, sexton_shared::api::ApiError> {
    let mut body = json!({"schema_version": 1, "cluster": "c1"});
    if let Some(from) = from {
        body["from"] = json!(from);
    }
    // A fleet just started answers once its scheduler has subscribed.
    for _ in 0..120 {
        match api(client, "catalog", "import", body.clone()).await {
            Err(err) if err.message.contains("no responders") => {
                tokio::time::sleep(Duration::from_millis(500)).await
            }
            answer => return answer,
        }
    }
    panic!("the scheduler never answered catalog.import")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_catalog_rebuilt_from_a_location_after_the_primary_and_the_catalog_are_lost() {
    let mut world = regions(|_| {}).await;
    create_copying_schedule(&world.client, "db", "c1", 5).await;
    let b1 = Backup::full("b1", at("2026-03-01T00:00:00Z"), 10);
    let b2 = Backup::incremental("b2", "b1", at("2026-03-02T00:00:00Z"), 10);
    for backup in [&b1, &b2] {
        report_backup(&world.js, &world.source, "c1", "base", "db", backup).await;
    }
    wait_for_completed(&world.catalog, "c1", 2).await;
    let (stop, copier) = start_copier(&world.config);
    let originals = [
        copied(&world.catalog, "c1", "b1").await,
        copied(&world.catalog, "c1", "b2").await,
    ];
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.take().unwrap().stop().await.unwrap();

    // The catalog is lost, the primary still there: a location's copies are not imported as
    // the only place while the primary holds them; imported from primary, then from dr, the
    // records get their copies back.
    {
        let (_nats, client, catalog, fleet) = on_fresh_nats(&world).await;
        let from_dr = import(&client, Some("dr")).await.unwrap();
        assert_eq!(from_dr["imported"], json!([]), "{from_dr:#}");
        assert_eq!(
            from_dr["skipped"].as_array().unwrap().len(),
            2,
            "{from_dr:#}"
        );
        assert!(from_dr["skipped"][0]["why"]
            .as_str()
            .unwrap()
            .contains("at primary too"));
        let from_primary = import(&client, None).await.unwrap();
        assert_eq!(from_primary["imported"].as_array().unwrap().len(), 2);
        let attach = import(&client, Some("dr")).await.unwrap();
        assert_eq!(attach["attached"], json!(["b1", "b2"]), "{attach:#}");
        let dr = LocationName::new("dr").unwrap();
        for original in &originals {
            let rebuilt = record(&catalog, "c1", original.id.as_str()).await.unwrap();
            assert!(rebuilt.held_at_primary());
            assert_eq!(rebuilt.copies[&dr].objects, original.copies[&dr].objects);
            check_whole_at_dr(&world.dr, &rebuilt).await;
        }
        // A location this fleet does not have is refused, naming the ones it has.
        let unknown = import(&client, Some("vault")).await.unwrap_err();
        assert!(unknown.message.contains("dr"), "{unknown:?}");
        fleet.stop().await.unwrap();
    }

    // Now the primary is lost too: every object there gone, and the catalog again. dr alone
    // rebuilds the records, held there only, whole.
    let primary_keys: Vec<String> = object_keys(&world.source, "").await.into_iter().collect();
    assert!(world
        .source
        .delete_batch(&primary_keys)
        .await
        .unwrap()
        .is_empty());
    let (_nats, client, catalog, fleet) = on_fresh_nats(&world).await;
    let rebuilt = import(&client, Some("dr")).await.unwrap();
    let imported: Vec<&str> = rebuilt["imported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(imported, ["b1", "b2"], "{rebuilt:#}");
    assert_eq!(rebuilt["imported"][0]["status"], json!("copies-only"));
    let dr = LocationName::new("dr").unwrap();
    for original in &originals {
        let record = record(&catalog, "c1", original.id.as_str()).await.unwrap();
        assert!(!record.held_at_primary());
        assert_eq!(record.status_text(), "copies-only");
        assert_eq!(record.objects, original.objects);
        assert_eq!(record.parent, original.parent);
        assert_eq!(record.copies[&dr].state, CopyState::Copied);
        check_whole_at_dr(&world.dr, &record).await;
    }
    // What dr holds of them is dr's policy's; with no schedule (the schedules were lost with
    // the catalog) every copy is kept.
    sweep(&jetstream::new(client.clone()), "c1", 9).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(at_dr(&world, "b1").await.len(), 2);
    assert!(record(&catalog, "c1", "b2").await.is_some());
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_location_down_for_minutes_delays_copies_and_loses_nothing() {
    let mut world = regions(|_| {}).await;
    create_copying_schedule(&world.client, "db", "c1", 1).await;
    // dr goes down before anything is copied; it stays down 20 s here, 3 minutes in the
    // soak variant (SEXTON_SOAK=1).
    world.dr_server.stop();
    let b1 = Backup::full("b1", at("2026-03-01T00:00:00Z"), 10);
    let b2 = Backup::full("b2", at("2026-03-02T00:00:00Z"), 10);
    for backup in [&b1, &b2] {
        report_backup(&world.js, &world.source, "c1", "base", "db", backup).await;
    }
    wait_for_completed(&world.catalog, "c1", 2).await;
    let (stop, copier) = start_copier(&world.config);
    let down = sexton_tests::fault::pick(Duration::from_secs(20), Duration::from_secs(180));
    let until = tokio::time::Instant::now() + down;
    let mut n = 0;
    while tokio::time::Instant::now() < until {
        // The source's keep_last 1 would delete b1, but b1 awaits its copy: it stays.
        n += 1;
        sweep(&world.js, "c1", 100 + n).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let b1 = record(&world.catalog, "c1", "b1").await.expect("b1 kept");
        assert!(b1.held_at_primary(), "b1 deleted while it awaited its copy");
        assert!(b1.copies.is_empty(), "a copy counted while dr was down");
    }
    let preview = api(
        &world.client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    assert!(
        preview[0]["decision"]["keep"]
            .to_string()
            .contains("awaiting copy to dr"),
        "{preview:#}"
    );
    assert!(
        consumer_backlog(
            &world.js,
            topology::STREAM_COPIES,
            topology::CONSUMER_COPIER
        )
        .await
        .unwrap()
            > 0,
        "the copy jobs are still there, waiting"
    );

    // dr back: the copies land by themselves (the copier's retries reach it within its
    // longest delay), whole; then the source lets b1 go and dr keeps both.
    world.dr_server.start_again();
    for backup in ["b1", "b2"] {
        let landed = eventually(
            &format!("{backup} copied once dr is back"),
            Duration::from_secs(330),
            || async {
                record(&world.catalog, "c1", backup)
                    .await
                    .filter(|r| !r.copies.is_empty())
            },
        )
        .await;
        check_whole_at_dr(&world.dr, &landed).await;
    }
    sweep(&world.js, "c1", 1).await;
    eventually(
        "b1 deleted at the source once copied",
        Duration::from_secs(60),
        || async {
            let b1 = record(&world.catalog, "c1", "b1").await?;
            (!b1.held_at_primary()).then_some(())
        },
    )
    .await;
    assert_eq!(at_dr(&world, "b1").await.len(), 2);
    assert_eq!(at_dr(&world, "b2").await.len(), 2);
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.take().unwrap().stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_location_plan_the_breaker_holds_goes_through_on_its_own_approval() {
    // A run may delete one backup of a group at most.
    let world = regions(|config| config.breaker.max_delete_count = 1).await;
    create_schedule(
        &world.client,
        json!({"name": "db", "cluster": "c1", "plan": "base",
               "cron": "0 3 * * *", "paused": true, "policy": {"keep_last": 5},
               "copies": [{"to": "dr", "policy": {"keep_last": 1}}]}),
    )
    .await;
    for (id, day) in [("b1", 1), ("b2", 2), ("b3", 3)] {
        let backup = Backup::full(id, at(&format!("2026-03-0{day}T00:00:00Z")), 10);
        report_backup(&world.js, &world.source, "c1", "base", "db", &backup).await;
    }
    wait_for_completed(&world.catalog, "c1", 3).await;
    let (stop, copier) = start_copier(&world.config);
    for backup in ["b1", "b2", "b3"] {
        copied(&world.catalog, "c1", backup).await;
    }
    // dr's keep_last 1 would delete two copies in one run: held, nothing marked there.
    sweep(&world.js, "c1", 1).await;
    let dr = LocationName::new("dr").unwrap();
    let preview = eventually("dr's plan held", Duration::from_secs(30), || async {
        let preview = api(
            &world.client,
            "retention",
            "preview",
            json!({"schema_version": 1, "cluster": "c1", "location": "dr"}),
        )
        .await
        .ok()?;
        (preview[0]["breaker"]["held"] == json!(true)).then_some(preview)
    })
    .await;
    assert_eq!(preview[0]["location"], json!("dr"), "{preview:#}");
    assert!(
        preview[0]["breaker"]["approve_with"]
            .as_str()
            .unwrap()
            .contains("--location dr"),
        "{preview:#}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    for backup in ["b1", "b2", "b3"] {
        let held = record(&world.catalog, "c1", backup).await.unwrap();
        assert_eq!(held.copies[&dr].state, CopyState::Copied, "{backup}");
    }
    // Said once, as at primary: an incident naming the location and how to approve.
    let said: Vec<_> = sexton_tests::fixtures::incidents(&world.js)
        .await
        .into_iter()
        .filter(|i| i.kind == "retention-held")
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0].subject, "plan base at dr");
    assert!(said[0].reason.contains("--location dr"), "{:?}", said[0]);
    // The primary's approval is not dr's: there is nothing held at primary.
    let at_primary = api(
        &world.client,
        "retention",
        "approve",
        json!({"schema_version": 1, "cluster": "c1", "plan": "base"}),
    )
    .await
    .unwrap_err();
    assert!(at_primary.message.contains("not held"), "{at_primary:?}");
    api(
        &world.client,
        "retention",
        "approve",
        json!({"schema_version": 1, "cluster": "c1", "plan": "base", "location": "dr"}),
    )
    .await
    .unwrap();
    eventually(
        "the approved deletions at dr",
        Duration::from_secs(60),
        || async {
            let b1 = record(&world.catalog, "c1", "b1").await?;
            let b2 = record(&world.catalog, "c1", "b2").await?;
            (b1.copies[&dr].state == CopyState::Deleted
                && b2.copies[&dr].state == CopyState::Deleted)
                .then_some(())
        },
    )
    .await;
    let b3 = record(&world.catalog, "c1", "b3").await.unwrap();
    assert_eq!(b3.copies[&dr].state, CopyState::Copied);
    assert!(at_dr(&world, "b1").await.is_empty());
    assert_eq!(at_dr(&world, "b3").await.len(), 2);
    // All three stay whole at primary, whose keep_last 5 keeps them.
    for backup in ["b1", "b2", "b3"] {
        assert!(record(&world.catalog, "c1", backup)
            .await
            .unwrap()
            .held_at_primary());
    }
    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
}

/// Writes `cluster_name`'s binlog archive at dr as the copier would: each segment's object,
/// then the index listing them; `orphans` are objects the index does not list.
async fn write_dr_archive(
    dr: &ObjectStore,
    cluster_name: &str,
    segments: &[sexton_shared::binlog::IndexSegment],
    orphans: &[String],
) {
    use sexton_shared::binlog::{self, store};
    let c = cluster(cluster_name);
    for key in segments.iter().map(|s| &s.key).chain(orphans) {
        dr.put(key, "binlog events".into()).await.unwrap();
    }
    let segments = segments.to_vec();
    store::update(
        dr,
        &binlog::index_key(dr.prefix(), &c),
        &binlog::binlog_prefix(dr.prefix(), &c),
        move |index| index.apply_appends(&segments) > 0,
    )
    .await
    .unwrap();
}

/// The keys `cluster_name`'s index at dr lists (it must parse), and the objects of its folder.
async fn dr_archive(
    dr: &ObjectStore,
    cluster_name: &str,
) -> (
    std::collections::BTreeSet<String>,
    std::collections::BTreeSet<String>,
) {
    let folder = sexton_shared::binlog::binlog_prefix(dr.prefix(), &cluster(cluster_name));
    (
        index_keys_at(dr, dr.prefix(), cluster_name).await,
        object_keys(dr, &folder).await,
    )
}

/// A location's binlog archive is collected when its retention deletes a copy there: the
/// segments that end before the oldest full backup whose copy the location still holds go
/// (objects, then index entries), with an orphan older than that; the others, and segments
/// whose end is unknown, stay, and the index still parses. A malformed index there is left
/// alone and recorded; where the catalog holds no full at the location, nothing goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_locations_binlog_archive_is_collected_up_to_its_oldest_full_copy() {
    use sexton_shared::binlog::{self, IndexSegment};
    let world = regions(|_| {}).await;
    let hours = chrono::Duration::hours;
    // primary keeps everything; dr the newest copy. c2 is never copied.
    create_schedule(
        &world.client,
        json!({"name": "db", "cluster": "c1", "plan": "base",
               "cron": "0 3 * * *", "paused": true, "policy": {"keep_last": 10},
               "copies": [{"to": "dr", "policy": {"keep_last": 1}}]}),
    )
    .await;
    create_schedule(
        &world.client,
        json!({"name": "db2", "cluster": "c2", "plan": "base",
               "cron": "0 3 * * *", "paused": true, "policy": {"keep_last": 10}}),
    )
    .await;
    // f2, the full that stays at dr, "starts" 5 min 15 s from now, so the orphan written now
    // is older than the horizon less the orphan margin (the object store's clock cannot be
    // turned back); intake takes a start up to 5 minutes ahead, so f2 is reported in 25 s.
    let t0 = chrono::Utc::now().fixed_offset();
    let s1 = t0 - chrono::Duration::days(2);
    let s2 = t0 + chrono::Duration::seconds(5 * 60 + 15);
    let f1 = Backup::full("f1", s1, 10);
    let f2 = Backup::full("f2", s2, 0);
    let g1 = Backup::full("g1", s1, 10);
    report_backup(&world.js, &world.source, "c1", "base", "db", &f1).await;
    report_backup(&world.js, &world.source, "c2", "base", "db2", &g1).await;

    let key = |c: &str, name: &str| {
        format!(
            "{}{name}",
            binlog::binlog_prefix(world.dr.prefix(), &cluster(c))
        )
    };
    let segment = |c: &str, name: &str, first, last| IndexSegment::new(key(c, name), first, last);
    let c1_segments = [
        segment("c1", "seg-1", Some(s1 - hours(1)), Some(s1 + hours(1))),
        segment("c1", "seg-2", Some(s1 + hours(1)), Some(t0 - hours(1))),
        segment("c1", "seg-3", Some(t0 - hours(1)), Some(s2 + hours(1))),
        segment("c1", "seg-open-old", Some(s1 - hours(2)), None),
        segment("c1", "seg-open", Some(s2 + hours(1)), None),
    ];
    write_dr_archive(&world.dr, "c1", &c1_segments, &[key("c1", "orphan-1")]).await;
    // c2's archive at dr: a segment ending before g1 (which is only at primary) started.
    let c2_segments = [segment(
        "c2",
        "seg-0",
        Some(s1 - hours(3)),
        Some(s1 - hours(2)),
    )];
    write_dr_archive(&world.dr, "c2", &c2_segments, &[key("c2", "orphan-1")]).await;
    let c2_before = dr_archive(&world.dr, "c2").await;

    let wait = (t0 + chrono::Duration::seconds(25)) - chrono::Utc::now().fixed_offset();
    tokio::time::sleep(wait.to_std().unwrap_or_default()).await;
    report_backup(&world.js, &world.source, "c1", "base", "db", &f2).await;
    wait_for_completed(&world.catalog, "c1", 2).await;
    wait_for_completed(&world.catalog, "c2", 1).await;
    let (stop, copier) = start_copier(&world.config);
    copied(&world.catalog, "c1", "f1").await;
    copied(&world.catalog, "c1", "f2").await;

    // dr's retention lets f1's copy go; the pass after it collects dr's archive up to f2.
    sweep(&world.js, "c1", 1).await;
    let dr = LocationName::new("dr").unwrap();
    eventually(
        "f1's copy deleted at dr",
        Duration::from_secs(90),
        || async {
            let f1 = record(&world.catalog, "c1", "f1").await?;
            (f1.copies.get(&dr)?.state == CopyState::Deleted).then_some(())
        },
    )
    .await;
    assert!(at_dr(&world, "f1").await.is_empty(), "f1's copy left at dr");
    let kept: std::collections::BTreeSet<String> = ["seg-3", "seg-open-old", "seg-open"]
        .iter()
        .map(|name| key("c1", name))
        .collect();
    let mut kept_objects = kept.clone();
    kept_objects.insert(binlog::index_key(world.dr.prefix(), &cluster("c1")));
    settles_to(
        "dr's archive of c1 collected up to f2's start",
        Duration::from_secs(60),
        &(kept.clone(), kept_objects.clone()),
        || dr_archive(&world.dr, "c1"),
    )
    .await;
    // f1 is kept at primary: the primary's copy of it is untouched.
    assert!(record(&world.catalog, "c1", "f1")
        .await
        .unwrap()
        .held_at_primary());

    // A malformed index at dr: a job that finds its copy deleted runs the pass again, which
    // rewrites nothing, deletes nothing, and records an incident.
    let c1_index = binlog::index_key(world.dr.prefix(), &cluster("c1"));
    let garbage = br#"{"schema_version":1,"segments":[{"key":"dr-copies/c1/binlog/seg-3""#;
    world
        .dr
        .put(&c1_index, garbage.to_vec().into())
        .await
        .unwrap();
    let f1_record = record(&world.catalog, "c1", "f1").await.unwrap();
    let again = |c: &str, backup: &str, uid: &str| CopyDeleteJob {
        schema_version: 1,
        cluster: cluster(c),
        backup_id: id(backup),
        uid: uid.into(),
        location: dr.clone(),
        revision: 1,
        reasons: vec!["again".into()],
    };
    publish_once(
        &world.js,
        sexton_shared::channels::COPY_DELETE_JOBS.subject(&cluster("c1")),
        "lgc-again.c1",
        wire::encode(&again("c1", "f1", &f1_record.uid)),
    )
    .await
    .unwrap();
    eventually(
        "the malformed index at dr recorded",
        Duration::from_secs(60),
        || async {
            incidents(&world.js)
                .await
                .iter()
                .any(|i| i.contains("location-binlog-index-malformed") && i.contains("dr"))
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        world.dr.get(&c1_index).await.unwrap().unwrap().as_ref(),
        garbage,
        "the malformed index was rewritten"
    );
    assert_eq!(
        object_keys(
            &world.dr,
            &binlog::binlog_prefix(world.dr.prefix(), &cluster("c1"))
        )
        .await,
        kept_objects
    );

    // No full backup of c2 is held or awaited at dr: a copy delete job there deletes nothing of
    // its archive (a catalog that lost its records must not empty what survived elsewhere).
    publish_once(
        &world.js,
        sexton_shared::channels::COPY_DELETE_JOBS.subject(&cluster("c2")),
        "lgc-ghost.c2",
        wire::encode(&again("c2", "ghost", "u-ghost")),
    )
    .await
    .unwrap();
    drained(
        &world.js,
        topology::STREAM_JOBS,
        topology::CONSUMER_DELETER_COPIES,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(dr_archive(&world.dr, "c2").await, c2_before);
    assert_eq!(c2_before.0.len(), 1);

    stop.trigger();
    copier.await.unwrap().unwrap();
    world.fleet.unwrap().stop().await.unwrap();
}
