//! Sexton's schedule arithmetic: cron specs and the per-schedule firing decision, pure.
//!
//! Two things live here, both without I/O and without reading the clock (`now` is always a
//! parameter), so the scheduler service, the CLI and the tests compute exactly the same answers:
//!
//! * [`CronSpec`]: cron with robfig/cron v3.0.1's grammar and next-time semantics, the dialect
//!   Velero and Kubernetes users already write (see the `cron` module for why we port it);
//! * [`evaluate`] / [`explain`]: Velero's schedule-controller rules (pause, skip-immediately,
//!   next run from the later of last backup and last skip, fire once after downtime) plus
//!   Sexton's overlap policy and starting deadline;
//! * [`Timing`]: a schedule's runs with everything applied: a deterministic jitter offset and
//!   `@daily-random` & co. (`spread`), blackout windows in a named zone (`blackout`), and the
//!   input checks that refuse specs robfig accepts but that mean something else.

pub mod blackout;
mod cron;
mod decision;
pub mod span;
pub mod spread;
pub mod timing;

pub use crate::blackout::{Blackout, OnBlackout, Window, WindowError, WindowSpec};
pub use crate::cron::{CronError, CronSpec, DurationError, Excerpt, Field, MeaningError};
pub use crate::decision::{
    evaluate, explain, Action, Decision, Explanation, Reason, ScheduleDoc, ScheduleState,
};
pub use crate::span::{Span, SpanError};
pub use crate::timing::{PlannedRun, Run, RunEffect, Timing, TimingError, TimingSpec};
