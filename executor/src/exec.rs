//! `sexton exec`: a generic executor that drives any backup tool. For each due-backup it runs
//! the user's backup command with a documented environment (see [`environment`] and
//! `docs/executors.md`) and the event's JSON on stdin, uploads every file the command leaves in
//! its output directory (streaming, with a SHA-256 per object), writes `metadata.json` last and
//! reports the backup. With `--merge-command` it also does merge jobs ([`merge`]).
//!
//! Around the command it keeps the executor contract:
//!
//! - **Idempotent under redelivery.** A due-backup it took is remembered, and otherwise the
//!   catalog is asked (`backup.taken`, the reference executor's logic) before a backup is
//!   taken again; a copy delivered while the same backup is running here is left alone.
//! - **At most `--concurrency` jobs at once**, each message fetched only when a slot is free
//!   (nothing waits in a prefetch buffer while its ack wait runs out), and kept alive with
//!   progress acknowledgements while its command runs.
//! - **Graceful SIGTERM.** No new job is fetched; running commands get `--shutdown-grace` to
//!   finish, then their process group is stopped and the job handed back (nak) so another
//!   executor takes it at once.
//!
//! With `--verify-command` it also answers restore tests ([`verify`]): the chain's objects
//! downloaded into the inputs and checked, the command restores and checks them, and its exit
//! status is the verdict.

pub mod backup;
pub mod command;
pub mod environment;
pub mod merge;
pub mod output;
pub mod report;
pub mod verify;

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use async_nats::jetstream::{
    self,
    consumer::{DeliverPolicy, PullConsumer},
    AckKind,
};
use futures::StreamExt as _;
use sexton_model::names::ClusterName;
use sexton_shared::{
    channels,
    config::Config,
    object_store::{transfer::UploadSettings, ObjectStore},
    outcome::{settle, Outcome},
    topology, Shutdown,
};
use tokio::sync::Semaphore;
use tracing::Instrument as _;

use crate::reference::{taken_before, Reported};

/// Everything `sexton exec` was told, checked.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    pub backup_command: String,
    pub merge_command: Option<String>,
    /// Restores a chain and checks it (restore tests); its exit status is the verdict.
    pub verify_command: Option<String>,
    /// Only this cluster's due-backups and merge jobs; `None`: every cluster's.
    pub cluster: Option<ClusterName>,
    /// The durable consumer of due-backups.
    pub durable: String,
    /// The durable consumer of merge jobs.
    pub merge_durable: String,
    /// The durable consumer of verify-due events.
    pub verify_durable: String,
    /// Where job directories are made (and removed when the job ends).
    pub work_dir: PathBuf,
    pub timeout: Duration,
    pub concurrency: usize,
    pub limits: output::Limits,
    pub upload: UploadSettings,
    pub shutdown_grace: Duration,
    pub ack_wait: Duration,
    /// A new durable starts with the due-backups published this long before it was created.
    pub catch_up: Duration,
}

impl ExecOptions {
    /// The durable names for `cluster`: `sexton-exec[-<cluster>]`, and `-merge` and `-verify`
    /// after it.
    pub fn default_durables(cluster: Option<&ClusterName>) -> (String, String, String) {
        let base = match cluster {
            Some(cluster) => format!("sexton-exec-{cluster}"),
            None => "sexton-exec".to_string(),
        };
        (
            base.clone(),
            format!("{base}-merge"),
            format!("{base}-verify"),
        )
    }

    /// Checks what clap cannot: ranges and names.
    pub fn validate(&self) -> Result<(), String> {
        if self.backup_command.trim().is_empty() {
            return Err("--backup-command is empty".into());
        }
        if self
            .merge_command
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err("--merge-command is empty".into());
        }
        if self
            .verify_command
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err("--verify-command is empty".into());
        }
        for (flag, name) in [
            ("--durable", &self.durable),
            ("--merge-durable", &self.merge_durable),
            ("--verify-durable", &self.verify_durable),
        ] {
            sexton_model::names::check_name("durable name", name)
                .map_err(|err| format!("{flag}: {err}"))?;
        }
        if self.durable == self.merge_durable
            || self.durable == self.verify_durable
            || self.merge_durable == self.verify_durable
        {
            return Err("--durable, --merge-durable and --verify-durable must differ".into());
        }
        if !(1..=64).contains(&self.concurrency) {
            return Err(format!(
                "--concurrency {} is outside 1 to 64",
                self.concurrency
            ));
        }
        if self.timeout.is_zero() {
            return Err("--timeout must be positive".into());
        }
        if !(Duration::from_secs(10)..=Duration::from_secs(3600)).contains(&self.ack_wait) {
            return Err(format!(
                "--ack-wait {:?} is outside 10s to 1h",
                self.ack_wait
            ));
        }
        if self.limits.max_files == 0 || self.limits.max_bytes == 0 {
            return Err("--max-output-files and --max-output-bytes must be positive".into());
        }
        self.upload.validate()
    }
}

