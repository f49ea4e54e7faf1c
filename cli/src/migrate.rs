//! `sexton catalog migrate` (issue 54): the backups recorded in another store than the fleet's
//! (a bucket, prefix or endpoint it was given before) moved into the fleet's own, so that they
//! stay restorable, are locked there and age out under their policy.
//!
//! 1. The scheduler names them (`catalog.stranded`): the records at primary whose store is the
//!    one given here, by cluster.
//! 2. For each cluster, with the CLI's own S3 settings (the fleet's store; the old one with the
//!    same credentials): each object of each backup is copied to its key under the fleet's
//!    prefix, read at the version intake recorded and checked against intake's size and
//!    SHA-256 as it is written ([`ObjectStore::copy_object_to`], the copier's machinery). An
//!    object already there with the recorded size and digest (an earlier run, or the
//!    operator's own `aws s3 sync`) is not copied again.
//! 3. The cluster's binlog archive: each segment the old index lists and the fleet's does not
//!    is copied (checked against the size and digest `binlog append` recorded), then listed
//!    in the fleet's index **before** what is there ([`BinlogIndex::apply_migrated`]), by a
//!    conditional write. Before the records move, so a restore never finds a backup without
//!    its log.
//! 4. The records move (`catalog.adopt`), in batches: the scheduler checks each object in the
//!    fleet's store first. The next retention run (asked for at once) locks them there.
//!
//! Nothing is deleted anywhere: the old store keeps its objects until its owner removes it.
//! Running it again finishes what a run stopped halfway left.

use std::collections::BTreeMap;

use serde::Serialize;
use sexton_model::{
    copies::destination_key,
    keys::StoreRef,
    names::{ClusterName, LocationName},
    records::BackupRecord,
    wire::{ObjectDigest, SCHEMA_VERSION},
};
use sexton_shared::{
    api::{AdoptReport, AdoptRequest, Adopted, Stranded, StrandedGroup, StrandedRequest},
    binlog::{self, segment_digest, store as index_store},
    config::{Config, S3Config},
    object_store::{transfer::UploadSettings, ObjectStore},
    topology,
};

use crate::client::Client;
use crate::failure::Failure;
use crate::output::Output;

/// The store the backups were recorded in, as given on the command line: what is not given is
/// the fleet's.
pub struct From<'a> {
    pub bucket: &'a str,
    pub prefix: Option<&'a str>,
    pub endpoint: Option<&'a str>,
}

/// How many backups one `catalog.adopt` request carries: each object is looked at in the
/// store before the answer, which must come within the API's 15 s.
const ADOPT_BATCH: usize = 25;

/// What a migration did (or, dry, would do) for one cluster.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Moved {
    pub cluster: String,
    pub backups: usize,
    /// Objects copied, and their bytes.
    pub copied: usize,
    pub bytes: u64,
    /// Objects found in the fleet's store already, whole.
    pub already_there: usize,
    /// Binlog segments copied and listed in the fleet's index.
    pub segments: usize,
    pub moved: usize,
    /// Backups not moved, each with why.
    pub refused: Vec<String>,
}

/// The old store's settings: the fleet's, with what the command line gives instead.
pub fn from_settings(fleet: &S3Config, from: &From<'_>) -> Result<S3Config, Failure> {
    let mut s3 = fleet.clone();
    s3.bucket = from.bucket.to_string();
    if s3.bucket.is_empty() {
        return Err(Failure::input("--from-bucket: empty"));
    }
    if let Some(prefix) = from.prefix {
        if prefix.split('/').any(|part| part == "..") || prefix.starts_with('/') {
            return Err(Failure::input(format!(
                "--from-prefix {prefix:?}: a prefix is relative and never climbs (..)"
            )));
        }
        s3.prefix = prefix.trim_matches('/').to_string();
    }
    if let Some(endpoint) = from.endpoint {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(Failure::input(format!(
                "--from-endpoint {endpoint:?}: an http:// or https:// URL"
            )));
        }
        s3.endpoint = Some(endpoint.to_string());
    }
    // The old store is read, never locked or written.
    s3.lock = None;
    Ok(s3)
}

