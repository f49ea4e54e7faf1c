//! deploy/ checked against the code and a real server:
//! - every metric the Grafana dashboard or the alert rules name is one the services export, and
//!   every alert's runbook link lands on a section of deploy/README.md;
//! - deploy/nats/sexton.conf, on a real nats-server: an executor or a deleter cannot publish a
//!   delete job, only the retention-worker can; only the scheduler publishes due-backups;
//! - the whole fleet runs with one NATS user per service under that configuration, without a
//!   single permission violation in the server's log, and so does `sexton exec` (with merges)
//!   as the executor user.
//!
//! The tool checks of the same files (promtool, kubernetes-validate) are in deploy/check.

use std::{
    collections::BTreeSet,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{json, Value};
use sexton_shared::{config::Config, topology};
use sexton_tests::*;

fn deploy_file(path: &str) -> PathBuf {
    repo_root().join("deploy").join(path)
}

/// Every metric name the three services export.
fn exported_metric_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    names.extend(sexton_scheduler::metrics::Metrics::new().names);
    names.extend(sexton_retention_worker::metrics::Metrics::new().names);
    names.extend(sexton_deleter::metrics::Metrics::new().names);
    names
}

/// The `sexton_*` metric names in `text`, with a histogram's `_bucket`, `_sum` and `_count`
/// series mapped back to the histogram's name.
fn metric_names_in(text: &str, exported: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(offset) = text[from..].find("sexton_") {
        let start = from + offset;
        let end = start
            + text[start..]
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(text.len() - start);
        from = end;
        // Part of a longer word (a `$sexton_x` variable, `foo_sexton_bar`): not a metric.
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let name = &text[start..end];
        let name = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|base| !exported.contains(name) && exported.contains(*base))
            })
            .unwrap_or(name);
        found.insert(name.to_string());
    }
    found
}

/// Every PromQL query of a dashboard: panel targets (rows nest panels) and template variables.
fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    fn walk(panels: &Value, out: &mut Vec<String>) {
        for panel in panels.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push(expr.to_string());
                }
            }
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if variable["type"] == "query" {
            let query = &variable["query"];
            if let Some(text) = query.as_str().or_else(|| query["query"].as_str()) {
                out.push(text.to_string());
            }
        }
    }
    out
}

#[test]
fn the_dashboard_names_only_exported_metrics() {
    let exported = exported_metric_names();
    let text = std::fs::read_to_string(deploy_file("grafana/sexton.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    assert_eq!(dashboard["uid"], "sexton-fleet");

    // Structure Grafana relies on: unique panel ids, a data source and queries on every
    // panel that is not a row, and the cluster variable the drill-down filters on.
    let mut ids = BTreeSet::new();
    let mut panels: Vec<&Value> = Vec::new();
    fn collect<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for panel in list.as_array().into_iter().flatten() {
            out.push(panel);
            collect(&panel["panels"], out);
        }
    }
    collect(&dashboard["panels"], &mut panels);
    assert!(panels.len() > 10, "a fleet overview and a drill-down");
    for panel in &panels {
        let id = panel["id"].as_u64().expect("every panel has an id");
        assert!(ids.insert(id), "panel id {id} is used twice");
        if panel["type"] != "row" {
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "{}",
                panel["title"]
            );
            let targets = panel["targets"].as_array().expect("queries");
            assert!(!targets.is_empty(), "panel {} has no query", panel["title"]);
        }
    }
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(variables, ["datasource", "cluster"]);

    let queries = dashboard_queries(&dashboard);
    let mut named = BTreeSet::new();
    for query in &queries {
        named.extend(metric_names_in(query, &exported));
    }
    assert!(
        named.len() >= 20,
        "the dashboard shows most metrics: {named:?}"
    );
    let unknown: Vec<_> = named.difference(&exported).collect();
    assert!(
        unknown.is_empty(),
        "deploy/grafana/sexton.json names metrics no service exports: {unknown:?}\nexported: {exported:?}"
    );
}

