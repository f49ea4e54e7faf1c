//! What the scheduler does with one schedule at one instant: Velero's schedule controller as a
//! pure function, plus Sexton's overlap policy and starting deadline.
//!
//! The scheduler service evaluates a schedule when it becomes due (and when it is created,
//! changed or unpaused) and records the outcome with a compare-and-set; `sexton schedule
//! explain` runs the same function offline so a user can see why a backup did or did not fire.
//! Keeping the rules here, with `now` as a parameter and no I/O, is what lets both agree and lets
//! the tests replay Velero's own controller cases.
//!
//! The rules (seed 002, issue 4):
//!
//! 1. A paused schedule does nothing and records nothing.
//! 2. When a schedule has just been created or unpaused (`activation_pending`), skip-immediately
//!    is resolved: the schedule's own value, else the server default. If it applies, the
//!    immediate run is skipped: `last_skipped = now`, and the flag is consumed and reset to
//!    *unset*, so the next activation consults the server default again.
//! 3. next run = `cron.next(base)`, base = last backup (or creation time), or the last skip when
//!    that is later; the schedule is due when `now` is strictly after it.
//! 4. A due schedule fires once for the whole missed period (`last_backup = now`, the actual time,
//!    never one backup per missed run), unless the newest missed run is older than the optional
//!    starting deadline, or a backup from this schedule is still running (overlap policy
//!    `skip`). Then the run is recorded as skipped (`last_skipped = now`) with the reason, which
//!    also moves the next run past `now`.
//!
//! 5. With jitter (see `timing`) every run is due a fixed offset after its cron time; a due run
//!    at an instant inside a blackout window is skipped (reason `blackout`), or with
//!    `on_blackout: defer` waits for the blackout's end and fires then (one run for everything
//!    the blackout held back, as after downtime). The starting deadline is judged first.
//!
//! A firing is identified by its *tick*, the nominal cron time of the due run (the due time
//! `next_run_time` is the tick plus the jitter offset). It depends only on the recorded state,
//! not on the evaluating replica's clock, so every replica that evaluates the same state names
//! the same firing: the tick is the de-duplication key.
//!
//! What the caller does around it:
//!
//! * on creation, store `activation_pending = true`; on unpause, set `paused = false`,
//!   `activation_pending = true` and, if the request says `--skip-immediately[=bool]`, store
//!   that as `skip_immediately` (the request overrides the schedule's value);
//! * report `in_flight` for overlap policy `skip`; for policy `allow`, report `false`;
//! * record `*_after` with a compare-and-set against the state that was evaluated, publish the
//!   firing under (schedule, `tick`), and key the timer queue by `next_run_after`.

use crate::blackout::{Blackout, OnBlackout, WindowSpec};
use crate::cron::CronSpec;
use crate::span::Span;
use crate::timing::{Run, Runs, Timing, TimingSpec};
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A schedule as `sexton schedule explain --schedule FILE` reads it, and as the scheduler stores
/// the parts the decision needs. Unknown fields are rejected, so a typo is not silently ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleDoc {
    /// The cron spec, in robfig/cron's standard syntax.
    pub cron: String,
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub paused: bool,
    /// The schedule's skip-immediately setting: `None` means "use the server default".
    #[serde(default)]
    pub skip_immediately: Option<bool>,
    #[serde(default)]
    pub last_backup: Option<DateTime<Utc>>,
    #[serde(default)]
    pub last_skipped: Option<DateTime<Utc>>,
    /// A backup from this schedule is in progress.
    #[serde(default)]
    pub in_flight: bool,
    /// Skip a due run whose newest missed time is older than this many seconds.
    #[serde(default)]
    pub starting_deadline_seconds: Option<u64>,
    /// The schedule was created or unpaused and has not been evaluated since; that evaluation
    /// resolves skip-immediately. A document that does not say is treated as just created,
    /// which is also how Velero treats every reconcile.
    #[serde(default = "activation_pending_by_default")]
    pub activation_pending: bool,
    /// The schedule's name: the seed of its jitter offset and `@daily-random` & co.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Every run moves by a fixed offset in `[0, jitter)` drawn from the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Span>,
    /// Blackout windows (see `blackout`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<WindowSpec>,
    #[serde(default, skip_serializing_if = "OnBlackout::is_skip")]
    pub on_blackout: OnBlackout,
}

