//! What two or more Sexton services share: the domain records kept in the catalog, the
//! versioned wire types, the NATS topology (subjects, streams, consumers, buckets), the
//! configuration, the object-store client and the telemetry endpoint.
//!
//! Nothing here decides policy: retention lives in `sexton-retention`, schedule arithmetic in
//! `sexton-schedule`. This crate only carries values between those pure cores and the world.

pub mod api;
pub mod audit;
pub mod binlog;
pub mod breaker;
pub mod build;
pub mod catalog;
pub mod catalog_view;
pub mod config;
pub mod digest;
pub mod guard;
pub mod leader_read;
pub mod metadata;
pub mod names;
pub mod nats;
pub mod object_store;
pub mod outcome;
pub mod planning;
pub mod records;
pub mod schedules_view;
pub mod service;
pub mod shutdown;
pub mod stream_read;
pub mod telemetry;
pub mod topology;
pub mod wire;

pub use shutdown::Shutdown;
