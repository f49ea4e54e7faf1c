//! Malformed events and jobs on every subject the fleet consumes: each is refused with a clear
//! reason (terminated and recorded as an incident), nothing is written or deleted, and every
//! service keeps running. Also the API: a malformed request gets an `invalid` error.

use std::time::Duration;

use serde_json::json;
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{
    setup::{Setup, World},
    *,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_are_refused_and_the_fleet_keeps_running() {
    let world = Setup::new(Members::ALL).start().await;
    let World {
        config,
        fleet,
        client,
        js,
        ..
    } = world;
    // Wait for the fleet to have created its consumers.
    eventually("the fleet's consumers", Duration::from_secs(30), || {
        let js = js.clone();
        async move {
            consumer_backlog(&js, topology::STREAM_JOBS, topology::CONSUMER_DELETER).await?;
            consumer_backlog(&js, topology::STREAM_REPORTS, topology::CONSUMER_REPORTS).await?;
            consumer_backlog(
                &js,
                topology::STREAM_RETENTION,
                topology::CONSUMER_RETENTION,
            )
            .await?;
            consumer_backlog(&js, topology::STREAM_DUE, topology::CONSUMER_EXECUTOR).await
        }
    })
    .await;

    let report = r#"{"schema_version":1,"backup_id":"b1","cluster":"c1","plan":"p","backup_name":"s","status":"completed","completed_at":"2026-01-01T00:00:00Z","artifacts":["backups/c1/s/b1/backup.xbstream"]}"#;
    let job = r#"{"schema_version":1,"cluster":"c1","backup_id":"b1","uid":"u","revision":1}"#;
    let cases: Vec<(&str, String, &str)> = vec![
        ("sexton.v1.report.c1", "not json".into(), "not valid json"),
        ("sexton.v1.report.c1", "{}".into(), "missing schema_version"),
        (
            "sexton.v1.report.c1",
            report.replace("\"schema_version\":1", "\"schema_version\":9"),
            "unsupported schema_version",
        ),
        (
            "sexton.v1.report.c1",
            report.replace(",\"plan\":\"p\"", ""),
            "missing field `plan`",
        ),
        (
            "sexton.v1.report.c1",
            report.replace("backups/c1/", "backups/c2/"),
            "not under the cluster's prefix",
        ),
        (
            "sexton.v1.report.c1",
            report.replace("2026-01-01", "2999-01-01"),
            "in the future",
        ),
        (
            "sexton.v1.report.c1",
            report.replace(
                "\"backup_name\":\"s\"",
                "\"backup_name\":\"s\",\"schedule\":\"ghost\"",
            ),
            "unknown schedule",
        ),
        (
            "sexton.v1.retention.checkpoint.c1",
            "[]".into(),
            "not valid json",
        ),
        (
            "sexton.v1.retention.checkpoint.c1",
            r#"{"schema_version":1,"cluster":"c1"}"#.into(),
            "missing field",
        ),
        (
            "sexton.v1.retention.sweep.c1",
            r#"{"schema_version":1,"cluster":"../c1","requested_at":"2026-01-01T00:00:00Z"}"#
                .into(),
            "invalid cluster name",
        ),
        ("sexton.v1.job.delete.c1", "".into(), "not valid json"),
        (
            "sexton.v1.job.delete.c1",
            job.replace("\"revision\":1", "\"revision\":\"one\""),
            "invalid type",
        ),
        (
            "sexton.v1.job.delete.c1",
            job.replace("\"schema_version\":1,", ""),
            "missing schema_version",
        ),
        (
            "sexton.v1.job.delete.c1",
            job.replace("\"uid\":\"u\"", "\"uid\":\"\""),
            "uid must hold",
        ),
        (
            "sexton.v1.due.c1",
            r#"{"schema_version":1}"#.into(),
            "missing field",
        ),
    ];
    for (subject, body, _) in &cases {
        js.publish(subject.to_string(), body.clone().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let incidents = eventually(
        "an incident per malformed message",
        Duration::from_secs(30),
        || {
            let js = js.clone();
            let want = cases.len();
            async move {
                let incidents: Vec<String> =
                    read_stream(&js, topology::STREAM_EVENTS, "sexton.v1.event.incident.>")
                        .await
                        .iter()
                        .map(|m| String::from_utf8_lossy(&m.payload).to_string())
                        .collect();
                (incidents.len() >= want).then_some(incidents)
            }
        },
    )
    .await;
    for (subject, _, reason) in &cases {
        assert!(
            incidents
                .iter()
                .any(|i| i.contains(subject) && i.contains(reason)),
            "no incident for {subject} says {reason:?}: {incidents:#?}"
        );
    }
    // Terminated, not redelivered forever: every consumer is drained.
    for (stream, durable) in [
        (topology::STREAM_DUE, topology::CONSUMER_EXECUTOR),
        (topology::STREAM_REPORTS, topology::CONSUMER_REPORTS),
        (topology::STREAM_RETENTION, topology::CONSUMER_RETENTION),
        (topology::STREAM_JOBS, topology::CONSUMER_DELETER),
    ] {
        assert_eq!(
            consumer_backlog(&js, stream, durable).await,
            Some(0),
            "{durable}"
        );
    }
    // Nothing written.
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    assert!(catalog.list_all().await.unwrap().is_empty());
    assert!(object_store(&config)
        .await
        .list("")
        .await
        .unwrap()
        .is_empty());

    // The API refuses malformed requests with `invalid` and a reason.
    let api_cases = [
        (
            "schedule",
            "create",
            json!({"schema_version": 1}),
            "missing field",
        ),
        (
            "schedule",
            "create",
            json!({"schema_version": 1, "name": "s", "cluster": "c", "plan": "p", "cron": "61 * * * *", "policy": {"keep_last": 3}}),
            "invalid cron",
        ),
        (
            "schedule",
            "create",
            json!({"schema_version": 1, "name": "s", "cluster": "c", "plan": "p", "cron": "@daily", "policy": {"keep_last": 3}, "bogus": 1}),
            "unknown field",
        ),
        (
            "schedule",
            "create",
            json!({"schema_version": 1, "name": "a/b", "cluster": "c", "plan": "p", "cron": "@daily", "policy": {"keep_last": 3}}),
            "invalid schedule name",
        ),
        (
            "schedule",
            "create",
            json!({"schema_version": 1, "name": "s", "cluster": "c", "plan": "p", "cron": "@daily", "policy": {}}),
            "policy",
        ),
        (
            "schedule",
            "get",
            json!({"schema_version": 2, "name": "s"}),
            "unsupported schema_version",
        ),
        (
            "schedule",
            "frobnicate",
            json!({"schema_version": 1}),
            "unknown api call",
        ),
        (
            "backup",
            "list",
            json!({"schema_version": 1, "cluster": "../x"}),
            "invalid cluster name",
        ),
    ];
    for (resource, verb, body, reason) in api_cases {
        let err = api(&client, resource, verb, body.clone())
            .await
            .unwrap_err();
        assert_eq!(err.code, sexton_shared::api::ErrorCode::Invalid, "{body}");
        assert!(err.message.contains(reason), "{body}: {}", err.message);
    }
    let missing = api(
        &client,
        "schedule",
        "get",
        json!({"schema_version": 1, "name": "nope"}),
    )
    .await
    .unwrap_err();
    assert_eq!(missing.code, sexton_shared::api::ErrorCode::NotFound);

    assert!(fleet.all_running());
    fleet.stop().await.unwrap();
}
