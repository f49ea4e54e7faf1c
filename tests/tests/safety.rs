//! The safety envelope around deletions (issue 15, docs/safety.md), against real servers, a fleet
//! and the real `sexton` binary:
//! - the circuit breaker holds a run for each of its triggers (a share of the group, a count,
//!   a stale group) and nothing is marked or deleted; `sexton retention approve` lets exactly the
//!   held run through once; a later run is judged afresh;
//! - every object the fleet deleted is in the audit (`sexton audit`) with its backup, reasons and
//!   the policy's hash;
//! - `schedule update --keep-last` keeps the policy's other rules; a narrowing change without
//!   `--yes` is refused with its preview and changes nothing;
//! - destructive verbs without `--yes` and without a terminal are refused and delete nothing.
//!
//! Backups are genuine: each report's objects are uploaded first (`fixtures::upload_genuine`).

use std::{collections::BTreeSet, process::Command, time::Duration};

use async_nats::jetstream;
use chrono::Utc;
use serde_json::{json, Value};
use sexton_model::{names::ClusterName, records::BackupStatus, wire};
use sexton_shared::{catalog::Catalog, object_store::ObjectStore, topology};
use sexton_tests::{
    fixtures,
    setup::{Setup, World},
    *,
};

const SERVICES: Members = Members {
    scheduler: true,
    retention_worker: true,
    deleter: true,
    executor: false,
};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("not json ({err}): {}\n{}", self.stdout, self.stderr))
    }
}

/// Runs `sexton args...` against `nats_url` without a terminal (stdin is not one), off the
/// async runtime.
async fn sexton(nats_url: &str, args: &[&str]) -> Run {
    let binary = service_binary("sexton");
    let nats_url = nats_url.to_string();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let output = Command::new(binary)
            .args(&args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("USER", "alice")
            .env("SEXTON_NATS_URL", nats_url)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("running sexton");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).to_string(),
        }
    })
    .await
    .unwrap()
}

fn expect(run: &Run, code: i32, what: &str) {
    assert_eq!(
        run.code, code,
        "{what}: exit {} (wanted {code})\nstdout: {}\nstderr: {}",
        run.code, run.stdout, run.stderr
    );
}

/// A completed report of backup `id` of `cluster`/`plan` by `schedule`, `minutes_ago` minutes
/// old, with one data object.
fn report(cluster: &str, schedule: &str, id: &str, minutes_ago: i64) -> Value {
    let completed_at = Utc::now() - chrono::Duration::minutes(minutes_ago);
    json!({
        "schema_version": 1, "backup_id": id, "cluster": cluster, "plan": "full",
        "schedule": schedule, "backup_name": schedule, "status": "completed", "kind": "full",
        "started_at": (completed_at - chrono::Duration::minutes(1)).to_rfc3339(),
        "completed_at": completed_at.to_rfc3339(),
        "artifacts": [format!("backups/{cluster}/{schedule}/{id}/backup.xbstream")],
    })
}

