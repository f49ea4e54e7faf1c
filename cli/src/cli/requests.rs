//! What the online commands ask the services: the API call of each command (its subject, its
//! body and the columns its answer shows), the dry run a destructive command asks first, and the
//! request itself over NATS with who asks (a permission denial ends the wait at once).

use std::{collections::BTreeMap, time::Duration};

use anyhow::Context as _;
use chrono::Utc;
use serde_json::{json, Value};
use sexton_shared::{
    api::{ErrorCode, Reply},
    config::Config,
    topology,
};

#[allow(unused_imports)]
use super::*;

/// For a command that deletes (unless it is a dry run itself): whether `--yes` was given, and
/// the dry run of the same request that shows what it would do.
pub(super) fn destructive(command: &Command, body: &Value) -> Option<(bool, (String, Value))> {
    let dry = |subject: String| {
        let mut preview = body.clone();
        preview["dry_run"] = json!(true);
        (subject, preview)
    };
    match command {
        Command::Schedule(ScheduleCommand::Delete {
            dry_run: false,
            yes,
            ..
        }) => Some((*yes, dry(topology::api_subject("schedule", "delete")))),
        Command::Cluster(ClusterCommand::Forget {
            dry_run: false,
            yes,
            ..
        }) => Some((*yes, dry(topology::api_subject("cluster", "forget")))),
        Command::Backup(BackupCommand::Delete {
            dry_run: false,
            yes,
            ..
        }) => Some((*yes, dry(topology::api_subject("backup", "delete")))),
        Command::Backup(BackupCommand::Orphans {
            delete: true,
            dry_run: false,
            yes,
            ..
        }) => Some((*yes, dry(topology::api_subject("orphans", "delete")))),
        Command::Retention(RetentionCommand::Approve {
            cluster,
            plan,
            yes,
            dry_run: false,
        }) => Some((
            *yes,
            (
                topology::api_subject("retention", "preview"),
                json!({"schema_version": 1, "cluster": cluster, "plan": plan}),
            ),
        )),
        _ => None,
    }
}

/// The columns of a schedule's table.
const SCHEDULE_COLUMNS: &[&str] = &[
    "schedule.name",
    "schedule.cluster",
    "schedule.plan",
    "schedule.cron",
    "schedule.status.phase",
    "schedule.status.last_backup",
    "schedule.status.next_run_time",
];

/// The body of a request that names one schedule.
fn by_name(name: &str) -> Value {
    json!({"schema_version": 1, "name": name})
}

/// An API call: its subject, its body, and the columns of its answer's table.
pub(super) type Call = (String, Value, &'static [&'static str]);

