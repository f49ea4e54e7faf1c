//! What to simulate, parsed once at the boundary: the schedule (cron, cadence, volumes), the
//! policy, the period, which backups fail, how large backups are, and how often the fleet's
//! retention sweep runs.
//!
//! Every value here is validated when it is built, so the simulation itself cannot meet a
//! malformed input; the CLI turns a [`ScenarioError`] into exit code 2.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Serialize, Serializer};
use sexton_retention::{FullEvery, Policy};
use sexton_schedule::CronSpec;

/// The longest simulation: ten years and a few leap days.
pub const MAX_DAYS: u32 = 3660;

/// Why a scenario was refused. Messages are lowercase and name the option they are about.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    #[error("--days must be between 1 and {MAX_DAYS}, got {0}")]
    Days(i64),
    #[error("size {text:?}: {message}")]
    Size { text: String, message: String },
    #[error("--failures {text:?}: {message}")]
    Failures { text: String, message: String },
    #[error("--sweep-every {text:?}: {message}")]
    SweepInterval { text: String, message: String },
    #[error("--volume: {0}")]
    Volume(String),
    #[error("--name {0:?}: a name is letters, digits, '-' and '_'")]
    Name(String),
    #[error("--copies: {0}")]
    Copies(String),
    #[error("--binlog {text:?}: {message}")]
    Binlog { text: String, message: String },
}

impl ScenarioError {
    /// A bad scenario stays bad: retrying the same input gives the same error.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// The number of simulated days, 1 to [`MAX_DAYS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "u32")]
pub struct Days(NonZeroU32);

impl Days {
    pub fn new(n: i64) -> Result<Days, ScenarioError> {
        u32::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_DAYS)
            .and_then(NonZeroU32::new)
            .map(Days)
            .ok_or(ScenarioError::Days(n))
    }

    pub fn get(self) -> u32 {
        self.0.get()
    }
}

impl From<Days> for u32 {
    fn from(days: Days) -> u32 {
        days.get()
    }
}

/// A number of bytes. Parsed from `10GiB`, `1.5 GB`, `512MiB`, `4096`: `KB`, `MB`, `GB`,
/// `TB` are powers of 1000; `K`, `KiB`, `M`, `MiB`, `G`, `GiB`, `T`, `TiB` powers of 1024.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn parse(text: &str) -> Result<ByteSize, ScenarioError> {
        let bad = |message: &str| ScenarioError::Size {
            text: text.to_owned(),
            message: message.to_owned(),
        };
        let trimmed = text.trim();
        if trimmed.starts_with('-') {
            return Err(bad("a size cannot be negative"));
        }
        let split = trimmed
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(trimmed.len());
        let (number, unit) = trimmed.split_at(split);
        let multiplier: u64 = match unit.trim() {
            "" | "B" => 1,
            "KB" | "kB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "TB" => 1_000_000_000_000,
            "K" | "KiB" => 1 << 10,
            "M" | "MiB" => 1 << 20,
            "G" | "GiB" => 1 << 30,
            "T" | "TiB" => 1 << 40,
            _ => {
                return Err(bad(
                    "expected a number and a unit: B, KB, MB, GB, TB, KiB, MiB, GiB or TiB",
                ))
            }
        };
        if number.is_empty() || number.matches('.').count() > 1 || number == "." {
            return Err(bad("expected a number such as 10GiB or 1.5GB"));
        }
        let value: f64 = number
            .parse()
            .map_err(|_| bad("expected a number such as 10GiB or 1.5GB"))?;
        let bytes = value * multiplier as f64;
        if !bytes.is_finite() || bytes >= u64::MAX as f64 / 4.0 {
            return Err(bad("too large"));
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

impl FromStr for ByteSize {
    type Err = ScenarioError;

    fn from_str(text: &str) -> Result<ByteSize, ScenarioError> {
        ByteSize::parse(text)
    }
}

impl fmt::Display for ByteSize {
    /// Binary units with up to one decimal: `10 GiB`, `1.5 MiB`, `512 B`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        if unit == 0 || value >= 100.0 || value.fract() < 0.05 {
            write!(f, "{value:.0} {}", UNITS[unit])
        } else {
            write!(f, "{value:.1} {}", UNITS[unit])
        }
    }
}

/// What a full and an incremental artifact take in storage (per volume, when the schedule has
/// volumes). A failed backup's partial objects are counted as nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Sizes {
    pub full: ByteSize,
    pub incremental: ByteSize,
}

impl Default for Sizes {
    fn default() -> Sizes {
        Sizes {
            full: ByteSize(10 << 30),
            incremental: ByteSize(1 << 30),
        }
    }
}

