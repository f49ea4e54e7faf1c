//! The retention-worker's view of the catalog (issue 17): each cluster's records, grouped by
//! plan and held only in the engine's form, brought up to date before every run by reading
//! only what the catalog's stream stored since the run before.
//!
//! A run used to list the cluster's whole catalog (every KV entry, read through an ordered
//! consumer) and convert every record to the engine's form, so its cost in NATS bytes and CPU
//! grew with the catalog, not with what changed: at 100,000 records, tens of megabytes per
//! checkpoint. Now the first run of a cluster lists it once; every later run reads the changes
//! after the last sequence it applied and applies them in stream order: a put replaces the
//! record's engine form in place, a delete or purge removes it. The catch-up itself, its
//! freshness (a run decides on a catalog at least as fresh as a listing started at the same
//! moment) and its error handling (any error drops the cluster's view; the next run lists
//! again) are [`sexton_shared::catalog_view`], shared with the deleter.
//!
//! **What is kept.** Per record, only what a run evaluates and filters on: the engine's form
//! (what `BackupRecord::to_engine` gives) and an [`Entry`] (the revision, and the few facts a
//! run reads beside the engine's form). Not the record itself: its uid, object keys, digests
//! and labels would triple the memory (issue 17 asks for at most 1 KiB a record), and a run
//! needs them only for the few records it acts on, which it reads from the bucket then
//! ([`crate::worker`]), accepting only the revision it decided on: a record changed since is a
//! compare-and-set conflict, as a mark written on the view's revision would have been. The
//! deleter keeps whole records instead (`deleter/src/view.rs`): it judges every job on them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use sexton_model::{
    keys::StoreRef,
    names::{BackupId, ClusterName, LocationName, PlanName},
    records::{BackupRecord, BackupStatus},
};
use sexton_shared::{
    catalog::Versioned,
    catalog_view::{self, ViewState},
};

/// Every cluster's view on this replica.
pub type CatalogView = catalog_view::CatalogView<ClusterPlaces>;

/// One cluster's records by place: at primary (the backups whose objects are still there), and
/// at each other location its copies there (issue 28). A record is in the primary groups while
/// it is held at primary and in a location's groups while that location holds a copy of it, in
/// the engine form it has there ([`BackupRecord::to_engine_at`]).
#[derive(Default)]
pub struct ClusterPlaces {
    pub primary: ClusterGroups,
    pub locations: BTreeMap<LocationName, ClusterGroups>,
    /// The stores the records at primary name (issue 54), each with its records: a run holds
    /// the cluster while one is not the store the fleet is given.
    pub stores: Stores,
}

/// The records by the store their objects at each place name ([`BackupRecord::store`] at
/// primary, [`sexton_model::copies::LocationCopy::store`] at a location); objects that name
/// none are not here.
#[derive(Default)]
pub struct Stores {
    by_store: BTreeMap<(Option<LocationName>, StoreRef), std::collections::BTreeSet<BackupId>>,
    of: HashMap<BackupId, Vec<(Option<LocationName>, StoreRef)>>,
}

/// The stores a record's objects name, by place.
fn stores_of(record: &BackupRecord) -> Vec<(Option<LocationName>, StoreRef)> {
    let primary = record
        .store
        .as_ref()
        .filter(|_| record.held_at_primary())
        .map(|store| (None, store.normalised()));
    let copies = record.copies.iter().filter_map(|(name, copy)| {
        let store = copy.store.as_ref().filter(|_| copy.is_held())?;
        Some((Some(name.clone()), store.normalised()))
    });
    primary.into_iter().chain(copies).collect()
}

impl Stores {
    fn apply(&mut self, id: &BackupId, record: Option<&BackupRecord>) {
        for key in self.of.remove(id).unwrap_or_default() {
            if let Some(ids) = self.by_store.get_mut(&key) {
                ids.remove(id);
                if ids.is_empty() {
                    self.by_store.remove(&key);
                }
            }
        }
        let keys = record.map(stores_of).unwrap_or_default();
        for key in &keys {
            self.by_store
                .entry(key.clone())
                .or_default()
                .insert(id.clone());
        }
        if !keys.is_empty() {
            self.of.insert(id.clone(), keys);
        }
    }

