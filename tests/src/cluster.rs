//! A three-node NATS JetStream cluster on loopback, for the node-loss tests.
//!
//! Each node is its own `nats-server` process with its own client, monitor and route ports and
//! store directory, routes to the other two, and a distinct server name. Streams and buckets
//! created with three replicas then survive the loss of any one node. A node can be killed
//! (SIGKILL, as a crashed machine) and started again on the same ports and store, where it
//! catches up from the others.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::{http_status, lasting_port, tools_bin, wait_ready, Server};

pub const CLUSTER_NAME: &str = "sexton-test";

/// One node of a [`NatsCluster`].
pub struct ClusterNode {
    pub name: String,
    pub port: u16,
    pub monitor_port: u16,
    pub route_port: u16,
    routes: Vec<String>,
    pub server: Server,
}

impl ClusterNode {
    fn store(&self) -> PathBuf {
        self.server.dir.path().join("store")
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn log_path(&self) -> PathBuf {
        self.server.dir.path().join("nats.log")
    }

    fn spawn(&mut self, bin: &Path) {
        let child = Command::new(bin)
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-m", &self.monitor_port.to_string(), "-js"])
            .args(["--server_name", &self.name])
            .args(["--cluster_name", CLUSTER_NAME])
            .arg("--cluster")
            .arg(format!("nats://127.0.0.1:{}", self.route_port))
            .arg("--routes")
            .arg(self.routes.join(","))
            .arg("-sd")
            .arg(self.store())
            .arg("-l")
            .arg(self.log_path())
            .stdin(Stdio::null())
            .spawn()
            .expect("starting a nats-server cluster node");
        self.server.child = Some(child);
    }

    fn healthy(&self) -> bool {
        http_status(self.monitor_port, "/healthz?js-enabled-only=true") == Some(200)
    }

    pub fn is_running(&self) -> bool {
        self.server.is_running()
    }
}

/// Three `nats-server` processes forming one JetStream cluster.
pub struct NatsCluster {
    pub nodes: Vec<ClusterNode>,
}

impl NatsCluster {
    /// Starts three nodes and waits until each answers its health check and the cluster can
    /// create (and delete) a stream with three replicas.
    pub fn start() -> NatsCluster {
        let bin = tools_bin().join("nats-server");
        let route_ports: Vec<u16> = (0..3).map(|_| lasting_port()).collect();
        let mut nodes = Vec::new();
        for (i, route_port) in route_ports.iter().enumerate() {
            let routes = route_ports
                .iter()
                .filter(|p| *p != route_port)
                .map(|p| format!("nats://127.0.0.1:{p}"))
                .collect();
            nodes.push(ClusterNode {
                name: format!("n{}", i + 1),
                port: lasting_port(),
                monitor_port: lasting_port(),
                route_port: *route_port,
                routes,
                server: Server {
                    child: None,
                    dir: tempfile::tempdir().expect("tempdir"),
                },
            });
        }
        for node in &mut nodes {
            node.spawn(&bin);
        }
        let cluster = NatsCluster { nodes };
        cluster.wait_healthy(Duration::from_secs(60));
        cluster.wait_replicated_stream(Duration::from_secs(60));
        cluster
    }

    /// Every server URL, comma-separated, as `nats.url` takes them.
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(ClusterNode::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The URLs of the nodes that are running.
    pub fn running_urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .map(ClusterNode::url)
            .collect()
    }

    /// The node called `name` (`n1`, `n2`, `n3`).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// SIGKILL of one node: it gets no chance to hand over leadership.
    pub fn kill(&mut self, index: usize) {
        self.nodes[index].server.kill();
    }

    /// Starts a killed node again on the same ports and store and waits for its health check.
    pub fn restart(&mut self, index: usize) {
        let bin = tools_bin().join("nats-server");
        let node = &mut self.nodes[index];
        node.server.kill();
        node.spawn(&bin);
        let (monitor, log) = (node.monitor_port, node.log_path());
        if let Err(why) = wait_ready(&mut node.server, &log, Duration::from_secs(60), || {
            http_status(monitor, "/healthz?js-enabled-only=true") == Some(200)
        }) {
            panic!(
                "{}",
                why.explain(&format!("node {} (restarted)", node.name))
            );
        }
    }

