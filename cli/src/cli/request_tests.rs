//! Tests of the typed requests: every online command's body is what its service decodes, a
//! name the service would refuse is refused before sending in its words, and a destructive
//! command's dry run is the same request with `dry_run` set.

use clap::Parser as _;
use serde_json::Value;
use sexton_shared::api::{self, decode_request};

use super::requests::{destructive, request_for, Body};
use super::{Cli, Failure};

fn command(args: &[&str]) -> super::Command {
    let mut line = vec!["sexton"];
    line.extend_from_slice(args);
    Cli::try_parse_from(line)
        .expect("a valid command line")
        .command
}

fn body(args: &[&str]) -> (String, Body) {
    let (subject, body, _) = request_for(&command(args)).expect("a request");
    (subject, body)
}

fn refused(args: &[&str]) -> Failure {
    request_for(&command(args)).expect_err("refused before sending")
}

/// The body decodes as the request type of its verb, the way the service decodes it.
fn decodes(subject: &str, body: &Body) {
    let bytes = serde_json::to_vec(body).unwrap();
    let verb = subject.rsplitn(3, '.').collect::<Vec<_>>();
    let verb = format!("{}.{}", verb[1], verb[0]);
    let ok = match verb.as_str() {
        "schedule.create" => decode_request::<api::ScheduleSpec>(&bytes).map(drop),
        "schedule.update" => decode_request::<api::ScheduleUpdate>(&bytes).map(drop),
        "schedule.get" | "schedule.describe" | "schedule.pause" | "backup.create" => {
            decode_request::<api::ByName>(&bytes).map(drop)
        }
        "schedule.list" | "backup.list" => decode_request::<api::ListFilter>(&bytes).map(drop),
        "schedule.delete" => decode_request::<api::ScheduleDelete>(&bytes).map(drop),
        "schedule.unpause" => decode_request::<api::Unpause>(&bytes).map(drop),
        "schedule.backfill" => decode_request::<api::ScheduleBackfill>(&bytes).map(drop),
        "backup.describe" => decode_request::<api::BackupRef>(&bytes).map(drop),
        "backup.hold" | "backup.release" => decode_request::<api::BackupHold>(&bytes).map(drop),
        "backup.delete" => decode_request::<api::BackupDelete>(&bytes).map(drop),
        "backup.verify" => decode_request::<api::VerifyRequest>(&bytes).map(drop),
        "backup.drill" => decode_request::<api::DrillRequest>(&bytes).map(drop),
        "recovery.window" => decode_request::<api::RecoveryRequest>(&bytes).map(drop),
        "orphans.list" | "orphans.delete" => {
            decode_request::<api::OrphansRequest>(&bytes).map(drop)
        }
        "plugin.register" => decode_request::<api::PluginSpec>(&bytes).map(drop),
        "plugin.unregister" => decode_request::<api::PluginByName>(&bytes).map(drop),
        "plugin.list" => decode_request::<api::PluginList>(&bytes).map(drop),
        "retention.preview" => decode_request::<api::PreviewRequest>(&bytes).map(drop),
        "retention.approve" => decode_request::<api::ApproveRequest>(&bytes).map(drop),
        "catalog.scrub" => decode_request::<api::ScrubRequest>(&bytes).map(drop),
        "catalog.import" => decode_request::<api::ImportRequest>(&bytes).map(drop),
        "binlog.status" => decode_request::<api::StatusRequest>(&bytes).map(drop),
        "cluster.forget" => decode_request::<api::ClusterForget>(&bytes).map(drop),
        other => panic!("no request type for {other}"),
    };
    ok.unwrap_or_else(|err| panic!("{subject}: {err}: {}", String::from_utf8_lossy(&bytes)));
}