    /// The stores, by place, that objects name other than the one the place is now
    /// (`here_at`: `None` for a place this replica has no settings for, which is left alone),
    /// with how many backups name each and the first few of them.
    pub fn elsewhere<'a>(
        &self,
        here_at: impl Fn(Option<&LocationName>) -> Option<&'a StoreRef>,
    ) -> Vec<Stranded> {
        self.by_store
            .iter()
            .filter_map(|((place, store), ids)| {
                let here = here_at(place.as_ref())?;
                (!store.same_place(here)).then(|| Stranded {
                    place: place.clone(),
                    store: store.clone(),
                    here: here.clone(),
                    count: ids.len(),
                    first: ids.iter().take(3).cloned().collect(),
                })
            })
            .collect()
    }
}

/// Backups of a cluster whose objects at one place are in another store than the place's.
#[derive(Debug, Clone, PartialEq)]
pub struct Stranded {
    /// `None`: primary.
    pub place: Option<LocationName>,
    pub store: StoreRef,
    pub here: StoreRef,
    pub count: usize,
    pub first: Vec<BackupId>,
}

impl ClusterPlaces {
    /// Records at primary.
    pub fn len(&self) -> usize {
        self.primary.len()
    }

    pub fn is_empty(&self) -> bool {
        self.primary.is_empty()
    }
}

impl ViewState for ClusterPlaces {
    fn apply(
        &mut self,
        cluster: &ClusterName,
        id: BackupId,
        change: Option<Versioned<BackupRecord>>,
    ) -> anyhow::Result<()> {
        if let Some(record) = &change {
            // Retention groups records by the fields inside them; one filed under another
            // backup's key (or cluster) would be planned as something it is not.
            anyhow::ensure!(
                record.value.id == id && record.value.cluster == *cluster,
                "catalog entry {cluster}.{id} holds backup {}.{}",
                record.value.cluster,
                record.value.id
            );
        }
        let at_primary = change
            .as_ref()
            .filter(|record| record.value.held_at_primary())
            .map(|record| Form {
                plan: record.value.plan.clone(),
                engine: record.value.to_engine(),
                entry: Entry::of(record),
            });
        self.primary.apply_form(id.clone(), at_primary);
        self.stores
            .apply(&id, change.as_ref().map(|record| &record.value));
        if let Some(record) = &change {
            for location in record.value.copies.keys().chain(&record.value.copy_to) {
                self.locations.entry(location.clone()).or_default();
            }
        }
        for (location, groups) in &mut self.locations {
            let form = change.as_ref().and_then(|record| {
                let engine = record.value.to_engine_at(location)?;
                Some(Form {
                    plan: record.value.plan.clone(),
                    engine,
                    entry: Entry::at_location(record, location),
                })
            });
            groups.apply_form(id.clone(), form);
        }
        Ok(())
    }
}

/// A record's place in one place's groups: its plan, engine form there and entry.
struct Form {
    plan: PlanName,
    engine: sexton_retention::BackupRecord,
    entry: Entry,
}

/// One place's records of a cluster, by plan.
#[derive(Default)]
pub struct ClusterGroups {
    groups: Vec<GroupView>,
    /// Where each backup is: (group slot, index in the group).
    location: HashMap<BackupId, (u32, u32)>,
}

/// The records of one retention group (cluster and plan).
pub struct GroupView {
    pub plan: PlanName,
    /// Shared with the runs that planned over it; a change copies it only while such a run
    /// still holds it.
    pub members: Arc<Members>,
}

/// A group's records in the engine's form, and beside each what else a run reads of it.
#[derive(Debug, Clone, Default)]
pub struct Members {
    /// `engine.backups[i]` is the `to_engine()` of the record of `entries[i]`; the binlog
    /// segments are set by the run that evaluates it.
    pub engine: sexton_retention::Catalog,
    pub entries: Vec<Entry>,
}

