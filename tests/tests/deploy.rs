//! deploy/ checked against the code and a real server:
//! - every metric the Grafana dashboard or the alert rules name is one the services export, and
//!   every alert's runbook link lands on a section of deploy/README.md;
//! - deploy/nats/sexton.conf, on a real nats-server: an executor or a deleter cannot publish a
//!   delete job, only the retention-worker can; only the scheduler publishes due-backups;
//! - the whole fleet runs with one NATS user per service under that configuration, without a
//!   single permission violation in the server's log, and so does `sexton exec` (with merges)
//!   as the executor user;
//! - the audit stream is append-only for every Sexton user.
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

/// Every metric name the four services export.
fn exported_metric_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    names.extend(sexton_scheduler::metrics::Metrics::new().names);
    names.extend(sexton_retention_worker::metrics::Metrics::new().names);
    names.extend(sexton_deleter::metrics::Metrics::new().names);
    names.extend(sexton_copier::metrics::Metrics::new().names);
    // What every service exports besides its own (shared/src/build.rs).
    let registry = prometheus::Registry::new();
    sexton_shared::build::register(&registry, "any").unwrap();
    names.extend(
        registry
            .gather()
            .iter()
            .map(|family| family.name().to_string()),
    );
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

    // Every runbook_url annotation points at a heading of deploy/README.md (GitHub's anchors:
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
        .filter_map(|line| line.trim().strip_prefix("runbook_url:"))
        .map(|value| value.trim().trim_matches('"'))
        .collect();
    assert_eq!(runbooks.len(), alerts, "one runbook per alert");
    for runbook in runbooks {
        let anchor = runbook
            .strip_prefix("https://github.com/sexton/sexton/blob/main/deploy/README.md#")
            .unwrap_or_else(|| panic!("runbook {runbook} is not a deploy/README.md section"));
        assert!(
            anchors.contains(anchor),
            "deploy/README.md has no section #{anchor}"
        );
    }
}

// --- NATS users and permissions ---------------------------------------------------------------