/// What every job needs.
pub struct Context {
    pub client: async_nats::Client,
    pub jetstream: jetstream::Context,
    pub store: ObjectStore,
    /// `s3.prefix`.
    pub prefix: String,
    /// The copy locations this executor can read (restore tests at a location, issue 28).
    pub locations: std::collections::BTreeMap<sexton_model::names::LocationName, ObjectStore>,
    pub options: ExecOptions,
}

/// Why a job did not end in a report.
#[derive(Debug)]
pub enum JobError {
    /// Worth another delivery: the store or NATS did not answer, a local directory failed.
    Transient(anyhow::Error),
    /// The executor is stopping and the command was stopped: hand the job back at once.
    Interrupted,
}

/// The kinds of job `sexton exec` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    Backup,
    Merge,
    Verify,
}

/// A job's directory: `scratch/`, `output/` and `inputs/`, a facts file and the event.
/// Removed when the job ends, whatever happened.
pub struct JobDir {
    root: PathBuf,
    pub paths: environment::JobPaths,
}

impl JobDir {
    pub fn create(work_dir: &Path, label: &str) -> std::io::Result<JobDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let root = work_dir.join(format!("{label}.{}.{nanos}", std::process::id()));
        let paths = environment::JobPaths {
            scratch: root.join("scratch"),
            output: root.join("output"),
            facts_file: root.join("facts"),
            event_file: root.join("event.json"),
            inputs: root.join("inputs"),
            log: root.join("log"),
        };
        for dir in [&paths.scratch, &paths.output, &paths.inputs] {
            std::fs::create_dir_all(dir)?;
        }
        Ok(JobDir { root, paths })
    }

    pub fn remove(self) {
        if let Err(err) = std::fs::remove_dir_all(&self.root) {
            tracing::warn!(dir = %self.root.display(), error = %err, "job directory not removed");
        }
    }
}

/// What the running jobs share: which backups are in hand and which were reported.
struct Ledger {
    running: HashSet<String>,
    reported: Reported,
}

impl Ledger {
    /// Nothing in hand; a reported backup remembered for half an hour, at most 100,000 of them.
    fn new() -> Ledger {
        Ledger {
            running: HashSet::new(),
            reported: Reported::new(Duration::from_secs(30 * 60), 100_000),
        }
    }
}

/// Runs `sexton exec` until `shutdown` trips, then lets running jobs finish (or hands them
/// back) and returns.
pub async fn run(
    config: Config,
    options: ExecOptions,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    options.validate().map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&options.work_dir)
        .with_context(|| format!("creating the work directory {}", options.work_dir.display()))?;
    let client = sexton_shared::nats::connect(&config.nats, "sexton-exec").await?;
    let jetstream = jetstream::new(client.clone());
    topology::await_created(&jetstream).await?;
    let store = ObjectStore::connect(&config.s3).await?;
    let consumers = consumers(&jetstream, &options).await?;
    let concurrency = options.concurrency;
    let ctx = Arc::new(Context {
        client,
        jetstream,
        store,
        prefix: config.s3.prefix.clone(),
        locations: ObjectStore::connect_locations(&config).await?,
        options,
    });
    let ledger = Arc::new(Mutex::new(Ledger::new()));
    let permits = Arc::new(Semaphore::new(concurrency));
    sexton_shared::build::answer_version_requests(&ctx.client, "sexton-exec", shutdown.clone())
        .await?;
    let takes = |kind: JobKind| consumers.iter().any(|(taken, _)| *taken == kind);
    tracing::info!(
        durable = %ctx.options.durable,
        cluster = ctx.options.cluster.as_ref().map_or("*", |c| c.as_str()),
        concurrency,
        merges = takes(JobKind::Merge),
        verifies = takes(JobKind::Verify),
        "sexton exec started"
    );
    let loops: Vec<_> = consumers
        .into_iter()
        .map(|(kind, consumer)| {
            let (ctx, ledger, permits) = (ctx.clone(), ledger.clone(), permits.clone());
            tokio::spawn(consume(
                kind,
                consumer,
                ctx,
                ledger,
                permits,
                shutdown.clone(),
            ))
        })
        .collect();
    shutdown.wait().await;
    for fetching in loops {
        let _ = fetching.await;
    }
    // Every job holds a permit until its message is settled.
    let _all = permits
        .acquire_many(concurrency as u32)
        .await
        .expect("the semaphore is never closed");
    tracing::info!("sexton exec stopped");
    Ok(())
}

