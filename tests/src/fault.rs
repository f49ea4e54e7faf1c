//! What the fault tests share: SeaweedFS stopped and started again on the same ports and data,
//! the services as child processes with any number of replicas, a steady workload of schedules,
//! and the [`Audit`] that checks the invariants after the dust settles.
//!
//! The audit reads what the servers hold, not what the services say: the due-backup stream, the
//! catalog bucket's history (a deleted backup leaves a delete marker after its last revision),
//! the work-queue streams, and a listing of the bucket. Every figure it returns that names a
//! failure (`lost_*`, `duplicated_*`, `stuck_messages`, `invalid_states`) must be zero.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use async_nats::jetstream;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sexton_model::records::{BackupRecord, BackupStatus, ScheduleRecord};
use sexton_shared::{config::Config, topology};

use crate::{
    api, consumer_backlog, free_port, http_status, read_stream, repo_root, tools_bin,
    ServiceProcess, BUCKET, S3,
};

/// Whether the long variants run (`SEXTON_SOAK=1`).
pub fn soak() -> bool {
    std::env::var("SEXTON_SOAK").is_ok_and(|v| v == "1")
}

/// `ci` normally, `long` under `SEXTON_SOAK=1`.
pub fn pick<T>(ci: T, long: T) -> T {
    if soak() {
        long
    } else {
        ci
    }
}

/// Connects a test client to one server or a comma-separated list, reconnecting forever.
pub async fn client(urls: &str) -> async_nats::Client {
    async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .max_reconnects(None::<usize>)
        .request_timeout(Some(Duration::from_secs(10)))
        .connect(crate::cluster::split(urls))
        .await
        .expect("connecting the test client")
}

// ---------------------------------------------------------------------------------------------
// SeaweedFS outages

impl S3 {
    /// Stops the server (SIGTERM, then SIGKILL after 15 s) and returns how long it took. The
    /// ports and the data directory stay, for [`S3::start_again`].
    pub fn stop(&mut self) -> Duration {
        let started = Instant::now();
        if let Some(mut child) = self.server.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        started.elapsed()
    }

    /// Starts SeaweedFS again on the same ports and data directory; returns how long it took
    /// until S3 answered.
    pub fn start_again(&mut self) -> Duration {
        let started = Instant::now();
        let dir = self.server.dir.path().to_path_buf();
        let n = (1..)
            .find(|n| !dir.join(format!("weed.{n}.log")).exists())
            .expect("a free log name");
        let log = std::fs::File::create(dir.join(format!("weed.{n}.log"))).expect("weed log");
        crate::assert_room_for_seaweedfs(&dir);
        let child = weed_command(&dir, self.port)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("starting weed mini again");
        self.server.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(90);
        while http_status(self.port, "/healthz") != Some(200)
            || http_status(self.port + 3, &format!("/buckets/{BUCKET}/")) != Some(200)
        {
            assert!(
                Instant::now() < deadline,
                "seaweedfs did not come back within 90s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        started.elapsed()
    }
}

/// The same command line as [`S3::start`]: loopback only, telemetry off.
fn weed_command(dir: &Path, port: u16) -> Command {
    let p = |i: u16| (port + i).to_string();
    let mut command = Command::new(tools_bin().join("weed"));
    command
        .arg("mini")
        .arg(format!("-dir={}", dir.join("data").display()))
        .args([
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
        ])
        .arg(format!("-s3.port={}", p(0)))
        .arg(format!("-master.port={}", p(1)))
        .arg(format!("-volume.port={}", p(2)))
        .arg(format!("-filer.port={}", p(3)))
        .arg(format!("-master.port.grpc={}", p(4)))
        .arg(format!("-volume.port.grpc={}", p(5)))
        .arg(format!("-filer.port.grpc={}", p(6)))
        .arg(format!("-s3.port.grpc={}", p(7)))
        .arg(format!("-s3.config={}", dir.join("s3.json").display()))
        .args([
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
        ])
        .arg(format!("-bucket={BUCKET}"));
    command
}

// ---------------------------------------------------------------------------------------------
// The fleet as processes

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Scheduler,
    RetentionWorker,
    Deleter,
    Executor,
}

impl Role {
    pub const ALL: [Role; 4] = [
        Role::Scheduler,
        Role::RetentionWorker,
        Role::Deleter,
        Role::Executor,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Role::Scheduler => "scheduler",
            Role::RetentionWorker => "retention-worker",
            Role::Deleter => "deleter",
            Role::Executor => "executor",
        }
    }

    fn command(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Role::Scheduler => ("sexton-scheduler", &[]),
            Role::RetentionWorker => ("sexton-retention-worker", &[]),
            Role::Deleter => ("sexton-deleter", &[]),
            Role::Executor => ("sexton", &["executor"]),
        }
    }
}

pub struct Replica {
    pub role: Role,
    pub index: usize,
    /// `/metrics`, `/healthz`, `/readyz` (the executor serves none).
    pub http_port: u16,
    pub process: ServiceProcess,
}

