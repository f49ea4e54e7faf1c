//! `sexton-simulate`: replay a schedule and a retention policy over a simulated period, with
//! the fleet's own code, and say what exists day by day.
//!
//! Retention policies surprise their users (a 3-day window that keeps 4 backups, counts that
//! are really durations, a rule that never keeps anything). Both of Sexton's cores are pure and
//! take `now` as a parameter, so a year of the fleet's decisions can be replayed in well under
//! a second: the schedule's ticks come from [`sexton_schedule::CronSpec`] (the scheduler's cron
//! code), the kind of each backup from `sexton_retention::cadence` (the scheduler's cadence),
//! and every decision from `sexton_retention::evaluate` (the retention-worker's engine), run
//! over what exists after each tick and each sweep. No NATS, no S3, no clock.
//!
//! [`simulate`] takes a [`Scenario`] and returns a [`Simulation`]: every backup taken (with the
//! days it existed and the engine's reasons), one [`Day`] per simulated day (count, storage,
//! oldest restore point, worst gap) and a [`Summary`] (steady state, maxima, rule use and
//! [`Surprise`]s). [`compare`] runs two policies side by side. Rendering (the terminal
//! calendar, JSON, the HTML page) is the CLI's business.

mod compare;
mod days;
mod locations;
mod measures;
mod random;
mod scenario;
mod simulation;
mod summary;

pub use compare::{compare, compare_with_progress, Comparison, DayPair, SwitchOver};
pub use days::{is_locked_only, BinlogDay, Day, KeepSpan, SimulatedBackup};
pub use locations::{LocationDay, LocationSimulation, LocationSummary, DEFAULT_CLASS};
pub use measures::{human_duration, promised_window_start, worst_gap, Gap};
pub use scenario::{
    BinlogArchive, ByteSize, Days, Failures, Scenario, ScenarioError, Sizes, SweepInterval,
    MAX_DAYS, MAX_SEGMENTS,
};
pub use simulation::{
    simulate, simulate_with_progress, start_of_day, ticks, Simulation, SimulationError, MAX_EVENTS,
};
pub use summary::{
    keeper_of, policy_rules, BinlogSummary, DayGap, DayValue, Keeper, LockedOnly, RuleUse, Steady,
    Summary, Surprise, SurpriseKind,
};