#[test]
fn every_online_command_sends_what_its_service_decodes() {
    let lines: &[&[&str]] = &[
        &[
            "schedule",
            "create",
            "n",
            "--cluster",
            "c",
            "--plan",
            "p",
            "--cron",
            "@daily",
            "--keep-last",
            "3",
            "--label",
            "a=b",
            "--overlap-policy",
            "allow",
            "--starting-deadline",
            "15m",
            "--jitter",
            "5m",
            "--exclude",
            r#"{"cron": "0 8 * * *", "duration": "1h"}"#,
            "--on-blackout",
            "defer",
            "--pause-after-failures",
            "3",
            "--annotation",
            "x=y",
            "--full-every",
            "7",
            "--volume",
            "v1",
            "--backup-owner",
            "schedule",
            "--verify-cron",
            "@weekly",
            "--verify-pick",
            "random",
            "--verify-timeout",
            "2h",
            "--breaker",
            r#"{"max_delete_count": 5}"#,
            "--yes",
            "--skip-immediately",
        ],
        &[
            "schedule",
            "create",
            "n",
            "--cluster",
            "c",
            "--plan",
            "p",
            "--cron",
            "@daily",
            "--policy",
            r#"{"keep_daily": 7, "recovery_window": "30d"}"#,
        ],
        &[
            "schedule",
            "update",
            "n",
            "--keep-last",
            "4",
            "--no-jitter",
            "--no-exclude",
            "--no-starting-deadline",
            "--no-full-every",
            "--no-verify",
            "--breaker-defaults",
            "--no-pause-after-failures",
        ],
        &[
            "schedule",
            "update",
            "n",
            "--policy",
            r#"{"keep_last": 2}"#,
            "--replace-policy",
            "--cron",
            "@hourly",
            "--volume",
            "a",
            "--backup-owner",
            "none",
            "--dry-run",
        ],
        &["schedule", "get", "n"],
        &["schedule", "describe", "n"],
        &["schedule", "list", "--cluster", "c"],
        &["schedule", "delete", "n", "--dry-run"],
        &["schedule", "pause", "n"],
        &["schedule", "unpause", "n", "--skip-immediately=false"],
        &[
            "schedule",
            "backfill",
            "n",
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-01-02T00:00:00Z",
            "--overlap",
            "allow",
        ],
        &["backup", "create", "--from-schedule", "n"],
        &["backup", "list", "--cluster", "c", "--plan", "p"],
        &["backup", "describe", "b-1", "--cluster", "c"],
        &[
            "backup",
            "hold",
            "b-1",
            "--cluster",
            "c",
            "--reason",
            "restore:r-1",
        ],
        &[
            "backup",
            "release",
            "b-1",
            "--cluster",
            "c",
            "--reason",
            "restore:r-1",
        ],
        &[
            "backup",
            "delete",
            "b-1",
            "--cluster",
            "c",
            "--remote",
            "--force",
        ],
        &[
            "backup",
            "verify",
            "b-1",
            "--cluster",
            "c",
            "--timeout",
            "2h",
        ],
        &["backup", "orphans", "--cluster", "c", "--grace", "1h"],
        &[
            "backup",
            "orphans",
            "--cluster",
            "c",
            "--delete",
            "--dry-run",
        ],
        &[
            "plugin",
            "register",
            "snap",
            "--subject",
            "sexton.v1.plugin.snap",
            "--selector",
            "tier=gold",
            "--timeout",
            "5",
        ],
        &["plugin", "list"],
        &["plugin", "unregister", "snap"],
        &["retention", "preview", "--cluster", "c", "--plan", "p"],
        &["retention", "approve", "--cluster", "c", "--plan", "p"],
        &[
            "retention",
            "approve",
            "--cluster",
            "c",
            "--plan",
            "p",
            "--location",
            "dr",
        ],
        &["retention", "preview", "--cluster", "c", "--location", "dr"],
        &[
            "retention",
            "approve",
            "--cluster",
            "c",
            "--plan",
            "p",
            "--dry-run",
        ],
        &["catalog", "scrub", "--cluster", "c"],
        &["catalog", "import", "--cluster", "c", "--dry-run"],
        &["catalog", "import", "--cluster", "c", "--from", "dr"],
        &["binlog", "status", "--cluster", "c"],
        &["cluster", "forget", "--cluster", "c", "--remote"],
        &["recovery", "window", "--cluster", "c", "--location", "dr"],
        &[
            "recovery",
            "drill",
            "--cluster",
            "c",
            "--at",
            "2026-11-23T14:00:00+01:00",
            "--plan",
            "p",
            "--location",
            "dr",
            "--timeout",
            "2h",
        ],
    ];
    for line in lines {
        let (subject, body) = body(line);
        decodes(&subject, &body);
    }
}

#[test]
fn an_update_sends_only_what_its_flags_change() {
    let (_, update) = body(&["schedule", "update", "n", "--no-jitter", "--keep-last", "4"]);
    let sent = serde_json::to_value(&update).unwrap();
    assert_eq!(sent["jitter"], Value::Null, "{sent}");
    assert_eq!(
        sent["policy_patch"],
        serde_json::json!({"keep_last": 4}),
        "{sent}"
    );
    for absent in [
        "cron",
        "policy",
        "labels",
        "verify",
        "breaker",
        "starting_deadline",
    ] {
        assert!(sent.get(absent).is_none(), "{absent} in {sent}");
    }
}

