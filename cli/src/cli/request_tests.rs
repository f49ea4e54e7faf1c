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
            "--dry-run",
        ],
        &["catalog", "scrub", "--cluster", "c"],
        &["catalog", "import", "--cluster", "c", "--dry-run"],
        &["binlog", "status", "--cluster", "c"],
        &["cluster", "forget", "--cluster", "c", "--remote"],
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
        (&["cluster", "forget", "--cluster", "a/../b"], "--cluster"),
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
