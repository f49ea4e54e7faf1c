//! `catalog.stranded` and `catalog.adopt` (issue 54): backups recorded in another store than
//! the one the fleet is given (a bucket, prefix or endpoint that changed under the fleet), and
//! moving their records once their objects are in the fleet's store.
//!
//! `sexton catalog migrate` asks `catalog.stranded` for them, copies their objects (checked
//! against intake's SHA-256 as they are written) and the cluster's binlog archive, then asks
//! `catalog.adopt`. Adopting checks each object in the fleet's store: there, at the version
//! claimed, with the size intake recorded; the keys must be the record's own keys under the
//! fleet's prefix, every one of them and no other. Only then does the record name the fleet's
//! store, with the versions written there and no lock date (the next retention run locks it
//! there). A record that changed meanwhile, or names another store than the one claimed, is
//! left as it was.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use serde_json::Value;
use sexton_model::{
    copies::destination_key, keys::StoreRef, names::LocationName, records::BackupRecord,
    wire::ObjectDigest,
};
use sexton_shared::{
    api::{
        AdoptRefusal, AdoptReport, AdoptRequest, Adopted, ApiError, ErrorCode, Stranded,
        StrandedGroup, StrandedRequest,
    },
    catalog::{CasError, Versioned},
};

use crate::api::{invalid, unavailable, Api};

impl Api {
    /// The place's store (`None`: primary) and its client; a location this fleet lacks is
    /// refused.
    fn place_client(
        &self,
        location: Option<&LocationName>,
    ) -> Result<&sexton_shared::object_store::ObjectStore, ApiError> {
        match location {
            None => Ok(&self.store),
            Some(name) => {
                self.check_location(name)?;
                self.locations.get(name).ok_or_else(|| {
                    unavailable(format!("location {name} has no client in this scheduler"))
                })
            }
        }
    }

    pub(in crate::api) async fn catalog_stranded(
        &self,
        req: StrandedRequest,
    ) -> Result<Value, ApiError> {
        let place = req.location.as_ref().filter(|l| !l.is_primary());
        let here = self.place_client(place)?.place().clone();
        let records = match &req.cluster {
            Some(cluster) => self.catalog.list_cluster(cluster).await,
            None => self.catalog.list_all().await,
        }
        .map_err(unavailable)?;
        let answer = Stranded {
            groups: stranded_groups(&here, place, records.into_iter().map(|r| r.value)),
            here,
        };
        serde_json::to_value(answer).map_err(invalid)
    }

    pub(in crate::api) async fn catalog_adopt(&self, req: AdoptRequest) -> Result<Value, ApiError> {
        let place = req.location.as_ref().filter(|l| !l.is_primary());
        let client = self.place_client(place)?;
        let here = client.place().clone();
        if req.from.same_place(&here) {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                format!(
                    "from names the store {} is now ({here}): nothing to move",
                    place.map_or("primary", |p| p.as_str())
                ),
            ));
        }
        let mut seen = BTreeSet::new();
        if let Some(twice) = req.backups.iter().find(|b| !seen.insert(&b.id)) {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                format!("backup {} is named twice", twice.id),
            ));
        }
        let mut report = AdoptReport {
            cluster: req.cluster.to_string(),
            ..AdoptReport::default()
        };
        for adopted in &req.backups {
            match self.adopt_one(&req, place, client, adopted).await? {
                Ok(()) => report.adopted.push(adopted.id.to_string()),
                Err(reason) => report.refused.push(AdoptRefusal {
                    id: adopted.id.to_string(),
                    reason,
                }),
            }
        }
        if !report.adopted.is_empty() {
            tracing::info!(cluster = %req.cluster, from = %req.from, adopted = report.adopted.len(), refused = report.refused.len(), "records moved to their place's store");
            // A run now, not at the next sweep: the cluster's hold may be over, and what moved
            // is locked there.
            self.ask_retention_run(
                &req.cluster,
                &format!("adopt:{}:{}", req.cluster, uuid::Uuid::new_v4().simple()),
            )
            .await?;
        }
        serde_json::to_value(report).map_err(invalid)
    }

    /// Adopts one backup: `Ok(Err(why))` when it is left as it was.
    async fn adopt_one(
        &self,
        req: &AdoptRequest,
        place: Option<&LocationName>,
        client: &sexton_shared::object_store::ObjectStore,
        adopted: &Adopted,
    ) -> Result<Result<(), String>, ApiError> {
        let Some(entry) = self
            .catalog
            .get(&req.cluster, &adopted.id)
            .await
            .map_err(unavailable)?
        else {
            return Ok(Err("not in the catalog".into()));
        };
        let (moved, objects) =
            match adopted_record(&entry, adopted, place, &req.from, client.place()) {
                Ok(moved) => moved,
                Err(why) => return Ok(Err(why)),
            };
        // Each object there, at the version claimed, with the size intake recorded.
        for object in &objects {
            match client
                .head_at(&object.key, object.version_id.as_deref())
                .await
            {
                Ok(Some((size, _))) if size == object.size => {}
                Ok(Some((size, _))) => {
                    return Ok(Err(format!(
                        "{} holds {size} bytes in {}, not the {} recorded",
                        object.key,
                        client.place(),
                        object.size
                    )))
                }
                Ok(None) => {
                    return Ok(Err(format!(
                        "{}{} is not in {}",
                        object.key,
                        object
                            .version_id
                            .as_deref()
                            .map(|v| format!(" (version {v})"))
                            .unwrap_or_default(),
                        client.place()
                    )))
                }
                Err(err) => return Err(unavailable(err)),
            }
        }
        match self.catalog.update(&moved, entry.revision).await {
            Ok(_) => Ok(Ok(())),
            Err(CasError::Conflict) => Ok(Err(
                "the record changed while it was checked: run the migration again".into(),
            )),
            Err(err) => Err(unavailable(err)),
        }
    }
}