fn activation_pending_by_default() -> bool {
    true
}

impl ScheduleDoc {
    /// The document without its cron text, for [`evaluate`].
    pub fn state(&self) -> ScheduleState {
        ScheduleState {
            created_at: self.created_at,
            paused: self.paused,
            skip_immediately: self.skip_immediately,
            last_backup: self.last_backup,
            last_skipped: self.last_skipped,
            in_flight: self.in_flight,
            starting_deadline_seconds: self.starting_deadline_seconds,
            activation_pending: self.activation_pending,
        }
    }

    /// The document's timing settings.
    pub fn timing_spec(&self) -> TimingSpec<'_> {
        TimingSpec {
            name: self.name.as_deref().unwrap_or_default(),
            cron: &self.cron,
            jitter: self.jitter,
            exclude: &self.exclude,
            on_blackout: self.on_blackout,
        }
    }
}

/// Everything the decision needs besides the cron spec; `Copy`, so the scheduler can keep one
/// per schedule in its timer queue and evaluate without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleState {
    pub created_at: DateTime<Utc>,
    pub paused: bool,
    pub skip_immediately: Option<bool>,
    pub last_backup: Option<DateTime<Utc>>,
    pub last_skipped: Option<DateTime<Utc>>,
    pub in_flight: bool,
    pub starting_deadline_seconds: Option<u64>,
    pub activation_pending: bool,
}

/// What happened, in the words of `sexton schedule explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Start a backup now, for tick `next_run_time`.
    Fire,
    /// A run was skipped and recorded as such (`last_skipped_after = now`); see the reason.
    Skip,
    /// Nothing to do yet.
    Wait,
    /// The schedule is paused: nothing fires, nothing is recorded.
    Paused,
    /// The cron spec does not parse; the schedule is kept, marked with the error.
    Invalid,
}

impl Action {
    /// The lowercase name used in JSON output and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Fire => "fire",
            Action::Skip => "skip",
            Action::Wait => "wait",
            Action::Paused => "paused",
            Action::Invalid => "invalid",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the decision is what it is: a small fixed set, fit for a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    Paused,
    InvalidCron,
    /// Skip-immediately applied on creation or unpause.
    SkipImmediately,
    /// A backup from this schedule is still in progress (overlap policy `skip`).
    InFlight,
    /// The newest missed run is older than the starting deadline.
    StartingDeadlineExceeded,
    NotDue,
    /// robfig finds no run within five years (e.g. `0 0 30 2 *`): never due.
    NoRunWithinFiveYears,
    /// The run is due inside a blackout window (`on_blackout: skip`).
    Blackout,
    /// The run is due inside a blackout window and waits for its end (`on_blackout: defer`).
    BlackoutDeferred,
    Due,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Paused => "paused",
            Reason::InvalidCron => "invalid_cron",
            Reason::SkipImmediately => "skip_immediately",
            Reason::InFlight => "in_flight",
            Reason::StartingDeadlineExceeded => "starting_deadline_exceeded",
            Reason::NotDue => "not_due",
            Reason::NoRunWithinFiveYears => "no_run_within_five_years",
            Reason::Blackout => "blackout",
            Reason::BlackoutDeferred => "blackout_deferred",
            Reason::Due => "due",
        }
    }
}

/// The outcome of [`evaluate`]: the action and the state to record. `Copy` and allocation-free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub reason: Reason,
    /// `now` is strictly after `next_run_time`.
    pub due: bool,
    /// The due time computed from the state (after skip-immediately, if that applied): the
    /// cron time plus the jitter offset. When the schedule is due this is the run that fires,
    /// is skipped or is deferred.
    pub next_run_time: Option<DateTime<Utc>>,
    /// The nominal tick (cron time) of the run this decision acts on: for `fire` the firing's
    /// identity (de-duplication key); for `skip` the run that was skipped (for
    /// skip-immediately, the run that was due, if one was); for a deferral the run that waits.
    /// `None` when no run was due.
    pub tick: Option<DateTime<Utc>>,
    /// When the schedule next needs attention once this decision is recorded: the timer-queue
    /// key (for a deferral, the end of the blackout).
    pub next_run_after: Option<DateTime<Utc>>,
    /// The blackout that skipped or deferred the run.
    pub blackout: Option<Blackout>,
    pub last_backup_after: Option<DateTime<Utc>>,
    pub last_skipped_after: Option<DateTime<Utc>>,
    pub skip_immediately_after: Option<bool>,
    pub activation_pending_after: bool,
}

