//! A replica's view of each cluster's catalog, kept up to date from the catalog's stream: the
//! one catch-up mechanism behind the retention-worker's view (issue 17) and the deleter's
//! (issue 18). What each service keeps per record is its own ([`ViewState`]); how the view
//! learns what changed is here, once.
//!
//! The first use of a cluster lists it (the last entry of every key, read through an ordered
//! consumer) and hands each entry to the state as it arrives, so no second copy of the cluster
//! is ever held; every later use reads only what the stream stored after the last sequence
//! applied and applies it in stream order: a put replaces the backup's entry, a delete or
//! purge removes it.
//!
//! **No consumer on the steady path** (issue 32). A view made with [`CatalogView::fed`] (the
//! services') keeps one ordered consumer filtered on the clusters it holds
//! ([`crate::catalog_feed`]); a use asks the leader for the cluster's newest revision, one
//! request the server answers from its per-subject index, and applies what the feed brought up
//! to it. What the feed cannot vouch for, and every use of a view made with
//! [`CatalogView::new`], is read from the leader, one message-get request per change and one
//! more that finds nothing ([`crate::stream_read`]); the server walks the stream from the view's
//! next sequence for those, so their cost grows with what every cluster wrote since. Only the
//! first use of a cluster on a replica (and the first after its view was dropped) opens a
//! consumer, for the listing, and the feed one when it takes on clusters.
//!
//! **Freshness.** [`CatalogView::current`] returns only after the view applied the newest
//! revision the leader had for the cluster (fed), or after the leader answered that nothing
//! follows the last change applied (read), so the caller decides on a catalog holding every
//! write acknowledged before that answer: at least as fresh as a full listing started at the
//! same moment. The feed's lag cannot matter: the use waits for the feed to bring the
//! revision the leader named (2 s at most, then it reads from the leader), under the cluster's
//! lock, and a request that fails (a leader election, a timeout) fails the caller (which
//! retries) instead of deciding on an older view. What changes after the
//! catch-up is caught where it always was: every write is a compare-and-set on the revision the
//! view holds.
//!
//! The listing may be answered by a replica that has not yet stored the latest writes; those
//! come after every entry it delivered, so the changes read from the leader after the
//! listing's newest entry hold them. [`CatalogView::current_through`] still refuses a view
//! behind a revision the caller knows is stored (the deleter: a job's mark), and the deleter
//! asks the leader ([`CatalogView::latest_revision`]) whether a mark past the view was ever
//! stored (lag) or not (a false claim).
//!
//! **Throwing it away.** Nothing here is state that matters: on any error (a read that fails or
//! stalls, an entry that does not decode, an entry the state refuses) the cluster's view is
//! dropped and the next use lists the cluster again. A replica's view is its own; replicas
//! never share or wait for each other's.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use anyhow::Context as _;
use async_nats::jetstream::kv;
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::catalog::{decode_record, Versioned};
use crate::catalog_feed::{self, Feed, Taken};
use crate::names::{BackupId, ClusterName};
use crate::records::BackupRecord;
use crate::stream_read::{self, Entry};

/// What a service keeps of one cluster's records.
pub trait ViewState: Default + Send + 'static {
    /// Applies one change of the entry `<cluster>.<id>`: the record now stored there, or
    /// `None` when it was removed. An error drops the whole view.
    fn apply(
        &mut self,
        cluster: &ClusterName,
        id: BackupId,
        change: Option<Versioned<BackupRecord>>,
    ) -> anyhow::Result<()>;
}

/// The simplest state: every record of the cluster whole, by the backup id of its key (the
/// deleter judges jobs on it, the copier finds a location's binlog horizon in it).
#[derive(Default)]
pub struct Records {
    pub records: HashMap<BackupId, Versioned<BackupRecord>>,
}

impl ViewState for Records {
    fn apply(
        &mut self,
        _cluster: &ClusterName,
        id: BackupId,
        change: Option<Versioned<BackupRecord>>,
    ) -> anyhow::Result<()> {
        match change {
            Some(record) => {
                self.records.insert(id, record);
            }
            None => {
                self.records.remove(&id);
            }
        }
        Ok(())
    }
}

