//! The catalog's verbs: `backup.*` (one backup's record, its chain, its holds, its deletion,
//! its restore tests) and `catalog.*` (records rebuilt from the bucket, stranded ones adopted).
//! One file per verb, `catalog/<area>_<verb>.rs`, each a method of [`Api`](super::Api) that
//! [`Api::handle`](super::Api::handle) calls; a twin verb lives with its pair (`backup.release`
//! in `backup_hold.rs`, `catalog.stranded` in `catalog_adopt.rs`).

mod backup_chain;
mod backup_create;
mod backup_delete;
mod backup_describe;
mod backup_drill;
mod backup_hold;
mod backup_list;
mod backup_taken;
mod backup_verify;
mod catalog_adopt;
mod catalog_import;
