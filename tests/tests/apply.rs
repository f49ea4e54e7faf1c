//! `sexton apply -f`, `sexton diff -f` and `sexton get schedules` (issue 31) with the real
//! binary against a real fleet (NATS, SeaweedFS, scheduler, retention-worker, deleter): a
//! directory applied, applied again (nothing changes), a policy change diffed, refused
//! without --yes and applied with it, the export applied back byte-stable, pruning that
//! removes only what apply manages within the selector, and bad manifests refused whole.

mod support;

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, FixedOffset};
use sexton_tests::{setup::Setup, *};
use support::*;

/// `sexton args...` against `nats_url`, in `dir`.
async fn sexton(nats_url: &str, dir: &Path, args: &[&str]) -> CliRun {
    sexton_against(nats_url, Some(dir), args).await
}

fn expect(run: &CliRun, code: i32, what: &str) {
    run.expect(code, what);
}

fn at(text: &str) -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339(text).unwrap()
}

fn schedule_yaml(name: &str, team: &str, keep_last: u32) -> String {
    format!(
        "apiVersion: sexton.io/v1
kind: Schedule
metadata:
  name: {name}
  labels:
    team: {team}
spec:
  cluster: c1
  plan: {name}
  cron: '0 3 * * *'
  paused: true
  policy:
    keep_last: {keep_last}
"
    )
}

