//! Configuration shared by every service: where NATS and S3 are and how to reach them, where
//! the telemetry endpoint listens, how logs look. Read from a TOML file, then overridden by
//! `SEXTON_*` environment variables; unknown keys in the file are an error so a typo never
//! silently falls back to a default.

use std::{collections::HashMap, path::Path, time::Duration};

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("invalid value {value:?} for {key}: {why}")]
    Value {
        key: String,
        value: String,
        why: String,
    },
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub nats: NatsConfig,
    pub s3: S3Config,
    pub http: HttpConfig,
    pub log: LogConfig,
    pub scheduler: SchedulerConfig,
    pub deleter: DeleterConfig,
    pub audit: AuditConfig,
    pub breaker: BreakerConfig,
    /// Other object stores copies go to (issue 28), by name; `[s3]` is the location
    /// `primary`. Each has its own credentials, which no other location's client sees.
    pub locations: std::collections::BTreeMap<String, LocationConfig>,
    pub copier: CopierConfig,
}

/// A location copies go to: an S3 store of its own. Written in the file as the `[s3]` table's
/// keys plus `storage_class`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(from = "LocationFile")]
pub struct LocationConfig {
    pub s3: S3Config,
    /// The storage class copies are written in unless their rule names one.
    pub storage_class: Option<String>,
}

/// `[locations.<name>]` as written (serde cannot refuse unknown keys of a flattened table).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LocationFile {
    endpoint: Option<String>,
    region: Option<String>,
    bucket: Option<String>,
    prefix: Option<String>,
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
    force_path_style: Option<bool>,
    storage_class: Option<String>,
    lock: Option<LockConfig>,
}

impl From<LocationFile> for LocationConfig {
    fn from(file: LocationFile) -> LocationConfig {
        let defaults = S3Config::default();
        LocationConfig {
            s3: S3Config {
                endpoint: file.endpoint,
                region: file.region.unwrap_or(defaults.region),
                bucket: file.bucket.unwrap_or(defaults.bucket),
                prefix: file.prefix.unwrap_or(defaults.prefix),
                access_key_id: file.access_key_id,
                secret_access_key: file.secret_access_key,
                force_path_style: file.force_path_style.unwrap_or(defaults.force_path_style),
                lock: file.lock,
            },
            storage_class: file.storage_class,
        }
    }
}

/// The copier (`sexton-copier`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CopierConfig {
    /// How many backups one replica copies at once.
    pub concurrency: usize,
    /// Bytes per part of a multipart copy (5 MiB to 5 GiB).
    pub part_size: u64,
    /// Parts of one object in memory at once: memory is about `concurrency × part_size ×
    /// parts_in_flight` whatever the objects' sizes.
    pub parts_in_flight: usize,
    /// How long a copy job may go unacknowledged before it is delivered again; a running copy
    /// keeps its job with progress acks.
    #[serde(with = "duration_text")]
    pub ack_wait: Duration,
    /// How often each cluster's binlog archive is copied to the locations its copy rules name
    /// (also after every backup copied): how far behind the primary a location's
    /// point-in-time recovery may be, at most.
    #[serde(with = "duration_text")]
    pub binlog_interval: Duration,
}

impl Default for CopierConfig {
    fn default() -> Self {
        CopierConfig {
            concurrency: 2,
            part_size: 8 * 1024 * 1024,
            parts_in_flight: 4,
            ack_wait: Duration::from_secs(60),
            binlog_interval: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NatsConfig {
    pub url: String,
    /// A `.creds` file (JWT + nkey seed), as `nsc` writes it.
    pub creds_file: Option<String>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    pub tls_ca_file: Option<String>,
    pub tls_cert_file: Option<String>,
    pub tls_key_file: Option<String>,
    pub tls_required: bool,
    /// Replicas for the streams and buckets this service creates (3 on a NATS cluster).
    pub replicas: usize,
    /// The name this client shows in the server's connection list.
    pub client_name: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct S3Config {
    pub endpoint: Option<String>,
    pub region: String,
    pub bucket: String,
    /// Every object Sexton touches lies under `<prefix>/<cluster>/`.
    pub prefix: String,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub force_path_style: bool,
    /// S3 Object Lock on this store (issue 29): each backup's objects are locked until the
    /// date its retention keeps it. The bucket must have Object Lock enabled.
    pub lock: Option<LockConfig>,
}

impl S3Config {
    /// The place these settings name (issue 54): what records written through them carry.
    pub fn place(&self) -> sexton_model::keys::StoreRef {
        sexton_model::keys::StoreRef {
            endpoint: self.endpoint.clone(),
            bucket: self.bucket.clone(),
            prefix: self.prefix.clone(),
        }
        .normalised()
    }
}

/// `[s3.lock]` or `[locations.<name>.lock]`: how long each kind of keep is locked
/// (docs/immutability.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "LockFile")]
pub struct LockConfig {
    pub mode: sexton_retention::lock::LockMode,
    pub tiers: sexton_retention::lock::LockTiers,
}

/// A lock setting as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    mode: Option<String>,
    /// Compliance locks cannot be undone, not even by the account's root: saying so is part
    /// of asking for them.
    #[serde(default)]
    compliance_confirmed: bool,
    min: Option<String>,
    last: Option<String>,
    hourly: Option<String>,
    daily: Option<String>,
    weekly: Option<String>,
    monthly: Option<String>,
    yearly: Option<String>,
}

impl LockConfig {
    /// A lock setting from one environment variable: `mode=governance,min=1d,daily=14d`, the
    /// table's keys and values separated by commas. Empty: no lock.
    pub fn from_pairs(text: &str) -> Result<Option<LockConfig>, String> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        let mut file = LockFile::default();
        for pair in text.split(',') {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!(
                    "{pair:?}: expected key=value pairs separated by commas, such as \
                     mode=governance,min=1d,daily=14d"
                ));
            };
            let value = Some(value.trim().to_string());
            match key.trim() {
                "mode" => file.mode = value,
                "compliance_confirmed" => {
                    file.compliance_confirmed = match value.as_deref() {
                        Some("true") => true,
                        Some("false") => false,
                        _ => return Err("compliance_confirmed: expected true or false".into()),
                    }
                }
                "min" => file.min = value,
                "last" => file.last = value,
                "hourly" => file.hourly = value,
                "daily" => file.daily = value,
                "weekly" => file.weekly = value,
                "monthly" => file.monthly = value,
                "yearly" => file.yearly = value,
                other => {
                    return Err(format!(
                        "unknown lock key {other:?}: expected mode, compliance_confirmed, min, \
                         last, hourly, daily, weekly, monthly or yearly"
                    ))
                }
            }
        }
        LockConfig::try_from(file).map(Some)
    }
}

