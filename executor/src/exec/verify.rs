//! One restore test (`verify-due`), done by the user's verify command: every object of the
//! chain is downloaded into the job's inputs (one directory per backup, oldest first, the
//! target last) and checked against the size and SHA-256 recorded when it was taken; then the
//! command restores the chain somewhere harmless and checks it. Its exit status is the
//! verdict: 0 is `verified`, anything else (or a timeout) `verify-failed` with the reason and
//! the end of its stderr. A missing or changed object fails the test without running it.
//!
//! The verdict is published with message id `verdict.<request_id>`, so a redelivered event
//! answered twice is stored once. A store or NATS that did not answer retries the event; the
//! scheduler records a timeout if no verdict comes by the deadline.

use std::time::Instant;

use sexton_model::wire::{self, Verdict, VerdictOutcome, VerifyDue};
use sexton_shared::{channels, outcome::Outcome, Shutdown};

use super::{
    command::{self, CommandSpec, Ending},
    environment, Context, JobDir, JobError,
};
use crate::reference::check_verify_keys;

/// Does the restore test of `due` with `verify_command` and publishes its verdict.
pub async fn verify(
    ctx: &Context,
    verify_command: &str,
    due: &VerifyDue,
    payload: &[u8],
    shutdown: &mut Shutdown,
) -> Result<Outcome, JobError> {
    // A test at a location reads the copies there, with that location's own client.
    let store = match &due.location {
        None => Some(&ctx.store),
        Some(name) => ctx.locations.get(name),
    };
    let started = Instant::now();
    let (outcome, reason, checked, bytes_read) = match store {
        None => (
            VerdictOutcome::VerifyFailed,
            format!(
                "location {} is not configured for this executor (give it \
                 SEXTON_LOCATION_<NAME>_* settings with read keys there)",
                due.location
                    .as_ref()
                    .map(|n| n.as_str())
                    .unwrap_or_default()
            ),
            Vec::new(),
            0,
        ),
        Some(store) => {
            if let Err(why) = check_verify_keys(store.prefix(), due) {
                return Ok(Outcome::Poison(why));
            }
            let dir = JobDir::create(
                &ctx.options.work_dir,
                &format!("{}.{}.verify", due.cluster, due.backup_id),
            )
            .map_err(|err| JobError::Transient(err.into()))?;
            let result = verify_in(ctx, store, verify_command, due, payload, &dir, shutdown).await;
            dir.remove();
            result?
        }
    };
    let verdict = Verdict {
        schema_version: wire::SCHEMA_VERSION,
        request_id: due.request_id.clone(),
        cluster: due.cluster.clone(),
        backup_id: due.backup_id.clone(),
        uid: due.uid.clone(),
        outcome,
        reason: Some(reason),
        duration_ms: started.elapsed().as_millis() as u64,
        chain: due.chain.iter().map(|b| b.id.clone()).collect(),
        checked,
        bytes_read,
    };
    channels::VERDICTS
        .publish_once(
            &ctx.jetstream,
            &verdict,
            &channels::ids::verdict(&due.request_id),
        )
        .await
        .map_err(JobError::Transient)?;
    tracing::info!(backup = %due.backup_id, request = %due.request_id, ?outcome, "restore test answered");
    Ok(Outcome::Done)
}

type Answer = (VerdictOutcome, String, Vec<String>, u64);

async fn verify_in(
    ctx: &Context,
    store: &sexton_shared::object_store::ObjectStore,
    verify_command: &str,
    due: &VerifyDue,
    payload: &[u8],
    dir: &JobDir,
    shutdown: &mut Shutdown,
) -> Result<Answer, JobError> {
    let failed = |why: String, checked: Vec<String>, bytes: u64| {
        Ok((VerdictOutcome::VerifyFailed, why, checked, bytes))
    };
    let mut checked = Vec::new();
    let mut bytes_read = 0u64;
    for (n, backup) in due.chain.iter().enumerate() {
        let own = store.backup_prefix(&due.cluster, &backup.backup_name, backup.id.as_str());
        let into = dir.paths.inputs.join(format!("{n:02}-{}", backup.id));
        for object in &backup.objects {
            let name = object
                .key
                .strip_prefix(&own)
                .expect("keys were checked to be in their backup");
            let path = into.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|err| JobError::Transient(err.into()))?;
            }
            let size = match crate::fetch::fetch_object(store, object, &path).await {
                Ok(size) => size,
                Err(err) if err.is_mismatch() => {
                    return failed(err.to_string(), checked, bytes_read);
                }
                Err(err) if err.is_retryable() => {
                    return Err(JobError::Transient(
                        anyhow::Error::new(err).context("downloading"),
                    ))
                }
                Err(err) => return failed(err.to_string(), checked, bytes_read),
            };
            bytes_read += size;
            checked.push(object.key.clone());
        }
    }
    // A drill: the archive's segments that reach the instant, each checked against its index
    // entry and read at its recorded version, at the same place as the chain.
    let mut segments = 0usize;
    if let Some(replay) = &due.replay {
        match crate::fetch::fetch_binlog(
            store,
            store.prefix(),
            &due.cluster,
            Some(replay.since.fixed_offset()),
            Some(replay.until.fixed_offset()),
            &dir.paths.log,
        )
        .await
        {
            Ok(fetched) => {
                for segment in &fetched.segments {
                    bytes_read += segment.size;
                    checked.push(segment.key.clone());
                }
                segments = fetched.segments.len();
            }
            Err(err) if retryable(&err) => {
                return Err(JobError::Transient(err.context("reading the log archive")))
            }
            Err(err) => {
                return failed(
                    format!("reading the log archive up to {}: {err:#}", replay.until),
                    checked,
                    bytes_read,
                )
            }
        }
        if segments == 0 {
            return failed(
                format!(
                    "the log archive has no segment between {} and {}",
                    replay.since, replay.until
                ),
                checked,
                bytes_read,
            );
        }
    }
    std::fs::write(&dir.paths.event_file, payload)
        .map_err(|err| JobError::Transient(err.into()))?;
    let target = due
        .chain
        .last()
        .expect("a verify-due event names its chain");
    let target_prefix = store.backup_prefix(&due.cluster, &target.backup_name, target.id.as_str());
    let finished = command::run(
        CommandSpec {
            command: verify_command,
            env: environment::verify_env(due, &target_prefix, &dir.paths),
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
    match finished.failure(ctx.options.timeout) {
        Some(reason) => failed(reason, checked, bytes_read),
        None => Ok((
            VerdictOutcome::Verified,
            match &due.replay {
                None => format!(
                    "{} of {} checked ({bytes_read} bytes) and the verify command passed",
                    crate::count(checked.len(), "object"),
                    crate::count(due.chain.len(), "backup")
                ),
                Some(replay) => format!(
                    "{} of {} and {} checked ({bytes_read} bytes), and the verify command \
                     passed, recovering to {}",
                    crate::count(checked.len() - segments, "object"),
                    crate::count(due.chain.len(), "backup"),
                    crate::count(segments, "log segment"),
                    replay.until.to_rfc3339()
                ),
            },
            checked,
            bytes_read,
        )),
    }
}

/// Whether reading the log archive failed for a reason a retry may pass (the store or the
/// network), not because of what the archive holds.
fn retryable(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<crate::fetch::FetchError>()
            .is_some_and(|e| e.is_retryable())
            || cause
                .downcast_ref::<sexton_shared::object_store::ObjectError>()
                .is_some_and(|e| !e.permanent)
    })
}