    fn wait_healthy(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        for node in &self.nodes {
            while !node.healthy() {
                assert!(
                    Instant::now() < deadline,
                    "cluster node {} not healthy within {timeout:?}",
                    node.name
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// JetStream in a cluster answers only once a meta leader is elected and every peer is
    /// known: creating a stream with three replicas proves both.
    fn wait_replicated_stream(&self, timeout: Duration) {
        let url = self.url();
        let probe = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the cluster probe");
            runtime.block_on(async move {
                let deadline = Instant::now() + timeout;
                let client = async_nats::connect(crate::cluster::split(&url))
                    .await
                    .expect("connecting to the cluster");
                let js = async_nats::jetstream::new(client);
                loop {
                    let created = js
                        .create_stream(async_nats::jetstream::stream::Config {
                            name: "CLUSTER_PROBE".into(),
                            subjects: vec!["cluster.probe".into()],
                            num_replicas: 3,
                            ..Default::default()
                        })
                        .await;
                    match created {
                        Ok(_) => {
                            js.delete_stream("CLUSTER_PROBE")
                                .await
                                .expect("deleting the probe stream");
                            return;
                        }
                        Err(err) => {
                            assert!(
                                Instant::now() < deadline,
                                "the cluster cannot create a 3-replica stream: {err}"
                            );
                            tokio::time::sleep(Duration::from_millis(250)).await;
                        }
                    }
                }
            })
        });
        probe.join().expect("cluster probe");
    }

    /// Waits until every stream's replicas report current (a restarted node has caught up);
    /// returns how long that took.
    pub async fn wait_caught_up(&self, timeout: Duration) -> Duration {
        let started = Instant::now();
        let client = async_nats::connect(split(&self.running_urls().join(",")))
            .await
            .expect("connecting to the cluster");
        let js = async_nats::jetstream::new(client);
        loop {
            if self.all_current(&js).await {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < timeout,
                "streams not caught up within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn all_current(&self, js: &async_nats::jetstream::Context) -> bool {
        use futures::StreamExt;
        let mut names = js.stream_names();
        let mut all = Vec::new();
        while let Some(name) = names.next().await {
            match name {
                Ok(name) => all.push(name),
                Err(_) => return false,
            }
        }
        for name in all {
            let Ok(mut stream) = js.get_stream(&name).await else {
                return false;
            };
            let Ok(info) = stream.info().await else {
                return false;
            };
            let Some(cluster) = &info.cluster else {
                return false;
            };
            if cluster.leader.is_none()
                || cluster.replicas.len() != self.nodes.len() - 1
                || cluster.replicas.iter().any(|r| !r.current || r.offline)
            {
                return false;
            }
        }
        true
    }

    /// The server that leads `stream`'s replicas.
    pub async fn stream_leader(js: &async_nats::jetstream::Context, stream: &str) -> String {
        let mut stream = js.get_stream(stream).await.expect("stream exists");
        let info = stream.info().await.expect("stream info");
        info.cluster
            .clone()
            .and_then(|c| c.leader)
            .expect("a clustered stream has a leader")
    }
}

/// A comma-separated URL list as async-nats takes it.
pub fn split(urls: &str) -> Vec<String> {
    urls.split(',').map(|u| u.trim().to_string()).collect()
}

/// The server that leads a durable consumer, if the cluster answers.
pub async fn consumer_leader(
    js: &async_nats::jetstream::Context,
    stream: &str,
    durable: &str,
) -> Option<String> {
    let stream = js.get_stream(stream).await.ok()?;
    let mut consumer: async_nats::jetstream::consumer::PullConsumer =
        stream.get_consumer(durable).await.ok()?;
    let info = consumer.info().await.ok()?;
    info.cluster.clone()?.leader
}

/// Which node leads each of the fleet's consumers and buckets, for the figures of a node loss.
pub async fn leaders(js: &async_nats::jetstream::Context) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (stream, durable) in crate::fault::CONSUMERS {
        out.insert(
            format!("{stream}/{durable}"),
            consumer_leader(js, stream, durable).await.into(),
        );
    }
    for bucket in [
        sexton_shared::topology::BUCKET_CATALOG,
        sexton_shared::topology::BUCKET_SCHEDULES,
    ] {
        let stream = format!("KV_{bucket}");
        let leader = match js.get_stream(&stream).await {
            Ok(mut s) => s.info().await.ok().and_then(|i| i.cluster.clone()?.leader),
            Err(_) => None,
        };
        out.insert(stream, leader.into());
    }
    out.into()
}

impl NatsCluster {
    /// The node a client named `client_name` is connected to (from each node's `/connz`).
    pub fn connected_node(&self, client_name: &str) -> Option<usize> {
        self.nodes.iter().position(|node| {
            node.is_running()
                && crate::http_get(node.monitor_port, "/connz?limit=1024")
                    .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok())
                    .and_then(|v| v["connections"].as_array().cloned())
                    .is_some_and(|conns| conns.iter().any(|c| c["name"] == client_name))
        })
    }
}

/// Asks the leader of a durable consumer to step down, so another node leads it.
pub async fn consumer_step_down(client: &async_nats::Client, stream: &str, durable: &str) {
    let _ = client
        .request(
            format!("$JS.API.CONSUMER.LEADER.STEPDOWN.{stream}.{durable}"),
            bytes::Bytes::new(),
        )
        .await;
}