/// Every cluster's view on this replica.
pub struct CatalogView<S> {
    store: kv::Store,
    clusters: Mutex<HashMap<ClusterName, Arc<Mutex<ClusterView<S>>>>>,
    /// The changes of the clusters held, pushed as they are stored ([`crate::catalog_feed`]);
    /// `None`: every catch-up reads from the leader.
    feed: Option<Feed>,
}

/// One cluster's state, the first stream sequence not yet applied (0: never loaded), and what
/// the last catch-up read.
#[derive(Default)]
pub struct ClusterView<S> {
    next_sequence: u64,
    pub state: S,
    pub last_refresh: Refresh,
}

impl<S> ClusterView<S> {
    /// The last catalog revision (stream sequence) this view has applied.
    pub fn applied(&self) -> u64 {
        self.next_sequence.saturating_sub(1)
    }
}

impl<S> Deref for ClusterView<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.state
    }
}

impl<S> DerefMut for ClusterView<S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.state
    }
}

/// What one catch-up read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refresh {
    /// The cluster was listed whole (first use, or after the view was dropped).
    pub full_listing: bool,
    /// Changes applied from the stream after the listing (or since the last use).
    pub changes: u64,
    /// Their subjects and payloads, in bytes.
    pub change_bytes: u64,
    /// The changes came from the feed (one request asked the leader for the newest revision),
    /// not from a read of the stream from the leader.
    pub fed: bool,
}

impl CatalogView<Records> {
    /// Every record of `cluster`, whole, as [`CatalogView::current`] holds them: as fresh as a
    /// listing made now, without one (the deleter's binlog collectors decide their horizons on
    /// it).
    pub async fn current_records(
        &self,
        cluster: &ClusterName,
    ) -> anyhow::Result<Vec<BackupRecord>> {
        Ok(self
            .current(cluster)
            .await?
            .records
            .values()
            .map(|record| record.value.clone())
            .collect())
    }
}

impl<S: ViewState> CatalogView<S> {
    /// A view whose every catch-up reads the stream from the leader.
    pub fn new(store: kv::Store) -> CatalogView<S> {
        CatalogView {
            store,
            clusters: Mutex::new(HashMap::new()),
            feed: None,
        }
    }

    /// A view fed the changes of the clusters it holds by one consumer (the services' views:
    /// a use then costs one request whatever the number of clusters).
    pub fn fed(store: kv::Store) -> CatalogView<S> {
        CatalogView {
            feed: Some(Feed::new(store.clone())),
            ..Self::new(store)
        }
    }

    /// [`CatalogView::fed`] whose feed asks for the whole catalog once it holds more than
    /// `max_filters` clusters (tests).
    pub fn fed_with_filter_limit(store: kv::Store, max_filters: usize) -> CatalogView<S> {
        CatalogView {
            feed: Some(Feed::with_filter_limit(store.clone(), max_filters)),
            ..Self::new(store)
        }
    }

    /// The cluster's records as of now, locked for the caller: users of the same cluster on
    /// this replica take turns, each with every change stored before it began.
    pub async fn current(
        &self,
        cluster: &ClusterName,
    ) -> anyhow::Result<OwnedMutexGuard<ClusterView<S>>> {
        let view = self
            .clusters
            .lock()
            .await
            .entry(cluster.clone())
            .or_default()
            .clone();
        let mut view = view.lock_owned().await;
        if let Err(err) = self.refresh(cluster, &mut view).await {
            // Start from a full listing next time rather than trust a view of unknown age.
            *view = ClusterView::default();
            return Err(err);
        }
        if view.applied() == 0 {
            // Nothing of this cluster was ever stored: no view is kept for it, so jobs and
            // requests naming clusters that do not exist cannot grow the map without bound.
            self.clusters.lock().await.remove(cluster);
            if let Some(feed) = &self.feed {
                feed.forget(cluster);
            }
        } else if let Some(feed) = &self.feed {
            feed.want(cluster);
        }
        Ok(view)
    }

