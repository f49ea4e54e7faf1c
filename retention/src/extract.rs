//! The engine's first phase: one sequential pass over the records (validation, the flags, the
//! sort entry's key and payload, the id hashes), then the duplicate-id check.

use std::collections::HashSet;

use crate::catalog::{BackupKind, BackupRecord, BackupStatus, Catalog, VerificationState};
use crate::error::PlanError;
use crate::flags::{
    status_bits, FACT_CHAIN_NODE, FACT_DELETE_REQUESTED, FACT_ELIGIBLE, FACT_FULL, FACT_IMMUTABLE,
    FACT_VERIFIED, FACT_VOLUMES, KEEP_FAILED_GRACE, KEEP_FAILED_NO_TIME, KEEP_HOLD,
    KEEP_IN_PROGRESS, KEEP_LEGAL_HOLD, KEEP_LOCKED, KEEP_MISSING,
};
use crate::gfs;
use crate::id_hash::hash_id;
use crate::policy::Policy;
use crate::sort_key::{
    pack_newest_first, payload_from_offset, tags_inline, PAYLOAD_COMPLETED_FULL, PAYLOAD_ELIGIBLE,
    PAYLOAD_PROTECTED, PAYLOAD_TAGGED, PAYLOAD_TAGS_SHIFT,
};

/// What the first pass learns about every record, indexed like the catalog.
pub(crate) struct Extracted {
    pub flags: Vec<u32>,
    /// Sort entries ([`crate::sort_key`]): key, catalog index and payload.
    pub packed: Vec<u128>,
    pub id_hashes: Vec<u64>,
    /// The hash of each incremental's parent id; 0 when it has no parent in a chain.
    pub parent_hashes: Vec<u64>,
    /// The tag-list masks that do not ride in the payload; empty otherwise.
    pub tag_masks: Vec<u64>,
    /// `id_hashes`, sorted.
    pub sorted_hashes: Vec<u64>,
    /// Two distinct ids share a hash.
    pub hash_collision: bool,
    /// Some chain node is immutable: chains are then kept or expired whole.
    pub any_immutable: bool,
    pub any_volumes: bool,
    pub any_verified: bool,
}

/// Phase 1: one sequential pass over the records, then the duplicate-id check.
pub(crate) fn extract_all(
    catalog: &Catalog,
    policy: &Policy,
    now_key: i64,
) -> Result<Extracted, PlanError> {
    let backups = &catalog.backups;
    let n = backups.len();
    let grace_nanos = i128::from(
        policy
            .failed_grace
            .as_delta()
            .num_nanoseconds()
            .unwrap_or(i64::MAX),
    );
    let has_tags = !policy.keep_tags.is_empty();
    let inline_tags = tags_inline(policy);
    let mut extracted = Extracted {
        flags: Vec::with_capacity(n),
        packed: Vec::with_capacity(n),
        id_hashes: Vec::with_capacity(n),
        parent_hashes: Vec::with_capacity(n),
        tag_masks: Vec::with_capacity(if has_tags && !inline_tags { n } else { 0 }),
        sorted_hashes: Vec::new(),
        hash_collision: false,
        any_immutable: false,
        any_volumes: false,
        any_verified: false,
    };
    for (index, backup) in backups.iter().enumerate() {
        let (bits, mut payload, key) = extract(index, backup, now_key, grace_nanos)?;
        if has_tags {
            let mask = gfs::tag_mask(policy, &backup.tags);
            if mask != 0 {
                payload |= PAYLOAD_TAGGED;
            }
            if inline_tags {
                payload |= (mask as u32) << PAYLOAD_TAGS_SHIFT;
            } else {
                extracted.tag_masks.push(mask);
            }
        }
        extracted.any_immutable |= bits & FACT_IMMUTABLE != 0 && bits & FACT_CHAIN_NODE != 0;
        extracted.any_volumes |= bits & FACT_VOLUMES != 0;
        extracted.any_verified |= bits & FACT_VERIFIED != 0;
        extracted.flags.push(bits);
        extracted
            .packed
            .push(pack_newest_first(key, index as u32) | u128::from(payload));
        extracted.id_hashes.push(hash_id(&backup.id));
        extracted.parent_hashes.push(match &backup.parent {
            Some(parent) if bits & FACT_CHAIN_NODE != 0 && bits & FACT_FULL == 0 => hash_id(parent),
            _ => 0,
        });
    }
    // Duplicate ids. Equal ids hash equal, so distinct hashes prove distinct ids; on a shared
    // hash, compare the strings.
    let mut sorted_hashes = extracted.id_hashes.clone();
    sorted_hashes.sort_unstable();
    extracted.hash_collision = sorted_hashes.windows(2).any(|pair| pair[0] == pair[1]);
    if extracted.hash_collision {
        check_exact_duplicates(catalog)?;
    }
    extracted.sorted_hashes = sorted_hashes;
    Ok(extracted)
}

