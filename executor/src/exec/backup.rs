//! One due-backup, taken by the user's command: the job's directories, the parent's
//! `metadata.json`, the command, the checks of its output, the streaming upload, then
//! `metadata.json` last and the report. Every way it can go wrong ends in a `failed` report
//! with the reason, except the ones worth retrying (the object store or NATS did not answer,
//! the executor is stopping), which hand the due-backup back for another delivery.

use std::path::PathBuf;

use anyhow::Context as _;
use chrono::Utc;
use sexton_shared::{
    channels,
    metadata::{self, BackupMetadata},
    wire::{self, DueBackup, ObjectDigest, Report},
    Shutdown,
};

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
    let finished = command::run(
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
    .await;
    if finished.ending == Ending::Interrupted {
        return Err(JobError::Interrupted);
    }
    let fail = |reason: String, uploaded: Vec<ObjectDigest>, volumes: Option<Vec<String>>| async move {
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
    };
    if let Some(reason) = finished.failure(ctx.options.timeout) {
        return fail(reason, Vec::new(), None).await;
    }
    let files = match output::scan(&job.paths.output, ctx.options.limits) {
        Ok(files) => files,
        Err(problems) => return fail(problems.join("; "), Vec::new(), None).await,
    };
    let facts = match read_facts(&job.paths.facts_file) {
        Ok(facts) => facts,
        Err(why) => return fail(why, Vec::new(), None).await,
    };
    let taken = match report::taken_kind(due, facts.kind) {
        Ok(taken) => taken,
        Err(why) => return fail(why, Vec::new(), None).await,
    };
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
        return fail(reason, Vec::new(), Some(empty)).await;
    }
    let mut uploaded = Vec::new();
    let upload_started = std::time::Instant::now();
    for file in &files {
        let key = format!("{}{}", due.object_prefix, file.name);
        // The names were checked; the key is checked again as any reader of a report would.
        if let Err(err) = sexton_shared::object_store::check_backup_key(
            &ctx.prefix,
            &due.cluster,
            &due.backup_name,
            due.backup_id.as_str(),
            &key,
        ) {
            return fail(err.to_string(), uploaded, None).await;
        }
        let opened = match output::open(file) {
            Ok(opened) => opened,
            Err(why) => return fail(why, uploaded, None).await,
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
                return fail(why, uploaded, None).await;
            }
            Ok(digest) => uploaded.push(digest),
            Err(err) if err.is_retryable() && !last_delivery => {
                return Err(JobError::Transient(
                    anyhow::Error::new(err).context("uploading"),
                ))
            }
            Err(err) => return fail(format!("upload failed: {err}"), uploaded, None).await,
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
    let volumes = report::volumes_taken(
        due,
        &uploaded,
        facts.kind == Some(sexton_shared::records::BackupKind::Full),
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
    let mut parents: Vec<&sexton_shared::names::BackupId> = due.parent.iter().collect();
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
