//! The engine's per-backup bit flags: why a backup is kept (`KEEP_*`), what the first pass
//! learned about its record (`FACT_*`), and its status, packed in one `u32` per backup (and
//! per volume artifact in [`crate::volumes`]).
//!
//! A module of its own so that the phases ([`crate::chains`], [`crate::volumes`],
//! [`crate::binlog`]) and the engine that drives them share the bits without importing each
//! other.

use crate::catalog::BackupStatus;

/// "No backup" in index arrays.
pub(crate) const NONE: u32 = u32::MAX;

// Keep reasons, one bit each, in the order they are rendered.
pub(crate) const KEEP_LEGAL_HOLD: u32 = 1 << 0;
pub(crate) const KEEP_HOLD: u32 = 1 << 1;
pub(crate) const KEEP_IN_PROGRESS: u32 = 1 << 2;
pub(crate) const KEEP_FAILED_GRACE: u32 = 1 << 3;
pub(crate) const KEEP_FAILED_NO_TIME: u32 = 1 << 4;
pub(crate) const KEEP_GFS: u32 = 1 << 5;
pub(crate) const KEEP_RETENTION_DURATION: u32 = 1 << 6;
pub(crate) const KEEP_WINDOW: u32 = 1 << 7;
pub(crate) const KEEP_WINDOW_BASE: u32 = 1 << 8;
pub(crate) const KEEP_FLOOR: u32 = 1 << 9;
pub(crate) const KEEP_IMMUTABLE_CHAIN: u32 = 1 << 10;
/// One of the newest `keep_verified` backups a restore test proved restorable.
pub(crate) const KEEP_VERIFIED: u32 = 1 << 11;
/// The newest backup a restore test proved restorable: kept while no newer one is proven.
pub(crate) const KEEP_FLOOR_VERIFIED: u32 = 1 << 12;
/// Its objects are not in the bucket as recorded (the scrub said so): never counted, never
/// deleted without a user's word.
pub(crate) const KEEP_MISSING: u32 = 1 << 13;
pub(crate) const KEEP_MERGE_SOURCE: u32 = 1 << 14;
pub(crate) const KEEP_NEEDED: u32 = 1 << 15;
/// A backup with volumes that no rule keeps, but every one of its volumes is needed.
pub(crate) const KEEP_VOLUMES_NEEDED: u32 = 1 << 16;
/// Its objects are under an Object Lock that has not expired (issue 29): the store would
/// refuse to delete them. Out of the run of the other keep bits, which were all taken.
pub(crate) const KEEP_LOCKED: u32 = 1 << 29;
/// One of the newest `minimum_redundancy` completed backups, which no rule kept (barman's
/// floor; issue 30). The last free bit but one.
pub(crate) const KEEP_MIN_REDUNDANCY: u32 = 1 << 30;
/// One of the newest `keep_full` full backups, or a backup that builds on one (issue 30). The
/// last free bit.
pub(crate) const KEEP_FULL_CHAIN: u32 = 1 << 31;
/// Kept for a reason of its own, not only because something else needs it.
pub(crate) const KEEP_INDEPENDENT: u32 =
    ((1 << 14) - 1) | KEEP_LOCKED | KEEP_MIN_REDUNDANCY | KEEP_FULL_CHAIN;
pub(crate) const KEEP_ANY: u32 =
    ((1 << 17) - 1) | KEEP_LOCKED | KEEP_MIN_REDUNDANCY | KEEP_FULL_CHAIN;
/// Not kept, but some of its volumes are: the record and those volumes stay.
pub(crate) const PARTIAL: u32 = 1 << 17;
/// In artifact flags only ([`crate::volumes`]): the artifact's backup is kept.
pub(crate) const ART_BACKUP_KEPT: u32 = 1 << 18;

// Facts about the record, set in the first pass.
pub(crate) const FACT_FULL: u32 = 1 << 19;
pub(crate) const FACT_IMMUTABLE: u32 = 1 << 20;
pub(crate) const FACT_DELETE_REQUESTED: u32 = 1 << 21;
/// Not failed: may be a parent or have one.
pub(crate) const FACT_CHAIN_NODE: u32 = 1 << 22;
/// Completed and not delete-requested: the rules count it.
pub(crate) const FACT_ELIGIBLE: u32 = 1 << 23;
/// Has per-volume artifacts: its chains are per volume, and it counts as a full backup for
/// the floor and the binlog horizon (a kept one is restorable with its volumes' chains).
pub(crate) const FACT_VOLUMES: u32 = 1 << 24;
/// A restore test proved it restorable (its last verdict is `verified`).
pub(crate) const FACT_VERIFIED: u32 = 1 << 28;
const STATUS_SHIFT: u32 = 25;

pub(crate) fn status_bits(status: BackupStatus) -> u32 {
    let code = match status {
        BackupStatus::InProgress => 0,
        BackupStatus::Completed => 1,
        BackupStatus::Failed => 2,
        BackupStatus::Expiring => 3,
        BackupStatus::Deleting => 4,
        BackupStatus::DeleteFailed => 5,
        BackupStatus::Missing => 6,
    };
    code << STATUS_SHIFT
}

pub(crate) fn status_of(flags: u32) -> BackupStatus {
    match (flags >> STATUS_SHIFT) & 0x7 {
        0 => BackupStatus::InProgress,
        1 => BackupStatus::Completed,
        2 => BackupStatus::Failed,
        3 => BackupStatus::Expiring,
        4 => BackupStatus::Deleting,
        5 => BackupStatus::DeleteFailed,
        _ => BackupStatus::Missing,
    }
}