#[test]
fn the_alert_rules_name_only_exported_metrics_and_existing_runbooks() {
    let exported = exported_metric_names();
    let rules = std::fs::read_to_string(deploy_file("prometheus/rules.yml")).unwrap();
    let named = metric_names_in(&rules, &exported);
    assert!(named.len() >= 6, "the rules watch most gauges: {named:?}");
    let unknown: Vec<_> = named.difference(&exported).collect();
    assert!(
        unknown.is_empty(),
        "deploy/prometheus/rules.yml names metrics no service exports: {unknown:?}\nexported: {exported:?}"
    );

    // Every runbook annotation points at a heading of deploy/README.md (GitHub's anchors:
    // lower case, punctuation dropped, spaces to hyphens), and every alert has one.
    let readme = std::fs::read_to_string(deploy_file("README.md")).unwrap();
    let anchors: BTreeSet<String> = readme
        .lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| {
            line.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect();
    let alerts = rules.matches("- alert:").count();
    let runbooks: Vec<&str> = rules
        .lines()
        .filter_map(|line| line.trim().strip_prefix("runbook:"))
        .map(|value| value.trim().trim_matches('"'))
        .collect();
    assert_eq!(runbooks.len(), alerts, "one runbook per alert");
    for runbook in runbooks {
        let anchor = runbook
            .strip_prefix("deploy/README.md#")
            .unwrap_or_else(|| panic!("runbook {runbook} is not a deploy/README.md section"));
        assert!(
            anchors.contains(anchor),
            "deploy/README.md has no section #{anchor}"
        );
    }
}

// --- NATS users and permissions ---------------------------------------------------------------

const ROLES: [&str; 5] = [
    "scheduler",
    "retention-worker",
    "deleter",
    "executor",
    "operator",
];

fn password(user: &str) -> String {
    format!("{user}-test-password")
}

/// Starts nats-server with deploy/nats/sexton.conf and every user's password.
fn start_nats_with_users() -> Nats {
    let variables: Vec<(String, String)> = ROLES
        .iter()
        .map(|role| {
            let variable = format!(
                "SEXTON_NATS_{}_PASSWORD",
                role.to_uppercase().replace('-', "_")
            );
            (variable, password(role))
        })
        .collect();
    let env: Vec<(&str, &str)> = variables
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let config = deploy_file("nats/sexton.conf");
    Nats::start_with_args_and_env(&["-c", config.to_str().unwrap()], &env)
}

/// A connection as `user`, with the errors the server reports to it (permission violations
/// arrive as `-ERR` on the connection, not as a failed publish).
struct Connection {
    client: async_nats::Client,
    server_errors: Arc<Mutex<Vec<String>>>,
}

impl Connection {
    async fn open(nats: &Nats, user: &str) -> Connection {
        let server_errors = Arc::new(Mutex::new(Vec::new()));
        let sink = server_errors.clone();
        let client =
            async_nats::ConnectOptions::with_user_and_password(user.into(), password(user))
                .event_callback(move |event| {
                    let sink = sink.clone();
                    async move {
                        if let async_nats::Event::ServerError(error) = event {
                            let text = match error {
                                async_nats::ServerError::Other(text) => text,
                                other => format!("{other:?}"),
                            };
                            sink.lock().unwrap().push(text);
                        }
                    }
                })
                .connect(nats.url())
                .await
                .unwrap_or_else(|err| panic!("connecting as {user}: {err}"));
        Connection {
            client,
            server_errors,
        }
    }

    fn jetstream(&self) -> async_nats::jetstream::Context {
        async_nats::jetstream::new(self.client.clone())
    }

    /// Whether the server refused something on `subject` within a few seconds.
    async fn refused(&self, subject: &str) -> bool {
        let quoted = format!("\"{subject}\"");
        for _ in 0..50 {
            let refused = self.server_errors.lock().unwrap().iter().any(|error| {
                error.to_lowercase().contains("permissions violation") && error.contains(&quoted)
            });
            if refused {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    fn server_errors(&self) -> Vec<String> {
        self.server_errors.lock().unwrap().clone()
    }
}

/// Publishes as `connection`'s user and asserts the server refuses it.
async fn assert_publish_refused(user: &str, connection: &Connection, subject: &str) {
    connection
        .client
        .publish(subject.to_string(), "{}".into())
        .await
        .unwrap();
    connection.client.flush().await.unwrap();
    assert!(
        connection.refused(subject).await,
        "{user} was allowed to publish to {subject} (server errors: {:?})",
        connection.server_errors()
    );
}

/// Publishes to a stream as `connection`'s user and asserts the stream stored it.
async fn assert_stream_accepts(user: &str, connection: &Connection, subject: &str) {
    let ack = connection
        .jetstream()
        .publish(subject.to_string(), "{}".into())
        .await
        .unwrap_or_else(|err| panic!("{user} publishing to {subject}: {err}"));
    tokio::time::timeout(Duration::from_secs(10), ack)
        .await
        .unwrap_or_else(|_| panic!("{user}: no ack for {subject}"))
        .unwrap_or_else(|err| panic!("{user}: {subject} not stored: {err}"));
    let quoted = format!("\"{subject}\"");
    let errors = connection.server_errors();
    assert!(
        !errors.iter().any(|e| e.contains(&quoted)),
        "{user}: {errors:?}"
    );
}

async fn stored_messages(operator: &Connection, stream: &str) -> u64 {
    let mut stream = operator.jetstream().get_stream(stream).await.unwrap();
    stream.info().await.unwrap().state.messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_retention_worker_publishes_delete_jobs_and_only_the_scheduler_due_backups() {
    let nats = start_nats_with_users();
    let mut connections = std::collections::BTreeMap::new();
    for role in ROLES {
        connections.insert(role, Connection::open(&nats, role).await);
    }
    // The scheduler creates the topology (streams and buckets), as at its start-up.
    topology::ensure(&connections["scheduler"].jetstream(), 1)
        .await
        .expect("the scheduler may create the streams and buckets");
    // No other role may: a stream creation by the deleter or an executor is refused.
    for role in ["retention-worker", "deleter", "executor"] {
        assert_publish_refused(
            role,
            &connections[role],
            "$JS.API.STREAM.CREATE.SEXTON_JOBS",
        )
        .await;
    }

    let delete_job = "sexton.v1.job.delete.c1";
    let due_backup = "sexton.v1.due.c1";
    for role in ["executor", "deleter", "scheduler", "operator"] {
        assert_publish_refused(role, &connections[role], delete_job).await;
    }
    for role in ["executor", "retention-worker", "deleter", "operator"] {
        assert_publish_refused(role, &connections[role], due_backup).await;
    }
    let operator = &connections["operator"];
    assert_eq!(stored_messages(operator, topology::STREAM_JOBS).await, 0);
    assert_eq!(stored_messages(operator, topology::STREAM_DUE).await, 0);

    assert_stream_accepts(
        "retention-worker",
        &connections["retention-worker"],
        delete_job,
    )
    .await;
    assert_stream_accepts("scheduler", &connections["scheduler"], due_backup).await;
    assert_stream_accepts("executor", &connections["executor"], "sexton.v1.report.c1").await;
    assert_eq!(stored_messages(operator, topology::STREAM_JOBS).await, 1);
    assert_eq!(stored_messages(operator, topology::STREAM_DUE).await, 1);
    assert_eq!(stored_messages(operator, topology::STREAM_REPORTS).await, 1);

    // An executor reads due-backups only: not delete jobs, not the catalog, and it cannot
    // listen in on delete jobs as they are published.
    let executor = &connections["executor"];
    assert_publish_refused(
        "executor",
        executor,
        "$JS.API.CONSUMER.CREATE.SEXTON_JOBS.peek",
    )
    .await;
    // Its merge durable cannot be created on delete jobs, nor without the merge filter.
    for subject in [
        "$JS.API.CONSUMER.CREATE.SEXTON_JOBS.reference-executor-merge.sexton.v1.job.delete.*",
        "$JS.API.CONSUMER.CREATE.SEXTON_JOBS.reference-executor-merge",
        "$JS.API.CONSUMER.CREATE.SEXTON_JOBS.sexton-exec-merge.sexton.v1.job.delete.*",
        "$JS.API.CONSUMER.CREATE.SEXTON_JOBS.sexton-exec-merge",
        "$JS.API.CONSUMER.MSG.NEXT.SEXTON_JOBS.deleter",
    ] {
        assert_publish_refused("executor", executor, subject).await;
    }
    assert_publish_refused(
        "executor",
        executor,
        "$JS.API.DIRECT.GET.KV_sexton-catalog.$KV.sexton-catalog.c1.b1",
    )
    .await;
    assert_publish_refused("executor", executor, "$KV.sexton-catalog.c1.b1").await;
    let _subscription = executor
        .client
        .subscribe("sexton.v1.job.delete.>")
        .await
        .unwrap();
    executor.client.flush().await.unwrap();
    assert!(
        executor.refused("sexton.v1.job.delete.>").await,
        "an executor subscribed to delete jobs: {:?}",
        executor.server_errors()
    );
    // Nobody may delete a stream.
    for role in ROLES {
        assert_publish_refused(
            role,
            &connections[role],
            "$JS.API.STREAM.DELETE.SEXTON_JOBS",
        )
        .await;
    }

    // An executor may create consumers on SEXTON_DUE, and a push consumer's deliver subject
    // is not checked against its creator's permissions: the server would deliver due-backups
    // to any subject. That must not make them delete jobs. (They do reach core subscribers:
    // see deploy/README.md#nats-users-and-permissions.)
    let due = executor
        .jetstream()
        .get_stream(topology::STREAM_DUE)
        .await
        .unwrap();
    due.create_consumer(async_nats::jetstream::consumer::push::Config {
        durable_name: Some("redirect".into()),
        deliver_subject: delete_job.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_stream_accepts("scheduler", &connections["scheduler"], due_backup).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(stored_messages(operator, topology::STREAM_JOBS).await, 1);

    // And without a password, or with another user's, nobody connects at all.
    let anonymous = async_nats::ConnectOptions::new().connect(nats.url()).await;
    assert!(anonymous.is_err(), "an anonymous client connected");
    let wrong = async_nats::ConnectOptions::with_user_and_password(
        "retention-worker".into(),
        password("executor"),
    )
    .connect(nats.url())
    .await;
    assert!(
        wrong.is_err(),
        "the executor's password opened the retention-worker's account"
    );
}

/// A service configuration that connects as `user`.
fn as_user(config: &Config, user: &str) -> Config {
    let mut config = config.clone();
    config.nats.user = Some(user.into());
    config.nats.password = Some(password(user));
    config
}

const NONE: Members = Members {
    scheduler: false,
    retention_worker: false,
    deleter: false,
    executor: false,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_runs_with_one_user_per_service() {
    let nats = start_nats_with_users();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let operator = Connection::open(&nats, "operator").await;
    let operator_js = operator.jetstream();

    // The scheduler creates the topology; the others only look it up, so they start after it.
    let scheduler = Fleet::start(
        &as_user(&config, "scheduler"),
        Members {
            scheduler: true,
            ..NONE
        },
    );
    eventually("the scheduler's topology", Duration::from_secs(30), || {
        let js = operator_js.clone();
        async move {
            js.get_key_value(topology::BUCKET_CATALOG).await.ok()?;
            js.get_key_value(topology::BUCKET_SCHEDULES).await.ok()
        }
    })
    .await;
    let others = [
        Fleet::start(
            &as_user(&config, "retention-worker"),
            Members {
                retention_worker: true,
                ..NONE
            },
        ),
        Fleet::start(
            &as_user(&config, "deleter"),
            Members {
                deleter: true,
                ..NONE
            },
        ),
        Fleet::start(
            &as_user(&config, "executor"),
            Members {
                executor: true,
                ..NONE
            },
        ),
    ];

    let created = eventually("the scheduler api", Duration::from_secs(30), || {
        let client = operator.client.clone();
        async move {
            api(
                &client,
                "schedule",
                "create",
                json!({"schema_version": 1, "name": "every-second", "cluster": "c1",
                       "plan": "full", "cron": "@every 1s", "policy": {"keep_last": 2}}),
            )
            .await
            .ok()
        }
    })
    .await;
    assert_eq!(created["schedule"]["name"], "every-second");

    // Backups are taken and reported, retention publishes delete jobs, and the deleter
    // removes them: the catalog settles at the newest two.
    eventually(
        "5 reports and 2 delete jobs",
        Duration::from_secs(60),
        || {
            let js = operator_js.clone();
            async move {
                let mut reports = js.get_stream(topology::STREAM_REPORTS).await.ok()?;
                let mut jobs = js.get_stream(topology::STREAM_JOBS).await.ok()?;
                let reported = reports.info().await.ok()?.state.last_sequence;
                let deletions = jobs.info().await.ok()?.state.last_sequence;
                (reported >= 5 && deletions >= 2).then_some(())
            }
        },
    )
    .await;
    api(
        &operator.client,
        "schedule",
        "pause",
        json!({"schema_version": 1, "name": "every-second"}),
    )
    .await
    .unwrap();
    eventually(
        "the catalog at the newest 2",
        Duration::from_secs(60),
        || {
            let client = operator.client.clone();
            async move {
                let listed = api(
                    &client,
                    "backup",
                    "list",
                    json!({"schema_version": 1, "cluster": "c1"}),
                )
                .await
                .ok()?;
                (listed.as_array()?.len() == 2).then_some(())
            }
        },
    )
    .await;

    assert!(scheduler.all_running(), "the scheduler stopped");
    for fleet in &others {
        assert!(fleet.all_running(), "a service stopped");
    }
    scheduler.stop().await.unwrap();
    for fleet in others {
        fleet.stop().await.unwrap();
    }
    assert!(
        operator.server_errors().is_empty(),
        "{:?}",
        operator.server_errors()
    );
    let log = std::fs::read_to_string(nats.log_path()).unwrap();
    let violations: Vec<&str> = log.lines().filter(|l| l.contains("Violation")).collect();
    assert!(
        violations.is_empty(),
        "the fleet needed subjects deploy/nats/authorization.conf does not grant:\n{}",
        violations.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sexton_exec_runs_as_the_executor_user() {
    let nats = start_nats_with_users();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let operator = Connection::open(&nats, "operator").await;
    let operator_js = operator.jetstream();
    let scheduler = Fleet::start(
        &as_user(&config, "scheduler"),
        Members {
            scheduler: true,
            ..NONE
        },
    );
    eventually("the scheduler's topology", Duration::from_secs(30), || {
        let js = operator_js.clone();
        async move { js.get_key_value(topology::BUCKET_CATALOG).await.ok() }
    })
    .await;
    let work = tempfile::tempdir().unwrap();
    let options = sexton_cli::exec::ExecOptions {
        backup_command: "echo data > \"$SEXTON_OUTPUT_DIR/backup.bin\"".into(),
        merge_command: Some("true".into()),
        verify_command: Some("true".into()),
        cluster: None,
        durable: "sexton-exec".into(),
        merge_durable: "sexton-exec-merge".into(),
        verify_durable: "sexton-exec-verify".into(),
        work_dir: work.path().to_path_buf(),
        timeout: Duration::from_secs(30),
        concurrency: 1,
        limits: sexton_cli::exec::output::Limits {
            max_files: 10,
            max_bytes: 1 << 20,
        },
        upload: Default::default(),
        shutdown_grace: Duration::from_secs(5),
        ack_wait: Duration::from_secs(30),
        catch_up: Duration::from_secs(3600),
    };
    let (trigger, shutdown) = sexton_shared::Shutdown::new();
    let exec = tokio::spawn(sexton_cli::exec::run(
        as_user(&config, "executor"),
        options,
        shutdown,
    ));
    create_schedule(
        &operator.client,
        json!({"name": "hourly", "cluster": "c1", "plan": "full", "cron": "@every 1h"}),
    )
    .await;
    let id = trigger_backup(&operator.client, "hourly").await;
    eventually("the backup completed", Duration::from_secs(60), || {
        let client = operator.client.clone();
        let id = id.clone();
        async move {
            let described = api(
                &client,
                "backup",
                "describe",
                json!({"schema_version": 1, "cluster": "c1", "id": id}),
            )
            .await
            .ok()?;
            (described["backup"]["status"] == "completed").then_some(())
        }
    })
    .await;
    trigger.trigger();
    exec.await.unwrap().unwrap();
    scheduler.stop().await.unwrap();
    let log = std::fs::read_to_string(nats.log_path()).unwrap();
    let violations: Vec<&str> = log.lines().filter(|l| l.contains("Violation")).collect();
    assert!(
        violations.is_empty(),
        "sexton exec needed subjects deploy/nats/authorization.conf does not grant:\n{}",
        violations.join("\n")
    );
}
