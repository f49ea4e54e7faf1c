//! The `sexton` command's library half: the reference executor, so tests and the local run can
//! start it in-process, the CLI itself, and the printing of retention simulations.

pub mod cli;
pub mod executor;
pub mod simulate;
