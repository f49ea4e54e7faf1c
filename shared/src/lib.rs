//! What two or more Sexton services share at their I/O edges: the NATS topology (subjects,
//! streams, consumers, buckets), catalog access and views, the configuration, the object-store
//! client, the audit publisher and the telemetry endpoint.
//!
//! The values they carry (names, records, wire messages, API requests, `metadata.json`, the
//! binlog index format, digests) are `sexton-model`'s, re-exported here under their old paths.
//! Nothing here decides policy: retention lives in `sexton-retention`, schedule arithmetic in
//! `sexton-schedule`. This crate only carries values between those pure cores and the world.

pub mod api;
pub mod audit;
pub mod binlog;
pub mod breaker;
pub mod build;
pub mod catalog;
pub mod catalog_feed;
pub mod catalog_view;
pub mod channels;
pub mod config;
pub mod guard;
pub mod leader_read;
pub mod nats;
pub mod object_store;
pub mod outcome;
pub mod partitions;
pub mod planning;
pub mod recovery;
pub mod schedules_view;
pub mod service;
pub mod shutdown;
pub mod stream_read;
pub mod telemetry;
pub mod topology;

// The model's vocabulary, named `crate::records` and so on inside this crate. Other crates
// name it from `sexton_model` itself (issue 48): no re-export hides where a word is defined.
use sexton_model::{copies, digest, engine_form, names, objectives, records, wire};
pub use shutdown::Shutdown;