/// Uploads the backup's objects, reports it and waits until it is recorded completed.
async fn take(js: &jetstream::Context, store: &ObjectStore, catalog: &Catalog, body: Value) {
    let mut body = body;
    fixtures::upload_genuine_json(store, &mut body).await;
    let id = body["backup_id"].as_str().unwrap().to_string();
    let cluster = body["cluster"].as_str().unwrap().to_string();
    js.publish(
        format!("sexton.v1.report.{cluster}"),
        serde_json::to_vec(&body).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let record = wait_reported(catalog, &cluster, &id).await;
    assert_eq!(record.status, BackupStatus::Completed, "{record:?}");
}

/// Asks for a retention run of `cluster` now.
async fn sweep(js: &jetstream::Context, cluster: &str) {
    let cluster: ClusterName = cluster.parse().unwrap();
    let sweep = wire::RetentionSweep {
        schema_version: 1,
        cluster: cluster.clone(),
        requested_at: Utc::now(),
        scrub: false,
    };
    js.send_publish(
        sexton_shared::channels::SWEEPS.subject(&cluster),
        jetstream::message::PublishMessage::build()
            .payload(wire::encode(&sweep))
            .message_id(format!("test-sweep.{}", Utc::now().timestamp_micros())),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// Waits until the reports, retention and the deleter have nothing left to do.
async fn quiet(js: &jetstream::Context) {
    for (stream, durable) in [
        (topology::STREAM_REPORTS, topology::CONSUMER_REPORTS),
        (topology::STREAM_RETENTION, topology::CONSUMER_RETENTION),
        (topology::STREAM_JOBS, topology::CONSUMER_DELETER),
    ] {
        eventually(
            &format!("{durable} drained"),
            Duration::from_secs(30),
            || {
                let js = js.clone();
                async move { (consumer_backlog(&js, stream, durable).await? == 0).then_some(()) }
            },
        )
        .await;
    }
}

/// The ids in the cluster's catalog, and whether any of them is marked or being deleted.
async fn catalog_state(catalog: &Catalog, cluster: &str) -> (BTreeSet<String>, bool) {
    let records = fixtures::records_of(catalog, cluster).await;
    let marked = records.values().any(|r| {
        matches!(
            r.value.status,
            BackupStatus::Expiring | BackupStatus::Deleting
        )
    });
    (records.keys().cloned().collect(), marked)
}

/// The group's preview (`retention.preview`), once its breaker has a verdict.
async fn preview(client: &async_nats::Client, cluster: &str) -> Value {
    let groups = api(
        client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": cluster, "plan": "full"}),
    )
    .await
    .unwrap();
    groups[0].clone()
}

/// The audit entries of `cluster`, read with `sexton audit -o json`.
async fn audit(url: &str, cluster: &str) -> Vec<Value> {
    let run = sexton(
        url,
        &[
            "audit",
            "--cluster",
            cluster,
            "--since",
            "all",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&run, 0, "sexton audit");
    run.json().as_array().unwrap().clone()
}

fn of_kind<'a>(entries: &'a [Value], kind: &str) -> Vec<&'a Value> {
    entries.iter().filter(|e| e["kind"] == kind).collect()
}

/// Creates schedule `name` of `cluster` (plan `full`) through the API, confirming a policy that
/// deletes at once.
async fn schedule(client: &async_nats::Client, name: &str, cluster: &str, extra: Value) {
    let mut body = json!({"name": name, "cluster": cluster, "plan": "full", "cron": "@daily",
                          "paused": true, "policy": {"keep_last": 20}, "confirm": true});
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    create_schedule(client, body).await;
}

/// Issue 50: a backup triggered from cron, CI or a Kubernetes Job (no `$USER`) is audited with
/// the process's own user, not `unknown`, and filed under its cluster, so `sexton audit
/// --cluster` shows who triggered the cluster's backups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_triggered_without_user_is_audited_by_the_process_user_under_its_cluster() {
    let world = Setup::new(SERVICES).start().await;
    let url = world.nats.url();
    schedule(&world.client, "nightly", "w1", json!({})).await;
    let binary = service_binary("sexton");
    let url_ = url.clone();
    let run = tokio::task::spawn_blocking(move || {
        Command::new(binary)
            .args(["backup", "create", "--from-schedule", "nightly"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SEXTON_NATS_URL", url_)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("running sexton")
    })
    .await
    .unwrap();
    assert!(run.status.success(), "{run:?}");
    let me = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            use std::os::unix::fs::MetadataExt as _;
            let uid = std::fs::metadata("/proc/self").unwrap().uid().to_string();
            (fields.get(2) == Some(&uid.as_str())).then(|| fields[0].to_string())
        })
        .expect("this test's user in /etc/passwd");
    let entries = eventually("the request in w1's audit", Duration::from_secs(15), || {
        let url = url.clone();
        async move {
            let entries = audit(&url, "w1").await;
            entries
                .into_iter()
                .find(|e| e["kind"] == "user-action" && e["verb"] == "backup.create")
        }
    })
    .await;
    let user = entries["actor"]["user"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        user == me || user.starts_with(&format!("{me}@")),
        "the audit names {user:?}, not this process's user {me}: {entries}"
    );
    // A change by `apply` is audited with who applied it too (it said `by unknown`).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("w2.yaml"),
        "apiVersion: sexton.io/v1\nkind: Schedule\nmetadata: {name: w2}\nspec:\n  cluster: w2\n  \
         plan: full\n  cron: '@daily'\n  paused: true\n  policy: {keep_last: 3}\n",
    )
    .unwrap();
    let binary = service_binary("sexton");
    let (url_, path) = (url.clone(), dir.path().join("w2.yaml"));
    let run = tokio::task::spawn_blocking(move || {
        Command::new(binary)
            .args(["apply", "-f", path.to_str().unwrap()])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SEXTON_NATS_URL", url_)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("running sexton")
    })
    .await
    .unwrap();
    assert!(run.status.success(), "{run:?}");
    let changed = eventually(
        "w2's creation in the audit",
        Duration::from_secs(15),
        || {
            let url = url.clone();
            async move {
                audit(&url, "w2")
                    .await
                    .into_iter()
                    .find(|e| e["kind"] == "schedule-changed")
            }
        },
    )
    .await;
    let user = changed["actor"]["user"].as_str().unwrap_or_default();
    assert!(
        user.starts_with(&me),
        "apply was audited as {user:?}: {changed}"
    );
    world.fleet.stop().await.unwrap();
}

