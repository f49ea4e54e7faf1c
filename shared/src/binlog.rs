//! The binlog (or WAL) index of a cluster: its format and the pure decisions around it are
//! `sexton_model::binlog`, re-exported here; [`store`] reads and writes it in the object store
//! with a conditional read-modify-write loop.

pub use sexton_model::binlog::*;

pub mod store;
