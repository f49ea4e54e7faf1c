//! The periodic pass over each (cluster, location) a copy rule names: the copies still
//! awaited there, the binlog archive, then the storage-class transitions due.

use std::{sync::Arc, time::Duration};

use chrono::Utc;
use sexton_model::{
    copies::{CopyJob, CopyState},
    names::{ClusterName, LocationName},
    records::BackupStatus,
    wire,
};
use sexton_shared::Shutdown;

use crate::{
    binlog, copy::copy_backup, outcome::Failure, report::report_bad, transitions, Copier, Location,
};

/// Every `interval`, for each (cluster, location) that a schedule's copy rule names and this
/// copier can write to: a binlog pass, then the storage-class transitions due.
pub(crate) async fn binlog_passes(
    copier: Arc<Copier>,
    interval: Duration,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.wait() => return Ok(()),
        }
        let schedules = match copier.schedules.all().await {
            Ok(schedules) => schedules,
            Err(err) => {
                tracing::warn!(
                    error = format!("{err:#}"),
                    "cannot read the schedules; binlog copies wait for the next pass"
                );
                continue;
            }
        };
        let pairs: std::collections::BTreeSet<(ClusterName, LocationName)> = schedules
            .iter()
            .flat_map(|schedule| {
                schedule
                    .copies
                    .iter()
                    .map(|rule| (schedule.cluster.clone(), rule.to.clone()))
            })
            .collect();
        for (cluster, name) in pairs {
            let Some(location) = copier.locations.get(&name) else {
                continue;
            };
            let one_at_a_time = match copier.turn(&cluster).await {
                Ok(Some(turn)) => turn,
                // Another replica's pass or job is on it: that replica does this pass's work.
                Ok(None) => continue,
                Err(err) => {
                    tracing::warn!(%cluster, error = format!("{err:#}"), "cannot take the cluster's copy lease; the next pass tries again");
                    continue;
                }
            };
            copy_awaited(&copier, &cluster, &name, location).await;
            binlog::pass(&copier, &cluster, &name, location).await;
            match transitions::pass(&copier, &cluster, &name, location, &schedules).await {
                Ok(moved) => {
                    for (outcome, n) in [("moved", moved.copies), ("retry", moved.failed)] {
                        copier
                            .metrics
                            .transitions
                            .with_label_values(&[name.as_str(), outcome])
                            .inc_by(n as u64);
                    }
                }
                Err(err) => {
                    tracing::warn!(%cluster, location = %name, error = format!("{err:#}"), "storage-class transitions not done; the next pass tries again")
                }
            }
            drop(one_at_a_time);
        }
    }
}

/// How long after a copy was due (its backup completed, plus its rule's delay) the periodic
/// pass makes it itself when it is still awaited: its job is lost, or failing.
const JOB_GRACE: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// Makes the copies of `cluster` at `name` that no job will bring, while the source still
/// holds the backup (it keeps it for them: they are awaited):
/// - a copy a scrub of `name` found missing there (the scrub is the retention-worker's, and
///   only the scheduler publishes copy jobs);
/// - a copy whose rule's delay has passed (its job came early and was let go);
/// - any other copy awaited for longer than [`JOB_GRACE`] after it was due (a job lost).
///
/// The first copy that must wait (the location or the source not answering) ends the pass
/// for this location: the next pass tries again.
async fn copy_awaited(
    copier: &Copier,
    cluster: &ClusterName,
    name: &LocationName,
    location: &Location,
) {
    let records = match copier.views.current_records(cluster).await {
        Ok(records) => records,
        Err(err) => {
            tracing::warn!(%cluster, location = %name, error = format!("{err:#}"), "cannot read the catalog; missing copies wait for the next pass");
            return;
        }
    };
    let schedules = match copier.schedules.of_cluster(cluster).await {
        Ok(schedules) => schedules,
        Err(err) => {
            tracing::warn!(%cluster, location = %name, error = format!("{err:#}"), "cannot read the schedules; delayed copies wait for the next pass");
            return;
        }
    };
    let now = Utc::now();
    for record in records.iter().filter(|record| {
        record.held_at_primary()
            && record.stranded_from(copier.source.place()).is_none()
            && record.status == BackupStatus::Completed
            && match record.copies.get(name) {
                Some(copy) => copy.state == CopyState::Missing,
                None if record.copy_to.contains(name) => {
                    let delay = sexton_model::records::rule_for(&schedules, record, name)
                        .and_then(|r| r.delay);
                    let due = record.completed_at.map_or(now, |completed| {
                        completed.with_timezone(&Utc)
                            + delay.map_or(JOB_GRACE, |delay| delay.delta())
                    });
                    due <= now
                }
                None => false,
            }
    }) {
        let job = CopyJob {
            schema_version: wire::SCHEMA_VERSION,
            cluster: cluster.clone(),
            backup_id: record.id.clone(),
            uid: record.uid.clone(),
            location: name.clone(),
        };
        let (label, result) = match copy_backup(copier, &job, location).await {
            Ok(done) => (done.label(), None),
            Err(Failure::Refused(why)) => ("refused", Some(why)),
            Err(Failure::Wait(why)) => ("retry", Some(why)),
            Err(Failure::Bad(incident)) => {
                let why = incident.reason.clone();
                report_bad(copier, incident).await;
                ("refused", Some(why))
            }
        };
        copier
            .metrics
            .copies
            .with_label_values(&[name.as_str(), label])
            .inc();
        match result {
            None => {
                tracing::info!(%cluster, backup = %record.id, location = %name, "awaited copy {label}")
            }
            Some(why) => {
                tracing::warn!(%cluster, backup = %record.id, location = %name, "awaited copy not made yet: {why}");
                if label == "retry" {
                    return;
                }
            }
        }
    }
}
