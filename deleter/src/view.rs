//! The deleter's copy of each cluster's catalog, brought up to date before every batch.
//!
//! Judging a job needs the whole retention group (is the backup still one the plan deletes?),
//! and a batch holds many jobs of the same cluster. Listing the cluster for every batch would
//! cost O(catalog) per batch; instead the first batch lists it once and every later batch reads
//! only what the catalog's stream stored since. The catch-up is the retention-worker's
//! ([`sexton_shared::catalog_view`]); what differs is what is kept: the deleter keeps every
//! record whole, because judging a job reads what the retention engine does not (the uid, the
//! object keys, holds, the volume deletion under way), while the retention-worker keeps only
//! the engine's form of each record and reads the few it acts on from the bucket. After
//! [`CatalogViews::current`] returns, the copy holds every change stored before the call: it
//! is as fresh as a full listing made at that moment, and the claim that follows is still a
//! compare-and-set on the record itself.

use sexton_shared::catalog_view;

/// Every cluster's copy on this replica.
pub type CatalogViews = catalog_view::CatalogView<ClusterCache>;

/// One cluster's records, by the backup id of their key.
pub use catalog_view::Records as ClusterCache;
