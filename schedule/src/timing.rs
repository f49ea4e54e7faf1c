//! `Timing`: when a schedule's runs are, all settings applied — the cron spec (a random
//! descriptor resolved for the schedule's name), the jitter offset, and the blackout windows.
//!
//! A run has two instants. Its **nominal tick** is the cron time: it names the run (the
//! exactly-once message id is keyed on it), so changing the jitter or the windows can never
//! make a published run look new. Its **due time** is the tick plus the schedule's jitter
//! offset: when it may fire. The offset shifts the whole schedule, so the next run after an
//! instant `t` is `cron.next(t − offset) + offset`; with no jitter both instants are the same
//! and everything is exactly robfig and Velero.
//!
//! Blackouts do not move runs; they decide what a due run does at the instant it would fire
//! (see `decision`): skip it (reason `blackout`) or wait for the blackout's end. [`Timing::upcoming`]
//! shows both for `sexton schedule next` and `describe`.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::blackout::{blackout_at, Blackout, OnBlackout, Window, WindowError, WindowSpec};
use crate::cron::{CronError, CronSpec, MeaningError};
use crate::span::Span;
use crate::spread::{jitter_offset_seconds, resolve_random_descriptor};

/// A schedule's timing settings as its document writes them.
#[derive(Debug, Clone, Copy)]
pub struct TimingSpec<'a> {
    /// The schedule's name: the seed of its jitter offset and random descriptors.
    pub name: &'a str,
    pub cron: &'a str,
    pub jitter: Option<Span>,
    pub exclude: &'a [WindowSpec],
    pub on_blackout: OnBlackout,
}

/// Why a schedule's timing cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimingError {
    #[error("invalid cron spec: {0}")]
    Cron(CronError),
    /// Only from [`Timing::check_input`]: robfig accepts the spec, but it cannot mean what it
    /// says.
    #[error("{error}")]
    Meaning { spec: String, error: MeaningError },
    #[error("blackout window {index}: {error}")]
    Window { index: usize, error: WindowError },
}

/// A run: its nominal tick (the cron time, its identity) and when it is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub nominal: DateTime<Utc>,
    pub at: DateTime<Utc>,
}

/// What an upcoming run will do, as far as the schedule's own settings decide it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum RunEffect {
    Fires,
    /// Due inside a blackout with `on_blackout: skip`.
    Skipped {
        blackout: Blackout,
    },
    /// Due inside a blackout with `on_blackout: defer`: fires at the blackout's end.
    Deferred {
        blackout: Blackout,
    },
}

/// One line of `sexton schedule next`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlannedRun {
    pub nominal: DateTime<Utc>,
    /// When it fires, or would have fired (for a skipped run).
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub effect: RunEffect,
}

/// A schedule's parsed timing. Parsing is lenient (robfig-exact) so that every stored schedule
/// keeps running as before; [`Timing::check_input`] is the strict door for new input.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    cron: CronSpec,
    /// The descriptor as written, when `cron` was drawn from a random one.
    random_descriptor: Option<String>,
    jitter: Option<Span>,
    offset: TimeDelta,
    windows: Vec<Window>,
    on_blackout: OnBlackout,
}

/// A borrowed view of a timing, so the decision is allocation-free whether it starts from a
/// bare `CronSpec` or a whole `Timing`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Runs<'a> {
    pub(crate) cron: &'a CronSpec,
    pub(crate) offset: TimeDelta,
    pub(crate) windows: &'a [Window],
    pub(crate) on_blackout: OnBlackout,
}