/// Every service as child processes, `replicas` of each, logs in a directory of their own.
pub struct ProcessFleet {
    pub replicas: Vec<Replica>,
    pub log_dir: tempfile::TempDir,
}

impl ProcessFleet {
    pub fn start(config: &Config, replicas: usize) -> ProcessFleet {
        Self::start_roles(config, replicas, &Role::ALL)
    }

    pub fn start_roles(config: &Config, replicas: usize, roles: &[Role]) -> ProcessFleet {
        let mut log_dir = tempfile::tempdir().expect("log dir");
        if std::env::var_os("SEXTON_KEEP_LOGS").is_some() {
            log_dir.disable_cleanup(true);
            eprintln!("service logs kept in {}", log_dir.path().display());
        }
        let mut all = Vec::new();
        for role in roles {
            for index in 0..replicas {
                let http_port = free_port();
                let mut config = config.clone();
                config.http.listen = format!("127.0.0.1:{http_port}");
                let dir = log_dir.path().join(format!("{}-{index}", role.name()));
                std::fs::create_dir_all(&dir).expect("replica log dir");
                let (binary, args) = role.command();
                all.push(Replica {
                    role: *role,
                    index,
                    http_port,
                    process: ServiceProcess::start(binary, args, &config, &dir),
                });
            }
        }
        ProcessFleet {
            replicas: all,
            log_dir,
        }
    }