/// The API call of an online command, and the columns its table shows.
pub(super) fn request_for(command: &Command) -> Result<Call, Failure> {
    Ok(match command {
        Command::Schedule(command) => return schedule_request(command),
        Command::Backup(command) => return backup_request(command),
        Command::Plugin(PluginCommand::Register {
            name,
            subject,
            selector,
            timeout,
        }) => {
            let mut body = json!({"schema_version": 1, "name": name, "subject": subject,
                                  "selector": selector.iter().cloned().collect::<BTreeMap<_, _>>()});
            if let Some(timeout) = timeout {
                body["timeout_seconds"] = json!(timeout);
            }
            (
                topology::api_subject("plugin", "register"),
                body,
                &["name", "subject", "selector", "timeout_seconds"],
            )
        }
        Command::Plugin(PluginCommand::List { .. }) => (
            topology::api_subject("plugin", "list"),
            json!({"schema_version": 1}),
            &["name", "subject", "selector", "timeout_seconds", "error"],
        ),
        Command::Plugin(PluginCommand::Unregister { name }) => (
            topology::api_subject("plugin", "unregister"),
            json!({"schema_version": 1, "name": name}),
            &["unregistered"],
        ),
        Command::Retention(RetentionCommand::Preview { cluster, plan }) => {
            let mut body = json!({"schema_version": 1, "cluster": cluster});
            if let Some(plan) = plan {
                body["plan"] = json!(plan);
            }
            (topology::api_subject("retention", "preview"), body, &[])
        }
        Command::Retention(RetentionCommand::Approve {
            cluster,
            plan,
            dry_run,
            ..
        }) => (
            // A dry run shows the held run as the preview does, and approves nothing.
            topology::api_subject("retention", if *dry_run { "preview" } else { "approve" }),
            json!({"schema_version": 1, "cluster": cluster, "plan": plan}),
            if *dry_run {
                &[]
            } else {
                &["cluster", "plan", "approved_at", "deleting"]
            },
        ),
        Command::Catalog(CatalogCommand::Scrub { cluster, dry_run }) => (
            topology::api_subject("catalog", "scrub"),
            json!({"schema_version": 1, "cluster": cluster, "dry_run": dry_run}),
            &[
                "cluster",
                "dry_run",
                "checked",
                "findings",
                "missing_after",
                "unowned_objects",
            ],
        ),
        Command::Catalog(CatalogCommand::Import { cluster, dry_run }) => (
            topology::api_subject("catalog", "import"),
            json!({"schema_version": 1, "cluster": cluster, "dry_run": dry_run}),
            &[
                "cluster",
                "dry_run",
                "directories",
                "known",
                "imported",
                "skipped",
            ],
        ),
        Command::Binlog(BinlogCommand::Status { cluster }) => (
            topology::api_subject("binlog", "status"),
            json!({"schema_version": 1, "cluster": cluster}),
            &[
                "cluster",
                "index.state",
                "index.etag",
                "horizon",
                "horizon_backup",
                "segments.total",
                "segments.expired",
                "segments.unknown_end",
                "collection",
            ],
        ),
        Command::Cluster(ClusterCommand::Forget {
            cluster,
            remote,
            dry_run,
            yes: _,
        }) => {
            // A quick, local refusal of a name the API would refuse too.
            sexton_shared::names::ClusterName::new(cluster.as_str())
                .map_err(|err| Failure::input(format!("--cluster {cluster:?}: {err}")))?;
            (
                topology::api_subject("cluster", "forget"),
                json!({"schema_version": 1, "cluster": cluster, "remote": remote,
                       "dry_run": dry_run}),
                &["cluster", "forgotten", "records", "summary"],
            )
        }
        _ => unreachable!("offline commands are handled before"),
    })
}

/// The API call of a `schedule` command.
fn schedule_request(command: &ScheduleCommand) -> Result<Call, Failure> {
    Ok(match command {
        ScheduleCommand::Create(args) => return schedule_create(args),
        ScheduleCommand::Get { name } => (
            topology::api_subject("schedule", "get"),
            by_name(name),
            SCHEDULE_COLUMNS,
        ),
        ScheduleCommand::Describe { name, .. } => (
            topology::api_subject("schedule", "describe"),
            by_name(name),
            &[
                "schedule.name",
                "schedule.cron",
                "explain.action",
                "explain.next_run_time",
                "schedule.status.last_backup",
                "schedule.status.last_skipped",
                "schedule.status.last_skip_reason",
                "explain.error",
            ],
        ),
        ScheduleCommand::List { cluster, .. } => {
            let mut body = json!({"schema_version": 1});
            if let Some(cluster) = cluster {
                body["cluster"] = json!(cluster);
            }
            (
                topology::api_subject("schedule", "list"),
                body,
                SCHEDULE_COLUMNS,
            )
        }
        ScheduleCommand::Delete { name, dry_run, .. } => {
            let mut body = by_name(name);
            body["dry_run"] = json!(dry_run);
            (
                topology::api_subject("schedule", "delete"),
                body,
                &["schedule", "deleted", "records", "summary"],
            )
        }
        ScheduleCommand::Pause { name } => (
            topology::api_subject("schedule", "pause"),
            by_name(name),
            SCHEDULE_COLUMNS,
        ),
        ScheduleCommand::Unpause {
            name,
            skip_immediately,
        } => {
            let mut body = by_name(name);
            if let Some(skip) = skip_immediately {
                body["skip_immediately"] = json!(skip);
            }
            (
                topology::api_subject("schedule", "unpause"),
                body,
                SCHEDULE_COLUMNS,
            )
        }
        ScheduleCommand::Update(args) => return schedule_update(args),
        ScheduleCommand::Backfill {
            name,
            from,
            to,
            overlap,
        } => {
            let mut body = by_name(name);
            body["from"] = json!(parse_time("from", from)?);
            body["to"] = json!(parse_time("to", to)?);
            if let Some(overlap) = overlap {
                body["overlap"] = json!(overlap);
            }
            (
                topology::api_subject("schedule", "backfill"),
                body,
                &[
                    "schedule.name",
                    "backfill.ticks",
                    "backfill.first",
                    "backfill.last",
                    "backfill.overlap",
                ],
            )
        }
        ScheduleCommand::Next { .. } | ScheduleCommand::Explain { .. } => {
            unreachable!("offline commands are handled before")
        }
    })
}

