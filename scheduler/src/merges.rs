//! Merge reports: a merge job done (Trilio's consolidation, or one volume's under
//! `chain_mode: merge`) makes its target a synthetic full, then a retention sweep lets the
//! merged sources go.

use std::time::Duration;

use chrono::Utc;
use sexton_model::{
    records::{BackupKind, BackupRecord, BackupStatus},
    wire::{MergeDone, ObjectDigest, Report, ReportStatus},
};
use sexton_shared::{
    catalog::{CasError, Catalog},
    channels,
    outcome::Outcome,
    topology::Topology,
};

use crate::intake;

/// Records a merge job done (Trilio's consolidation): the target becomes a synthetic full
/// (kind full, no parent) listing its old objects and the consolidated ones, then a retention
/// sweep of the cluster lets the sources go through the deleter, since nothing needs them now.
/// Refused (and nothing written) unless the target is still the backup the job named (its
/// uid), completed, and still builds on exactly the merged chain (each source on the one
/// before, the first a full), and the report keeps every object the target had. A repeated
/// report is a no-op.
pub(crate) async fn record_merge(
    topology: &Topology,
    catalog: &Catalog,
    gate: &intake::Intake,
    report: &Report,
    merge: &MergeDone,
) -> anyhow::Result<Outcome> {
    let poison = |why: String| {
        Ok(Outcome::Poison(format!(
            "merge into {}: {why}",
            report.backup_id
        )))
    };
    if report.status != ReportStatus::Completed
        || report.kind != BackupKind::Full
        || report.parent.is_some()
        || !report.volumes.is_empty()
        || merge.sources.is_empty()
    {
        return poison(
            "a merge report is a completed full with no parent, no volumes and its sources".into(),
        );
    }
    for _ in 0..5 {
        let Some(current) = catalog.get(&report.cluster, &report.backup_id).await? else {
            return poison("no such backup".into());
        };
        let record = &current.value;
        if record.uid != merge.target_uid || record.backup_name != report.backup_name {
            return poison("the backup is not the one the merge was asked for".into());
        }
        let recorded = record.kind == BackupKind::Full
            && record.parent.is_none()
            && report
                .artifacts
                .iter()
                .all(|k| record.artifacts.contains(k));
        if recorded {
            // Recorded before (a redelivery, or the sweep below failed): ask again.
            sweep_after_merge(topology, report, &record.uid).await?;
            return Ok(Outcome::Done);
        }
        if record.status != BackupStatus::Completed || !record.volumes.is_empty() {
            return poison(format!(
                "the backup is {:?}{}; nothing recorded",
                record.status,
                if record.volumes.is_empty() {
                    ""
                } else {
                    " with volumes"
                }
            ));
        }
        if record.parent.as_ref() != merge.sources.last() {
            return poison(format!(
                "the backup builds on {:?}, not on the merged chain's last {:?}",
                record.parent,
                merge.sources.last()
            ));
        }
        let whole = |source: &BackupRecord| {
            Some((source.kind, source.parent.as_ref().map(|p| p.to_string())))
        };
        if let Err(why) =
            check_merged_chain(catalog, &report.cluster, &merge.sources, whole).await?
        {
            return poison(why);
        }
        if let Some(key) = record
            .artifacts
            .iter()
            .find(|k| !report.artifacts.contains(k))
        {
            return poison(format!("the report drops the backup's object {key}"));
        }
        let mut updated = record.clone();
        updated.kind = BackupKind::Full;
        updated.parent = None;
        updated.artifacts = report.artifacts.clone();
        updated.size_bytes = add_bytes(record.size_bytes, report.size_bytes);
        if !updated.tags.iter().any(|t| t == "synthetic-full") {
            updated.tags.push("synthetic-full".into());
        }
        if let Err(outcome) = see_merged_objects(gate, report, record, &mut updated).await {
            return outcome;
        }
        match catalog.update(&updated, current.revision).await {
            Ok(_) => {
                tracing::info!(cluster = %report.cluster, target = %report.backup_id, sources = ?merge.sources, "merge recorded: the target is a synthetic full");
                sweep_after_merge(topology, report, &record.uid).await?;
                return Ok(Outcome::Done);
            }
            Err(CasError::Conflict) => continue,
            Err(CasError::Other(err)) => return Err(err),
        }
    }
    Ok(Outcome::RetryAfter(Duration::from_millis(500)))
}