impl TryFrom<LockFile> for LockConfig {
    type Error = String;

    fn try_from(file: LockFile) -> Result<LockConfig, String> {
        use sexton_retention::lock::{parse_lock_duration, LockMode, LockTiers};
        let mode = match file.mode.as_deref() {
            None | Some("governance") => LockMode::Governance,
            Some("compliance") => LockMode::Compliance,
            Some(other) => {
                return Err(format!(
                    "lock mode {other:?}: expected \"governance\" or \"compliance\""
                ))
            }
        };
        if mode == LockMode::Compliance && !file.compliance_confirmed {
            return Err(
                "lock mode \"compliance\" cannot be undone: nobody, not even the \
                        account's root user, can delete a locked version or shorten its lock \
                        before its date, so a wrong tier keeps (and bills) every backup for \
                        that long; add compliance_confirmed = true to say you mean it, or use \
                        \"governance\""
                    .into(),
            );
        }
        let tier = |name: &str, text: &Option<String>| {
            text.as_deref()
                .map(|text| {
                    parse_lock_duration(text)
                        .map_err(|err| format!("lock {name} {text:?}: {err}"))
                        .and_then(|duration| {
                            if duration.is_zero() {
                                Err(format!("lock {name} {text:?}: a lock of zero locks nothing; leave it out"))
                            } else {
                                Ok(duration)
                            }
                        })
                })
                .transpose()
        };
        let tiers = LockTiers {
            min: tier("min", &file.min)?,
            last: tier("last", &file.last)?,
            hourly: tier("hourly", &file.hourly)?,
            daily: tier("daily", &file.daily)?,
            weekly: tier("weekly", &file.weekly)?,
            monthly: tier("monthly", &file.monthly)?,
            yearly: tier("yearly", &file.yearly)?,
        };
        Ok(LockConfig { mode, tiers })
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Where `/metrics`, `/healthz` and `/readyz` listen; empty turns the endpoint off.
    pub listen: String,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub format: LogFormat,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    /// The server-wide default of `skip_immediately` (Velero's `--schedule-skip-immediately`).
    pub skip_immediately_default: bool,
    /// At most one retention sweep per cluster per interval (seed 003: once an hour).
    #[serde(with = "duration_text")]
    pub retention_sweep_interval: Duration,
    /// How often a cluster's catalog is compared with its bucket (the scrub), at the next
    /// sweep once this has passed; `0s` turns the periodic scrub off (`sexton catalog scrub`
    /// still runs one).
    #[serde(with = "duration_text")]
    pub scrub_interval: Duration,
    /// The longest a completed backup's report may come after the completion it claims, by
    /// the NATS server's clock when the executor published it (issue 29): a report whose
    /// `completed_at` lies further back is refused, so a backdated backup can never become the
    /// pick of a past day, week or month and push a real one out (restic#22057). Set it to the
    /// longest a backup takes from completing to its report (upload included). `0s`: off.
    #[serde(with = "duration_text")]
    pub max_report_delay: Duration,
    /// Refuse a completed report that answers no due-backup this fleet issued (issue 29):
    /// with it, every counted backup was asked for by Sexton, and its times are judged
    /// against the instant it was asked for. Off by default: executors that take backups of
    /// their own accord (and report them) keep working. `sexton exec` only answers dues.
    pub require_due: bool,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DeleterConfig {
    /// How many batches of delete jobs one replica deletes at once (one more is judged and
    /// claimed meanwhile); its `DeleteObjects` requests in flight are twice this.
    pub concurrency: usize,
    /// The most delete jobs one batch takes: their objects are deleted together in
    /// `DeleteObjects` requests of up to 1000 keys, so many small backups fill whole requests.
    pub batch_jobs: usize,
    /// How long a delete plugin may take to answer before its call counts as failed.
    #[serde(with = "duration_text")]
    pub plugin_timeout: Duration,
    /// How long a delete job may go unacknowledged before JetStream delivers it again (to
    /// another replica, after a crash). A running batch keeps its jobs with progress acks.
    #[serde(with = "duration_text")]
    pub ack_wait: Duration,
}

/// The audit stream (`SEXTON_AUDIT`, docs/safety.md).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// How long the stream keeps an entry. Applied when the stream is created; an existing
    /// stream keeps its own (changing it is an administrator's `nats stream edit`, since no
    /// Sexton user may update the stream).
    #[serde(with = "duration_text")]
    pub retention: Duration,
}

/// The server-wide defaults of the retention circuit breaker (docs/safety.md); a schedule's
/// `breaker` block overrides them for its group.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    /// `false` turns the breaker off wherever a schedule does not turn it on.
    pub enabled: bool,
    /// A run that deletes more than this share of a group's completed backups is held.
    pub max_delete_fraction: f64,
    /// The share is judged only in groups holding at least this many completed backups.
    pub min_backups: usize,
    /// A run that deletes more than this many backups of one group is held.
    pub max_delete_count: u32,
    /// A run that deletes while the group's newest completed backup is older than this many
    /// intervals of its schedule is held; `0` turns the check off.
    pub stale_after_intervals: u32,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            retention: Duration::from_secs(365 * 86_400),
        }
    }
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            enabled: true,
            max_delete_fraction: 0.5,
            min_backups: 10,
            max_delete_count: 1000,
            stale_after_intervals: 3,
        }
    }
}