impl Runs<'_> {
    pub(crate) fn plain(cron: &CronSpec) -> Runs<'_> {
        Runs {
            cron,
            offset: TimeDelta::zero(),
            windows: &[],
            on_blackout: OnBlackout::Skip,
        }
    }

    /// The first run due strictly after `after`.
    pub(crate) fn next_run(&self, after: DateTime<Utc>) -> Option<Run> {
        let nominal = self
            .cron
            .next_after(after.checked_sub_signed(self.offset)?)?;
        Some(Run {
            nominal,
            at: nominal.checked_add_signed(self.offset)?,
        })
    }

    pub(crate) fn blackout_at(&self, t: DateTime<Utc>) -> Option<Blackout> {
        if self.windows.is_empty() {
            return None;
        }
        blackout_at(self.windows, t)
    }

    /// [`CronSpec::missed_run_within`] on the shifted schedule: all four instants move by the
    /// offset together.
    pub(crate) fn missed_run_within(
        &self,
        base: DateTime<Utc>,
        first_missed: Run,
        now: DateTime<Utc>,
        window: TimeDelta,
    ) -> bool {
        match (
            base.checked_sub_signed(self.offset),
            now.checked_sub_signed(self.offset),
        ) {
            (Some(base), Some(now)) => {
                self.cron
                    .missed_run_within(base, first_missed.nominal, now, window)
            }
            _ => false,
        }
    }
}

impl Timing {
    /// A timing of the spec alone: no jitter, no windows.
    pub fn plain(cron: CronSpec) -> Timing {
        Timing {
            cron,
            random_descriptor: None,
            jitter: None,
            offset: TimeDelta::zero(),
            windows: Vec::new(),
            on_blackout: OnBlackout::Skip,
        }
    }

