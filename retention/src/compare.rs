//! Two policies over one catalog at one instant: what changing from the current policy to a
//! proposed one would delete, and what it would keep that the current one lets go.
//!
//! This is the question a user asks before editing a schedule's policy (`sexton retention
//! simulate --against`), and the one a guard against narrowing a policy asks before letting a
//! change through: "which recovery points does this edit take away right now?". It runs the
//! engine twice, unchanged, and compares the verdicts backup by backup; it does no I/O and
//! reads no clock, like the engine.

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::engine::evaluate;
use crate::error::PlanError;
use crate::plan::Verdict;
use crate::policy::Policy;

/// What replacing `current` with `proposed` changes for the backups of one catalog at `now`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PolicyChange {
    /// Backups the current policy keeps, whole or in part, that the proposed one deletes
    /// whole: what the change takes away at once. Newest first.
    pub deleted: Vec<ChangedBackup>,
    /// Backups the current policy deletes that the proposed one keeps (whole or in part).
    /// Newest first. In a catalog the current policy has already pruned this is empty: what
    /// it deleted is gone.
    pub kept: Vec<ChangedBackup>,
    /// Volumes the proposed policy deletes of backups that both policies keep at least in
    /// part, and that the current policy keeps.
    pub volumes_deleted: Vec<ChangedVolume>,
    /// Backups kept whole by the current policy.
    pub n_keep_current: usize,
    /// Backups kept whole by the proposed policy.
    pub n_keep_proposed: usize,
}

/// One backup whose fate the change turns around, with the reasons of both plans.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ChangedBackup {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<FixedOffset>>,
    pub current: Verdict,
    pub current_reasons: Vec<String>,
    pub proposed: Verdict,
    pub proposed_reasons: Vec<String>,
}

/// One volume of a backup that stays (at least in part) that only the proposed policy deletes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ChangedVolume {
    pub id: String,
    pub volume: String,
}

impl PolicyChange {
    /// Whether the change takes away anything the current policy keeps: a backup or a volume.
    pub fn narrows(&self) -> bool {
        !self.deleted.is_empty() || !self.volumes_deleted.is_empty()
    }
}

/// Plans `catalog` at `now` under both policies and compares the verdicts. Fails when either
/// plan fails (the error of the current policy's plan first).
pub fn compare_policies(
    catalog: &Catalog,
    current: &Policy,
    proposed: &Policy,
    now: DateTime<Utc>,
) -> Result<PolicyChange, PlanError> {
    let before = evaluate(catalog, current, now)?;
    let after = evaluate(catalog, proposed, now)?;
    let mut change = PolicyChange {
        deleted: Vec::new(),
        kept: Vec::new(),
        volumes_deleted: Vec::new(),
        n_keep_current: before.n_keep(),
        n_keep_proposed: after.n_keep(),
    };
    for index in before.newest_first() {
        let verdict_before = before.verdict_at(index);
        let verdict_after = after.verdict_at(index);
        let changed = |current: Verdict, proposed: Verdict| ChangedBackup {
            id: catalog.backups[index].id.clone(),
            completed_at: catalog.backups[index].completed_at,
            current,
            current_reasons: before.reasons_at(index),
            proposed,
            proposed_reasons: after.reasons_at(index),
        };
        match (verdict_before, verdict_after) {
            (Verdict::Keep | Verdict::Partial, Verdict::Delete) => {
                change.deleted.push(changed(verdict_before, verdict_after))
            }
            (Verdict::Delete, Verdict::Keep | Verdict::Partial) => {
                change.kept.push(changed(verdict_before, verdict_after))
            }
            (Verdict::Delete, Verdict::Delete) | (Verdict::Keep, Verdict::Keep) => {}
            (Verdict::Keep | Verdict::Partial, Verdict::Partial) => {
                let (_, deleted_after) = after.volume_decisions_at(index);
                let (_, deleted_before) = before.volume_decisions_at(index);
                for volume in deleted_after {
                    if !deleted_before.iter().any(|gone| gone.name == volume.name) {
                        change.volumes_deleted.push(ChangedVolume {
                            id: catalog.backups[index].id.clone(),
                            volume: volume.name,
                        });
                    }
                }
            }
            (Verdict::Partial, Verdict::Keep) => {}
        }
    }
    Ok(change)
}
