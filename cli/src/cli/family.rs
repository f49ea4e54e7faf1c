//! The commands that are more than one request and its answer, by family: `run` hands each
//! family its commands, and the family runs here those that compute offline, read or write
//! files, start a process or poll, and hands the rest to `online::run`.

pub(super) mod about;
pub(super) mod audit;
pub(super) mod backup;
pub(super) mod binlog;
pub(super) mod catalog;
pub(super) mod manifests;
pub(super) mod retention;
pub(super) mod schedule;
pub(super) mod serve;
