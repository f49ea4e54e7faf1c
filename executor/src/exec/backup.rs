//! One due-backup, taken by the user's command: the job's directories, the parent's
//! `metadata.json`, the command, the checks of its output, the streaming upload, then
//! `metadata.json` last and the report. Every way it can go wrong ends in a `failed` report
//! with the reason, except the ones worth retrying (the object store or NATS did not answer,
//! the executor is stopping), which hand the due-backup back for another delivery.

use std::path::PathBuf;

use anyhow::Context as _;
use chrono::Utc;
use sexton_model::{
    metadata::{self, BackupMetadata},
    wire::{self, DueBackup, ObjectDigest, Report},
};
use sexton_shared::{channels, Shutdown};

use super::{
    command::{self, CommandSpec, Ending},
    environment::{self, Facts},
    output, report, Context, JobDir, JobError,
};

/// How a backup ended, once reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    Completed,
    Failed(String),
}

/// Takes the backup `due` asks for and reports it. `last_delivery`: this is the due-backup's
/// last delivery, so a failure that would otherwise be retried is reported as failed.
pub async fn take(
    ctx: &Context,
    due: &DueBackup,
    payload: &[u8],
    last_delivery: bool,
    shutdown: &mut Shutdown,
) -> Result<Taken, JobError> {
    let job = JobDir::create(
        &ctx.options.work_dir,
        &format!("{}.{}", due.cluster, due.backup_id),
    )
    .map_err(|err| {
        JobError::Transient(anyhow::Error::new(err).context("creating the job's directory"))
    })?;
    let result = take_in(ctx, due, payload, &job, last_delivery, shutdown).await;
    job.remove();
    match result {
        // No further delivery will come: say so in the catalog rather than leave the backup
        // in progress until it is presumed dead.
        Err(JobError::Transient(err)) if last_delivery => {
            let reason = format!(
                "gave up after {} deliveries: {err:#}",
                sexton_shared::topology::MAX_DELIVER
            );
            let now = Utc::now().fixed_offset();
            let report = report::failed(due, now, now, &reason, Vec::new(), None);
            finish(ctx, report, &Facts::default()).await?;
            Ok(Taken::Failed(reason))
        }
        other => other,
    }
}

/// Takes the backup in the job's directories: reported started, the command run, its output
/// judged and uploaded, then reported ([`finish`]).
async fn take_in(
    ctx: &Context,
    due: &DueBackup,
    payload: &[u8],
    job: &JobDir,
    last_delivery: bool,
    shutdown: &mut Shutdown,
) -> Result<Taken, JobError> {
    let started_at = Utc::now().fixed_offset();
    publish(ctx, &report::started(due, started_at)).await?;
    let finished = run_command(ctx, due, payload, job, shutdown).await?;
    if finished.ending == Ending::Interrupted {
        return Err(JobError::Interrupted);
    }
    let fail = |reason: String, uploaded: Vec<ObjectDigest>, volumes: Option<Vec<String>>| {
        failed(ctx, due, started_at, reason, uploaded, volumes)
    };
    if let Some(reason) = finished.failure(ctx.options.timeout) {
        return fail(reason, Vec::new(), None).await;
    }
    let Judged {
        files,
        facts,
        taken,
    } = match judge_output(ctx, due, job) {
        Ok(judged) => judged,
        Err((reason, empty)) => return fail(reason, Vec::new(), empty).await,
    };
    let uploaded = match upload(ctx, due, &files, last_delivery).await {
        Ok(uploaded) => uploaded,
        Err(Stopped::Failed(reason, uploaded)) => return fail(reason, uploaded, None).await,
        Err(Stopped::Retry(err)) => return Err(err),
    };
    let volumes = report::volumes_taken(
        due,
        &uploaded,
        facts.kind == Some(sexton_model::records::BackupKind::Full),
    )
    .expect("every volume was checked to hold files");
    let report = report::completed(
        due,
        started_at,
        Utc::now().fixed_offset(),
        taken,
        volumes,
        uploaded,
    );
    let report = Report {
        log_range: facts.log_range.clone(),
        ..report
    };
    finish(ctx, report, &facts).await?;
    Ok(Taken::Completed)
}

