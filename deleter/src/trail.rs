//! The deleter's audit entries (docs/safety.md): per batch and cluster, the backups it claimed
//! (before any object goes), the objects it deleted with their sizes, the records it removed and
//! the delete plugins it called, each backup with the reasons and the policy hash that let it go.
//! One entry per batch, step and cluster (split only when very long), published together, so a
//! batch of a thousand backups costs a handful of messages, not thousands.

use std::collections::{BTreeMap, HashMap, HashSet};

use sexton_model::{names::ClusterName, records::BackupRecord};
use sexton_shared::audit::{
    Audit, AuditBackup, AuditError, AuditEvent, AuditObject, PluginCallEntry,
};

/// One backup as the entries describe it: `objects` are the keys given (sizes from the
/// record's intake, when known).
pub fn backup(
    record: &BackupRecord,
    revision: u64,
    volumes: &[String],
    objects: &[String],
) -> AuditBackup {
    let sizes: HashMap<&str, u64> = record
        .objects
        .iter()
        .map(|o| (o.key.as_str(), o.size))
        .collect();
    AuditBackup {
        id: record.id.to_string(),
        uid: record.uid.clone(),
        revision: Some(revision),
        reasons: record.delete_reasons.clone(),
        policy_hash: record.delete_policy.clone(),
        volumes: volumes.to_vec(),
        objects: objects
            .iter()
            .map(|key| AuditObject {
                key: key.clone(),
                size: sizes.get(key.as_str()).copied(),
            })
            .collect(),
    }
}

/// The objects of `keys` that are in `gone`, in `keys`' order.
pub fn gone_keys(keys: &[String], gone: &HashSet<String>) -> Vec<String> {
    keys.iter()
        .filter(|key| gone.contains(*key))
        .cloned()
        .collect()
}

/// What one batch has to say, gathered as it goes and published at its end.
#[derive(Default)]
pub struct BatchTrail {
    objects: BTreeMap<ClusterName, Vec<AuditBackup>>,
    records: BTreeMap<ClusterName, Vec<AuditBackup>>,
    plugins: BTreeMap<ClusterName, Vec<PluginCallEntry>>,
}

impl BatchTrail {
    pub fn objects_deleted(&mut self, cluster: &ClusterName, backup: AuditBackup) {
        self.objects
            .entry(cluster.clone())
            .or_default()
            .push(backup);
    }

    pub fn record_removed(&mut self, cluster: &ClusterName, backup: AuditBackup) {
        self.records
            .entry(cluster.clone())
            .or_default()
            .push(backup);
    }

    pub fn plugin_called(&mut self, cluster: &ClusterName, call: PluginCallEntry) {
        self.plugins.entry(cluster.clone()).or_default().push(call);
    }

    /// Publishes everything gathered. The deletions are done: a failure is logged and counted
    /// (`sexton_audit_entries_total{outcome="failed"}`), and the claim entries already said
    /// what was going to go.
    pub async fn publish(self, audit: &Audit) {
        let mut entries = Vec::new();
        for (cluster, calls) in self.plugins {
            entries.extend(audit.entries(Some(&cluster), None, calls, |calls| {
                AuditEvent::PluginCalls { calls }
            }));
        }
        for (cluster, backups) in self.objects {
            entries.extend(audit.entries(Some(&cluster), None, backups, |backups| {
                AuditEvent::ObjectsDeleted { backups }
            }));
        }
        for (cluster, backups) in self.records {
            entries.extend(audit.entries(Some(&cluster), None, backups, |backups| {
                AuditEvent::RecordsRemoved { backups }
            }));
        }
        if !entries.is_empty() {
            let _ = audit.record(entries).await;
        }
    }
}

/// The claim entries of a batch: what is about to go, before anything goes.
pub async fn claimed(
    audit: &Audit,
    claims: Vec<(ClusterName, AuditBackup)>,
) -> Result<(), AuditError> {
    let mut by_cluster: BTreeMap<ClusterName, Vec<AuditBackup>> = BTreeMap::new();
    for (cluster, backup) in claims {
        by_cluster.entry(cluster).or_default().push(backup);
    }
    let mut entries = Vec::new();
    for (cluster, backups) in by_cluster {
        entries.extend(audit.entries(Some(&cluster), None, backups, |backups| {
            AuditEvent::BackupsClaimed { backups }
        }));
    }
    if entries.is_empty() {
        return Ok(());
    }
    audit.record(entries).await
}