/// Decides what to do with a schedule at `now`. Pure and allocation-free: the cron spec is
/// already parsed, and at most three next-time walks are made.
///
/// `server_skip_immediately` is the server default (`--schedule-skip-immediately`); it only
/// matters while `state.activation_pending`.
pub fn evaluate(
    cron: &CronSpec,
    state: &ScheduleState,
    now: DateTime<Utc>,
    server_skip_immediately: bool,
) -> Decision {
    decide(&Runs::plain(cron), state, now, server_skip_immediately)
}

impl Timing {
    /// The next `n` runs of a schedule in `state`, as its scheduler runs them: counted from
    /// the base its decision uses (the last backup, a later skip, or the creation), not from
    /// `now`, because an `@every` schedule's runs are counted from its last one (issue 26:
    /// `describe` listed them offset by the moment it was asked). A run already due is listed
    /// first (it fires at the scheduler's next look) and the runs after it count from `now`.
    pub fn upcoming_for(
        &self,
        state: &ScheduleState,
        now: DateTime<Utc>,
        n: usize,
    ) -> Vec<crate::PlannedRun> {
        let base = run_base(state.created_at, state.last_backup, state.last_skipped);
        let mut runs = self.upcoming(base, n);
        if runs.first().is_some_and(|run| run.at < now) {
            runs.truncate(1);
            runs.extend(self.upcoming(now, n.saturating_sub(1)));
        }
        runs
    }

    /// [`evaluate`] with the schedule's jitter and blackout windows.
    pub fn evaluate(
        &self,
        state: &ScheduleState,
        now: DateTime<Utc>,
        server_skip_immediately: bool,
    ) -> Decision {
        decide(&self.runs(), state, now, server_skip_immediately)
    }
}

fn decide(
    runs: &Runs<'_>,
    state: &ScheduleState,
    now: DateTime<Utc>,
    server_skip_immediately: bool,
) -> Decision {
    let unchanged = Decision {
        action: Action::Paused,
        reason: Reason::Paused,
        due: false,
        next_run_time: None,
        tick: None,
        next_run_after: None,
        blackout: None,
        last_backup_after: state.last_backup,
        last_skipped_after: state.last_skipped,
        skip_immediately_after: state.skip_immediately,
        activation_pending_after: state.activation_pending,
    };
    if state.paused {
        return unchanged;
    }

    let next_from = |last_backup: Option<DateTime<Utc>>, last_skipped: Option<DateTime<Utc>>| {
        runs.next_run(run_base(state.created_at, last_backup, last_skipped))
    };
    let at = |run: Option<Run>| run.map(|run| run.at);

    let skip_immediately =
        state.activation_pending && state.skip_immediately.unwrap_or(server_skip_immediately);
    if skip_immediately {
        // Consume and reset: record the skip, and return the flag to "unset" rather than to
        // `false`, so the schedule does not pin a value that would override the server default
        // at its next unpause.
        let skipped_tick = next_from(state.last_backup, state.last_skipped)
            .filter(|run| now > run.at)
            .map(|run| run.nominal);
        let last_skipped = Some(latest(state.last_skipped, now));
        let next = at(next_from(state.last_backup, last_skipped));
        return Decision {
            action: Action::Skip,
            reason: Reason::SkipImmediately,
            due: next.is_some_and(|run| now > run),
            next_run_time: next,
            tick: skipped_tick,
            next_run_after: next,
            last_skipped_after: last_skipped,
            skip_immediately_after: None,
            activation_pending_after: false,
            ..unchanged
        };
    }

    let evaluated = Decision {
        activation_pending_after: false,
        ..unchanged
    };
    let Some(next) = next_from(state.last_backup, state.last_skipped) else {
        // robfig returns Go's zero time here and Velero, comparing `now > zero time`, would fire
        // on every reconcile; a schedule with no future run is simply never due.
        return Decision {
            action: Action::Wait,
            reason: Reason::NoRunWithinFiveYears,
            ..evaluated
        };
    };
    if now <= next.at {
        return Decision {
            action: Action::Wait,
            reason: Reason::NotDue,
            next_run_time: Some(next.at),
            next_run_after: Some(next.at),
            ..evaluated
        };
    }

    let due = Decision {
        due: true,
        next_run_time: Some(next.at),
        tick: Some(next.nominal),
        ..evaluated
    };
    let blackout = runs.blackout_at(now);
    let skip_reason = if missed_starting_deadline(runs, state, next, now) {
        Some(Reason::StartingDeadlineExceeded)
    } else if let Some(blackout) = blackout {
        match runs.on_blackout {
            OnBlackout::Skip => Some(Reason::Blackout),
            OnBlackout::Defer => {
                // Nothing is recorded: at the blackout's end the same state gives the same
                // tick, which then fires (or meets the starting deadline).
                return Decision {
                    action: Action::Wait,
                    reason: Reason::BlackoutDeferred,
                    next_run_after: Some(blackout.end),
                    blackout: Some(blackout),
                    ..due
                };
            }
        }
    } else if state.in_flight {
        Some(Reason::InFlight)
    } else {
        None
    };
    match skip_reason {
        Some(reason) => {
            let last_skipped = Some(latest(state.last_skipped, now));
            Decision {
                action: Action::Skip,
                reason,
                next_run_after: at(next_from(state.last_backup, last_skipped)),
                last_skipped_after: last_skipped,
                blackout: blackout.filter(|_| reason == Reason::Blackout),
                ..due
            }
        }
        None => {
            // Fire once for everything missed: the new base is the actual time, so the next run
            // is the first one after now, however many were missed.
            let last_backup = Some(now);
            Decision {
                action: Action::Fire,
                reason: Reason::Due,
                next_run_after: at(next_from(last_backup, state.last_skipped)),
                last_backup_after: last_backup,
                ..due
            }
        }
    }
}