/// Which scheduled backups fail: none, a rate drawn from a seeded generator (the same seed
/// gives the same failures), or a pattern repeated over the ticks (`ok,ok,fail`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Failures {
    #[default]
    None,
    Rate {
        /// Parts per million.
        per_million: u32,
        seed: u64,
    },
    /// One entry per tick, repeated: `true` fails.
    Pattern(Vec<bool>),
}

impl Failures {
    /// `30%`, `0.3` (a rate) or `ok,ok,fail` (a pattern of `ok` and `fail`, repeated).
    pub fn parse(text: &str, seed: u64) -> Result<Failures, ScenarioError> {
        let bad = |message: &str| ScenarioError::Failures {
            text: text.to_owned(),
            message: message.to_owned(),
        };
        let trimmed = text.trim();
        if trimmed.contains(',') || trimmed == "ok" || trimmed == "fail" {
            let pattern = trimmed
                .split(',')
                .map(|word| match word.trim() {
                    "ok" => Ok(false),
                    "fail" => Ok(true),
                    _ => Err(bad("a pattern lists ok and fail, such as ok,ok,fail")),
                })
                .collect::<Result<Vec<bool>, _>>()?;
            return Ok(Failures::Pattern(pattern));
        }
        let (number, scale) = match trimmed.strip_suffix('%') {
            Some(number) => (number, 100.0),
            None => (trimmed, 1.0),
        };
        let rate: f64 = number
            .trim()
            .parse()
            .map_err(|_| bad("expected a rate (30% or 0.3) or a pattern such as ok,ok,fail"))?;
        let fraction = rate / scale;
        if !(0.0..=1.0).contains(&fraction) {
            return Err(bad("a rate is between 0% and 100%"));
        }
        Ok(Failures::Rate {
            per_million: (fraction * 1_000_000.0).round() as u32,
            seed,
        })
    }
}

impl fmt::Display for Failures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failures::None => f.write_str("none"),
            Failures::Rate { per_million, seed } => {
                write!(f, "{}% (seed {seed})", f64::from(*per_million) / 10_000.0)
            }
            Failures::Pattern(pattern) => {
                let words: Vec<&str> = pattern
                    .iter()
                    .map(|&fails| if fails { "fail" } else { "ok" })
                    .collect();
                f.write_str(&words.join(","))
            }
        }
    }
}

impl Serialize for Failures {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// How often the fleet's retention sweep runs (`scheduler.retention_sweep_interval`, 1 h by
/// default): the engine also runs then, so time-based rules expire backups between ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepInterval(TimeDelta);

impl SweepInterval {
    /// The fleet's default.
    pub const HOURLY: SweepInterval = SweepInterval(TimeDelta::hours(1));

    /// `<n>s`, `<n>min` (or `<n>m`), `<n>h`, `<n>d`; at least a minute.
    pub fn parse(text: &str) -> Result<SweepInterval, ScenarioError> {
        let bad = |message: &str| ScenarioError::SweepInterval {
            text: text.to_owned(),
            message: message.to_owned(),
        };
        let trimmed = text.trim();
        let split = trimmed
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(trimmed.len());
        let (digits, unit) = trimmed.split_at(split);
        let amount: i64 = digits
            .parse()
            .map_err(|_| bad("expected a duration such as 1h, 30min or 1d, or off"))?;
        let delta = match unit {
            "s" => TimeDelta::try_seconds(amount),
            "m" | "min" => TimeDelta::try_minutes(amount),
            "h" => TimeDelta::try_hours(amount),
            "d" => TimeDelta::try_days(amount),
            _ => None,
        }
        .ok_or_else(|| bad("expected a duration such as 1h, 30min or 1d, or off"))?;
        if delta < TimeDelta::minutes(1) {
            return Err(bad("sweeps run at most once a minute"));
        }
        Ok(SweepInterval(delta))
    }

    pub fn as_delta(self) -> TimeDelta {
        self.0
    }
}

impl fmt::Display for SweepInterval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::measures::human_duration(self.0))
    }
}

impl Serialize for SweepInterval {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The binlog (WAL) archive beside the backups (issue 30): a segment of `bytes` closed every
/// `every` from the first simulated instant on, handed to the engine with the backups, and
/// collected as its binlog plan says, as the fleet's binlog collector does. A backup's own
/// range is its time (the simulated executor names no segment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BinlogArchive {
    pub every: SweepInterval,
    pub bytes: ByteSize,
}

/// The most segments one simulation closes: beyond that each run's binlog plan would dominate,
/// and a coarser segment says the same.
pub const MAX_SEGMENTS: i64 = 100_000;