/// The durable consumers of the job kinds this executor takes, in this order: due-backups
/// always, merge jobs with a merge command, verify-due events with a verify command.
async fn consumers(
    jetstream: &jetstream::Context,
    options: &ExecOptions,
) -> anyhow::Result<Vec<(JobKind, PullConsumer)>> {
    let dues = consumer(jetstream, &channels::DUES, &options.durable, options, true);
    let mut consumers = vec![(JobKind::Backup, dues.await?)];
    if options.merge_command.is_some() {
        let durable = &options.merge_durable;
        let merges = consumer(jetstream, &channels::MERGE_JOBS, durable, options, false);
        consumers.push((JobKind::Merge, merges.await?));
    }
    if options.verify_command.is_some() {
        let durable = &options.verify_durable;
        let verifies = consumer(jetstream, &channels::VERIFY_DUES, durable, options, false);
        consumers.push((JobKind::Verify, verifies.await?));
    }
    Ok(consumers)
}

/// The durable consumer of a job kind. A new due-backup durable starts at the due-backups of
/// the last `catch_up` (not the stream's week of them); an existing one resumes where it was.
async fn consumer<T: channels::Addressed>(
    jetstream: &jetstream::Context,
    channel: &channels::Channel<T>,
    durable: &str,
    options: &ExecOptions,
    catch_up: bool,
) -> anyhow::Result<PullConsumer> {
    // The operator's own durable, on one cluster's subject or every cluster's.
    let filter = options
        .cluster
        .as_ref()
        .map_or_else(|| channel.pattern(), |cluster| channel.subject(cluster));
    let mut config = channels::consumer_config(durable, Some(filter), options.ack_wait);
    if catch_up {
        let since = chrono::Utc::now()
            - chrono::TimeDelta::from_std(options.catch_up).unwrap_or(chrono::TimeDelta::hours(1));
        // DeliverPolicy's start time is a `time` value; its serde form is RFC 3339.
        config.deliver_policy = serde_json::from_value::<DeliverPolicy>(serde_json::json!({
            "deliver_policy": "by_start_time",
            "opt_start_time": since.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
        }))
        .context("a start time for the consumer")?;
    }
    channels::open(jetstream, channel.stream, config).await
}

