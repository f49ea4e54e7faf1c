//! The `sexton` command's library half: the reference executor and `sexton exec`, so tests and
//! the local run can start them in-process, the CLI itself and its typed API client, the binlog
//! shipping behind `sexton binlog append`, and the printing of retention simulations.

pub mod audit;
pub mod binlog_append;
pub mod binlog_file;
pub mod cli;
pub mod client;
pub mod exec;
pub mod executor;
pub mod listing;
pub mod offline_plan;
pub mod output;
pub mod safety;
pub mod simulate;
pub mod version;
