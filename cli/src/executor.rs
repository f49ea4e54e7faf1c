//! The reference executor: what a database operator or snapshotter does, in its smallest
//! honest form. On `due-backup` it writes a small `backup.xbstream` and `metadata.json` under the
//! event's object prefix, then reports the backup completed. It lets a user (and the end-to-end
//! tests) watch the whole loop run without a database.

use std::time::Duration;

use anyhow::Context as _;
use async_nats::jetstream::{self, consumer::PullConsumer};
use chrono::Utc;
use futures::StreamExt;
use sexton_shared::{
    config::Config,
    nats::publish_once,
    object_store::ObjectStore,
    outcome::{settle, Outcome},
    topology,
    wire::{self, DueBackup, Report, ReportStatus},
    Shutdown,
};

/// Runs the reference executor until `shutdown` trips.
pub async fn run(config: Config, mut shutdown: Shutdown) -> anyhow::Result<()> {
    let client = sexton_shared::nats::connect(&config.nats, "sexton-reference-executor").await?;
    let js = jetstream::new(client.clone());
    topology::ensure(&js, config.nats.replicas).await?;
    let store = ObjectStore::connect(&config.s3).await?;
    let stream = js
        .get_stream(topology::STREAM_DUE)
        .await
        .context("opening the due-backup stream")?;
    let consumer: PullConsumer = stream
        .get_or_create_consumer(
            topology::CONSUMER_EXECUTOR,
            topology::consumer_config(topology::CONSUMER_EXECUTOR, None, Duration::from_secs(60)),
        )
        .await
        .context("creating the executor consumer")?;
    let mut messages = consumer
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await?;
    tracing::info!("reference executor started");
    loop {
        let message = tokio::select! {
            _ = shutdown.wait() => break,
            message = messages.next() => message,
        };
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(err)) => {
                tracing::warn!(error = %err, "reading due backups");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            None => anyhow::bail!("the executor consumer ended"),
        };
        let outcome = match wire::decode::<DueBackup>(&message.payload)
            .map_err(|e| e.to_string())
            .and_then(|due| due.check_object_prefix(&config.s3.prefix).map(|()| due))
        {
            Err(why) => Outcome::Poison(why),
            Ok(due) => match take_backup(&js, &store, &due).await {
                Ok(()) => Outcome::Done,
                Err(err) => {
                    tracing::warn!(backup = %due.backup_id, error = format!("{err:#}"), "backup failed; will retry");
                    Outcome::RetryAfter(Duration::from_secs(2))
                }
            },
        };
        settle(&js, "reference-executor", &message, &outcome).await;
    }
    Ok(())
}

async fn take_backup(
    js: &jetstream::Context,
    store: &ObjectStore,
    due: &DueBackup,
) -> anyhow::Result<()> {
    let started_at = Utc::now();
    let data_key = format!("{}backup.xbstream", due.object_prefix);
    let metadata_key = format!("{}metadata.json", due.object_prefix);
    let data = format!(
        "sexton reference backup of {}/{} for tick {}\n",
        due.cluster, due.plan, due.tick
    );
    store.put(&data_key, data.into_bytes().into()).await?;
    let metadata = serde_json::json!({
        "backup_id": due.backup_id,
        "cluster": due.cluster,
        "plan": due.plan,
        "kind": due.kind,
        "started_at": started_at,
        "artifacts": [data_key],
    });
    store
        .put(&metadata_key, serde_json::to_vec(&metadata)?.into())
        .await?;
    let completed_at = Utc::now();
    let report = Report {
        schema_version: wire::SCHEMA_VERSION,
        backup_id: due.backup_id.clone(),
        cluster: due.cluster.clone(),
        plan: due.plan.clone(),
        schedule: Some(due.schedule.clone()),
        backup_name: due.backup_name.clone(),
        status: ReportStatus::Completed,
        kind: due.kind,
        parent: due.parent.clone(),
        started_at: Some(started_at.fixed_offset()),
        completed_at: Some(completed_at.fixed_offset()),
        artifacts: vec![data_key, metadata_key],
        labels: due.labels.clone(),
        tags: Vec::new(),
        error: None,
    };
    publish_once(
        js,
        topology::report_subject(&due.cluster),
        &format!("report.{}.{}.completed", due.cluster, due.backup_id),
        wire::encode(&report),
    )
    .await?;
    tracing::info!(cluster = %due.cluster, backup = %due.backup_id, "backup taken and reported");
    Ok(())
}