pub async fn migrate(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    from: From<'_>,
    cluster: Option<&str>,
    location: Option<&str>,
    dry_run: bool,
) -> Result<(), Failure> {
    let cluster = cluster
        .map(|name| {
            ClusterName::new(name).map_err(|err| Failure::input(format!("--cluster: {err}")))
        })
        .transpose()?;
    let location = location
        .filter(|name| *name != "primary")
        .map(|name| {
            LocationName::new(name).map_err(|err| Failure::input(format!("--location: {err}")))
        })
        .transpose()?;
    let config = load_config()?;
    // The place's settings: the fleet's `[s3]`, or the location's.
    let place_s3 = match &location {
        None => &config.s3,
        Some(name) => {
            &config
                .locations
                .get(name.as_str())
                .ok_or_else(|| {
                    Failure::input(format!(
                        "--location {name}: no such location in the configuration; it has {}",
                        config.location_names()
                    ))
                })?
                .s3
        }
    };
    let place = location
        .as_ref()
        .map_or("primary", |l| l.as_str())
        .to_string();
    let old_s3 = from_settings(place_s3, &from)?;
    let there = old_s3.place();
    let target = ObjectStore::connect(place_s3)
        .await
        .map_err(Failure::runtime)?;
    if there.same_place(target.place()) {
        return Err(Failure::input(format!(
            "--from-bucket {}: that is the store the CLI writes to for {place} ({}); name the \
             store the backups were recorded in",
            from.bucket,
            target.place()
        )));
    }
    let client = Client::connect(&config).await?;
    let stranded: Stranded = client
        .call_as(
            &topology::api_subject("catalog", "stranded"),
            &StrandedRequest {
                schema_version: SCHEMA_VERSION,
                cluster: cluster.clone(),
                location: location.clone(),
            },
        )
        .await?;
    if !stranded.here.same_place(target.place()) {
        return Err(Failure::input(format!(
            "{place} is {} for the fleet, and the CLI's settings name {}: give the CLI the \
             fleet's settings (SEXTON_S3_*, SEXTON_LOCATION_<NAME>_* or SEXTON_CONFIG), it \
             copies into that store",
            stranded.here,
            target.place()
        )));
    }
    let (groups, others): (Vec<StrandedGroup>, Vec<StrandedGroup>) = stranded
        .groups
        .into_iter()
        .partition(|group| group.store.same_place(&there));
    for group in &others {
        eprintln!(
            "note: {} backups of {} are recorded in {}, not in {there}: another migration moves them",
            group.backups.len(),
            group.cluster,
            group.store
        );
    }
    if groups.is_empty() {
        eprintln!("no backup is recorded in {there}: nothing to move");
        return print(output, &[]);
    }
    let source = ObjectStore::connect(&old_s3)
        .await
        .map_err(Failure::runtime)?;
    let settings = UploadSettings {
        part_size: config.copier.part_size,
        concurrency: config.copier.parts_in_flight,
    };
    let mut report = Vec::new();
    for group in &groups {
        let moved = migrate_cluster(
            &client,
            (&source, &target),
            location.as_ref(),
            group,
            settings,
            dry_run,
        )
        .await
        .map_err(|err| {
            Failure::runtime(err.context(format!(
                "moving {}'s backups from {there} to {}",
                group.cluster,
                target.place()
            )))
        })?;
        report.push(moved);
    }
    print(output, &report)?;
    let refused: usize = report.iter().map(|m| m.refused.len()).sum();
    if refused > 0 {
        return Err(Failure::runtime(anyhow::anyhow!(
            "{refused} backups were not moved (above, with why); their clusters' retention stays held"
        )));
    }
    Ok(())
}

