//! `sexton backup fetch` and `sexton binlog fetch`: a recovery point downloaded for a person's
//! restore, read exactly as Sexton recorded it ([`sexton_executor::fetch`], the code restore
//! tests read with). The chain comes from the scheduler (`backup.chain`); the bytes come
//! straight from the store with the caller's own credentials.

use std::path::Path;

use sexton_model::{
    names::{ClusterName, LocationName},
    wire::SCHEMA_VERSION,
};
use sexton_shared::{
    api::{ChainRequest, RestoreChain},
    config::Config,
    object_store::ObjectStore,
    topology,
};

use super::{print::print_value, values::parsed};
use crate::client::Client;
use crate::failure::{parse_time, Failure};
use crate::output::Output;

/// Where a fetch reads, said first when it fails: the CLI reads the store with its own
/// settings, not the fleet's, so a missing endpoint or key is the caller's to give.
fn place(config: &Config, location: Option<&str>) -> String {
    let (name, s3) = match location.and_then(|name| config.locations.get(name).map(|l| (name, l))) {
        Some((name, location)) => (name, &location.s3),
        None => ("primary", &config.s3),
    };
    format!(
        "{name} (bucket {} at {}; the CLI reads it with its own settings: SEXTON_S3_*, \
         SEXTON_LOCATION_<NAME>_* or SEXTON_CONFIG)",
        s3.bucket,
        s3.endpoint.as_deref().unwrap_or("the AWS endpoint")
    )
}

/// The store a fetch reads: the primary, or the location named (which must be configured).
async fn store_for(config: &Config, location: Option<&str>) -> Result<ObjectStore, Failure> {
    let s3 = match location.filter(|name| *name != "primary") {
        None => &config.s3,
        Some(name) => {
            &config
                .locations
                .get(name)
                .ok_or_else(|| {
                    Failure::input(format!(
                        "--location {name}: no such location in the configuration; it has {}",
                        config.location_names()
                    ))
                })?
                .s3
        }
    };
    ObjectStore::connect(s3).await.map_err(Failure::runtime)
}

/// The directory written into: created when missing; an existing file there is refused.
fn target_dir(to: &Path) -> Result<(), Failure> {
    if to.exists() && !to.is_dir() {
        return Err(Failure::input(format!(
            "--to {}: not a directory",
            to.display()
        )));
    }
    std::fs::create_dir_all(to)
        .map_err(|err| Failure::input(format!("--to {}: {err}", to.display())))
}

pub(super) async fn backup_fetch(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    id: &str,
    cluster: &str,
    location: Option<&str>,
    to: &Path,
    only: bool,
) -> Result<(), Failure> {
    let request = ChainRequest {
        schema_version: SCHEMA_VERSION,
        cluster: parsed::<ChainRequest, ClusterName>(cluster)?,
        id: parsed::<ChainRequest, _>(id)?,
        location: location
            .map(parsed::<ChainRequest, LocationName>)
            .transpose()?,
    };
    let config = load_config()?;
    let store = store_for(&config, location).await?;
    target_dir(to)?;
    let client = Client::connect(&config).await?;
    let mut answer: RestoreChain = client
        .call_as(&topology::api_subject("backup", "chain"), &request)
        .await?;
    if only {
        answer.chain.retain(|backup| backup.id == request.id);
    }
    let fetched = sexton_executor::fetch::fetch_chain(&store, &request.cluster, &answer.chain, to)
        .await
        .map_err(|err| {
            Failure::runtime(err.context(format!(
                "fetching {} from {}",
                request.id,
                place(&config, location)
            )))
        })?;
    let value = serde_json::to_value(&fetched).expect("fetched objects serialise");
    print_value(
        output,
        &value,
        &["backup", "path", "size", "version_id", "sha256_checked"],
    );
    Ok(())
}

pub(super) async fn binlog_fetch(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    cluster: &str,
    location: Option<&str>,
    window: (Option<&str>, Option<&str>),
    to: &Path,
) -> Result<(), Failure> {
    let cluster =
        ClusterName::new(cluster).map_err(|err| Failure::input(format!("--cluster: {err}")))?;
    if let Some(name) = location {
        LocationName::new(name).map_err(|err| Failure::input(format!("--location: {err}")))?;
    }
    let since = window
        .0
        .map(|text| parse_time("since", text))
        .transpose()?
        .map(|t| t.fixed_offset());
    let until = window
        .1
        .map(|text| parse_time("until", text))
        .transpose()?
        .map(|t| t.fixed_offset());
    if let (Some(since), Some(until)) = (since, until) {
        if since > until {
            return Err(Failure::input(format!(
                "--since {since} is after --until {until}"
            )));
        }
    }
    let config = load_config()?;
    let store = store_for(&config, location).await?;
    target_dir(to)?;
    let prefix = store.prefix().to_string();
    let fetched = sexton_executor::fetch::fetch_binlog(&store, &prefix, &cluster, since, until, to)
        .await
        .map_err(|err| {
            Failure::runtime(err.context(format!(
                "fetching {cluster}'s binlog from {}",
                place(&config, location)
            )))
        })?;
    if let Some(version) = &fetched.index_version {
        eprintln!(
            "warning: the archive's current index is unreadable; read its version {version}, \
             the newest that reads (see `sexton catalog scrub`)"
        );
    }
    let overwritten = fetched
        .segments
        .iter()
        .filter(|s| s.version_id.is_some())
        .count();
    if overwritten > 0 {
        eprintln!(
            "warning: {overwritten} segments were written over or deleted in the bucket; \
             their recorded versions were read (whoever did it holds a key to the bucket)"
        );
    }
    let value = serde_json::to_value(&fetched.segments).expect("fetched segments serialise");
    print_value(
        output,
        &value,
        &[
            "path",
            "first_event",
            "last_event",
            "size",
            "version_id",
            "sha256_checked",
        ],
    );
    Ok(())
}
