//! The common `main` of every service binary: parse `--config`, load the configuration, set
//! up logging, and run the service until SIGTERM or Ctrl-C; and the [`TaskGroup`] a service
//! runs its tasks in, so that every service starts, fails and stops the same way.

use std::{
    collections::HashMap, future::Future, panic::AssertUnwindSafe, path::PathBuf, sync::Arc,
    time::Duration,
};

use clap::Parser;
use futures::FutureExt as _;

use crate::{config::Config, shutdown, shutdown::ShutdownTrigger, telemetry, Shutdown};

#[derive(Parser, Debug)]
pub struct ServiceArgs {
    /// A TOML configuration file; SEXTON_* environment variables override it.
    #[arg(long, env = "SEXTON_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log format: text or json (overrides log.format).
    #[arg(long, value_parser = ["text", "json"])]
    pub log_format: Option<String>,
}

/// Runs `service` as a process: what each service's `main.rs` calls.
pub fn main<F, Fut>(name: &'static str, service: F) -> anyhow::Result<()>
where
    F: FnOnce(Config, Shutdown) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let args = ServiceArgs::parse_from(std::env::args_os());
    // A bad configuration is bad input: exit 2, as clap does for bad arguments and the CLI for
    // every refused input, so a supervisor can tell it from a failure at run time (1).
    let loaded = Config::load(args.config.as_deref()).and_then(|mut config| {
        if let Some(format) = &args.log_format {
            config.set("log.format", format)?;
        }
        Ok(config)
    });
    let config = match loaded {
        Ok(config) => config,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(2);
        }
    };
    telemetry::init_logging(config.log.format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .build()?;
    runtime.block_on(async move { service(config, shutdown::on_signals()).await })
}

/// The tasks of one service, run as a unit: each has a name; the first that fails (or panics)
/// stops all the others through the group's shutdown signal; and once the group is stopping
/// (the service's shutdown, or that failure), [`TaskGroup::join`] waits for them at most one
/// drain deadline, then aborts the rest. So an early error in one task is seen at once, not
/// when the others happen to stop, and a task that does not stop cannot hold the process.
pub struct TaskGroup {
    service: &'static str,
    tasks: tokio::task::JoinSet<anyhow::Result<()>>,
    names: HashMap<tokio::task::Id, &'static str>,
    stop: Arc<ShutdownTrigger>,
    shutdown: Shutdown,
    /// Trips the group's signal when the service's own shutdown trips.
    forward: tokio::task::JoinHandle<()>,
}

impl TaskGroup {
    /// A group of `service`'s tasks that stops when `shutdown` trips.
    pub fn new(service: &'static str, mut shutdown: Shutdown) -> TaskGroup {
        let (stop, group_shutdown) = Shutdown::new();
        let stop = Arc::new(stop);
        let forward = {
            let stop = stop.clone();
            tokio::spawn(async move {
                shutdown.wait().await;
                stop.trigger();
            })
        };
        TaskGroup {
            service,
            tasks: tokio::task::JoinSet::new(),
            names: HashMap::new(),
            stop,
            shutdown: group_shutdown,
            forward,
        }
    }

    /// The signal the group's tasks stop on: the service's shutdown, or a task's failure.
    pub fn shutdown(&self) -> Shutdown {
        self.shutdown.clone()
    }

    /// Runs `task` as `name`. Its error, or its panic, stops the group.
    pub fn spawn<F>(&mut self, name: &'static str, task: F)
    where
        F: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let stop = self.stop.clone();
        let handle = self.tasks.spawn(async move {
            let result = match AssertUnwindSafe(task).catch_unwind().await {
                Ok(result) => result,
                Err(panic) => Err(anyhow::anyhow!("panicked: {}", panic_message(&*panic))),
            };
            if result.is_err() {
                stop.trigger();
            }
            result
        });
        self.names.insert(handle.id(), name);
    }