/// `schedules/db.yaml`: one document per (schedule, keep_last), team db.
fn write_db(root: &Path, schedules: &[(&str, u32)]) {
    let documents: Vec<String> = schedules
        .iter()
        .map(|(name, keep_last)| schedule_yaml(name, "db", *keep_last))
        .collect();
    std::fs::write(root.join("schedules/db.yaml"), documents.join("---\n")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_is_applied_diffed_exported_and_pruned_safely() {
    let world = Setup::new(Members {
        scheduler: false,
        retention_worker: true,
        deleter: true,
        executor: false,
    })
    .start()
    .await;
    // The scheduler on a metrics port of its own: its drift gauge is read below.
    let metrics_port = free_port();
    let mut scheduler_config = world.config.clone();
    scheduler_config.http.listen = format!("127.0.0.1:{metrics_port}");
    let scheduler = Fleet::start(&scheduler_config, SCHEDULER_ONLY);
    let drifted = |schedule: &str| {
        let series = format!("sexton_schedule_drifted{{schedule=\"{schedule}\"}} ");
        http_get(metrics_port, "/metrics").and_then(|(_, page)| {
            page.lines()
                .find_map(|line| line.strip_prefix(&series)?.trim().parse::<i64>().ok())
        })
    };
    let url = world.nats.url();
    let url = url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    eventually("the scheduler api", Duration::from_secs(30), || async {
        (sexton(url, root, &["schedule", "list"]).await.code == 0).then_some(())
    })
    .await;
    std::fs::create_dir_all(root.join("schedules/more")).unwrap();
    write_db(root, &[("nightly", 5), ("weekly", 4)]);
    std::fs::write(
        root.join("schedules/more/web.json"),
        r#"{"apiVersion": "sexton.io/v1", "kind": "Schedule",
            "metadata": {"name": "hourly", "labels": {"team": "web"}},
            "spec": {"cluster": "c2", "plan": "hourly", "cron": "@hourly", "paused": true,
                     "policy": {"keep_last": 24}}}"#,
    )
    .unwrap();
    std::fs::write(root.join("schedules/README.md"), "not a manifest").unwrap();

    // Applied: each created; applied again: nothing changes, and it says so.
    let applied = sexton(url, root, &["apply", "-f", "schedules"]).await;
    expect(&applied, 0, "apply");
    for name in ["nightly", "weekly", "hourly"] {
        assert!(
            applied.stdout.contains(&format!("schedule/{name} created")),
            "{}",
            applied.stdout
        );
    }
    // As applied: no drift, and a schedule apply never touched has no series at all.
    for name in ["nightly", "weekly", "hourly"] {
        eventually(
            &format!("{name} as applied"),
            Duration::from_secs(20),
            || async { (drifted(name) == Some(0)).then_some(()) },
        )
        .await;
    }
    let again = sexton(url, root, &["apply", "-f", "schedules"]).await;
    expect(&again, 0, "apply again");
    assert_eq!(
        again.stdout.matches(" unchanged").count(),
        3,
        "{}",
        again.stdout
    );
    expect(
        &sexton(url, root, &["diff", "-f", "schedules"]).await,
        0,
        "diff of what was applied",
    );

    // Three backups of nightly; a policy that keeps one deletes two of them.
    let store = object_store(&world.config).await;
    for (id, day) in [("b1", "01"), ("b2", "02"), ("b3", "03")] {
        let backup = Backup::full(id, at(&format!("2026-03-{day}T00:00:00Z")), 10);
        report_backup(&world.js, &store, "c1", "nightly", "nightly", &backup).await;
    }
    wait_for_completed(&world.catalog, "c1", 3).await;
    write_db(root, &[("nightly", 1), ("weekly", 4)]);
    let diff = sexton(url, root, &["diff", "-f", "schedules"]).await;
    expect(&diff, 1, "diff of a changed policy");
    assert!(
        diff.stdout.contains("--- live/schedule/nightly")
            && diff.stdout.contains("-  keep_last: 5")
            && diff.stdout.contains("+  keep_last: 1")
            && diff.stdout.contains("# applying it deletes 2 backups"),
        "{}",
        diff.stdout
    );
    assert!(!diff.stdout.contains("weekly"), "{}", diff.stdout);
    // A dry run reports what the real apply would need, and ends well (issue 50).
    let dry = sexton(url, root, &["apply", "-f", "schedules", "--dry-run"]).await;
    expect(&dry, 0, "apply --dry-run of a policy that deletes");
    assert!(
        dry.stderr.contains("note: schedule nightly: the change")
            && dry.stderr.contains("give --yes"),
        "{}",
        dry.stderr
    );
    let refused = sexton(url, root, &["apply", "-f", "schedules"]).await;
    expect(&refused, 2, "apply of a policy that deletes, without --yes");
    assert!(
        refused.stderr.contains("give --yes") && refused.stderr.contains("nothing was applied"),
        "{}",
        refused.stderr
    );
    let live = sexton(url, root, &["-o", "json", "schedule", "get", "nightly"]).await;
    assert!(live.stdout.contains("\"keep_last\": 5"), "{}", live.stdout);
    // Changed by hand: drift, which the next apply puts right.
    expect(
        &sexton(
            url,
            root,
            &["schedule", "update", "weekly", "--keep-last", "6"],
        )
        .await,
        0,
        "weekly changed by hand",
    );
    eventually("weekly drifted", Duration::from_secs(20), || async {
        (drifted("weekly") == Some(1)).then_some(())
    })
    .await;
    expect(
        &sexton(url, root, &["schedule", "pause", "hourly"]).await,
        0,
        "pause",
    );
    let confirmed = sexton(url, root, &["apply", "-f", "schedules", "--yes"]).await;
    expect(&confirmed, 0, "apply --yes");
    assert!(
        confirmed.stdout.contains("schedule/nightly configured")
            && confirmed.stdout.contains("schedule/weekly configured")
            && confirmed.stdout.contains("schedule/hourly unchanged"),
        "{}",
        confirmed.stdout
    );
    eventually(
        "weekly as applied again",
        Duration::from_secs(20),
        || async { (drifted("weekly") == Some(0)).then_some(()) },
    )
    .await;
    // Pausing is an operation, not drift, and apply leaves it paused.
    assert_eq!(drifted("hourly"), Some(0));
    let hourly = sexton(url, root, &["-o", "json", "schedule", "get", "hourly"]).await;
    assert!(
        hourly.stdout.contains("\"paused\": true"),
        "{}",
        hourly.stdout
    );
    // The next run deletes what the new policy lets go: b3 stays.
    sexton_shared::nats::publish_once(
        &world.js,
        sexton_shared::channels::SWEEPS.subject(&cluster("c1")),
        "test-sweep.c1.1",
        sexton_model::wire::encode(&sexton_model::wire::RetentionSweep {
            schema_version: 1,
            cluster: cluster("c1"),
            requested_at: chrono::Utc::now(),
            scrub: false,
        }),
    )
    .await
    .unwrap();
    eventually(
        "retention under the applied policy",
        Duration::from_secs(60),
        || async {
            let records = world.catalog.list_cluster(&cluster("c1")).await.ok()?;
            (records.len() == 1 && records[0].value.id.as_str() == "b3").then_some(())
        },
    )
    .await;

    // Exported as a repository keeps it, applied back: nothing changes, and a second export
    // is the same bytes.
    let export = sexton(url, root, &["get", "schedules", "--no-status"]).await;
    expect(&export, 0, "get schedules");
    assert!(!export.stdout.contains("status:"), "{}", export.stdout);
    std::fs::write(root.join("export.yaml"), &export.stdout).unwrap();
    let back = sexton(url, root, &["apply", "-f", "export.yaml"]).await;
    expect(&back, 0, "apply the export");
    assert_eq!(
        back.stdout.matches(" unchanged").count(),
        3,
        "{}",
        back.stdout
    );
    let second = sexton(url, root, &["get", "schedules", "--no-status"]).await;
    assert_eq!(second.stdout, export.stdout, "the export is not stable");

    // With its status, for health checks: generations count the declared changes (weekly:
    // created, changed by hand, applied back), and apply ignores the status.
    let statuses = sexton(url, root, &["-o", "json", "get", "schedules"]).await;
    expect(&statuses, 0, "get schedules with status");
    let list: serde_json::Value = serde_json::from_str(&statuses.stdout).unwrap();
    let item = |name: &str| {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {}", statuses.stdout))
            .clone()
    };
    let condition = |item: &serde_json::Value, kind: &str| {
        item["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .map(|c| {
                (
                    c["status"].as_str().unwrap().to_owned(),
                    c["reason"].clone(),
                )
            })
            .unwrap_or_else(|| panic!("{kind}: {item}"))
    };
    let (nightly, weekly, hourly) = (item("nightly"), item("weekly"), item("hourly"));
    for (item, generation) in [(&nightly, 2), (&weekly, 3), (&hourly, 1)] {
        assert_eq!(item["metadata"]["generation"], generation, "{item}");
        assert_eq!(item["status"]["observedGeneration"], generation, "{item}");
    }
    // Paused (by its manifest, then by hand): held, so not ready.
    assert_eq!(condition(&hourly, "Held").0, "True");
    assert_eq!(
        condition(&hourly, "Ready"),
        ("False".into(), "Paused".into())
    );
    // nightly's three backups completed: the latest completion is b3's, nothing failing.
    assert_eq!(
        nightly["status"]["lastCompleted"], "2026-03-03T00:10:00Z",
        "{nightly}"
    );
    assert_eq!(
        nightly["status"]["lastBackupOutcome"], "completed",
        "{nightly}"
    );
    assert_eq!(
        condition(&nightly, "Failing"),
        ("False".into(), "LastBackupCompleted".into())
    );
    std::fs::write(root.join("statuses.json"), &statuses.stdout).unwrap();
    let back = sexton(url, root, &["apply", "-f", "statuses.json"]).await;
    expect(&back, 0, "apply an export with status");
    assert_eq!(
        back.stdout.matches(" unchanged").count(),
        3,
        "{}",
        back.stdout
    );
    let as_json = sexton(url, root, &["-o", "json", "get", "schedules"]).await;
    std::fs::write(root.join("export.json"), &as_json.stdout).unwrap();
    let back = sexton(url, root, &["apply", "-f", "export.json"]).await;
    assert_eq!(
        back.stdout.matches(" unchanged").count(),
        3,
        "{}",
        back.stdout
    );

    // Pruning: weekly leaves the directory; a schedule made by hand with the same label
    // stays, and so does hourly, outside the selector.
    expect(
        &sexton(
            url,
            root,
            &[
                "schedule",
                "create",
                "manual",
                "--cluster",
                "c1",
                "--plan",
                "manual",
                "--cron",
                "@daily",
                "--keep-last",
                "3",
                "--label",
                "team=db",
            ],
        )
        .await,
        0,
        "a schedule made by hand",
    );
    write_db(root, &[("nightly", 1)]);
    // diff sees what apply --prune would delete: a CI gate fails on it (issue 50).
    let plain = sexton(url, root, &["diff", "-f", "schedules"]).await;
    assert!(
        !plain.stdout.contains("apply --prune deletes"),
        "{}",
        plain.stdout
    );
    let gate = sexton(
        url,
        root,
        &["diff", "-f", "schedules", "--prune", "-l", "team=db"],
    )
    .await;
    expect(&gate, 1, "diff --prune of a removed manifest");
    assert!(
        gate.stdout.contains("--- live/schedule/weekly")
            && gate
                .stdout
                .contains("# schedule weekly: apply --prune deletes it")
            && !gate.stdout.contains("schedule manual"),
        "{}",
        gate.stdout
    );
    let no_selector = sexton(url, root, &["diff", "-f", "schedules", "--prune"]).await;
    expect(&no_selector, 2, "diff --prune without a selector");
    let no_selector = sexton(url, root, &["apply", "-f", "schedules", "--prune"]).await;
    expect(&no_selector, 2, "--prune without a selector");
    let pruned = sexton(
        url,
        root,
        &["apply", "-f", "schedules", "--prune", "-l", "team=db"],
    )
    .await;
    expect(&pruned, 0, "apply --prune");
    assert!(
        pruned.stdout.contains("schedule/weekly pruned"),
        "{}",
        pruned.stdout
    );
    assert!(!pruned.stdout.contains("manual"), "{}", pruned.stdout);
    let listed = sexton(url, root, &["-o", "json", "schedule", "list"]).await;
    for (name, present) in [
        ("manual", true),
        ("hourly", true),
        ("nightly", true),
        ("weekly", false),
    ] {
        assert_eq!(
            listed.stdout.contains(&format!("\"name\": \"{name}\"")),
            present,
            "{name}: {}",
            listed.stdout
        );
    }
    // nightly's backup stays with it.
    assert_eq!(
        world
            .catalog
            .list_cluster(&cluster("c1"))
            .await
            .unwrap()
            .len(),
        1
    );
    // An export holding the hand-made schedule applies back unchanged, and apply does not
    // take that schedule over (a later prune still leaves it alone).
    let export = sexton(url, root, &["get", "schedules"]).await;
    assert!(export.stdout.contains("name: manual"), "{}", export.stdout);
    assert!(!export.stdout.contains("managed-by"), "{}", export.stdout);
    std::fs::write(root.join("export.yaml"), &export.stdout).unwrap();
    let back = sexton(url, root, &["apply", "-f", "export.yaml"]).await;
    assert_eq!(
        back.stdout.matches(" unchanged").count(),
        3,
        "{}",
        back.stdout
    );
    let pruned = sexton(
        url,
        root,
        &["apply", "-f", "schedules", "--prune", "-l", "team=db"],
    )
    .await;
    expect(&pruned, 0, "apply --prune again");
    assert!(!pruned.stdout.contains("pruned"), "{}", pruned.stdout);

    // One bad document among good ones: nothing is applied, every problem named.
    std::fs::write(
        root.join("schedules/bad.yaml"),
        format!(
            "{}---\n{}",
            schedule_yaml("fresh", "db", 2),
            schedule_yaml("broken", "db", 2)
                .replace("  plan: broken\n", "  plan: broken\n  colour: red\n")
        ),
    )
    .unwrap();
    let bad = sexton(url, root, &["apply", "-f", "schedules"]).await;
    expect(&bad, 2, "apply with a bad document");
    assert!(
        bad.stderr.contains("schedules/bad.yaml:24: schedule broken: unknown field `colour`, expected one of `backup_owner`, `breaker`, `cluster`")
            && bad.stderr.contains("nothing was applied"),
        "{}",
        bad.stderr
    );
    let listed = sexton(url, root, &["-o", "json", "schedule", "list"]).await;
    assert!(
        !listed.stdout.contains("\"name\": \"fresh\""),
        "{}",
        listed.stdout
    );
    // A location the fleet does not have is the scheduler's refusal, found by the dry run.
    std::fs::write(
        root.join("schedules/bad.yaml"),
        schedule_yaml("fresh", "db", 2).replace(
            "    keep_last: 2\n",
            "    keep_last: 2\n  copies:\n  - to: moon\n    policy: {keep_last: 1}\n",
        ),
    )
    .unwrap();
    let bad = sexton(url, root, &["apply", "-f", "schedules"]).await;
    expect(&bad, 2, "apply with an unknown location");
    assert!(
        bad.stderr
            .contains("schedule fresh: copy rule to moon: no such location")
            && bad.stderr.contains("nothing was applied"),
        "{}",
        bad.stderr
    );
    // The hand-made schedule has no drift series: apply never applied it.
    assert_eq!(drifted("manual"), None);
    scheduler.stop().await.unwrap();
    world.fleet.stop().await.unwrap();
}