/// A share of the group: held, the narrowing guard in front of it, one approval lets exactly that
/// run through, every object deleted is in the audit, and the next mass deletion is held again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mass_deletion_is_held_until_approved_once_and_every_deleted_object_is_audited() {
    let world = Setup::new(SERVICES).start().await;
    let World {
        nats,
        config,
        fleet,
        client,
        js,
        ..
    } = world;
    let url = nats.url();
    let url = url.as_str();
    schedule(
        &client,
        "f",
        "c1",
        json!({"policy": {"keep_last": 20, "keep_monthly": 3}}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    for i in 1..=12 {
        take(
            &js,
            &store,
            &catalog,
            report("c1", "f", &format!("f-{i:02}"), 30 - i),
        )
        .await;
    }
    quiet(&js).await;
    let all: BTreeSet<String> = (1..=12).map(|i| format!("f-{i:02}")).collect();
    assert_eq!(catalog_state(&catalog, "c1").await, (all.clone(), false));
    let keys_before = fixtures::keys_under(&store, "backups/c1/").await;
    assert_eq!(keys_before.len(), 24, "{keys_before:?}");

    // The narrowing guard: without --yes (and no terminal) the change is refused with what it
    // would delete, and nothing changes.
    let (stored, revision) = schedule_record(&js, "f").await.unwrap();
    let refused = sexton(url, &["schedule", "update", "f", "--keep-last", "2"]).await;
    expect(&refused, 2, "a narrowing update without --yes");
    assert!(
        refused.stderr.contains("keep_last: 20 -> 2")
            && refused.stderr.contains("would delete")
            && refused.stderr.contains("--yes"),
        "{}",
        refused.stderr
    );
    // One change, one confirmation: the first prompt already says the run will be held and
    // how to let it through (issue 26).
    for said in [
        "the circuit breaker will hold the retention run that deletes them: would delete",
        "nothing is deleted until a person lets that run through: sexton retention approve \
         --cluster c1 --plan full --yes",
    ] {
        assert!(
            refused.stderr.contains(said),
            "{said:?} not in {}",
            refused.stderr
        );
    }
    assert_eq!(schedule_record(&js, "f").await.unwrap(), (stored, revision));
    println!(
        "--- sexton schedule update f --keep-last 2 (no --yes, no terminal)\n{}",
        refused.stderr
    );
    // --dry-run shows the same and changes nothing either.
    let dry = sexton(
        url,
        &["schedule", "update", "f", "--keep-last", "2", "--dry-run"],
    )
    .await;
    expect(&dry, 0, "update --dry-run");
    assert!(dry.stderr.contains("deletes"), "{}", dry.stderr);
    assert_eq!(schedule_record(&js, "f").await.unwrap().1, revision);
    // With --yes: keep_last changes, the other rule stays.
    let updated = sexton(
        url,
        &[
            "schedule",
            "update",
            "f",
            "--keep-last",
            "2",
            "--yes",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&updated, 0, "update --keep-last 2 --yes");
    assert!(
        updated
            .stderr
            .contains("the circuit breaker will hold the retention run that deletes them"),
        "{}",
        updated.stderr
    );
    let (schedule, _) = schedule_record(&js, "f").await.unwrap();
    assert_eq!(
        serde_json::to_value(&schedule.policy).unwrap(),
        json!({"keep_last": 2, "keep_monthly": 3}),
        "--keep-last merges into the policy"
    );
    let policy_hash = sexton_shared::audit::policy_hash(&schedule.policy);

    // The run is held: nothing is marked, the preview says why, an incident says so.
    sweep(&js, "c1").await;
    let held = eventually("the run held", Duration::from_secs(30), || {
        let client = client.clone();
        async move {
            let group = preview(&client, "c1").await;
            (group["breaker"]["held"] == true).then_some(group)
        }
    })
    .await;
    let deleting: BTreeSet<String> = held["breaker"]["deleting"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap().to_string())
        .collect();
    assert!(deleting.len() >= 9, "{held:#}");
    assert_eq!(held["breaker"]["trips"][0]["kind"], "fraction", "{held:#}");
    eventually("the held incident", Duration::from_secs(30), || {
        let js = js.clone();
        async move {
            fixtures::incidents(&js)
                .await
                .iter()
                .any(|i| i.kind == "retention-held" && i.reason.contains("max_delete_fraction"))
                .then_some(())
        }
    })
    .await;
    let shown = sexton(url, &["retention", "preview", "--cluster", "c1"]).await;
    expect(&shown, 0, "retention preview");
    assert!(
        shown.stdout.contains("HELD by the circuit breaker")
            && shown
                .stdout
                .contains("sexton retention approve --cluster c1 --plan full"),
        "{}",
        shown.stdout
    );
    println!(
        "--- sexton retention preview --cluster c1 (held)\n{}",
        shown.stdout
    );
    quiet(&js).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(catalog_state(&catalog, "c1").await, (all.clone(), false));
    assert_eq!(
        fixtures::keys_under(&store, "backups/c1/").await,
        keys_before
    );

    // approve without --yes and without a terminal: refused, nothing approved.
    let refused = sexton(
        url,
        &["retention", "approve", "--cluster", "c1", "--plan", "full"],
    )
    .await;
    expect(&refused, 2, "approve without --yes");
    assert!(refused.stderr.contains("--yes"), "{}", refused.stderr);
    // What approving does is said first, without the hint to run the command being run.
    assert!(
        refused.stderr.contains("HELD by the circuit breaker")
            && !refused.stderr.contains("to let this run through once"),
        "{}",
        refused.stderr
    );
    assert!(topo.breaker.entry("c1.full").await.unwrap().is_none());

    // With --yes: exactly the held run goes through.
    let approved = sexton(
        url,
        &[
            "retention",
            "approve",
            "--cluster",
            "c1",
            "--plan",
            "full",
            "--yes",
        ],
    )
    .await;
    expect(&approved, 0, "approve --yes");
    // The result in kubectl's form, one backup a line (issue 50).
    let mut said = vec![format!(
        "retention/c1/full approved: its next run deletes {} backups",
        deleting.len()
    )];
    let mut by_line: Vec<String> = deleting.iter().map(|id| format!("  backup/{id}")).collect();
    by_line.sort();
    said.extend(by_line);
    let mut printed: Vec<String> = approved.stdout.lines().map(str::to_string).collect();
    printed[1..].sort();
    assert_eq!(printed, said, "{}", approved.stdout);
    let kept: BTreeSet<String> = all.difference(&deleting).cloned().collect();
    eventually("the approved run deleted", Duration::from_secs(60), || {
        let (catalog, kept) = (catalog.clone(), kept.clone());
        async move { (catalog_state(&catalog, "c1").await == (kept, false)).then_some(()) }
    })
    .await;
    quiet(&js).await;
    let keys_after = fixtures::keys_under(&store, "backups/c1/").await;
    let gone: BTreeSet<String> = keys_before.difference(&keys_after).cloned().collect();
    assert_eq!(gone.len(), 2 * deleting.len(), "{gone:?}");
    // The approval is used up.
    let approval = topo.breaker.entry("c1.full").await.unwrap();
    assert!(
        approval.is_none_or(|e| e.operation != jetstream::kv::Operation::Put),
        "the approval was used once"
    );

    // Every object deleted is in the audit, with its backup, the reasons and the policy hash.
    let entries = audit(url, "c1").await;
    let mut audited = BTreeSet::new();
    for entry in of_kind(&entries, "objects-deleted") {
        for backup in entry["backups"].as_array().unwrap() {
            let id = backup["id"].as_str().unwrap();
            assert!(deleting.contains(id), "{id} was not to go: {entry}");
            assert_eq!(backup["policy_hash"], json!(policy_hash), "{entry}");
            assert!(
                !backup["reasons"].as_array().unwrap().is_empty(),
                "a deletion without its reasons: {entry}"
            );
            for object in backup["objects"].as_array().unwrap() {
                let key = object["key"].as_str().unwrap();
                assert!(key.contains(&format!("/{id}/")), "{key} is not {id}'s");
                if !key.ends_with("metadata.json") {
                    assert!(object["size"].as_u64().unwrap() > 0, "{entry}");
                }
                audited.insert(key.to_string());
            }
        }
    }
    assert_eq!(audited, gone, "objects deleted and objects audited");
    let removed: BTreeSet<String> = of_kind(&entries, "records-removed")
        .iter()
        .flat_map(|e| e["backups"].as_array().unwrap().iter())
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(removed, deleting);
    let decisions = of_kind(&entries, "retention-decision");
    assert!(
        decisions
            .iter()
            .any(|d| d["policy_hash"] == json!(policy_hash)),
        "{decisions:?}"
    );
    let marked: BTreeSet<String> = of_kind(&entries, "backups-marked")
        .iter()
        .flat_map(|e| e["backups"].as_array().unwrap().iter())
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(marked, deleting);
    // In order, for each backup: marked before any deleter could claim it, claimed before
    // anything went, its objects before its record.
    for id in &deleting {
        let mut kinds: Vec<&str> = entries
            .iter()
            .filter(|e| {
                e["backups"]
                    .as_array()
                    .is_some_and(|backups| backups.iter().any(|b| b["id"] == json!(id)))
            })
            .filter_map(|e| e["kind"].as_str())
            .filter(|kind| {
                [
                    "backups-marked",
                    "backups-claimed",
                    "objects-deleted",
                    "records-removed",
                ]
                .contains(kind)
            })
            .collect();
        kinds.dedup();
        assert_eq!(
            kinds,
            [
                "backups-marked",
                "backups-claimed",
                "objects-deleted",
                "records-removed"
            ],
            "{id}"
        );
    }
    // Who did what: the policy change (before and after) and the approval, each with the user.
    let change = of_kind(&entries, "schedule-changed")
        .into_iter()
        .find(|e| e["after"]["policy"]["keep_last"] == 2)
        .expect("the policy change is audited");
    assert_eq!(change["before"]["policy"]["keep_last"], 20);
    assert!(change["actor"]["user"]
        .as_str()
        .unwrap()
        .starts_with("alice"));
    let approval = of_kind(&entries, "breaker-approved");
    assert_eq!(approval.len(), 1, "{approval:?}");
    assert!(approval[0]["actor"]["client"]
        .as_str()
        .unwrap()
        .starts_with("sexton-cli/"));
    assert_eq!(of_kind(&entries, "breaker-released").len(), 1);
    assert!(of_kind(&entries, "user-action")
        .iter()
        .any(|e| e["verb"] == "schedule.update" && e["outcome"] == "refused, needs confirmation"));
    // One backup's story, as people read it.
    let one = deleting.iter().next().unwrap();
    let story = sexton(url, &["audit", "--cluster", "c1", "--backup", one]).await;
    expect(&story, 0, "sexton audit --backup");
    for kind in [
        "retention-decision",
        "breaker-held",
        "breaker-approved",
        "backups-marked",
        "backups-claimed",
        "objects-deleted",
        "records-removed",
    ] {
        assert!(story.stdout.contains(kind), "{kind}:\n{}", story.stdout);
    }
    println!(
        "--- sexton audit --cluster c1 --backup {one}\n{}",
        story.stdout
    );

    // A later run is judged afresh: twelve new backups and the same narrowing hold again.
    let widened = sexton(
        url,
        &["schedule", "update", "f", "--keep-last", "20", "-o", "json"],
    )
    .await;
    expect(&widened, 0, "widening needs no --yes");
    for i in 13..=24 {
        take(
            &js,
            &store,
            &catalog,
            report("c1", "f", &format!("f-{i:02}"), 30 - i),
        )
        .await;
    }
    quiet(&js).await;
    let (before_second, _) = catalog_state(&catalog, "c1").await;
    assert_eq!(before_second.len(), kept.len() + 12);
    let narrowed = sexton(
        url,
        &["schedule", "update", "f", "--keep-last", "2", "--yes"],
    )
    .await;
    expect(&narrowed, 0, "narrowing again");
    sweep(&js, "c1").await;
    eventually("the second run held", Duration::from_secs(30), || {
        let client = client.clone();
        async move {
            let group = preview(&client, "c1").await;
            (group["breaker"]["held"] == true && group["breaker"]["approval"].is_null())
                .then_some(())
        }
    })
    .await;
    quiet(&js).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        catalog_state(&catalog, "c1").await,
        (before_second, false),
        "the used approval let nothing else through"
    );
    fleet.stop().await.unwrap();
}

/// A count and a stale group: each holds the run and deletes nothing; the stale group's next
/// run, once a fresh backup completed, is judged afresh and goes through without an approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_breaker_trigger_holds_the_run_and_a_fresh_backup_ends_a_stale_hold() {
    let world = Setup::new(SERVICES).start().await;
    let World {
        config,
        fleet,
        client,
        js,
        ..
    } = world;
    // Count: at most 3 backups a run (the share is not limited).
    schedule(
        &client,
        "count",
        "c2",
        json!({"breaker": {"max_delete_count": 3, "max_delete_fraction": 1}}),
    )
    .await;
    // Stale: a running schedule (yearly: it never fires here) whose group's newest backup may
    // be an hour old at most.
    schedule(
        &client,
        "stale",
        "c3",
        json!({"paused": false, "cron": "0 0 1 1 *", "breaker": {"stale_after": "1h"}}),
    )
    .await;
    // Recovery (issue 47): the schedule promises a day of restorable instants; the default
    // limits (a small group, few deletions) would let the narrowed run through.
    schedule(
        &client,
        "recov",
        "c4",
        json!({"objectives": {"window": "1d"}}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    for i in 1..=6 {
        take(
            &js,
            &store,
            &catalog,
            report("c2", "count", &format!("n-{i}"), 30 - i),
        )
        .await;
        take(
            &js,
            &store,
            &catalog,
            report("c3", "stale", &format!("s-{i}"), 300 - i),
        )
        .await;
        take(
            &js,
            &store,
            &catalog,
            report("c4", "recov", &format!("r-{i}"), 60 - i),
        )
        .await;
    }
    quiet(&js).await;
    let keys_before = fixtures::keys_under(&store, "backups/").await;

    for (cluster, name, kind) in [
        ("c2", "count", "count"),
        ("c3", "stale", "stale"),
        ("c4", "recov", "recovery"),
    ] {
        // The API refuses the narrowing without confirm, with the preview, and changes nothing.
        let update = json!({"schema_version": 1, "name": name,
                            "policy_patch": {"keep_last": 2}});
        let err = api(&client, "schedule", "update", update.clone())
            .await
            .unwrap_err();
        assert!(err.needs_confirmation(), "{err:?}");
        let preview_deleted = err.details.as_ref().unwrap()["preview"]["deleted"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(preview_deleted, 4, "{err:?}");
        assert_eq!(
            schedule_record(&js, name).await.unwrap().0.policy,
            serde_json::from_value(json!({"keep_last": 20})).unwrap()
        );
        let mut confirmed = update;
        confirmed["confirm"] = json!(true);
        api(&client, "schedule", "update", confirmed).await.unwrap();
        sweep(&js, cluster).await;
        let group = eventually(&format!("{cluster} held"), Duration::from_secs(30), || {
            let client = client.clone();
            async move {
                let group = preview(&client, cluster).await;
                (group["breaker"]["held"] == true).then_some(group)
            }
        })
        .await;
        let trips: Vec<&str> = group["breaker"]["trips"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["kind"].as_str().unwrap())
            .collect();
        assert_eq!(trips, [kind], "{group:#}");
        assert_eq!(group["breaker"]["deleting"].as_array().unwrap().len(), 4);
    }
    quiet(&js).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    for cluster in ["c2", "c3", "c4"] {
        let (ids, marked) = catalog_state(&catalog, cluster).await;
        assert_eq!((ids.len(), marked), (6, false), "{cluster} deleted nothing");
    }
    assert_eq!(fixtures::keys_under(&store, "backups/").await, keys_before);
    let kinds: BTreeSet<String> = fixtures::incidents(&js)
        .await
        .into_iter()
        .filter(|i| i.kind == "retention-held")
        .filter_map(|i| i.cluster)
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["c2".into(), "c3".into(), "c4".into()])
    );

    // A fresh backup of the stale group: its run is judged afresh, nothing trips, five go.
    take(&js, &store, &catalog, report("c3", "stale", "s-7", 0)).await;
    eventually(
        "the stale group's run went through",
        Duration::from_secs(60),
        || {
            let catalog = catalog.clone();
            async move {
                let (ids, marked) = catalog_state(&catalog, "c3").await;
                (!marked && ids == BTreeSet::from(["s-6".into(), "s-7".into()])).then_some(())
            }
        },
    )
    .await;
    assert_eq!(preview(&client, "c3").await["breaker"], Value::Null);
    // The count group stays held.
    assert_eq!(catalog_state(&catalog, "c2").await.0.len(), 6);
    fleet.stop().await.unwrap();
}

/// `backup delete --remote`, `backup orphans --delete`, `schedule delete` that removes records
/// and `cluster forget --remote` without `--yes` and without a terminal: refused, exit 2,
/// nothing deleted; `--dry-run` says what would happen; `--yes` goes ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destructive_verbs_without_yes_and_without_a_terminal_are_refused() {
    let world = Setup::new(SERVICES).start().await;
    let World {
        nats,
        config,
        fleet,
        client,
        js,
        ..
    } = world;
    let url = nats.url();
    let url = url.as_str();
    schedule(
        &client,
        "own",
        "d1",
        json!({"backup_owner": "schedule", "remote_cleanup": true}),
    )
    .await;
    schedule(&client, "shared", "d2", json!({"backup_owner": "cluster"})).await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    for i in 1..=2 {
        take(
            &js,
            &store,
            &catalog,
            report("d1", "own", &format!("o-{i}"), 10 - i),
        )
        .await;
        take(
            &js,
            &store,
            &catalog,
            report("d2", "shared", &format!("h-{i}"), 10 - i),
        )
        .await;
    }
    quiet(&js).await;
    // An orphan, older than the grace period given below.
    fixtures::put_objects(&store, &["backups/d1/own/lost/data".to_string()]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let keys_before = fixtures::keys_under(&store, "backups/").await;
    let d1_before = catalog_state(&catalog, "d1").await;
    let d2_before = catalog_state(&catalog, "d2").await;

    let refusals: [&[&str]; 4] = [
        &["backup", "delete", "o-1", "--cluster", "d1", "--remote"],
        &[
            "backup",
            "orphans",
            "--cluster",
            "d1",
            "--delete",
            "--grace",
            "1s",
        ],
        &["schedule", "delete", "own"],
        &["cluster", "forget", "--cluster", "d2", "--remote"],
    ];
    // Forgetting a cluster needs it to have no schedule: delete d2's, whose records stay (no
    // question asked: it removes nothing).
    let removed = sexton(url, &["schedule", "delete", "shared"]).await;
    expect(&removed, 0, "schedule delete that keeps the records");
    // A new schedule whose policy would delete one of the records d2 kept: refused without
    // --yes, with what it would delete, and nothing is created.
    let create = [
        "schedule",
        "create",
        "again",
        "--cluster",
        "d2",
        "--plan",
        "full",
        "--cron",
        "@daily",
        "--keep-last",
        "1",
        "--paused",
    ];
    let run = sexton(url, &create).await;
    expect(&run, 2, "schedule create that deletes at once");
    assert!(
        run.stderr
            .contains("would delete 1 backup(s) kept now (h-1)"),
        "{}",
        run.stderr
    );
    assert!(schedule_record(&js, "again").await.is_none());
    for args in refusals {
        let run = sexton(url, args).await;
        expect(&run, 2, &args.join(" "));
        assert!(
            run.stderr.contains("add --yes") && run.stderr.contains("nothing was changed"),
            "{}: {}",
            args.join(" "),
            run.stderr
        );
        // The dry run says what would happen, and changes nothing either.
        let mut dry = args.to_vec();
        dry.push("--dry-run");
        expect(&sexton(url, &dry).await, 0, &dry.join(" "));
    }
    quiet(&js).await;
    assert_eq!(fixtures::keys_under(&store, "backups/").await, keys_before);
    assert_eq!(catalog_state(&catalog, "d1").await, d1_before);
    assert_eq!(catalog_state(&catalog, "d2").await, d2_before);
    assert!(schedule_record(&js, "own").await.is_some());

    // With --yes they go ahead.
    let forgot = sexton(
        url,
        &["cluster", "forget", "--cluster", "d2", "--remote", "--yes"],
    )
    .await;
    expect(&forgot, 0, "cluster forget --remote --yes");
    let orphans = sexton(
        url,
        &[
            "backup",
            "orphans",
            "--cluster",
            "d1",
            "--delete",
            "--grace",
            "1s",
            "--yes",
        ],
    )
    .await;
    expect(&orphans, 0, "backup orphans --delete --yes");
    eventually("d2's objects deleted", Duration::from_secs(60), || {
        let store = store.clone();
        async move {
            fixtures::keys_under(&store, "backups/d2/")
                .await
                .is_empty()
                .then_some(())
        }
    })
    .await;
    assert!(!fixtures::keys_under(&store, "backups/d1/")
        .await
        .contains("backups/d1/own/lost/data"));
    // Each is in the audit with who asked.
    let entries = audit(url, "d2").await;
    assert!(of_kind(&entries, "user-action")
        .iter()
        .any(|e| e["verb"] == "cluster.forget" && e["outcome"] == "done"));
    let entries = audit(url, "d1").await;
    assert!(of_kind(&entries, "objects-deleted")
        .iter()
        .any(
            |e| e["backups"][0]["objects"][0]["key"] == "backups/d1/own/lost/data"
                && e["actor"]["user"].as_str().unwrap().starts_with("alice")
        ));
    fleet.stop().await.unwrap();
}

/// Bad breaker settings and audit arguments: clear errors, nothing changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_breaker_settings_and_audit_arguments_are_refused_clearly() {
    let world = Setup::new(SCHEDULER_ONLY)
        .without_s3()
        .schedule(json!({"name": "ok", "cluster": "c1", "plan": "full", "cron": "@daily"}))
        .start()
        .await;
    let World {
        nats,
        fleet,
        client,
        js,
        ..
    } = world;
    let url = nats.url();
    let url = url.as_str();
    let (_, revision) = schedule_record(&js, "ok").await.unwrap();
    for (breaker, needle) in [
        (
            json!({"max_delete_fraction": -0.1}),
            "max_delete_fraction -0.1",
        ),
        (
            json!({"max_delete_fraction": 1.5}),
            "expected a share from 0 to 1",
        ),
        (json!({"max_delete_count": 0}), "max_delete_count 0"),
        (json!({"max_delete_count": -4}), "at least 1"),
        (json!({"stale_after": "soon"}), "stale_after \"soon\""),
        (json!({"stale_after": "0s"}), "is zero"),
        (json!({"stale_afterr": "1d"}), "unknown field"),
    ] {
        let err = api(
            &client,
            "schedule",
            "update",
            json!({"schema_version": 1, "name": "ok", "breaker": breaker}),
        )
        .await
        .unwrap_err();
        assert_eq!(
            err.code,
            sexton_shared::api::ErrorCode::Invalid,
            "{breaker}"
        );
        assert!(err.message.contains(needle), "{breaker}: {}", err.message);
        let text = breaker.to_string();
        let run = sexton(url, &["schedule", "update", "ok", "--breaker", &text]).await;
        expect(&run, 2, &text);
        assert!(run.stderr.contains(needle), "{text}: {}", run.stderr);
        let run = sexton(
            url,
            &[
                "schedule",
                "create",
                "bad",
                "--cluster",
                "c1",
                "--plan",
                "p",
                "--cron",
                "@daily",
                "--keep-last",
                "3",
                "--breaker",
                &text,
            ],
        )
        .await;
        expect(&run, 2, &text);
    }
    assert_eq!(schedule_record(&js, "ok").await.unwrap().1, revision);
    assert!(schedule_record(&js, "bad").await.is_none());
    for (args, needle) in [
        (vec!["audit", "--since", "soon"], "--since"),
        (vec!["audit", "--cluster", "../c1"], "--cluster"),
        (
            vec!["schedule", "update", "ok", "--keep-last", "0"],
            "at least 1",
        ),
        (
            vec!["schedule", "update", "ok", "--replace-policy"],
            "--replace-policy needs",
        ),
        (
            vec!["schedule", "update", "ok", "--policy", "[1]"],
            "expected a JSON object",
        ),
    ] {
        let run = sexton(url, &args).await;
        expect(&run, 2, &args.join(" "));
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    }
    let err = api(
        &client,
        "schedule",
        "update",
        json!({"schema_version": 1, "name": "ok", "policy": {"keep_last": 2},
               "policy_patch": {"keep_last": 3}}),
    )
    .await
    .unwrap_err();
    assert!(err.message.contains("not both"), "{}", err.message);
    assert_eq!(schedule_record(&js, "ok").await.unwrap().1, revision);
    fleet.stop().await.unwrap();
}