/// `schedule create`: the new schedule as the flags give it.
fn schedule_create(args: &CreateArgs) -> Result<Call, Failure> {
    let policy = policy_json(args.policy.as_deref(), args.keep_last, true)?.expect("required");
    let labels: BTreeMap<_, _> = args.labels.iter().cloned().collect();
    let mut body = json!({
        "schema_version": 1,
        "name": args.name,
        "cluster": args.cluster,
        "plan": args.plan,
        "cron": args.cron,
        "paused": args.paused,
        "policy": policy,
        "labels": labels,
        "remote_cleanup": args.remote_cleanup,
    });
    if let Some(skip) = args.skip_immediately {
        body["skip_immediately"] = json!(skip);
    }
    if let Some(overlap) = &args.overlap_policy {
        body["overlap_policy"] = json!(overlap);
    }
    if let Some(seconds) = args.starting_deadline_seconds {
        body["starting_deadline_seconds"] = json!(seconds);
    }
    if let Some(deadline) = args.starting_deadline {
        body["starting_deadline"] = json!(deadline);
    }
    if let Some(jitter) = args.timing.jitter {
        body["jitter"] = json!(jitter);
    }
    if !args.timing.exclude.is_empty() {
        body["exclude"] = json!(args.timing.exclude);
    }
    if let Some(on_blackout) = &args.timing.on_blackout {
        body["on_blackout"] = json!(on_blackout);
    }
    if let Some(n) = args.pause_after_failures {
        body["pause_after_failures"] = json!(n);
    }
    if !args.annotations.is_empty() {
        body["annotations"] = json!(args.annotations.iter().cloned().collect::<BTreeMap<_, _>>());
    }
    if let Some(n) = args.full_every {
        body["full_every"] = json!(n);
    }
    if !args.volumes.is_empty() {
        body["volumes"] = json!(args.volumes);
    }
    if let Some(owner) = &args.backup_owner {
        body["backup_owner"] = json!(owner);
    }
    if let Some(verify) = verify_json(&args.verify_cron, &args.verify_pick, &args.verify_timeout)? {
        body["verify"] = verify;
    }
    if let Some(breaker) = &args.breaker {
        body["breaker"] = breaker.clone();
    }
    body["confirm"] = json!(args.yes);
    body["dry_run"] = json!(args.dry_run);
    Ok((
        topology::api_subject("schedule", "create"),
        body,
        SCHEDULE_COLUMNS,
    ))
}

