//! The executor side of the contract (`docs/executors.md`), in a crate of its own so that the
//! `sexton` binary, the tests and the local run start it the same way: the reference executor
//! ([`reference`]), `sexton exec` ([`exec`]: the user's command run for each job, its uploads,
//! merges and restore tests) and the binlog shipping behind `sexton binlog append`
//! ([`binlog_append`], [`binlog_file`]).

pub mod binlog_append;
pub mod binlog_file;
pub mod exec;
pub mod fetch;
pub mod reference;
