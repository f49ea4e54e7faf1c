//! What the online commands ask the services: the API call of each command (its subject, its
//! body as the request type of `sexton_shared::api` the service decodes, and the columns its
//! answer shows), and the dry run a destructive command asks first. The names a request holds
//! are parsed here as the service parses them, so a bad one is refused before anything is sent,
//! in the service's words and with its exit code (2). Sending is [`crate::client::Client`]'s.

use std::collections::BTreeMap;

use chrono::Utc;
use serde::Serialize;
use sexton_model::{
    names::{BackupId, ClusterName, PlanName, ScheduleName},
    wire::SCHEMA_VERSION,
};
use sexton_shared::{
    api::{
        ApproveRequest, BackupDelete, BackupHold, BackupRef, ByName, ClusterForget, DrillRequest,
        ImportRequest, ListFilter, OrphansRequest, PluginByName, PluginList, PluginSpec,
        PreviewRequest, RecoveryRequest, ScheduleBackfill, ScheduleDelete, ScheduleDescription,
        ScheduleSpec, ScheduleUpdate, ScrubRequest, StatusRequest, TimingView, Unpause,
        VerifyRequest,
    },
    topology,
};

use super::{
    args::*,
    values::{choice, given_cluster, parsed, parsed_opt},
};
use crate::failure::{parse_time, Failure};

/// The body of one API request: the request type its service decodes, serialised as itself.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum Body {
    ScheduleSpec(Box<ScheduleSpec>),
    ScheduleUpdate(Box<ScheduleUpdate>),
    ByName(ByName),
    ListFilter(ListFilter),
    ScheduleDelete(ScheduleDelete),
    Unpause(Unpause),
    ScheduleBackfill(ScheduleBackfill),
    BackupRef(BackupRef),
    BackupHold(BackupHold),
    BackupDelete(BackupDelete),
    VerifyRequest(VerifyRequest),
    OrphansRequest(OrphansRequest),
    PluginSpec(PluginSpec),
    PluginByName(PluginByName),
    PluginList(PluginList),
    PreviewRequest(PreviewRequest),
    RecoveryRequest(RecoveryRequest),
    DrillRequest(DrillRequest),
    ApproveRequest(ApproveRequest),
    ScrubRequest(ScrubRequest),
    ImportRequest(ImportRequest),
    StatusRequest(StatusRequest),
    ClusterForget(ClusterForget),
}

impl Body {
    /// The dry run of a request that deletes: the same request with `dry_run` set, or, for a
    /// retention approval, the preview of the held run it lets through.
    fn dry_run(&self) -> Body {
        let mut dry = self.clone();
        match &mut dry {
            Body::ScheduleDelete(request) => request.dry_run = true,
            Body::ClusterForget(request) => request.dry_run = true,
            Body::BackupDelete(request) => request.dry_run = true,
            Body::OrphansRequest(request) => request.dry_run = true,
            Body::ApproveRequest(request) => {
                return Body::PreviewRequest(PreviewRequest {
                    schema_version: request.schema_version,
                    cluster: request.cluster.clone(),
                    plan: Some(request.plan.clone()),
                    location: request.location.clone(),
                })
            }
            other => unreachable!("no dry run of {other:?}"),
        }
        dry
    }

    /// The request again, confirmed: after a refusal that asked for confirmation (a schedule
    /// whose new policy deletes backups kept now).
    pub(super) fn confirm(&mut self) {
        match self {
            Body::ScheduleSpec(spec) => spec.confirm = true,
            Body::ScheduleUpdate(update) => update.confirm = true,
            _ => {}
        }
    }
}