/// `schedule update`: only the fields the flags change.
fn schedule_update(args: &UpdateArgs) -> Result<Call, Failure> {
    let mut body = by_name(&args.name);
    if let Some(cron) = &args.cron {
        body["cron"] = json!(cron);
    }
    if args.replace_policy {
        let policy = policy_json(args.policy.as_deref(), args.keep_last, false)?
            .ok_or_else(|| Failure::input("--replace-policy needs --policy or --keep-last"))?;
        body["policy"] = policy;
    } else if let Some(patch) = policy_patch(args.policy.as_deref(), args.keep_last)? {
        body["policy_patch"] = patch;
    }
    if let Some(breaker) = &args.breaker {
        body["breaker"] = breaker.clone();
    }
    if args.breaker_defaults {
        body["breaker"] = Value::Null;
    }
    body["confirm"] = json!(args.yes);
    body["dry_run"] = json!(args.dry_run);
    if !args.labels.is_empty() {
        body["labels"] = json!(args.labels.iter().cloned().collect::<BTreeMap<_, _>>());
    }
    if let Some(overlap) = &args.overlap_policy {
        body["overlap_policy"] = json!(overlap);
    }
    if let Some(seconds) = args.starting_deadline_seconds {
        body["starting_deadline_seconds"] = json!(seconds);
    }
    if let Some(deadline) = args.starting_deadline {
        body["starting_deadline"] = json!(deadline);
    }
    if args.no_starting_deadline {
        body["starting_deadline"] = Value::Null;
    }
    if let Some(jitter) = args.timing.jitter {
        body["jitter"] = json!(jitter);
    }
    if args.no_jitter {
        body["jitter"] = Value::Null;
    }
    if !args.timing.exclude.is_empty() {
        body["exclude"] = json!(args.timing.exclude);
    }
    if args.no_exclude {
        body["exclude"] = json!([]);
    }
    if let Some(on_blackout) = &args.timing.on_blackout {
        body["on_blackout"] = json!(on_blackout);
    }
    if let Some(n) = args.pause_after_failures {
        body["pause_after_failures"] = json!(n);
    }
    if args.no_pause_after_failures {
        body["pause_after_failures"] = Value::Null;
    }
    if !args.annotations.is_empty() {
        body["annotations"] = json!(args.annotations.iter().cloned().collect::<BTreeMap<_, _>>());
    }
    if let Some(n) = args.full_every {
        body["full_every"] = json!(n);
    }
    if args.no_full_every {
        body["full_every"] = Value::Null;
    }
    if !args.volumes.is_empty() {
        body["volumes"] = json!(args.volumes);
    }
    if let Some(owner) = &args.backup_owner {
        body["backup_owner"] = json!(owner);
    }
    if let Some(verify) = verify_json(&args.verify_cron, &args.verify_pick, &args.verify_timeout)? {
        body["verify"] = verify;
    }
    if args.no_verify {
        body["verify"] = Value::Null;
    }
    Ok((
        topology::api_subject("schedule", "update"),
        body,
        SCHEDULE_COLUMNS,
    ))
}

/// The API call of a `backup` command.
fn backup_request(command: &BackupCommand) -> Result<Call, Failure> {
    Ok(match command {
        BackupCommand::Create { from_schedule } => (
            topology::api_subject("backup", "create"),
            json!({"schema_version": 1, "name": from_schedule}),
            &["backup_id", "schedule", "tick"],
        ),
        BackupCommand::List { cluster, plan, .. } => {
            let mut body = json!({"schema_version": 1});
            if let Some(cluster) = cluster {
                body["cluster"] = json!(cluster);
            }
            if let Some(plan) = plan {
                body["plan"] = json!(plan);
            }
            (
                topology::api_subject("backup", "list"),
                body,
                &[
                    "cluster",
                    "plan",
                    "id",
                    "kind",
                    "status",
                    "completed_at",
                    "verified",
                ],
            )
        }
        BackupCommand::Verify {
            id,
            cluster,
            timeout,
            wait: _,
        } => {
            let mut body = json!({"schema_version": 1, "cluster": cluster, "id": id});
            if let Some(timeout) = timeout {
                body["timeout"] = json!(timeout);
            }
            (
                topology::api_subject("backup", "verify"),
                body,
                &["request_id", "backup_id", "deadline", "recorded"],
            )
        }
        BackupCommand::Describe { id, cluster } => (
            topology::api_subject("backup", "describe"),
            json!({"schema_version": 1, "cluster": cluster, "id": id}),
            &[],
        ),
        BackupCommand::Hold {
            id,
            cluster,
            reason,
        } => (
            topology::api_subject("backup", "hold"),
            json!({"schema_version": 1, "cluster": cluster, "id": id, "reason": reason}),
            &["cluster", "id", "action", "holds", "warning"],
        ),
        BackupCommand::Release {
            id,
            cluster,
            reason,
        } => (
            topology::api_subject("backup", "release"),
            json!({"schema_version": 1, "cluster": cluster, "id": id, "reason": reason}),
            &["cluster", "id", "action", "holds"],
        ),
        BackupCommand::Delete {
            id,
            cluster,
            remote,
            force,
            dry_run,
            yes: _,
        } => (
            topology::api_subject("backup", "delete"),
            json!({"schema_version": 1, "cluster": cluster, "id": id,
               "remote": remote, "force": force, "dry_run": dry_run}),
            &["cluster", "id", "action", "remote", "reason", "dry_run"],
        ),
        BackupCommand::Orphans {
            cluster,
            delete,
            grace,
            dry_run,
            yes: _,
        } => {
            let mut body = json!({"schema_version": 1, "cluster": cluster, "grace": grace});
            if *delete {
                body["dry_run"] = json!(dry_run);
            }
            (
                topology::api_subject("orphans", if *delete { "delete" } else { "list" }),
                body,
                &[],
            )
        }
    })
}

