//! Verdicts of restore tests (`sexton.v1.verify.verdict.<cluster>`, durable
//! `scheduler-verdicts`) → the backup's `verification`, its hold released, retention asked to
//! decide again (a proven backup is kept by `keep_verified` and the verified floor).
//!
//! A verdict counts only for a test Sexton asked for: its backup must exist with the unique id
//! the verdict names, and the request must be the one under way or one already answered (a
//! redelivery). Anything else (an unknown backup, another uid, a request nobody made, a subject
//! naming another cluster) is poison, with an incident. A verified incremental proves its
//! ancestors too: the restore replayed them, so each is recorded verified `via` the target.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use chrono::Utc;
use sexton_model::{
    records::VerificationEntry,
    wire::{Verdict, VerdictOutcome},
};
use sexton_shared::{catalog::Lookup, channels, outcome::Outcome, topology, Shutdown};

use crate::verify::Verifier;

pub async fn run(verifier: Verifier, mut shutdown: Shutdown) -> anyhow::Result<()> {
    let consumer = channels::VERDICTS_DURABLE
        .open(
            &verifier.topology.jetstream,
            None,
            channels::Settings::ack_wait(Duration::from_secs(30)),
        )
        .await?;
    let mut messages = consumer
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await
        .context("reading verdicts")?;
    let verifier = Arc::new(verifier);
    loop {
        let Some(message) =
            sexton_shared::nats::next_message(&mut messages, &mut shutdown, "verdicts").await?
        else {
            return Ok(());
        };
        channels::deliver(
            &channels::VERDICTS,
            "scheduler",
            &verifier.topology.jetstream,
            None,
            &message,
            |verdict| async {
                handle(&verifier, verdict).await.unwrap_or_else(|err| {
                    tracing::warn!(
                        error = format!("{err:#}"),
                        "verdict not recorded; will retry"
                    );
                    Outcome::RetryAfter(Duration::from_secs(2))
                })
            },
        )
        .await;
    }
}

