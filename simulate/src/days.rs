//! What the simulation records: the backups it took and what exists at each day's end. The
//! loop ([`crate::simulate`]) fills them in; the summary and the per-location view read them,
//! so they sit below all three.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use sexton_retention::{BackupRecord, BackupStatus};

use crate::measures::Gap;

/// A backup the simulated schedule took.
#[derive(Clone, Debug, Serialize)]
pub struct SimulatedBackup {
    /// The record as taken (the catalog file format of `sexton retention plan`), before any
    /// partial deletion or merge changed it.
    #[serde(flatten)]
    pub record: BackupRecord,
    pub size_bytes: u64,
    /// Why the cadence chose its kind (`full_every`, `chain_continues`, ...), when the
    /// schedule has a cadence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind_reason: Option<String>,
    /// When the engine deleted it; `None` if it still exists at the end.
    pub deleted_at: Option<DateTime<Utc>>,
    /// The days (indices into [`crate::Simulation::days`]) it existed at the day's end, split where
    /// the engine's reasons for keeping it changed.
    pub spans: Vec<KeepSpan>,
}

impl SimulatedBackup {
    pub fn taken_at(&self) -> DateTime<Utc> {
        self.record
            .completed_at
            .or(self.record.started_at)
            .expect("simulated backups have times")
            .with_timezone(&Utc)
    }

    pub fn failed(&self) -> bool {
        self.record.status == BackupStatus::Failed
    }

    /// The reasons it was kept on day `day`, if it existed then.
    pub fn reasons_on(&self, day: usize) -> Option<&[String]> {
        self.spans
            .iter()
            .find(|span| span.first_day <= day && day <= span.last_day)
            .map(|span| span.reasons.as_slice())
    }
}

/// Consecutive days on which a backup existed for the same reasons.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeepSpan {
    pub first_day: usize,
    pub last_day: usize,
    pub reasons: Vec<String>,
}

/// What exists at the end of one simulated day.
#[derive(Clone, Debug, Serialize)]
pub struct Day {
    pub date: NaiveDate,
    /// The run the sample comes from: the day's last, or an earlier day's when no run fell on
    /// this one.
    pub sampled_at: Option<DateTime<Utc>>,
    /// Indices into [`crate::Simulation::backups`] of everything that exists, newest first: kept
    /// backups, partly kept ones, and failed ones still in their grace period.
    pub backups: Vec<usize>,
    /// Completed backups kept whole: the restore points.
    pub count: usize,
    /// Of what exists, the backups the policy lets go that only an unexpired Object Lock
    /// keeps (`expired, locked until T`), and the bytes they take: what the locks cost.
    pub n_locked_only: usize,
    pub locked_only_bytes: u64,
    /// Backups that keep only some volumes (a kept backup builds on them).
    pub n_partial: usize,
    /// Failed backups not yet cleaned up (within `failed_grace`).
    pub n_failed: usize,
    pub storage_bytes: u64,
    /// The most restore points and storage at any run of the day (a backup exists before the
    /// next sweep lets an older one go).
    pub peak_count: usize,
    pub peak_storage_bytes: u64,
    pub oldest_restorable: Option<DateTime<Utc>>,
    pub worst_gap: Option<Gap>,
    pub taken: usize,
    pub failed: usize,
    pub deleted: usize,
    /// With a binlog archive (issue 30): its segments and bytes at the day's end, and where
    /// point-in-time recovery starts (the engine's horizon).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binlog: Option<BinlogDay>,
}

/// The binlog archive at a day's end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BinlogDay {
    pub segments: usize,
    pub bytes: u64,
    /// The start of the oldest kept full that point-in-time recovery is promised from;
    /// `None` when nothing is collected.
    pub pitr_from: Option<DateTime<Utc>>,
    /// Segments kept before it, for backups restorable to their own end only.
    pub own_range_segments: usize,
}

/// Whether an engine reason says only a lock keeps the backup (`expired, locked until T`).
pub fn is_locked_only(reason: &str) -> bool {
    reason.starts_with("expired, locked until ")
}