    /// Builds the timing of a stored schedule: the cron spec as robfig parses it (a random
    /// descriptor first resolved for the name), the jitter offset, the windows.
    pub fn new(spec: &TimingSpec<'_>) -> Result<Timing, TimingError> {
        let resolved = resolve_random_descriptor(spec.cron, spec.name);
        let cron =
            CronSpec::parse(resolved.as_deref().unwrap_or(spec.cron)).map_err(TimingError::Cron)?;
        let offset = spec.jitter.map_or(0, |jitter| {
            jitter_offset_seconds(spec.name, jitter.seconds())
        });
        let windows = spec
            .exclude
            .iter()
            .enumerate()
            .map(|(index, window)| {
                Window::parse(window).map_err(|error| TimingError::Window { index, error })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if windows.len() > crate::blackout::MAX_WINDOWS {
            return Err(TimingError::Window {
                index: crate::blackout::MAX_WINDOWS,
                error: WindowError::TooMany,
            });
        }
        Ok(Timing {
            cron,
            random_descriptor: resolved.map(|_| spec.cron.trim().to_string()),
            jitter: spec.jitter,
            offset: TimeDelta::seconds(offset as i64),
            windows,
            on_blackout: spec.on_blackout,
        })
    }

    /// The door for new input (the API's create and update, `sexton schedule next`): the
    /// timing, plus the refusals and warnings of [`CronSpec::check_meaning`], and a warning
    /// when the jitter is not shorter than the time between runs (measured over the runs
    /// after `now`).
    pub fn check_input(
        spec: &TimingSpec<'_>,
        now: DateTime<Utc>,
    ) -> Result<(Timing, Vec<String>), TimingError> {
        let timing = Timing::new(spec)?;
        let mut warnings = timing
            .cron
            .check_meaning()
            .map_err(|error| TimingError::Meaning {
                spec: spec.cron.chars().take(64).collect(),
                error,
            })?;
        if let Some(jitter) = spec.jitter {
            let runs = timing.cron.upcoming(now, 64);
            let shortest_gap = runs.windows(2).map(|pair| pair[1] - pair[0]).min();
            if let Some(gap) = shortest_gap.filter(|gap| jitter.delta() > *gap) {
                let gap = Span::from_seconds(gap.num_seconds().max(1) as u64)
                    .map_or_else(|_| format!("{}s", gap.num_seconds()), |s| s.to_string());
                warnings.push(format!(
                    "jitter {jitter} is longer than the {gap} between some runs: those runs \
                     fire after the next cron time"
                ));
            }
        }
        Ok((timing, warnings))
    }

    pub(crate) fn runs(&self) -> Runs<'_> {
        Runs {
            cron: &self.cron,
            offset: self.offset,
            windows: &self.windows,
            on_blackout: self.on_blackout,
        }
    }

    /// The cron spec the runs follow (for a random descriptor, the spec drawn from it).
    pub fn cron(&self) -> &CronSpec {
        &self.cron
    }

    /// The random descriptor as written, when the spec was drawn from one.
    pub fn random_descriptor(&self) -> Option<&str> {
        self.random_descriptor.as_deref()
    }

    pub fn jitter(&self) -> Option<Span> {
        self.jitter
    }

    /// How far every run is moved after its cron time (whole seconds, in `[0, jitter)`).
    pub fn offset(&self) -> TimeDelta {
        self.offset
    }

    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    pub fn on_blackout(&self) -> OnBlackout {
        self.on_blackout
    }

    /// The first run due strictly after `after`.
    pub fn next_run(&self, after: DateTime<Utc>) -> Option<Run> {
        self.runs().next_run(after)
    }

    /// The blackout holding `t`, if any.
    pub fn blackout_at(&self, t: DateTime<Utc>) -> Option<Blackout> {
        self.runs().blackout_at(t)
    }

    /// The nominal ticks in `[from, to)`, at most `limit` of them: what a backfill of that
    /// interval fires. `Err(n)` when there are more than `limit`.
    pub fn ticks_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<DateTime<Utc>>, usize> {
        let mut ticks = Vec::new();
        let Some(mut cursor) = from.checked_sub_signed(TimeDelta::nanoseconds(1)) else {
            return Ok(ticks);
        };
        while let Some(tick) = self.cron.next_after(cursor).filter(|t| *t < to) {
            if ticks.len() == limit {
                return Err(limit + 1);
            }
            ticks.push(tick);
            cursor = tick;
        }
        Ok(ticks)
    }

    /// The next `n` runs after `after` and what each does, as a prompt scheduler would run
    /// them: a skipped run counts from its due time, a deferred one from the blackout's end.
    pub fn upcoming(&self, after: DateTime<Utc>, n: usize) -> Vec<PlannedRun> {
        let runs = self.runs();
        let mut planned = Vec::with_capacity(n.min(1024));
        let mut cursor = after;
        while planned.len() < n {
            let Some(run) = runs.next_run(cursor) else {
                break;
            };
            let (effect, next_cursor) = match (runs.blackout_at(run.at), self.on_blackout) {
                (None, _) => (RunEffect::Fires, run.at),
                (Some(blackout), OnBlackout::Skip) => (RunEffect::Skipped { blackout }, run.at),
                (Some(blackout), OnBlackout::Defer) => {
                    (RunEffect::Deferred { blackout }, blackout.end)
                }
            };
            planned.push(PlannedRun {
                nominal: run.nominal,
                at: run.at,
                effect,
            });
            cursor = next_cursor;
        }
        planned
    }

    /// The timing in words, one line per setting, for `describe` (the cron spec's zone, or
    /// UTC, said explicitly).
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let zone = self.cron.zone().map_or_else(
            || "UTC (no CRON_TZ)".to_string(),
            |tz| tz.name().to_string(),
        );
        match &self.random_descriptor {
            Some(descriptor) => lines.push(format!(
                "cron: {descriptor} = {:?}, in {zone}",
                self.cron.as_str()
            )),
            None => lines.push(format!("cron: {:?}, in {zone}", self.cron.as_str())),
        }
        if let Some(jitter) = self.jitter {
            let offset = Span::from_seconds(self.offset.num_seconds() as u64)
                .map_or_else(|_| "0 seconds".to_string(), |s| s.in_words());
            lines.push(format!(
                "jitter: {jitter} ({}): every run fires {offset} after its cron time",
                jitter.in_words()
            ));
        }
        for window in &self.windows {
            lines.push(format!(
                "blackout: {}: a run due inside {}",
                window.describe(),
                match self.on_blackout {
                    OnBlackout::Skip => "is skipped",
                    OnBlackout::Defer => "waits for its end",
                }
            ));
        }
        lines
    }
}