impl Default for NatsConfig {
    fn default() -> Self {
        NatsConfig {
            url: "nats://127.0.0.1:4222".into(),
            creds_file: None,
            user: None,
            password: None,
            token: None,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_required: false,
            replicas: 1,
            client_name: None,
        }
    }
}

/// The servers of `nats.url`: one URL, or several separated by commas (as `nats` and the Go
/// client take them), so a service can reach a cluster whichever node is up when it starts.
pub fn server_urls(url: &str) -> Vec<&str> {
    url.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect()
}

impl Default for S3Config {
    fn default() -> Self {
        S3Config {
            endpoint: None,
            region: "us-east-1".into(),
            bucket: "sexton".into(),
            prefix: "backups".into(),
            access_key_id: None,
            secret_access_key: None,
            force_path_style: true,
            lock: None,
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: "127.0.0.1:0".into(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
        }
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            skip_immediately_default: false,
            retention_sweep_interval: Duration::from_secs(3600),
            scrub_interval: Duration::from_secs(3600),
            max_report_delay: Duration::ZERO,
            require_due: false,
        }
    }
}

impl Default for DeleterConfig {
    fn default() -> Self {
        DeleterConfig {
            concurrency: 4,
            batch_jobs: 1000,
            plugin_timeout: Duration::from_secs(10),
            ack_wait: Duration::from_secs(60),
        }
    }
}

/// The environment variables read, with the config key each overrides. Kept as one table so
/// the README's reference and the loader cannot drift apart.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    ("SEXTON_NATS_URL", "nats.url"),
    ("SEXTON_NATS_CREDS_FILE", "nats.creds_file"),
    ("SEXTON_NATS_USER", "nats.user"),
    ("SEXTON_NATS_PASSWORD", "nats.password"),
    ("SEXTON_NATS_TOKEN", "nats.token"),
    ("SEXTON_NATS_TLS_CA_FILE", "nats.tls_ca_file"),
    ("SEXTON_NATS_TLS_CERT_FILE", "nats.tls_cert_file"),
    ("SEXTON_NATS_TLS_KEY_FILE", "nats.tls_key_file"),
    ("SEXTON_NATS_TLS_REQUIRED", "nats.tls_required"),
    ("SEXTON_NATS_REPLICAS", "nats.replicas"),
    ("SEXTON_S3_ENDPOINT", "s3.endpoint"),
    ("SEXTON_S3_REGION", "s3.region"),
    ("SEXTON_S3_BUCKET", "s3.bucket"),
    ("SEXTON_S3_PREFIX", "s3.prefix"),
    ("SEXTON_S3_ACCESS_KEY_ID", "s3.access_key_id"),
    ("SEXTON_S3_SECRET_ACCESS_KEY", "s3.secret_access_key"),
    ("SEXTON_S3_FORCE_PATH_STYLE", "s3.force_path_style"),
    ("SEXTON_S3_LOCK", "s3.lock"),
    ("SEXTON_HTTP_LISTEN", "http.listen"),
    ("SEXTON_LOG_FORMAT", "log.format"),
    (
        "SEXTON_SCHEDULER_SKIP_IMMEDIATELY_DEFAULT",
        "scheduler.skip_immediately_default",
    ),
    (
        "SEXTON_SCHEDULER_RETENTION_SWEEP_INTERVAL",
        "scheduler.retention_sweep_interval",
    ),
    (
        "SEXTON_SCHEDULER_SCRUB_INTERVAL",
        "scheduler.scrub_interval",
    ),
    (
        "SEXTON_SCHEDULER_MAX_REPORT_DELAY",
        "scheduler.max_report_delay",
    ),
    ("SEXTON_SCHEDULER_REQUIRE_DUE", "scheduler.require_due"),
    ("SEXTON_DELETER_CONCURRENCY", "deleter.concurrency"),
    ("SEXTON_DELETER_BATCH_JOBS", "deleter.batch_jobs"),
    ("SEXTON_DELETER_PLUGIN_TIMEOUT", "deleter.plugin_timeout"),
    ("SEXTON_DELETER_ACK_WAIT", "deleter.ack_wait"),
    ("SEXTON_AUDIT_RETENTION", "audit.retention"),
    ("SEXTON_COPIER_CONCURRENCY", "copier.concurrency"),
    ("SEXTON_COPIER_PART_SIZE", "copier.part_size"),
    ("SEXTON_COPIER_PARTS_IN_FLIGHT", "copier.parts_in_flight"),
    ("SEXTON_COPIER_ACK_WAIT", "copier.ack_wait"),
    ("SEXTON_COPIER_BINLOG_INTERVAL", "copier.binlog_interval"),
    ("SEXTON_BREAKER_ENABLED", "breaker.enabled"),
    (
        "SEXTON_BREAKER_MAX_DELETE_FRACTION",
        "breaker.max_delete_fraction",
    ),
    ("SEXTON_BREAKER_MIN_BACKUPS", "breaker.min_backups"),
    (
        "SEXTON_BREAKER_MAX_DELETE_COUNT",
        "breaker.max_delete_count",
    ),
    (
        "SEXTON_BREAKER_STALE_AFTER_INTERVALS",
        "breaker.stale_after_intervals",
    ),
];