/// One verdict, received (decoded, its subject checked: `channels::VERDICTS`).
async fn handle(verifier: &Verifier, verdict: Verdict) -> anyhow::Result<Outcome> {
    tracing::Span::current().record("backup", verdict.backup_id.as_str());
    let catalog = &verifier.catalog;
    let current = match catalog.lookup(&verdict.cluster, &verdict.backup_id).await? {
        Lookup::Live(current) => current,
        Lookup::Never | Lookup::Removed => {
            return Ok(Outcome::Poison(format!(
                "verdict for backup {} of {}, which the catalog does not hold",
                verdict.backup_id, verdict.cluster
            )))
        }
    };
    let record = &current.value;
    if record.uid != verdict.uid {
        return Ok(Outcome::Poison(format!(
            "verdict for backup {} with uid {:?}, not the backup's {:?}",
            verdict.backup_id, verdict.uid, record.uid
        )));
    }
    let asked = record.verification.as_ref().is_some_and(|v| {
        v.pending
            .as_ref()
            .is_some_and(|p| p.request_id == verdict.request_id)
            || v.history.iter().any(|e| e.request_id == verdict.request_id)
    });
    if !asked {
        return Ok(Outcome::Poison(format!(
            "verdict for restore test {} of backup {}, which nobody asked for",
            verdict.request_id, verdict.backup_id
        )));
    }
    // Where the test read, and a drill's instant: what was asked for (the record's, not the
    // verdict's claim).
    let (location, until) = record
        .verification
        .as_ref()
        .and_then(|v| {
            v.pending
                .as_ref()
                .filter(|p| p.request_id == verdict.request_id)
                .map(|p| (p.location.clone(), p.until))
                .or_else(|| {
                    v.history
                        .iter()
                        .find(|e| e.request_id == verdict.request_id)
                        .map(|e| (e.location.clone(), e.until))
                })
        })
        .unwrap_or_default();
    let now = Utc::now();
    let outcome = match verdict.outcome {
        VerdictOutcome::Verified => "verified",
        VerdictOutcome::VerifyFailed => "failed",
    };
    let entry = VerificationEntry {
        request_id: verdict.request_id.clone(),
        outcome: outcome.into(),
        at: now,
        reason: verdict.reason.clone(),
        duration_ms: Some(verdict.duration_ms),
        via: None,
        location,
        until,
    };
    let already = record
        .verification
        .as_ref()
        .is_some_and(|v| v.history.iter().any(|e| e.request_id == verdict.request_id));
    verifier
        .settle(
            &verdict.cluster,
            &verdict.backup_id,
            &verdict.uid,
            entry.clone(),
        )
        .await?;
    if !already {
        verifier
            .metrics
            .verifications
            .with_label_values(&[outcome])
            .inc();
        match verdict.outcome {
            VerdictOutcome::Verified => {
                tracing::info!(cluster = %verdict.cluster, backup = %verdict.backup_id, request = %verdict.request_id, duration_ms = verdict.duration_ms, "restore test passed")
            }
            VerdictOutcome::VerifyFailed => {
                verifier
                    .incident(
                        &verdict.cluster,
                        verdict.backup_id.as_str(),
                        "verify-failed",
                        verdict.reason.as_deref().unwrap_or("no reason given"),
                    )
                    .await
            }
        }
    }
    // The restore replayed the chain: its ancestors are proven too. The chain is the
    // executor's claim: only backups the target really builds on (its parent links in the
    // catalog) are proven by its restore; another backup named there is not.
    if verdict.outcome == VerdictOutcome::Verified {
        let ancestors = ancestors_of(catalog, &verdict.cluster, record).await?;
        for ancestor in verdict.chain.iter().filter(|id| **id != verdict.backup_id) {
            if !ancestors.contains(ancestor.as_str()) {
                tracing::warn!(cluster = %verdict.cluster, backup = %verdict.backup_id, named = %ancestor, "a verdict's chain names a backup the target does not build on; not proven by it");
                continue;
            }
            let Lookup::Live(parent) = catalog.lookup(&verdict.cluster, ancestor).await? else {
                continue;
            };
            let via = VerificationEntry {
                via: Some(verdict.backup_id.clone()),
                reason: Some(format!(
                    "restored as part of the chain of {}",
                    verdict.backup_id
                )),
                ..entry.clone()
            };
            verifier
                .settle(&verdict.cluster, ancestor, &parent.value.uid, via)
                .await?;
        }
    }
    // Retention decides again with the new proof (or its absence). A failed test may have met
    // an object gone (issue 54: evidence, wherever it is met): its sweep scrubs the cluster
    // first, which marks what is gone `missing` at the place it is gone from.
    channels::request_sweep(
        &verifier.topology.jetstream,
        &verdict.cluster,
        now,
        verdict.outcome == VerdictOutcome::VerifyFailed,
        &channels::SweepCause::Verdict {
            request_id: verdict.request_id.clone(),
        },
    )
    .await?;
    Ok(Outcome::Done)
}

/// Every backup `target` builds on, through its parent and its volumes' parents, as the
/// catalog's leader has them (at most 10,000).
async fn ancestors_of(
    catalog: &sexton_shared::catalog::Catalog,
    cluster: &sexton_model::names::ClusterName,
    target: &sexton_model::records::BackupRecord,
) -> anyhow::Result<std::collections::HashSet<String>> {
    let mut seen = std::collections::HashSet::new();
    let mut queue = crate::verify::parents(target);
    while let Some(id) = queue.pop() {
        if seen.len() >= 10_000 || !seen.insert(id.clone()) {
            continue;
        }
        let Ok(backup) = sexton_model::names::BackupId::new(&id) else {
            continue;
        };
        if let Lookup::Live(parent) = catalog.lookup(cluster, &backup).await? {
            queue.extend(crate::verify::parents(&parent.value));
        }
    }
    Ok(seen)
}