/// Velero's `getNextRunTime` base: the last backup (or the creation time), or the last skip if
/// that is later.
fn run_base(
    created_at: DateTime<Utc>,
    last_backup: Option<DateTime<Utc>>,
    last_skipped: Option<DateTime<Utc>>,
) -> DateTime<Utc> {
    let base = last_backup.unwrap_or(created_at);
    match last_skipped {
        Some(skipped) if skipped > base => skipped,
        _ => base,
    }
}

/// `now`, unless an earlier record is already later (a clock that stepped back must not move
/// `last_skipped` backwards).
fn latest(recorded: Option<DateTime<Utc>>, now: DateTime<Utc>) -> DateTime<Utc> {
    recorded.map_or(now, |recorded| recorded.max(now))
}

/// Kubernetes' starting deadline: a due schedule whose newest missed run is older than the
/// deadline does not start late. Judging the newest missed run (not the first) means that after
/// a long outage a run that was missed only moments ago still fires.
fn missed_starting_deadline(
    runs: &Runs<'_>,
    state: &ScheduleState,
    first_missed: Run,
    now: DateTime<Utc>,
) -> bool {
    let Some(deadline_seconds) = state.starting_deadline_seconds else {
        return false;
    };
    // Deadlines beyond chrono's range are as good as none.
    let Some(deadline) = i64::try_from(deadline_seconds)
        .ok()
        .and_then(TimeDelta::try_seconds)
    else {
        return false;
    };
    let base = run_base(state.created_at, state.last_backup, state.last_skipped);
    !runs.missed_run_within(base, first_missed, now, deadline)
}

/// [`explain`]'s answer, the JSON printed by `sexton schedule explain -o json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    pub action: Action,
    pub due: bool,
    pub next_run_time: Option<DateTime<Utc>>,
    pub tick: Option<DateTime<Utc>>,
    pub next_run_after: Option<DateTime<Utc>>,
    pub last_backup_after: Option<DateTime<Utc>>,
    pub last_skipped_after: Option<DateTime<Utc>>,
    pub skip_immediately_after: Option<bool>,
    pub activation_pending_after: bool,
    /// The blackout that skipped or deferred the due run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blackout: Option<Blackout>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub reason_code: Reason,
    /// A sentence a user can read.
    pub reason: String,
}

