//! The `sexton` binary's offline commands and its argument handling: correct answers, and a
//! clear message with exit code 2 for bad input.

use std::process::{Command, Output};

fn sexton(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sexton"))
        .args(args)
        // Nothing here may reach a server: point NATS at a closed port.
        .env("SEXTON_NATS_URL", "nats://127.0.0.1:1")
        .output()
        .expect("running sexton")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn schedule_next_prints_robfig_times() {
    let out = sexton(&[
        "schedule",
        "next",
        "--cron",
        "0 3 * * 1-5",
        "--from",
        "2026-11-20T12:00:00Z",
        "-n",
        "3",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs: Vec<serde_json::Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let times: Vec<&str> = runs.iter().map(|r| r["at"].as_str().unwrap()).collect();
    // Friday the 20th at noon: next are Mon 23rd, Tue 24th, Wed 25th at 03:00.
    assert_eq!(
        times,
        [
            "2026-11-23T03:00:00Z",
            "2026-11-24T03:00:00Z",
            "2026-11-25T03:00:00Z"
        ]
    );
    assert!(runs
        .iter()
        .all(|r| r["effect"] == "fires" && r["nominal"] == r["at"]));
}

/// Jitter and a blackout window, offline: each run's cron time, when it fires, and what the
/// window does to it; the same offset every time (it is drawn from the name).
#[test]
fn schedule_next_shows_jitter_and_blackout_windows() {
    let args = [
        "schedule",
        "next",
        "--cron",
        "0 * * * *",
        "--name",
        "db1-hourly",
        "--jitter",
        "10m",
        "--exclude",
        r#"{"cron": "0 1 * * *", "duration": "3h", "zone": "Europe/Berlin"}"#,
        "--on-blackout",
        "defer",
        "--from",
        "2026-03-28T22:30:00Z",
        "-n",
        "4",
    ];
    let out = sexton(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "jitter: 10m (10 minutes): every run fires 5 minutes 43 seconds after its cron time"
        ),
        "{text}"
    );
    assert!(
        text.contains("blackout: from \"0 1 * * *\" for 3h (Europe/Berlin)"),
        "{text}"
    );
    // 00:05:43Z (01:05:43 Berlin) is inside; on the spring-forward night the window ends at
    // 04:00 summer time, 02:00Z.
    assert!(
        text.contains("2026-03-29T00:05:43+00:00  2026-03-29T00:00:00+00:00  deferred: fires at 2026-03-29T02:00:00+00:00"),
        "{text}"
    );
    assert_eq!(stdout(&sexton(&args)), text, "the same offset every time");
}

#[test]
fn schedule_explain_runs_the_pure_logic() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("schedule.json");
    std::fs::write(
        &doc,
        r#"{"cron": "0 * * * *", "created_at": "2026-11-22T09:30:00Z", "last_backup": "2026-11-22T10:00:05Z"}"#,
    )
    .unwrap();
    let out = sexton(&[
        "schedule",
        "explain",
        "--schedule",
        doc.to_str().unwrap(),
        "--now",
        "2026-11-22T11:00:01Z",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(value["action"], "fire");
    assert_eq!(value["next_run_time"], "2026-11-22T11:00:00Z");
}

#[test]
fn retention_plan_offline() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.json");
    let policy = dir.path().join("policy.json");
    let backups: Vec<serde_json::Value> = (1..=5)
        .map(|day| {
            serde_json::json!({"id": format!("b{day}"), "status": "completed", "kind": "full",
                "completed_at": format!("2026-11-0{day}T00:00:00Z")})
        })
        .collect();
    std::fs::write(
        &catalog,
        serde_json::json!({ "backups": backups }).to_string(),
    )
    .unwrap();
    std::fs::write(&policy, r#"{"keep_last": 2}"#).unwrap();
    let out = sexton(&[
        "retention",
        "plan",
        "--catalog",
        catalog.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--now",
        "2026-11-22T00:00:00Z",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let ids = |key: &str| -> Vec<String> {
        plan[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids("keep"), ["b5", "b4"]);
    assert_eq!(ids("delete"), ["b3", "b2", "b1"]);
    // The table form names the decisions too.
    let out = sexton(&[
        "retention",
        "plan",
        "--catalog",
        catalog.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--now",
        "2026-11-22T00:00:00Z",
    ]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("DECISION"), "{}", stdout(&out));
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{not json").unwrap();
    let empty_policy = dir.path().join("empty.json");
    std::fs::write(&empty_policy, "{}").unwrap();
    let good_catalog = dir.path().join("catalog.json");
    std::fs::write(&good_catalog, r#"{"backups": []}"#).unwrap();
    let g = garbage.to_str().unwrap();
    let e = empty_policy.to_str().unwrap();
    let c = good_catalog.to_str().unwrap();
    let fetch_dir = dir.path().join("fetched");
    let d = fetch_dir.to_str().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::write(
        manifests.join("bad.yaml"),
        "apiVersion: sexton.io/v1\nkind: Schedule\nmetadata: {name: a}\nspec: {cluster: c}\n\
         ---\nkind: [\n",
    )
    .unwrap();
    let m = manifests.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["apply", "-f", m], "bad.yaml:1: schedule a: missing field `plan`"),
        (vec!["apply", "-f", m], "bad.yaml:7: not YAML"),
        (vec!["diff", "-f", m], "bad.yaml:7: not YAML"),
        (vec!["apply", "-f", g], "not YAML: did not find expected"),
        (vec!["apply", "-f", "/nonexistent/x.yaml"], "cannot read"),
        (vec!["apply", "-f", c], "catalog.json:1: unknown field \"backups\": a manifest has apiVersion"),
        (vec!["apply"], "--filename"),
        (vec!["apply", "-f", m, "--prune"], "--selector"),
        (vec!["apply", "-f", m, "-l", "team=db"], "give --prune with it"),
        (vec!["apply", "-f", m, "--prune", "-l", "team"], "selector"),
        (vec!["get", "snapshots"], "invalid value"),
        (
            vec!["schedule", "next", "--cron", "61 * * * *"],
            "invalid cron",
        ),
        (
            vec!["schedule", "next", "--cron", "* * * * 7"],
            "invalid cron",
        ),
        (
            vec!["schedule", "next", "--cron", "CRON_TZ=Mars/Base * * * * *"],
            "invalid cron",
        ),
        (
            vec![
                "schedule",
                "next",
                "--cron",
                "@daily",
                "--from",
                "yesterday",
            ],
            "not an RFC 3339 time",
        ),
        (
            vec!["schedule", "next", "--cron", "@daily", "-n", "0"],
            "-n must be",
        ),
        (
            vec!["schedule", "next", "--cron", "@daily", "-n", "-3"],
            "unexpected argument",
        ),
        (
            vec![
                "schedule",
                "explain",
                "--schedule",
                g,
                "--now",
                "2026-01-01T00:00:00Z",
            ],
            "invalid schedule",
        ),
        (
            vec![
                "schedule",
                "explain",
                "--schedule",
                "/nonexistent",
                "--now",
                "2026-01-01T00:00:00Z",
            ],
            "cannot read",
        ),
        (
            vec!["retention", "plan", "--catalog", g, "--policy", e],
            "invalid catalog",
        ),
        (
            vec!["retention", "plan", "--catalog", c, "--policy", g],
            "invalid policy",
        ),
        (
            vec!["retention", "plan", "--catalog", c, "--policy", e],
            "invalid policy",
        ),
        (
            vec![
                "retention",
                "plan",
                "--catalog",
                c,
                "--policy",
                e,
                "--now",
                "noon",
            ],
            "invalid policy",
        ),
        (
            vec![
                "schedule",
                "create",
                "s",
                "--cluster",
                "c",
                "--plan",
                "p",
                "--cron",
                "@daily",
            ],
            "needs a retention policy",
        ),
        (
            vec![
                "schedule",
                "create",
                "s",
                "--cluster",
                "c",
                "--plan",
                "p",
                "--cron",
                "@daily",
                "--keep-last",
                "0",
            ],
            "at least 1",
        ),
        (
            vec![
                "schedule",
                "create",
                "s",
                "--cluster",
                "c",
                "--plan",
                "p",
                "--cron",
                "@daily",
                "--keep-last",
                "-1",
            ],
            "unexpected argument",
        ),
        (
            vec![
                "schedule",
                "create",
                "s",
                "--cluster",
                "c",
                "--plan",
                "p",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_lats\": 1}",
            ],
            "invalid --policy",
        ),
        (
            vec![
                "schedule",
                "create",
                "s",
                "--cluster",
                "c",
                "--plan",
                "p",
                "--cron",
                "@daily",
                "--keep-last",
                "2",
                "--label",
                "novalue",
            ],
            "not key=value",
        ),
        (
            vec!["schedule", "unpause", "s", "--skip-immediately=maybe"],
            "invalid value",
        ),
        (
            vec!["schedule", "update", "s", "--full-every", "0"],
            "\"0\" is not a positive whole number of backups",
        ),
        (
            vec!["schedule", "update", "s", "--full-every", "three"],
            "\"three\" is not a positive whole number of backups",
        ),
        (
            vec!["schedule", "update", "s", "--full-every=-1"],
            "\"-1\" is not a positive whole number of backups",
        ),
        (
            vec![
                "schedule",
                "update",
                "s",
                "--full-every",
                "3",
                "--no-full-every",
            ],
            "cannot be used with",
        ),
        (
            vec!["schedule", "update", "s", "--no-full-every=yes"],
            "unexpected value",
        ),
        (
            vec![
                "backup",
                "hold",
                "b1",
                "--cluster",
                "c1",
                "--reason",
                "restore",
            ],
            "invalid hold reason \"restore\": no ':'",
        ),
        (
            vec![
                "backup",
                "hold",
                "b1",
                "--cluster",
                "c1",
                "--reason",
                "restore:a/b",
            ],
            "the id after ':' may hold only",
        ),
        (
            vec![
                "backup",
                "release",
                "b1",
                "--cluster",
                "c1",
                "--reason",
                "Restore:x",
            ],
            "must be a lowercase word",
        ),
        (
            vec!["backup", "hold", "b1", "--cluster", "c1"],
            "--reason <REASON>",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "61 * * * *",
                "--policy",
                "{\"keep_last\": 7}",
            ],
            "invalid cron",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "CRON_TZ=Mars/Base @daily",
                "--policy",
                "{\"keep_last\": 7}",
            ],
            "invalid cron",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_lats\": 7}",
            ],
            "invalid --policy",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{}",
            ],
            "invalid --policy: policy has no retention rule",
        ),
        (
            vec!["retention", "simulate", "--cron", "@daily", "--policy", g],
            "invalid --policy",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "/nonexistent/policy.json",
            ],
            "cannot read /nonexistent/policy.json",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--against",
                "{\"keep_daily\": \"x\"}",
            ],
            "invalid --against: keep_daily",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--days",
                "0",
            ],
            "--days must be between 1 and 3660, got 0",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--days",
                "3661",
            ],
            "--days must be between 1 and 3660, got 3661",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--days",
                "-5",
            ],
            "--days must be between 1 and 3660, got -5",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--days",
                "many",
            ],
            "invalid value",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--size-full",
                "-10GiB",
            ],
            "--size-full: size \"-10GiB\": a size cannot be negative",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--size-incremental",
                "-1",
            ],
            "--size-incremental: size \"-1\": a size cannot be negative",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--size-full",
                "10 parsecs",
            ],
            "expected a number and a unit",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--failures",
                "often",
            ],
            "--failures \"often\"",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--failures",
                "130%",
            ],
            "a rate is between 0% and 100%",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--failures",
                "ok,maybe",
            ],
            "a pattern lists ok and fail",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--seed",
                "3",
            ],
            "--seed goes with a failure rate",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--sweep-every",
                "5s",
            ],
            "sweeps run at most once a minute",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--lock",
                "garbage",
            ],
            "expected key=value pairs",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--lock",
                "min=0d",
            ],
            "is zero",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--lock",
                "mode=compliance,min=1d",
            ],
            "cannot be undone",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--lock",
                "mode=governance",
            ],
            "no tier set",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--lock",
                "daily=soon",
            ],
            "lock daily",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--lock",
                "weekly=2w,color=red",
            ],
            "unknown lock key",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--copies",
                "not json",
            ],
            "cannot read not json",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--copies",
                "[{\"to\": \"dr\"}]",
            ],
            "missing field `policy`",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--copies",
                "[{\"to\": \"dr\", \"policy\": {\"keep_last\": 3}, \"colour\": 1}]",
            ],
            "unknown field",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--copies",
                "[{\"to\": \"primary\", \"policy\": {\"keep_last\": 3}}]",
            ],
            "already at primary",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--copies",
                "[{\"to\": \"dr\", \"policy\": {\"keep_last\": 3}, \"select\": \"kept\", \"delay\": \"5d\"}]",
            ],
            "nothing would ever be copied",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--copies",
                "[{\"to\": \"dr\", \"policy\": {\"keep_daily\": 7}, \"storage_class\": \"GLACIER_IR\"}]",
            ],
            "at least 90 days",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--copies",
                "[{\"to\": \"dr\", \"policy\": {\"keep_last\": 3}, \"delay\": \"soon\"}]",
            ],
            "not a duration",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--from",
                "yesterday",
            ],
            "not an RFC 3339 time",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--full-every",
                "0",
            ],
            "not a positive whole number of backups",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--volume",
                "pv1",
                "--volume",
                "pv1",
            ],
            "volume pv1 is listed twice",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "--rows",
                "month",
            ],
            "invalid value",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "-o",
                "html",
            ],
            "-o html needs a file to write",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@daily",
                "--policy",
                "{\"keep_last\": 7}",
                "page.html",
            ],
            "a file is only written with -o html",
        ),
        (
            vec![
                "retention",
                "simulate",
                "--cron",
                "@every 1s",
                "--policy",
                "{\"keep_last\": 7}",
                "--days",
                "3660",
            ],
            "more than 2000000 engine runs",
        ),
        (
            vec!["backup", "list", "-o", "html"],
            "-o html is for retention simulate",
        ),
        (
            vec!["schedule", "describe", "nightly", "--days", "3"],
            "go with --simulate",
        ),
        // Fetches: refused before any server is asked, nothing written.
        (
            vec![
                "backup",
                "fetch",
                "b-1",
                "--cluster",
                "../db",
                "--to",
                "/tmp/x",
            ],
            "cluster",
        ),
        (vec!["backup", "fetch", "b-1", "--cluster", "db1"], "--to"),
        (
            vec!["backup", "fetch", "b-1", "--cluster", "db1", "--to", g],
            "not a directory",
        ),
        (
            vec![
                "backup",
                "fetch",
                "b-1",
                "--cluster",
                "db1",
                "--location",
                "mars",
                "--to",
                d,
            ],
            "--location mars: no such location",
        ),
        (
            vec![
                "binlog",
                "fetch",
                "--cluster",
                "db1",
                "--since",
                "today",
                "--to",
                d,
            ],
            "--since \"today\" is not an RFC 3339 time",
        ),
        (
            vec![
                "binlog",
                "fetch",
                "--cluster",
                "db1",
                "--since",
                "2026-11-28T12:00:00Z",
                "--until",
                "2026-11-28T11:00:00Z",
                "--to",
                d,
            ],
            "is after --until",
        ),
        (
            vec![
                "binlog",
                "fetch",
                "--cluster",
                "db1",
                "--location",
                "x/y",
                "--to",
                d,
            ],
            "--location",
        ),
        (vec!["schedule", "frobnicate"], "unrecognized subcommand"),
        (vec!["backup", "list", "-o", "xml"], "invalid value"),
        (vec!["--nats-url", "http://x", "backup", "list"], "nats.url"),
        (vec![], "Usage"),
    ];
    for (args, expect) in cases {
        let out = sexton(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
    }
    // A refused fetch wrote nothing where it was pointed.
    assert!(!fetch_dir.exists(), "a refused fetch wrote into {d}");
}

