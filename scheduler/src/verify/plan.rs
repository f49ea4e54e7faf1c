//! The pure half of a restore test: which backup a test reads ([`pick`], or a drill's
//! [`drill_target`]), the chain a restore of it reads and where ([`chain_of`],
//! [`restore_chain`]), and the `verify-due` event that asks for it ([`event`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sexton_model::{
    copies::CopyState,
    digest,
    keys::StoreRef,
    names::{BackupId, LocationName, ScheduleName},
    records::{BackupRecord, BackupStatus, VerifyPick},
    wire::{self, VerifyBackup, VerifyDue, VerifyObject, VerifyReplay},
};
use sexton_schedule::CronSpec;

/// The request id of a schedule's test at `tick`: `<schedule>-<YYYYMMDDhhmmss>`.
pub fn request_id(schedule: &ScheduleName, tick: DateTime<Utc>) -> String {
    format!("{schedule}-{}", tick.format("%Y%m%d%H%M%S"))
}

/// The tick due now, if any: the newest tick of `cron` after `since` and not after `now` (a
/// schedule that missed several tests while no scheduler ran takes one, for the newest).
pub fn due_tick(
    cron: &CronSpec,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let mut tick = cron.next_after(since).filter(|t| *t <= now)?;
    for _ in 0..100_000 {
        match cron.next_after(tick) {
            Some(next) if next <= now => tick = next,
            _ => break,
        }
    }
    Some(tick)
}

/// Which of a schedule's backups a test proves. Candidates are backups the tested place can
/// restore ([`BackupRecord::restorable_at`]: at a location, every copy that counts there,
/// those primary already let go included), that no user asked to delete and no other test is
/// proving now. `Random` is drawn from the request id, so every replica draws the same backup.
pub fn pick<'a>(
    records: &[&'a BackupRecord],
    how: VerifyPick,
    request_id: &str,
    location: Option<&LocationName>,
) -> Option<&'a BackupRecord> {
    let mut candidates: Vec<&BackupRecord> = records
        .iter()
        .copied()
        .filter(|r| r.restorable_at(location).is_ok() && r.delete_request.is_none())
        .filter(|r| r.verification.as_ref().is_none_or(|v| v.pending.is_none()))
        .collect();
    candidates.sort_by_key(|r| (r.completed_at, r.id.to_string()));
    match how {
        VerifyPick::Latest => candidates.last().copied(),
        VerifyPick::OldestKept => candidates.first().copied(),
        VerifyPick::Random => {
            if candidates.is_empty() {
                return None;
            }
            let draw = u64::from_str_radix(&digest::short_digest([request_id]), 16).unwrap_or(0);
            Some(candidates[(draw % candidates.len() as u64) as usize])
        }
        VerifyPick::Each => candidates
            .into_iter()
            .find(|r| r.verification.as_ref().is_none_or(|v| v.history.is_empty())),
        // A drill picks an instant, not a backup: [`Verifier::drill_target`].
        VerifyPick::Point => None,
    }
}

/// A number in `0..1` drawn from `request_id`: the same on every replica.
fn draw(request_id: &str) -> f64 {
    let draw = u64::from_str_radix(&digest::short_digest([request_id]), 16).unwrap_or(0);
    (draw % 1_000_000) as f64 / 1_000_000.0
}

/// What a restore of `target` reads: its ancestors (through its parent and its volumes'
/// parents), oldest first, then the target. `Err` names a link the catalog lacks or that
/// cannot be restored (failed, missing, in progress): the test fails without an executor.
/// At a `location` a link's status at primary says nothing of its copy there (a parent primary
/// found `missing` may be whole at `dr`): [`chain_at`] judges the copies instead.
pub fn chain_of<'a>(
    by_id: &BTreeMap<&str, &'a BackupRecord>,
    target: &'a BackupRecord,
    location: Option<&LocationName>,
) -> Result<Vec<&'a BackupRecord>, String> {
    let mut chain: Vec<&BackupRecord> = vec![target];
    let mut queue: Vec<String> = parents(target);
    while let Some(id) = queue.pop() {
        if chain.iter().any(|r| r.id.as_str() == id) {
            continue;
        }
        let Some(parent) = by_id.get(id.as_str()) else {
            return Err(format!("its chain is broken: {id} is not in the catalog"));
        };
        if location.is_none()
            && matches!(
                parent.status,
                BackupStatus::Failed | BackupStatus::Missing | BackupStatus::InProgress
            )
        {
            return Err(format!(
                "its chain is broken: {id} is {}",
                parent.status.as_str()
            ));
        }
        if chain.len() > 10_000 {
            return Err("a chain of more than 10000 backups".into());
        }
        queue.extend(parents(parent));
        chain.push(parent);
    }
    chain.sort_by_key(|r| (r.completed_at, r.id.to_string()));
    // The target last, whatever the clocks said.
    chain.retain(|r| r.id != target.id);
    chain.push(target);
    Ok(chain)
}

pub(crate) fn parents(record: &BackupRecord) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if record.volumes.is_empty() {
        if record.kind == sexton_model::records::BackupKind::Incremental {
            out.extend(record.parent.as_ref().map(|p| p.to_string()));
        }
    } else {
        out.extend(record.volumes.iter().filter_map(|v| v.parent.clone()));
    }
    out.sort();
    out.dedup();
    out
}