    /// Waits until every task has ended, and returns the first failure. Once the group is
    /// stopping, the tasks have `drain` in all to end; those still running then are aborted
    /// and named in the error.
    pub async fn join(mut self, drain: Duration) -> anyhow::Result<()> {
        let mut stopping = self.shutdown.clone();
        let mut deadline: Option<tokio::time::Instant> = None;
        let mut first_error: Option<anyhow::Error> = None;
        loop {
            let next = match deadline {
                None => tokio::select! {
                    next = self.tasks.join_next_with_id() => next,
                    () = stopping.wait() => {
                        deadline = Some(tokio::time::Instant::now() + drain);
                        continue;
                    }
                },
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, self.tasks.join_next_with_id()).await {
                        Ok(next) => next,
                        Err(_) => {
                            let mut late: Vec<&str> = self.names.values().copied().collect();
                            late.sort_unstable();
                            self.tasks.abort_all();
                            tracing::error!(service = self.service, tasks = ?late, "tasks did not stop in time; aborted");
                            first_error.get_or_insert_with(|| {
                                anyhow::anyhow!(
                                    "{} tasks did not stop within {drain:?}: {}",
                                    self.service,
                                    late.join(", ")
                                )
                            });
                            break;
                        }
                    }
                }
            };
            let Some(next) = next else { break };
            let (id, result) = match next {
                Ok((id, result)) => (id, result),
                // Only an abort ends a task without a result here (panics are caught).
                Err(err) => (err.id(), Err(anyhow::anyhow!("cancelled"))),
            };
            let name = self.names.remove(&id).unwrap_or("unnamed");
            if let Err(err) = result {
                let err = err.context(format!("{} {name} task failed", self.service));
                if first_error.is_none() {
                    tracing::error!(error = format!("{err:#}"), "stopping the service");
                    first_error = Some(err);
                } else {
                    tracing::warn!(error = format!("{err:#}"), "another task failed");
                }
            }
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

impl Drop for TaskGroup {
    fn drop(&mut self) {
        self.forward.abort();
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_failure_stops_every_task() {
        let (_trigger, shutdown) = Shutdown::new();
        let mut group = TaskGroup::new("svc", shutdown);
        let mut stop = group.shutdown();
        group.spawn("patient", async move {
            stop.wait().await;
            Ok(())
        });
        group.spawn("broken", async { anyhow::bail!("no bucket") });
        let err = group.join(Duration::from_secs(5)).await.unwrap_err();
        assert_eq!(format!("{err:#}"), "svc broken task failed: no bucket");
    }

    #[tokio::test]
    async fn a_panic_is_a_failure() {
        let (_trigger, shutdown) = Shutdown::new();
        let mut group = TaskGroup::new("svc", shutdown);
        group.spawn("boom", async { panic!("boom") });
        let err = group.join(Duration::from_secs(5)).await.unwrap_err();
        assert_eq!(format!("{err:#}"), "svc boom task failed: panicked: boom");
    }

    #[tokio::test]
    async fn shutdown_drains_within_one_deadline() {
        let (trigger, shutdown) = Shutdown::new();
        let mut group = TaskGroup::new("svc", shutdown);
        let mut stop = group.shutdown();
        group.spawn("quick", async move {
            stop.wait().await;
            Ok(())
        });
        group.spawn("stuck", std::future::pending::<anyhow::Result<()>>());
        trigger.trigger();
        let err = group.join(Duration::from_millis(200)).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "svc tasks did not stop within 200ms: stuck"
        );
    }

    #[tokio::test]
    async fn tasks_that_end_on_their_own_end_the_group() {
        let (_trigger, shutdown) = Shutdown::new();
        let mut group = TaskGroup::new("svc", shutdown);
        group.spawn("once", async { Ok(()) });
        group.join(Duration::from_secs(5)).await.unwrap();
    }
}

/// One piece of work per cluster at a time, within a replica: a fixed set of locks, a
/// cluster's chosen by the hash of its name. Fixed, so that messages naming ever new clusters
/// (a message's cluster is a claim) cannot grow it; two clusters sharing a lock only take turns.
#[derive(Clone)]
pub struct ClusterLocks(Arc<[tokio::sync::Mutex<()>]>);

impl ClusterLocks {
    pub fn new(locks: usize) -> ClusterLocks {
        ClusterLocks(
            (0..locks.max(1))
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        )
    }

    /// Waits for `cluster`'s turn; the turn lasts as long as the guard.
    pub async fn lock(
        &self,
        cluster: &crate::names::ClusterName,
    ) -> tokio::sync::MutexGuard<'_, ()> {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        cluster.hash(&mut hasher);
        let slot = hasher.finish() as usize % self.0.len();
        self.0[slot].lock().await
    }
}

/// What every service starts with ([`start`]): its task group and the group's shutdown, the
/// NATS connection, and the topology (streams and buckets created where missing).
pub struct Started {
    pub tasks: TaskGroup,
    pub shutdown: Shutdown,
    pub client: async_nats::Client,
    pub jetstream: async_nats::jetstream::Context,
    pub topology: crate::topology::Topology,
}

/// The one start-up of a service: its task group on `shutdown`, the NATS connection (named
/// `sexton-<service>`), and the topology ensured ([`crate::topology::ensure_for`]).
pub async fn start(
    service: &'static str,
    config: &crate::config::Config,
    shutdown: Shutdown,
) -> anyhow::Result<Started> {
    use anyhow::Context as _;
    let tasks = TaskGroup::new(service, shutdown);
    let shutdown = tasks.shutdown();
    let client = crate::nats::connect(&config.nats, &format!("sexton-{service}")).await?;
    let jetstream = async_nats::jetstream::new(client.clone());
    let topology = crate::topology::ensure_for(&jetstream, config)
        .await
        .context("creating the nats topology")?;
    Ok(Started {
        tasks,
        shutdown,
        client,
        jetstream,
        topology,
    })
}

impl Started {
    /// The service's HTTP endpoint (metrics, health, readiness by `readiness`) and its build
    /// facts and version answers; says the service started, with where its metrics are.
    pub async fn serve(
        &self,
        service: &'static str,
        config: &crate::config::Config,
        registry: &prometheus::Registry,
        readiness: crate::telemetry::ReadinessCheck,
    ) -> anyhow::Result<()> {
        let addr = crate::telemetry::serve(
            &config.http.listen,
            registry.clone(),
            readiness,
            self.shutdown.clone(),
        )
        .await?;
        crate::build::start(&self.client, service, registry, self.shutdown.clone()).await?;
        tracing::info!(metrics = %crate::telemetry::listen_text(addr), "{service} started");
        Ok(())
    }
}