/// The policy of `--policy JSON` or `--keep-last N`, validated here for a quick error (the server
/// validates again). `required` makes giving neither an error.
pub(super) fn policy_json(
    policy: Option<&str>,
    keep_last: Option<u32>,
    required: bool,
) -> Result<Option<Value>, Failure> {
    match (policy, keep_last) {
        (Some(_), Some(_)) => Err(Failure::input("give --policy or --keep-last, not both")),
        (Some(text), None) => {
            sexton_retention::Policy::from_json(text)
                .map_err(|err| Failure::input(format!("invalid --policy: {err}")))?;
            serde_json::from_str::<Value>(text)
                .map(Some)
                .map_err(|err| Failure::input(format!("invalid --policy: {err}")))
        }
        (None, Some(0)) => Err(Failure::input("--keep-last must be at least 1")),
        (None, Some(n)) => Ok(Some(json!({"keep_last": n}))),
        (None, None) if required => Err(Failure::input(
            "a schedule needs a retention policy: --keep-last N or --policy JSON",
        )),
        (None, None) => Ok(None),
    }
}

/// The keys `schedule update` changes in the stored policy: `--keep-last N`, or the keys of
/// `--policy JSON` (an object; `null` removes a key).
pub(super) fn policy_patch(
    policy: Option<&str>,
    keep_last: Option<u32>,
) -> Result<Option<Value>, Failure> {
    match (policy, keep_last) {
        (Some(_), Some(_)) => Err(Failure::input("give --policy or --keep-last, not both")),
        (None, Some(0)) => Err(Failure::input("--keep-last must be at least 1")),
        (None, Some(n)) => Ok(Some(json!({"keep_last": n}))),
        (Some(text), None) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(keys)) => Ok(Some(Value::Object(keys))),
            Ok(_) => Err(Failure::input(
                "invalid --policy: expected a JSON object of the keys to change",
            )),
            Err(err) => Err(Failure::input(format!("invalid --policy: {err}"))),
        },
        (None, None) => Ok(None),
    }
}

/// The `verify` block of a schedule from its flags: none without `--verify-cron` (the others
/// alone are refused: they would change nothing).
pub(super) fn verify_json(
    cron: &Option<String>,
    pick: &Option<String>,
    timeout: &Option<String>,
) -> Result<Option<Value>, Failure> {
    let Some(cron) = cron else {
        if pick.is_some() || timeout.is_some() {
            return Err(Failure::input(
                "--verify-pick and --verify-timeout need --verify-cron (the whole verify block is set at once)",
            ));
        }
        return Ok(None);
    };
    let mut verify = json!({"cron": cron});
    if let Some(pick) = pick {
        verify["pick"] = json!(pick);
    }
    if let Some(timeout) = timeout {
        verify["timeout"] = json!(timeout);
    }
    Ok(Some(verify))
}

/// The denials NATS reported on this process's connection (one connection per command).
pub(super) static DENIALS: std::sync::OnceLock<tokio::sync::watch::Receiver<Option<String>>> =
    std::sync::OnceLock::new();