/// What a restore of `target` reads ([`chain_of`]) where it would read it: at `location`, every
/// link's copy there must count ([`chain_at`]); at primary, every link must still be there (a
/// backup held only by copies names where it is). At either, every link must be in the store
/// the place's settings name now, `here` where known ([`in_store`]).
pub fn restore_chain<'a>(
    by_id: &BTreeMap<&str, &'a BackupRecord>,
    target: &'a BackupRecord,
    location: Option<&LocationName>,
    here: Option<&StoreRef>,
) -> Result<Vec<&'a BackupRecord>, String> {
    let chain = chain_of(by_id, target, location)?;
    match location {
        Some(name) => chain_at(&chain, name)?,
        None => {
            if let Some(gone) = chain.iter().find(|r| !r.held_at_primary()) {
                return Err(format!(
                    "{} is no longer at primary{}",
                    gone.id,
                    gone.held_at_text(None)
                ));
            }
        }
    }
    if let Some(here) = here {
        in_store(&chain, location, here)?;
    }
    Ok(chain)
}

/// Every link of a chain at `place` (`None`: primary) is in the store the place's settings
/// name now, `here` (issue 54); otherwise which is not, where it is, and the way to move it.
pub fn in_store(
    chain: &[&BackupRecord],
    place: Option<&LocationName>,
    here: &StoreRef,
) -> Result<(), String> {
    match chain
        .iter()
        .find_map(|r| Some((r, r.stranded_at(place, here)?)))
    {
        None => Ok(()),
        Some((record, there)) => Err(format!(
            "{} is recorded{} in {there}, not in {here} where {} is now: move it first with \
             `sexton catalog migrate --cluster {}{} --from-bucket {}` (docs/immutability.md)",
            record.id,
            place.map(|p| format!(" at {p}")).unwrap_or_default(),
            place.map_or("primary", |p| p.as_str()),
            record.cluster,
            place
                .map(|p| format!(" --location {p}"))
                .unwrap_or_default(),
            there.bucket
        )),
    }
}

/// A backup of a chain as the event carries it: its objects with what intake recorded; at a
/// location, its copy's objects there (each with the size and SHA-256 intake recorded).
pub fn verify_backup(record: &BackupRecord, location: Option<&LocationName>) -> VerifyBackup {
    let objects = match location.and_then(|name| record.copies.get(name)) {
        Some(copy) => copy
            .objects
            .iter()
            .map(|object| VerifyObject {
                key: object.key.clone(),
                size: Some(object.size),
                sha256: object.sha256.clone(),
                version_id: object.version_id.clone(),
            })
            .collect(),
        None => record
            .all_keys()
            .into_iter()
            .map(|key| {
                let seen = record.objects.iter().find(|o| o.key == key);
                VerifyObject {
                    size: seen.map(|o| o.size),
                    sha256: seen.and_then(|o| o.sha256.clone()),
                    version_id: seen.and_then(|o| o.version_id.clone()),
                    key,
                }
            })
            .collect(),
    };
    VerifyBackup {
        id: record.id.clone(),
        uid: record.uid.clone(),
        backup_name: record.backup_name.clone(),
        kind: record.kind,
        parent: record.parent.clone(),
        objects,
    }
}

/// Whether every backup of `chain` counts at `location` (its copy there `copied`): a test
/// there reads nothing else. `Err` names the first that does not.
pub fn chain_at(chain: &[&BackupRecord], location: &LocationName) -> Result<(), String> {
    for record in chain {
        match record.copies.get(location) {
            Some(copy) if copy.state == CopyState::Copied => {}
            Some(copy) => {
                return Err(format!(
                    "the copy of {} at {location} is {}, so the chain cannot be restored there",
                    record.id,
                    copy.state.as_str()
                ))
            }
            None => {
                return Err(format!(
                    "{} has no copy at {location}, so the chain cannot be restored there",
                    record.id
                ))
            }
        }
    }
    Ok(())
}

/// The verify-due event of `request_id` for `target` (its chain already worked out), reading
/// the copies at `location` when one is named.
pub fn event(
    request_id: &str,
    chain: &[&BackupRecord],
    requested_at: DateTime<Utc>,
    timeout: chrono::Duration,
    location: Option<&LocationName>,
    replay: Option<VerifyReplay>,
) -> VerifyDue {
    let target = chain.last().expect("a chain ends with its target");
    VerifyDue {
        schema_version: wire::SCHEMA_VERSION,
        request_id: request_id.to_string(),
        cluster: target.cluster.clone(),
        plan: target.plan.clone(),
        schedule: target.schedule.clone(),
        backup_id: target.id.clone(),
        uid: target.uid.clone(),
        requested_at,
        deadline: requested_at + timeout,
        chain: chain.iter().map(|r| verify_backup(r, location)).collect(),
        location: location.cloned(),
        replay,
    }
}

/// A scheduled drill's target (pure): an instant drawn from `request_id` among those
/// restorable in `catalog` at `now` (from `window_start` on, where a window is promised),
/// and the backup and replay a restore to it reads. `None` when nothing is restorable there.
pub fn drill_target(
    catalog: &sexton_retention::Catalog,
    now: DateTime<Utc>,
    window_start: Option<DateTime<Utc>>,
    request_id: &str,
) -> Option<(BackupId, Option<VerifyReplay>)> {
    let recovery = sexton_retention::restorable(catalog, now);
    let within = match window_start {
        Some(start) => recovery.since(start),
        None => recovery,
    };
    let at = within.instant_at(draw(request_id))?;
    let drill = sexton_retention::drill(catalog, now, at).ok()?;
    let id = BackupId::new(&drill.base.id).ok()?;
    let replay = drill.replay.map(|r| VerifyReplay {
        since: r.since,
        until: r.until,
    });
    Some((id, replay))
}