/// With no deleter to claim them, the delete jobs stay in their stream and every run finds the
/// marks still expiring: each mark's `backups-marked` entry was stored before its delete job,
/// and the runs that publish the job again do not audit the mark again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_is_audited_once_and_before_its_delete_job() {
    let world = Setup::new(Members {
        deleter: false,
        ..SERVICES
    })
    .start()
    .await;
    let World {
        config, client, js, ..
    } = &world;
    schedule(
        client,
        "g",
        "c2",
        json!({"policy": {"keep_last": 1}, "breaker": {"enabled": false}}),
    )
    .await;
    let catalog = &world.catalog;
    let store = object_store(config).await;
    for i in 1..=3 {
        take(
            js,
            &store,
            catalog,
            report("c2", "g", &format!("g-{i:02}"), 10 - i),
        )
        .await;
    }
    let expiring = || async {
        fixtures::records_of(catalog, "c2")
            .await
            .into_values()
            .filter(|r| r.value.status == BackupStatus::Expiring)
            .map(|r| r.value.id.to_string())
            .collect::<BTreeSet<String>>()
    };
    let marked: BTreeSet<String> = ["g-01", "g-02"].map(String::from).into();
    eventually("g-01 and g-02 marked", Duration::from_secs(60), || async {
        (expiring().await == marked).then_some(())
    })
    .await;
    // Two more runs, each publishing both jobs again.
    for _ in 0..2 {
        sweep(js, "c2").await;
        eventually("the sweep's run done", Duration::from_secs(30), || async {
            (consumer_backlog(js, topology::STREAM_RETENTION, topology::CONSUMER_RETENTION).await?
                == 0)
                .then_some(())
        })
        .await;
    }
    assert_eq!(
        expiring().await,
        marked,
        "nothing deleted without a deleter"
    );

    let entries = read_stream(js, topology::STREAM_AUDIT, "sexton.v1.audit.>").await;
    let jobs = stored_in_work_queue(js, topology::STREAM_JOBS, "sexton.v1.job.delete.").await;
    for id in &marked {
        let audited: Vec<_> = entries
            .iter()
            .filter(|m| {
                let entry: Value = serde_json::from_slice(&m.payload).unwrap();
                entry["kind"] == "backups-marked"
                    && entry["backups"]
                        .as_array()
                        .is_some_and(|backups| backups.iter().any(|b| b["id"] == json!(id)))
            })
            .map(|m| m.info().unwrap().published)
            .collect();
        assert_eq!(audited.len(), 1, "{id}: the mark audited once");
        let job = jobs
            .iter()
            .find(|m| {
                serde_json::from_slice::<Value>(&m.payload).unwrap()["backup_id"] == json!(id)
            })
            .unwrap_or_else(|| panic!("{id}'s delete job is in its stream"));
        assert!(
            audited[0] < job.time,
            "{id}: the mark was audited at {} and its job stored at {}",
            audited[0],
            job.time
        );
    }
}

