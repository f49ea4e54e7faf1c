//! Two policies over the same simulated schedule, side by side: the counts, storage and gaps
//! of each day under both, and what switching from the current policy to the proposed one at
//! the end of the period would delete at once (`sexton_retention::compare_policies`, the same
//! comparison a guard against narrowing a policy runs on a live catalog).

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use sexton_retention::{compare_policies, ChangedBackup, ChangedVolume, Policy};

use crate::scenario::Scenario;
use crate::simulation::{simulate_with_progress, Simulation, SimulationError};

/// Both simulations, each day side by side, and the switch-over at the end.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub current: Simulation,
    pub proposed: Simulation,
    pub days: Vec<DayPair>,
    pub switch: SwitchOver,
}

/// One day under the current (`[0]`) and the proposed (`[1]`) policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DayPair {
    pub date: NaiveDate,
    pub count: [usize; 2],
    pub storage_bytes: [u64; 2],
    pub worst_gap_seconds: [Option<i64>; 2],
}

/// Replacing the current policy with the proposed one on the last day's catalog.
#[derive(Clone, Debug, Serialize)]
pub struct SwitchOver {
    /// The instant of the last day's sample.
    pub at: DateTime<Utc>,
    /// Backups the current policy keeps that the proposed one deletes at once, with both
    /// plans' reasons.
    pub deletes: Vec<ChangedBackup>,
    /// Volumes the proposed policy deletes of backups that stay.
    pub volumes_deleted: Vec<ChangedVolume>,
    /// What the deleted backups take now.
    pub freed_bytes: u64,
    /// Steady-state storage under the proposed policy minus under the current one.
    pub steady_storage_delta_bytes: i64,
    pub steady_count: [usize; 2],
}

/// Simulates `scenario` under its policy and under `proposed`, and compares.
pub fn compare(scenario: &Scenario, proposed: &Policy) -> Result<Comparison, SimulationError> {
    compare_with_progress(scenario, proposed, &mut |_, _| {})
}

/// [`compare`], telling `progress(done, total)` over both runs (see
/// [`crate::simulate_with_progress`]).
pub fn compare_with_progress(
    scenario: &Scenario,
    proposed: &Policy,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Comparison, SimulationError> {
    let current = simulate_with_progress(scenario, &mut |done, total| progress(done, 2 * total))?;
    let mut proposed_scenario = scenario.clone();
    proposed_scenario.policy = proposed.clone();
    let proposed_run = simulate_with_progress(&proposed_scenario, &mut |done, total| {
        progress(total + done, 2 * total)
    })?;
    let days = current
        .days
        .iter()
        .zip(&proposed_run.days)
        .map(|(a, b)| DayPair {
            date: a.date,
            count: [a.count, b.count],
            storage_bytes: [a.storage_bytes, b.storage_bytes],
            worst_gap_seconds: [
                a.worst_gap.as_ref().map(|gap| gap.seconds),
                b.worst_gap.as_ref().map(|gap| gap.seconds),
            ],
        })
        .collect();
    let at = current
        .days
        .iter()
        .rev()
        .find_map(|day| day.sampled_at)
        .unwrap_or(current.from);
    let change = compare_policies(&current.final_catalog, &scenario.policy, proposed, at)
        .map_err(|source| SimulationError::Engine { at, source })?;
    let size_of: HashMap<&str, u64> = current
        .final_catalog
        .backups
        .iter()
        .zip(&current.final_sizes)
        .map(|(backup, &size)| (backup.id.as_str(), size))
        .collect();
    let freed_bytes = change
        .deleted
        .iter()
        .filter_map(|changed| size_of.get(changed.id.as_str()))
        .sum();
    let switch = SwitchOver {
        at,
        freed_bytes,
        steady_storage_delta_bytes: proposed_run.summary.steady.storage_bytes as i64
            - current.summary.steady.storage_bytes as i64,
        steady_count: [
            current.summary.steady.count,
            proposed_run.summary.steady.count,
        ],
        deletes: change.deleted,
        volumes_deleted: change.volumes_deleted,
    };
    Ok(Comparison {
        current,
        proposed: proposed_run,
        days,
        switch,
    })
}