const ROLES: [&str; 6] = [
    "scheduler",
    "retention-worker",
    "deleter",
    "executor",
    "operator",
    "copier",
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
    for role in ["retention-worker", "deleter", "executor", "copier"] {
        assert_publish_refused(
            role,
            &connections[role],
            "$JS.API.STREAM.CREATE.SEXTON_JOBS",
        )
        .await;
    }

    let delete_job = "sexton.v1.job.delete.c1";
    let due_backup = "sexton.v1.due.c1";
    for role in ["executor", "deleter", "scheduler", "operator", "copier"] {
        assert_publish_refused(role, &connections[role], delete_job).await;
    }
    for role in [
        "executor",
        "retention-worker",
        "deleter",
        "operator",
        "copier",
    ] {
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

    // Copy jobs (issue 28): the scheduler alone publishes them; the copier, which takes them,
    // may not publish one, not even to itself.
    let copy_job = "sexton.v1.copy.c1";
    for role in [
        "executor",
        "retention-worker",
        "deleter",
        "operator",
        "copier",
    ] {
        assert_publish_refused(role, &connections[role], copy_job).await;
    }
    assert_stream_accepts("scheduler", &connections["scheduler"], copy_job).await;
    assert_eq!(stored_messages(operator, topology::STREAM_COPIES).await, 1);
    // Copy delete jobs: the retention-worker alone publishes them; the copier, which writes
    // copies, may neither publish one nor take them (the deleter's durable deleter-copies).
    let copy_delete_job = "sexton.v1.job.copy-delete.c1";
    for role in ["executor", "deleter", "scheduler", "operator", "copier"] {
        assert_publish_refused(role, &connections[role], copy_delete_job).await;
    }
    assert_stream_accepts(
        "retention-worker",
        &connections["retention-worker"],
        copy_delete_job,
    )
    .await;
    assert_eq!(stored_messages(operator, topology::STREAM_JOBS).await, 2);
    // The copier's leases are the copier's: no other role can take a cluster from it (or
    // hold one, stopping its copies).
    for role in [
        "executor",
        "retention-worker",
        "deleter",
        "scheduler",
        "operator",
    ] {
        assert_publish_refused(role, &connections[role], "$KV.sexton-copy-leases.c1").await;
    }
    // The scheduler creates the bucket; the copier, with its own user, opens it and takes,
    // renews and frees a lease there as copier/src/lease.rs does.
    topology::copy_leases_bucket(&connections["scheduler"].jetstream(), 1)
        .await
        .expect("the scheduler creates the copy leases' bucket");
    let leases = topology::copy_leases_bucket(&connections["copier"].jetstream(), 1)
        .await
        .expect("the copier opens the copy leases' bucket");
    assert!(leases.entry("c1").await.unwrap().is_none());
    let taken = leases.create("c1", "{}".into()).await.unwrap();
    let renewed = leases.update("c1", "{}".into(), taken).await.unwrap();
    leases
        .delete_expect_revision("c1", Some(renewed))
        .await
        .unwrap();
    assert!(
        !connections["copier"]
            .server_errors()
            .iter()
            .any(|e| e.contains("copy-leases")),
        "{:?}",
        connections["copier"].server_errors()
    );
    // How each cluster's retention runs are going (issue 54) is the retention-worker's to
    // say: the scheduler creates the bucket and reads it, no other role writes it.
    for role in ["executor", "deleter", "scheduler", "operator", "copier"] {
        assert_publish_refused(role, &connections[role], "$KV.sexton-retention-status.c1").await;
    }
    let statuses = topology::retention_status_bucket(&connections["scheduler"].jetstream(), 1)
        .await
        .expect("the scheduler creates the retention status bucket");
    topology::retention_status_bucket(&connections["retention-worker"].jetstream(), 1)
        .await
        .expect("the retention-worker opens the retention status bucket")
        .put("c1", "{}".into())
        .await
        .expect("the retention-worker writes a status");
    assert_eq!(
        sexton_shared::leader_read::value(&statuses, "c1")
            .await
            .expect("the scheduler reads a status")
            .as_deref(),
        Some(&b"{}"[..])
    );
    // The copier's durable is its own: no other name, no delete jobs.
    let copier = &connections["copier"];
    for subject in [
        "$JS.API.CONSUMER.CREATE.SEXTON_COPIES.peek",
        "$JS.API.CONSUMER.CREATE.SEXTON_JOBS.deleter",
        "$JS.API.CONSUMER.MSG.NEXT.SEXTON_JOBS.deleter",
        "$JS.API.CONSUMER.CREATE.SEXTON_JOBS.deleter-copies",
        "$JS.API.CONSUMER.MSG.NEXT.SEXTON_JOBS.deleter-copies",
        "$JS.API.CONSUMER.DELETE.SEXTON_COPIES.copier",
        "$KV.sexton-schedules.s1",
    ] {
        assert_publish_refused("copier", copier, subject).await;
    }

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
    assert_eq!(stored_messages(operator, topology::STREAM_JOBS).await, 2);

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

/// The audit trail is append-only under the shipped permissions: no service and not the operator
/// may purge it, delete a message or the stream, or change it; each service writes only its own
/// subjects; and the stream itself refuses deletes and purges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_sexton_user_can_purge_or_delete_from_the_audit_stream() {
    let nats = start_nats_with_users();
    let mut connections = std::collections::BTreeMap::new();
    for role in ROLES {
        connections.insert(role, Connection::open(&nats, role).await);
    }
    topology::ensure(&connections["scheduler"].jetstream(), 1)
        .await
        .expect("the scheduler creates the topology, the audit stream with it");
    for (role, service) in [
        ("scheduler", "scheduler"),
        ("retention-worker", "retention-worker"),
        ("deleter", "deleter"),
        ("copier", "copier"),
    ] {
        assert_stream_accepts(
            role,
            &connections[role],
            &format!("sexton.v1.audit.{service}.c1"),
        )
        .await;
    }
    let operator = &connections["operator"];
    assert_eq!(stored_messages(operator, topology::STREAM_AUDIT).await, 4);

    for role in ROLES {
        let connection = &connections[role];
        for subject in [
            "$JS.API.STREAM.PURGE.SEXTON_AUDIT",
            "$JS.API.STREAM.MSG.DELETE.SEXTON_AUDIT",
            "$JS.API.STREAM.DELETE.SEXTON_AUDIT",
            "$JS.API.STREAM.UPDATE.SEXTON_AUDIT",
        ] {
            assert_publish_refused(role, connection, subject).await;
        }
    }
    // Through the JetStream API as a client would: the deleter's purge and message delete fail
    // (the server drops the requests as permission violations), and nothing is removed.
    let deleter = connections["deleter"].jetstream();
    let stream = deleter.get_stream(topology::STREAM_AUDIT).await.unwrap();
    let purge = tokio::time::timeout(Duration::from_secs(10), stream.purge()).await;
    assert!(!matches!(purge, Ok(Ok(_))), "the deleter purged the audit");
    let delete = tokio::time::timeout(Duration::from_secs(10), stream.delete_message(1)).await;
    assert!(
        !matches!(delete, Ok(Ok(_))),
        "the deleter deleted an audit entry"
    );
    // A service cannot write another's entries, nor the operator any.
    for (role, subject) in [
        ("deleter", "sexton.v1.audit.scheduler.c1"),
        ("retention-worker", "sexton.v1.audit.deleter.c1"),
        ("scheduler", "sexton.v1.audit.retention-worker.c1"),
        ("executor", "sexton.v1.audit.deleter.c1"),
        ("operator", "sexton.v1.audit.scheduler.c1"),
        ("copier", "sexton.v1.audit.deleter.c1"),
        ("deleter", "sexton.v1.audit.copier.c1"),
    ] {
        assert_publish_refused(role, &connections[role], subject).await;
    }
    assert_eq!(stored_messages(operator, topology::STREAM_AUDIT).await, 4);
    // The stream refuses deletes and purges by its own configuration too.
    let mut stream = operator
        .jetstream()
        .get_stream(topology::STREAM_AUDIT)
        .await
        .unwrap();
    let info = stream.info().await.unwrap();
    assert!(
        info.config.deny_delete && info.config.deny_purge,
        "{:?}",
        info.config
    );
    // And the operator reads it, as `sexton audit` does.
    let entries = read_stream(
        &operator.jetstream(),
        topology::STREAM_AUDIT,
        "sexton.v1.audit.>",
    )
    .await;
    assert_eq!(entries.len(), 4);
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
    // All of it: a service started while the scheduler was between two buckets tried to
    // create the missing one, and its user may not (a violation in the server's log).
    tokio::time::timeout(
        Duration::from_secs(60),
        topology::await_created(&operator_js),
    )
    .await
    .expect("the scheduler's topology within a minute")
    .unwrap();
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

    // `sexton version` as the operator hears every service under these permissions.
    let version = sexton_as(&nats, "operator", &["version", "-o", "json"]).await;
    assert_eq!(version.status.code(), Some(0), "{version:?}");
    let version: Value = serde_json::from_slice(&version.stdout).unwrap();
    let services: BTreeSet<&str> = version["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["service"].as_str().unwrap())
        .collect();
    assert_eq!(
        services,
        BTreeSet::from([
            "deleter",
            "reference-executor",
            "retention-worker",
            "scheduler"
        ]),
        "{version}"
    );

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
    let work = tempfile::tempdir().unwrap();
    let options = sexton_executor::exec::ExecOptions {
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
        limits: sexton_executor::exec::output::Limits {
            max_files: 10,
            max_bytes: 1 << 20,
        },
        upload: Default::default(),
        shutdown_grace: Duration::from_secs(5),
        ack_wait: Duration::from_secs(30),
        catch_up: Duration::from_secs(3600),
    };
    let (trigger, shutdown) = sexton_shared::Shutdown::new();
    let exec = tokio::spawn(sexton_executor::exec::run(
        as_user(&config, "executor"),
        options,
        shutdown,
    ));
    // The executor starts first, so it meets no topology and then one half created (streams,
    // then one bucket after another): it waits for all of it and asks for nothing its user is
    // denied. Asking whether a bucket may be created reads the account's limits
    // ($JS.API.INFO), which failed this test on a busy machine (issue 26).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let scheduler = Fleet::start(
        &as_user(&config, "scheduler"),
        Members {
            scheduler: true,
            ..NONE
        },
    );
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

/// The `sexton` binary as NATS user `user` of deploy/nats/authorization.conf.
async fn sexton_as(nats: &Nats, user: &str, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(service_binary("sexton"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SEXTON_NATS_URL", nats.url())
        .env("SEXTON_NATS_USER", user)
        .env("SEXTON_NATS_PASSWORD", password(user));
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// A user the shipped configuration does not allow the API is told so, at once and with its
/// own exit code (77), instead of waiting and blaming the fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_denial_is_reported_as_a_denial() {
    let nats = start_nats_with_users();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let scheduler = Fleet::start(
        &as_user(&config, "scheduler"),
        Members {
            scheduler: true,
            ..NONE
        },
    );
    eventually(
        "the api for the operator",
        Duration::from_secs(30),
        || async {
            let run = sexton_as(&nats, "operator", &["schedule", "list"]).await;
            (run.status.code() == Some(0)).then_some(())
        },
    )
    .await;
    for user in ["executor", "deleter"] {
        let started = std::time::Instant::now();
        let run = sexton_as(&nats, user, &["schedule", "list"]).await;
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(77), "{user}: {stderr}");
        assert!(
            stderr.contains("permission denied")
                && stderr.contains("sexton.v1.api.schedule.list")
                && !stderr.contains("is the fleet running"),
            "{user}: {stderr}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{user}: the denial took {:?}",
            started.elapsed()
        );
    }
    scheduler.stop().await.unwrap();
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, made with the openssl
/// command line in `dir`: (ca, server cert, server key, client cert, client key).
fn make_certificates(dir: &std::path::Path) -> [PathBuf; 5] {
    let run = |args: &[&str]| {
        let output = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl is required for the TLS test");
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=sexton test ca",
    ]);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for (name, subject) in [("server", "/CN=127.0.0.1"), ("client", "/CN=sexton")] {
        run(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            subject,
        ]);
        run(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
        ]);
    }
    [
        "ca.pem",
        "server.pem",
        "server.key",
        "client.pem",
        "client.key",
    ]
    .map(|f| dir.join(f))
}

/// deploy/nats/sexton-tls.conf on a real nats-server with certificates made here: the
/// scheduler and the CLI connect with TLS and a client certificate and work; a client without
/// a certificate, or without TLS at all, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_configuration_serves_the_fleet_and_refuses_plain_clients() {
    let certs = tempfile::tempdir().unwrap();
    let [ca, server_cert, server_key, client_cert, client_key] = make_certificates(certs.path());
    let text = |path: &PathBuf| path.to_str().unwrap().to_string();
    let mut env: Vec<(String, String)> = ROLES
        .iter()
        .map(|role| {
            (
                format!(
                    "SEXTON_NATS_{}_PASSWORD",
                    role.to_uppercase().replace('-', "_")
                ),
                password(role),
            )
        })
        .collect();
    env.push(("SEXTON_NATS_TLS_CERT_FILE".into(), text(&server_cert)));
    env.push(("SEXTON_NATS_TLS_KEY_FILE".into(), text(&server_key)));
    env.push(("SEXTON_NATS_TLS_CA_FILE".into(), text(&ca)));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let conf = deploy_file("nats/sexton-tls.conf");
    let nats = Nats::start_with_args_and_env(&["-c", conf.to_str().unwrap()], &env);

    let s3 = S3::start();
    let mut config = as_user(&config(&nats, &s3), "scheduler");
    config.nats.tls_ca_file = Some(text(&ca));
    config.nats.tls_cert_file = Some(text(&client_cert));
    config.nats.tls_key_file = Some(text(&client_key));
    config.nats.tls_required = true;
    let scheduler = Fleet::start(
        &config,
        Members {
            scheduler: true,
            ..NONE
        },
    );
    let sexton = |tls: &[(&str, String)], args: &[&str]| {
        let mut command = std::process::Command::new(service_binary("sexton"));
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SEXTON_NATS_URL", nats.url())
            .env("SEXTON_NATS_USER", "operator")
            .env("SEXTON_NATS_PASSWORD", password("operator"));
        for (key, value) in tls {
            command.env(key, value);
        }
        command
    };
    let with_tls = [
        ("SEXTON_NATS_TLS_CA_FILE", text(&ca)),
        ("SEXTON_NATS_TLS_CERT_FILE", text(&client_cert)),
        ("SEXTON_NATS_TLS_KEY_FILE", text(&client_key)),
        ("SEXTON_NATS_TLS_REQUIRED", "true".to_string()),
    ];
    let mut listing = sexton(&with_tls, &["schedule", "list", "-o", "json"]);
    eventually("the api over tls", Duration::from_secs(30), || {
        let output = listing.output().unwrap();
        let ok = output.status.success();
        async move { ok.then_some(()) }
    })
    .await;
    let created = sexton(
        &with_tls,
        &[
            "schedule",
            "create",
            "tls",
            "--cluster",
            "c1",
            "--plan",
            "full",
            "--cron",
            "@daily",
            "--keep-last",
            "2",
            "-o",
            "name",
        ],
    )
    .output()
    .unwrap();
    assert!(created.status.success(), "{created:?}");
    assert_eq!(String::from_utf8_lossy(&created.stdout), "schedule/tls\n");

    // Without a client certificate, and without TLS: refused, exit 1.
    for (what, tls) in [
        ("no client certificate", &with_tls[..1]),
        ("no tls", &[][..]),
    ] {
        let output = sexton(tls, &["schedule", "list"]).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{what}: {output:?}");
    }
    assert!(scheduler.all_running());
    scheduler.stop().await.unwrap();
}