/// What a run reads of a record beyond its engine form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The revision the engine form was made from: the one a run's marks are written against.
    pub revision: u64,
    /// A user's `sexton backup delete` is on the record (`delete_request`): the run carries it
    /// out as it was asked, not as the plan's own deletion.
    pub delete_request: bool,
    /// A restore test has said something of the backup (`verification`): the group's
    /// last-verified metric is kept.
    pub tested: bool,
    /// A deleter has claimed some of the backup's volumes (`volume_deletion`): a run leaves
    /// their marks alone.
    pub volume_deletion: bool,
    /// The status before a mark (`expired_from`), for judging users' requests.
    pub expired_from: Option<BackupStatus>,
    /// The bytes the backup holds: what the executor reported, else the objects intake saw.
    pub bytes: u64,
    /// When a restore test last passed at this place (issue 47): a `tested_within`
    /// objective reads the group's newest.
    pub passed_test_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Entry {
    fn of(record: &Versioned<BackupRecord>) -> Entry {
        Entry {
            revision: record.revision,
            delete_request: record.value.delete_request.is_some(),
            tested: record.value.verification.is_some(),
            volume_deletion: record.value.volume_deletion.is_some(),
            expired_from: record.value.expired_from,
            bytes: bytes_of(&record.value),
            passed_test_at: sexton_shared::recovery::passed_test_at(&record.value, None),
        }
    }

    /// The entry of a copy at a location: a user's request and a volume deletion are the
    /// source's, never a location's.
    fn at_location(record: &Versioned<BackupRecord>, location: &LocationName) -> Entry {
        Entry {
            revision: record.revision,
            delete_request: false,
            tested: record.value.verification.is_some(),
            volume_deletion: false,
            expired_from: None,
            bytes: bytes_of(&record.value),
            passed_test_at: sexton_shared::recovery::passed_test_at(&record.value, Some(location)),
        }
    }
}

fn bytes_of(record: &BackupRecord) -> u64 {
    record
        .size_bytes
        .unwrap_or_else(|| record.objects.iter().map(|o| o.size).sum())
}

impl Members {
    /// Records in the group.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The backup id of the record at `index`.
    pub fn id(&self, index: usize) -> anyhow::Result<BackupId> {
        Ok(BackupId::new(self.engine.backups[index].id.as_str())?)
    }
}

impl ClusterGroups {
    /// The groups, by plan name (the order runs have always taken them in).
    pub fn groups_mut(&mut self) -> Vec<&mut GroupView> {
        let mut groups: Vec<&mut GroupView> = self
            .groups
            .iter_mut()
            .filter(|group| !group.members.is_empty())
            .collect();
        groups.sort_by(|a, b| a.plan.cmp(&b.plan));
        groups
    }

    /// Records in the view.
    pub fn len(&self) -> usize {
        self.location.len()
    }

    pub fn is_empty(&self) -> bool {
        self.location.is_empty()
    }

    fn insert(&mut self, id: BackupId, form: Form) {
        let slot = match self.groups.iter().position(|group| group.plan == form.plan) {
            Some(slot) => slot,
            None => {
                self.groups.push(GroupView {
                    plan: form.plan.clone(),
                    members: Arc::default(),
                });
                self.groups.len() - 1
            }
        };
        let members = Arc::make_mut(&mut self.groups[slot].members);
        self.location
            .insert(id, (slot as u32, members.entries.len() as u32));
        members.engine.backups.push(form.engine);
        members.entries.push(form.entry);
    }

    fn remove_at(&mut self, slot: u32, index: u32) {
        let members = Arc::make_mut(&mut self.groups[slot as usize].members);
        let removed = members.engine.backups.swap_remove(index as usize);
        members.entries.swap_remove(index as usize);
        if let Ok(id) = BackupId::new(removed.id.as_str()) {
            self.location.remove(&id);
        }
        if let Some(moved) = members.engine.backups.get(index as usize) {
            if let Some(location) = BackupId::new(moved.id.as_str())
                .ok()
                .and_then(|id| self.location.get_mut(&id))
            {
                *location = (slot, index);
            }
        }
    }
}