/// For a command that deletes (unless it is a dry run itself): whether `--yes` was given, and
/// the dry run of the same request that shows what it would do.
pub(super) fn destructive(command: &Command, body: &Body) -> Option<(bool, (String, Body))> {
    let (yes, subject) = match command {
        Command::Schedule(ScheduleCommand::Delete {
            dry_run: false,
            yes,
            ..
        }) => (yes, topology::api_subject("schedule", "delete")),
        Command::Cluster(ClusterCommand::Forget {
            dry_run: false,
            yes,
            ..
        }) => (yes, topology::api_subject("cluster", "forget")),
        Command::Backup(BackupCommand::Delete {
            dry_run: false,
            yes,
            ..
        }) => (yes, topology::api_subject("backup", "delete")),
        Command::Backup(BackupCommand::Orphans {
            delete: true,
            dry_run: false,
            yes,
            ..
        }) => (yes, topology::api_subject("orphans", "delete")),
        Command::Retention(RetentionCommand::Approve {
            yes,
            dry_run: false,
            ..
        }) => (yes, topology::api_subject("retention", "preview")),
        _ => return None,
    };
    Some((*yes, (subject, body.dry_run())))
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

/// A request that names one schedule.
pub(super) fn by_name(name: &str) -> Result<ByName, Failure> {
    Ok(ByName {
        schema_version: SCHEMA_VERSION,
        name: parsed::<ByName, ScheduleName>(name)?,
    })
}

/// A request that names one backup.
pub(super) fn backup_ref(cluster: &str, id: &str) -> Result<BackupRef, Failure> {
    Ok(BackupRef {
        schema_version: SCHEMA_VERSION,
        cluster: parsed::<BackupRef, ClusterName>(cluster)?,
        id: parsed::<BackupRef, BackupId>(id)?,
    })
}

/// An API call: its subject, its body, and the columns of its answer's table.
pub(super) type Call = (String, Body, &'static [&'static str]);

/// The API call of an online command, and the columns its table shows.
pub(super) fn request_for(command: &Command) -> Result<Call, Failure> {
    match command {
        Command::Schedule(command) => schedule_request(command),
        Command::Backup(command) => backup_request(command),
        Command::Plugin(command) => plugin_request(command),
        Command::Recovery(command) => recovery_request(command),
        Command::Retention(command) => retention_request(command),
        Command::Catalog(command) => catalog_request(command),
        Command::Binlog(command) => binlog_request(command),
        Command::Cluster(command) => cluster_request(command),
        _ => unreachable!("offline commands are handled before"),
    }
}

/// The API call of a `recovery` command: the recovery window, or a restore drill.
fn recovery_request(command: &RecoveryCommand) -> Result<Call, Failure> {
    Ok(match command {
        RecoveryCommand::Window {
            cluster,
            plan,
            location,
        } => (
            topology::api_subject("recovery", "window"),
            Body::RecoveryRequest(RecoveryRequest {
                schema_version: SCHEMA_VERSION,
                cluster: parsed::<RecoveryRequest, _>(cluster)?,
                plan: parsed_opt::<RecoveryRequest, _>(plan.as_ref())?,
                location: parsed_opt::<RecoveryRequest, _>(location.as_ref())?,
            }),
            &[],
        ),
        RecoveryCommand::Drill {
            cluster,
            at,
            plan,
            location,
            timeout,
            wait: _,
        } => (
            topology::api_subject("backup", "drill"),
            Body::DrillRequest(DrillRequest {
                schema_version: SCHEMA_VERSION,
                cluster: parsed::<DrillRequest, _>(cluster)?,
                at: parse_time("at", at)?,
                plan: parsed_opt::<DrillRequest, _>(plan.as_ref())?,
                location: parsed_opt::<DrillRequest, _>(location.as_ref())?,
                timeout: timeout
                    .as_deref()
                    .map(choice::<DrillRequest, _>)
                    .transpose()?,
            }),
            &[
                "request_id",
                "backup_id",
                "at",
                "location",
                "deadline",
                "recorded",
            ],
        ),
    })
}

/// The API call of an online `retention` command: a preview, or an approval of a held run.
fn retention_request(command: &RetentionCommand) -> Result<Call, Failure> {
    Ok(match command {
        RetentionCommand::Preview {
            cluster,
            plan,
            location,
        } => (
            topology::api_subject("retention", "preview"),
            Body::PreviewRequest(PreviewRequest {
                schema_version: SCHEMA_VERSION,
                cluster: parsed::<PreviewRequest, _>(cluster)?,
                plan: parsed_opt::<PreviewRequest, _>(plan.as_ref())?,
                location: parsed_opt::<PreviewRequest, _>(location.as_ref())?,
            }),
            &[],
        ),
        RetentionCommand::Approve {
            cluster,
            plan,
            location,
            dry_run,
            ..
        } => {
            let approve = ApproveRequest {
                schema_version: SCHEMA_VERSION,
                cluster: parsed::<ApproveRequest, _>(cluster)?,
                plan: parsed::<ApproveRequest, PlanName>(plan)?,
                location: parsed_opt::<ApproveRequest, _>(location.as_ref())?,
            };
            if *dry_run {
                // A dry run shows the held run as the preview does, and approves nothing.
                let preview = Body::ApproveRequest(approve).dry_run();
                (topology::api_subject("retention", "preview"), preview, &[])
            } else {
                (
                    topology::api_subject("retention", "approve"),
                    Body::ApproveRequest(approve),
                    &["cluster", "plan", "approved_at", "deleting"],
                )
            }
        }
        _ => unreachable!("offline commands are handled before"),
    })
}

