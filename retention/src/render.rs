//! The plan as JSON, serialised while it is rendered (issue 17).
//!
//! [`Evaluation::plan_json`] serialises exactly what `serde_json` writes for
//! [`Evaluation::to_plan`]'s [`crate::Plan`], field for field, without building the owned plan:
//! each decision is rendered from the evaluation's indices straight into the serializer, its
//! reasons into one reused buffer, and the reasons that read the same for every backup ("no
//! rule keeps it", "last snapshot") hold nothing to allocate. Writing a million decisions then
//! allocates nothing per backup, so `sexton retention plan` over a large catalog needs about
//! the memory of the catalog and the evaluation, not of a second, rendered copy.
//!
//! Serialising does no I/O of its own: the caller hands in the serializer (and its writer).

use std::cell::RefCell;

use serde::ser::{Serialize, SerializeSeq, SerializeStruct, Serializer};

use crate::engine::Evaluation;
use crate::plan::Verdict;
use crate::reason::Reason;

/// A serialisable view of an evaluation's plan; see the module header.
pub struct PlanJson<'e, 'a> {
    evaluation: &'e Evaluation<'a>,
    /// The reasons of the decision being written, reused from one decision to the next.
    reasons: RefCell<Vec<Reason>>,
}

impl<'a> Evaluation<'a> {
    /// The plan as a value that serialises like [`Evaluation::to_plan`]'s, rendered while it
    /// is written.
    pub fn plan_json(&self) -> PlanJson<'_, 'a> {
        PlanJson {
            evaluation: self,
            reasons: RefCell::new(Vec::new()),
        }
    }
}

impl Serialize for PlanJson<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let evaluation = self.evaluation;
        let list = |verdict, len| DecisionList {
            plan: self,
            verdict,
            len,
        };
        let mut plan = serializer.serialize_struct("Plan", 7)?;
        plan.serialize_field("keep", &list(Verdict::Keep, evaluation.n_keep()))?;
        if evaluation.n_partial() == 0 {
            plan.skip_field("partial")?;
        } else {
            plan.serialize_field("partial", &list(Verdict::Partial, evaluation.n_partial()))?;
        }
        plan.serialize_field("delete", &list(Verdict::Delete, evaluation.n_delete()))?;
        plan.serialize_field("merges", &evaluation.merges_owned())?;
        let volume_merges = evaluation.volume_merges_owned();
        if volume_merges.is_empty() {
            plan.skip_field("volume_merges")?;
        } else {
            plan.serialize_field("volume_merges", &volume_merges)?;
        }
        plan.serialize_field("binlog", &evaluation.binlog_owned())?;
        if evaluation.warnings().is_empty() {
            plan.skip_field("warnings")?;
        } else {
            plan.serialize_field("warnings", evaluation.warnings())?;
        }
        plan.end()
    }
}

/// The decisions with one verdict, newest first.
struct DecisionList<'p, 'e, 'a> {
    plan: &'p PlanJson<'e, 'a>,
    verdict: Verdict,
    len: usize,
}

impl Serialize for DecisionList<'_, '_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let evaluation = self.plan.evaluation;
        let mut list = serializer.serialize_seq(Some(self.len))?;
        for index in evaluation.newest_first() {
            if evaluation.verdict_at(index) == self.verdict {
                list.serialize_element(&DecisionJson {
                    plan: self.plan,
                    index,
                })?;
            }
        }
        list.end()
    }
}

/// One decision, serialised as [`crate::Decision`] is.
struct DecisionJson<'p, 'e, 'a> {
    plan: &'p PlanJson<'e, 'a>,
    index: usize,
}

impl Serialize for DecisionJson<'_, '_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let evaluation = self.plan.evaluation;
        let index = self.index;
        let backup = evaluation.backup_at(index);
        let remove_objects =
            evaluation.verdict_at(index) == Verdict::Keep || evaluation.removes_objects_at(index);
        let mut decision = serializer.serialize_struct("Decision", 8)?;
        decision.serialize_field("id", &backup.id)?;
        {
            let mut reasons = self.plan.reasons.borrow_mut();
            reasons.clear();
            evaluation.reasons_into(index, &mut reasons);
            decision.serialize_field("reasons", &*reasons)?;
        }
        if remove_objects {
            decision.skip_field("remove_objects")?;
        } else {
            decision.serialize_field("remove_objects", &false)?;
        }
        decision.serialize_field("status", &backup.status)?;
        decision.serialize_field("kind", &backup.kind)?;
        match &backup.completed_at {
            Some(completed_at) => decision.serialize_field("completed_at", completed_at)?,
            None => decision.skip_field("completed_at")?,
        }
        let (volumes_keep, volumes_delete) = if backup.volumes.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            evaluation.volume_decisions_at(index)
        };
        for (name, volumes) in [
            ("volumes_keep", volumes_keep),
            ("volumes_delete", volumes_delete),
        ] {
            if volumes.is_empty() {
                decision.skip_field(name)?;
            } else {
                decision.serialize_field(name, &volumes)?;
            }
        }
        decision.end()
    }
}