impl ClusterGroups {
    /// Applies one change of the entry `<cluster>.<id>` to this place: the record's form here
    /// now, or `None` when it is no longer here (removed, or gone from this place).
    fn apply_form(&mut self, id: BackupId, change: Option<Form>) {
        let existing = self.location.get(&id).copied();
        match (existing, change) {
            (None, None) => {}
            (Some((slot, index)), None) => self.remove_at(slot, index),
            (Some((slot, index)), Some(form)) if self.groups[slot as usize].plan == form.plan => {
                let members = Arc::make_mut(&mut self.groups[slot as usize].members);
                members.engine.backups[index as usize] = form.engine;
                members.entries[index as usize] = form.entry;
            }
            (Some((slot, index)), Some(form)) => {
                self.remove_at(slot, index);
                self.insert(id, form);
            }
            (None, Some(form)) => self.insert(id, form),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn record(id: &str, plan: &str, minute: u32, revision: u64) -> Versioned<BackupRecord> {
        let value: BackupRecord = serde_json::from_value(serde_json::json!({
            "id": id, "uid": format!("u-{id}-{revision}"), "cluster": "c1", "plan": plan,
            "backup_name": "s", "kind": "full", "status": "completed",
            "completed_at": format!("2026-01-01T00:{:02}:00Z", minute % 60),
        }))
        .unwrap();
        Versioned { value, revision }
    }

    #[test]
    fn stores_follow_each_records_places_and_name_only_those_not_where_the_place_is() {
        let store = |bucket: &str| StoreRef {
            endpoint: None,
            bucket: bucket.into(),
            prefix: "b".into(),
        };
        let dr: LocationName = "dr".parse().unwrap();
        let mut places = ClusterPlaces::default();
        let cluster: ClusterName = "c1".parse().unwrap();
        let mut b1 = record("b1", "p", 1, 1);
        b1.value.store = Some(store("new"));
        let mut copy = sexton_model::copies::LocationCopy::new(
            sexton_model::copies::CopyState::Copied,
            chrono::Utc::now(),
        );
        copy.store = Some(store("dr-old"));
        b1.value.copies.insert(dr.clone(), copy);
        let mut b2 = record("b2", "p", 2, 1);
        b2.value.store = Some(store("old"));
        places
            .apply(&cluster, "b1".parse().unwrap(), Some(b1.clone()))
            .unwrap();
        places
            .apply(&cluster, "b2".parse().unwrap(), Some(b2.clone()))
            .unwrap();
        let (new, dr_new) = (store("new"), store("dr-new"));
        let here = |place: Option<&LocationName>| match place {
            None => Some(&new),
            Some(_) => Some(&dr_new),
        };
        let found: Vec<(Option<String>, String, usize)> = places
            .stores
            .elsewhere(here)
            .into_iter()
            .map(|s| (s.place.map(|p| p.to_string()), s.store.bucket, s.count))
            .collect();
        assert_eq!(
            found,
            [
                (None, "old".to_string(), 1),
                (Some("dr".to_string()), "dr-old".to_string(), 1)
            ]
        );
        // A place this replica has no settings for is left alone.
        assert_eq!(
            places
                .stores
                .elsewhere(|place| place.is_none().then_some(&new))
                .len(),
            1
        );
        // Moved (b2 now names the new store), deleted at primary, gone: nothing left.
        b2.value.store = Some(store("new"));
        places
            .apply(&cluster, "b2".parse().unwrap(), Some(b2))
            .unwrap();
        b1.value.copies.get_mut(&dr).unwrap().state = sexton_model::copies::CopyState::Deleted;
        places
            .apply(&cluster, "b1".parse().unwrap(), Some(b1))
            .unwrap();
        assert!(places.stores.elsewhere(here).is_empty());
        places.apply(&cluster, "b1".parse().unwrap(), None).unwrap();
        assert!(!places.stores.of.contains_key(&"b1".parse().unwrap()));
    }

    /// The view against a plain map of the same changes: every record once, in the group of
    /// its plan, its engine form beside it, every location right.
    fn check(view: &ClusterGroups, model: &BTreeMap<String, (String, u64)>) {
        assert_eq!(view.len(), model.len());
        let mut seen = 0;
        for (slot, group) in view.groups.iter().enumerate() {
            let members = &group.members;
            assert_eq!(members.entries.len(), members.engine.backups.len());
            for (index, (entry, engine)) in members
                .entries
                .iter()
                .zip(&members.engine.backups)
                .enumerate()
            {
                let (plan, revision) = &model[&engine.id];
                assert_eq!(group.plan.as_str(), plan);
                assert_eq!(entry.revision, *revision);
                let stored = record(&engine.id, plan, (revision % 60) as u32, *revision);
                assert_eq!(*engine, stored.value.to_engine());
                assert_eq!(*entry, Entry::of(&stored));
                let id = BackupId::new(engine.id.as_str()).unwrap();
                assert_eq!(view.location[&id], (slot as u32, index as u32));
                seen += 1;
            }
        }
        assert_eq!(seen, model.len());
    }

    #[test]
    fn changes_in_any_order_leave_the_view_equal_to_the_catalog() {
        let cluster = ClusterName::new("c1").unwrap();
        let mut view = ClusterPlaces::default();
        let mut model: BTreeMap<String, (String, u64)> = BTreeMap::new();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for revision in 1..3000u64 {
            let id = format!("b{}", next() % 40);
            let plan = ["daily", "weekly", "hourly"][(next() % 3) as usize];
            if next() % 4 == 0 {
                view.apply(&cluster, BackupId::new(id.as_str()).unwrap(), None)
                    .unwrap();
                model.remove(&id);
            } else {
                let change = record(&id, plan, (revision % 60) as u32, revision);
                view.apply(&cluster, BackupId::new(id.as_str()).unwrap(), Some(change))
                    .unwrap();
                model.insert(id, (plan.to_string(), revision));
            }
            check(&view.primary, &model);
        }
    }

    #[test]
    fn a_record_under_another_backups_key_is_refused() {
        let cluster = ClusterName::new("c1").unwrap();
        let mut view = ClusterPlaces::default();
        let refused = view.apply(
            &cluster,
            BackupId::new("b2").unwrap(),
            Some(record("b1", "daily", 0, 1)),
        );
        assert!(refused.is_err());
        let other_cluster = ClusterName::new("c2").unwrap();
        assert!(view
            .apply(
                &other_cluster,
                BackupId::new("b1").unwrap(),
                Some(record("b1", "daily", 0, 1))
            )
            .is_err());
    }

    #[test]
    fn a_copy_is_in_its_locations_groups_and_a_record_gone_from_primary_only_there() {
        let cluster = ClusterName::new("c1").unwrap();
        let dr = LocationName::new("dr").unwrap();
        let mut view = ClusterPlaces::default();
        let id = BackupId::new("b1").unwrap();
        let mut stored = record("b1", "daily", 0, 1);
        view.apply(&cluster, id.clone(), Some(stored.clone()))
            .unwrap();
        assert_eq!(view.primary.len(), 1);
        assert!(view.locations.is_empty(), "no copy yet");

        stored.revision = 2;
        stored.value.copies.insert(
            dr.clone(),
            serde_json::from_value(serde_json::json!({
                "state": "copied", "copied_at": "2026-01-01T01:00:00Z"
            }))
            .unwrap(),
        );
        view.apply(&cluster, id.clone(), Some(stored.clone()))
            .unwrap();
        assert_eq!(view.primary.len(), 1);
        let at_dr = &view.locations[&dr];
        assert_eq!(at_dr.len(), 1);
        let (slot, index) = at_dr.location[&id];
        let members = &at_dr.groups[slot as usize].members;
        assert_eq!(
            members.engine.backups[index as usize],
            stored.value.to_engine_at(&dr).unwrap()
        );
        assert_eq!(members.entries[index as usize].revision, 2);

        // The source's objects deleted, the copy stays: at dr only.
        stored.revision = 3;
        stored.value.primary_deleted_at = Some("2026-01-02T00:00:00Z".parse().unwrap());
        view.apply(&cluster, id.clone(), Some(stored.clone()))
            .unwrap();
        assert!(view.primary.is_empty());
        assert_eq!(view.locations[&dr].len(), 1);

        // The copy deleted too: the record leaves every place.
        stored.revision = 4;
        stored.value.copies.clear();
        view.apply(&cluster, id.clone(), Some(stored)).unwrap();
        assert!(view.primary.is_empty());
        assert!(view.locations[&dr].is_empty());
        view.apply(&cluster, id, None).unwrap();
        assert!(view.locations[&dr].is_empty());
    }
}
