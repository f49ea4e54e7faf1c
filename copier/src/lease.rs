//! One copier replica per cluster at a time, across replicas: a lease in the bucket
//! `sexton-copy-leases` (key = the cluster), renewed while its holder works.
//!
//! Within a replica, `ClusterLocks` gives a cluster's work one turn at a time. Across replicas
//! nothing did: two replicas could copy one backup at once (two jobs of a chain copying the
//! same ancestor, a job and another replica's periodic pass, two passes), and the second could
//! still be writing after the location's retention had deleted the copy the first recorded,
//! leaving objects there that no copy counts. A replica now works on a cluster only while it
//! holds the cluster's lease; another replica's job for that cluster comes back a little later,
//! and its pass leaves the cluster to the next one.
//!
//! A lease is a claim like any other value: one that names an expiry further away than a
//! lease is ever taken for (a clock far off, or a forged entry) counts as expired, so nothing
//! in the bucket can stop copies for longer than [`TTL`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sexton_model::names::ClusterName;

/// How long a lease lasts unless renewed: a holder that stops (killed, partitioned) frees
/// its clusters after this.
pub const TTL: Duration = Duration::from_secs(60);

/// How often a holder renews its leases.
const RENEW_EVERY: Duration = Duration::from_secs(15);

/// What the bucket holds per cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Held {
    holder: String,
    until: DateTime<Utc>,
}

/// Who may work on a cluster now, given its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Standing {
    /// Nobody holds it (no entry, an expired or unreadable one, one that claims too much).
    Free,
    /// Another replica holds it until then.
    Taken(DateTime<Utc>),
}

/// Judges an entry's value (`None`: no entry) for `holder` at `now`. Pure.
fn standing(value: Option<&[u8]>, holder: &str, now: DateTime<Utc>) -> Standing {
    let Some(held) = value.and_then(|value| serde_json::from_slice::<Held>(value).ok()) else {
        return Standing::Free;
    };
    let longest = now + chrono::TimeDelta::from_std(TTL).expect("a minute");
    if held.holder == holder || held.until <= now || held.until > longest {
        Standing::Free
    } else {
        Standing::Taken(held.until)
    }
}

/// This replica's side of the bucket.
pub struct Leases {
    store: kv::Store,
    holder: String,
}

/// A cluster's lease, renewed in the background until dropped; dropping it frees the cluster
/// at once (best effort: otherwise it lapses after [`TTL`]).
pub struct Lease {
    renewing: tokio::task::JoinHandle<()>,
    store: kv::Store,
    key: String,
    revision: Arc<std::sync::atomic::AtomicU64>,
    lost: Arc<AtomicBool>,
}

impl Leases {
    pub fn new(store: kv::Store) -> Leases {
        Leases {
            store,
            holder: format!("copier-{}", uuid::Uuid::new_v4()),
        }
    }

    /// Takes `cluster`'s lease if nobody else holds it: `Ok(None)` when another replica does
    /// (or took it at the same moment).
    pub async fn try_take(&self, cluster: &ClusterName) -> anyhow::Result<Option<Lease>> {
        let key = cluster.to_string();
        let now = Utc::now();
        let entry = self.store.entry(key.clone()).await?;
        let live = entry
            .as_ref()
            .filter(|entry| entry.operation == kv::Operation::Put);
        if let Standing::Taken(until) = standing(live.map(|e| e.value.as_ref()), &self.holder, now)
        {
            tracing::debug!(%cluster, until = %until, "another copier replica holds the cluster");
            return Ok(None);
        }
        let value = self.value(now);
        let taken = match &entry {
            None => self.store.create(&key, value).await.ok(),
            Some(entry) => self.store.update(&key, value, entry.revision).await.ok(),
        };
        let Some(revision) = taken else {
            return Ok(None);
        };
        let revision = Arc::new(std::sync::atomic::AtomicU64::new(revision));
        let lost = Arc::new(AtomicBool::new(false));
        let renewing = tokio::spawn(renew(
            self.store.clone(),
            key.clone(),
            self.holder.clone(),
            revision.clone(),
            lost.clone(),
        ));
        Ok(Some(Lease {
            renewing,
            store: self.store.clone(),
            key,
            revision,
            lost,
        }))
    }

    fn value(&self, now: DateTime<Utc>) -> bytes::Bytes {
        held_value(&self.holder, now)
    }
}

fn held_value(holder: &str, now: DateTime<Utc>) -> bytes::Bytes {
    let held = Held {
        holder: holder.to_string(),
        until: now + chrono::TimeDelta::from_std(TTL).expect("a minute"),
    };
    serde_json::to_vec(&held).expect("plain data").into()
}

/// Renews the lease every [`RENEW_EVERY`] (compare-and-set on the revision it wrote last);
/// stops, marking it lost, when someone else wrote the entry.
async fn renew(
    store: kv::Store,
    key: String,
    holder: String,
    revision: Arc<std::sync::atomic::AtomicU64>,
    lost: Arc<AtomicBool>,
) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let value = held_value(&holder, Utc::now());
        match store
            .update(&key, value, revision.load(Ordering::SeqCst))
            .await
        {
            Ok(next) => revision.store(next, Ordering::SeqCst),
            Err(err) if err.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                tracing::error!(
                    cluster = key,
                    "copy lease taken by another replica while held"
                );
                lost.store(true, Ordering::SeqCst);
                return;
            }
            // NATS not answering: try again; the lease lapses if it stays so.
            Err(err) => tracing::warn!(cluster = key, error = %err, "copy lease not renewed"),
        }
    }
}

impl Lease {
    /// Whether another replica took the cluster while this lease was held (it was not
    /// renewed for [`TTL`]).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewing.abort();
        if self.lost() {
            return;
        }
        let store = self.store.clone();
        let key = std::mem::take(&mut self.key);
        let revision = self.revision.load(Ordering::SeqCst);
        // Freed only if still ours (the revision this lease wrote last). Outside a runtime
        // (a process shutting down) it lapses instead.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = store.delete_expect_revision(&key, Some(revision)).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn held(holder: &str, until: &str) -> Vec<u8> {
        serde_json::to_vec(&Held {
            holder: holder.into(),
            until: at(until),
        })
        .unwrap()
    }

    #[test]
    fn a_lease_holds_others_off_until_it_lapses_and_never_longer_than_a_lease_lasts() {
        let now = at("2026-11-28T12:00:00Z");
        assert_eq!(standing(None, "a", now), Standing::Free);
        let theirs = held("b", "2026-11-28T12:00:30Z");
        assert_eq!(
            standing(Some(&theirs), "a", now),
            Standing::Taken(at("2026-11-28T12:00:30Z"))
        );
        // Our own lease (a replica that restarted with the same name never does, but a
        // renewal reads it so) and a lapsed one are free.
        assert_eq!(standing(Some(&theirs), "b", now), Standing::Free);
        let lapsed = held("b", "2026-11-28T11:59:59Z");
        assert_eq!(standing(Some(&lapsed), "a", now), Standing::Free);
        // A claim beyond what any lease is taken for is not believed.
        let forever = held("b", "2027-01-01T00:00:00Z");
        assert_eq!(standing(Some(&forever), "a", now), Standing::Free);
        for junk in [&b"{"[..], b"null", b"{\"holder\": 1}", b""] {
            assert_eq!(standing(Some(junk), "a", now), Standing::Free, "{junk:?}");
        }
    }
}