impl Config {
    /// The configured copy locations by name, for an error that says what there is: `dr,
    /// vault`, or `none besides primary`.
    pub fn location_names(&self) -> String {
        if self.locations.is_empty() {
            "none besides primary".to_string()
        } else {
            let names: Vec<&str> = self.locations.keys().map(String::as_str).collect();
            names.join(", ")
        }
    }
    /// Reads the file (if any), then applies the process environment.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let env: HashMap<String, String> = std::env::vars().collect();
        Self::load_with_env(path, &env)
    }

    pub fn load_with_env(
        path: Option<&Path>,
        env: &HashMap<String, String>,
    ) -> Result<Config, ConfigError> {
        let mut config = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.display().to_string(),
                    source,
                })?;
                Self::from_toml(&text).map_err(|message| ConfigError::Parse {
                    path: path.display().to_string(),
                    message,
                })?
            }
            None => Config::default(),
        };
        config.apply_env(env)?;
        config.validate()?;
        Ok(config)
    }

    pub fn from_toml(text: &str) -> Result<Config, String> {
        toml::from_str(text).map_err(|err| err.to_string().trim_end().replace('\n', " "))
    }

    fn apply_env(&mut self, env: &HashMap<String, String>) -> Result<(), ConfigError> {
        // AWS's own variable names are honoured too, below Sexton's, so a standard setup works.
        for (aws, key) in [
            ("AWS_ACCESS_KEY_ID", "s3.access_key_id"),
            ("AWS_SECRET_ACCESS_KEY", "s3.secret_access_key"),
            ("AWS_REGION", "s3.region"),
        ] {
            if let Some(value) = env.get(aws) {
                self.set(key, value)?;
            }
        }
        for (var, key) in ENVIRONMENT {
            if let Some(value) = env.get(*var) {
                self.set(key, value)?;
            }
        }
        let mut locations: Vec<(&String, &String)> = env
            .iter()
            .filter(|(var, _)| var.starts_with("SEXTON_LOCATION_"))
            .collect();
        locations.sort();
        for (var, value) in locations {
            let key = Self::location_variable(var).ok_or_else(|| ConfigError::Value {
                key: var.clone(),
                value: value.clone(),
                why: "expected SEXTON_LOCATION_<NAME>_<ENDPOINT|REGION|BUCKET|PREFIX|\
                      ACCESS_KEY_ID|SECRET_ACCESS_KEY|FORCE_PATH_STYLE|STORAGE_CLASS|LOCK>"
                    .into(),
            })?;
            self.set(&key, value)?;
        }
        Ok(())
    }

    /// Sets one dotted key from text, as the environment gives it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let bad = |why: &str| ConfigError::Value {
            key: key.to_string(),
            value: value.to_string(),
            why: why.to_string(),
        };
        let opt = |v: &str| (!v.is_empty()).then(|| v.to_string());
        let parse_bool = |v: &str| match v {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(bad("expected true or false")),
        };
        match key {
            "nats.url" => self.nats.url = value.to_string(),
            "nats.creds_file" => self.nats.creds_file = opt(value),
            "nats.user" => self.nats.user = opt(value),
            "nats.password" => self.nats.password = opt(value),
            "nats.token" => self.nats.token = opt(value),
            "nats.tls_ca_file" => self.nats.tls_ca_file = opt(value),
            "nats.tls_cert_file" => self.nats.tls_cert_file = opt(value),
            "nats.tls_key_file" => self.nats.tls_key_file = opt(value),
            "nats.tls_required" => self.nats.tls_required = parse_bool(value)?,
            "nats.replicas" => {
                self.nats.replicas = value.parse().map_err(|_| bad("expected a whole number"))?
            }
            "s3.endpoint" => self.s3.endpoint = opt(value),
            "s3.region" => self.s3.region = value.to_string(),
            "s3.bucket" => self.s3.bucket = value.to_string(),
            "s3.prefix" => self.s3.prefix = value.to_string(),
            "s3.access_key_id" => self.s3.access_key_id = opt(value),
            "s3.secret_access_key" => self.s3.secret_access_key = opt(value),
            "s3.force_path_style" => self.s3.force_path_style = parse_bool(value)?,
            "s3.lock" => self.s3.lock = LockConfig::from_pairs(value).map_err(|why| bad(&why))?,
            "http.listen" => self.http.listen = value.to_string(),
            "log.format" => {
                self.log.format = match value {
                    "text" => LogFormat::Text,
                    "json" => LogFormat::Json,
                    _ => return Err(bad("expected text or json")),
                }
            }
            "scheduler.skip_immediately_default" => {
                self.scheduler.skip_immediately_default = parse_bool(value)?
            }
            "scheduler.retention_sweep_interval" => {
                self.scheduler.retention_sweep_interval =
                    duration_text::parse(value).map_err(|why| bad(&why))?
            }
            "scheduler.scrub_interval" => {
                self.scheduler.scrub_interval =
                    duration_text::parse(value).map_err(|why| bad(&why))?
            }
            "scheduler.max_report_delay" => {
                self.scheduler.max_report_delay =
                    duration_text::parse(value).map_err(|why| bad(&why))?
            }
            "scheduler.require_due" => self.scheduler.require_due = parse_bool(value)?,
            "deleter.concurrency" => {
                self.deleter.concurrency =
                    value.parse().map_err(|_| bad("expected a whole number"))?
            }
            "deleter.batch_jobs" => {
                self.deleter.batch_jobs =
                    value.parse().map_err(|_| bad("expected a whole number"))?
            }
            "deleter.plugin_timeout" => {
                self.deleter.plugin_timeout =
                    duration_text::parse(value).map_err(|why| bad(&why))?
            }
            "deleter.ack_wait" => {
                self.deleter.ack_wait = duration_text::parse(value).map_err(|why| bad(&why))?
            }
            "audit.retention" => {
                self.audit.retention = duration_text::parse(value).map_err(|why| bad(&why))?
            }
            "breaker.enabled" => self.breaker.enabled = parse_bool(value)?,
            "breaker.max_delete_fraction" => {
                self.breaker.max_delete_fraction = value
                    .parse()
                    .map_err(|_| bad("expected a share from 0 to 1, such as 0.5"))?
            }
            "breaker.min_backups" => {
                self.breaker.min_backups =
                    value.parse().map_err(|_| bad("expected a whole number"))?
            }
            "breaker.max_delete_count" => {
                self.breaker.max_delete_count =
                    value.parse().map_err(|_| bad("expected a whole number"))?
            }
            "breaker.stale_after_intervals" => {
                self.breaker.stale_after_intervals =
                    value.parse().map_err(|_| bad("expected a whole number"))?
            }
            "copier.concurrency" => {
                self.copier.concurrency =
                    value.parse().map_err(|_| bad("expected a whole number"))?
            }
            "copier.part_size" => {
                self.copier.part_size = value
                    .parse()
                    .map_err(|_| bad("expected a whole number of bytes"))?
            }
            "copier.parts_in_flight" => {
                self.copier.parts_in_flight =
                    value.parse().map_err(|_| bad("expected a whole number"))?
            }
            "copier.ack_wait" => {
                self.copier.ack_wait = duration_text::parse(value).map_err(|why| bad(&why))?
            }
            "copier.binlog_interval" => {
                self.copier.binlog_interval =
                    duration_text::parse(value).map_err(|why| bad(&why))?
            }
            other => {
                let Some((name, field)) = other
                    .strip_prefix("locations.")
                    .and_then(|rest| rest.split_once('.'))
                else {
                    return Err(bad("unknown configuration key"));
                };
                if crate::names::LocationName::new(name).is_err() {
                    return Err(bad("a location's name holds letters, digits, '-' and '_'"));
                }
                let location = self.locations.entry(name.to_string()).or_default();
                match field {
                    "endpoint" => location.s3.endpoint = opt(value),
                    "region" => location.s3.region = value.to_string(),
                    "bucket" => location.s3.bucket = value.to_string(),
                    "prefix" => location.s3.prefix = value.to_string(),
                    "access_key_id" => location.s3.access_key_id = opt(value),
                    "secret_access_key" => location.s3.secret_access_key = opt(value),
                    "force_path_style" => location.s3.force_path_style = parse_bool(value)?,
                    "storage_class" => location.storage_class = opt(value),
                    "lock" => {
                        location.s3.lock = LockConfig::from_pairs(value).map_err(|why| bad(&why))?
                    }
                    _ => return Err(bad("unknown configuration key")),
                }
            }
        }
        Ok(())
    }

    /// `SEXTON_LOCATION_<NAME>_<FIELD>`: the location key it sets (`locations.<name>.<field>`,
    /// the name lower-cased), if the variable is one.
    pub fn location_variable(var: &str) -> Option<String> {
        const FIELDS: &[&str] = &[
            "SECRET_ACCESS_KEY",
            "ACCESS_KEY_ID",
            "FORCE_PATH_STYLE",
            "STORAGE_CLASS",
            "ENDPOINT",
            "LOCK",
            "REGION",
            "BUCKET",
            "PREFIX",
        ];
        let rest = var.strip_prefix("SEXTON_LOCATION_")?;
        FIELDS.iter().find_map(|field| {
            let name = rest.strip_suffix(field)?.strip_suffix('_')?;
            Some(format!(
                "locations.{}.{}",
                name.to_ascii_lowercase(),
                field.to_ascii_lowercase()
            ))
        })
    }

    /// Cross-field checks that serde cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, value: String, why: &str| ConfigError::Value {
            key: key.into(),
            value,
            why: why.into(),
        };
        let urls = server_urls(&self.nats.url);
        if urls.is_empty()
            || !urls.iter().all(|url| {
                ["nats://", "tls://", "ws://", "wss://"]
                    .iter()
                    .any(|scheme| url.starts_with(scheme))
            })
        {
            return Err(bad(
                "nats.url",
                self.nats.url.clone(),
                "expected a nats://, tls://, ws:// or wss:// url, or several separated by commas",
            ));
        }
        if !(1..=5).contains(&self.nats.replicas) {
            return Err(bad(
                "nats.replicas",
                self.nats.replicas.to_string(),
                "expected 1 to 5",
            ));
        }
        if self.nats.tls_cert_file.is_some() != self.nats.tls_key_file.is_some() {
            return Err(bad(
                "nats.tls_cert_file",
                String::new(),
                "a client certificate needs its key and the key its certificate",
            ));
        }
        check_store("s3", &self.s3)?;
        self.validate_locations()?;
        if self.scheduler.retention_sweep_interval < Duration::from_secs(1) {
            return Err(bad(
                "scheduler.retention_sweep_interval",
                format!("{:?}", self.scheduler.retention_sweep_interval),
                "must be at least 1s",
            ));
        }
        if !(1..=256).contains(&self.deleter.concurrency) {
            return Err(bad(
                "deleter.concurrency",
                self.deleter.concurrency.to_string(),
                "expected 1 to 256",
            ));
        }
        if !(1..=10_000).contains(&self.deleter.batch_jobs) {
            return Err(bad(
                "deleter.batch_jobs",
                self.deleter.batch_jobs.to_string(),
                "expected 1 to 10000",
            ));
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(600))
            .contains(&self.deleter.plugin_timeout)
        {
            return Err(bad(
                "deleter.plugin_timeout",
                format!("{:?}", self.deleter.plugin_timeout),
                "expected 1s to 10m",
            ));
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&self.deleter.ack_wait) {
            return Err(bad(
                "deleter.ack_wait",
                format!("{:?}", self.deleter.ack_wait),
                "expected 1s to 1h",
            ));
        }
        if self.audit.retention < Duration::from_secs(3600) {
            return Err(bad(
                "audit.retention",
                format!("{:?}", self.audit.retention),
                "must be at least 1h",
            ));
        }
        let fraction = self.breaker.max_delete_fraction;
        if !(0.0..=1.0).contains(&fraction) {
            return Err(bad(
                "breaker.max_delete_fraction",
                fraction.to_string(),
                "expected a share from 0 to 1 (0.5 = half)",
            ));
        }
        if self.breaker.max_delete_count == 0 {
            return Err(bad(
                "breaker.max_delete_count",
                "0".into(),
                "expected at least 1 (breaker.enabled = false turns the breaker off)",
            ));
        }
        if self.breaker.stale_after_intervals > 1000 {
            return Err(bad(
                "breaker.stale_after_intervals",
                self.breaker.stale_after_intervals.to_string(),
                "expected 0 (off) to 1000",
            ));
        }
        Ok(())
    }
}

