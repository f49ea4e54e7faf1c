//! The `sexton` command's library half: the reference executor, so tests and the local run can
//! start it in-process, and the CLI itself.

pub mod cli;
pub mod executor;