/// Records a volume merge done (issue 8: `chain_mode: merge` on a schedule with volumes): the
/// target's artifact of `volume` becomes a synthetic full (kind full, no parent) listing its old
/// keys and the consolidated ones; the target's other volumes are untouched. Then a retention
/// sweep lets the sources' artifacts of that volume go. Refused (and nothing written) unless
/// the target is still the backup the job named, completed, its volume still builds on exactly
/// the merged chain of that volume (each source's artifact on the one before, the first a
/// full), and the report keeps every key the volume had and lists no other volume. A repeated
/// report is a no-op.
pub(crate) async fn record_volume_merge(
    topology: &Topology,
    catalog: &Catalog,
    gate: &intake::Intake,
    report: &Report,
    merge: &MergeDone,
    volume: &str,
) -> anyhow::Result<Outcome> {
    let poison = |why: String| {
        Ok(Outcome::Poison(format!(
            "merge of volume {volume} into {}: {why}",
            report.backup_id
        )))
    };
    if let Err(err) = sexton_model::names::check_name("volume name", volume) {
        return poison(err.to_string());
    }
    let reported = match report.volumes.as_slice() {
        [only] if only.name == volume && only.kind == BackupKind::Full && only.parent.is_none() => {
            only
        }
        _ => {
            return poison(
                "a volume merge report lists exactly that volume, a full with no parent".into(),
            )
        }
    };
    if report.status != ReportStatus::Completed
        || report
            .artifacts
            .iter()
            .any(|k| !reported.keys.contains(k) && !BackupRecord::is_metadata_key(k))
        || merge.sources.is_empty()
    {
        return poison(
            "a volume merge report is completed, lists only the volume's keys and names its sources"
                .into(),
        );
    }
    for _ in 0..5 {
        let Some(current) = catalog.get(&report.cluster, &report.backup_id).await? else {
            return poison("no such backup".into());
        };
        let record = &current.value;
        if record.uid != merge.target_uid || record.backup_name != report.backup_name {
            return poison("the backup is not the one the merge was asked for".into());
        }
        let Some(position) = record.volumes.iter().position(|v| v.name == volume) else {
            return poison("the backup has no such volume".into());
        };
        let artifact = &record.volumes[position];
        let recorded = artifact.kind == BackupKind::Full
            && artifact.parent.is_none()
            && reported.keys.iter().all(|k| artifact.keys.contains(k));
        if recorded {
            // Recorded before (a redelivery, or the sweep below failed): ask again.
            sweep_after_merge(topology, report, &format!("{}.{volume}", record.uid)).await?;
            return Ok(Outcome::Done);
        }
        if record.status != BackupStatus::Completed || artifact.expiring {
            return poison(format!(
                "the backup is {:?}{}; nothing recorded",
                record.status,
                if artifact.expiring {
                    " and the volume is being deleted"
                } else {
                    ""
                }
            ));
        }
        if artifact.parent.as_deref() != merge.sources.last().map(|id| id.as_str()) {
            return poison(format!(
                "the volume builds on {:?}, not on the merged chain's last {:?}",
                artifact.parent,
                merge.sources.last()
            ));
        }
        let of_volume = |source: &BackupRecord| {
            let artifact = source.volumes.iter().find(|v| v.name == volume)?;
            Some((artifact.kind, artifact.parent.clone()))
        };
        if let Err(why) =
            check_merged_chain(catalog, &report.cluster, &merge.sources, of_volume).await?
        {
            return poison(why);
        }
        if let Some(key) = artifact.keys.iter().find(|k| !reported.keys.contains(k)) {
            return poison(format!("the report drops the volume's object {key}"));
        }
        // Deleting this volume later deletes its keys: none may be another volume's.
        let others = record.volumes.iter().filter(|v| v.name != volume);
        if let Some(key) = others
            .flat_map(|v| &v.keys)
            .find(|k| reported.keys.contains(k))
        {
            return poison(format!("the report claims {key}, another volume's object"));
        }
        let mut updated = record.clone();
        {
            let artifact = &mut updated.volumes[position];
            artifact.kind = BackupKind::Full;
            artifact.parent = None;
            artifact.keys = reported.keys.clone();
            artifact.size_bytes = add_bytes(artifact.size_bytes, reported.size_bytes);
        }
        for key in &reported.keys {
            if !updated.artifacts.contains(key) {
                updated.artifacts.push(key.clone());
            }
        }
        if updated.volumes.iter().all(|v| v.kind == BackupKind::Full) {
            updated.kind = BackupKind::Full;
        }
        updated.size_bytes = add_bytes(record.size_bytes, report.size_bytes);
        let tag = format!("synthetic-full:{volume}");
        if !updated.tags.contains(&tag) {
            updated.tags.push(tag);
        }
        if let Err(outcome) = see_merged_objects(gate, report, record, &mut updated).await {
            return outcome;
        }
        match catalog.update(&updated, current.revision).await {
            Ok(_) => {
                tracing::info!(cluster = %report.cluster, target = %report.backup_id, volume, sources = ?merge.sources, "volume merge recorded: the target's volume is a synthetic full");
                sweep_after_merge(topology, report, &format!("{}.{volume}", record.uid)).await?;
                return Ok(Outcome::Done);
            }
            Err(CasError::Conflict) => continue,
            Err(CasError::Other(err)) => return Err(err),
        }
    }
    Ok(Outcome::RetryAfter(Duration::from_millis(500)))
}