/// Durations as people write them in a config file: `90s`, `15m`, `1h`, `2d`.
pub use sexton_model::duration_text;

/// The checks of one store's settings, `[s3]` or a location's (`root` names it in errors).
fn check_store(root: &str, s3: &S3Config) -> Result<(), ConfigError> {
    let bad = |key: &str, value: String, why: &str| ConfigError::Value {
        key: format!("{root}.{key}"),
        value,
        why: why.into(),
    };
    if s3.bucket.is_empty() {
        return Err(bad("bucket", String::new(), "must not be empty"));
    }
    if s3.prefix.starts_with('/')
        || s3.prefix.ends_with('/')
        || s3.prefix.split('/').any(|part| part == ".." || part == ".")
    {
        return Err(bad(
            "prefix",
            s3.prefix.clone(),
            "must be a relative path without a leading or trailing '/' and without '.' or '..'",
        ));
    }
    if let Some(endpoint) = &s3.endpoint {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(bad(
                "endpoint",
                endpoint.clone(),
                "expected an http:// or https:// url",
            ));
        }
    }
    if s3.access_key_id.is_some() != s3.secret_access_key.is_some() {
        return Err(bad(
            "access_key_id",
            String::new(),
            "an access key id needs its secret key and the secret its id",
        ));
    }
    Ok(())
}