/// Runs the user's backup command in the job's directories: the parent's `metadata.json`
/// fetched into the inputs, a folder per volume in the output, the event beside them.
async fn run_command(
    ctx: &Context,
    due: &DueBackup,
    payload: &[u8],
    job: &JobDir,
    shutdown: &mut Shutdown,
) -> Result<command::Finished, JobError> {
    let parent = fetch_parent(ctx, due, &job.paths.inputs).await?;
    for volume in &due.volumes {
        std::fs::create_dir_all(job.paths.output.join(&volume.name))
            .map_err(|err| JobError::Transient(err.into()))?;
    }
    std::fs::write(&job.paths.event_file, payload)
        .map_err(|err| JobError::Transient(err.into()))?;
    let env = environment::backup_env(
        due,
        &job.paths,
        parent
            .as_ref()
            .map(|(path, document)| (path.as_path(), document)),
    );
    Ok(command::run(
        CommandSpec {
            command: &ctx.options.backup_command,
            env,
            stdin: payload.to_vec(),
            cwd: &job.paths.scratch,
            timeout: ctx.options.timeout,
            grace: ctx.options.shutdown_grace,
        },
        shutdown,
    )
    .await)
}

/// Reports the backup failed for `reason` (with what was `uploaded`, and the `volumes` that
/// failed, when known).
async fn failed(
    ctx: &Context,
    due: &DueBackup,
    started_at: chrono::DateTime<chrono::FixedOffset>,
    reason: String,
    uploaded: Vec<ObjectDigest>,
    volumes: Option<Vec<String>>,
) -> Result<Taken, JobError> {
    let report = report::failed(
        due,
        started_at,
        Utc::now().fixed_offset(),
        &reason,
        uploaded,
        volumes.as_deref(),
    );
    finish(ctx, report, &Facts::default()).await?;
    Ok(Taken::Failed(reason))
}

/// The command's output, judged: its files, its facts, and the kind (and parent) it took.
struct Judged {
    files: Vec<output::OutputFile>,
    facts: Facts,
    taken: (
        sexton_model::records::BackupKind,
        Option<sexton_model::names::BackupId>,
    ),
}

/// What the command left, judged before anything is uploaded. `Err`: why the backup failed,
/// and the volumes it left nothing for.
fn judge_output(
    ctx: &Context,
    due: &DueBackup,
    job: &JobDir,
) -> Result<Judged, (String, Option<Vec<String>>)> {
    let files = output::scan(&job.paths.output, ctx.options.limits)
        .map_err(|problems| (problems.join("; "), None))?;
    let facts = read_facts(&job.paths.facts_file).map_err(|why| (why, None))?;
    let taken = report::taken_kind(due, facts.kind).map_err(|why| (why, None))?;
    // Every volume must have left something before anything is uploaded.
    let names: Vec<ObjectDigest> = files
        .iter()
        .map(|f| ObjectDigest {
            key: format!("{}{}", due.object_prefix, f.name),
            size: f.size,
            sha256: None,
            version_id: None,
        })
        .collect();
    if let Err(empty) = report::volumes_taken(due, &names, false) {
        let reason = format!(
            "the command left nothing for volume(s) {} (expected files under <output>/<volume>/)",
            empty.join(", ")
        );
        return Err((reason, Some(empty)));
    }
    Ok(Judged {
        files,
        facts,
        taken,
    })
}

/// Why an upload stopped short.
enum Stopped {
    /// The backup failed, for this reason, with these objects uploaded.
    Failed(String, Vec<ObjectDigest>),
    /// Worth another delivery.
    Retry(JobError),
}

/// Uploads the command's files under the backup's prefix, streaming, each with its digest.
async fn upload(
    ctx: &Context,
    due: &DueBackup,
    files: &[output::OutputFile],
    last_delivery: bool,
) -> Result<Vec<ObjectDigest>, Stopped> {
    let mut uploaded = Vec::new();
    let upload_started = std::time::Instant::now();
    for file in files {
        let key = format!("{}{}", due.object_prefix, file.name);
        // The names were checked; the key is checked again as any reader of a report would.
        if let Err(err) = sexton_shared::object_store::check_backup_key(
            &ctx.prefix,
            &due.cluster,
            &due.backup_name,
            due.backup_id.as_str(),
            &key,
        ) {
            return Err(Stopped::Failed(err.to_string(), uploaded));
        }
        let opened = match output::open(file) {
            Ok(opened) => opened,
            Err(why) => return Err(Stopped::Failed(why, uploaded)),
        };
        match ctx
            .store
            .put_file(
                &key,
                opened,
                &file.path.display().to_string(),
                file.size,
                ctx.options.upload,
            )
            .await
        {
            Ok(digest) if digest.size != file.size => {
                let why = format!(
                    "{} changed while it was uploaded ({} bytes, then {})",
                    file.name, file.size, digest.size
                );
                uploaded.push(digest);
                return Err(Stopped::Failed(why, uploaded));
            }
            Ok(digest) => uploaded.push(digest),
            Err(err) if err.is_retryable() && !last_delivery => {
                return Err(Stopped::Retry(JobError::Transient(
                    anyhow::Error::new(err).context("uploading"),
                )))
            }
            Err(err) => return Err(Stopped::Failed(format!("upload failed: {err}"), uploaded)),
        }
    }
    let bytes: u64 = uploaded.iter().map(|o| o.size).sum();
    let seconds = upload_started.elapsed().as_secs_f64();
    tracing::info!(
        files = uploaded.len(),
        bytes,
        seconds,
        mib_per_second = bytes as f64 / 1_048_576.0 / seconds.max(1e-9),
        "output uploaded"
    );
    Ok(uploaded)
}

