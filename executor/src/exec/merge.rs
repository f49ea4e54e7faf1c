//! One merge job (`chain_mode: merge`, Trilio's consolidation), done by the user's merge
//! command: the chain's data objects are downloaded into the job's inputs (one directory per
//! backup, oldest first, the target last), the command writes the consolidated objects into
//! its output directory, and they are uploaded into the *target's* directory under names that
//! are new there. The target's `metadata.json` is rewritten to describe the full it now is,
//! then the merge is reported exactly as the reference executor reports one.
//!
//! A merge that cannot be done (a missing object, a command that fails, an output that would
//! overwrite one of the target's objects) is never reported: an incomplete full would let
//! retention delete the chain it came from. It ends as an incident (the job is terminated) and
//! the next retention run plans it again; a store or NATS that did not answer retries it.

use chrono::Utc;
use sexton_model::{metadata, records::BackupRecord, wire::MergeJob};
use sexton_shared::{channels, outcome::Outcome, Shutdown};

use super::{
    command::{self, CommandSpec, Ending},
    environment, output, Context, JobDir, JobError,
};
use crate::reference::{check_merge_keys, merge_report, rewrite_metadata};

/// Does `job` with `merge_command`. `Ok` carries the outcome for the job's message.
pub async fn merge(
    ctx: &Context,
    merge_command: &str,
    job: &MergeJob,
    payload: &[u8],
    shutdown: &mut Shutdown,
) -> Result<Outcome, JobError> {
    if let Err(why) = check_merge_keys(&ctx.prefix, job) {
        return Ok(Outcome::Poison(why));
    }
    let dir = JobDir::create(
        &ctx.options.work_dir,
        &format!("{}.{}.merge", job.cluster, job.target.id),
    )
    .map_err(|err| JobError::Transient(err.into()))?;
    let result = merge_in(ctx, merge_command, job, payload, &dir, shutdown).await;
    dir.remove();
    result
}

async fn merge_in(
    ctx: &Context,
    merge_command: &str,
    job: &MergeJob,
    payload: &[u8],
    dir: &JobDir,
    shutdown: &mut Shutdown,
) -> Result<Outcome, JobError> {
    let started_at = Utc::now().fixed_offset();
    let target = &job.target;
    let target_dir = ctx
        .store
        .backup_prefix(&job.cluster, &target.backup_name, target.id.as_str());
    // Inputs: NN-<id>/<name in the backup's directory>, oldest first, the target last.
    for (n, backup) in job.sources.iter().chain([target]).enumerate() {
        let own = ctx
            .store
            .backup_prefix(&job.cluster, &backup.backup_name, backup.id.as_str());
        let into = dir.paths.inputs.join(format!("{n:02}-{}", backup.id));
        for key in backup
            .artifacts
            .iter()
            .filter(|k| !BackupRecord::is_metadata_key(k))
        {
            let name = key
                .strip_prefix(&own)
                .expect("keys were checked to be in their backup");
            let path = into.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|err| JobError::Transient(err.into()))?;
            }
            match ctx.store.get_to_file(key, &path).await {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return Ok(Outcome::Poison(format!(
                        "object {key} of backup {} is missing; the chain cannot be merged",
                        backup.id
                    )))
                }
                Err(err) if err.is_retryable() => {
                    return Err(JobError::Transient(
                        anyhow::Error::new(err).context("downloading"),
                    ))
                }
                Err(err) => return Ok(Outcome::Poison(format!("downloading {key}: {err}"))),
            }
        }
    }
    std::fs::write(&dir.paths.event_file, payload)
        .map_err(|err| JobError::Transient(err.into()))?;
    let finished = command::run(
        CommandSpec {
            command: merge_command,
            env: environment::merge_env(job, &target_dir, &dir.paths),
            stdin: payload.to_vec(),
            cwd: &dir.paths.scratch,
            timeout: ctx.options.timeout,
            grace: ctx.options.shutdown_grace,
        },
        shutdown,
    )
    .await;
    if finished.ending == Ending::Interrupted {
        return Err(JobError::Interrupted);
    }
    if let Some(reason) = finished.failure(ctx.options.timeout) {
        return Ok(Outcome::Poison(format!(
            "merge into {}: {reason}",
            target.id
        )));
    }
    let files = match output::scan(&dir.paths.output, ctx.options.limits) {
        Ok(files) => files,
        Err(problems) => {
            return Ok(Outcome::Poison(format!(
                "merge into {}: {}",
                target.id,
                problems.join("; ")
            )))
        }
    };
    for file in &files {
        let key = format!("{target_dir}{}", file.name);
        if target.artifacts.contains(&key) {
            return Ok(Outcome::Poison(format!(
                "merge into {}: the output {} would overwrite one of the target's objects",
                target.id, file.name
            )));
        }
    }
    let facts = match std::fs::read_to_string(&dir.paths.facts_file) {
        Ok(text) => match environment::parse_facts(&text) {
            Ok(facts) => facts,
            Err(why) => return Ok(Outcome::Poison(format!("merge into {}: {why}", target.id))),
        },
        Err(_) => environment::Facts::default(),
    };
    let mut merged = Vec::new();
    for file in &files {
        let key = format!("{target_dir}{}", file.name);
        let opened = match output::open(file) {
            Ok(opened) => opened,
            Err(why) => return Ok(Outcome::Poison(format!("merge into {}: {why}", target.id))),
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
            Ok(digest) if digest.size == file.size => merged.push(digest),
            Ok(_) => {
                return Ok(Outcome::Poison(format!(
                    "merge into {}: {} changed while it was uploaded",
                    target.id, file.name
                )))
            }
            Err(err) if err.is_retryable() => {
                return Err(JobError::Transient(
                    anyhow::Error::new(err).context("uploading"),
                ))
            }
            Err(err) => return Ok(Outcome::Poison(format!("uploading {key}: {err}"))),
        }
    }
    let metadata_key = format!("{target_dir}{}", metadata::FILE_NAME);
    let rewritten = rewrite_metadata(&ctx.store, &metadata_key, job, &merged, Some(&facts.all))
        .await
        .map_err(JobError::Transient)?;
    let report = merge_report(job, &metadata_key, merged, rewritten, started_at);
    channels::REPORTS
        .publish_once(&ctx.jetstream, &report, &channels::ids::merge_report(job))
        .await
        .map_err(JobError::Transient)?;
    tracing::info!(target = %target.id, sources = job.sources.len(), "merge done and reported");
    Ok(Outcome::Done)
}
