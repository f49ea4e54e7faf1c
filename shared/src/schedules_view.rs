//! A replica's copy of the schedules bucket, brought up to date before each use: the policies
//! every retention run and every deleter batch decide with.
//!
//! Both used to list the whole bucket for every run and every batch (an ordered consumer each
//! time, and O(schedules) read per use: with 2,000 clusters, 2,000 schedules read to judge one
//! cluster's jobs). The copy is listed once, then each use reads only the changes stored since
//! from the stream's leader ([`crate::stream_read`]): one request when nothing changed, and
//! every write acknowledged before the use began is in the copy (at least as fresh as the
//! listing it replaces). One unreadable schedule fails the use, as it failed a listing: it
//! might be the one that carries a policy, and deciding without it could delete what it keeps.
//! Any failure drops the copy; the next use lists the bucket again.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context as _;
use async_nats::jetstream::kv;
use tokio::sync::Mutex;

use crate::names::ClusterName;
use crate::records::ScheduleRecord;
use crate::stream_read::{self, Entry};

/// The schedules bucket as this replica last read it.
pub struct SchedulesView {
    store: kv::Store,
    copy: Mutex<Copy>,
}

#[derive(Default)]
struct Copy {
    /// The first stream sequence not applied (0: never listed).
    next_sequence: u64,
    by_key: BTreeMap<String, ScheduleRecord>,
    /// Every schedule, in key order; rebuilt only when a change arrived.
    all: Arc<Vec<ScheduleRecord>>,
}

impl SchedulesView {
    pub fn new(store: kv::Store) -> SchedulesView {
        SchedulesView {
            store,
            copy: Mutex::new(Copy::default()),
        }
    }

    /// Every schedule, with every change stored before the call.
    pub async fn all(&self) -> anyhow::Result<Arc<Vec<ScheduleRecord>>> {
        let mut copy = self.copy.lock().await;
        if let Err(err) = self.refresh(&mut copy).await {
            *copy = Copy::default();
            return Err(err);
        }
        Ok(copy.all.clone())
    }

    /// The schedules of `cluster`, with every change stored before the call.
    pub async fn of_cluster(&self, cluster: &ClusterName) -> anyhow::Result<Vec<ScheduleRecord>> {
        Ok(self
            .all()
            .await?
            .iter()
            .filter(|schedule| schedule.cluster == *cluster)
            .cloned()
            .collect())
    }

    async fn refresh(&self, copy: &mut Copy) -> anyhow::Result<()> {
        let filter = format!("{}>", self.store.prefix);
        let prefix = self.store.prefix.as_str();
        let mut changed = false;
        if copy.next_sequence == 0 {
            let by_key = &mut copy.by_key;
            let newest = stream_read::list_last_per_key(
                &self.store,
                &filter,
                "listing schedules",
                |entry| apply(by_key, prefix, entry),
            )
            .await?;
            copy.next_sequence = newest + 1;
            changed = true;
        }
        let by_key = &mut copy.by_key;
        let changes = stream_read::read_changes(
            &self.store,
            &filter,
            copy.next_sequence,
            "schedule changes",
            |entry| apply(by_key, prefix, entry),
        )
        .await?;
        copy.next_sequence = changes.next_sequence;
        if changed || changes.count > 0 {
            copy.all = Arc::new(copy.by_key.values().cloned().collect());
        }
        Ok(())
    }
}

fn apply(
    by_key: &mut BTreeMap<String, ScheduleRecord>,
    prefix: &str,
    entry: Entry<'_>,
) -> anyhow::Result<()> {
    let key = entry
        .subject
        .strip_prefix(prefix)
        .unwrap_or(entry.subject)
        .to_string();
    if entry.is_removal() {
        by_key.remove(&key);
        return Ok(());
    }
    let schedule: ScheduleRecord = serde_json::from_slice(entry.payload)
        .with_context(|| format!("schedule {} is unreadable", entry.subject))?;
    by_key.insert(key, schedule);
    Ok(())
}