fn plugin_yaml(name: &str, team: &str, timeout: u32) -> String {
    format!(
        "apiVersion: sexton.io/v1
kind: DeletePlugin
metadata:
  name: {name}
  labels:
    team: {team}
spec:
  subject: sexton.v1.plugin.{name}
  selector:
    tier: gold
  timeout_seconds: {timeout}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_plugins_are_applied_exported_and_pruned_as_schedules_are() {
    let world = Setup::new(Members {
        scheduler: true,
        retention_worker: false,
        deleter: true,
        executor: false,
    })
    .start()
    .await;
    let url = world.nats.url();
    let url = url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    eventually("the deleter api", Duration::from_secs(30), || async {
        (sexton(url, root, &["plugin", "list"]).await.code == 0).then_some(())
    })
    .await;
    std::fs::create_dir_all(root.join("fleet")).unwrap();
    let write = |documents: &[String]| {
        std::fs::write(root.join("fleet/plugins.yaml"), documents.join("---\n")).unwrap()
    };
    write(&[
        plugin_yaml("snapshots", "db", 5),
        plugin_yaml("audit", "db", 10),
    ]);

    // Created, then unchanged; the deleter holds them as declared.
    let applied = sexton(url, root, &["apply", "-f", "fleet"]).await;
    expect(&applied, 0, "apply plugins");
    for name in ["snapshots", "audit"] {
        assert!(
            applied
                .stdout
                .contains(&format!("deleteplugin/{name} created")),
            "{}",
            applied.stdout
        );
    }
    let again = sexton(url, root, &["apply", "-f", "fleet"]).await;
    assert_eq!(
        again.stdout.matches(" unchanged").count(),
        2,
        "{}",
        again.stdout
    );
    expect(
        &sexton(url, root, &["diff", "-f", "fleet"]).await,
        0,
        "diff of applied plugins",
    );
    let listed = sexton(url, root, &["-o", "json", "plugin", "list"]).await;
    assert!(
        listed.stdout.contains("\"timeout_seconds\": 5")
            && listed.stdout.contains("\"tier\": \"gold\""),
        "{}",
        listed.stdout
    );

    // A change: diff shows it and exits 1; apply configures it.
    write(&[
        plugin_yaml("snapshots", "db", 7),
        plugin_yaml("audit", "db", 10),
    ]);
    let diff = sexton(url, root, &["diff", "-f", "fleet"]).await;
    expect(&diff, 1, "diff of a changed plugin");
    assert!(
        diff.stdout.contains("--- live/deleteplugin/snapshots")
            && diff.stdout.contains("-timeout_seconds: 5")
            && diff.stdout.contains("+timeout_seconds: 7")
            && !diff.stdout.contains("audit"),
        "{}",
        diff.stdout
    );
    let configured = sexton(url, root, &["apply", "-f", "fleet"]).await;
    assert!(
        configured
            .stdout
            .contains("deleteplugin/snapshots configured")
            && configured.stdout.contains("deleteplugin/audit unchanged"),
        "{}",
        configured.stdout
    );

    // Exported without status: applies back unchanged, the same bytes twice.
    let export = sexton(url, root, &["get", "deleteplugins", "--no-status"]).await;
    expect(&export, 0, "get deleteplugins");
    assert!(!export.stdout.contains("managed-by"), "{}", export.stdout);
    std::fs::write(root.join("export.yaml"), &export.stdout).unwrap();
    let back = sexton(url, root, &["apply", "-f", "export.yaml"]).await;
    assert_eq!(
        back.stdout.matches(" unchanged").count(),
        2,
        "{}",
        back.stdout
    );
    let second = sexton(url, root, &["get", "deleteplugins", "--no-status"]).await;
    assert_eq!(second.stdout, export.stdout, "the export is not stable");
    let with_status = sexton(url, root, &["get", "deleteplugin", "audit"]).await;
    assert!(
        with_status.stdout.contains("registeredAt:"),
        "{}",
        with_status.stdout
    );

    // Prune: audit leaves the directory and goes; one registered by hand with the same
    // label stays, and so does one outside the selector.
    expect(
        &sexton(
            url,
            root,
            &[
                "plugin",
                "register",
                "manual",
                "--subject",
                "sexton.v1.plugin.manual",
            ],
        )
        .await,
        0,
        "a plugin registered by hand",
    );
    std::fs::write(
        root.join("fleet/web.yaml"),
        plugin_yaml("webhooks", "web", 3),
    )
    .unwrap();
    expect(
        &sexton(url, root, &["apply", "-f", "fleet/web.yaml"]).await,
        0,
        "apply web",
    );
    std::fs::remove_file(root.join("fleet/web.yaml")).unwrap();
    write(&[plugin_yaml("snapshots", "db", 7)]);
    let pruned = sexton(
        url,
        root,
        &["apply", "-f", "fleet", "--prune", "-l", "team=db"],
    )
    .await;
    expect(&pruned, 0, "apply --prune");
    assert!(
        pruned.stdout.contains("deleteplugin/audit pruned")
            && !pruned.stdout.contains("manual")
            && !pruned.stdout.contains("webhooks"),
        "{}",
        pruned.stdout
    );
    let listed = sexton(url, root, &["-o", "json", "plugin", "list"]).await;
    for (name, present) in [
        ("snapshots", true),
        ("audit", false),
        ("manual", true),
        ("webhooks", true),
    ] {
        assert_eq!(
            listed.stdout.contains(&format!("\"name\": \"{name}\"")),
            present,
            "{name}: {}",
            listed.stdout
        );
    }

    // Bad plugin documents: nothing applied, each named with its line.
    std::fs::write(
        root.join("fleet/bad.yaml"),
        format!(
            "{}---\n{}",
            plugin_yaml("fresh", "db", 5),
            plugin_yaml("broken", "db", 5).replace("sexton.v1.plugin.broken", "elsewhere.broken")
        ),
    )
    .unwrap();
    let bad = sexton(url, root, &["apply", "-f", "fleet"]).await;
    expect(&bad, 2, "apply with a bad plugin");
    assert!(
        bad.stderr
            .contains("fleet/bad.yaml:13: deleteplugin broken: plugin subject")
            && bad.stderr.contains("nothing was applied"),
        "{}",
        bad.stderr
    );
    let listed = sexton(url, root, &["-o", "json", "plugin", "list"]).await;
    assert!(!listed.stdout.contains("\"fresh\""), "{}", listed.stdout);
    world.fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locations_are_checked_against_the_fleet_and_never_changed() {
    let world = Setup::new(Members {
        scheduler: true,
        retention_worker: false,
        deleter: false,
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

    // Exported: the fleet's store, without its credentials; applied back: unchanged.
    let export = sexton(url, root, &["get", "locations"]).await;
    expect(&export, 0, "get locations");
    assert!(
        export.stdout.contains("kind: Location")
            && export.stdout.contains("name: primary")
            && export.stdout.contains(&format!("bucket: {BUCKET}"))
            && export.stdout.contains("mode: none"),
        "{}",
        export.stdout
    );
    for secret in [ACCESS_KEY, SECRET_KEY] {
        assert!(!export.stdout.contains(secret), "{}", export.stdout);
    }
    std::fs::create_dir_all(root.join("fleet")).unwrap();
    std::fs::write(root.join("fleet/locations.yaml"), &export.stdout).unwrap();
    std::fs::write(
        root.join("fleet/nightly.yaml"),
        schedule_yaml("nightly", "db", 3),
    )
    .unwrap();
    let applied = sexton(url, root, &["apply", "-f", "fleet"]).await;
    expect(&applied, 0, "apply a matching location with a schedule");
    assert!(
        applied.stdout.contains("location/primary unchanged")
            && applied.stdout.contains("schedule/nightly created"),
        "{}",
        applied.stdout
    );
    expect(
        &sexton(url, root, &["diff", "-f", "fleet"]).await,
        0,
        "diff of a matching location",
    );

    // Declared otherwise: diff says where, apply refuses the whole set.
    std::fs::write(
        root.join("fleet/locations.yaml"),
        "apiVersion: sexton.io/v1\nkind: Location\nmetadata: {name: primary}\n\
         spec: {bucket: elsewhere}\n---\n\
         apiVersion: sexton.io/v1\nkind: Location\nmetadata: {name: dr}\nspec: {bucket: dr}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("fleet/weekly.yaml"),
        schedule_yaml("weekly", "db", 3),
    )
    .unwrap();
    let diff = sexton(url, root, &["diff", "-f", "fleet"]).await;
    expect(&diff, 1, "diff of a location declared otherwise");
    assert!(
        diff.stdout.contains(&format!("-  bucket: {BUCKET}"))
            && diff.stdout.contains("+  bucket: elsewhere")
            && !diff.stdout.contains("region")
            && diff
                .stdout
                .contains("# location dr: the fleet has no such location"),
        "{}",
        diff.stdout
    );
    let refused = sexton(url, root, &["apply", "-f", "fleet"]).await;
    expect(&refused, 2, "apply against other locations");
    assert!(
        refused.stderr.contains(&format!(
            "fleet/locations.yaml:1: location primary differs from the fleet's (bucket: {BUCKET} → elsewhere)"
        )) && refused
            .stderr
            .contains("fleet/locations.yaml:6: location dr: the fleet has no such location (it has primary)")
            && refused.stderr.contains("nothing was applied"),
        "{}",
        refused.stderr
    );
    let listed = sexton(url, root, &["-o", "json", "schedule", "list"]).await;
    assert!(
        !listed.stdout.contains("\"name\": \"weekly\""),
        "{}",
        listed.stdout
    );
    // Credentials are never a manifest's.
    std::fs::write(
        root.join("fleet/locations.yaml"),
        "apiVersion: sexton.io/v1\nkind: Location\nmetadata: {name: primary}\n\
         spec: {bucket: b, secret_access_key: x}\n",
    )
    .unwrap();
    let refused = sexton(url, root, &["apply", "-f", "fleet"]).await;
    expect(&refused, 2, "a location with credentials");
    assert!(
        refused
            .stderr
            .contains("location primary: spec.secret_access_key is not a field of a manifest"),
        "{}",
        refused.stderr
    );
    world.fleet.stop().await.unwrap();
}