/// The consolidated objects must be in the bucket before the sources may go: `updated` names
/// them as seen now, with their total size, or the report's outcome says why not.
async fn see_merged_objects(
    gate: &intake::Intake,
    report: &Report,
    record: &BackupRecord,
    updated: &mut BackupRecord,
) -> Result<(), anyhow::Result<Outcome>> {
    let seen = merged_objects(gate, report).await?;
    updated.objects = with_seen(&record.objects, &seen);
    updated.seen_at = Some(Utc::now());
    if let Some(total) = size_of_objects(updated) {
        updated.size_bytes = Some(total);
    }
    Ok(())
}

/// Intake of a merge report: the objects it lists as seen, or the outcome that ends the report
/// (refused: poison, naming the merge as the other refusals do; unreadable bucket: retry).
async fn merged_objects(
    gate: &intake::Intake,
    report: &Report,
) -> Result<Vec<ObjectDigest>, anyhow::Result<Outcome>> {
    let what = match report.merge.as_ref().and_then(|m| m.volume.as_deref()) {
        Some(volume) => format!("merge of volume {volume} into {}", report.backup_id),
        None => format!("merge into {}", report.backup_id),
    };
    match intake::examine(&gate.store, report).await {
        Ok(intake::Verdict::Seen(seen)) => {
            gate.metrics.with_label_values(&["seen"]).inc();
            Ok(seen)
        }
        Ok(intake::Verdict::Refused(problems)) => {
            gate.metrics.with_label_values(&["refused"]).inc();
            Err(Ok(Outcome::Poison(format!(
                "{what}: {}",
                intake::Verdict::reason(&problems)
            ))))
        }
        Err(err) => {
            gate.metrics.with_label_values(&["retry"]).inc();
            tracing::warn!(cluster = %report.cluster, backup = %report.backup_id, error = %err, "cannot read the merged objects; the report waits");
            Err(Ok(Outcome::RetryAfter(Duration::from_secs(5))))
        }
    }
}

/// The bytes of every object of the record, when intake has seen them all.
fn size_of_objects(record: &BackupRecord) -> Option<u64> {
    record
        .all_keys()
        .iter()
        .map(|key| {
            record
                .objects
                .iter()
                .find(|o| &o.key == key)
                .map(|o| o.size)
        })
        .try_fold(0u64, |total, size| Some(total + size?))
}

/// A record's objects with those intake saw just now put in: same key replaced, new appended.
fn with_seen(objects: &[ObjectDigest], seen: &[ObjectDigest]) -> Vec<ObjectDigest> {
    let mut merged: Vec<ObjectDigest> = objects
        .iter()
        .filter(|o| !seen.iter().any(|s| s.key == o.key))
        .cloned()
        .collect();
    merged.extend(seen.iter().cloned());
    merged
}

/// A size plus what a merge added; either alone when the other is unknown.
fn add_bytes(size: Option<u64>, added: Option<u64>) -> Option<u64> {
    match (size, added) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// Whether `sources` (oldest first) are still where the merged chain had them: the first a
/// full, each other building on the one before, as `link` reads a backup (its own kind and
/// parent, or one volume's; `None` when it holds no such artifact). `Ok(Err(why))` when not.
async fn check_merged_chain(
    catalog: &Catalog,
    cluster: &sexton_model::names::ClusterName,
    sources: &[sexton_model::names::BackupId],
    link: impl Fn(&BackupRecord) -> Option<(BackupKind, Option<String>)>,
) -> anyhow::Result<Result<(), String>> {
    for (n, id) in sources.iter().enumerate() {
        let Some(source) = catalog.get(cluster, id).await? else {
            return Ok(Err(format!("source {id} is gone")));
        };
        let Some((kind, parent)) = link(&source.value) else {
            return Ok(Err(format!("source {id} has no artifact of the volume")));
        };
        let expected = n.checked_sub(1).map(|before| sources[before].as_str());
        if parent.as_deref() != expected || (n == 0 && kind != BackupKind::Full) {
            return Ok(Err(format!(
                "source {id} is not where the merged chain had it"
            )));
        }
    }
    Ok(Ok(()))
}

/// Asks for a retention sweep of the cluster: the merged sources can go now.
async fn sweep_after_merge(topology: &Topology, report: &Report, uid: &str) -> anyhow::Result<()> {
    channels::request_sweep(
        &topology.jetstream,
        &report.cluster,
        Utc::now(),
        false,
        &channels::SweepCause::MergeRecorded {
            uid: uid.to_string(),
        },
    )
    .await?;
    Ok(())
}