/// Reads the facts file if the command wrote one.
fn read_facts(path: &std::path::Path) -> Result<Facts, String> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Facts::default()),
        Err(err) => return Err(format!("the facts file: {err}")),
    };
    if !metadata.is_file() {
        return Err("the facts file is not a regular file".into());
    }
    if metadata.len() > environment::MAX_FACTS_BYTES {
        return Err(format!(
            "the facts file holds {} bytes, more than {}",
            metadata.len(),
            environment::MAX_FACTS_BYTES
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|err| format!("the facts file: {err}"))?;
    environment::parse_facts(&text)
}

/// The parent's `metadata.json`, saved into `inputs` for the command, when the backup has a
/// parent and its document can be read. A missing or foreign document is no error: the
/// command sees no parent metadata and may take a full instead (`kind=full`).
async fn fetch_parent(
    ctx: &Context,
    due: &DueBackup,
    inputs: &std::path::Path,
) -> Result<Option<(PathBuf, BackupMetadata)>, JobError> {
    let mut parents: Vec<&sexton_model::names::BackupId> = due.parent.iter().collect();
    for volume in &due.volumes {
        if let Some(parent) = &volume.parent {
            if !parents.contains(&parent) {
                parents.push(parent);
            }
        }
    }
    let mut backup_parent = None;
    for parent in parents {
        // A scheduled backup builds on a backup of its own schedule: same backup name.
        let key = format!(
            "{}{}",
            ctx.store
                .backup_prefix(&due.cluster, &due.backup_name, parent.as_str()),
            metadata::FILE_NAME
        );
        let body = match ctx.store.get(&key).await {
            Ok(Some(body)) => body,
            Ok(None) => {
                tracing::warn!(%parent, key, "the parent's metadata.json is not in the bucket");
                continue;
            }
            Err(err) => {
                return Err(JobError::Transient(
                    anyhow::Error::new(err).context("reading the parent's metadata.json"),
                ))
            }
        };
        let document = match BackupMetadata::decode(&body) {
            Ok(document) => document,
            Err(err) => {
                tracing::warn!(%parent, key, error = %err, "the parent's metadata.json is not usable");
                continue;
            }
        };
        let path = inputs.join(format!("{parent}.{}", metadata::FILE_NAME));
        std::fs::write(&path, &body).map_err(|err| JobError::Transient(err.into()))?;
        if due.parent.as_ref() == Some(parent) {
            backup_parent = Some((path, document));
        }
    }
    Ok(backup_parent)
}

/// Writes `metadata.json` (with the command's facts as its `executor` object) and publishes
/// the report. A failed backup's document is written when the store allows; its report is
/// published either way.
async fn finish(ctx: &Context, mut report: Report, facts: &Facts) -> Result<(), JobError> {
    let mut document = BackupMetadata::describe(&report, Utc::now());
    if !facts.all.is_empty() {
        document.executor = Some(serde_json::Value::Object(facts.all.clone()));
    }
    let body = document.encode();
    let key = format!(
        "{}{}",
        ctx.store.backup_prefix(
            &report.cluster,
            &report.backup_name,
            report.backup_id.as_str()
        ),
        metadata::FILE_NAME
    );
    let size = body.len() as u64;
    match ctx.store.put(&key, body.into()).await {
        Ok(()) => {
            report.artifacts.push(key);
            report.size_bytes = Some(report.size_bytes.unwrap_or(0) + size);
        }
        Err(err) if report.status == wire::ReportStatus::Failed => {
            tracing::warn!(error = %err, "the failed backup's metadata.json was not written");
        }
        Err(err) => {
            return Err(JobError::Transient(
                anyhow::Error::new(err).context("writing metadata.json"),
            ))
        }
    }
    publish(ctx, &report).await
}

/// Publishes a report once (its message id makes a second publication a no-op).
pub async fn publish(ctx: &Context, report: &Report) -> Result<(), JobError> {
    channels::REPORTS
        .publish_once(&ctx.jetstream, report, &channels::ids::report(report))
        .await
        .context("publishing the report")
        .map_err(JobError::Transient)?;
    Ok(())
}