    /// How many clusters' views this replica holds.
    pub async fn clusters_held(&self) -> usize {
        self.clusters.lock().await.len()
    }

    /// [`CatalogView::current`], and the view has applied stream sequence `through` (a
    /// catalog revision the caller knows is stored: the mark a delete job was issued at). A
    /// catch-up is answered by whichever replica hosts its consumer, and one that has not yet
    /// stored the latest writes reports nothing pending: under a NATS node loss the deleter
    /// judged a job on a view without the job's own mark, saw the backup `completed` and
    /// refused the job for good (fault_nats_cluster). A view behind `through` is an error the
    /// caller retries; the view is kept, and its next catch-up reads what it missed.
    pub async fn current_through(
        &self,
        cluster: &ClusterName,
        through: u64,
    ) -> anyhow::Result<OwnedMutexGuard<ClusterView<S>>> {
        let view = self.current(cluster).await?;
        if view.next_sequence <= through {
            anyhow::bail!(
                "the catalog view of {cluster} has applied up to revision {} but revision \
                 {through} was asked for",
                view.applied()
            );
        }
        Ok(view)
    }

    /// The revision of the latest entry of `<cluster>.<id>` (a put or a removal), as the
    /// catalog stream's leader has it (it holds every acknowledged write): `None` when the key
    /// was never written. A job claiming a later revision of that backup claims one that was
    /// never stored: a claim to check, not lag to wait out (issue 26).
    pub async fn latest_revision(
        &self,
        cluster: &ClusterName,
        id: &BackupId,
    ) -> anyhow::Result<Option<u64>> {
        let entry = crate::leader_read::latest(&self.store, &format!("{cluster}.{id}")).await?;
        Ok(entry.map(|entry| entry.revision))
    }

    /// Forgets every cluster's view (the next use of each lists it again).
    pub async fn clear(&self) {
        self.clusters.lock().await.clear();
        if let Some(feed) = &self.feed {
            feed.forget_all();
        }
    }

    async fn refresh(
        &self,
        cluster: &ClusterName,
        view: &mut ClusterView<S>,
    ) -> anyhow::Result<()> {
        let mut refresh = Refresh::default();
        if view.next_sequence == 0 {
            // The changes are read from just after the newest entry the listing delivered, not
            // from the stream's last sequence: a listing answered by a replica behind its
            // leader misses the newest writes, and those come after every entry it delivered.
            // A change already listed is applied again, in stream order, which changes nothing.
            *view = ClusterView::default();
            self.list(cluster, view).await?;
            view.next_sequence = view.next_sequence.max(1);
            refresh.full_listing = true;
        } else if let Some(feed) = &self.feed {
            if let Some(fed) = self.fed_changes(feed, cluster, view).await? {
                view.last_refresh = fed;
                return Ok(());
            }
        }
        let (changes, change_bytes) = self.read_changes(cluster, view).await?;
        refresh.changes = changes;
        refresh.change_bytes = change_bytes;
        view.last_refresh = refresh;
        Ok(())
    }

