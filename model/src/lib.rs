//! The vocabulary every Sexton service speaks: validated names, the records kept in the
//! catalog and the schedules bucket, the versioned wire messages and API requests and replies,
//! `metadata.json`, the binlog index format, the object key layout, digests.
//!
//! Values only: this crate does no I/O (no async runtime, no NATS, no S3, no CLI parser) and
//! reads no file, no clock and no environment: the caller hands it bytes, readers and `now`.
//! `tests/tests/crate_rules_model.rs` holds it to that, and `model/clippy.toml` makes a call to
//! the clock, the file system, the environment or the network a lint error. It runs no engine
//! either: the records become the retention engine's input in [`engine_form`], and what plans
//! or judges over them lives in `sexton-shared` (`planning`, `guard`, `recovery`) and the
//! services. `sexton-shared` carries
//! these values between the world and the pure cores, `sexton-retention` and `sexton-schedule`,
//! whose types the records embed.
//!
//! The modules form floors, each using only those below it: `names`, `digest`,
//! `duration_text`, `actor`, `breaker`, `objectives`; `keys`, `checks`; `wire`; `copies`; `records`; `metadata`,
//! `binlog`, `policy_change`; `engine_form`, `api`. `tests/tests/crate_rules_model.rs` checks
//! there is no circle.

pub mod actor;
pub mod api;
pub mod binlog;
pub mod breaker;
pub mod checks;
pub mod conditions;
pub mod copies;
pub mod digest;
pub mod duration_text;
pub mod engine_form;
pub mod keys;
pub mod metadata;
pub mod names;
pub mod objectives;
pub mod policy_change;
pub mod records;
pub mod wire;