/// Issue 48: the scheduler and the deleter write `user-action` entries through one writer, so
/// a refusal reads the same whichever service answered (the deleter said `notfound` where the
/// scheduler said `not-found`), and an entry the deleter stored with its old spelling still
/// reads, and shows, as the code it meant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_services_audit_a_refusal_alike_and_old_spellings_still_read() {
    let world = Setup::new(SERVICES).start().await;
    let url = world.nats.url();
    let body = |name: &str| json!({"schema_version": 1, "name": name});
    let refused = |result: Result<Value, sexton_shared::api::ApiError>| {
        let err = result.expect_err("refused");
        serde_json::to_value(err.code).unwrap()
    };
    // The deleter's answer, then the scheduler's, once each is up: both about a name nobody
    // has.
    let answered = |resource: &'static str, verb: &'static str| {
        let client = world.client.clone();
        async move {
            eventually(
                &format!("{resource}.{verb} answered"),
                Duration::from_secs(30),
                move || {
                    let client = client.clone();
                    async move {
                        match api(&client, resource, verb, body("nope")).await {
                            Err(err) if err.code == sexton_shared::api::ErrorCode::Unavailable => {
                                None
                            }
                            other => Some(refused(other)),
                        }
                    }
                },
            )
            .await
        }
    };
    let deleter_code = answered("plugin", "unregister").await;
    let scheduler_code = answered("schedule", "pause").await;
    assert_eq!(deleter_code, "not-found");
    assert_eq!(scheduler_code, "not-found");
    // An entry of the deleter's old writer, as it lies in the stream.
    let old = json!({"schema_version": 1, "at": Utc::now(), "service": "deleter",
                     "actor": {"user": "bob@old"}, "kind": "user-action",
                     "verb": "plugin.unregister", "arguments": {"name": "gone"},
                     "outcome": "notfound", "error": "plugin gone not found"});
    world
        .js
        .publish(
            sexton_shared::audit::subject("deleter", None),
            serde_json::to_vec(&old).unwrap().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();

    let all = |output: &'static str| {
        let url = url.clone();
        async move {
            let mut args = vec!["audit", "--since", "all"];
            if !output.is_empty() {
                args.extend(["-o", output]);
            }
            let run = sexton(&url, &args).await;
            expect(&run, 0, "sexton audit");
            run
        }
    };
    let entries = all("json").await.json();
    let outcome_of = |verb: &str, name: &str| {
        entries
            .as_array()
            .unwrap()
            .iter()
            .find(|e| {
                e["kind"] == "user-action" && e["verb"] == verb && e["arguments"]["name"] == name
            })
            .unwrap_or_else(|| panic!("{verb} {name} not audited: {entries}"))["outcome"]
            .clone()
    };
    assert_eq!(outcome_of("plugin.unregister", "nope"), "not-found");
    assert_eq!(outcome_of("schedule.pause", "nope"), "not-found");
    assert_eq!(outcome_of("plugin.unregister", "gone"), "not-found");
    let table = all("").await.stdout;
    assert!(
        table.contains("plugin.unregister: not-found: plugin gone not found [by bob@old]"),
        "{table}"
    );
    world.fleet.stop().await.unwrap();
}
