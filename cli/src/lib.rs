//! The `sexton` command's library half: the CLI itself and its typed API client, and the
//! printing of retention simulations. The executor side (`sexton exec`, `sexton executor`,
//! `sexton binlog append`) is the `sexton-executor` crate, which these commands call.

pub mod apply;
pub mod audit;
pub mod catalog_from;
pub mod cli;
pub mod client;
pub mod completion;
pub mod failure;
pub mod listing;
pub mod manifest;
pub mod manifest_fields;
pub mod migrate;
pub mod offline_plan;
pub mod output;
pub mod policy_from;
pub mod recovery;
pub mod safety;
pub mod simulate;
pub mod version;
