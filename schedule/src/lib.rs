//! Sexton's schedule arithmetic: cron specs and the per-schedule firing decision, pure.
//!
//! Two things live here, both without I/O and without reading the clock (`now` is always a
//! parameter), so the scheduler service, the CLI and the tests compute exactly the same answers:
//!
//! * [`CronSpec`]: cron with robfig/cron v3.0.1's grammar and next-time semantics, the dialect
//!   Velero and Kubernetes users already write (see the `cron` module for why we port it);
//! * [`evaluate`] / [`explain`]: Velero's schedule-controller rules (pause, skip-immediately,
//!   next run from the later of last backup and last skip, fire once after downtime) plus
//!   Sexton's overlap policy and starting deadline.

mod cron;
mod decision;

pub use crate::cron::{CronError, CronSpec, DurationError, Excerpt, Field};
pub use crate::decision::{
    evaluate, explain, Action, Decision, Explanation, Reason, ScheduleDoc, ScheduleState,
};