/// Connects to the fleet's NATS, watching for permission denials (see [`request`]).
pub(super) async fn connect(config: &Config) -> Result<async_nats::Client, Failure> {
    let (client, denials) =
        sexton_shared::nats::connect_once_watching_denials(&config.nats, "sexton-cli")
            .await
            .map_err(Failure::runtime)?;
    let _ = DENIALS.set(denials);
    Ok(client)
}

pub(super) async fn request(
    client: &async_nats::Client,
    subject: &str,
    body: Value,
) -> Result<Value, Failure> {
    request_raw(client, subject, body)
        .await?
        .map_err(|err| Failure {
            code: if err.code == ErrorCode::Invalid { 2 } else { 1 },
            message: err.message,
        })
}

/// One API request, with who asks in its headers; the API's refusal is the inner `Err`.
pub(super) async fn request_raw(
    client: &async_nats::Client,
    subject: &str,
    body: Value,
) -> Result<Result<Value, sexton_shared::api::ApiError>, Failure> {
    let body = serde_json::to_vec(&body).map_err(|err| Failure::runtime(err.into()))?;
    let asked = tokio::time::timeout(
        Duration::from_secs(15),
        client.request_with_headers(
            subject.to_string(),
            crate::safety::actor_headers(),
            body.into(),
        ),
    );
    // NATS drops a publication the user may not make and says so only on the connection: a
    // denial ends the wait at once, as itself, not as "no answer".
    let mut denials = DENIALS.get().cloned();
    let denied = async {
        match &mut denials {
            Some(denials) => match denials.wait_for(Option::is_some).await {
                Ok(denial) => denial.clone().unwrap_or_default(),
                Err(_) => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    };
    let answered = tokio::select! {
        answered = asked => answered,
        denial = denied => {
            return Err(Failure {
                code: EXIT_DENIED,
                message: format!(
                    "permission denied: NATS refused {subject} to this user ({denial}); \
                     check nats.user and deploy/nats/authorization.conf"
                ),
            });
        }
    };
    let message = answered
        .map_err(|_| Failure::runtime(anyhow::anyhow!("no answer on {subject} within 15s")))?
        .with_context(|| format!("no answer on {subject}: is the fleet running?"))
        .map_err(Failure::runtime)?;
    let reply: Reply = serde_json::from_slice(&message.payload)
        .with_context(|| format!("unreadable answer on {subject}"))
        .map_err(Failure::runtime)?;
    Ok(reply.into_result())
}

/// The simulation of a schedule as `schedule.describe` returned it: its cron, policy, cadence
/// and volumes, with the command's simulation options.
pub(super) fn schedule_scenario(
    name: &str,
    described: &Value,
    options: &crate::simulate::SimulationOptions,
) -> Result<sexton_simulate::Scenario, Failure> {
    let schedule = described
        .get("schedule")
        .ok_or_else(|| Failure::runtime(anyhow::anyhow!("schedule.describe sent no schedule")))?;
    let unreadable = |what: &str| {
        Failure::runtime(anyhow::anyhow!(
            "schedule.describe sent an unreadable {what}"
        ))
    };
    // The spec the runs follow: for @daily-random & co. the one drawn from the name.
    let cron = described
        .get("timing")
        .and_then(|timing| timing.get("cron"))
        .or_else(|| schedule.get("cron"))
        .and_then(Value::as_str)
        .ok_or_else(|| unreadable("cron"))?;
    let policy: sexton_retention::Policy =
        serde_json::from_value(schedule.get("policy").cloned().unwrap_or(Value::Null))
            .map_err(|_| unreadable("policy"))?;
    let full_every = match schedule.get("full_every") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            serde_json::from_value::<sexton_retention::FullEvery>(value.clone())
                .map_err(|_| unreadable("full_every"))?
                .get(),
        ),
    };
    let volumes: Vec<String> = match schedule.get("volumes") {
        None | Some(Value::Null) => Vec::new(),
        Some(value) => {
            serde_json::from_value(value.clone()).map_err(|_| unreadable("volume list"))?
        }
    };
    crate::simulate::scenario(
        name,
        cron,
        policy,
        full_every,
        &volumes,
        options,
        Utc::now(),
    )
}
