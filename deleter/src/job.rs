//! One delete job: decode → verify (pure, [`verify`]) → claim → delete objects (data first,
//! `metadata.json` last) → remove the record → an [`Outcome`].

use std::{sync::Arc, time::Duration};

use async_nats::jetstream;
use chrono::Utc;
use sexton_shared::{
    catalog::{CasError, Catalog, Versioned},
    config::Config,
    object_store::{check_backup_key, ObjectStore},
    outcome::{publish_incident, Outcome},
    records::{BackupRecord, BackupStatus},
    topology::Topology,
    wire::{self, DeleteJob, Incident},
};

use crate::metrics::Metrics;

/// What the catalog says about a job, decided without I/O.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The record is gone: an earlier delivery finished the work.
    AlreadyDone,
    /// The job must not run; nothing is deleted.
    Refuse(String),
    /// The backup is expiring at the job's revision: claim it.
    Claim,
    /// An earlier delivery of this job claimed it and was interrupted: finish.
    Resume,
}

/// Checks a job against the current catalog record. A deleter deletes only what the catalog
/// says may go, at the revision the job names, under the cluster's prefix.
pub fn verify(job: &DeleteJob, current: Option<&Versioned<BackupRecord>>, prefix: &str) -> Verdict {
    let Some(current) = current else {
        return Verdict::AlreadyDone;
    };
    let record = &current.value;
    if record.uid != job.uid {
        return Verdict::Refuse(format!(
            "backup {} has unique id {}, the job names {}",
            record.id, record.uid, job.uid
        ));
    }
    if record.legal_hold {
        return Verdict::Refuse(format!("backup {} is under legal hold", record.id));
    }
    if !record.holds.is_empty() {
        return Verdict::Refuse(format!(
            "backup {} is held: {}",
            record.id,
            record.holds.join(", ")
        ));
    }
    for key in &record.artifacts {
        if let Err(err) = check_backup_key(
            prefix,
            &record.cluster,
            &record.backup_name,
            record.id.as_str(),
            key,
        ) {
            return Verdict::Refuse(err.to_string());
        }
    }
    match record.status {
        BackupStatus::Expiring if current.revision == job.revision => Verdict::Claim,
        BackupStatus::Expiring => Verdict::Refuse(format!(
            "stale job: backup {} was marked expiring at revision {}, the job names {}",
            record.id, current.revision, job.revision
        )),
        BackupStatus::Deleting if record.expiring_revision == Some(job.revision) => Verdict::Resume,
        status => Verdict::Refuse(format!(
            "backup {} is {}, not expiring",
            record.id,
            serde_json::to_value(status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        )),
    }
}

/// Splits a backup's artifacts into data objects and metadata objects, each deleted as a batch,
/// data first, so an interrupted deletion stays discoverable by its metadata.
pub fn deletion_order(artifacts: &[String]) -> (Vec<String>, Vec<String>) {
    artifacts
        .iter()
        .cloned()
        .partition(|key| !BackupRecord::is_metadata_key(key))
}

#[derive(Clone)]
pub struct Deleter {
    topology: Topology,
    catalog: Catalog,
    store: ObjectStore,
    prefix: String,
    metrics: Arc<Metrics>,
}

impl Deleter {
    pub fn new(
        topology: Topology,
        store: ObjectStore,
        config: Config,
        metrics: Arc<Metrics>,
    ) -> Deleter {
        Deleter {
            catalog: Catalog::new(topology.catalog.clone()),
            topology,
            store,
            prefix: config.s3.prefix.clone(),
            metrics,
        }
    }

    #[tracing::instrument(skip_all, fields(subject = %message.subject, backup = tracing::field::Empty))]
    pub async fn handle(&self, message: &jetstream::Message) -> Outcome {
        let outcome = match wire::decode::<DeleteJob>(&message.payload) {
            Err(err) => Outcome::Poison(err.to_string()),
            Ok(job) => {
                tracing::Span::current().record("backup", job.backup_id.as_str());
                match self.run_job(&job).await {
                    Ok(outcome) => outcome,
                    Err(err) => {
                        tracing::warn!(backup = %job.backup_id, error = format!("{err:#}"), "delete job failed; will retry");
                        Outcome::RetryAfter(Duration::from_secs(2))
                    }
                }
            }
        };
        self.metrics
            .jobs
            .with_label_values(&[outcome.label()])
            .inc();
        outcome
    }

    async fn run_job(&self, job: &DeleteJob) -> anyhow::Result<Outcome> {
        let current = self.catalog.get(&job.cluster, &job.backup_id).await?;
        let (record, revision) = match verify(job, current.as_ref(), &self.prefix) {
            Verdict::AlreadyDone => return Ok(Outcome::Done),
            Verdict::Refuse(why) => return Ok(Outcome::Poison(why)),
            Verdict::Resume => {
                let current = current.expect("resume implies a record");
                (current.value, current.revision)
            }
            Verdict::Claim => {
                let current = current.expect("claim implies a record");
                let mut claimed = current.value.clone();
                claimed.status = BackupStatus::Deleting;
                claimed.expiring_revision = Some(job.revision);
                match self.catalog.update(&claimed, current.revision).await {
                    Ok(revision) => (claimed, revision),
                    // Another deleter claimed it, or it changed: the next delivery re-reads.
                    Err(CasError::Conflict) => {
                        return Ok(Outcome::RetryAfter(Duration::from_secs(1)))
                    }
                    Err(CasError::Other(err)) => return Err(err),
                }
            }
        };
        let started = std::time::Instant::now();
        // An immutable backup's objects are left to the bucket's lifecycle rules (seed 001):
        // only its record goes.
        if !record.immutable {
            let (data, metadata) = deletion_order(&record.artifacts);
            for batch in [data, metadata] {
                if batch.is_empty() {
                    continue;
                }
                match self.store.delete_keys(&batch).await {
                    Ok(n) => self.metrics.objects_deleted.inc_by(n as u64),
                    Err(err) if err.permanent => {
                        self.fail(record, revision, &err.to_string()).await?;
                        return Ok(Outcome::Done);
                    }
                    Err(err) => {
                        tracing::warn!(backup = %record.id, error = %err, "transient object store failure");
                        return Ok(Outcome::RetryAfter(Duration::from_secs(5)));
                    }
                }
            }
        }
        match self
            .catalog
            .remove(&record.cluster, &record.id, revision)
            .await
        {
            Ok(()) | Err(CasError::Conflict) => {}
            Err(CasError::Other(err)) => return Err(err),
        }
        self.metrics
            .delete_duration
            .observe(started.elapsed().as_secs_f64());
        tracing::info!(cluster = %record.cluster, backup = %record.id, reasons = ?record.delete_reasons, "backup deleted");
        Ok(Outcome::Done)
    }

    /// A permanent failure: mark the backup `delete-failed` with the reason, keep the record,
    /// and tell operators.
    async fn fail(
        &self,
        mut record: BackupRecord,
        revision: u64,
        reason: &str,
    ) -> anyhow::Result<()> {
        self.metrics
            .delete_failures
            .with_label_values(&["permanent"])
            .inc();
        record.status = BackupStatus::DeleteFailed;
        record.last_error = Some(reason.to_string());
        match self.catalog.update(&record, revision).await {
            Ok(_) | Err(CasError::Conflict) => {}
            Err(CasError::Other(err)) => return Err(err),
        }
        publish_incident(
            &self.topology.jetstream,
            Incident {
                schema_version: wire::SCHEMA_VERSION,
                service: "deleter".into(),
                kind: "delete-failed".into(),
                cluster: Some(record.cluster.to_string()),
                backup_id: Some(record.id.to_string()),
                subject: String::new(),
                reason: reason.to_string(),
                at: Utc::now(),
            },
        )
        .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sexton_shared::names::{BackupId, ClusterName, PlanName};

    fn record(status: BackupStatus) -> BackupRecord {
        serde_json::from_value(serde_json::json!({
            "id": "b1", "uid": "u1", "cluster": "c1", "plan": "p", "backup_name": "s",
            "kind": "full", "status": status,
            "artifacts": ["pre/c1/s/b1/backup.xbstream", "pre/c1/s/b1/metadata.json"],
        }))
        .unwrap()
    }

    fn job(revision: u64) -> DeleteJob {
        DeleteJob {
            schema_version: 1,
            cluster: ClusterName::new("c1").unwrap(),
            backup_id: BackupId::new("b1").unwrap(),
            uid: "u1".into(),
            revision,
            reasons: vec![],
        }
    }

    fn at(value: BackupRecord, revision: u64) -> Versioned<BackupRecord> {
        Versioned { value, revision }
    }

    #[test]
    fn verdicts() {
        let _ = PlanName::new("p").unwrap();
        assert_eq!(verify(&job(7), None, "pre"), Verdict::AlreadyDone);
        assert_eq!(
            verify(&job(7), Some(&at(record(BackupStatus::Expiring), 7)), "pre"),
            Verdict::Claim
        );
        let mut claimed = record(BackupStatus::Deleting);
        claimed.expiring_revision = Some(7);
        assert_eq!(
            verify(&job(7), Some(&at(claimed.clone(), 9)), "pre"),
            Verdict::Resume
        );
        let refused = [
            verify(&job(6), Some(&at(record(BackupStatus::Expiring), 7)), "pre"),
            verify(&job(6), Some(&at(claimed, 9)), "pre"),
            verify(
                &job(7),
                Some(&at(record(BackupStatus::Completed), 7)),
                "pre",
            ),
            verify(
                &job(7),
                Some(&at(record(BackupStatus::InProgress), 7)),
                "pre",
            ),
            verify(
                &DeleteJob {
                    uid: "other".into(),
                    ..job(7)
                },
                Some(&at(record(BackupStatus::Expiring), 7)),
                "pre",
            ),
            verify(
                &job(7),
                Some(&at(
                    BackupRecord {
                        legal_hold: true,
                        ..record(BackupStatus::Expiring)
                    },
                    7,
                )),
                "pre",
            ),
            verify(
                &job(7),
                Some(&at(
                    BackupRecord {
                        holds: vec!["restore:x".into()],
                        ..record(BackupStatus::Expiring)
                    },
                    7,
                )),
                "pre",
            ),
            verify(
                &job(7),
                Some(&at(
                    BackupRecord {
                        artifacts: vec!["pre/c1/s/b2/backup.xbstream".into()],
                        ..record(BackupStatus::Expiring)
                    },
                    7,
                )),
                "pre",
            ),
            verify(
                &job(7),
                Some(&at(
                    BackupRecord {
                        artifacts: vec!["pre/c2/s/b1/x".into()],
                        ..record(BackupStatus::Expiring)
                    },
                    7,
                )),
                "pre",
            ),
            verify(
                &job(7),
                Some(&at(
                    BackupRecord {
                        artifacts: vec!["pre/c1/../c2/x".into()],
                        ..record(BackupStatus::Expiring)
                    },
                    7,
                )),
                "pre",
            ),
        ];
        for verdict in refused {
            assert!(matches!(verdict, Verdict::Refuse(_)), "{verdict:?}");
        }
    }

    #[test]
    fn metadata_goes_last() {
        let (data, metadata) = deletion_order(&[
            "p/c/s/b/metadata.json".into(),
            "p/c/s/b/backup.xbstream".into(),
            "p/c/s/b/extra.bin".into(),
        ]);
        assert_eq!(data, vec!["p/c/s/b/backup.xbstream", "p/c/s/b/extra.bin"]);
        assert_eq!(metadata, vec!["p/c/s/b/metadata.json"]);
    }
}