#[test]
fn a_name_the_service_refuses_is_refused_before_sending_in_its_words() {
    for (line, words) in [
        (
            &["schedule", "get", "../corpus"][..],
            "invalid schedule name",
        ),
        (
            &["backup", "list", "--cluster", "../c"],
            "invalid cluster name",
        ),
        (
            &["retention", "preview", "--cluster", "*"],
            "invalid cluster name",
        ),
        (
            &["catalog", "scrub", "--cluster", "../x"],
            "invalid cluster",
        ),
        (
            &["backup", "describe", "a/b", "--cluster", "c"],
            "invalid backup id",
        ),
        (
            &["backup", "verify", "b", "--cluster", "c", "--timeout", "5s"],
            "verify timeout",
        ),
        (
            &["recovery", "drill", "--cluster", "c", "--at", "yesterday"],
            "--at \"yesterday\" is not an RFC 3339 time",
        ),
        (
            &[
                "recovery",
                "drill",
                "--cluster",
                "c",
                "--at",
                "2026-11-23T14:00:00",
            ],
            "not an RFC 3339 time",
        ),
        (
            &[
                "recovery",
                "drill",
                "--cluster",
                "c",
                "--at",
                "2026-11-23T14:00:00Z",
                "--location",
                "d/r",
            ],
            "location",
        ),
        (
            &[
                "recovery",
                "drill",
                "--cluster",
                "c",
                "--at",
                "2026-11-23T14:00:00Z",
                "--timeout",
                "30d",
            ],
            "verify timeout",
        ),
        (&["cluster", "forget", "--cluster", "a/../b"], "--cluster"),
        (
            &["catalog", "import", "--cluster", "c", "--from", "d/r"],
            "location",
        ),
        (
            &[
                "retention",
                "preview",
                "--cluster",
                "c",
                "--location",
                "primary ",
            ],
            "location",
        ),
        (
            &[
                "schedule",
                "create",
                "s",
                "--cluster",
                "corpus.c",
                "--plan",
                "p",
                "--cron",
                "@daily",
                "--keep-last",
                "2",
            ],
            "invalid cluster name",
        ),
    ] {
        let failure = refused(line);
        assert_eq!(failure.code, 2, "{line:?}: {}", failure.message);
        assert!(
            failure.message.contains(words),
            "{line:?}: {}",
            failure.message
        );
    }
}

#[test]
fn a_destructive_command_asks_its_dry_run_first() {
    for (line, verb) in [
        (&["schedule", "delete", "n"][..], "schedule.delete"),
        (&["cluster", "forget", "--cluster", "c"], "cluster.forget"),
        (
            &["backup", "delete", "b", "--cluster", "c", "--remote"],
            "backup.delete",
        ),
        (
            &["backup", "orphans", "--cluster", "c", "--delete"],
            "orphans.delete",
        ),
        (
            &["retention", "approve", "--cluster", "c", "--plan", "p"],
            "retention.preview",
        ),
    ] {
        let command = command(line);
        let (_, body, _) = request_for(&command).unwrap();
        let (yes, (subject, dry)) = destructive(&command, &body).expect("a dry run first");
        assert!(!yes);
        assert!(subject.ends_with(verb), "{subject}");
        decodes(&subject, &dry);
        let sent = serde_json::to_value(&dry).unwrap();
        if verb != "retention.preview" {
            assert_eq!(sent["dry_run"], Value::Bool(true), "{sent}");
        }
    }
    let dry_run = command(&["schedule", "delete", "n", "--dry-run"]);
    let (_, body, _) = request_for(&dry_run).unwrap();
    assert!(destructive(&dry_run, &body).is_none());
}

