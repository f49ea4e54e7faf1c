//! `sexton audit [--cluster C] [--backup ID] [--since 24h] [-o json]`: the audit trail
//! (docs/safety.md), oldest first. Reads `SEXTON_AUDIT` with an ordered consumer that starts
//! at `--since` and is filtered to the cluster's subjects; `--backup` keeps the entries that
//! name the backup.

use anyhow::Context as _;
use async_nats::jetstream::consumer::DeliverPolicy;
use chrono::{DateTime, Utc};
use sexton_model::names::ClusterName;
use sexton_shared::{audit::AuditEntry, topology};

/// What to read.
#[derive(Debug, Clone)]
pub struct Query {
    pub cluster: Option<ClusterName>,
    pub backup: Option<String>,
    /// Entries stored at or after this instant; `None`: all.
    pub since: Option<DateTime<Utc>>,
}

/// The entries `query` selects, oldest first.
pub async fn read(client: &async_nats::Client, query: &Query) -> anyhow::Result<Vec<AuditEntry>> {
    let jetstream = async_nats::jetstream::new(client.clone());
    let stream = jetstream
        .get_stream(topology::STREAM_AUDIT)
        .await
        .context("opening the audit stream (is the fleet's topology created?)")?;
    let deliver_policy = match query.since {
        None => DeliverPolicy::All,
        Some(since) => DeliverPolicy::ByStartTime {
            start_time: time::OffsetDateTime::from_unix_timestamp(since.timestamp())
                .context("--since is out of range")?,
        },
    };
    let mut entries = Vec::new();
    sexton_shared::stream_read::read_ordered(
        &stream,
        vec![sexton_shared::audit::filter(query.cluster.as_ref())],
        deliver_policy,
        "the audit stream",
        |entry| {
            match serde_json::from_slice::<AuditEntry>(entry.payload) {
                Ok(entry) => {
                    if query.backup.as_deref().is_none_or(|id| entry.mentions(id)) {
                        entries.push(entry);
                    }
                }
                Err(err) => tracing::warn!(error = %err, "an unreadable audit entry was skipped"),
            }
            Ok(())
        },
    )
    .await?;
    Ok(entries)
}

/// What an entry says about backup `id`, as indented lines under its row: the reasons, the
/// policy's hash, the volumes and every object with its size.
fn details(entry: &AuditEntry, id: &str) -> Vec<String> {
    use sexton_shared::audit::AuditEvent;
    let backups = match &entry.event {
        AuditEvent::BackupsMarked { backups, .. }
        | AuditEvent::BackupsClaimed { backups }
        | AuditEvent::ObjectsDeleted { backups }
        | AuditEvent::RecordsRemoved { backups }
        | AuditEvent::CopiesMarked { backups, .. }
        | AuditEvent::CopyClaimed { backups, .. }
        | AuditEvent::CopyDeleted { backups, .. } => backups.as_slice(),
        AuditEvent::TamperingFound { backups } => {
            return backups
                .iter()
                .filter(|b| b.id == id)
                .map(|b| {
                    format!(
                        "    {} at {}: {}",
                        b.id,
                        b.location.as_deref().unwrap_or("primary"),
                        b.problems.join("; ")
                    )
                })
                .collect();
        }
        AuditEvent::RetentionDecision { decisions, .. } => {
            return decisions
                .iter()
                .filter(|d| d.id == id)
                .map(|d| format!("    {}: {}: {}", d.id, d.verdict, d.reasons.join("; ")))
                .collect();
        }
        _ => return Vec::new(),
    };
    let mut lines = Vec::new();
    for backup in backups.iter().filter(|b| b.id == id) {
        let mut line = format!("    {}: {}", backup.id, backup.reasons.join("; "));
        if let Some(hash) = &backup.policy_hash {
            line.push_str(&format!(" (policy {hash})"));
        }
        if !backup.volumes.is_empty() {
            line.push_str(&format!(" volumes {}", backup.volumes.join(", ")));
        }
        lines.push(line);
        for object in &backup.objects {
            lines.push(match object.size {
                Some(size) => format!("      {} ({size} bytes)", object.key),
                None => format!("      {}", object.key),
            });
        }
    }
    lines
}

/// The entries as a table: when, which service, cluster and plan, what, and in a word; with
/// `backup`, what each entry says about that backup under its row.
pub fn print_table(entries: &[AuditEntry], backup: Option<&str>) {
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|entry| {
            vec![
                entry.at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
                entry.service.clone(),
                entry
                    .cluster
                    .as_ref()
                    .map_or("-".to_string(), ToString::to_string),
                entry
                    .plan
                    .as_ref()
                    .map_or("-".to_string(), ToString::to_string),
                entry.event.kind().to_string(),
                entry.summary(),
            ]
        })
        .collect();
    let header = ["AT", "SERVICE", "CLUSTER", "PLAN", "KIND", "WHAT"];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate().take(5) {
            widths[i] = widths[i].max(cell.len());
        }
    }
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| match i {
                5 => c.clone(),
                _ => format!("{c:<width$}", width = widths[i]),
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    println!("{}", line(header.iter().map(|h| h.to_string()).collect()));
    for (row, entry) in rows.into_iter().zip(entries) {
        println!("{}", line(row));
        if let Some(id) = backup {
            for detail in details(entry, id) {
                println!("{detail}");
            }
        }
    }
}