/// Phase 1 for one record: validation, flags, the sort payload and the sort key.
pub(crate) fn extract(
    index: usize,
    backup: &BackupRecord,
    now_key: i64,
    grace_nanos: i128,
) -> Result<(u32, u32, i64), PlanError> {
    let invalid = |message: &str| PlanError::InvalidBackup {
        id: display_id(index, &backup.id),
        message: message.to_owned(),
    };
    if backup.id.is_empty() {
        return Err(invalid("id is empty"));
    }
    let time = match backup.status {
        BackupStatus::Completed => Some(
            backup
                .completed_at
                .ok_or_else(|| invalid("completed backup has no completed_at"))?,
        ),
        _ => backup.completed_at.or(backup.started_at),
    };
    let key = match time {
        Some(time) => time
            .timestamp_nanos_opt()
            .ok_or_else(|| PlanError::TimeOutOfRange {
                what: format!("backup {}", backup.id),
            })?,
        // No time at all (an in-progress backup that did not say when it started): newest.
        None => i64::MAX,
    };
    let mut bits = status_bits(backup.status);
    let mut payload = time.map_or(0, |time| {
        payload_from_offset(time.offset().local_minus_utc())
    });
    let has_volumes = !backup.volumes.is_empty();
    if has_volumes {
        check_volumes(backup).map_err(|message| invalid(&message))?;
        bits |= FACT_VOLUMES;
    }
    // A backup with volumes has no backup-level chain: its volumes have theirs.
    let full = backup.kind == BackupKind::Full || has_volumes;
    if full {
        bits |= FACT_FULL;
    }
    if backup.immutable {
        bits |= FACT_IMMUTABLE;
    }
    if backup.delete_requested {
        bits |= FACT_DELETE_REQUESTED;
    }
    if backup.legal_hold {
        bits |= KEEP_LEGAL_HOLD;
    }
    if backup.verification == VerificationState::Verified {
        bits |= FACT_VERIFIED;
    }
    if !backup.holds.is_empty() {
        bits |= KEEP_HOLD;
    }
    match backup.status {
        BackupStatus::InProgress => bits |= KEEP_IN_PROGRESS | FACT_CHAIN_NODE,
        BackupStatus::Completed => {
            bits |= FACT_CHAIN_NODE;
            if !backup.delete_requested {
                bits |= FACT_ELIGIBLE;
                payload |= PAYLOAD_ELIGIBLE;
            }
            if full {
                payload |= PAYLOAD_COMPLETED_FULL;
            }
        }
        BackupStatus::Failed => {
            if time.is_none() {
                bits |= KEEP_FAILED_NO_TIME;
            } else if !backup.delete_requested
                && i128::from(now_key) - i128::from(key) <= grace_nanos
            {
                bits |= KEEP_FAILED_GRACE;
            }
        }
        BackupStatus::Expiring | BackupStatus::Deleting | BackupStatus::DeleteFailed => {
            bits |= FACT_CHAIN_NODE;
        }
        // Not counted (its objects are gone or changed), but kept with what it builds on until
        // a user deletes it or the scrub finds its objects again.
        BackupStatus::Missing => {
            bits |= FACT_CHAIN_NODE;
            if !backup.delete_requested {
                bits |= KEEP_MISSING;
            }
        }
    }
    // A lock that has not expired keeps whatever the store holds under it (not a failed
    // backup's leftovers, which no rule counts, nor one still being taken).
    if !matches!(
        backup.status,
        BackupStatus::Failed | BackupStatus::InProgress
    ) && backup.locked_until.is_some_and(|until| {
        i128::from(until.timestamp()) * 1_000_000_000 + i128::from(until.timestamp_subsec_nanos())
            > i128::from(now_key)
    }) {
        bits |= KEEP_LOCKED;
    }
    if bits & (KEEP_LEGAL_HOLD | KEEP_HOLD | KEEP_IN_PROGRESS | KEEP_MISSING | KEEP_LOCKED) != 0 {
        payload |= PAYLOAD_PROTECTED;
    }
    if !full && backup.status != BackupStatus::Failed {
        match &backup.parent {
            None => return Err(invalid("incremental backup has no parent")),
            Some(parent) if *parent == backup.id => {
                return Err(invalid("backup is its own parent"))
            }
            Some(_) => {}
        }
    }
    Ok((bits, payload, key))
}

/// The per-volume checks of one record: names present and unique, every incremental of a
/// backup that did not fail has a parent other than itself, no failed volume in a completed
/// backup (one failed volume fails the backup, seed 001).
fn check_volumes(backup: &BackupRecord) -> Result<(), String> {
    /// Up to this many volumes, duplicates are looked for pairwise; beyond, by sorting.
    const PAIRWISE_MAX: usize = 32;
    let volumes = &backup.volumes;
    if volumes.len() > PAIRWISE_MAX {
        let mut names: Vec<&str> = volumes.iter().map(|volume| volume.name.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(format!("volume {} is listed twice", pair[0]));
        }
    }
    for (offset, volume) in volumes.iter().enumerate() {
        if volume.name.is_empty() {
            return Err(format!("volume at position {offset} has no name"));
        }
        if volumes.len() <= PAIRWISE_MAX
            && volumes[..offset]
                .iter()
                .any(|earlier| earlier.name == volume.name)
        {
            return Err(format!("volume {} is listed twice", volume.name));
        }
        if volume.failed && backup.status == BackupStatus::Completed {
            return Err(format!(
                "volume {} failed but the backup is completed; a failed volume fails the backup",
                volume.name
            ));
        }
        if volume.kind == BackupKind::Incremental && backup.status != BackupStatus::Failed {
            match &volume.parent {
                None => return Err(format!("incremental volume {} has no parent", volume.name)),
                Some(parent) if *parent == backup.id => {
                    return Err(format!("volume {} is its own parent", volume.name))
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// An id for error messages; an empty id is named by its position.
fn display_id(index: usize, id: &str) -> String {
    if id.is_empty() {
        format!("at position {index}")
    } else {
        id.to_owned()
    }
}

pub(crate) fn check_exact_duplicates(catalog: &Catalog) -> Result<(), PlanError> {
    let mut seen: HashSet<&str> = HashSet::with_capacity(catalog.backups.len());
    for backup in &catalog.backups {
        if !seen.insert(backup.id.as_str()) {
            return Err(PlanError::DuplicateId {
                id: backup.id.clone(),
            });
        }
    }
    Ok(())
}