/// Velero's habits: `--schedule` is `--cron`, `--ttl` is `retention_duration` in days, and
/// every rule has a flag; the flags and `--policy` make one policy, a key given twice refused.
#[test]
fn the_rule_flags_make_one_policy_with_the_policy_json() {
    let create = |extra: &[&str]| {
        let mut line = vec![
            "schedule",
            "create",
            "n",
            "--cluster",
            "c",
            "--plan",
            "p",
            "--schedule",
            "0 3 * * *",
        ];
        line.extend_from_slice(extra);
        line.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    let sent = |line: Vec<String>| {
        let line: Vec<&str> = line.iter().map(String::as_str).collect();
        let (subject, body) = body(&line);
        decodes(&subject, &body);
        serde_json::to_value(&body).unwrap()
    };
    let spec = sent(create(&[
        "--keep-daily",
        "7",
        "--keep-weekly",
        "unlimited",
        "--keep-within-daily",
        "1m",
        "--keep-tag",
        "gold,eu",
        "--keep-tag",
        "manual",
        "--ttl",
        "720h",
        "--recovery-window",
        "12h",
        "--keep-verified",
        "2",
        "--chain-mode",
        "merge",
        "--policy",
        r#"{"keep_last": 3}"#,
    ]));
    assert_eq!(spec["cron"], "0 3 * * *");
    assert_eq!(
        spec["policy"],
        serde_json::json!({"keep_last": 3, "keep_daily": 7, "keep_weekly": -1,
            "keep_within_daily": "1m", "keep_tags": [["gold", "eu"], ["manual"]],
            "retention_duration": 30, "recovery_window": "12h", "keep_verified": 2,
            "chain_mode": "merge"}),
    );
    for (extra, words) in [
        (
            &["--ttl", "24h", "--policy", r#"{"retention_duration": 3}"#][..],
            "--ttl sets retention_duration, which --policy sets too",
        ),
        (
            &["--keep-last", "2", "--policy", r#"{"keep_last": 3}"#],
            "--keep-last sets keep_last, which --policy sets too",
        ),
        (&["--ttl", "1h30m"], "not a whole number of days"),
        (&["--keep-within", "7 days"], "invalid policy: keep_within"),
        (&["--policy", "[1]"], "expected a JSON object"),
    ] {
        let line = create(extra);
        let line: Vec<&str> = line.iter().map(String::as_str).collect();
        let failure = refused(&line);
        assert_eq!(failure.code, 2, "{extra:?}: {}", failure.message);
        assert!(
            failure.message.contains(words),
            "{extra:?}: {}",
            failure.message
        );
    }
    // On update the flags are the patch's keys, merged with --policy's.
    let (_, update) = body(&[
        "schedule",
        "update",
        "n",
        "--schedule",
        "@hourly",
        "--keep-daily",
        "7",
        "--ttl",
        "48h",
        "--policy",
        r#"{"keep_last": null}"#,
    ]);
    let update = serde_json::to_value(&update).unwrap();
    assert_eq!(update["cron"], "@hourly");
    assert_eq!(
        update["policy_patch"],
        serde_json::json!({"keep_last": null, "keep_daily": 7, "retention_duration": 2})
    );
    let (_, replaced) = body(&[
        "schedule",
        "update",
        "n",
        "--keep-hourly",
        "24",
        "--replace-policy",
    ]);
    let replaced = serde_json::to_value(&replaced).unwrap();
    assert_eq!(replaced["policy"], serde_json::json!({"keep_hourly": 24}));
    assert!(replaced.get("policy_patch").is_none(), "{replaced}");
    let failure = refused(&[
        "schedule",
        "update",
        "n",
        "--policy",
        r#"{"keep_daily": 2}"#,
        "--keep-daily",
        "3",
    ]);
    assert!(
        failure.message.contains("--keep-daily sets keep_daily"),
        "{}",
        failure.message
    );
}

/// kubectl's `get`: `backup get ID` is `backup describe`, `backup get` and `schedule get`
/// without a name their `list`; list flags with a name, or an id without its cluster, refused.
#[test]
fn get_without_a_name_lists_and_with_one_describes() {
    let canonical = |args: &[&str]| super::canonical(command(args));
    let (subject, _) = {
        let (subject, body, _) =
            request_for(&canonical(&["backup", "get", "b-1", "--cluster", "c"]).unwrap()).unwrap();
        (subject, body)
    };
    assert!(subject.ends_with("backup.describe"), "{subject}");
    for (line, verb) in [
        (
            &["backup", "get", "--cluster", "c", "--watch"][..],
            "backup.list",
        ),
        (&["schedule", "get"], "schedule.list"),
        (&["schedule", "get", "-l", "team=db"], "schedule.list"),
        (&["schedule", "get", "n"], "schedule.get"),
    ] {
        let command = canonical(line).unwrap();
        let (subject, body, _) = request_for(&command).unwrap();
        assert!(subject.ends_with(verb), "{line:?}: {subject}");
        decodes(&subject, &body);
    }
    assert!(matches!(
        canonical(&["backup", "get", "--schedule", "n", "-l", "a=b"]).unwrap(),
        super::Command::Backup(super::BackupCommand::List { schedule: Some(_), list, .. })
            if list.selector.is_some()
    ));
    // An id without its cluster is describe without one: the cluster is found from the id.
    assert!(matches!(
        canonical(&["backup", "get", "b-1"]).unwrap(),
        super::Command::Backup(super::BackupCommand::Describe { cluster: None, .. })
    ));
    for (line, words) in [
        (
            &["backup", "get", "b-1", "--cluster", "c", "--watch"][..],
            "without an ID",
        ),
        (
            &["schedule", "get", "n", "--cluster", "c"],
            "without a NAME",
        ),
    ] {
        let failure = canonical(line).expect_err("refused");
        assert_eq!(failure.code, 2);
        assert!(
            failure.message.contains(words),
            "{line:?}: {}",
            failure.message
        );
    }
}
