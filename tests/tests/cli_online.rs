//! The real `sexton` binary against a running scheduler: `schedule create|get|list|describe|
//! update|pause|unpause|delete` and `backup create --from-schedule`, in tables and `-o json`,
//! with the documented exit codes (0 success, 1 not found or the fleet unavailable, 2 invalid).

use serde_json::Value;
use sexton_tests::{
    fixtures,
    setup::{Setup, World},
    *,
};

/// `sexton args...` against `nats_url`.
async fn sexton(nats_url: &str, args: &[&str]) -> CliRun {
    sexton_against(nats_url, None, args).await
}

fn expect(run: &CliRun, code: i32, what: &str) {
    run.expect(code, what);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_commands_work_against_a_live_scheduler() {
    let world = Setup::new(SCHEDULER_ONLY).without_s3().start().await;
    let World { nats, fleet, .. } = world;
    let url = nats.url();
    let url = url.as_str();
    // Wait for the API.
    eventually(
        "the scheduler api",
        std::time::Duration::from_secs(30),
        || async { (sexton(url, &["schedule", "list"]).await.code == 0).then_some(()) },
    )
    .await;

    let created = sexton(
        url,
        &[
            "schedule",
            "create",
            "nightly",
            "--cluster",
            "db1",
            "--plan",
            "full",
            "--cron",
            "0 3 * * *",
            "--keep-last",
            "7",
            "--label",
            "team=db",
        ],
    )
    .await;
    expect(&created, 0, "create");
    assert!(created.stdout.contains("nightly") && created.stdout.contains("0 3 * * *"));
    let created = sexton(
        url,
        &[
            "schedule",
            "create",
            "hourly",
            "--cluster",
            "db2",
            "--plan",
            "full",
            "--cron",
            "CRON_TZ=Europe/Berlin 0 * * * *",
            "--policy",
            r#"{"keep_last": 24, "recovery_window": "30d"}"#,
            "--skip-immediately",
            "--overlap-policy",
            "allow",
            "--starting-deadline-seconds",
            "600",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&created, 0, "create -o json");
    let hourly = created.json();
    assert_eq!(hourly["schedule"]["name"], "hourly");
    assert_eq!(hourly["schedule"]["skip_immediately"], true);
    assert_eq!(hourly["schedule"]["policy"]["recovery_window"], "30d");
    assert_eq!(hourly["schedule"]["overlap_policy"], "allow");
    assert_eq!(hourly["schedule"]["starting_deadline_seconds"], 600);

    // Invalid input: exit 2, with the reason.
    for (args, reason) in [
        (
            vec![
                "schedule",
                "create",
                "bad",
                "--cluster",
                "db1",
                "--plan",
                "full",
                "--cron",
                "61 * * * *",
                "--keep-last",
                "1",
            ],
            "invalid cron",
        ),
        (
            vec![
                "schedule",
                "create",
                "bad",
                "--cluster",
                "db1",
                "--plan",
                "full",
                "--cron",
                "CRON_TZ=Nowhere/Special 0 * * * *",
                "--keep-last",
                "1",
            ],
            "Nowhere/Special",
        ),
        (
            vec![
                "schedule",
                "create",
                "bad",
                "--cluster",
                "db1",
                "--plan",
                "full",
                "--cron",
                "@daily",
            ],
            "needs a retention policy",
        ),
        (
            vec![
                "schedule",
                "create",
                "a/b",
                "--cluster",
                "db1",
                "--plan",
                "full",
                "--cron",
                "@daily",
                "--keep-last",
                "1",
            ],
            "invalid schedule name",
        ),
        (
            vec!["schedule", "unpause", "nightly", "--skip-immediately=maybe"],
            "invalid value",
        ),
        (
            vec!["schedule", "update", "nightly", "--cron", "* * *"],
            "invalid cron",
        ),
        (vec!["schedule", "frobnicate"], "unrecognized subcommand"),
        (
            vec!["schedule", "update", "nightly", "--overlap-policy", "queue"],
            "invalid value",
        ),
        (
            vec![
                "schedule",
                "update",
                "nightly",
                "--starting-deadline-seconds",
                "0",
            ],
            "starting_deadline_seconds must be between",
        ),
    ] {
        let run = sexton(url, &args).await;
        expect(&run, 2, &args.join(" "));
        assert!(
            run.stderr.contains(reason),
            "{}: {}",
            args.join(" "),
            run.stderr
        );
    }
    // Not found and already exists: exit 1.
    let run = sexton(url, &["schedule", "get", "ghost"]).await;
    expect(&run, 1, "get a missing schedule");
    assert!(
        run.stderr.contains("schedule ghost not found"),
        "{}",
        run.stderr
    );
    let run = sexton(
        url,
        &[
            "schedule",
            "create",
            "nightly",
            "--cluster",
            "db1",
            "--plan",
            "full",
            "--cron",
            "@daily",
            "--keep-last",
            "1",
        ],
    )
    .await;
    expect(&run, 1, "create an existing schedule");
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);
    for verb in ["describe", "pause", "unpause", "delete"] {
        expect(
            &sexton(url, &["schedule", verb, "ghost"]).await,
            1,
            &format!("{verb} a missing schedule"),
        );
    }
    expect(
        &sexton(url, &["backup", "create", "--from-schedule", "ghost"]).await,
        1,
        "trigger a missing schedule",
    );

    // get / list / describe.
    let got = sexton(url, &["schedule", "get", "nightly", "-o", "json"]).await;
    expect(&got, 0, "get");
    let got = got.json();
    assert_eq!(got["schedule"]["cron"], "0 3 * * *");
    assert_eq!(got["schedule"]["labels"]["team"], "db");
    assert!(got["schedule"]["status"]["next_run_time"]
        .as_str()
        .unwrap()
        .contains("T03:00:00"));
    let table = sexton(url, &["schedule", "get", "nightly"]).await;
    expect(&table, 0, "get as a table");
    assert!(table.stdout.starts_with("NAME"), "{}", table.stdout);
    let listed = sexton(url, &["schedule", "list", "-o", "json"]).await;
    expect(&listed, 0, "list");
    let names: Vec<String> = listed
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["schedule"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["hourly", "nightly"]);
    let listed = sexton(url, &["schedule", "list", "--cluster", "db2", "-o", "json"]).await;
    expect(&listed, 0, "list --cluster");
    assert_eq!(listed.json().as_array().unwrap().len(), 1);
    let described = sexton(url, &["schedule", "describe", "nightly", "-o", "json"]).await;
    expect(&described, 0, "describe");
    let described = described.json();
    assert_eq!(described["explain"]["action"], "wait");
    assert!(described["explain"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("not due until"));
    // Created with --skip-immediately: the creation skip is recorded and explained.
    let described = eventually(
        "the creation skip",
        std::time::Duration::from_secs(20),
        || async {
            let described = sexton(url, &["schedule", "describe", "hourly", "-o", "json"])
                .await
                .json();
            described["last_skip"].is_object().then_some(described)
        },
    )
    .await;
    assert_eq!(described["last_skip"]["reason"], "skip_immediately");
    let table = sexton(url, &["schedule", "describe", "hourly"]).await;
    expect(&table, 0, "describe as a table");
    assert!(
        table.stdout.contains("skip_immediately"),
        "{}",
        table.stdout
    );

    // describe --simulate: the schedule's own cron and policy, fetched from the API, replayed
    // offline; the same answer as `retention simulate` given them by hand.
    let simulated = sexton(
        url,
        &[
            "schedule",
            "describe",
            "hourly",
            "--simulate",
            "--from",
            "2026-03-28T00:00:00Z",
            "--days",
            "3",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&simulated, 0, "describe --simulate -o json");
    let simulated = simulated.json();
    assert_eq!(simulated["schedule"]["name"], "hourly");
    let simulation = &simulated["simulation"];
    assert_eq!(
        simulation["scenario"]["cron"],
        "CRON_TZ=Europe/Berlin 0 * * * *"
    );
    assert_eq!(simulation["scenario"]["policy"]["keep_last"], 24);
    assert_eq!(simulation["zone"], "Europe/Berlin");
    let by_hand = sexton(
        url,
        &[
            "retention",
            "simulate",
            "--cron",
            "CRON_TZ=Europe/Berlin 0 * * * *",
            "--policy",
            r#"{"keep_last": 24, "recovery_window": "30d"}"#,
            "--name",
            "hourly",
            "--from",
            "2026-03-28T00:00:00Z",
            "--days",
            "3",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&by_hand, 0, "retention simulate by hand");
    let by_hand = by_hand.json();
    assert_eq!(simulation["days"], by_hand["days"]);
    assert_eq!(simulation["backups"], by_hand["backups"]);
    // Berlin's short day: 23 hourly backups, all inside the 30-day window.
    assert_eq!(simulation["days"][1]["date"], "2026-03-29");
    assert_eq!(simulation["days"][1]["taken"], 23);
    let table = sexton(
        url,
        &[
            "schedule",
            "describe",
            "nightly",
            "--simulate",
            "--from",
            "2026-01-01T00:00:00Z",
            "--days",
            "10",
        ],
    )
    .await;
    expect(&table, 0, "describe --simulate as a table");
    assert!(
        table.stdout.contains("0 3 * * * with {\"keep_last\":7}"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("keep_last 7: kept 10 backups"),
        "{}",
        table.stdout
    );
    let refused = sexton(url, &["schedule", "describe", "nightly", "--days", "3"]).await;
    expect(&refused, 2, "simulation options without --simulate");
    let missing = sexton(url, &["schedule", "describe", "nobody", "--simulate"]).await;
    expect(&missing, 1, "describe --simulate of an unknown schedule");

    // pause / unpause / update.
    let paused = sexton(url, &["schedule", "pause", "nightly", "-o", "json"]).await;
    expect(&paused, 0, "pause");
    assert_eq!(paused.json()["schedule"]["paused"], true);
    let unpaused = sexton(
        url,
        &[
            "schedule",
            "unpause",
            "nightly",
            "--skip-immediately=false",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&unpaused, 0, "unpause --skip-immediately=false");
    let unpaused = unpaused.json();
    assert_eq!(unpaused["schedule"]["paused"], false);
    assert_eq!(unpaused["schedule"]["skip_immediately"], false);
    expect(
        &sexton(url, &["schedule", "pause", "nightly"]).await,
        0,
        "pause",
    );
    let unpaused = sexton(
        url,
        &[
            "schedule",
            "unpause",
            "nightly",
            "--skip-immediately",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&unpaused, 0, "unpause --skip-immediately");
    assert_eq!(unpaused.json()["schedule"]["skip_immediately"], true);
    let updated = sexton(
        url,
        &[
            "schedule",
            "update",
            "nightly",
            "--cron",
            "30 4 * * 1-5",
            "--keep-last",
            "3",
            "--overlap-policy",
            "allow",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&updated, 0, "update");
    let updated = updated.json();
    assert_eq!(updated["schedule"]["overlap_policy"], "allow");
    assert_eq!(updated["schedule"]["cron"], "30 4 * * 1-5");
    assert_eq!(updated["schedule"]["policy"]["keep_last"], 3);

    // A manual backup.
    let triggered = sexton(
        url,
        &[
            "backup",
            "create",
            "--from-schedule",
            "nightly",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&triggered, 0, "backup create --from-schedule");
    assert!(triggered.json()["backup_id"]
        .as_str()
        .unwrap()
        .starts_with("nightly-"));

    // delete.
    let deleted = sexton(url, &["schedule", "delete", "nightly", "-o", "json"]).await;
    expect(&deleted, 0, "delete");
    assert_eq!(deleted.json()["schedule"], "nightly");
    assert_eq!(deleted.json()["deleted"], true);
    // It said what it would do to the schedule's records before doing it.
    assert!(
        deleted.stderr.contains("backup record") || deleted.stderr.contains("(backup_owner none)"),
        "{}",
        deleted.stderr
    );
    expect(
        &sexton(url, &["schedule", "get", "nightly"]).await,
        1,
        "get after delete",
    );

    // The fleet unavailable: exit 1.
    let run = sexton("nats://127.0.0.1:1", &["schedule", "list"]).await;
    expect(&run, 1, "list without nats");
    assert!(run.stderr.contains("nats"), "{}", run.stderr);
    fleet.stop().await.unwrap();
}

/// `sexton backup describe|hold|release` and the cadence and owner flags of `schedule create`
/// and `schedule delete`, through the real binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_volume_hold_and_owner_commands_work_against_a_live_scheduler() {
    let world = Setup::new(SCHEDULER_ONLY).without_s3().start().await;
    let World { nats, fleet, .. } = world;
    let url = nats.url();
    let url = url.as_str();
    let created = loop {
        let run = sexton(
            url,
            &[
                "schedule",
                "create",
                "app",
                "--cluster",
                "c1",
                "--plan",
                "vols",
                "--cron",
                "@daily",
                "--keep-last",
                "1",
                "--paused",
                "--full-every",
                "2",
                "--volume",
                "pv1",
                "--volume",
                "pv2",
                "--backup-owner",
                "schedule",
                "-o",
                "json",
            ],
        )
        .await;
        if run.code == 0 {
            break run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let schedule = &created.json()["schedule"];
    assert_eq!(schedule["full_every"], 2);
    assert_eq!(schedule["volumes"], serde_json::json!(["pv1", "pv2"]));
    assert_eq!(schedule["backup_owner"], "schedule");

    // Two backups with volumes: d2's pv1 builds on d1's.
    let client = async_nats::connect(url).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let topology = sexton_shared::topology::ensure(&js, 1).await.unwrap();
    let catalog = sexton_shared::catalog::Catalog::new(topology.catalog.clone());
    for (id, minute, parent) in [("d1", 1, None), ("d2", 2, Some("d1"))] {
        let mut record = fixtures::backup("c1", "vols", id, None, minute, 0);
        record.schedule = Some("app".parse().unwrap());
        record.volumes = vec![match parent {
            None => sexton_retention::VolumeArtifact::full(
                "pv1",
                vec![format!("backups/c1/vols/{id}/vol-pv1.img")],
            ),
            Some(parent) => sexton_retention::VolumeArtifact::incremental(
                "pv1",
                parent,
                vec![format!("backups/c1/vols/{id}/vol-pv1.img")],
            ),
        }];
        catalog.create(&record).await.unwrap();
    }
    let described = sexton(url, &["backup", "describe", "d1", "--cluster", "c1"]).await;
    expect(&described, 0, "backup describe");
    assert!(described.stdout.contains("VOLUME"), "{}", described.stdout);
    let row = described
        .stdout
        .lines()
        .find(|l| l.starts_with("pv1"))
        .unwrap_or_else(|| panic!("{}", described.stdout));
    assert!(
        row.contains("kept") && row.contains("needed by d2"),
        "{}",
        described.stdout
    );

    let held = sexton(
        url,
        &[
            "backup",
            "hold",
            "d1",
            "--cluster",
            "c1",
            "--reason",
            "restore:r-1",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&held, 0, "backup hold");
    assert_eq!(held.json()["holds"], serde_json::json!(["restore:r-1"]));
    expect(
        &sexton(
            url,
            &[
                "backup",
                "hold",
                "d1",
                "--cluster",
                "c1",
                "--reason",
                "restore",
            ],
        )
        .await,
        2,
        "a malformed reason",
    );
    let missing = sexton(
        url,
        &[
            "backup",
            "release",
            "d1",
            "--cluster",
            "c1",
            "--reason",
            "clone:x",
        ],
    )
    .await;
    expect(&missing, 1, "releasing a hold that is not there");
    assert!(
        missing.stderr.contains("has no hold \"clone:x\""),
        "{}",
        missing.stderr
    );
    // An action's result in kubectl's form, the same in every verb: `kind/name verb-ed`, no
    // flag cells (issue 50); `-o name` the kind/name alone.
    let released = sexton(
        url,
        &[
            "backup",
            "release",
            "d1",
            "--cluster",
            "c1",
            "--reason",
            "restore:r-1",
        ],
    )
    .await;
    expect(&released, 0, "backup release");
    assert_eq!(
        released.stdout,
        "backup/d1 released in cluster c1: holds none\n"
    );
    let held = sexton(
        url,
        &[
            "backup",
            "hold",
            "d1",
            "--reason",
            "legal:case-7",
            "-o",
            "name",
        ],
    )
    .await;
    expect(&held, 0, "backup hold without --cluster");
    assert_eq!(held.stdout, "backup/d1\n");
    assert!(
        held.stderr.contains("backup d1 is of cluster c1"),
        "{}",
        held.stderr
    );
    let released = sexton(
        url,
        &["backup", "release", "d1", "--reason", "legal:case-7"],
    )
    .await;
    expect(&released, 0, "backup release without --cluster");

    // The dry run says what deleting would do, and changes nothing.
    let dry = sexton(
        url,
        &["schedule", "delete", "app", "--dry-run", "-o", "json"],
    )
    .await;
    expect(&dry, 0, "schedule delete --dry-run");
    assert_eq!(dry.json()["remove_records"], 2, "{}", dry.stdout);
    expect(
        &sexton(url, &["schedule", "get", "app"]).await,
        0,
        "still there",
    );
    let deleted = sexton(url, &["schedule", "delete", "app", "--yes"]).await;
    expect(&deleted, 0, "schedule delete");
    // Said once, before it is done; the result does not repeat it (issue 19).
    let said = "removes 2 backup record(s) from the catalog, keeping their objects";
    assert_eq!(
        deleted.stderr.matches(said).count() + deleted.stdout.matches(said).count(),
        1,
        "{}\n{}",
        deleted.stderr,
        deleted.stdout
    );
    assert!(catalog
        .list_cluster(&"c1".parse().unwrap())
        .await
        .unwrap()
        .is_empty());
    fleet.stop().await.unwrap();
}

/// Issue 19's settings through the CLI: warnings printed for a spec that runs less often than
/// it reads, jitter and a blackout window shown by `describe` (with the zone said even for
/// UTC), the deadline as a span, pause-after-failures, annotations, `update --no-jitter`, and a
/// backfill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_scheduling_settings_work_against_a_live_scheduler() {
    let world = Setup::new(SCHEDULER_ONLY).without_s3().start().await;
    let World { nats, fleet, .. } = world;
    let url = nats.url();
    let url = url.as_str();
    eventually(
        "the scheduler api",
        std::time::Duration::from_secs(30),
        || async { (sexton(url, &["schedule", "list"]).await.code == 0).then_some(()) },
    )
    .await;
    let base = |name: &'static str, cron: &'static str| {
        vec![
            "schedule",
            "create",
            name,
            "--cluster",
            "db1",
            "--plan",
            "full",
            "--keep-last",
            "7",
            "--cron",
            cron,
        ]
    };

    // Accepted, with a warning on stderr: day 31 skips five months.
    let monthly = sexton(url, &base("month-end", "0 3 31 * *")).await;
    expect(&monthly, 0, "create 31");
    assert!(
        monthly
            .stderr
            .contains("warning: day 31 never falls in february, april, june, september, november"),
        "{}",
        monthly.stderr
    );

    let mut args = base("nightly", "0 3 * * *");
    args.extend([
        "--jitter",
        "1h",
        "--exclude",
        r#"{"cron": "0 8 * * 1-5", "duration": "10h", "zone": "Europe/Berlin"}"#,
        "--starting-deadline",
        "15m",
        "--pause-after-failures",
        "3",
        "--annotation",
        "sexton.io/executor-holds=upgrade:pg16",
        "--label",
        "team=db",
    ]);
    let created = sexton(url, &args).await;
    expect(&created, 0, "create with fleet settings");
    assert_eq!(created.stderr, "", "no warnings");
    let described = sexton(url, &["schedule", "describe", "nightly"]).await;
    expect(&described, 0, "describe");
    for line in [
        "cron:         \"0 3 * * *\", in UTC (no CRON_TZ)",
        "jitter:       1h (1 hour): every run fires 36 minutes 46 seconds after its cron time",
        "blackout:     from \"0 8 * * 1-5\" for 10h (Europe/Berlin): a run due inside is skipped",
        "deadline:     15m: a run missed by more than this is skipped",
        "pause after:  3 consecutive failed backups (0 so far)",
        "RUN AT",
    ] {
        assert!(
            described.stdout.contains(line),
            "{line:?} not in\n{}",
            described.stdout
        );
    }
    let json = sexton(url, &["schedule", "get", "nightly", "-o", "json"])
        .await
        .json();
    assert_eq!(json["schedule"]["starting_deadline_seconds"], 900);
    assert_eq!(
        json["schedule"]["annotations"]["sexton.io/executor-holds"],
        "upgrade:pg16"
    );
    assert_eq!(json["schedule"]["jitter"], "1h");

    let updated = sexton(url, &["schedule", "update", "nightly", "--no-jitter"]).await;
    expect(&updated, 0, "update --no-jitter");
    let json = sexton(url, &["schedule", "get", "nightly", "-o", "json"])
        .await
        .json();
    assert_eq!(json["schedule"]["jitter"], Value::Null);
    assert_eq!(json["timing"]["offset_seconds"], 0);

    // A backfill of the last two days' ticks: two of them.
    let to = chrono::Utc::now();
    let from = (to - chrono::Duration::days(2)).to_rfc3339();
    let to = to.to_rfc3339();
    let backfill = sexton(
        url,
        &[
            "schedule", "backfill", "nightly", "--from", &from, "--to", &to, "-o", "json",
        ],
    )
    .await;
    expect(&backfill, 0, "backfill");
    assert_eq!(backfill.json()["backfill"]["ticks"], 2);
    fleet.stop().await.unwrap();
}

/// Issue 26: a name typed into a reading verb that names nothing the fleet knows is an error
/// (exit 1) with the closest known name, in every verb, never an empty answer and exit 0; the
/// right names still answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typo_in_any_name_is_an_error_with_the_closest_name() {
    let world = Setup::new(Members {
        executor: false,
        deleter: false,
        ..Members::ALL
    })
    .schedule(
        serde_json::json!({"name": "fast", "cluster": "db1", "plan": "full",
        "cron": "@daily", "paused": true, "policy": {"keep_last": 3}}),
    )
    .start()
    .await;
    let World {
        nats,
        fleet,
        config,
        catalog,
        ..
    } = world;
    // A backup of the cluster, so a listing filtered by a mistyped schedule has rows to filter
    // (the filter is the CLI's: an answer with rows can still show none).
    let mut record = fixtures::backup("db1", "full", "b1", None, 1, 1);
    record.schedule = Some("fast".parse().unwrap());
    let store = object_store(&config).await;
    fixtures::put_backups(&catalog, &store, &[record]).await;
    let url = nats.url();
    let url = url.as_str();
    let unknown_cluster =
        "cluster db3 not found: no schedule and no backup names it; did you mean db1?";
    let typos: [(&[&str], &str); 8] = [
        (
            &["backup", "list", "--schedule", "fats"],
            "schedule fats not found: no schedule has this name; did you mean fast?",
        ),
        (
            &["backup", "list", "--cluster", "db1", "--schedule", "fats"],
            "schedule fats not found: no schedule has this name; did you mean fast?",
        ),
        (
            &["retention", "preview", "--cluster", "db1", "--plan", "ful"],
            "plan ful not found: no schedule and no backup of cluster db1 has it; did you mean full?",
        ),
        (
            &["backup", "list", "--cluster", "db1", "--plan", "ful"],
            "plan ful not found: no schedule and no backup of cluster db1 has it; did you mean full?",
        ),
        (&["catalog", "scrub", "--cluster", "db3", "--dry-run"], unknown_cluster),
        (&["binlog", "status", "--cluster", "db3"], unknown_cluster),
        (&["backup", "list", "--cluster", "db3"], unknown_cluster),
        (
            &["audit", "--cluster", "db3"],
            "cluster db3 not found: no schedule, no backup and no audit entry names it; did you mean db1?",
        ),
    ];
    for (args, wanted) in typos {
        let run = sexton(url, args).await;
        expect(&run, 1, &args.join(" "));
        assert!(
            run.stderr.contains(wanted),
            "{}: {wanted:?} not in {:?}",
            args.join(" "),
            run.stderr
        );
    }
    let right: [&[&str]; 5] = [
        &["backup", "list", "--schedule", "fast"],
        &["retention", "preview", "--cluster", "db1", "--plan", "full"],
        &["backup", "list", "--cluster", "db1", "--plan", "full"],
        &["binlog", "status", "--cluster", "db1"],
        &["audit", "--cluster", "db1"],
    ];
    for args in right {
        let run = sexton(url, args).await;
        expect(&run, 0, &args.join(" "));
    }
    fleet.stop().await.unwrap();
}

/// Issue 26: `m` is months in a policy and minutes in a flag, and each is said where it is
/// written (create warns, describe shows both meanings); `describe` lists an `@every`
/// schedule's runs from its last run, not from the moment describe was asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_says_what_m_means_and_counts_every_from_the_last_run() {
    let world = Setup::new(SCHEDULER_ONLY).without_s3().start().await;
    let World { nats, fleet, .. } = world;
    let url = nats.url();
    let url = url.as_str();
    eventually(
        "the scheduler api",
        std::time::Duration::from_secs(30),
        || async { (sexton(url, &["schedule", "list"]).await.code == 0).then_some(()) },
    )
    .await;
    let created = sexton(
        url,
        &[
            "schedule",
            "create",
            "often",
            "--cluster",
            "db1",
            "--plan",
            "full",
            "--cron",
            "@every 1h",
            "--jitter",
            "15m",
            "--policy",
            r#"{"keep_last": 2, "recovery_window": "15m"}"#,
        ],
    )
    .await;
    expect(&created, 0, "create");
    assert!(
        created.stderr.contains(
            "warning: recovery_window \"15m\" is 15 months of 30 days (450 days; in a policy m and \
             mo are months, minutes are written \"15min\")"
        ),
        "{}",
        created.stderr
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let described = sexton(url, &["schedule", "describe", "often"]).await;
    expect(&described, 0, "describe");
    for line in [
        "policy note:  recovery_window \"15m\" is 15 months of 30 days",
        "jitter:       15m (15 minutes): every run fires",
    ] {
        assert!(
            described.stdout.contains(line),
            "{line:?} not in\n{}",
            described.stdout
        );
    }
    let json = sexton(url, &["schedule", "describe", "often", "-o", "json"]).await;
    expect(&json, 0, "describe -o json");
    let json = json.json();
    let time = |v: &Value| -> chrono::DateTime<chrono::Utc> {
        serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
    };
    let created_at = time(&json["schedule"]["created_at"]);
    let base = match json["schedule"]["status"]["last_skipped"].clone() {
        Value::Null => created_at,
        skipped => time(&skipped).max(created_at),
    };
    let first = time(&json["timing"]["upcoming"][0]["at"]);
    let whole = chrono::DateTime::from_timestamp(base.timestamp(), 0).unwrap();
    assert_eq!(
        first,
        whole + chrono::Duration::hours(1),
        "the first run counts from the schedule's base {base}, not from describe's now"
    );
    fleet.stop().await.unwrap();
}

/// kubectl's and Velero's habits against a live scheduler (issue 26): `schedule get` without a
/// name lists, `backup get` lists and with an id describes, `schedule next NAME` walks the
/// stored schedule's own timing, and `schedule list --watch` prints the table once, then only
/// the rows that changed, a removed one marked `(deleted)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_next_and_watch_work_as_kubectl_users_expect() {
    let world = Setup::new(SCHEDULER_ONLY).without_s3().start().await;
    let World { nats, fleet, .. } = world;
    let url = nats.url();
    let url = url.as_str();
    eventually(
        "the scheduler api",
        std::time::Duration::from_secs(30),
        || async { (sexton(url, &["schedule", "list"]).await.code == 0).then_some(()) },
    )
    .await;
    let create = |name: &'static str| {
        vec![
            "schedule",
            "create",
            name,
            "--cluster",
            "db1",
            "--plan",
            "full",
            "--schedule",
            "0 3 * * *",
            "--ttl",
            "720h",
            "--keep-daily",
            "7",
            "--jitter",
            "10m",
        ]
    };
    let created = sexton(url, &create("nightly")).await;
    expect(&created, 0, "create with --schedule and --ttl");
    assert!(
        created.stderr.contains("retention_duration 30 (days)"),
        "{}",
        created.stderr
    );
    let got = sexton(url, &["schedule", "get", "nightly", "-o", "json"])
        .await
        .json();
    assert_eq!(got["schedule"]["cron"], "0 3 * * *");
    assert_eq!(
        got["schedule"]["policy"],
        serde_json::json!({"keep_daily": 7, "retention_duration": 30})
    );

    // get without a name: the same as list, in every format.
    for format in ["json", "table", "name"] {
        let listed = sexton(url, &["schedule", "list", "-o", format]).await;
        let got = sexton(url, &["schedule", "get", "-o", format]).await;
        expect(&got, 0, "schedule get");
        assert_eq!(got.stdout, listed.stdout, "-o {format}");
    }
    let got = sexton(url, &["backup", "get", "-o", "json"]).await;
    expect(&got, 0, "backup get");
    assert_eq!(got.json(), serde_json::json!([]));
    let missing = sexton(url, &["backup", "get", "ghost-1", "--cluster", "db1"]).await;
    expect(&missing, 1, "backup get of a missing backup, as describe");

    // schedule next NAME: the stored cron with its jitter, as --cron with the same settings.
    let stored = sexton(
        url,
        &[
            "schedule",
            "next",
            "nightly",
            "--from",
            "2026-11-20T12:00:00Z",
            "-n",
            "2",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&stored, 0, "schedule next NAME");
    let by_hand = sexton(
        url,
        &[
            "schedule",
            "next",
            "--cron",
            "0 3 * * *",
            "--name",
            "nightly",
            "--jitter",
            "10m",
            "--from",
            "2026-11-20T12:00:00Z",
            "-n",
            "2",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(stored.json(), by_hand.json());
    assert_eq!(stored.json()[0]["nominal"], "2026-11-21T03:00:00Z");
    let missing = sexton(url, &["schedule", "next", "nighty"]).await;
    expect(&missing, 1, "schedule next of a missing schedule");
    assert!(
        missing.stderr.contains("did you mean nightly?"),
        "{}",
        missing.stderr
    );

    // --watch: the table once, then only what changed.
    let mut watch = std::process::Command::new(service_binary("sexton"))
        .args(["schedule", "list", "--watch=1"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SEXTON_NATS_URL", url)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("running sexton --watch");
    let stdout = watch.stdout.take().unwrap();
    let (lines_in, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_in.send(line).is_err() {
                break;
            }
        }
    });
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let wait_for = |what: &'static str, test: fn(&str) -> bool| {
        let seen = seen.clone();
        let lines = &lines;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    let found = test(&line);
                    seen.lock().unwrap().push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => panic!("{what} never printed: {:?}", seen.lock().unwrap()),
            }
        }
    };
    wait_for("the first listing", |line| line.starts_with("nightly "));
    expect(&sexton(url, &create("hourly")).await, 0, "create hourly");
    wait_for("the new row", |line| line.starts_with("hourly "));
    expect(
        &sexton(url, &["schedule", "pause", "nightly"]).await,
        0,
        "pause nightly",
    );
    wait_for("the changed row", |line| {
        line.starts_with("nightly ") && line.contains("paused")
    });
    expect(
        &sexton(url, &["schedule", "delete", "hourly", "--yes"]).await,
        0,
        "delete hourly",
    );
    wait_for("the deleted row", |line| {
        line.starts_with("hourly ") && line.ends_with("(deleted)")
    });
    // Three more listings with nothing new: nothing more printed.
    std::thread::sleep(std::time::Duration::from_secs(3));
    seen.lock().unwrap().extend(lines.try_iter());
    watch.kill().unwrap();
    let _ = watch.wait();
    let seen = seen.lock().unwrap().clone();
    // One header, no blank line between listings, and no listing printed whole again: each
    // schedule's row comes back only for a change of its own (a status the scheduler writes
    // late may be one more).
    assert_eq!(
        seen.iter().filter(|line| line.starts_with("NAME")).count(),
        1,
        "{seen:#?}"
    );
    assert!(seen.iter().all(|line| !line.is_empty()), "{seen:#?}");
    for name in ["nightly ", "hourly "] {
        let rows = seen.iter().filter(|line| line.starts_with(name)).count();
        assert!((2..=3).contains(&rows), "{name}: {seen:#?}");
    }
    assert!(seen[0].starts_with("NAME"), "{seen:#?}");
    fleet.stop().await.unwrap();
}

/// Issue 50: `backup describe`, `get`, `fetch` and `delete` take a backup id without
/// `--cluster` when only one cluster has it, and say which; an id two clusters have is refused
/// naming both, an unknown one is not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unique_backup_id_finds_its_cluster() {
    let world = Setup::new(Members {
        executor: false,
        deleter: false,
        ..Members::ALL
    })
    .start()
    .await;
    let World {
        nats,
        fleet,
        config,
        catalog,
        ..
    } = world;
    let store = object_store(&config).await;
    let mut records = [
        fixtures::backup("db1", "full", "only-here", None, 1, 1),
        fixtures::backup("db1", "full", "both", None, 2, 1),
        fixtures::backup("db2", "full", "both", None, 3, 1),
    ];
    // Copies at dr: one held there, one deleted there (issue 50, item 7: what is at dr).
    let dr: sexton_model::names::LocationName = "dr".parse().unwrap();
    for (record, state) in records.iter_mut().zip([
        sexton_model::copies::CopyState::Copied,
        sexton_model::copies::CopyState::Deleted,
    ]) {
        record.copies.insert(
            dr.clone(),
            sexton_model::copies::LocationCopy::new(state, chrono::Utc::now()),
        );
    }
    fixtures::put_backups(&catalog, &store, &records).await;
    let url = nats.url();
    let url = url.as_str();
    for args in [
        &["backup", "describe", "only-here", "-o", "json"][..],
        &["backup", "get", "only-here", "-o", "json"][..],
    ] {
        let run = sexton(url, args).await;
        expect(&run, 0, "describe without --cluster");
        assert!(
            run.stderr.contains("backup only-here is of cluster db1"),
            "{}",
            run.stderr
        );
        let described: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(described["backup"]["cluster"], "db1", "{described}");
    }
    let run = sexton(url, &["backup", "delete", "only-here", "--dry-run"]).await;
    expect(&run, 0, "delete --dry-run without --cluster");
    assert!(run.stderr.contains("is of cluster db1"), "{}", run.stderr);
    let run = sexton(url, &["backup", "describe", "both"]).await;
    expect(&run, 2, "an id of two clusters");
    assert!(
        run.stderr
            .contains("backup both is in clusters db1, db2: say which with --cluster"),
        "{}",
        run.stderr
    );
    // What dr holds: only the copy there, with its state there; COPIES in -o wide.
    let run = sexton(url, &["backup", "list", "--location", "dr", "-o", "wide"]).await;
    expect(&run, 0, "backup list --location dr");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(lines[0].contains("COPIES"), "{}", run.stdout);
    assert!(
        lines[1].starts_with("only-here")
            && lines[1].contains("copied")
            && lines[1].contains("dr:copied"),
        "{}",
        run.stdout
    );
    let run = sexton(
        url,
        &["backup", "list", "--location", "primary", "-o", "name"],
    )
    .await;
    expect(&run, 0, "backup list --location primary");
    assert_eq!(run.stdout.lines().count(), 3, "{}", run.stdout);
    let run = sexton(url, &["backup", "list", "--location", "../dr"]).await;
    expect(&run, 2, "a location name that climbs");
    // kubectl's habit: get backups lists them, get backup ID describes one.
    let run = sexton(url, &["get", "backups", "-o", "name"]).await;
    expect(&run, 0, "get backups");
    assert_eq!(run.stdout.lines().count(), 3, "{}", run.stdout);
    let run = sexton(url, &["get", "backup", "only-here", "-o", "json"]).await;
    expect(&run, 0, "get backup ID");
    assert!(run.stdout.contains("\"only-here\""), "{}", run.stdout);
    // A dry run's row is said to be one.
    let run = sexton(
        url,
        &[
            "schedule",
            "create",
            "maybe",
            "--cluster",
            "db9",
            "--plan",
            "full",
            "--cron",
            "@daily",
            "--keep-last",
            "3",
            "--dry-run",
        ],
    )
    .await;
    expect(&run, 0, "schedule create --dry-run");
    assert!(
        run.stderr.contains("dry run: nothing was created"),
        "{}",
        run.stderr
    );
    expect(
        &sexton(url, &["schedule", "get", "maybe"]).await,
        1,
        "nothing created",
    );
    let run = sexton(url, &["backup", "fetch", "nowhere", "--to", "/tmp/unused"]).await;
    expect(&run, 1, "an unknown id");
    assert!(
        run.stderr
            .contains("backup nowhere not found in any cluster"),
        "{}",
        run.stderr
    );
    fleet.stop().await.unwrap();
}
