//! Scenario 5, the bad-input corpus: every case in `tests/corpus/*.json` (see the README there)
//! is sent to a live fleet running as processes, on every subject it consumes, the
//! request/reply API and the `sexton` command line, and every configuration case is given to
//! the CLI and to a service binary. Each case must end in a clear error that says what the
//! case expects (an incident event, an `invalid` reply, exit code 2, or the NATS client or
//! server refusing an oversized body), every service must keep running, and nothing may be
//! written or deleted: the catalog, the schedules and the bucket are compared before and after.
//!
//! `tests/tests/malformed.rs` and `cli/tests/offline.rs` keep their hand-written cases; this is
//! the data-driven superset.

use std::{
    collections::BTreeMap,
    io::{Read, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use async_nats::jetstream;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{fault::*, *};

#[derive(Debug, Deserialize)]
struct SubjectFile {
    subject: String,
    base: Value,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct ApiFile {
    bases: BTreeMap<String, Value>,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Fill {
    template: String,
    count: usize,
}

/// One bad input. The body is `raw` (sent as is), `raw_hex`, `body`, or the file's base
/// with `remove`d keys, `set` keys and `fill`ed lists, padded with a `pad` field to
/// `pad_to_bytes`. `${uid:ID}`, `${rev:ID}` and `${now+1h}` are replaced before sending.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(default)]
    call: Option<String>,
    #[serde(default)]
    base: Option<String>,
    #[serde(default)]
    raw: Option<String>,
    #[serde(default)]
    raw_hex: Option<String>,
    #[serde(default)]
    body: Option<Value>,
    #[serde(default)]
    set: serde_json::Map<String, Value>,
    #[serde(default)]
    remove: Vec<String>,
    #[serde(default)]
    fill: BTreeMap<String, Fill>,
    #[serde(default)]
    pad_to_bytes: Option<usize>,
    /// Larger than the server's max_payload: the client must refuse to send it.
    #[serde(default)]
    refused_by_client: bool,
    /// Sent over a raw TCP connection, past the client's check: the server must refuse it.
    #[serde(default)]
    raw_tcp: bool,
    #[serde(default)]
    expect_code: Option<String>,
    expect_error_contains: String,
}

#[derive(Debug, Deserialize)]
struct ConfigFile {
    cases: Vec<ConfigCase>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigCase {
    name: String,
    #[serde(default)]
    toml: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    expect_error_contains: String,
}

#[derive(Debug, Deserialize)]
struct CliFile {
    files: BTreeMap<String, String>,
    cases: Vec<CliCase>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CliCase {
    name: String,
    args: Vec<String>,
    expect_error_contains: String,
}

fn corpus_dir() -> PathBuf {
    repo_root().join("tests/corpus")
}

fn load_corpus<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = corpus_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// Replaces `${uid:ID}`, `${rev:ID}` (a quoted placeholder becomes a number) and `${now+1h}`.
fn substitute(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = text.to_string();
    for (key, value) in vars {
        out = out.replace(&format!("\"${{{key}}}\""), value);
    }
    out
}

fn build(case: &Case, base: Option<&Value>, vars: &BTreeMap<String, String>) -> Vec<u8> {
    let pad = |mut bytes: Vec<u8>| {
        if let Some(n) = case.pad_to_bytes {
            bytes.resize(n.max(bytes.len()), b' ');
        }
        bytes
    };
    if let Some(raw) = &case.raw {
        return pad(raw.as_bytes().to_vec());
    }
    if let Some(hex) = &case.raw_hex {
        return (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
    }
    let mut value = case
        .body
        .clone()
        .or_else(|| base.cloned())
        .expect("a case needs a body or a base");
    if let Some(object) = value.as_object_mut() {
        for key in &case.remove {
            object.remove(key);
        }
        for (key, v) in &case.set {
            object.insert(key.clone(), v.clone());
        }
        for (key, fill) in &case.fill {
            let list: Vec<Value> = (0..fill.count)
                .map(|n| json!(fill.template.replace("{n}", &format!("{n:05}"))))
                .collect();
            object.insert(key.clone(), Value::Array(list));
        }
    }
    let mut text = substitute(&serde_json::to_string(&value).unwrap(), vars);
    if let Some(n) = case.pad_to_bytes {
        let mut padded: Value = serde_json::from_str(&text).unwrap();
        let missing = n.saturating_sub(text.len() + 10);
        padded["pad"] = json!("x".repeat(missing));
        text = serde_json::to_string(&padded).unwrap();
    }
    text.into_bytes()
}

/// A case's outcome, for the summary a failure prints.
struct Verdict {
    file: String,
    name: String,
    passed: bool,
    got: String,
}

/// Sends `body` over a bare TCP connection with the NATS protocol, past the client's size
/// check, and returns what the server answered.
fn raw_tcp_publish(port: u16, subject: &str, body: &[u8]) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("tcp");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut info = [0u8; 4096];
    let _ = stream.read(&mut info);
    let _ = write!(
        stream,
        "CONNECT {{\"verbose\":false}}\r\nPUB {subject} {}\r\n",
        body.len()
    );
    let _ = stream.write_all(body);
    let _ = stream.write_all(b"\r\n");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).to_string()
}

/// What may not change: catalog entries (key, unique id, revision), schedules (name,
/// revision), and the bucket's keys.
async fn state(js: &jetstream::Context, config: &sexton_shared::config::Config) -> Value {
    let topo = topology::ensure(js, 1).await.unwrap();
    let catalog: BTreeMap<String, (String, u64)> = Catalog::new(topo.catalog.clone())
        .list_all()
        .await
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                format!("{}.{}", r.value.cluster, r.value.id),
                (r.value.uid, r.revision),
            )
        })
        .collect();
    let mut schedules = BTreeMap::new();
    let mut keys = topo.schedules.keys().await.unwrap();
    while let Some(key) = keys.next().await {
        let key = key.unwrap();
        let revision = topo
            .schedules
            .entry(&key)
            .await
            .unwrap()
            .map(|e| e.revision);
        schedules.insert(key, revision);
    }
    let objects: Vec<String> = object_store(config)
        .await
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    json!({"catalog": catalog, "schedules": schedules, "objects": objects})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_refuses_every_case_of_the_corpus() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let mut fleet = ProcessFleet::start(&config, 1);
    fleet.wait_ready(Duration::from_secs(120));
    let client = client(&nats.url()).await;
    let js = jetstream::new(client.clone());
    let store = object_store(&config).await;

    // A paused schedule keeping five, and three backups it keeps.
    api(
        &client,
        "schedule",
        "create",
        json!({"schema_version": 1, "name": "corpus", "cluster": "corpus-c", "plan": "full",
               "cron": "@daily", "paused": true, "policy": {"keep_last": 5}}),
    )
    .await
    .expect("the corpus schedule");
    let load = ReportLoad::new(LoadSchedule {
        name: "corpus".into(),
        cluster: "corpus-c".into(),
        interval: Duration::from_secs(86_400),
        keep_last: 5,
    });
    load.write_objects(&store, "backups", 0..3).await;
    load.publish_reports(&js, "backups", 0..3).await;
    eventually("three backups recorded", Duration::from_secs(30), || {
        let js = js.clone();
        async move {
            let topo = topology::ensure(&js, 1).await.ok()?;
            let n = Catalog::new(topo.catalog).list_all().await.ok()?.len();
            (n == 3).then_some(())
        }
    })
    .await;
    wait_settled(&js, Duration::from_secs(60))
        .await
        .expect("settled");
    let mut vars = BTreeMap::new();
    let topo = topology::ensure(&js, 1).await.unwrap();
    for record in Catalog::new(topo.catalog.clone()).list_all().await.unwrap() {
        vars.insert(
            format!("uid:{}", record.value.id),
            format!("\"{}\"", record.value.uid),
        );
        vars.insert(
            format!("rev:{}", record.value.id),
            record.revision.to_string(),
        );
    }
    vars.insert(
        "now+1h".into(),
        format!(
            "\"{}\"",
            (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339()
        ),
    );
    let before = state(&js, &config).await;
    let mut incidents = client
        .subscribe("sexton.v1.event.incident.>")
        .await
        .unwrap();
    let mut verdicts = Vec::new();
    let started = Instant::now();

    // Every subject the fleet consumes.
    for file in [
        "subject_report.json",
        "subject_delete_job.json",
        "subject_binlog_job.json",
        "subject_checkpoint.json",
        "subject_sweep.json",
        "subject_due.json",
        "subject_verdict.json",
        "subject_verify_due.json",
    ] {
        let corpus: SubjectFile = load_corpus(file);
        for (n, case) in corpus.cases.iter().enumerate() {
            let body = build(case, Some(&corpus.base), &vars);
            let subject = corpus.subject.clone();
            let (passed, got) = if case.raw_tcp {
                let port = nats.port;
                let answer =
                    tokio::task::spawn_blocking(move || raw_tcp_publish(port, &subject, &body))
                        .await
                        .unwrap();
                (answer.contains(&case.expect_error_contains), answer)
            } else {
                let published = js
                    .send_publish(
                        subject.clone(),
                        jetstream::message::PublishMessage::build()
                            .payload(body.into())
                            .message_id(format!("corpus-{file}-{n}")),
                    )
                    .await;
                match (published, case.refused_by_client) {
                    (Err(err), true) => (
                        err.to_string().contains(&case.expect_error_contains),
                        err.to_string(),
                    ),
                    (Err(err), false) => (false, format!("publish failed: {err}")),
                    (Ok(_), true) => (false, "the client sent it".into()),
                    (Ok(ack), false) => {
                        ack.await.expect("stored");
                        match tokio::time::timeout(Duration::from_secs(15), incidents.next()).await
                        {
                            Ok(Some(message)) => {
                                let incident: Value =
                                    serde_json::from_slice(&message.payload).unwrap();
                                let reason = incident["reason"].as_str().unwrap_or_default();
                                (
                                    reason.contains(&case.expect_error_contains)
                                        && incident["subject"] == json!(subject),
                                    format!("incident on {}: {reason}", incident["subject"]),
                                )
                            }
                            _ => (false, "no incident within 15 s".into()),
                        }
                    }
                }
            };
            verdicts.push(Verdict {
                file: file.into(),
                name: case.name.clone(),
                passed,
                got,
            });
        }
    }

    // The request/reply API.
    let corpus: ApiFile = load_corpus("api.json");
    for case in &corpus.cases {
        let base = case.base.as_ref().map(|b| &corpus.bases[b]);
        let body = build(case, base, &vars);
        let call = case.call.as_deref().expect("an api case names its call");
        let subject = format!("{}.api.{call}", topology::SUBJECT_ROOT);
        let answer = tokio::time::timeout(
            Duration::from_secs(15),
            client.request(subject, body.into()),
        )
        .await;
        let (passed, got) = match (answer, case.refused_by_client) {
            (Ok(Err(err)), true) => (
                err.to_string().contains(&case.expect_error_contains),
                err.to_string(),
            ),
            (Ok(Err(err)), false) => (false, format!("request failed: {err}")),
            (Err(_), _) => (false, "no answer within 15 s".into()),
            (Ok(Ok(_)), true) => (false, "the client sent it".into()),
            (Ok(Ok(reply)), false) => {
                let reply: Value = serde_json::from_slice(&reply.payload).unwrap();
                let code = reply["error"]["code"].as_str().unwrap_or_default();
                let message = reply["error"]["message"].as_str().unwrap_or_default();
                (
                    Some(code) == case.expect_code.as_deref()
                        && message.contains(&case.expect_error_contains),
                    format!("{code}: {message}"),
                )
            }
        };
        verdicts.push(Verdict {
            file: "api.json".into(),
            name: case.name.clone(),
            passed,
            got,
        });
    }

    // The command line, against this fleet.
    let corpus: CliFile = load_corpus("cli.json");
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in &corpus.files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let sexton = service_binary("sexton");
    for case in &corpus.cases {
        let args: Vec<String> = case
            .args
            .iter()
            .map(|a| a.replace("$DIR", &dir.path().display().to_string()))
            .collect();
        let out = run_bounded(
            Command::new(&sexton)
                .args(&args)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("SEXTON_NATS_URL", nats.url()),
        );
        let passed = out.0 == Some(2) && out.1.contains(&case.expect_error_contains);
        verdicts.push(Verdict {
            file: "cli.json".into(),
            name: case.name.clone(),
            passed,
            got: format!("exit {:?}: {}", out.0, out.1.trim()),
        });
    }

    // Nothing changed, nothing is left half-done, every service still runs.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let settled = wait_settled(&js, Duration::from_secs(60)).await;
    let after = state(&js, &config).await;
    let exited = fleet.exited();
    let failed: Vec<String> = verdicts
        .iter()
        .filter(|v| !v.passed)
        .map(|v| format!("{} / {}: got {}", v.file, v.name, v.got))
        .collect();
    record_figures(
        "corpus-live",
        json!({
            "cases": verdicts.len(),
            "refused_as_expected": verdicts.iter().filter(|v| v.passed).count(),
            "failed": failed,
            "state_unchanged": before == after,
            "settled": settled.is_some(),
            "services_exited": exited.len(),
            "duration_ms": ms(started.elapsed()),
        }),
    );
    assert!(
        failed.is_empty(),
        "{} of {} cases not refused as expected:\n{}",
        failed.len(),
        verdicts.len(),
        failed.join("\n")
    );
    assert_eq!(before, after, "the corpus changed the fleet's state");
    assert!(exited.is_empty(), "services exited: {exited:#?}");
    assert!(settled.is_some(), "work left over\n{}", fleet.warnings(40));
    for replica in &fleet.replicas {
        if replica.role != Role::Executor {
            assert_eq!(
                http_status(replica.http_port, "/healthz"),
                Some(200),
                "{} /healthz",
                replica.role.name()
            );
        }
    }
}

/// Runs a command with a 20 s limit; returns its exit code and stderr.
fn run_bounded(command: &mut Command) -> (Option<i32>, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            let out = child.wait_with_output().unwrap();
            return (
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return (None, "still running after 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_bad_configuration_is_refused_with_exit_code_2() {
    let corpus: ConfigFile = load_corpus("config.json");
    let dir = tempfile::tempdir().unwrap();
    let mut failed = Vec::new();
    let binaries = [
        (
            service_binary("sexton"),
            vec!["backup".to_string(), "list".to_string()],
        ),
        (service_binary("sexton-deleter"), vec![]),
    ];
    for (n, case) in corpus.cases.iter().enumerate() {
        let path = dir.path().join(format!("case-{n}.toml"));
        match &case.toml {
            Some(text) => std::fs::write(&path, text).unwrap(),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
        // Nothing may be reached: NATS and S3 point at a closed port, unless the case's own
        // file sets them (the environment would override the file).
        let text = case.toml.as_deref().unwrap_or_default();
        let mut env = case.env.clone();
        if !text.contains("url") {
            env.entry("SEXTON_NATS_URL".into())
                .or_insert_with(|| "nats://127.0.0.1:1".into());
        }
        if !text.contains("endpoint") {
            env.entry("SEXTON_S3_ENDPOINT".into())
                .or_insert_with(|| "http://127.0.0.1:1".into());
        }
        for (binary, args) in &binaries {
            let out = run_bounded(
                Command::new(binary)
                    .arg("--config")
                    .arg(&path)
                    .args(args)
                    .env_clear()
                    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                    .envs(&env),
            );
            if out.0 != Some(2) || !out.1.contains(&case.expect_error_contains) {
                failed.push(format!(
                    "{} with {}: exit {:?}: {}",
                    case.name,
                    Path::new(binary).file_name().unwrap().to_string_lossy(),
                    out.0,
                    out.1.trim()
                ));
            }
        }
    }
    record_figures(
        "corpus-config",
        json!({"cases": corpus.cases.len(), "runs": corpus.cases.len() * 2, "failed": failed}),
    );
    assert!(
        failed.is_empty(),
        "{} configuration runs not refused as expected:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
