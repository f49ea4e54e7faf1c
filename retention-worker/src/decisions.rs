//! What a retention run acts on, taken from the engine's [`Evaluation`] without rendering the
//! whole plan (issue 17).
//!
//! A run marks what the plan deletes, trims what it makes partial, takes volume marks off what
//! it keeps, and reports. Rendering the owned plan for that (a string per backup id and
//! reason) and then indexing it by id cost more than the engine itself once a group holds
//! 100,000 backups, nearly all of them kept. Here the deleted and partial backups are rendered
//! in full, as before; of the kept ones only those a run touches (records still carrying
//! volume marks) and the newest [`EVENT_KEEP`] (for the retention event) are; every kept backup
//! is still counted, by the rule behind its first reason ([`Reason::rule`]), for the decisions
//! metric. Each
//! rendered decision carries its record's index in the group, so nothing is looked up by id.
//!
//! Pure: no I/O, no clock.

use std::collections::BTreeMap;

use sexton_model::wire::DecisionSummary;
use sexton_retention::{BinlogPlan, Decision, Evaluation, Merge, Reason, Verdict, VolumeMerge};

/// Kept backups named in a retention event, newest first; the event gives the total beside
/// them. A group keeps as many backups as its policy says, and naming 100,000 of them in every
/// event made each one larger than a NATS message may be.
pub const EVENT_KEEP: usize = 100;

/// What one group's run acts on.
#[derive(Debug, Default)]
pub struct RunDecision {
    /// Deleted whole, newest first, with the record's index in the group.
    pub delete: Vec<(usize, Decision)>,
    /// Partial (some volumes go), newest first.
    pub partial: Vec<(usize, Decision)>,
    /// Kept backups whose records carry `expiring` volume marks (a mark this plan may take
    /// back), newest first.
    pub kept_marked: Vec<(usize, Decision)>,
    /// The newest kept backups, at most [`EVENT_KEEP`].
    pub keep_newest: Vec<DecisionSummary>,
    pub n_keep: usize,
    /// Kept backups by the metric label of their first reason.
    pub keep_rules: BTreeMap<&'static str, u64>,
    pub merges: Vec<Merge>,
    pub volume_merges: Vec<VolumeMerge>,
    pub binlog: BinlogPlan,
}

/// The run's decisions from `evaluation`.
pub fn for_run(evaluation: &Evaluation<'_>) -> RunDecision {
    let mut decision = RunDecision {
        merges: evaluation.merges_owned(),
        volume_merges: evaluation.volume_merges_owned(),
        binlog: evaluation.binlog_owned(),
        ..RunDecision::default()
    };
    let mut reasons = Vec::new();
    for index in evaluation.newest_first() {
        let record = evaluation.backup_at(index);
        let marked_volumes = record.volumes.iter().any(|volume| volume.expiring);
        match evaluation.verdict_at(index) {
            Verdict::Delete => decision.delete.push((index, evaluation.decision_at(index))),
            Verdict::Partial => {
                let rendered = evaluation.decision_at(index);
                if marked_volumes {
                    decision.kept_marked.push((index, rendered.clone()));
                }
                decision.partial.push((index, rendered));
            }
            Verdict::Keep => {
                decision.n_keep += 1;
                reasons.clear();
                evaluation.reasons_into(index, &mut reasons);
                let label = Reason::label_of_first(&reasons);
                *decision.keep_rules.entry(label).or_default() += 1;
                if decision.keep_newest.len() < EVENT_KEEP {
                    decision.keep_newest.push(DecisionSummary {
                        id: record.id.to_string(),
                        reasons: Reason::texts(&reasons),
                    });
                }
                if marked_volumes {
                    decision
                        .kept_marked
                        .push((index, evaluation.decision_at(index)));
                }
            }
        }
    }
    decision
}
