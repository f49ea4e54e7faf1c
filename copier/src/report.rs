//! What the copier tells others: incidents, the scrub a refused copy asks for, and the
//! retention run a copy at a locking location asks for.

use chrono::Utc;
use sexton_model::{
    names::{BackupId, ClusterName, LocationName},
    wire::{self, Incident},
};
use sexton_shared::{channels, outcome::publish_incident};

use crate::Copier;

/// Asks for a retention run of `cluster` once a copy counts (or binlog segments landed) at a
/// location that locks: the location's run locks it now (issue 29), not at the next sweep.
/// Best effort: the periodic sweep comes anyway, and until a copy is locked no run there
/// counts it.
pub(crate) async fn ask_retention_run(
    copier: &Copier,
    cluster: &ClusterName,
    location: &LocationName,
    message_id: &str,
) {
    if let Err(err) = channels::request_sweep(
        &copier.topology.jetstream,
        cluster,
        Utc::now(),
        false,
        &channels::SweepCause::Copied {
            id: message_id.to_string(),
        },
    )
    .await
    {
        tracing::warn!(%cluster, %location, error = %err, "cannot ask for a retention run; the next sweep does it");
    }
}

/// Publishes a copy's bad news; where the source's data is not what intake recorded (an object
/// gone or changed), it is evidence about the backup (issue 54): the retention-worker is asked
/// for a scrub of the cluster, which marks a backup whose objects are gone `missing` (then no
/// copy of it is attempted again) and leaves one whose objects are all there as it is.
pub(crate) async fn report_bad(copier: &Copier, incident: Incident) {
    let scrub = (incident.kind == "copy-refused")
        .then(|| incident.cluster.as_deref().map(ClusterName::new))
        .flatten()
        .and_then(Result::ok);
    let backup = incident.backup_id.clone().unwrap_or_default();
    publish_incident(&copier.topology.jetstream, incident).await;
    let Some(cluster) = scrub else {
        return;
    };
    // Once per backup within the stream's de-duplication window, however often the job is
    // retried.
    if let Err(err) = channels::request_sweep(
        &copier.topology.jetstream,
        &cluster,
        Utc::now(),
        true,
        &channels::SweepCause::CopyRefused {
            backup: backup.clone(),
        },
    )
    .await
    {
        tracing::warn!(%cluster, backup, error = format!("{err:#}"), "could not ask for a scrub after a refused copy; the scheduled scrub finds it");
    }
}

pub(crate) fn incident(
    cluster: &ClusterName,
    backup: &BackupId,
    kind: &str,
    reason: String,
) -> Incident {
    Incident {
        schema_version: wire::SCHEMA_VERSION,
        service: "copier".into(),
        kind: kind.into(),
        cluster: Some(cluster.to_string()),
        backup_id: Some(backup.to_string()),
        subject: channels::COPY_JOBS.subject(cluster),
        reason,
        at: Utc::now(),
    }
}
