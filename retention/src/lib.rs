//! `sexton-retention`: the pure retention engine of Sexton.
//!
//! One function, [`plan`], takes a group's [`Catalog`], a [`Policy`] and the time `now`, and
//! says for every backup and binlog segment whether it stays or goes, and why. It never reads
//! the clock and never does I/O, so the retention worker, `sexton retention preview` and the
//! offline `sexton retention plan` run the same code and get the same answer.
//!
//! The rules (a backup is kept if any rule keeps it): `keep_last` / `max_backups`,
//! `retention_duration`, `recovery_window`, restic's grandfather-father-son rules exactly as
//! restic applies them ([`gfs`]), `keep_tags`; plus what Sexton always does: keep the newest
//! completed full backup (the floor), keep what is on legal hold, held or in progress, keep
//! every ancestor of a kept incremental (or merge it, Trilio style), expire immutable chains
//! together, clean up failed backups after a grace period, and garbage-collect binlog
//! segments older than the oldest kept full backup.
//!
//! Backups may list per-volume artifacts (issue 8, seed 001): each volume has its own chain,
//! and a plan may delete only some volumes of a backup ([`Verdict::Partial`]). What to take
//! next, full or incremental, per volume, is [`cadence`]'s pure answer for the scheduler.
//!
//! [`breaker::judge`] looks at a plan's shape before it is carried out (an unusual share or
//! number of deletions, or deletions while the group has no fresh backup) and says whether a
//! person must approve it first.
//!
//! [`compare_policies`] runs the engine under two policies and says what changing from one to
//! the other would delete: the view `sexton retention simulate --against` shows and a guard
//! against narrowing a policy can call.
//!
//! [`judge`] says whether a backup marked for deletion may go now (the deleter's re-check, a
//! user's delete): it makes the plan again over the group as it was before the mark.
//!
//! [`restorable`] says what a catalog can be restored to (restore points, binlog replay
//! intervals, the gaps between them); with [`after_plan`] it shows what a plan costs.
//!
//! For large catalogs, [`evaluate`] returns the decisions as indices ([`Evaluation`]) without
//! allocating a string per backup; [`plan`] renders them into the owned [`Plan`].

mod binlog;
pub mod breaker;
pub mod cadence;
mod calendar;
mod catalog;
mod chains;
mod compare;
mod engine;
mod error;
mod evaluation;
mod extract;
mod flags;
pub mod gfs;
pub mod group;
mod held;
mod id_hash;
pub mod judge;
pub mod lock;
mod plan;
mod policy;
mod reason;
pub mod recovery;
mod render;
mod rules;
mod sort_key;
mod volumes;

pub use binlog::own_range_needs;
pub use cadence::{
    backup_kind, next_backup_kind, next_volume_kinds, FullEvery, FullEveryError, KindChoice,
    KindReason, VolumeChoice,
};
pub use calendar::{CalendarDuration, DurationError};
pub use catalog::{
    holds_standalone, range_covers, BackupKind, BackupRecord, BackupStatus, BinlogSegment, Catalog,
    CatalogError, LogRange, VerificationState, VolumeArtifact, STANDALONE_HOLD,
};
pub use compare::{compare_policies, ChangedBackup, ChangedVolume, PolicyChange};
pub use engine::{evaluate, plan, Evaluation};
pub use error::{PlanError, MAX_BACKUPS};
pub use plan::{
    BinlogPlan, Decision, Merge, Plan, PlanSummary, RangeOnly, Verdict, VolumeDecision, VolumeMerge,
};
pub use policy::{
    ChainMode, GracePeriod, GraceUnit, KeepCount, Policy, PolicyError, RecoveryWindow,
    RetentionDays, TagList, WindowUnit, MAX_TAG_LISTS,
};
pub use reason::{Bucket, Reason, Reasons, Rule};
pub use recovery::{
    after_plan, drill, restorable, Drill, Recovery, RecoveryGap, RecoveryInterval, Replay,
    RestorePoint, RANGE_MARGIN,
};
pub use render::PlanJson;
