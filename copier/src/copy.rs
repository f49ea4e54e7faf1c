//! Copying one backup: the job checked against the catalog and its rule, its missing
//! ancestors first, each backup's objects through bounded memory, `metadata.json` last.

use chrono::Utc;
use sexton_model::{
    copies::{self, destination_key, CopyJob, CopyState, CopyVerdict},
    names::{BackupId, LocationName},
    records::{BackupRecord, BackupStatus, ScheduleRecord},
};
use sexton_shared::object_store::copy::CopyError;

use crate::{
    outcome::{Done, Failure},
    record::{record_copy, record_skip, seen_at},
    report::incident,
    Copier, Location,
};

/// How deep a chain the copier follows to copy missing ancestors first.
const MAX_CHAIN: usize = 10_000;

/// What the backup's copy rule asks for it now ([`sexton_shared::planning::judge_copy`]): the rule is its
/// schedule's now; the group (for `select: kept`) the records of its plan as the catalog view
/// holds them, with `record` as just read.
async fn judge(
    copier: &Copier,
    record: &BackupRecord,
    location: &LocationName,
) -> Result<CopyVerdict, Failure> {
    let schedules = copier.schedules.of_cluster(&record.cluster).await?;
    let rule = sexton_model::records::rule_for(&schedules, record, location);
    let group = match rule {
        Some(rule) if rule.select == copies::CopySelect::Kept => copier
            .views
            .current_records(&record.cluster)
            .await?
            .into_iter()
            .filter(|other| other.plan == record.plan && other.id != record.id)
            .collect(),
        _ => Vec::new(),
    };
    let mut members: Vec<&BackupRecord> = group.iter().collect();
    members.push(record);
    Ok(sexton_shared::planning::judge_copy(
        &members,
        record,
        location,
        rule,
        Utc::now(),
    ))
}

pub(crate) async fn copy_backup(
    copier: &Copier,
    job: &CopyJob,
    location: &Location,
) -> Result<Done, Failure> {
    let Some(entry) = copier.catalog.get(&job.cluster, &job.backup_id).await? else {
        return Err(Failure::Refused(format!(
            "backup {} of {} is not in the catalog",
            job.backup_id, job.cluster
        )));
    };
    let record = entry.value;
    if record.uid != job.uid {
        return Err(Failure::Refused(format!(
            "backup {} of {} has uid {}, not the job's {}: the job is for another backup of that id",
            record.id, record.cluster, record.uid, job.uid
        )));
    }
    if !record.copy_to.contains(&job.location) {
        return Err(Failure::Refused(format!(
            "no copy rule sends backup {} of {} to {}",
            record.id, record.cluster, job.location
        )));
    }
    // Copied (or being deleted, or deleted) there already: nothing to do. A copy a scrub
    // found missing there is copied again.
    if record
        .copies
        .get(&job.location)
        .is_some_and(|copy| copy.state != CopyState::Missing)
    {
        return Ok(Done::Copied);
    }
    if record.status != BackupStatus::Completed {
        return Err(Failure::Refused(format!(
            "backup {} of {} is {:?}, not completed: it is not copied",
            record.id, record.cluster, record.status
        )));
    }
    match judge(copier, &record, &job.location).await? {
        CopyVerdict::Copy => {}
        CopyVerdict::NotBefore(due) => {
            tracing::info!(cluster = %record.cluster, backup = %record.id, location = %job.location, due = %due, "copy delayed by its rule; the periodic pass makes it then");
            return Ok(Done::Deferred);
        }
        CopyVerdict::Skip(reasons) => {
            record_skip(copier, &record, &job.location, reasons).await?;
            return Ok(Done::Skipped);
        }
    }
    // The chain first: an incremental counts at a location only with its ancestors there.
    let chain = ancestors_missing(copier, &record, &job.location).await?;
    // Objects in another store than the one this copier reads (issue 54) are not missing:
    // the copy waits until they are moved (`sexton catalog migrate`).
    let here = copier.source.place();
    if let Some((stranded, there)) = std::iter::once(&record)
        .chain(chain.iter())
        .find_map(|r| Some((r, r.stranded_from(here)?)))
    {
        return Err(Failure::Refused(format!(
            "backup {} of {} is recorded in {there}, not in {here} where this copier reads: not \
             copied until it is moved (sexton catalog migrate)",
            stranded.id, stranded.cluster
        )));
    }
    let class = storage_class(copier, &record, &job.location, location).await?;
    for ancestor in chain.iter().rev() {
        copy_record(copier, ancestor, &job.location, location, class.as_deref()).await?;
    }
    copy_record(copier, &record, &job.location, location, class.as_deref()).await?;
    Ok(Done::Copied)
}

