//! The start-up most end-to-end tests begin with, as one builder: a `nats-server`, SeaweedFS
//! (unless the test needs only NATS), the services in-process, a client with JetStream, the
//! schedules the test needs (created through the API, so the scheduler is answering), and the
//! catalog.
//!
//! ```ignore
//! let world = Setup::new(Members::ALL)
//!     .schedule(json!({"name": "db", "cluster": "c1", "plan": "base", "cron": "@daily"}))
//!     .start()
//!     .await;
//! let b1 = trigger_backup(&world.client, "db").await;
//! ```

use sexton_shared::{catalog::Catalog, config::Config, topology};

use crate::{config, create_schedule, nats_config, Fleet, Members, Nats, S3};

/// A change to the test configuration ([`Setup::configure`]).
type ConfigChange = Box<dyn FnOnce(&mut Config)>;

/// What a test starts, in the order [`Setup::start`] starts it.
pub struct Setup {
    members: Members,
    s3: bool,
    configure: Option<ConfigChange>,
    schedules: Vec<serde_json::Value>,
}

/// A started test world. Dropping it stops the fleet and the servers.
pub struct World {
    pub nats: Nats,
    /// `None` for a test that needs only NATS ([`Setup::without_s3`]).
    pub s3: Option<S3>,
    pub config: Config,
    pub fleet: Fleet,
    pub client: async_nats::Client,
    pub js: async_nats::jetstream::Context,
    /// The catalog bucket (the topology is ensured, so it exists whoever runs).
    pub catalog: Catalog,
}

impl Setup {
    /// `members` of the fleet against a fresh `nats-server` and SeaweedFS.
    pub fn new(members: Members) -> Setup {
        Setup {
            members,
            s3: true,
            configure: None,
            schedules: Vec::new(),
        }
    }

    /// No S3 server: the configuration of [`nats_config`] (the scheduler and the CLI need
    /// nothing else).
    pub fn without_s3(mut self) -> Setup {
        self.s3 = false;
        self
    }

    /// A change to the test configuration, made before the fleet starts (a shorter sweep
    /// interval, say).
    pub fn configure(mut self, change: impl FnOnce(&mut Config) + 'static) -> Setup {
        self.configure = Some(Box::new(change));
        self
    }

    /// A schedule to create through the API once the fleet runs ([`create_schedule`]'s body).
    pub fn schedule(mut self, body: serde_json::Value) -> Setup {
        self.schedules.push(body);
        self
    }

    /// Starts the servers, then (with the configuration changed as asked) the fleet, connects,
    /// creates the schedules in order and opens the catalog.
    pub async fn start(self) -> World {
        let nats = Nats::start();
        let s3 = self.s3.then(S3::start);
        let mut config = match &s3 {
            Some(s3) => config(&nats, s3),
            None => nats_config(&nats),
        };
        if let Some(change) = self.configure {
            change(&mut config);
        }
        let fleet = Fleet::start(&config, self.members);
        let client = async_nats::connect(nats.url())
            .await
            .expect("connecting to the test nats-server");
        let js = async_nats::jetstream::new(client.clone());
        for body in self.schedules {
            create_schedule(&client, body).await;
        }
        let topology = topology::ensure(&js, 1)
            .await
            .expect("the topology of the test nats-server");
        let catalog = Catalog::new(topology.catalog.clone());
        World {
            nats,
            s3,
            config,
            fleet,
            client,
            js,
            catalog,
        }
    }
}