/// Parses the document's cron spec and evaluates it: what `sexton schedule explain` prints.
///
/// A paused schedule reports `paused` even if its spec is invalid (nothing would run either way),
/// with the error included. An invalid spec on an active schedule records nothing: the
/// skip-immediately flag and the pending activation are kept for when the spec is fixed (Velero
/// consumes the flag even then, wasting it on a schedule that cannot run).
pub fn explain(
    doc: &ScheduleDoc,
    now: DateTime<Utc>,
    server_skip_immediately: bool,
) -> Explanation {
    let state = doc.state();
    match Timing::new(&doc.timing_spec()) {
        Ok(timing) => {
            let decision = timing.evaluate(&state, now, server_skip_immediately);
            Explanation::new(&decision, None, state.starting_deadline_seconds)
        }
        Err(error) => {
            let mut decision = Decision {
                action: Action::Invalid,
                reason: Reason::InvalidCron,
                due: false,
                next_run_time: None,
                tick: None,
                next_run_after: None,
                blackout: None,
                last_backup_after: state.last_backup,
                last_skipped_after: state.last_skipped,
                skip_immediately_after: state.skip_immediately,
                activation_pending_after: state.activation_pending,
            };
            if state.paused {
                decision.action = Action::Paused;
                decision.reason = Reason::Paused;
            }
            Explanation::new(&decision, Some(error.to_string()), None)
        }
    }
}

impl Explanation {
    fn new(
        decision: &Decision,
        error: Option<String>,
        deadline_seconds: Option<u64>,
    ) -> Explanation {
        Explanation {
            action: decision.action,
            due: decision.due,
            next_run_time: decision.next_run_time,
            tick: decision.tick,
            next_run_after: decision.next_run_after,
            last_backup_after: decision.last_backup_after,
            last_skipped_after: decision.last_skipped_after,
            skip_immediately_after: decision.skip_immediately_after,
            activation_pending_after: decision.activation_pending_after,
            blackout: decision.blackout,
            reason: describe(decision, error.is_some(), deadline_seconds),
            error,
            reason_code: decision.reason,
        }
    }
}

fn blackout_words(blackout: Option<Blackout>) -> String {
    blackout.map_or_else(String::new, |b| {
        format!("from {} to {}", b.start.to_rfc3339(), b.end.to_rfc3339())
    })
}

fn describe(decision: &Decision, has_error: bool, deadline_seconds: Option<u64>) -> String {
    let time = |t: Option<DateTime<Utc>>| t.map_or_else(|| "never".to_owned(), |t| t.to_rfc3339());
    match decision.reason {
        Reason::Paused if has_error => {
            "the schedule is paused (and its cron spec is invalid): nothing fires and nothing is recorded"
                .to_owned()
        }
        Reason::Paused => "the schedule is paused: nothing fires and nothing is recorded".to_owned(),
        Reason::InvalidCron => "the cron spec is invalid, so the schedule cannot run; nothing is recorded".to_owned(),
        Reason::SkipImmediately => match decision.tick {
            Some(tick) => format!(
                "skip-immediately applied on creation or unpause: the run due at {} is skipped; next run at {}",
                tick.to_rfc3339(),
                time(decision.next_run_after)
            ),
            None => format!(
                "skip-immediately applied on creation or unpause: runs are counted from now; next run at {}",
                time(decision.next_run_after)
            ),
        },
        Reason::InFlight => format!(
            "the run due at {} is skipped: a backup from this schedule is still in progress (overlap policy skip); next run at {}",
            time(decision.next_run_time),
            time(decision.next_run_after)
        ),
        Reason::StartingDeadlineExceeded => format!(
            "the run due at {} is skipped: every missed run is older than the starting deadline of {}s; next run at {}",
            time(decision.next_run_time),
            deadline_seconds.unwrap_or_default(),
            time(decision.next_run_after)
        ),
        Reason::NotDue => format!("not due until {}", time(decision.next_run_time)),
        Reason::NoRunWithinFiveYears => {
            "the cron spec matches no time within five years (e.g. 30 february), so it is never due".to_owned()
        }
        Reason::Blackout => format!(
            "the run due at {} is skipped: it falls in the blackout {}; next run at {}",
            time(decision.next_run_time),
            blackout_words(decision.blackout),
            time(decision.next_run_after)
        ),
        Reason::BlackoutDeferred => format!(
            "the run due at {} waits for the end of the blackout {}: it fires at {}",
            time(decision.next_run_time),
            blackout_words(decision.blackout),
            time(decision.next_run_after)
        ),
        Reason::Due => format!(
            "due since {}: one backup fires for the whole missed period; next run at {}",
            time(decision.next_run_time),
            time(decision.next_run_after)
        ),
    }
}
