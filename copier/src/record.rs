//! What makes a copy count: its objects seen listed at the location, then the copy (or its
//! skip) recorded on the backup's record by compare-and-set.

use std::collections::BTreeMap;

use chrono::Utc;
use sexton_model::{
    copies::{CopyState, LocationCopy},
    names::LocationName,
    records::BackupRecord,
};
use sexton_shared::{catalog::CasError, object_store::ObjectStore};

use crate::{
    outcome::Failure,
    report::{ask_retention_run, incident},
    Copier, Location,
};

/// Records that `judged`'s copy at `name` is never made (compare-and-set, over the record as
/// judged): its rule's policy there would delete it at once, for `reasons`. The source then
/// holds it no longer for that location.
pub(crate) async fn record_skip(
    copier: &Copier,
    judged: &BackupRecord,
    name: &LocationName,
    reasons: Vec<String>,
) -> Result<(), Failure> {
    let Some(entry) = copier.catalog.get(&judged.cluster, &judged.id).await? else {
        return Err(Failure::Refused(format!(
            "backup {} of {} left the catalog while its copy to {name} was judged",
            judged.id, judged.cluster
        )));
    };
    let mut record = entry.value;
    if record.uid != judged.uid || record.copies.get(name) != judged.copies.get(name) {
        return Err(Failure::Wait(format!(
            "backup {} changed while its copy to {name} was judged; judging again",
            judged.id
        )));
    }
    record.keep_mark(entry.revision);
    let mut skipped = LocationCopy::new(CopyState::Skipped, Utc::now());
    skipped.delete_reasons = reasons;
    tracing::info!(cluster = %record.cluster, backup = %record.id, location = %name, reasons = ?skipped.delete_reasons, "copy skipped: the policy there would not keep it");
    record.copies.insert(name.clone(), skipped);
    match copier.catalog.update(&record, entry.revision).await {
        Ok(_) => Ok(()),
        Err(CasError::Conflict) => Err(Failure::Wait(format!(
            "backup {} changed while its copy to {name} was judged; judging again",
            judged.id
        ))),
        Err(CasError::Other(err)) => Err(err.into()),
    }
}

/// Every object written is listed at the location with the size written: a copy counts only
/// once Sexton has seen it there, not on the strength of the store's answers to the writes.
/// One listing of the objects' common directory.
pub(crate) async fn seen_at(
    store: &ObjectStore,
    record: &BackupRecord,
    name: &LocationName,
    written: &[sexton_model::wire::ObjectDigest],
) -> Result<(), Failure> {
    let directory = common_directory(written.iter().map(|o| o.key.as_str()));
    let listed: BTreeMap<String, i64> = store
        .list(&directory)
        .await
        .map_err(|err| Failure::Wait(err.to_string()))?
        .into_iter()
        .map(|info| (info.key, info.size))
        .collect();
    for object in written {
        if listed.get(&object.key) != Some(&(object.size as i64)) {
            return Err(Failure::Bad(incident(
                &record.cluster,
                &record.id,
                "copy-not-seen",
                format!(
                    "backup {} at {name}: {} was written ({} bytes) but is not listed there with \
                     that size; the copy does not count",
                    record.id, object.key, object.size
                ),
            )));
        }
    }
    Ok(())
}

/// The longest directory (ending in `/`, or empty) that holds every key.
fn common_directory<'a>(mut keys: impl Iterator<Item = &'a str>) -> String {
    let Some(first) = keys.next() else {
        return String::new();
    };
    let mut common = first;
    for key in keys {
        let mut shared = common
            .bytes()
            .zip(key.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        while !common.is_char_boundary(shared) {
            shared -= 1;
        }
        common = &common[..shared];
    }
    match common.rfind('/') {
        Some(end) => common[..=end].to_string(),
        None => String::new(),
    }
}

/// Records the copy on the backup's record (compare-and-set), unless the record is gone or is
/// another backup now: then the objects written stay at the location uncounted, and say so.
pub(crate) async fn record_copy(
    copier: &Copier,
    copied: &BackupRecord,
    (name, location): (&LocationName, &Location),
    objects: Vec<sexton_model::wire::ObjectDigest>,
    class: Option<&str>,
) -> Result<(), Failure> {
    for _ in 0..16 {
        let Some(entry) = copier.catalog.get(&copied.cluster, &copied.id).await? else {
            return Err(Failure::Refused(format!(
                "backup {} of {} left the catalog while it was copied to {name}; its objects \
                 there are not counted",
                copied.id, copied.cluster
            )));
        };
        let mut record = entry.value;
        if record.uid != copied.uid {
            return Err(Failure::Refused(format!(
                "backup {} of {} was replaced while it was copied to {name}",
                copied.id, copied.cluster
            )));
        }
        if record
            .copies
            .get(name)
            .is_some_and(|copy| copy.is_held() && copy.state != CopyState::Missing)
        {
            return Ok(());
        }
        // A copy deleted at the location since this one began (another copier's, deleted by
        // the location's retention) may have taken objects this one wrote: nothing is
        // counted that was not seen after that, so the copy is made again.
        if record.copies.get(name) != copied.copies.get(name) {
            return Err(Failure::Wait(format!(
                "the copy of backup {} at {name} changed while it was copied; copying again",
                copied.id
            )));
        }
        record.keep_mark(entry.revision);
        let mut copy = LocationCopy::new(CopyState::Copied, Utc::now());
        copy.store = Some(location.store.place().clone());
        copy.objects = objects.clone();
        copy.storage_class = class.map(str::to_string);
        record.copies.insert(name.clone(), copy);
        match copier.catalog.update(&record, entry.revision).await {
            Ok(revision) => {
                if copier.locations.get(name).is_some_and(|l| l.locked) {
                    let message_id =
                        format!("copied-{}-{}-{name}-{revision}", copied.cluster, copied.id);
                    ask_retention_run(copier, &copied.cluster, name, &message_id).await;
                }
                return Ok(());
            }
            Err(CasError::Conflict) => continue,
            Err(CasError::Other(err)) => return Err(err.into()),
        }
    }
    Err(Failure::Wait("the record kept changing".into()))
}

#[cfg(test)]
mod tests {
    use super::common_directory;

    #[test]
    fn the_common_directory_ends_at_a_slash() {
        let keys = ["dr/c1/db/b1/backup.xbstream", "dr/c1/db/b1/metadata.json"];
        assert_eq!(common_directory(keys.into_iter()), "dr/c1/db/b1/");
        let keys = ["dr/c1/db/b1/vol-a/x", "dr/c1/db/b1/vol-b/y"];
        assert_eq!(common_directory(keys.into_iter()), "dr/c1/db/b1/");
        assert_eq!(common_directory(["dr/c1/db/b1"].into_iter()), "dr/c1/db/");
        assert_eq!(common_directory(["a", "b"].into_iter()), "");
        // Keys that part inside a character part before it.
        assert_eq!(common_directory(["d/\u{e9}", "d/\u{e8}"].into_iter()), "d/");
        assert_eq!(common_directory(std::iter::empty()), "");
    }
}