/// The ancestors of `record` not yet copied to `location`, nearest first.
async fn ancestors_missing(
    copier: &Copier,
    record: &BackupRecord,
    location: &LocationName,
) -> Result<Vec<BackupRecord>, Failure> {
    let mut missing = Vec::new();
    let mut queue: Vec<BackupId> = parents(record);
    let mut seen = std::collections::BTreeSet::new();
    while let Some(id) = queue.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        if seen.len() > MAX_CHAIN {
            return Err(Failure::Refused(format!(
                "the chain of backup {} is longer than {MAX_CHAIN}",
                record.id
            )));
        }
        let Some(parent) = copier.catalog.get(&record.cluster, &id).await? else {
            return Err(Failure::Bad(incident(
                &record.cluster,
                &record.id,
                "copy-chain-broken",
                format!(
                    "backup {} needs {id}, which the catalog does not hold: its chain cannot \
                     be copied to {location} whole",
                    record.id
                ),
            )));
        };
        let parent = parent.value;
        match parent.copies.get(location) {
            Some(copy) if copy.state == CopyState::Copied => continue,
            // Deleted there before this backup needed it, or found missing there by a scrub:
            // copied again.
            Some(copy)
                if matches!(
                    copy.state,
                    CopyState::Deleted | CopyState::Missing | CopyState::Skipped
                ) => {}
            // Its copy there is being deleted (the location's retention let it go before
            // this backup was there to need it): once it is gone, it is copied again.
            Some(copy) => {
                return Err(Failure::Wait(format!(
                    "the copy of {} at {location}, which backup {} needs, is {}; it is copied \
                     again once its deletion finished",
                    parent.id,
                    record.id,
                    copy.state.as_str()
                )))
            }
            None => {}
        }
        if parent.status != BackupStatus::Completed && parent.status != BackupStatus::Expiring {
            // A completed backup's ancestor that is not completed never will be: the chain
            // cannot be whole anywhere, which is news, not lag.
            return Err(Failure::Bad(incident(
                &record.cluster,
                &record.id,
                "copy-chain-broken",
                format!(
                    "backup {} needs {}, which is {:?}: its chain cannot be copied to \
                     {location} whole",
                    record.id, parent.id, parent.status
                ),
            )));
        }
        queue.extend(parents(&parent));
        missing.push(parent);
    }
    Ok(missing)
}

fn parents(record: &BackupRecord) -> Vec<BackupId> {
    let mut parents: Vec<BackupId> = record.parent.iter().cloned().collect();
    for volume in &record.volumes {
        if let Some(parent) = volume.parent.as_deref().and_then(|p| BackupId::new(p).ok()) {
            if !parents.contains(&parent) {
                parents.push(parent);
            }
        }
    }
    parents
}

/// The class the copy is written in: its rule's, else the location's default.
async fn storage_class(
    copier: &Copier,
    record: &BackupRecord,
    name: &LocationName,
    location: &Location,
) -> Result<Option<String>, Failure> {
    let Some(schedule) = &record.schedule else {
        return Ok(location.storage_class.clone());
    };
    let rule_class =
        match sexton_shared::leader_read::value(&copier.topology.schedules, schedule.as_str())
            .await?
        {
            Some(body) => serde_json::from_slice::<ScheduleRecord>(&body)
                .ok()
                .and_then(|s| s.copies.into_iter().find(|rule| &rule.to == name))
                .and_then(|rule| rule.storage_class),
            None => None,
        };
    Ok(rule_class.or_else(|| location.storage_class.clone()))
}

/// Copies one backup's objects (`metadata.json` last), then records the copy.
async fn copy_record(
    copier: &Copier,
    record: &BackupRecord,
    name: &LocationName,
    location: &Location,
    class: Option<&str>,
) -> Result<(), Failure> {
    if record.objects.is_empty() {
        return Err(Failure::Bad(incident(
            &record.cluster,
            &record.id,
            "copy-unprovable",
            format!(
                "backup {} has no sizes and checksums recorded (it predates intake): a copy of \
                 it to {name} could not be proven whole, so none is made",
                record.id
            ),
        )));
    }
    let started = std::time::Instant::now();
    let mut objects = record.objects.clone();
    // metadata.json last: a copy without it is not a backup to anyone who lists the location.
    objects.sort_by_key(|object| BackupRecord::is_metadata_key(&object.key));
    let mut written = Vec::with_capacity(objects.len());
    for object in &objects {
        if copier
            .source
            .check_key(&record.cluster, &object.key)
            .is_err()
        {
            return Err(Failure::Refused(format!(
                "backup {} lists {:?}, outside its cluster's prefix",
                record.id, object.key
            )));
        }
        let Some(target) =
            destination_key(copier.source.prefix(), location.store.prefix(), &object.key)
        else {
            return Err(Failure::Refused(format!(
                "backup {} lists {:?}, outside the source's prefix",
                record.id, object.key
            )));
        };
        match copier
            .source
            .copy_object_to(object, &location.store, &target, copier.settings, class)
            .await
        {
            Ok(digest) => {
                copier
                    .metrics
                    .bytes
                    .with_label_values(&[name.as_str()])
                    .inc_by(digest.size);
                copier
                    .metrics
                    .objects
                    .with_label_values(&[name.as_str()])
                    .inc();
                written.push(digest);
            }
            Err(err @ (CopyError::Corrupt { .. } | CopyError::Missing { .. })) => {
                return Err(Failure::Bad(incident(
                    &record.cluster,
                    &record.id,
                    "copy-refused",
                    format!(
                        "backup {} not copied to {name}: {err}; nothing of it counts there",
                        record.id
                    ),
                )))
            }
            Err(err) => return Err(Failure::Wait(err.to_string())),
        }
    }
    seen_at(&location.store, record, name, &written).await?;
    record_copy(copier, record, (name, location), written, class).await?;
    copier
        .metrics
        .seconds
        .with_label_values(&[name.as_str()])
        .observe(started.elapsed().as_secs_f64());
    tracing::info!(cluster = %record.cluster, backup = %record.id, location = %name, objects = objects.len(), "backup copied");
    Ok(())
}