async fn migrate_cluster(
    client: &Client,
    (source, target): (&ObjectStore, &ObjectStore),
    location: Option<&LocationName>,
    group: &StrandedGroup,
    settings: UploadSettings,
    dry_run: bool,
) -> anyhow::Result<Moved> {
    let mut moved = Moved {
        cluster: group.cluster.to_string(),
        backups: group.backups.len(),
        ..Moved::default()
    };
    let (from, here) = (source.place(), target.place());
    let mut adopted = Vec::new();
    for record in &group.backups {
        let mut objects = Vec::new();
        for expected in recorded_objects(source, record, location).await? {
            let key = moved_key(from, here, &expected.key)?;
            if let Some(version) = whole_there(target, &key, &expected).await? {
                moved.already_there += 1;
                objects.push(ObjectDigest {
                    key,
                    version_id: version,
                    ..expected
                });
                continue;
            }
            moved.copied += 1;
            moved.bytes += expected.size;
            if dry_run {
                continue;
            }
            let written = source
                .copy_object_to(&expected, target, &key, settings, None)
                .await
                .map_err(|err| anyhow::anyhow!("backup {}: {err}", record.id))?;
            objects.push(written);
        }
        adopted.push(Adopted {
            id: record.id.clone(),
            uid: record.uid.clone(),
            objects,
        });
    }
    moved.segments = migrate_archive(source, target, &group.cluster, settings, dry_run).await?;
    if dry_run {
        return Ok(moved);
    }
    for batch in adopted.chunks(ADOPT_BATCH) {
        let answer: AdoptReport = client
            .call_as(
                &topology::api_subject("catalog", "adopt"),
                &AdoptRequest {
                    schema_version: SCHEMA_VERSION,
                    cluster: group.cluster.clone(),
                    location: location.cloned(),
                    from: group.store.clone(),
                    backups: batch.to_vec(),
                },
            )
            .await
            .map_err(|failure| anyhow::anyhow!("{}", failure.message))?;
        moved.moved += answer.adopted.len();
        moved.refused.extend(
            answer
                .refused
                .into_iter()
                .map(|r| format!("{}: {}", r.id, r.reason)),
        );
    }
    Ok(moved)
}

/// Each object of `record` at `location` (`None`: primary) as recorded there (size, SHA-256,
/// the version written): at a location, its copy's objects; at primary, intake's, and a record
/// from before intake kept digests names its keys only, the old store giving their sizes.
async fn recorded_objects(
    source: &ObjectStore,
    record: &BackupRecord,
    location: Option<&LocationName>,
) -> anyhow::Result<Vec<ObjectDigest>> {
    if let Some(name) = location {
        return Ok(record
            .copies
            .get(name)
            .map(|copy| copy.objects.clone())
            .unwrap_or_default());
    }
    let recorded: BTreeMap<&str, &ObjectDigest> =
        record.objects.iter().map(|o| (o.key.as_str(), o)).collect();
    let mut out = Vec::new();
    for key in record.all_keys() {
        match recorded.get(key.as_str()) {
            Some(object) => out.push((*object).clone()),
            None => match source.head_at(&key, None).await? {
                Some((size, _)) => out.push(ObjectDigest {
                    key,
                    size,
                    sha256: None,
                    version_id: None,
                }),
                None => anyhow::bail!(
                    "backup {}: {key} is in neither its record's digests nor the old store",
                    record.id
                ),
            },
        }
    }
    Ok(out)
}

fn moved_key(from: &StoreRef, here: &StoreRef, key: &str) -> anyhow::Result<String> {
    destination_key(&from.prefix, &here.prefix, key)
        .ok_or_else(|| anyhow::anyhow!("{key} is not under the old prefix {:?}", from.prefix))
}

/// `Some(version)` when the fleet's store holds `key` whole already: the recorded size and,
/// where intake recorded one, the SHA-256 (read back in full).
async fn whole_there(
    target: &ObjectStore,
    key: &str,
    expected: &ObjectDigest,
) -> anyhow::Result<Option<Option<String>>> {
    let Some((size, version)) = target.head_at(key, None).await? else {
        return Ok(None);
    };
    if size != expected.size {
        return Ok(None);
    }
    if let Some(sha256) = &expected.sha256 {
        match target.digest_at(key, version.as_deref()).await? {
            Some((_, found)) if found.eq_ignore_ascii_case(sha256) => {}
            _ => return Ok(None),
        }
    }
    Ok(Some(version))
}