    /// Waits until every replica with an endpoint answers `/readyz` with 200.
    pub fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        for replica in &mut self.replicas {
            if replica.role == Role::Executor {
                continue;
            }
            while http_status(replica.http_port, "/readyz") != Some(200) {
                assert!(
                    replica.process.is_running(),
                    "{} {} exited:\n{}",
                    replica.role.name(),
                    replica.index,
                    tail(&replica.process.logs(), 40)
                );
                assert!(
                    Instant::now() < deadline,
                    "{} {} not ready:\n{}",
                    replica.role.name(),
                    replica.index,
                    tail(&replica.process.logs(), 40)
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    pub fn of(&mut self, role: Role) -> impl Iterator<Item = &mut Replica> {
        self.replicas.iter_mut().filter(move |r| r.role == role)
    }

    /// The replicas that are not running (none should be, unless a test killed them).
    pub fn exited(&mut self) -> Vec<String> {
        self.replicas
            .iter_mut()
            .filter_map(|r| {
                (!r.process.is_running()).then(|| {
                    format!(
                        "{} {} exited:\n{}",
                        r.role.name(),
                        r.index,
                        tail(&r.process.logs(), 30)
                    )
                })
            })
            .collect()
    }

    /// Everything every replica of `role` logged, over all its starts.
    pub fn logs(&self, role: Role) -> String {
        self.replicas
            .iter()
            .filter(|r| r.role == role)
            .map(|r| r.process.logs())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What a failing test should show: the warnings of every replica, and every line that
    /// names a backup the audit found left over.
    pub fn context(&self, audit: &Audit) -> String {
        let mut out = self.warnings(60);
        for id in &audit.leftover {
            for r in &self.replicas {
                for line in r.process.logs().lines().filter(|l| l.contains(id.as_str())) {
                    out.push_str(&format!("\n[{} {}] {line}", r.role.name(), r.index));
                }
            }
        }
        out
    }

    /// Log lines at WARN or ERROR of every replica, for a failing test's message.
    pub fn warnings(&self, limit: usize) -> String {
        let mut out = Vec::new();
        for r in &self.replicas {
            for line in r.process.logs().lines() {
                if line.contains(" WARN ") || line.contains(" ERROR ") || line.contains("panicked")
                {
                    out.push(format!("[{} {}] {line}", r.role.name(), r.index));
                }
            }
        }
        let skip = out.len().saturating_sub(limit);
        out[skip..].join("\n")
    }
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// ---------------------------------------------------------------------------------------------
// Workload

/// A schedule the workload created: `@every <interval>`, keeping the newest `keep_last`.
#[derive(Debug, Clone)]
pub struct LoadSchedule {
    pub name: String,
    pub cluster: String,
    pub interval: Duration,
    pub keep_last: usize,
}

/// Creates `count` schedules named `<prefix>-<n>`, each on a cluster of its own, retrying while
/// the API is unavailable (a fault may be in progress).
pub async fn create_schedules(
    client: &async_nats::Client,
    prefix: &str,
    count: usize,
    interval: Duration,
    keep_last: usize,
) -> Vec<LoadSchedule> {
    let mut out = Vec::new();
    for n in 0..count {
        let schedule = LoadSchedule {
            name: format!("{prefix}-{n}"),
            cluster: format!("{prefix}-c{n}"),
            interval,
            keep_last,
        };
        create_schedule(client, &schedule).await;
        out.push(schedule);
    }
    out
}

pub async fn create_schedule(client: &async_nats::Client, schedule: &LoadSchedule) {
    // The load compresses days into seconds, and the retention circuit breaker
    // (docs/safety.md) cannot tell: with a schedule firing every second its stale limit is
    // three seconds, so any stall of a fault holds a run, and while it is held the backups
    // that pile up make every later run delete most of its group, which holds that run too
    // until someone approves. The breaker is tested on its own (tests/tests/safety.rs); these
    // loads opt out, as fault_s3_outage's does.
    let body = json!({"schema_version": 1, "name": schedule.name, "cluster": schedule.cluster,
        "plan": "full", "cron": format!("@every {}s", schedule.interval.as_secs()),
        "policy": {"keep_last": schedule.keep_last}, "breaker": {"enabled": false}});
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match api(client, "schedule", "create", body.clone()).await {
            Ok(_) => return,
            Err(err) if err.code == sexton_shared::api::ErrorCode::AlreadyExists => return,
            Err(err) => {
                assert!(
                    Instant::now() < deadline,
                    "creating schedule {}: {err:?}",
                    schedule.name
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Pauses every schedule (retrying through faults), so the fleet can drain.
pub async fn pause_all(client: &async_nats::Client, schedules: &[LoadSchedule]) {
    for schedule in schedules {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let body = json!({"schema_version": 1, "name": schedule.name});
            match api(client, "schedule", "pause", body).await {
                Ok(_) => break,
                Err(err) => {
                    assert!(
                        Instant::now() < deadline,
                        "pausing {}: {err:?}",
                        schedule.name
                    );
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
}

/// The durable consumers of the fleet, with their streams.
pub const CONSUMERS: [(&str, &str); 6] = [
    (topology::STREAM_DUE, topology::CONSUMER_EXECUTOR),
    (topology::STREAM_REPORTS, topology::CONSUMER_REPORTS),
    (topology::STREAM_RETENTION, topology::CONSUMER_RETENTION),
    (topology::STREAM_JOBS, topology::CONSUMER_DELETER),
    // Binlog GC jobs: the fleet is settled only when they are done too. Their partitions'
    // durables (`deleter-binlog-p<k>`, issue 32), and those published to SEXTON_JOBS before.
    (topology::STREAM_BINLOG, topology::CONSUMER_DELETER_BINLOG),
    (topology::STREAM_JOBS, topology::CONSUMER_DELETER_BINLOG),
];

/// The work-queue streams: empty once all work is done.
pub const WORK_QUEUES: [&str; 4] = [
    topology::STREAM_REPORTS,
    topology::STREAM_RETENTION,
    topology::STREAM_JOBS,
    topology::STREAM_BINLOG,
];

/// Sum of pending and unacknowledged messages over the fleet's consumers (`None` while the
/// servers do not answer).
pub async fn total_backlog(js: &jetstream::Context) -> Option<u64> {
    use futures::StreamExt;
    let mut total = 0;
    for (stream, durable) in CONSUMERS {
        // A fleet without an executor has no executor consumer: nothing waits for it.
        let names: Vec<_> = js
            .get_stream(stream)
            .await
            .ok()?
            .consumer_names()
            .collect()
            .await;
        let names: Result<Vec<String>, _> = names.into_iter().collect();
        // The retention-worker's are per partition (`retention-worker-p<k>`, issue 32).
        let partition = format!("{durable}-p");
        if !names
            .ok()?
            .iter()
            .any(|n| n == durable || n.starts_with(&partition))
        {
            continue;
        }
        total += consumer_backlog(js, stream, durable).await?;
    }
    Some(total)
}

/// Partitions each replica of `role` (the retention-worker or the deleter) in `fleet` holds
/// (issue 32), by index; `None` for a replica that is not running or not answering.
pub fn partitions_held(fleet: &mut ProcessFleet, role: Role) -> Vec<Option<f64>> {
    let gauge = match role {
        Role::RetentionWorker => "sexton_retention_partitions_held",
        Role::Deleter => "sexton_deleter_partitions_held",
        other => panic!("{other:?} has no partitions"),
    };
    fleet
        .of(role)
        .map(|r| {
            if r.process.is_running() {
                metric(r.http_port, gauge, "")
            } else {
                None
            }
        })
        .collect()
}

/// Whether the answering replicas hold every partition between them, each at least one and
/// at most its share.
pub fn partitions_settled(held: &[Option<f64>]) -> bool {
    let live: Vec<f64> = held.iter().flatten().copied().collect();
    // The retention-worker and the deleter have as many partitions.
    let partitions = f64::from(topology::RETENTION_PARTITIONS);
    let share = (partitions / live.len().max(1) as f64).ceil();
    live.iter().sum::<f64>() == partitions && live.iter().all(|n| *n >= 1.0 && *n <= share)
}

/// Waits up to `timeout` until every replica of `role` in `fleet` answers and the partitions
/// are settled among them; returns what each holds.
pub async fn wait_partitions_settled(
    fleet: &mut ProcessFleet,
    role: Role,
    timeout: Duration,
) -> Vec<Option<f64>> {
    let deadline = Instant::now() + timeout;
    loop {
        let held = partitions_held(fleet, role);
        if held.iter().all(Option::is_some) && partitions_settled(&held) {
            return held;
        }
        assert!(
            Instant::now() < deadline,
            "{role:?}: partitions never settled: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One counter of a service's `/metrics` page (the sum over label sets matching `labels`).
pub fn metric(port: u16, name: &str, labels: &str) -> Option<f64> {
    let (status, page) = crate::http_get(port, "/metrics")?;
    if status != 200 {
        return None;
    }
    let mut total = None;
    for line in page.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with(' ') || rest.starts_with('{')) || !rest.contains(labels) {
            continue;
        }
        let value: f64 = rest.rsplit(' ').next()?.parse().ok()?;
        total = Some(total.unwrap_or(0.0) + value);
    }
    total
}

/// Waits until no new due tick appears and every consumer is drained, twice in a row a second
/// apart; returns how long that took, or `None` after `timeout`.
pub async fn wait_settled(js: &jetstream::Context, timeout: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut previous: Option<u64> = None;
    while started.elapsed() < timeout {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let due = match js.get_stream(topology::STREAM_DUE).await {
            Ok(mut stream) => match stream.info().await {
                Ok(info) => info.state.last_sequence,
                Err(_) => continue,
            },
            Err(_) => continue,
        };
        let backlog = total_backlog(js).await;
        if backlog == Some(0) && previous == Some(due) {
            return Some(started.elapsed());
        }
        previous = (backlog == Some(0)).then_some(due);
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The audit

/// What the audit found. Every `lost_*`, `duplicated_*`, `stuck_messages` and
/// `invalid_states` must be zero (empty).
#[derive(Debug, Default, Clone, Serialize)]
pub struct Audit {
    pub schedules: usize,
    /// Due-backup events in the stream.
    pub due_ticks: usize,
    /// Two events of one schedule less than its interval apart (or the same tick twice).
    pub duplicated_ticks: usize,
    /// Ticks the scheduler recorded (in its log or the schedule's status) that no consumer can
    /// see in the stream.
    pub lost_ticks: usize,
    /// Due backups that never reached the catalog.
    pub lost_backups: usize,
    /// Backups recorded in the catalog at some point.
    pub backups_recorded: usize,
    pub backups_deleted: usize,
    pub backups_kept: usize,
    /// Backups the policy lets go that are still in the catalog (a delete job lost on the way).
    pub lost_delete_jobs: usize,
    /// Messages left in a work-queue stream after the fleet settled (e.g. out of deliveries).
    pub stuck_messages: u64,
    /// The longest pause between two due events of the whole fleet, in milliseconds.
    pub longest_firing_pause_ms: i64,
    /// The longest pause between two deletions, in milliseconds (while there were some).
    pub longest_deletion_pause_ms: i64,
    pub invalid_states: Vec<String>,
    /// Backups left in a state other than completed (for the logs of a failing test).
    #[serde(skip)]
    pub leftover: Vec<String>,
    /// When each due event was stored (server time, ms since the epoch).
    #[serde(skip)]
    pub due_times: Vec<i64>,
    /// When each backup was removed from the catalog (server time, ms since the epoch).
    #[serde(skip)]
    pub deletion_times: Vec<i64>,
}

impl Audit {
    /// The longest pauses in firing and in deleting around a fault at `at` (ms since the
    /// epoch): the longest gap between consecutive events from the last one before the fault
    /// to `window` after it, by the servers' clocks. A fleet that never resumed shows the whole
    /// window.
    pub fn stalls_after(&self, at: i64, window: Duration) -> (Duration, Duration) {
        let end = at + window.as_millis() as i64;
        let stall = |times: &[i64]| {
            let start = times
                .iter()
                .rev()
                .find(|t| **t <= at)
                .copied()
                .unwrap_or(at);
            let mut last = start;
            let mut longest = None;
            for t in times.iter().filter(|t| **t > start && **t <= end) {
                longest = Some(longest.unwrap_or(0).max(t - last));
                last = *t;
            }
            Duration::from_millis(longest.unwrap_or(end - start).max(0) as u64)
        };
        (stall(&self.due_times), stall(&self.deletion_times))
    }

    /// How long after `at` (ms since the epoch) the first due event and the first deletion
    /// were stored: after a restart of the only server, how soon the fleet resumed.
    pub fn resumption(&self, at: i64) -> (Option<Duration>, Option<Duration>) {
        let first = |times: &[i64]| {
            times
                .iter()
                .find(|t| **t > at)
                .map(|t| Duration::from_millis((t - at) as u64))
        };
        (first(&self.due_times), first(&self.deletion_times))
    }

    /// [`Audit::resumption`] for the figures.
    pub fn resumed_after(&self, at: i64) -> serde_json::Value {
        let (firing, deleting) = self.resumption(at);
        json!({
            "firing_resumed_ms": firing.map(ms),
            "deletions_resumed_ms": deleting.map(ms),
        })
    }

    /// [`Audit::stalls_after`] for the figures.
    pub fn stalls_json(&self, at: i64, window: Duration) -> serde_json::Value {
        let (firing, deleting) = self.stalls_after(at, window);
        let around = |times: &[i64]| -> Vec<i64> {
            let last_before = times.iter().rev().find(|t| **t <= at).map(|t| t - at);
            last_before
                .into_iter()
                .chain(times.iter().filter(|t| **t > at).take(3).map(|t| t - at))
                .collect()
        };
        json!({
            "firing_stall_ms": ms(firing),
            "deletion_stall_ms": ms(deleting),
            "due_events_around_ms": around(&self.due_times),
            "deletions_around_ms": around(&self.deletion_times),
        })
    }

    /// Panics with the findings unless every failure count is zero.
    pub fn assert_clean(&self, context: &str) {
        let failures = self.duplicated_ticks
            + self.lost_ticks
            + self.lost_backups
            + self.lost_delete_jobs
            + self.stuck_messages as usize
            + self.invalid_states.len();
        assert!(
            failures == 0,
            "invariants violated: {self:#?}\n--- service warnings ---\n{context}"
        );
    }

    pub fn failures(&self) -> usize {
        self.duplicated_ticks
            + self.lost_ticks
            + self.lost_backups
            + self.lost_delete_jobs
            + self.stuck_messages as usize
            + self.invalid_states.len()
    }
}

/// One revision of a catalog entry, from the bucket's stream.
#[derive(Debug, Clone)]
struct CatalogEvent {
    record: Option<BackupRecord>,
    at_ms: i64,
    revision: u64,
}

/// Checks the invariants of a settled fleet that ran `schedules`. `scheduler_logs` are the
/// logs of every scheduler replica (their "due backup published" lines name each fired tick).
pub async fn audit(
    js: &jetstream::Context,
    config: &Config,
    schedules: &[LoadSchedule],
    scheduler_logs: &str,
) -> Audit {
    let mut audit = Audit {
        schedules: schedules.len(),
        ..Default::default()
    };
    let intervals: BTreeMap<&str, &LoadSchedule> =
        schedules.iter().map(|s| (s.name.as_str(), s)).collect();

    // Due ticks as consumers see them.
    let due = read_stream(js, topology::STREAM_DUE, ">").await;
    audit.due_ticks = due.len();
    let mut ticks: BTreeMap<String, Vec<(DateTime<Utc>, String)>> = BTreeMap::new();
    let mut due_times = Vec::new();
    for message in &due {
        let event: serde_json::Value = match serde_json::from_slice(&message.payload) {
            Ok(event) => event,
            Err(err) => {
                audit
                    .invalid_states
                    .push(format!("unreadable due event: {err}"));
                continue;
            }
        };
        let schedule = event["schedule"].as_str().unwrap_or_default().to_string();
        let tick: DateTime<Utc> = event["tick"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or_default();
        let id = event["backup_id"].as_str().unwrap_or_default().to_string();
        ticks.entry(schedule).or_default().push((tick, id));
        if let Ok(info) = message.info() {
            due_times.push((info.published.unix_timestamp_nanos() / 1_000_000) as i64);
        }
    }
    audit.longest_firing_pause_ms = longest_gap(&mut due_times);
    audit.due_times = due_times;
    let mut due_ids: BTreeMap<String, String> = BTreeMap::new();
    for (schedule, list) in &mut ticks {
        list.sort();
        let interval = intervals
            .get(schedule.as_str())
            .map(|s| chrono::Duration::from_std(s.interval).expect("interval"))
            .unwrap_or_default();
        for pair in list.windows(2) {
            if pair[1].0 - pair[0].0 < interval {
                audit.duplicated_ticks += 1;
                audit.invalid_states.push(format!(
                    "schedule {schedule} fired {} and {} less than {interval} apart",
                    pair[0].1, pair[1].1
                ));
            }
        }
        for (_, id) in list.iter() {
            due_ids.insert(id.clone(), schedule.clone());
        }
    }

    // Ticks the schedulers say they published must be there.
    for line in scheduler_logs.lines() {
        if !line.contains("due backup published") {
            continue;
        }
        if let Some(id) = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("backup="))
        {
            if !due_ids.contains_key(id) {
                audit.lost_ticks += 1;
                audit
                    .invalid_states
                    .push(format!("tick {id} logged as published, not in the stream"));
            }
        }
    }
    // And so must each schedule's last recorded tick.
    let topo = topology::ensure(js, config.nats.replicas)
        .await
        .expect("topology");
    for schedule in schedules {
        let Some(body) = topo.schedules.get(&schedule.name).await.expect("schedule") else {
            audit
                .invalid_states
                .push(format!("schedule {} vanished", schedule.name));
            continue;
        };
        let record: ScheduleRecord = serde_json::from_slice(&body).expect("schedule record");
        if let Some(tick) = record.status.last_fired_tick {
            let fired = ticks
                .get(&schedule.name)
                .is_some_and(|list| list.iter().any(|(t, _)| *t == tick));
            if !fired {
                audit.lost_ticks += 1;
                audit.invalid_states.push(format!(
                    "schedule {} records tick {tick} that is not in the stream",
                    schedule.name
                ));
            }
        }
    }

    // The catalog's history: every revision kept (5 per key) and the delete markers.
    let bucket_stream = format!("KV_{}", topology::BUCKET_CATALOG);
    let history = read_stream(
        js,
        &bucket_stream,
        &format!("$KV.{}.>", topology::BUCKET_CATALOG),
    )
    .await;
    let mut keys: BTreeMap<String, Vec<CatalogEvent>> = BTreeMap::new();
    for message in &history {
        let key = message
            .subject
            .strip_prefix(&format!("$KV.{}.", topology::BUCKET_CATALOG))
            .unwrap_or_default()
            .to_string();
        let deleted = message
            .headers
            .as_ref()
            .and_then(|h| h.get("KV-Operation"))
            .is_some();
        let (at_ms, revision) = message
            .info()
            .map(|i| {
                (
                    (i.published.unix_timestamp_nanos() / 1_000_000) as i64,
                    i.stream_sequence,
                )
            })
            .unwrap_or_default();
        let record = if deleted {
            None
        } else {
            match serde_json::from_slice::<BackupRecord>(&message.payload) {
                Ok(record) => Some(record),
                Err(err) => {
                    audit
                        .invalid_states
                        .push(format!("catalog entry {key} unreadable: {err}"));
                    continue;
                }
            }
        };
        keys.entry(key).or_default().push(CatalogEvent {
            record,
            at_ms,
            revision,
        });
    }
    audit.backups_recorded = keys.len();
    let mut recorded_per_schedule: BTreeMap<String, usize> = BTreeMap::new();
    for events in keys.values() {
        let schedule = events
            .iter()
            .find_map(|e| e.record.as_ref().and_then(|r| r.schedule.clone()));
        if let Some(schedule) = schedule {
            *recorded_per_schedule
                .entry(schedule.to_string())
                .or_default() += 1;
        }
    }
    let mut live: BTreeMap<String, BackupRecord> = BTreeMap::new();
    let mut deletion_times = Vec::new();
    let mut deleted_ids = BTreeSet::new();
    for (key, events) in &keys {
        let last = events.last().expect("a key has an event");
        match &last.record {
            Some(record) => {
                live.insert(key.clone(), record.clone());
            }
            None => {
                audit.backups_deleted += 1;
                deletion_times.push(last.at_ms);
                // The deleter claims (status deleting) before it deletes anything.
                let before = events.iter().rev().nth(1).and_then(|e| e.record.as_ref());
                match before {
                    Some(r) if r.status == BackupStatus::Deleting => {
                        deleted_ids.insert(r.id.to_string());
                    }
                    Some(r) => audit.invalid_states.push(format!(
                        "backup {key} removed from the catalog while {:?}",
                        r.status
                    )),
                    // Older revisions aged out of the bucket's history.
                    None => {
                        if let Some(id) = key.split_once('.').map(|(_, id)| id) {
                            deleted_ids.insert(id.to_string());
                        }
                    }
                }
            }
        }
    }
    audit.longest_deletion_pause_ms = longest_gap(&mut deletion_times);
    audit.deletion_times = deletion_times;
    audit.backups_kept = live.len();

    // Every due backup reached the catalog.
    let recorded_ids: BTreeSet<String> = keys
        .keys()
        .filter_map(|k| k.split_once('.').map(|(_, id)| id.to_string()))
        .collect();
    for (id, schedule) in &due_ids {
        if !recorded_ids.contains(id) {
            audit.lost_backups += 1;
            audit.invalid_states.push(format!(
                "due backup {id} of {schedule} never reached the catalog"
            ));
        }
    }

    // What remains: completed backups, exactly `keep_last` of each schedule.
    let mut per_schedule: BTreeMap<String, usize> = BTreeMap::new();
    for (key, record) in &live {
        if record.status != BackupStatus::Completed {
            // Its history, to tell which step went missing.
            let history: Vec<String> = keys[key]
                .iter()
                .map(|e| match &e.record {
                    Some(r) => format!("{:?} rev {} at {}", r.status, e.revision, e.at_ms),
                    None => format!("removed rev {} at {}", e.revision, e.at_ms),
                })
                .collect();
            audit.invalid_states.push(format!(
                "backup {key} (uid {}) left {:?} after the fleet settled; history {history:?}",
                record.uid, record.status
            ));
            audit.leftover.push(record.id.to_string());
        }
        if let Some(schedule) = &record.schedule {
            *per_schedule.entry(schedule.to_string()).or_default() += 1;
        }
    }
    for schedule in schedules {
        let recorded = recorded_per_schedule
            .get(&schedule.name)
            .copied()
            .unwrap_or(0);
        let kept = per_schedule.get(&schedule.name).copied().unwrap_or(0);
        let want = recorded.min(schedule.keep_last);
        if kept > want {
            audit.lost_delete_jobs += kept - want;
            audit.invalid_states.push(format!(
                "schedule {} keeps {kept} backups, its policy {want}",
                schedule.name
            ));
        }
    }

    // Work left in the queues.
    for name in WORK_QUEUES {
        if let Ok(mut stream) = js.get_stream(name).await {
            if let Ok(info) = stream.info().await {
                if info.state.messages > 0 {
                    audit.stuck_messages += info.state.messages;
                    audit.invalid_states.push(format!(
                        "{name} still holds {} messages",
                        info.state.messages
                    ));
                }
            }
        }
    }

    // The bucket holds exactly the objects of live records.
    let store = crate::object_store(config).await;
    let listing = store
        .list(&format!("{}/", config.s3.prefix))
        .await
        .expect("listing the bucket");
    let written: BTreeMap<String, Option<i64>> = listing
        .iter()
        .map(|o| (o.key.clone(), o.last_modified.map(|t| t.timestamp_millis())))
        .collect();
    let objects: BTreeSet<String> = written.keys().cloned().collect();
    let mut expected = BTreeSet::new();
    for (key, record) in &live {
        for artifact in &record.artifacts {
            expected.insert(artifact.clone());
            if !objects.contains(artifact) {
                audit
                    .invalid_states
                    .push(format!("backup {key} lost its object {artifact}"));
            }
        }
    }
    // Binlog segments and `_index.json` are owned by the cluster's binlog index, not by records
    // (the binlog tests audit them against the index).
    let binlog = |key: &str| key.split('/').nth_back(1) == Some("binlog");
    for object in objects.difference(&expected).filter(|o| !binlog(o)) {
        // `<prefix>/<cluster>/<backup name>/<backup id>/<file>`: the record's history (and,
        // through `leftover`, every log line naming the backup) tell who wrote it when.
        let parts: Vec<&str> = object.split('/').collect();
        let (cluster, id) = match parts.as_slice() {
            [.., cluster, _, id, _] => (*cluster, *id),
            _ => ("", ""),
        };
        let history: Vec<String> = keys
            .get(&format!("{cluster}.{id}"))
            .into_iter()
            .flatten()
            .map(|e| match &e.record {
                Some(r) => format!("{:?} rev {} at {}", r.status, e.revision, e.at_ms),
                None => format!("removed rev {} at {}", e.revision, e.at_ms),
            })
            .collect();
        audit.invalid_states.push(format!(
            "object {object} (written at {:?}) has no catalog record; history of {cluster}.{id}: {history:?}",
            written[object]
        ));
        if !id.is_empty() && !audit.leftover.iter().any(|l| l == id) {
            audit.leftover.push(id.to_string());
        }
    }
    audit
}

/// The longest gap between consecutive instants (milliseconds), sorting them first.
fn longest_gap(times: &mut [i64]) -> i64 {
    times.sort_unstable();
    times
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Figures

/// Prints a scenario's figures and keeps them in `target/reliability/<scenario>.json`, from
/// which `docs/reliability.md` is updated.
pub fn record_figures(scenario: &str, figures: serde_json::Value) {
    let text = serde_json::to_string_pretty(&figures).expect("figures serialise");
    println!("RELIABILITY {scenario}: {text}");
    let dir = repo_root().join("target/reliability");
    let _ = std::fs::create_dir_all(&dir);
    let suffix = if soak() { "-soak" } else { "" };
    let _ = std::fs::write(dir.join(format!("{scenario}{suffix}.json")), text);
}

/// Milliseconds of a duration, for figures.
pub fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Like [`crate::config`], for a NATS URL (or list) instead of one harness server.
pub fn config_for(nats_url: &str, replicas: usize, s3: &S3) -> Config {
    let mut config = Config::default();
    config.nats.url = nats_url.to_string();
    config.nats.replicas = replicas;
    config.s3.endpoint = Some(s3.endpoint());
    config.s3.bucket = BUCKET.into();
    config.s3.prefix = "backups".into();
    config.s3.access_key_id = Some(crate::ACCESS_KEY.into());
    config.s3.secret_access_key = Some(crate::SECRET_KEY.into());
    config.http.listen = "127.0.0.1:0".into();
    config.validate().expect("test config is valid");
    config
}

/// Now, in milliseconds since the epoch (to compare with the servers' timestamps).
pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

// ---------------------------------------------------------------------------------------------
// Reports published directly, as an executor would

/// Backups of one schedule reported straight to `sexton.v1.report.<cluster>`, their objects
/// (a small data object and the `metadata.json` describing it) written first: load without the
/// reference executor. Backup `n` completed `n` milliseconds after `epoch`.
#[derive(Debug, Clone)]
pub struct ReportLoad {
    pub schedule: LoadSchedule,
    pub epoch: DateTime<Utc>,
}

/// What every data object of a [`ReportLoad`] holds.
const LOAD_DATA: &[u8] = b"sexton fault test\n";

impl ReportLoad {
    /// A load whose backups complete from now on, a millisecond apart.
    pub fn new(schedule: LoadSchedule) -> ReportLoad {
        ReportLoad {
            schedule,
            epoch: Utc::now(),
        }
    }

    pub fn backup_id(&self, n: usize) -> String {
        format!("{}-{n:07}", self.schedule.name)
    }

    pub fn artifacts(&self, prefix: &str, n: usize) -> [String; 2] {
        let base = format!(
            "{prefix}/{}/{}/{}/",
            self.schedule.cluster,
            self.schedule.name,
            self.backup_id(n)
        );
        [
            format!("{base}backup.xbstream"),
            format!("{base}metadata.json"),
        ]
    }

    /// When backup `n` completed.
    pub fn completed_at(&self, n: usize) -> DateTime<Utc> {
        self.epoch + chrono::Duration::milliseconds(n as i64)
    }

    /// Writes the objects of backups `range` (data, then `metadata.json`), 16 at a time.
    pub async fn write_objects(
        &self,
        store: &sexton_shared::object_store::ObjectStore,
        prefix: &str,
        range: std::ops::Range<usize>,
    ) {
        use futures::StreamExt;
        let writes: Vec<(String, bytes::Bytes)> =
            range.flat_map(|n| self.objects_of(prefix, n)).collect();
        // Each backup's data before its metadata.json: the pairs go in order, 8 pairs at a time.
        futures::stream::iter(
            writes
                .chunks(2)
                .map(|pair| pair.to_vec())
                .collect::<Vec<_>>(),
        )
        .map(|pair| {
            let store = store.clone();
            async move {
                for (key, body) in pair {
                    store
                        .put(&key, body)
                        .await
                        .unwrap_or_else(|err| panic!("writing {key}: {err}"))
                }
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    }

    /// The objects of backup `n` with their bodies, in the order an executor writes them: the
    /// data, then the `metadata.json` describing it.
    pub fn objects_of(&self, prefix: &str, n: usize) -> [(String, bytes::Bytes); 2] {
        let [data, metadata] = self.artifacts(prefix, n);
        let report: sexton_model::wire::Report =
            serde_json::from_slice(&self.genuine_report(prefix, n)).expect("a report");
        let document = sexton_model::metadata::BackupMetadata::describe(&report, Utc::now());
        [
            (data, bytes::Bytes::from_static(LOAD_DATA)),
            (metadata, document.encode().into()),
        ]
    }

    /// A completed report of backup `n`, completed at `completed_at`, with no object described:
    /// what a careless or forged report looks like (intake refuses it unless its objects and
    /// `metadata.json` agree).
    pub fn report(&self, prefix: &str, n: usize, completed_at: DateTime<Utc>) -> bytes::Bytes {
        let report = json!({
            "schema_version": 1,
            "backup_id": self.backup_id(n),
            "cluster": self.schedule.cluster,
            "plan": "full",
            "schedule": self.schedule.name,
            "backup_name": self.schedule.name,
            "status": "completed",
            "kind": "full",
            "started_at": completed_at - chrono::Duration::milliseconds(100),
            "completed_at": completed_at,
            "artifacts": self.artifacts(prefix, n),
        });
        serde_json::to_vec(&report).expect("report").into()
    }

    /// The completed report of backup `n` an executor sends once [`ReportLoad::write_objects`]
    /// has written its objects: the data object described with its size and SHA-256.
    pub fn genuine_report(&self, prefix: &str, n: usize) -> bytes::Bytes {
        let mut report: serde_json::Value =
            serde_json::from_slice(&self.report(prefix, n, self.completed_at(n))).unwrap();
        report["objects"] = json!([{
            "key": self.artifacts(prefix, n)[0],
            "size": LOAD_DATA.len(),
            "sha256": sexton_model::digest::sha256_hex(LOAD_DATA),
        }]);
        serde_json::to_vec(&report).expect("report").into()
    }

    /// Publishes the genuine reports of backups `range`, with the executor's message ids, and
    /// waits until the stream stored each.
    pub async fn publish_reports(
        &self,
        js: &jetstream::Context,
        prefix: &str,
        range: std::ops::Range<usize>,
    ) {
        let mut acks = Vec::new();
        for n in range {
            let subject = format!("sexton.v1.report.{}", self.schedule.cluster);
            let message_id = format!(
                "report.{}.{}.completed",
                self.schedule.cluster,
                self.backup_id(n)
            );
            let ack = js
                .send_publish(
                    subject,
                    jetstream::message::PublishMessage::build()
                        .payload(self.genuine_report(prefix, n))
                        .message_id(message_id),
                )
                .await
                .expect("publishing a report");
            acks.push(ack);
        }
        for ack in acks {
            ack.await.expect("a report stored");
        }
    }
}

impl crate::Server {
    /// The server process's id while it runs (for CPU accounting).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_are_the_longest_gap_around_a_fault() {
        let audit = Audit {
            due_times: vec![0, 1000, 2000, 9000, 10000],
            deletion_times: vec![500, 1500, 1600, 20000],
            ..Default::default()
        };
        let (firing, deleting) = audit.stalls_after(2500, Duration::from_secs(10));
        assert_eq!(firing, Duration::from_millis(7000));
        // No deletion within the window: the whole window from the last one before.
        assert_eq!(deleting, Duration::from_millis(12500 - 1600));
        assert_eq!(longest_gap(&mut [5, 1, 3]), 2);
    }
}