/// The API call of an online `catalog` command: a scrub, or an import.
fn catalog_request(command: &CatalogCommand) -> Result<Call, Failure> {
    Ok(match command {
        CatalogCommand::Scrub { cluster, dry_run } => (
            topology::api_subject("catalog", "scrub"),
            Body::ScrubRequest(ScrubRequest {
                schema_version: SCHEMA_VERSION,
                cluster: parsed::<ScrubRequest, _>(cluster)?,
                dry_run: *dry_run,
            }),
            &[
                "cluster",
                "dry_run",
                "checked",
                "findings",
                "copies",
                "tampered",
                "missing_after",
                "unowned_objects",
                "locations_unchecked",
                "changed_meanwhile",
            ],
        ),
        CatalogCommand::Import {
            cluster,
            dry_run,
            from,
            include_removed,
        } => (
            topology::api_subject("catalog", "import"),
            Body::ImportRequest(ImportRequest {
                schema_version: SCHEMA_VERSION,
                cluster: parsed::<ImportRequest, _>(cluster)?,
                dry_run: *dry_run,
                from: parsed_opt::<ImportRequest, _>(from.as_ref())?,
                include_removed: *include_removed,
            }),
            &[
                "cluster",
                "dry_run",
                "directories",
                "known",
                "imported",
                "attached",
                "skipped",
            ],
        ),
        _ => unreachable!("offline commands are handled before"),
    })
}

/// The API call of an online `binlog` command: its status.
fn binlog_request(command: &BinlogCommand) -> Result<Call, Failure> {
    Ok(match command {
        BinlogCommand::Status { cluster } => (
            topology::api_subject("binlog", "status"),
            Body::StatusRequest(StatusRequest {
                schema_version: SCHEMA_VERSION,
                cluster: parsed::<StatusRequest, _>(cluster)?,
            }),
            &[
                "cluster",
                "index.state",
                "horizon",
                "horizon_backup",
                "segments.total",
                "segments.expired",
                "segments.unknown_end",
                "collection",
            ],
        ),
        _ => unreachable!("offline commands are handled before"),
    })
}

/// The API call of a `cluster` command: forgetting one.
fn cluster_request(command: &ClusterCommand) -> Result<Call, Failure> {
    Ok(match command {
        ClusterCommand::Forget {
            cluster,
            remote,
            dry_run,
            yes: _,
        } => {
            // A quick, local refusal of a name the API would refuse too.
            let cluster = ClusterName::new(cluster.as_str())
                .map_err(|err| Failure::input(format!("--cluster {cluster:?}: {err}")))?;
            (
                topology::api_subject("cluster", "forget"),
                Body::ClusterForget(ClusterForget {
                    schema_version: SCHEMA_VERSION,
                    cluster,
                    remote: *remote,
                    dry_run: *dry_run,
                }),
                &["cluster", "forgotten", "records", "summary"],
            )
        }
    })
}

/// The API call of a `plugin` command. A plugin's name is checked by the deleter, as before.
fn plugin_request(command: &PluginCommand) -> Result<Call, Failure> {
    Ok(match command {
        PluginCommand::Register {
            name,
            subject,
            selector,
            timeout,
        } => (
            topology::api_subject("plugin", "register"),
            Body::PluginSpec(PluginSpec {
                schema_version: SCHEMA_VERSION,
                name: name.clone(),
                subject: subject.clone(),
                selector: selector.iter().cloned().collect::<BTreeMap<_, _>>(),
                timeout_seconds: *timeout,
                labels: BTreeMap::new(),
                annotations: BTreeMap::new(),
                registered_at: None,
            }),
            &["name", "subject", "selector", "timeout_seconds"],
        ),
        PluginCommand::List { .. } => (
            topology::api_subject("plugin", "list"),
            Body::PluginList(PluginList::default()),
            &["name", "subject", "selector", "timeout_seconds", "error"],
        ),
        PluginCommand::Unregister { name } => (
            topology::api_subject("plugin", "unregister"),
            Body::PluginByName(PluginByName {
                schema_version: SCHEMA_VERSION,
                name: name.clone(),
            }),
            &["unregistered"],
        ),
    })
}