/// `n` consecutive free loopback ports below the ephemeral range, for a script that takes a
/// base port and counts up from it.
fn free_run(n: u16) -> u16 {
    let seed = std::process::id() as u16;
    (0..2000u16)
        .map(|k| 20_000 + (seed.wrapping_mul(7).wrapping_add(k.wrapping_mul(13))) % 9_000)
        .find(|base| {
            (*base..*base + n).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        })
        .expect("a run of free ports")
}

/// Issue 50: `deploy/local/run` printed `the fleet is up` when a service had died at start (a
/// retention-worker refusing a lock setting the bucket cannot take): nothing deleted, silently.
/// Now it names the service that died, says the fleet is not up, and stops with exit code 1.
#[test]
fn the_local_fleet_names_a_service_that_died_at_start_and_is_not_called_up() {
    let state = tempfile::tempdir().unwrap();
    // One run of free ports, shared out: NATS, S3 (8), dr (8), the services' metrics (8).
    let base = free_run(30);
    let (nats, s3, dr, metrics) = (base, base + 2, base + 11, base + 20);
    assert!(std::net::TcpListener::bind(("127.0.0.1", nats + 4000)).is_ok());
    let mut command = std::process::Command::new(repo_root().join("deploy/local/run"));
    command
        .args(["--for", "5s"])
        .current_dir(repo_root())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SEXTON_LOCAL_STATE", state.path())
        .env("SEXTON_LOCAL_NATS_PORT", nats.to_string())
        .env("SEXTON_LOCAL_S3_PORT", s3.to_string())
        .env("SEXTON_LOCAL_S3_DR_PORT", dr.to_string())
        .env("SEXTON_LOCAL_METRICS_PORT", metrics.to_string())
        // A lock setting on the local bucket, which has no Object Lock: the retention-worker
        // refuses to start (docs/immutability.md).
        .env("SEXTON_S3_LOCK", "mode=governance,min=1d")
        .stdin(std::process::Stdio::null());
    for key in ["HOME", "CARGO_HOME", "RUSTUP_HOME", "SEXTON_VENV", "TMPDIR"] {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    let out = command.output().expect("running deploy/local/run");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let said = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        stderr.contains("==> retention exited at start") && stderr.contains("the fleet is NOT up"),
        "{said}"
    );
    assert!(!stdout.contains("the fleet is up"), "{said}");
    // The worker's own words are there too, prefixed with its name.
    assert!(
        stdout.contains("[retention]") && stdout.contains("Object Lock"),
        "{said}"
    );
    // Everything it started is stopped: the NATS port is free again.
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", nats)).is_ok(),
        "nats-server is still running"
    );
}