    /// Applies what the feed brought for `cluster`, up to the newest revision the leader has
    /// for it. `None` when the feed cannot vouch for every change from the view's next sequence
    /// on, or has not brought that revision within [`catalog_feed::PATIENCE`]: the caller reads
    /// from the leader instead (what it already applied stays applied).
    async fn fed_changes(
        &self,
        feed: &Feed,
        cluster: &ClusterName,
        view: &mut ClusterView<S>,
    ) -> anyhow::Result<Option<Refresh>> {
        let key_prefix = format!("{}{cluster}.", self.store.prefix);
        if !feed.covers(cluster, view.next_sequence) {
            return Ok(None);
        }
        // A feed that stops after this check is caught by the take below.
        let newest = stream_read::newest_sequence(
            &self.store,
            &format!("{key_prefix}*"),
            "the newest catalog revision",
        )
        .await?;
        let mut refresh = Refresh {
            fed: true,
            ..Refresh::default()
        };
        let mut waited = false;
        loop {
            let Taken::Entries(entries) = feed.take(cluster, view.next_sequence) else {
                return Ok(None);
            };
            for fed in &entries {
                let entry = fed.entry();
                refresh.changes += 1;
                refresh.change_bytes += entry.size();
                let sequence = entry.sequence;
                apply_entry(cluster, &mut view.state, &key_prefix, entry, Read::Changes)?;
                view.next_sequence = sequence + 1;
            }
            if view.next_sequence > newest {
                return Ok(Some(refresh));
            }
            if waited {
                // The feed passed the newest revision without bringing it: it cannot vouch
                // for this cluster after all.
                tracing::warn!(%cluster, newest, "the catalog feed passed a revision it did not bring; reading from the leader");
                return Ok(None);
            }
            if !feed.wait_delivered(newest, catalog_feed::PATIENCE).await {
                tracing::debug!(%cluster, newest, "the catalog feed is behind; reading from the leader");
                return Ok(None);
            }
            waited = true;
        }
    }

    /// Reads the changes the stream stored from the view's next sequence on, from the stream's
    /// leader. Returns how many were read and their subjects' and payloads' bytes.
    async fn read_changes(
        &self,
        cluster: &ClusterName,
        view: &mut ClusterView<S>,
    ) -> anyhow::Result<(u64, u64)> {
        let key_prefix = format!("{}{cluster}.", self.store.prefix);
        let state = &mut view.state;
        let changes = stream_read::read_changes(
            &self.store,
            &format!("{key_prefix}*"),
            view.next_sequence,
            "catalog changes",
            |entry| apply_entry(cluster, state, &key_prefix, entry, Read::Changes),
        )
        .await?;
        view.next_sequence = changes.next_sequence;
        Ok((changes.count, changes.bytes))
    }

    /// Lists the cluster (the last entry of every key), applying each entry to the state; the
    /// first sequence not applied is then the one after its newest entry.
    async fn list(&self, cluster: &ClusterName, view: &mut ClusterView<S>) -> anyhow::Result<()> {
        let key_prefix = format!("{}{cluster}.", self.store.prefix);
        let state = &mut view.state;
        let newest = stream_read::list_last_per_key(
            &self.store,
            &format!("{key_prefix}*"),
            "a catalog listing",
            |entry| apply_entry(cluster, state, &key_prefix, entry, Read::Listing),
        )
        .await?;
        view.next_sequence = view.next_sequence.max(newest + 1);
        Ok(())
    }
}

/// Applies one stored entry of the cluster's keys (a put or a removal) to the state.
fn apply_entry<S: ViewState>(
    cluster: &ClusterName,
    state: &mut S,
    key_prefix: &str,
    entry: Entry<'_>,
    read: Read,
) -> anyhow::Result<()> {
    let subject = entry.subject;
    let Some(id) = subject.strip_prefix(key_prefix) else {
        return Ok(());
    };
    let id = BackupId::new(id).with_context(|| format!("catalog key {subject}"))?;
    if entry.is_removal() {
        return state.apply(cluster, id, None);
    }
    // One unreadable entry fails the read, as it failed a listing: deciding without it could
    // delete the parent of a backup nobody can see.
    let value = decode_record(entry.payload).with_context(|| format!("catalog entry {subject}"))?;
    // A listing files each record under the id it holds, as `Catalog::list_cluster` did; a
    // change is filed under its key, so a state can refuse a record stored under another
    // backup's key.
    let id = match read {
        Read::Listing => value.id.clone(),
        Read::Changes => id,
    };
    let revision = entry.sequence;
    state.apply(cluster, id, Some(Versioned { value, revision }))
}

/// Which of the two reads: the listing (the last entry of every key) or the changes after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Listing,
    Changes,
}