impl BinlogArchive {
    /// `EVERY:SIZE`, such as `1h:256MiB` or `15min:16MiB`.
    pub fn parse(text: &str) -> Result<BinlogArchive, ScenarioError> {
        let bad = |message: String| ScenarioError::Binlog {
            text: text.to_owned(),
            message,
        };
        let (every, bytes) = text
            .split_once(':')
            .ok_or_else(|| bad("expected EVERY:SIZE, such as 1h:256MiB".to_owned()))?;
        let every = SweepInterval::parse(every).map_err(|err| match err {
            ScenarioError::SweepInterval { message, .. } => bad(message.replace(
                "sweeps run at most once a minute",
                "a segment lasts a minute at least",
            )),
            other => bad(other.to_string()),
        })?;
        let bytes = ByteSize::parse(bytes).map_err(|err| bad(err.to_string()))?;
        Ok(BinlogArchive { every, bytes })
    }
}

/// One simulation's inputs.
#[derive(Clone, Debug, Serialize)]
pub struct Scenario {
    /// The schedule's name: backup ids are `<name>-<tick as YYYYMMDDhhmmss>`, as the
    /// scheduler names them.
    pub name: String,
    pub cron: CronSpec,
    pub policy: Policy,
    /// The simulation starts here; day 1 is the day holding it (in the cron's zone).
    pub from: DateTime<Utc>,
    pub days: Days,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_every: Option<FullEvery>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    pub failures: Failures,
    pub sizes: Sizes,
    /// `None`: the engine runs only when a backup completes.
    pub sweep_every: Option<SweepInterval>,
    /// The bucket's Object Lock tiers (issue 29): each run locks what it keeps as the
    /// retention-worker does, and a backup the policy lets go stays until its lock's date.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "tiers_text")]
    pub lock: Option<sexton_retention::lock::LockTiers>,
    /// The schedule's copy rules (issue 28): each location is simulated with its own policy,
    /// and the primary holds a backup until each delayed copy of it is due.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<sexton_model::copies::CopyRule>,
    /// The binlog archive (issue 30), when the scenario simulates one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binlog: Option<BinlogArchive>,
}

fn tiers_text<S: Serializer>(
    tiers: &Option<sexton_retention::lock::LockTiers>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match tiers {
        Some(tiers) => serializer.collect_str(tiers),
        None => serializer.serialize_none(),
    }
}

impl Scenario {
    /// A scenario with the fleet's defaults: fulls only, no volume, no failure, the default
    /// sizes, an hourly sweep, named `sim`.
    pub fn new(cron: CronSpec, policy: Policy, from: DateTime<Utc>, days: Days) -> Scenario {
        Scenario {
            name: "sim".to_owned(),
            cron,
            policy,
            from,
            days,
            full_every: None,
            volumes: Vec::new(),
            failures: Failures::None,
            sizes: Sizes::default(),
            sweep_every: Some(SweepInterval::HOURLY),
            lock: None,
            copies: Vec::new(),
            binlog: None,
        }
    }

    /// Checks the parts a struct literal could get wrong: the name and the volume list.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let name_ok = !self.name.is_empty()
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !name_ok {
            return Err(ScenarioError::Name(self.name.clone()));
        }
        // Checked as the API checks a schedule's rules, with the cron's longest interval
        // (what a count of backups spans).
        let interval_days = self
            .cron
            .upcoming(self.from, 8)
            .windows(2)
            .map(|pair| pair[1] - pair[0])
            .max()
            .map(|interval| interval.num_seconds() as f64 / 86_400.0);
        sexton_model::copies::validate_copy_rules(&self.copies, interval_days)
            .map_err(ScenarioError::Copies)?;
        if let Some(archive) = self.binlog {
            let segments =
                i64::from(self.days.get()) * 86_400 / archive.every.as_delta().num_seconds();
            if segments > MAX_SEGMENTS {
                return Err(ScenarioError::Binlog {
                    text: format!("{}:{}", archive.every, archive.bytes.0),
                    message: format!(
                        "{segments} segments in {} days, more than {MAX_SEGMENTS}: simulate \
                         longer segments",
                        self.days.get()
                    ),
                });
            }
        }
        for (position, volume) in self.volumes.iter().enumerate() {
            if volume.is_empty() {
                return Err(ScenarioError::Volume("a volume name is empty".to_owned()));
            }
            if self.volumes[..position].contains(volume) {
                return Err(ScenarioError::Volume(format!(
                    "volume {volume} is listed twice"
                )));
            }
        }
        Ok(())
    }
}