/// Copies the segments of `cluster`'s archive in the old store that the fleet's index does not
/// list, then lists them there before the rest. Returns how many (to copy, when dry).
async fn migrate_archive(
    source: &ObjectStore,
    target: &ObjectStore,
    cluster: &ClusterName,
    settings: UploadSettings,
    dry_run: bool,
) -> anyhow::Result<usize> {
    let (from, here) = (source.place(), target.place());
    let old_folder = binlog::binlog_prefix(&from.prefix, cluster);
    let old = index_store::read(
        source,
        &binlog::index_key(&from.prefix, cluster),
        &old_folder,
    )
    .await
    .map_err(|err| anyhow::anyhow!("the old binlog index: {err}"))?;
    if old.index.segments.is_empty() {
        return Ok(0);
    }
    let folder = binlog::binlog_prefix(&here.prefix, cluster);
    let index_key = binlog::index_key(&here.prefix, cluster);
    let current = index_store::read(target, &index_key, &folder)
        .await
        .map_err(|err| anyhow::anyhow!("the fleet's binlog index: {err}"))?;
    let listed: BTreeMap<String, u64> = source
        .list(&old_folder)
        .await?
        .into_iter()
        .filter_map(|info| Some((info.key, u64::try_from(info.size).ok()?)))
        .collect();
    let mut copied = Vec::new();
    for segment in &old.index.segments {
        let key = moved_key(from, here, &segment.key)?;
        if current.index.contains(&key) {
            continue;
        }
        let (size, sha256) = segment_digest(segment);
        let Some(size) = size.or_else(|| listed.get(&segment.key).copied()) else {
            anyhow::bail!(
                "binlog segment {} is in the old index but not in the old store",
                segment.key
            );
        };
        let expected = ObjectDigest {
            key: segment.key.clone(),
            size,
            sha256,
            version_id: None,
        };
        if !dry_run && whole_there(target, &key, &expected).await?.is_none() {
            source
                .copy_object_to(&expected, target, &key, settings, None)
                .await
                .map_err(|err| anyhow::anyhow!("binlog segment {}: {err}", segment.key))?;
        }
        let mut moved = segment.clone();
        moved.key = key;
        copied.push(moved);
    }
    if !dry_run && !copied.is_empty() {
        index_store::update(target, &index_key, &folder, |index| {
            index.apply_migrated(&copied) > 0
        })
        .await
        .map_err(|err| anyhow::anyhow!("writing the fleet's binlog index: {err}"))?;
    }
    Ok(copied.len())
}

fn print(output: Output, report: &[Moved]) -> Result<(), Failure> {
    let value = serde_json::to_value(report).map_err(|err| Failure::runtime(err.into()))?;
    match output {
        Output::Json | Output::Yaml => crate::output::document(output, &value),
        _ => {
            let rows: Vec<Vec<String>> = report
                .iter()
                .map(|m| {
                    vec![
                        m.cluster.clone(),
                        m.backups.to_string(),
                        m.copied.to_string(),
                        crate::output::size(m.bytes),
                        m.already_there.to_string(),
                        m.segments.to_string(),
                        m.moved.to_string(),
                        m.refused.len().to_string(),
                    ]
                })
                .collect();
            let header: Vec<String> = [
                "CLUSTER",
                "BACKUPS",
                "COPIED",
                "BYTES",
                "ALREADY THERE",
                "SEGMENTS",
                "MOVED",
                "REFUSED",
            ]
            .map(String::from)
            .to_vec();
            crate::output::table(&header, &rows);
            for refusal in report.iter().flat_map(|m| &m.refused) {
                eprintln!("not moved: {refusal}");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_old_store_is_the_fleets_with_what_the_command_line_gives() {
        let fleet = S3Config {
            endpoint: Some("http://127.0.0.1:8333".into()),
            bucket: "new".into(),
            prefix: "backups".into(),
            lock: Some(sexton_shared::config::LockConfig {
                mode: sexton_retention::lock::LockMode::Governance,
                tiers: Default::default(),
            }),
            ..S3Config::default()
        };
        let old = from_settings(
            &fleet,
            &From {
                bucket: "old",
                prefix: None,
                endpoint: None,
            },
        )
        .unwrap();
        assert_eq!(
            (
                old.bucket.as_str(),
                old.prefix.as_str(),
                old.endpoint.as_deref()
            ),
            ("old", "backups", Some("http://127.0.0.1:8333"))
        );
        assert!(old.lock.is_none(), "the old store is only read");
        let old = from_settings(
            &fleet,
            &From {
                bucket: "new",
                prefix: Some("/x/"),
                endpoint: None,
            },
        );
        assert!(old.is_err());
        for (prefix, endpoint, says) in [
            (Some("a/../b"), None, "never climbs"),
            (None, Some("s3.old:9000"), "http:// or https://"),
        ] {
            let err = from_settings(
                &fleet,
                &From {
                    bucket: "old",
                    prefix,
                    endpoint,
                },
            )
            .err()
            .unwrap();
            assert!(err.message.contains(says), "{}", err.message);
            assert_eq!(err.code, 2);
        }
        let err = from_settings(
            &fleet,
            &From {
                bucket: "",
                prefix: None,
                endpoint: None,
            },
        )
        .err()
        .unwrap();
        assert!(err.message.contains("empty"));
    }
}