/// The records whose objects at `place` (`None`: primary) name another store than `here`, by
/// cluster and store. Pure.
pub fn stranded_groups(
    here: &StoreRef,
    place: Option<&LocationName>,
    records: impl IntoIterator<Item = BackupRecord>,
) -> Vec<StrandedGroup> {
    let mut groups: BTreeMap<(String, StoreRef), (StoreRef, Vec<BackupRecord>)> = BTreeMap::new();
    for record in records {
        if let Some(store) = record.stranded_at(place, here).cloned() {
            let key = (record.cluster.to_string(), store.normalised());
            groups
                .entry(key)
                .or_insert_with(|| (store, Vec::new()))
                .1
                .push(record);
        }
    }
    groups
        .into_values()
        .map(|(store, mut backups)| {
            backups.sort_by(|a, b| a.id.cmp(&b.id));
            StrandedGroup {
                cluster: backups[0].cluster.clone(),
                store,
                backups,
            }
        })
        .collect()
}

/// The record as it reads once `adopted` is true, and the objects to look at first: its
/// objects at `place` (`None`: primary) in `here`, their keys moved from `from`'s prefix to
/// `here`'s, each with the version claimed and the size and SHA-256 recorded, locked nowhere
/// yet (at primary also seen now). `Err` when the claim is not this record's. Pure.
pub fn adopted_record(
    entry: &Versioned<BackupRecord>,
    adopted: &Adopted,
    place: Option<&LocationName>,
    from: &StoreRef,
    here: &StoreRef,
) -> Result<(BackupRecord, Vec<ObjectDigest>), String> {
    let record = &entry.value;
    if record.uid != adopted.uid {
        return Err(format!(
            "its uid is {}, not {}: another backup of that id",
            record.uid, adopted.uid
        ));
    }
    match record.stranded_at(place, here) {
        Some(store) if store.same_place(from) => {}
        Some(store) => return Err(format!("it is recorded in {store}, not in {from}")),
        None => return Err(format!("it is not recorded in another store than {here}")),
    }
    let moved_key = |key: &str| {
        destination_key(&from.prefix, &here.prefix, key)
            .ok_or_else(|| format!("{key} is not under the prefix {:?}", from.prefix))
    };
    // The keys at the place, and what was recorded of each there.
    let (keys, recorded): (Vec<String>, &[ObjectDigest]) = match place {
        None => (record.all_keys(), &record.objects),
        Some(name) => {
            let copy = &record.copies[name];
            (
                copy.objects.iter().map(|o| o.key.clone()).collect(),
                &copy.objects,
            )
        }
    };
    let keys = keys
        .iter()
        .map(|key| moved_key(key))
        .collect::<Result<BTreeSet<String>, String>>()?;
    let claimed: BTreeMap<&str, &ObjectDigest> = adopted
        .objects
        .iter()
        .map(|o| (o.key.as_str(), o))
        .collect();
    if claimed.len() != adopted.objects.len() {
        return Err("an object is named twice".into());
    }
    let claimed_keys: BTreeSet<String> = claimed.keys().map(|k| k.to_string()).collect();
    if claimed_keys != keys {
        let lacking: Vec<&String> = keys.difference(&claimed_keys).collect();
        let other: Vec<&String> = claimed_keys.difference(&keys).collect();
        return Err(format!(
            "the objects named are not the backup's: lacking {lacking:?}, not its own {other:?}"
        ));
    }
    // Sizes and digests are the record's; only keys and versions come from the claim. A record
    // without digests (written before intake kept them) takes the claimed size, checked there.
    let recorded: BTreeMap<String, &ObjectDigest> = recorded
        .iter()
        .filter_map(|o| Some((moved_key(&o.key).ok()?, o)))
        .collect();
    let objects: Vec<ObjectDigest> = claimed_keys
        .iter()
        .map(|key| {
            let claim = claimed[key.as_str()];
            match recorded.get(key) {
                Some(seen) => ObjectDigest {
                    key: key.clone(),
                    size: seen.size,
                    sha256: seen.sha256.clone(),
                    version_id: claim.version_id.clone(),
                },
                None => ObjectDigest {
                    key: key.clone(),
                    size: claim.size,
                    sha256: None,
                    version_id: claim.version_id.clone(),
                },
            }
        })
        .collect();
    let mut moved = record.clone();
    match place {
        None => {
            moved.artifacts = record
                .artifacts
                .iter()
                .map(|key| moved_key(key))
                .collect::<Result<_, _>>()?;
            for volume in &mut moved.volumes {
                volume.keys = volume
                    .keys
                    .iter()
                    .map(|key| moved_key(key))
                    .collect::<Result<_, _>>()?;
            }
            moved.objects = objects.clone();
            moved.store = Some(here.clone());
            moved.seen_at = Some(Utc::now());
            // Locks were set on the objects in the other store; none is set here yet.
            moved.locked_until = None;
        }
        Some(name) => {
            let copy = moved.copies.get_mut(name).expect("stranded_at found it");
            copy.objects = objects.clone();
            copy.store = Some(here.clone());
            copy.locked_until = None;
        }
    }
    Ok((moved, objects))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(bucket: &str, prefix: &str) -> StoreRef {
        StoreRef {
            endpoint: Some("http://127.0.0.1:8333".into()),
            bucket: bucket.into(),
            prefix: prefix.into(),
        }
    }

    fn record(id: &str, at: Option<StoreRef>) -> Versioned<BackupRecord> {
        let mut value: BackupRecord = serde_json::from_value(serde_json::json!({
            "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p",
            "backup_name": "s", "kind": "full", "status": "completed",
            "artifacts": [format!("old/c1/s/{id}/data"), format!("old/c1/s/{id}/metadata.json")],
            "objects": [
                {"key": format!("old/c1/s/{id}/data"), "size": 3, "sha256": "aa", "version_id": "v1"},
                {"key": format!("old/c1/s/{id}/metadata.json"), "size": 5, "sha256": "bb"},
            ],
            "locked_until": "2027-01-01T00:00:00Z",
        }))
        .unwrap();
        value.store = at;
        Versioned { value, revision: 7 }
    }

    fn claim(id: &str, keys: &[&str]) -> Adopted {
        Adopted {
            id: id.parse().unwrap(),
            uid: format!("u-{id}"),
            objects: keys
                .iter()
                .map(|key| ObjectDigest {
                    key: key.to_string(),
                    size: 999,
                    sha256: Some("ff".into()),
                    version_id: Some(format!("new-{key}")),
                })
                .collect(),
        }
    }

    #[test]
    fn a_record_moves_with_its_keys_under_the_new_prefix_and_intakes_digests() {
        let from = store("a", "old");
        let here = store("b", "new");
        let entry = record("b1", Some(from.clone()));
        let adopted = claim("b1", &["new/c1/s/b1/data", "new/c1/s/b1/metadata.json"]);
        let moved = adopted_record(&entry, &adopted, None, &from, &here)
            .unwrap()
            .0;
        assert_eq!(moved.store, Some(here.clone()));
        assert_eq!(
            moved.artifacts,
            ["new/c1/s/b1/data", "new/c1/s/b1/metadata.json"]
        );
        let data = &moved.objects[0];
        assert_eq!(
            (data.key.as_str(), data.size, data.sha256.as_deref()),
            ("new/c1/s/b1/data", 3, Some("aa")),
            "size and digest are intake's, not the claim's"
        );
        assert_eq!(data.version_id.as_deref(), Some("new-new/c1/s/b1/data"));
        assert_eq!(
            moved.locked_until, None,
            "locks of the other store do not count here"
        );
        assert!(moved.stranded_from(&here).is_none());
    }

    #[test]
    fn claims_that_are_not_the_records_own_are_refused() {
        let from = store("a", "old");
        let here = store("b", "new");
        let entry = record("b1", Some(from.clone()));
        let both = ["new/c1/s/b1/data", "new/c1/s/b1/metadata.json"];
        // One object short, one too many, another backup's key, a key named twice.
        for keys in [
            &both[..1],
            &[both[0], both[1], "new/c1/s/b2/data"][..],
            &["new/c1/s/b2/data", both[1]][..],
            &[both[0], both[0], both[1]][..],
        ] {
            let why = adopted_record(&entry, &claim("b1", keys), None, &from, &here).unwrap_err();
            assert!(
                why.contains("not the backup's") || why.contains("named twice"),
                "{keys:?}: {why}"
            );
        }
        // Another uid; another store than the one claimed; a record already here, or one
        // that names no store (written before records named theirs: where the fleet reads).
        let mut other = claim("b1", &both);
        other.uid = "u-x".into();
        assert!(adopted_record(&entry, &other, None, &from, &here)
            .unwrap_err()
            .contains("another backup of that id"));
        let elsewhere = store("c", "old");
        assert!(
            adopted_record(&entry, &claim("b1", &both), None, &elsewhere, &here)
                .unwrap_err()
                .contains("recorded in bucket a")
        );
        for at in [Some(here.clone()), None] {
            let entry = record("b1", at);
            assert!(
                adopted_record(&entry, &claim("b1", &both), None, &from, &here)
                    .unwrap_err()
                    .contains("not recorded in another store")
            );
        }
        // A key outside the old prefix cannot be moved.
        let mut odd = record("b1", Some(from.clone()));
        odd.value.artifacts.push("elsewhere/x".into());
        assert!(
            adopted_record(&odd, &claim("b1", &both), None, &from, &here)
                .unwrap_err()
                .contains("not under the prefix")
        );
    }

    #[test]
    fn a_copy_at_a_location_moves_there_and_the_record_at_primary_stays_as_it_was() {
        let dr: LocationName = "dr".parse().unwrap();
        let (from, here) = (store("dr-old", "old"), store("dr-new", "dr"));
        let mut entry = record("b1", None);
        let mut copy = sexton_model::copies::LocationCopy::new(
            sexton_model::copies::CopyState::Copied,
            Utc::now(),
        );
        copy.objects = entry.value.objects.clone();
        copy.store = Some(from.clone());
        copy.locked_until = Some(Utc::now());
        entry.value.copies.insert(dr.clone(), copy);
        let keys = ["dr/c1/s/b1/data", "dr/c1/s/b1/metadata.json"];
        let (moved, objects) =
            adopted_record(&entry, &claim("b1", &keys), Some(&dr), &from, &here).unwrap();
        let copy = &moved.copies[&dr];
        assert_eq!(copy.store, Some(here.clone()));
        assert_eq!(copy.locked_until, None);
        assert_eq!(objects, copy.objects);
        assert_eq!(
            (copy.objects[0].key.as_str(), copy.objects[0].size),
            ("dr/c1/s/b1/data", 3)
        );
        assert_eq!(
            moved.artifacts, entry.value.artifacts,
            "primary is not touched"
        );
        assert_eq!(moved.store, entry.value.store);
        // At primary, the same record is where the fleet reads: nothing to adopt there.
        let primary = store("b", "old");
        assert!(adopted_record(&entry, &claim("b1", &keys), None, &from, &primary).is_err());
        // A copy the location no longer holds is nowhere.
        entry.value.copies.get_mut(&dr).unwrap().state = sexton_model::copies::CopyState::Deleted;
        assert!(
            adopted_record(&entry, &claim("b1", &keys), Some(&dr), &from, &here)
                .unwrap_err()
                .contains("not recorded in another store")
        );
    }

    #[test]
    fn stranded_records_are_grouped_by_cluster_and_store() {
        let here = store("b", "new");
        let records = [
            record("b2", Some(store("a", "old"))),
            record("b1", Some(store("a", "old/"))),
            record("b3", Some(here.clone())),
            record("b4", None),
            record("b5", Some(store("z", "old"))),
        ];
        let groups = stranded_groups(&here, None, records.iter().map(|r| r.value.clone()));
        let summary: Vec<(String, Vec<String>)> = groups
            .iter()
            .map(|g| {
                (
                    g.store.bucket.clone(),
                    g.backups.iter().map(|b| b.id.to_string()).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("a".to_string(), vec!["b1".to_string(), "b2".to_string()]),
                ("z".to_string(), vec!["b5".to_string()]),
            ]
        );
    }
}