/// The API call of a `schedule` command.
fn schedule_request(command: &ScheduleCommand) -> Result<Call, Failure> {
    Ok(match command {
        ScheduleCommand::Create(args) => (
            topology::api_subject("schedule", "create"),
            Body::ScheduleSpec(Box::new(super::schedule_body::create(args)?)),
            SCHEDULE_COLUMNS,
        ),
        ScheduleCommand::Get { name: None, .. } => {
            unreachable!("schedule get without a name is schedule list (cli::canonical)")
        }
        ScheduleCommand::Get {
            name: Some(name), ..
        } => (
            topology::api_subject("schedule", "get"),
            Body::ByName(by_name(name)?),
            SCHEDULE_COLUMNS,
        ),
        ScheduleCommand::Describe { name, .. } => (
            topology::api_subject("schedule", "describe"),
            Body::ByName(by_name(name)?),
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
        ScheduleCommand::List { cluster, .. } => (
            topology::api_subject("schedule", "list"),
            Body::ListFilter(ListFilter {
                schema_version: SCHEMA_VERSION,
                cluster: parsed_opt::<ListFilter, _>(cluster.as_ref())?,
                plan: None,
                id: None,
            }),
            SCHEDULE_COLUMNS,
        ),
        ScheduleCommand::Delete { name, dry_run, .. } => (
            topology::api_subject("schedule", "delete"),
            Body::ScheduleDelete(ScheduleDelete {
                schema_version: SCHEMA_VERSION,
                name: parsed::<ScheduleDelete, _>(name)?,
                dry_run: *dry_run,
            }),
            &["schedule", "deleted", "records", "summary"],
        ),
        ScheduleCommand::Pause { name } => (
            topology::api_subject("schedule", "pause"),
            Body::ByName(by_name(name)?),
            SCHEDULE_COLUMNS,
        ),
        ScheduleCommand::Unpause {
            name,
            skip_immediately,
        } => (
            topology::api_subject("schedule", "unpause"),
            Body::Unpause(Unpause {
                schema_version: SCHEMA_VERSION,
                name: parsed::<Unpause, _>(name)?,
                skip_immediately: *skip_immediately,
            }),
            SCHEDULE_COLUMNS,
        ),
        ScheduleCommand::Update(args) => (
            topology::api_subject("schedule", "update"),
            Body::ScheduleUpdate(Box::new(super::schedule_body::update(args)?)),
            SCHEDULE_COLUMNS,
        ),
        ScheduleCommand::Backfill {
            name,
            from,
            to,
            overlap,
        } => {
            let from = parse_time("from", from)?;
            let to = parse_time("to", to)?;
            (
                topology::api_subject("schedule", "backfill"),
                Body::ScheduleBackfill(ScheduleBackfill {
                    schema_version: SCHEMA_VERSION,
                    name: parsed::<ScheduleBackfill, _>(name)?,
                    from,
                    to,
                    overlap: overlap
                        .as_deref()
                        .map(choice::<ScheduleBackfill, _>)
                        .transpose()?,
                }),
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

/// The API call of a `backup` command.
fn backup_request(command: &BackupCommand) -> Result<Call, Failure> {
    Ok(match command {
        BackupCommand::Get { .. } => {
            unreachable!("backup get is backup describe or backup list (cli::canonical)")
        }
        BackupCommand::Fetch { .. } => unreachable!("backup fetch is handled before"),
        BackupCommand::Create { from_schedule } => (
            topology::api_subject("backup", "create"),
            Body::ByName(by_name(from_schedule)?),
            &["backup_id", "schedule", "tick"],
        ),
        BackupCommand::List { cluster, plan, .. } => (
            topology::api_subject("backup", "list"),
            Body::ListFilter(ListFilter {
                schema_version: SCHEMA_VERSION,
                cluster: parsed_opt::<ListFilter, _>(cluster.as_ref())?,
                plan: parsed_opt::<ListFilter, _>(plan.as_ref())?,
                id: None,
            }),
            &[
                "cluster",
                "plan",
                "id",
                "kind",
                "status",
                "completed_at",
                "verified",
            ],
        ),
        BackupCommand::Verify {
            id,
            cluster,
            timeout,
            location,
            wait: _,
        } => (
            topology::api_subject("backup", "verify"),
            Body::VerifyRequest(VerifyRequest {
                schema_version: SCHEMA_VERSION,
                cluster: parsed::<VerifyRequest, _>(given_cluster(cluster)?)?,
                id: parsed::<VerifyRequest, _>(id)?,
                timeout: timeout
                    .as_deref()
                    .map(choice::<VerifyRequest, _>)
                    .transpose()?,
                location: location
                    .as_deref()
                    .map(parsed::<VerifyRequest, _>)
                    .transpose()?,
            }),
            &["request_id", "backup_id", "deadline", "recorded"],
        ),
        BackupCommand::Describe { id, cluster } => (
            topology::api_subject("backup", "describe"),
            Body::BackupRef(backup_ref(given_cluster(cluster)?, id)?),
            &[],
        ),
        BackupCommand::Hold {
            id,
            cluster,
            reason,
        } => (
            topology::api_subject("backup", "hold"),
            Body::BackupHold(backup_hold(given_cluster(cluster)?, id, reason)?),
            &["cluster", "id", "action", "holds", "warning"],
        ),
        BackupCommand::Release {
            id,
            cluster,
            reason,
        } => (
            topology::api_subject("backup", "release"),
            Body::BackupHold(backup_hold(given_cluster(cluster)?, id, reason)?),
            &["cluster", "id", "action", "holds"],
        ),
        BackupCommand::Delete {
            id,
            cluster,
            remote,
            force,
            dry_run,
            yes: _,
            location,
            with_dependents,
            oldest,
            plan: _,
        } => (
            topology::api_subject("backup", "delete"),
            Body::BackupDelete(BackupDelete {
                schema_version: SCHEMA_VERSION,
                cluster: parsed::<BackupDelete, _>(given_cluster(cluster)?)?,
                // --oldest is resolved to the set's full before (cli::resolve_oldest).
                id: parsed::<BackupDelete, _>(id.as_deref().ok_or_else(|| {
                    Failure::input("backup delete needs an ID or --oldest".to_string())
                })?)?,
                remote: *remote,
                force: *force,
                dry_run: *dry_run,
                location: location
                    .as_deref()
                    .map(parsed::<BackupDelete, _>)
                    .transpose()?,
                with_dependents: *with_dependents || *oldest,
            }),
            &["cluster", "id", "action", "remote", "reason", "dry_run"],
        ),
        BackupCommand::Orphans {
            cluster,
            delete,
            grace,
            dry_run,
            yes: _,
        } => (
            topology::api_subject("orphans", if *delete { "delete" } else { "list" }),
            Body::OrphansRequest(OrphansRequest {
                schema_version: SCHEMA_VERSION,
                cluster: parsed::<OrphansRequest, _>(cluster)?,
                grace: Some(grace.clone()),
                dry_run: *delete && *dry_run,
            }),
            &[],
        ),
    })
}

/// `backup.hold` and `backup.release`: the reason is checked by clap already.
fn backup_hold(cluster: &str, id: &str, reason: &str) -> Result<BackupHold, Failure> {
    Ok(BackupHold {
        schema_version: SCHEMA_VERSION,
        cluster: parsed::<BackupHold, _>(cluster)?,
        id: parsed::<BackupHold, _>(id)?,
        reason: reason.to_string(),
    })
}

/// The simulation of a schedule as `schedule.describe` returned it: its cron (for
/// `@daily-random` and the like, the one drawn from the name), policy, cadence and volumes,
/// with the command's simulation options.
pub(super) fn schedule_scenario(
    name: &str,
    described: &ScheduleDescription,
    options: &crate::simulate::SimulationOptions,
) -> Result<sexton_simulate::Scenario, Failure> {
    let schedule = &described.schedule;
    let cron = match &described.timing {
        TimingView::Parsed { cron, .. } => cron,
        TimingView::Error { .. } => &schedule.cron,
    };
    let mut scenario = crate::simulate::scenario(
        name,
        cron,
        schedule.policy.clone(),
        schedule.full_every.map(sexton_retention::FullEvery::get),
        &schedule.volumes,
        options,
        Utc::now(),
    )?;
    // The schedule's own copy rules, unless --copies replaces them.
    if options.copies.is_none() {
        scenario.copies = schedule.copies.clone();
    }
    Ok(scenario)
}