impl Config {
    /// Each location: a valid name other than `primary`, a store of its own (not the `[s3]`
    /// store under another name), credentials of its own, a known storage class.
    fn validate_locations(&self) -> Result<(), ConfigError> {
        for (name, location) in &self.locations {
            let root = format!("locations.{name}");
            let bad = |key: &str, value: String, why: String| ConfigError::Value {
                key: format!("{root}.{key}"),
                value,
                why,
            };
            if let Err(err) = crate::names::LocationName::new(name.as_str()) {
                return Err(bad("name", name.clone(), err.why.to_string()));
            }
            if name == crate::names::LocationName::PRIMARY {
                return Err(bad(
                    "name",
                    name.clone(),
                    "primary is the [s3] store; name the other location differently".into(),
                ));
            }
            check_store(&root, &location.s3)?;
            if location.s3.access_key_id.is_none() {
                let var = format!("SEXTON_LOCATION_{}", name.to_ascii_uppercase());
                return Err(bad(
                    "access_key_id",
                    String::new(),
                    format!(
                        "location {name} has no credentials: give it access_key_id and \
                         secret_access_key ({var}_ACCESS_KEY_ID, {var}_SECRET_ACCESS_KEY); a \
                         location never borrows another's"
                    ),
                ));
            }
            let same_place = |a: &S3Config, b: &S3Config| {
                a.endpoint == b.endpoint && a.bucket == b.bucket && a.prefix == b.prefix
            };
            if same_place(&location.s3, &self.s3) {
                return Err(bad(
                    "bucket",
                    location.s3.bucket.clone(),
                    format!(
                        "location {name} is the primary store (same endpoint, bucket and \
                         prefix): a copy there would be no copy"
                    ),
                ));
            }
            if let Some((other, _)) = self
                .locations
                .iter()
                .find(|(other, o)| *other < name && same_place(&o.s3, &location.s3))
            {
                return Err(bad(
                    "bucket",
                    location.s3.bucket.clone(),
                    format!("locations {other} and {name} are the same store"),
                ));
            }
            if let Some(class) = &location.storage_class {
                sexton_model::copies::storage_class(class)
                    .map_err(|why| bad("storage_class", class.clone(), why))?;
            }
        }
        let copier = &self.copier;
        let bad = |key: &str, value: String, why: &str| ConfigError::Value {
            key: key.into(),
            value,
            why: why.into(),
        };
        if !(1..=64).contains(&copier.concurrency) {
            return Err(bad(
                "copier.concurrency",
                copier.concurrency.to_string(),
                "expected 1 to 64",
            ));
        }
        // S3's bounds on a part (the object store's `transfer::MIN_PART_SIZE`, `MAX_PART_SIZE`).
        const MIB: u64 = 1024 * 1024;
        if !(5 * MIB..=5 * 1024 * MIB).contains(&copier.part_size) {
            return Err(bad(
                "copier.part_size",
                copier.part_size.to_string(),
                "expected 5 MiB to 5 GiB (5242880 to 5368709120 bytes)",
            ));
        }
        if !(1..=64).contains(&copier.parts_in_flight) {
            return Err(bad(
                "copier.parts_in_flight",
                copier.parts_in_flight.to_string(),
                "expected 1 to 64",
            ));
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&copier.ack_wait) {
            return Err(bad(
                "copier.ack_wait",
                format!("{:?}", copier.ack_wait),
                "expected 1s to 1h",
            ));
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(24 * 3600))
            .contains(&copier.binlog_interval)
        {
            return Err(bad(
                "copier.binlog_interval",
                format!("{:?}", copier.binlog_interval),
                "expected 1s to 24h",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().unwrap();
    }

    const DR: &str = "[locations.dr]\nendpoint = \"http://dr.example:8333\"\nbucket = \"dr\"\n\
                      access_key_id = \"k\"\nsecret_access_key = \"s\"\n";

    #[test]
    fn a_location_is_read_from_the_file_and_the_environment() {
        let mut config = Config::from_toml(DR).unwrap();
        config.validate().unwrap();
        assert_eq!(config.locations["dr"].s3.bucket, "dr");
        config
            .apply_env(&env(&[
                ("SEXTON_LOCATION_DR_PREFIX", "copies"),
                ("SEXTON_LOCATION_DR_STORAGE_CLASS", "STANDARD_IA"),
                ("SEXTON_LOCATION_COLD_STORE_ENDPOINT", "http://cold:1"),
                ("SEXTON_LOCATION_COLD_STORE_ACCESS_KEY_ID", "c"),
                ("SEXTON_LOCATION_COLD_STORE_SECRET_ACCESS_KEY", "d"),
            ]))
            .unwrap();
        config.validate().unwrap();
        assert_eq!(config.locations["dr"].s3.prefix, "copies");
        assert_eq!(
            config.locations["dr"].storage_class.as_deref(),
            Some("STANDARD_IA")
        );
        assert_eq!(
            config.locations["cold_store"].s3.access_key_id.as_deref(),
            Some("c")
        );
    }

    #[test]
    fn lock_settings_are_read_per_location_from_the_file_and_the_environment() {
        let text = format!(
            "[s3.lock]\nmode = \"governance\"\nmin = \"1d\"\ndaily = \"2w\"\nmonthly = \
             \"400d\"\nyearly = \"7y\"\n{DR}[locations.dr.lock]\nmode = \"compliance\"\n\
             compliance_confirmed = true\nmonthly = \"13m\"\n"
        );
        let mut config = Config::from_toml(&text).unwrap();
        config.validate().unwrap();
        let lock = config.s3.lock.clone().unwrap();
        assert_eq!(lock.mode, sexton_retention::lock::LockMode::Governance);
        assert_eq!(lock.tiers.daily.unwrap().days, 14);
        assert_eq!(lock.tiers.yearly.unwrap().years, 7);
        assert!(lock.tiers.weekly.is_none());
        let dr = config.locations["dr"].s3.lock.clone().unwrap();
        assert_eq!(dr.mode, sexton_retention::lock::LockMode::Compliance);
        assert_eq!(dr.tiers.monthly.unwrap().months, 13);
        config
            .apply_env(&env(&[
                ("SEXTON_S3_LOCK", "min=3d,last=5d"),
                ("SEXTON_LOCATION_DR_LOCK", ""),
            ]))
            .unwrap();
        let lock = config.s3.lock.clone().unwrap();
        assert_eq!(lock.tiers.min.unwrap().days, 3);
        assert!(
            lock.tiers.daily.is_none(),
            "the variable replaces the table"
        );
        assert!(config.locations["dr"].s3.lock.is_none(), "empty: no lock");
    }

    #[test]
    fn malformed_lock_settings_are_refused_saying_why() {
        let refused_file = |table: &str, why: &str| {
            let text = format!("[s3.lock]\n{table}");
            let err = Config::from_toml(&text).expect_err(&text);
            assert!(err.contains(why), "{table}: {err}");
        };
        refused_file("mode = \"compliance\"\nmin = \"1d\"\n", "cannot be undone");
        refused_file(
            "mode = \"compliance\"\ncompliance_confirmed = false\nmin = \"1d\"\n",
            "compliance_confirmed = true",
        );
        refused_file(
            "mode = \"forever\"\n",
            "expected \"governance\" or \"compliance\"",
        );
        refused_file("daily = \"14 days\"\n", "lock daily");
        refused_file("daily = \"0d\"\n", "zero");
        refused_file("weekly = \"8x\"\n", "unknown unit");
        refused_file("dayly = \"1d\"\n", "unknown field");
        let refused_env = |value: &str, why: &str| {
            let mut config = Config::default();
            let err = config
                .apply_env(&env(&[("SEXTON_S3_LOCK", value)]))
                .expect_err(value)
                .to_string();
            assert!(err.contains(why), "{value}: {err}");
        };
        refused_env("min", "key=value");
        refused_env("mode=compliance,min=1d", "cannot be undone");
        refused_env("min=1d,forever=1y", "unknown lock key");
        refused_env("compliance_confirmed=perhaps", "true or false");
    }

    #[test]
    fn malformed_locations_are_refused_with_the_key_named() {
        let refused = |text: &str, env_pairs: &[(&str, &str)], why: &str| {
            let result = Config::from_toml(text)
                .map_err(|e| e.to_string())
                .and_then(|mut c| {
                    c.apply_env(&env(env_pairs)).map_err(|e| e.to_string())?;
                    c.validate().map_err(|e| e.to_string())
                });
            let err = result.expect_err(&format!("{text} {env_pairs:?} accepted"));
            assert!(err.contains(why), "{text} {env_pairs:?}: {err}");
        };
        refused(
            "[locations.dr]\nendpoint = \"http://dr:1\"\nbucket = \"dr\"\n",
            &[],
            "has no credentials",
        );
        refused(
            &DR.replace("[locations.dr]", "[locations.primary]"),
            &[],
            "primary is the [s3] store",
        );
        refused(
            &DR.replace("[locations.dr]", "[locations.\"d r\"]"),
            &[],
            "locations.d r",
        );
        refused(&format!("{DR}colour = \"red\"\n"), &[], "unknown field");
        refused(
            &format!("{DR}storage_class = \"COLD\"\n"),
            &[],
            "unknown storage class",
        );
        refused(
            "[locations.dr]\nbucket = \"sexton\"\naccess_key_id = \"k\"\nsecret_access_key = \"s\"\n",
            &[],
            "is the primary store",
        );
        refused(
            &DR.replace("http://dr.example:8333", "ftp://dr"),
            &[],
            "locations.dr.endpoint",
        );
        refused(
            DR,
            &[("SEXTON_LOCATION_DR_COLOUR", "red")],
            "SEXTON_LOCATION_DR_COLOUR",
        );
        refused(DR, &[("SEXTON_LOCATION__BUCKET", "x")], "locations..bucket");
        refused(
            DR,
            &[("SEXTON_LOCATION_DR_FORCE_PATH_STYLE", "maybe")],
            "expected true or false",
        );
        refused(
            DR,
            &[("SEXTON_COPIER_PART_SIZE", "1024")],
            "copier.part_size",
        );
        refused(
            DR,
            &[("SEXTON_COPIER_CONCURRENCY", "0")],
            "copier.concurrency",
        );
        refused(DR, &[("SEXTON_COPIER_ACK_WAIT", "soon")], "copier.ack_wait");
        refused(
            DR,
            &[("SEXTON_COPIER_BINLOG_INTERVAL", "0s")],
            "copier.binlog_interval",
        );
        refused(
            DR,
            &[("SEXTON_COPIER_BINLOG_INTERVAL", "hourly")],
            "copier.binlog_interval",
        );
    }

    #[test]
    fn file_then_environment() {
        let dir = tempfile_dir();
        let path = dir.join("sexton.toml");
        std::fs::write(
            &path,
            "[nats]\nurl = \"nats://10.0.0.1:4222\"\n[s3]\nbucket = \"b\"\n[scheduler]\nretention_sweep_interval = \"15m\"\n",
        )
        .unwrap();
        let config = Config::load_with_env(
            Some(&path),
            &env(&[
                ("SEXTON_S3_BUCKET", "from-env"),
                ("AWS_ACCESS_KEY_ID", "a"),
                ("AWS_SECRET_ACCESS_KEY", "b"),
            ]),
        )
        .unwrap();
        assert_eq!(config.nats.url, "nats://10.0.0.1:4222");
        assert_eq!(config.s3.bucket, "from-env");
        assert_eq!(config.s3.access_key_id.as_deref(), Some("a"));
        assert_eq!(
            config.scheduler.retention_sweep_interval,
            Duration::from_secs(900)
        );
    }

    #[test]
    fn malformed_files_get_clear_errors() {
        let cases = [
            ("[nats]\nurl = 5\n", "invalid type"),
            ("[nats]\nurll = \"x\"\n", "unknown field"),
            ("[nats\n", "invalid"),
            (
                "[scheduler]\nretention_sweep_interval = \"1 fortnight\"\n",
                "unknown unit",
            ),
            (
                "[scheduler]\nretention_sweep_interval = \"h\"\n",
                "expected a number",
            ),
            ("[log]\nformat = \"xml\"\n", "unknown variant"),
            ("bogus = 1\n", "unknown field"),
        ];
        for (text, expect) in cases {
            let err = Config::from_toml(text).unwrap_err();
            assert!(err.contains(expect), "{text:?}: {err}");
        }
    }

    #[test]
    fn bad_values_are_rejected_with_the_key_named() {
        let cases: &[(&str, &str, &str)] = &[
            ("SEXTON_NATS_URL", "http://x", "nats.url"),
            ("SEXTON_NATS_URL", "nats://a:4222,http://b", "nats.url"),
            ("SEXTON_NATS_URL", ",", "nats.url"),
            ("SEXTON_NATS_REPLICAS", "0", "nats.replicas"),
            ("SEXTON_NATS_REPLICAS", "-1", "nats.replicas"),
            ("SEXTON_S3_PREFIX", "../x", "s3.prefix"),
            ("SEXTON_S3_PREFIX", "/abs", "s3.prefix"),
            ("SEXTON_S3_ENDPOINT", "ftp://x", "s3.endpoint"),
            ("SEXTON_S3_BUCKET", "", "s3.bucket"),
            ("SEXTON_LOG_FORMAT", "xml", "log.format"),
            ("SEXTON_NATS_TLS_REQUIRED", "maybe", "nats.tls_required"),
            (
                "SEXTON_SCHEDULER_REQUIRE_DUE",
                "sometimes",
                "scheduler.require_due",
            ),
            ("SEXTON_DELETER_CONCURRENCY", "0", "deleter.concurrency"),
            ("SEXTON_DELETER_BATCH_JOBS", "0", "deleter.batch_jobs"),
            ("SEXTON_DELETER_BATCH_JOBS", "many", "deleter.batch_jobs"),
            (
                "SEXTON_DELETER_PLUGIN_TIMEOUT",
                "0s",
                "deleter.plugin_timeout",
            ),
            (
                "SEXTON_DELETER_PLUGIN_TIMEOUT",
                "5",
                "deleter.plugin_timeout",
            ),
            (
                "SEXTON_SCHEDULER_RETENTION_SWEEP_INTERVAL",
                "0s",
                "retention_sweep_interval",
            ),
            (
                "SEXTON_SCHEDULER_RETENTION_SWEEP_INTERVAL",
                "99999999999d",
                "retention_sweep_interval",
            ),
            ("SEXTON_S3_ACCESS_KEY_ID", "only-id", "s3.access_key_id"),
            ("SEXTON_AUDIT_RETENTION", "forever", "audit.retention"),
            ("SEXTON_AUDIT_RETENTION", "5m", "audit.retention"),
            (
                "SEXTON_BREAKER_MAX_DELETE_FRACTION",
                "-0.1",
                "breaker.max_delete_fraction",
            ),
            (
                "SEXTON_BREAKER_MAX_DELETE_FRACTION",
                "1.5",
                "breaker.max_delete_fraction",
            ),
            (
                "SEXTON_BREAKER_MAX_DELETE_FRACTION",
                "NaN",
                "breaker.max_delete_fraction",
            ),
            (
                "SEXTON_BREAKER_MAX_DELETE_COUNT",
                "0",
                "breaker.max_delete_count",
            ),
            (
                "SEXTON_BREAKER_MAX_DELETE_COUNT",
                "-3",
                "breaker.max_delete_count",
            ),
            ("SEXTON_BREAKER_ENABLED", "perhaps", "breaker.enabled"),
        ];
        for (var, value, key) in cases {
            let err = Config::load_with_env(None, &env(&[(var, value)])).unwrap_err();
            assert!(err.to_string().contains(key), "{var}={value}: {err}");
        }
    }

    #[test]
    fn a_cluster_is_a_comma_separated_url_list() {
        let config = Config::load_with_env(
            None,
            &env(&[(
                "SEXTON_NATS_URL",
                "nats://a:4222, nats://b:4222,nats://c:4222",
            )]),
        )
        .unwrap();
        assert_eq!(
            server_urls(&config.nats.url),
            ["nats://a:4222", "nats://b:4222", "nats://c:4222"]
        );
    }

    #[test]
    fn missing_file_is_an_error_not_defaults() {
        let err = Config::load_with_env(Some(Path::new("/nonexistent/sexton.toml")), &env(&[]))
            .unwrap_err();
        assert!(
            err.to_string().starts_with("cannot read config file"),
            "{err}"
        );
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("sexton-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