/// Fetches one message whenever a job slot is free and hands it to a job task.
async fn consume(
    kind: JobKind,
    consumer: PullConsumer,
    ctx: Arc<Context>,
    ledger: Arc<Mutex<Ledger>>,
    permits: Arc<Semaphore>,
    mut shutdown: Shutdown,
) {
    loop {
        let permit = tokio::select! {
            // Stopping wins over work that is ready: a random pick would start more.
            biased;
            _ = shutdown.wait() => return,
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let batch = consumer
            .fetch()
            .max_messages(1)
            .expires(topology::PULL_EXPIRES)
            .messages()
            .await;
        let mut batch = match batch {
            Ok(batch) => batch,
            Err(err) => {
                tracing::warn!(error = %err, ?kind, "fetching a job");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let message = match batch.next().await {
            None => continue,
            Some(Ok(message)) => message,
            Some(Err(err)) => {
                tracing::warn!(error = %err, ?kind, "fetching a job");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if shutdown.is_triggered() {
            // Fetched as the executor stops: another executor takes it now, not after ack_wait.
            let _ = message.ack_with(AckKind::Nak(None)).await;
            return;
        }
        tokio::spawn(job(
            kind,
            message,
            ctx.clone(),
            ledger.clone(),
            permit,
            shutdown.clone(),
        ));
    }
}

/// One message: decode, decide, run, settle; progress acknowledgements meanwhile.
async fn job(
    kind: JobKind,
    message: jetstream::Message,
    ctx: Arc<Context>,
    ledger: Arc<Mutex<Ledger>>,
    _permit: tokio::sync::OwnedSemaphorePermit,
    mut shutdown: Shutdown,
) {
    let keep_alive = {
        let message = message.clone();
        let every = ctx.options.ack_wait / 3;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(err) = message.ack_with(AckKind::Progress).await {
                    tracing::warn!(error = %err, "progress acknowledgement");
                }
            }
        })
    };
    let delivered = message.info().map(|i| i.delivered).unwrap_or(1);
    let last_delivery = delivered >= topology::MAX_DELIVER;
    let outcome = match kind {
        JobKind::Backup => backup_job(&ctx, &ledger, &message, last_delivery, &mut shutdown).await,
        JobKind::Merge => merge_job(&ctx, &message, &mut shutdown).await,
        JobKind::Verify => verify_job(&ctx, &message, &mut shutdown).await,
    };
    keep_alive.abort();
    if let Some(outcome) = outcome {
        settle(&ctx.jetstream, "sexton-exec", &message, &outcome).await;
    }
}

/// `None`: leave the message alone (the same backup is running here and settles it).
async fn backup_job(
    ctx: &Context,
    ledger: &Mutex<Ledger>,
    message: &jetstream::Message,
    last_delivery: bool,
    shutdown: &mut Shutdown,
) -> Option<Outcome> {
    let due = match channels::DUES
        .receive(message)
        .and_then(|due| due.check_object_prefix(&ctx.prefix).map(|()| due))
    {
        Ok(due) => due,
        Err(why) => return Some(Outcome::Poison(why)),
    };
    let key = format!("{}.{}", due.cluster, due.backup_id);
    let span = tracing::info_span!("backup", cluster = %due.cluster, backup = %due.backup_id);
    let _entered = span.enter();
    {
        let mut ledger = ledger.lock().expect("the ledger's lock is never poisoned");
        if ledger.reported.contains(&due, Instant::now()) {
            tracing::info!("due backup delivered again; already taken and reported here");
            return Some(Outcome::Done);
        }
        if !ledger.running.insert(key.clone()) {
            tracing::info!("due backup delivered again while it is being taken here; left alone");
            return None;
        }
    }
    drop(_entered);
    let outcome = async {
        if let Some(state) = taken_before(&ctx.client, &due).await {
            tracing::info!(state, "due backup delivered again; the catalog says it was taken");
            return Outcome::Done;
        }
        tracing::info!(kind = ?due.kind, parent = due.parent.as_ref().map_or("none", |p| p.as_str()), "taking the backup");
        match backup::take(ctx, &due, &message.payload, last_delivery, shutdown).await {
            Ok(backup::Taken::Completed) => {
                tracing::info!("backup completed and reported");
                Outcome::Done
            }
            Ok(backup::Taken::Failed(reason)) => {
                tracing::warn!(%reason, "backup failed and reported failed");
                Outcome::Done
            }
            Err(JobError::Interrupted) => {
                tracing::warn!("backup interrupted by shutdown; handed back");
                Outcome::RetryAfter(Duration::from_secs(1))
            }
            Err(JobError::Transient(err)) => {
                tracing::warn!(error = format!("{err:#}"), "backup not taken; will retry");
                Outcome::RetryAfter(Duration::from_secs(10))
            }
        }
    }
    .instrument(span)
    .await;
    let mut ledger = ledger.lock().expect("the ledger's lock is never poisoned");
    ledger.running.remove(&key);
    if outcome == Outcome::Done {
        ledger.reported.insert(&due, Instant::now());
    }
    Some(outcome)
}

async fn merge_job(
    ctx: &Context,
    message: &jetstream::Message,
    shutdown: &mut Shutdown,
) -> Option<Outcome> {
    let Some(merge_command) = ctx.options.merge_command.as_deref() else {
        return Some(Outcome::RetryAfter(Duration::from_secs(60)));
    };
    let job = match channels::MERGE_JOBS.receive(message) {
        Ok(job) => job,
        Err(why) => return Some(Outcome::Poison(why)),
    };
    let span = tracing::info_span!("merge", cluster = %job.cluster, target = %job.target.id);
    let outcome = async {
        match merge::merge(ctx, merge_command, &job, &message.payload, shutdown).await {
            Ok(outcome) => outcome,
            Err(JobError::Interrupted) => Outcome::RetryAfter(Duration::from_secs(1)),
            Err(JobError::Transient(err)) => {
                tracing::warn!(error = format!("{err:#}"), "merge not done; will retry");
                Outcome::RetryAfter(Duration::from_secs(10))
            }
        }
    }
    .instrument(span)
    .await;
    Some(outcome)
}

async fn verify_job(
    ctx: &Context,
    message: &jetstream::Message,
    shutdown: &mut Shutdown,
) -> Option<Outcome> {
    let Some(verify_command) = ctx.options.verify_command.as_deref() else {
        return Some(Outcome::RetryAfter(Duration::from_secs(60)));
    };
    let due = match channels::VERIFY_DUES.receive(message) {
        Ok(due) => due,
        Err(why) => return Some(Outcome::Poison(why)),
    };
    let span = tracing::info_span!("verify", cluster = %due.cluster, backup = %due.backup_id, request = %due.request_id);
    let outcome = async {
        match verify::verify(ctx, verify_command, &due, &message.payload, shutdown).await {
            Ok(outcome) => outcome,
            Err(JobError::Interrupted) => Outcome::RetryAfter(Duration::from_secs(1)),
            Err(JobError::Transient(err)) => {
                tracing::warn!(
                    error = format!("{err:#}"),
                    "restore test not done; will retry"
                );
                Outcome::RetryAfter(Duration::from_secs(10))
            }
        }
    }
    .instrument(span)
    .await;
    Some(outcome)
}