/// Velero's and kubectl's habits land on Sexton's flags (issue 26): `--schedule` is `--cron`,
/// `--ttl` says on stderr what it becomes, every rule has a flag, `get` without a name lists and
/// `schedule next` takes a stored schedule's name. Each of these commands is built and sent (it
/// reaches the closed port: exit 1), not refused as usage (exit 2).
#[test]
fn velero_and_kubectl_habits_are_understood() {
    let create = [
        "schedule",
        "create",
        "x",
        "--cluster",
        "c",
        "--plan",
        "p",
        "--schedule",
        "0 3 * * *",
        "--ttl",
        "720h",
        "--keep-daily",
        "7",
        "--keep-tag",
        "gold,eu",
    ];
    let sent: &[&[&str]] = &[
        &create,
        &[
            "schedule",
            "update",
            "x",
            "--schedule",
            "@hourly",
            "--keep-weekly",
            "4",
        ],
        &["schedule", "get"],
        &["schedule", "next", "x"],
        &["backup", "get"],
        &["backup", "get", "b1", "--cluster", "c"],
    ];
    for args in sent {
        let out = sexton(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("nats"), "{args:?}: {}", stderr(&out));
    }
    let out = sexton(&create);
    assert!(
        stderr(&out).contains("note: --ttl 720h is kept as retention_duration 30 (days)"),
        "{}",
        stderr(&out)
    );
    let help = stdout(&sexton(&["schedule", "create", "--help"]));
    assert!(help.contains("[alias: --schedule]"), "{help}");
    let refused: &[(&[&str], &str)] = &[
        (
            &[
                "schedule",
                "create",
                "x",
                "--cluster",
                "c",
                "--plan",
                "p",
                "--cron",
                "@daily",
                "--ttl",
                "1h30m",
            ],
            "--ttl 1h30m is not a whole number of days",
        ),
        (
            &[
                "schedule",
                "create",
                "x",
                "--cluster",
                "c",
                "--plan",
                "p",
                "--cron",
                "@daily",
                "--ttl",
                "24h",
                "--policy",
                r#"{"retention_duration": 3}"#,
            ],
            "--ttl sets retention_duration, which --policy sets too",
        ),
        (
            &["schedule", "update", "x", "--keep-daily", "0"],
            "give at least 1",
        ),
        (
            &["schedule", "next"],
            "give a stored schedule's NAME, or --cron",
        ),
        (&["schedule", "next", "x", "--cron", "@daily"], "not both"),
        (
            &["schedule", "next", "x", "--jitter", "5m"],
            "go with --cron",
        ),
        (
            &["backup", "delete", "--oldest"],
            "--oldest needs --cluster",
        ),
        (&["schedule", "get", "x", "--watch"], "without a NAME"),
    ];
    for (args, expect) in refused {
        let out = sexton(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn an_unreachable_fleet_exits_1() {
    let out = sexton(&["backup", "list"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

/// Seed 001's three volumes with `full_every: 2` and keep 3: the table shows the second
/// backup as `partial`, the volume that stays (and which backup needs it) and the one that goes.
#[test]
fn retention_plan_table_shows_partial_backups_per_volume() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.json");
    let policy = dir.path().join("policy.json");
    let vol = |name: &str, parent: Option<&str>| {
        let mut v = serde_json::json!({"name": name, "keys": [format!("k/{name}")]});
        if let Some(parent) = parent {
            v["kind"] = "incremental".into();
            v["parent"] = parent.into();
        }
        v
    };
    let backup = |id: &str, day: u32, volumes: Vec<serde_json::Value>| {
        serde_json::json!({"id": id, "status": "completed",
            "completed_at": format!("2026-01-0{day}T00:00:00Z"), "volumes": volumes})
    };
    let backups = vec![
        backup("d1", 1, vec![vol("pv1", None)]),
        backup("d2", 2, vec![vol("pv1", Some("d1")), vol("pv2", None)]),
        backup(
            "d3",
            3,
            vec![vol("pv1", None), vol("pv2", Some("d2")), vol("pv3", None)],
        ),
        backup(
            "d4",
            4,
            vec![
                vol("pv1", Some("d3")),
                vol("pv2", None),
                vol("pv3", Some("d3")),
            ],
        ),
        backup(
            "d5",
            5,
            vec![vol("pv1", None), vol("pv2", Some("d4")), vol("pv3", None)],
        ),
    ];
    std::fs::write(
        &catalog,
        serde_json::json!({"backups": backups}).to_string(),
    )
    .unwrap();
    std::fs::write(&policy, r#"{"keep_last": 3}"#).unwrap();
    let out = sexton(&[
        "retention",
        "plan",
        "--catalog",
        catalog.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--now",
        "2026-01-06T00:00:00Z",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = |start: &str| {
        text.lines()
            .find(|line| line.starts_with(start))
            .unwrap_or_else(|| panic!("no row {start:?} in\n{text}"))
            .to_string()
    };
    assert!(row("partial").contains("d2"), "{text}");
    assert!(row("delete").contains("d1"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("partial")).unwrap();
    assert!(
        lines[at + 1].contains("keep volume") && lines[at + 1].contains("pv2"),
        "{text}"
    );
    assert!(lines[at + 1].contains("needed by d3"), "{text}");
    assert!(
        lines[at + 2].contains("delete volume") && lines[at + 2].contains("pv1"),
        "{text}"
    );
}

/// `sexton exec` refuses bad flags and bad environment before it connects to anything.
#[test]
fn exec_refuses_bad_flags_and_environment() {
    let cases: &[(&[&str], &str)] = &[
        (&["exec"], "--backup-command"),
        (
            &["exec", "--backup-command", " "],
            "--backup-command is empty",
        ),
        (
            &["exec", "--backup-command", "true", "--concurrency", "0"],
            "--concurrency 0 is outside 1 to 64",
        ),
        (
            &["exec", "--backup-command", "true", "--part-size", "1MiB"],
            "part size 1048576 is outside",
        ),
        (
            &["exec", "--backup-command", "true", "--timeout", "5x"],
            "unknown unit",
        ),
        (
            &[
                "exec",
                "--backup-command",
                "true",
                "--max-output-bytes",
                "12QB",
            ],
            "is not a size",
        ),
        (
            &["exec", "--backup-command", "true", "--cluster", "../db1"],
            "invalid cluster name",
        ),
        (
            &["exec", "--backup-command", "true", "--durable", "a.b"],
            "--durable: invalid durable name",
        ),
        (
            &["exec", "--backup-command", "true", "--ack-wait", "1s"],
            "--ack-wait",
        ),
        (
            &["exec", "--backup-command", "true", "--merge-command", ""],
            "--merge-command is empty",
        ),
    ];
    for (args, expected) in cases {
        let out = sexton(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // The same settings through the environment.
    let out = Command::new(env!("CARGO_BIN_EXE_sexton"))
        .args(["exec"])
        .env("SEXTON_NATS_URL", "nats://127.0.0.1:1")
        .env("SEXTON_EXEC_BACKUP_COMMAND", "true")
        .env("SEXTON_EXEC_CONCURRENCY", "many")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("concurrency"), "{}", stderr(&out));
}

/// `sexton binlog append` refuses files that are not what they claim, before any upload.
#[test]
fn binlog_append_refuses_what_is_not_a_closed_binlog() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("mysql-bin.000001");
    std::fs::write(&text, "not a binlog").unwrap();
    // A format description event flagged in use: the server still writes this file.
    let mut open = vec![0xfe, 0x62, 0x69, 0x6e];
    open.extend(1_700_000_000u32.to_le_bytes());
    open.push(15);
    open.extend(1u32.to_le_bytes());
    open.extend(19u32.to_le_bytes());
    open.extend(23u32.to_le_bytes());
    open.extend(1u16.to_le_bytes());
    let in_use = dir.path().join("mysql-bin.000002");
    std::fs::write(&in_use, open).unwrap();
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--cluster".into(),
                "db1".into(),
                path(&dir.path().join("missing")),
            ],
            "not a regular file",
        ),
        (
            vec!["--cluster".into(), "db1".into(), path(dir.path())],
            "not a regular file",
        ),
        (
            vec!["--cluster".into(), "db1".into(), path(&text)],
            "not a binlog file",
        ),
        (
            vec!["--cluster".into(), "db1".into(), path(&in_use)],
            "still writes this binlog",
        ),
        (
            vec!["--cluster".into(), "a/b".into(), path(&text)],
            "invalid cluster name",
        ),
        (
            vec![
                "--cluster".into(),
                "db1".into(),
                "--format".into(),
                "wal".into(),
                path(&text),
            ],
            "invalid value 'wal'",
        ),
        (vec!["--cluster".into(), "db1".into()], "required"),
    ];
    for (args, expected) in cases {
        let mut all = vec!["binlog".to_string(), "append".to_string()];
        all.extend(args.iter().cloned());
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = Command::new(env!("CARGO_BIN_EXE_sexton"))
            .args(&refs)
            .env("SEXTON_NATS_URL", "nats://127.0.0.1:1")
            // Nothing may be uploaded: S3 points at a closed port.
            .env("SEXTON_S3_ENDPOINT", "http://127.0.0.1:1")
            .env("SEXTON_S3_ACCESS_KEY_ID", "x")
            .env("SEXTON_S3_SECRET_ACCESS_KEY", "y")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Issue 17: the streamed plan of a catalog past the pretty threshold (so written compact) is,
/// byte for byte, the engine's owned plan, and keeps exactly what the engine keeps. The catalog
/// is the offline-plan bench's shape at a smaller size: a backup every 5 minutes, daily fulls,
/// incrementals on the last good backup, some failed, a weekly `manual` tag, shuffled.
#[test]
fn the_offline_plan_of_a_large_catalog_is_the_engines() {
    const N_BACKUPS: usize = 12_000;
    const PER_DAY: usize = 288;
    const { assert!(N_BACKUPS > sexton_cli::offline_plan::PRETTY_UP_TO) };
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut random = move |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap();
    let mut last_good = None;
    let mut backups = Vec::new();
    for slot in 0..N_BACKUPS {
        let failed = random(100) == 0;
        let completed = start + chrono::TimeDelta::minutes(5 * slot as i64 + 4);
        let parent = if slot % PER_DAY == 0 { None } else { last_good };
        let mut record = serde_json::json!({
            "id": format!("db1-{slot:08}"),
            "completed_at": completed.to_rfc3339(),
            "started_at": (completed - chrono::TimeDelta::minutes(3)).to_rfc3339(),
            "status": if failed { "failed" } else { "completed" },
            "kind": if parent.is_some() { "incremental" } else { "full" },
        });
        if let Some(parent) = parent {
            record["parent"] = format!("db1-{parent:08}").into();
        }
        if slot % (7 * PER_DAY) == 100 {
            record["tags"] = serde_json::json!(["manual"]);
        }
        if !failed {
            last_good = Some(slot);
        }
        backups.push(record);
    }
    for i in (1..backups.len()).rev() {
        let j = random(i as u64 + 1) as usize;
        backups.swap(i, j);
    }
    let catalog_json = serde_json::json!({ "backups": backups }).to_string();
    let policy_json = r#"{"keep_last": 10, "keep_hourly": 48, "keep_daily": 30, "keep_weekly": 12,
        "keep_monthly": 24, "keep_yearly": -1, "keep_within": "7d", "keep_tags": [["manual"]]}"#;
    let now = "2026-02-12T00:00:00Z";
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.json");
    let policy = dir.path().join("policy.json");
    std::fs::write(&catalog, &catalog_json).unwrap();
    std::fs::write(&policy, policy_json).unwrap();

    let out = sexton(&[
        "retention",
        "plan",
        "--catalog",
        catalog.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--now",
        now,
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = stdout(&out);
    assert_eq!(
        written.lines().count(),
        1,
        "a large plan is written compact"
    );

    let engine_catalog: sexton_retention::Catalog = serde_json::from_str(&catalog_json).unwrap();
    let engine_policy = sexton_retention::Policy::from_json(policy_json).unwrap();
    let owned =
        sexton_retention::plan(&engine_catalog, &engine_policy, now.parse().unwrap()).unwrap();
    assert_eq!(written.trim_end(), serde_json::to_string(&owned).unwrap());

    let plan: serde_json::Value = serde_json::from_str(&written).unwrap();
    let ids = |key: &str| -> std::collections::BTreeSet<String> {
        plan[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_string())
            .collect()
    };
    let engine_keep: std::collections::BTreeSet<String> =
        owned.keep.iter().map(|d| d.id.to_string()).collect();
    assert_eq!(ids("keep"), engine_keep);
    assert!(ids("keep").len() > 100 && ids("delete").len() > 1_000);

    // `--pretty` is the same document, indented.
    let out = sexton(&[
        "retention",
        "plan",
        "--catalog",
        catalog.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--now",
        now,
        "-o",
        "json",
        "--pretty",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim_end(),
        serde_json::to_string_pretty(&owned).unwrap()
    );
}

/// No fleet at the address: the error says which URL was tried, where it came from and how to
/// change it (issue 26: a new user saw only "Connection refused").
#[test]
fn an_unreachable_fleet_names_the_url_its_source_and_the_way_out() {
    let from_env = sexton(&["schedule", "list"]);
    assert_eq!(from_env.status.code(), Some(1));
    let text = stderr(&from_env);
    assert!(
        text.contains("cannot connect to NATS at nats://127.0.0.1:1 (from the environment variable SEXTON_NATS_URL)"),
        "{text}"
    );
    assert!(text.contains("--nats-url"), "{text}");
    assert!(text.contains("./deploy/local/run"), "{text}");
    let from_flag = sexton(&["schedule", "list", "--nats-url", "nats://127.0.0.1:2"]);
    let text = stderr(&from_flag);
    assert!(
        text.contains("cannot connect to NATS at nats://127.0.0.1:2 (from --nats-url)"),
        "{text}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sexton.toml");
    std::fs::write(&file, "[nats]\nurl = \"nats://127.0.0.1:3\"\n").unwrap();
    let from_file = Command::new(env!("CARGO_BIN_EXE_sexton"))
        .args(["schedule", "list", "--config"])
        .arg(&file)
        .env_remove("SEXTON_NATS_URL")
        .output()
        .unwrap();
    let text = stderr(&from_file);
    assert!(
        text.contains(&format!(
            "cannot connect to NATS at nats://127.0.0.1:3 (from nats.url in {})",
            file.display()
        )),
        "{text}"
    );
}

/// `retention plan --delete ID [--with-dependents]` (issue 30): the offline planner judges a
/// user's delete as the fleet does, then plans with it recorded.
#[test]
fn retention_plan_evaluates_a_delete_as_the_fleet_would() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.json");
    let policy = dir.path().join("policy.json");
    // f1 ← i2 ← i3, f4.
    std::fs::write(
        &catalog,
        serde_json::json!({"backups": [
            {"id": "f1", "status": "completed", "kind": "full", "completed_at": "2026-11-01T00:00:00Z"},
            {"id": "i2", "status": "completed", "kind": "incremental", "parent": "f1", "completed_at": "2026-11-02T00:00:00Z"},
            {"id": "i3", "status": "completed", "kind": "incremental", "parent": "i2", "completed_at": "2026-11-03T00:00:00Z"},
            {"id": "f4", "status": "completed", "kind": "full", "completed_at": "2026-11-04T00:00:00Z"},
        ]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(&policy, r#"{"keep_last": 10}"#).unwrap();
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "retention",
            "plan",
            "--catalog",
            catalog.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
            "--now",
            "2026-11-22T00:00:00Z",
            "-o",
            "json",
        ];
        args.extend_from_slice(extra);
        sexton(&args)
    };
    let ids = |out: &Output, key: &str| -> Vec<String> {
        let plan: serde_json::Value = serde_json::from_str(&stdout(out)).unwrap();
        plan[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_string())
            .collect()
    };
    // Alone, i2 is deferred: i3 still needs it.
    let out = plan(&["--delete", "i2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(ids(&out, "delete").is_empty(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("delete requested, deferred"),
        "{}",
        stdout(&out)
    );
    // With its dependents, i2 and i3 go at the run.
    let out = plan(&["--delete", "i2", "--with-dependents"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(ids(&out, "delete"), ["i3", "i2"]);
    assert!(
        stderr(&out).contains("asked to delete: i2, i3"),
        "{}",
        stderr(&out)
    );
    // Refusals, as the fleet's: the newest full alone, an unknown id, the flag without
    // --delete; then a delete below the floor.
    for (extra, said) in [
        (
            &["--delete", "f4"][..],
            "is the newest full backup of the catalog",
        ),
        (
            &["--delete", "x9"][..],
            "--delete x9: no such backup in the catalog",
        ),
        (&["--with-dependents"][..], "--delete"),
    ] {
        let out = plan(extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stdout(&out));
        assert!(stderr(&out).contains(said), "{extra:?}: {}", stderr(&out));
    }
    std::fs::write(&policy, r#"{"keep_last": 10, "minimum_redundancy": 3}"#).unwrap();
    let out = plan(&["--delete", "i2", "--with-dependents"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("minimum_redundancy is 3: this delete would leave 2"),
        "{}",
        stderr(&out)
    );
}

/// `retention plan --policy-from` (issue 30): a pgBackRest or barman setting, translated and
/// said on stderr, then planned as Sexton plans it.
#[test]
fn retention_plan_takes_a_pgbackrest_or_barman_policy() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.json");
    // f1 ← i2 ← i3, f4 ← i5.
    std::fs::write(
        &catalog,
        serde_json::json!({"backups": [
            {"id": "f1", "status": "completed", "kind": "full", "completed_at": "2026-11-01T00:00:00Z"},
            {"id": "i2", "status": "completed", "kind": "incremental", "parent": "f1", "completed_at": "2026-11-02T00:00:00Z"},
            {"id": "i3", "status": "completed", "kind": "incremental", "parent": "i2", "completed_at": "2026-11-03T00:00:00Z"},
            {"id": "f4", "status": "completed", "kind": "full", "completed_at": "2026-11-04T00:00:00Z"},
            {"id": "i5", "status": "completed", "kind": "incremental", "parent": "f4", "completed_at": "2026-11-05T00:00:00Z"},
        ]})
        .to_string(),
    )
    .unwrap();
    let plan = |from: &str| {
        sexton(&[
            "retention",
            "plan",
            "--catalog",
            catalog.to_str().unwrap(),
            "--policy-from",
            from,
            "--now",
            "2026-11-22T00:00:00Z",
            "-o",
            "json",
        ])
    };
    let deleted = |out: &Output| -> Vec<String> {
        let plan: serde_json::Value = serde_json::from_str(&stdout(out)).unwrap();
        plan["delete"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_string())
            .collect()
    };
    // One full chain kept: f4 with i5; f1's chain goes whole.
    let out = plan("pgbackrest:repo1-retention-full=1");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(r#"policy: {"keep_full":1}"#),
        "{}",
        stderr(&out)
    );
    assert_eq!(deleted(&out), ["i3", "i2", "f1"]);
    // barman's REDUNDANCY 1 is the same; its floor of 3 keeps i3 and i2 too (f1 as needed).
    let out = plan("barman:retention_policy=REDUNDANCY 1, minimum_redundancy=3");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(deleted(&out).is_empty(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("minimum_redundancy 3"),
        "{}",
        stdout(&out)
    );
    // Refused, nothing planned: differentials counted without the fulls they narrow.
    let out = plan("pgbackrest:repo1-retention-diff=2");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no repo-retention-full"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
}

/// `retention plan --catalog-from` (issue 30): what `pgbackrest info --output=json` and
/// `barman list-backups --format json` print, read into a catalog, planned, and compared with
/// what the tool keeps; a malformed listing is refused with nothing planned.
#[test]
fn retention_plan_reads_a_pgbackrest_or_barman_listing_and_compares() {
    let dir = tempfile::tempdir().unwrap();
    let info = dir.path().join("info.json");
    let backup = |label: &str, kind: &str, prior: Option<&str>, start: i64| {
        serde_json::json!({"label": label, "type": kind, "prior": prior,
                           "timestamp": {"start": start, "stop": start + 60},
                           "archive": {"start": "000000010000000000000002",
                                       "stop": "000000010000000000000003"}})
    };
    std::fs::write(
        &info,
        serde_json::json!([{"name": "demo", "backup": [
            backup("20241101-000000F", "full", None, 1_730_419_200),
            backup("20241101-000000F_20241102-000000I", "incr", Some("20241101-000000F"), 1_730_505_600),
            backup("20241108-000000F", "full", None, 1_731_024_000),
        ]}])
        .to_string(),
    )
    .unwrap();
    let plan = |catalog_from: &str, policy_from: &str, output: &str| {
        sexton(&[
            "retention",
            "plan",
            "--catalog-from",
            catalog_from,
            "--policy-from",
            policy_from,
            "--now",
            "2024-11-10T00:00:00Z",
            "-o",
            output,
        ])
    };
    let from = format!("pgbackrest:{}", info.display());
    let out = plan(&from, "pgbackrest:repo1-retention-full=2", "json");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("compared with pgBackRest: the same backups kept and deleted"),
        "{}",
        stderr(&out)
    );
    let out = plan(&from, "pgbackrest:repo1-retention-full=1", "table");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("compared with pgBackRest: 2 backup(s) differ")
            && stderr(&out).contains("20241101-000000F: pgBackRest keeps, Sexton deletes"),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("20241108-000000F"),
        "{}",
        stdout(&out)
    );

    let list = dir.path().join("list.json");
    std::fs::write(
        &list,
        serde_json::json!({"pg": [
            {"backup_id": "20241108T000000", "backup_type": "rsync", "status": "DONE",
             "end_time_timestamp": "1731024060", "retention_status": "VALID"},
            {"backup_id": "20241101T000000", "backup_type": "rsync", "status": "DONE",
             "end_time_timestamp": "1730419260", "retention_status": "OBSOLETE"},
        ]})
        .to_string(),
    )
    .unwrap();
    let out = plan(
        &format!("barman:{}", list.display()),
        "barman:retention_policy=REDUNDANCY 2",
        "json",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("20241101T000000: barman deletes, Sexton keeps (keep_full 2"),
        "{}",
        stderr(&out)
    );

    // Bad input: exit 2, a clear error, no plan.
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"[{"name": "a", "backup": []}, {"name": "b", "backup": []}]"#,
    )
    .unwrap();
    for (from, says) in [
        (format!("pgbackrest:{}", bad.display()), "2 stanzas (a, b)"),
        (format!("barman:{}", bad.display()), "expected the object"),
        (
            format!("restic:{}", bad.display()),
            "expected pgbackrest:FILE or barman:FILE",
        ),
        (
            "pgbackrest".to_string(),
            "expected pgbackrest:FILE or barman:FILE",
        ),
        (
            "pgbackrest:/nonexistent/info.json".to_string(),
            "cannot read",
        ),
    ] {
        let out = plan(&from, "pgbackrest:repo1-retention-full=1", "json");
        assert_eq!(out.status.code(), Some(2), "{from}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{from}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{from}: {}", stdout(&out));
    }
    // --catalog and --catalog-from are one or the other.
    let out = sexton(&[
        "retention",
        "plan",
        "--catalog",
        info.to_str().unwrap(),
        "--catalog-from",
        &from,
        "--policy-from",
        "pgbackrest:repo1-retention-full=1",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// Issue 50: months are `m` or `mo` everywhere a policy takes a duration, a bare `m` is said to
/// be months on every path that reads a policy (here `retention simulate`), and minutes in a
/// keep_within are refused by name.
#[test]
fn months_are_said_on_every_path_and_minutes_refused_by_name() {
    let simulate = |policy: &str| {
        sexton(&[
            "retention",
            "simulate",
            "--cron",
            "@daily",
            "--from",
            "2026-01-01T00:00:00Z",
            "--policy",
            policy,
            "-o",
            "json",
        ])
    };
    let out = simulate(r#"{"keep_within": "15m"}"#);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("warning: --policy: keep_within \"15m\" counts 15 calendar months"),
        "{said}"
    );
    // `mo` reads the same, and is said the same (the note is about the reading, whatever the
    // spelling).
    let out = simulate(r#"{"keep_within": "15mo", "recovery_window": "2mo"}"#);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("15 calendar months"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("2 months of 30 days"),
        "{}",
        stderr(&out)
    );
    let out = simulate(r#"{"keep_within": "15min"}"#);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("minutes are not a unit here (m and mo are months)"),
        "{}",
        stderr(&out)
    );
    // The flag's help says what m is.
    let help = stdout(&sexton(&["schedule", "create", "--help"]));
    assert!(help.contains("mo or m = months"), "{help}");
}

/// Issue 50: every unknown field of a manifest, at any depth, is listed at its own line with
/// the closest field, before anything is sent (the fleet is not even reached).
#[test]
fn every_unknown_field_of_a_manifest_is_listed_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nightly.yaml");
    std::fs::write(
        &file,
        "apiVersion: sexton.io/v1\nkind: Schedule\nmetadata:\n  name: nightly\nspec:\n  \
         cluster: db1\n  plan: full\n  cron: '@daily'\n  policy: {keep_last: 3}\n  copies:\n  \
         - to: dr\n    polcy: {keep_last: 1}\n  verify:\n    cron: '@daily'\n    timout: 1h\n",
    )
    .unwrap();
    let out = sexton(&["apply", "-f", file.to_str().unwrap(), "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stderr(&out);
    let at = |line: usize| format!("{}:{line}: schedule nightly: unknown field", file.display());
    assert!(
        said.contains(&format!("{} `polcy`", at(12)))
            && said.contains("did you mean policy? (at spec.copies[0].polcy)"),
        "{said}"
    );
    assert!(
        said.contains(&format!("{} `timout`", at(15)))
            && said.contains("did you mean timeout? (at spec.verify.timout)"),
        "{said}"
    );
    assert!(said.contains("nothing was applied"), "{said}");
}

/// Issue 50: `--nats-url host:port` is read as `nats://host:port`, and `sexton version` with
/// the fleet down says so once, in the words every other verb uses.
#[test]
fn a_nats_url_without_a_scheme_is_nats_and_version_says_an_unreachable_fleet_once() {
    let out = sexton(&["--nats-url", "127.0.0.1:1", "backup", "list"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot connect to NATS at nats://127.0.0.1:1 (from --nats-url)"),
        "{}",
        stderr(&out)
    );
    let out = sexton(&["version"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = stderr(&out);
    assert_eq!(said.matches("Connection refused").count(), 1, "{said}");
    assert!(
        said.contains("cannot connect to NATS at nats://127.0.0.1:1"),
        "{said}"
    );
    assert!(stdout(&out).contains("client"), "{}", stdout(&out));
}

/// Issue 50: `retention simulate --lock` warns of a tier shorter than its rule, as `schedule
/// create` does, and `--policy-from pgbackrest:FILE` reads a pgbackrest.conf as it is.
#[test]
fn simulate_warns_of_short_tiers_and_a_pgbackrest_conf_is_read_as_is() {
    let out = sexton(&[
        "retention",
        "simulate",
        "--cron",
        "@daily",
        "--from",
        "2026-01-01T00:00:00Z",
        "--days",
        "20",
        "--policy",
        r#"{"keep_daily": 14}"#,
        "--lock",
        "mode=governance,daily=5d",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: --lock: keep_daily 14 keeps each pick for about 14 days"),
        "{}",
        stderr(&out)
    );
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("pgbackrest.conf");
    std::fs::write(
        &conf,
        "[global]\nrepo1-path=/var/lib/pgbackrest\nrepo1-retention-full=2\n\n[main]\npg1-path=/pg\n",
    )
    .unwrap();
    let catalog = dir.path().join("catalog.json");
    std::fs::write(
        &catalog,
        r#"{"backups": [
            {"id": "f1", "completed_at": "2026-01-01T00:00:00Z", "status": "completed", "kind": "full"},
            {"id": "f2", "completed_at": "2026-01-02T00:00:00Z", "status": "completed", "kind": "full"},
            {"id": "f3", "completed_at": "2026-01-03T00:00:00Z", "status": "completed", "kind": "full"}]}"#,
    )
    .unwrap();
    let out = sexton(&[
        "retention",
        "plan",
        "--catalog",
        catalog.to_str().unwrap(),
        "--policy-from",
        &format!("pgbackrest:{}", conf.display()),
        "--now",
        "2026-01-04T00:00:00Z",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("policy: {\"keep_full\":2}"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("2 other option(s) left out"),
        "{}",
        stderr(&out)
    );
    let plan: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let deleted: Vec<&str> = plan["delete"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(deleted, ["f1"], "{plan}");
}
