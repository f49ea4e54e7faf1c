//! Delete plugins (seed 004, Velero's `DeleteAction`): external cleanup that runs when a
//! backup's remote artifacts are deleted, for resources Sexton does not know about (volume
//! snapshots, a copy in another region, an entry in an inventory).
//!
//! A plugin registers a name, a label selector and a NATS subject under
//! `sexton.v1.plugin.` (API `plugin.register`, stored in the `sexton-plugins` bucket). For
//! each backup whose labels match a plugin's selector, the deleter sends the plugin a request
//! and waits for the answer, plugin after plugin in alphanumeric order of name, each with a
//! timeout. A plugin cannot stop a deletion: an error, a timeout or an unreadable answer is
//! recorded on the backup (`plugin_errors`) and in an incident event, and the deletion goes on.
//! Plugins are called at least once per deletion (again when a deletion interrupted by a crash
//! is finished), so they must be idempotent.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream::kv;
use chrono::Utc;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sexton_model::{
    names::{BackupId, ClusterName, PlanName},
    records::{BackupRecord, PluginFailure},
    wire::{Message, SCHEMA_VERSION},
};

use crate::metrics::Metrics;

pub use sexton_shared::api::{check_plugin_subject, PluginByName, PluginSpec};

/// What a plugin receives: the backup being deleted and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PluginCall {
    pub schema_version: u32,
    pub plugin: String,
    pub cluster: ClusterName,
    pub plan: PlanName,
    pub backup_id: BackupId,
    pub uid: String,
    pub backup_name: String,
    pub labels: BTreeMap<String, String>,
    pub artifacts: Vec<String>,
    pub reasons: Vec<String>,
}

impl Message for PluginCall {
    const KIND: &'static str = "plugin call";
}

/// A plugin's answer: `{}` (or an empty body) for done, `{"error": "..."}` for a failure.
#[derive(Debug, Clone, Deserialize)]
struct PluginAnswer {
    #[serde(default)]
    error: Option<String>,
}

/// Whether `selector` selects a backup with `labels`: every selector label is present with the
/// same value.
pub fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    selector
        .iter()
        .all(|(key, value)| labels.get(key) == Some(value))
}

/// A registration as read from the bucket: a plugin, or the key of an entry that could not be
/// read (called as a failing plugin, so the problem is recorded and the deletion goes on).
#[derive(Debug, Clone, PartialEq)]
pub enum Registration {
    Plugin(PluginSpec),
    Unreadable { key: String, error: String },
}

impl Registration {
    fn name(&self) -> &str {
        match self {
            Registration::Plugin(spec) => &spec.name,
            Registration::Unreadable { key, .. } => key,
        }
    }
}

/// The plugins that apply to a backup with `labels`, in alphanumeric order of name. An
/// unreadable registration applies to every backup.
pub fn applicable<'a>(
    registrations: &'a [Registration],
    labels: &BTreeMap<String, String>,
) -> Vec<&'a Registration> {
    let mut out: Vec<&Registration> = registrations
        .iter()
        .filter(|r| match r {
            Registration::Plugin(spec) => selects(&spec.selector, labels),
            Registration::Unreadable { .. } => true,
        })
        .collect();
    out.sort_by(|a, b| a.name().cmp(b.name()));
    out
}

/// How one plugin call ended: `ok`, `error` or `timeout`, with the error.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginResult {
    pub plugin: String,
    pub outcome: &'static str,
    pub error: Option<String>,
}

impl PluginResult {
    /// The failure to record on the backup, if the call failed.
    pub fn failure(&self) -> Option<PluginFailure> {
        self.error.as_ref().map(|error| PluginFailure {
            plugin: self.plugin.clone(),
            error: error.clone(),
            at: Utc::now(),
        })
    }
}

#[derive(Clone)]
pub struct Plugins {
    store: kv::Store,
    client: async_nats::Client,
    default_timeout: Duration,
    metrics: Arc<Metrics>,
    /// The registrations as last listed, with the bucket stream's last sequence before that
    /// listing: reused while the stream has stored nothing since (issue 32's steady path).
    listed: Arc<tokio::sync::Mutex<Option<Listed>>>,
}

/// The registrations as listed, with the bucket stream's last sequence read before the listing.
type Listed = (u64, Vec<Registration>);

impl Plugins {
    pub fn new(
        store: kv::Store,
        client: async_nats::Client,
        default_timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Plugins {
        Plugins {
            store,
            client,
            default_timeout,
            metrics,
            listed: Arc::default(),
        }
    }

    /// Every registration, in alphanumeric order of name, as of every write the bucket had
    /// stored when this was called. Listing the bucket opens a consumer (a watch of its keys);
    /// every delete batch asked, and under a steady load the consumers piled up past the
    /// server's limit, so batches waited out retries (issue 32: 1,680 "maximum consumers
    /// limit reached" in 20 s). Now the bucket stream's last sequence, as its leader answers
    /// (one API request, no consumer), says whether anything was written since the last
    /// listing; only then is it listed again.
    pub async fn load(&self) -> anyhow::Result<Vec<Registration>> {
        let last = self
            .store
            .stream
            .get_info()
            .await
            .context("reading the delete plugins' stream")?
            .state
            .last_sequence;
        let mut listed = self.listed.lock().await;
        if let Some((sequence, registrations)) = listed.as_ref() {
            if *sequence == last {
                return Ok(registrations.clone());
            }
        }
        // Tagged with the sequence read before the listing: a write during it is listed
        // already or at the next call, never missed.
        let registrations = self.list().await?;
        *listed = Some((last, registrations.clone()));
        Ok(registrations)
    }

    /// Every registration, listed from the bucket.
    async fn list(&self) -> anyhow::Result<Vec<Registration>> {
        let mut keys = self.store.keys().await.context("listing delete plugins")?;
        let mut out = Vec::new();
        while let Some(key) = keys.next().await {
            let key = key.context("listing delete plugins")?;
            let Some(body) = sexton_shared::leader_read::value(&self.store, &key)
                .await
                .with_context(|| format!("reading delete plugin {key}"))?
            else {
                continue;
            };
            out.push(match sexton_model::wire::decode::<PluginSpec>(&body) {
                Ok(spec) => Registration::Plugin(spec),
                Err(err) => Registration::Unreadable {
                    key,
                    error: format!("registration unreadable: {err}"),
                },
            });
        }
        out.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(out)
    }

    /// Calls every plugin that applies to `record`, one after the other, and returns how each
    /// call ended. Never fails itself.
    pub async fn call_all(
        &self,
        registrations: &[Registration],
        record: &BackupRecord,
    ) -> Vec<PluginResult> {
        let mut results = Vec::new();
        for registration in applicable(registrations, &record.labels) {
            let (outcome, error) = match registration {
                Registration::Unreadable { error, .. } => ("error", Some(error.clone())),
                Registration::Plugin(spec) => self.call(spec, record).await,
            };
            self.metrics
                .plugin_calls
                .with_label_values(&[outcome])
                .inc();
            results.push(PluginResult {
                plugin: registration.name().to_string(),
                outcome,
                error,
            });
        }
        results
    }

    /// One request/reply: the metric outcome and the error, if any.
    async fn call(
        &self,
        spec: &PluginSpec,
        record: &BackupRecord,
    ) -> (&'static str, Option<String>) {
        let timeout = spec
            .timeout_seconds
            .map_or(self.default_timeout, Duration::from_secs);
        let call = PluginCall {
            schema_version: SCHEMA_VERSION,
            plugin: spec.name.clone(),
            cluster: record.cluster.clone(),
            plan: record.plan.clone(),
            backup_id: record.id.clone(),
            uid: record.uid.clone(),
            backup_name: record.backup_name.clone(),
            labels: record.labels.clone(),
            artifacts: record.artifacts.clone(),
            reasons: record.delete_reasons.clone(),
        };
        let request = self
            .client
            .request(spec.subject.clone(), sexton_model::wire::encode(&call));
        match tokio::time::timeout(timeout, request).await {
            Err(_) => (
                "timeout",
                Some(format!("no answer within {}s", timeout.as_secs())),
            ),
            Ok(Err(err)) => match err.kind() {
                async_nats::RequestErrorKind::NoResponders => (
                    "error",
                    Some(format!("no plugin is listening on {}", spec.subject)),
                ),
                async_nats::RequestErrorKind::TimedOut => (
                    "timeout",
                    Some(format!("no answer within {}s", timeout.as_secs())),
                ),
                _ => ("error", Some(format!("request failed: {err}"))),
            },
            Ok(Ok(reply)) if reply.payload.iter().all(u8::is_ascii_whitespace) => ("ok", None),
            Ok(Ok(reply)) => match serde_json::from_slice::<PluginAnswer>(&reply.payload) {
                Ok(PluginAnswer { error: None }) => ("ok", None),
                Ok(PluginAnswer { error: Some(error) }) => {
                    ("error", Some(error.chars().take(1000).collect()))
                }
                Err(err) => ("error", Some(format!("unreadable answer: {err}"))),
            },
        }
    }

    /// `plugin.register`: creates or replaces the plugin's entry.
    pub async fn register(&self, mut spec: PluginSpec) -> anyhow::Result<PluginSpec> {
        spec.registered_at = Some(Utc::now());
        let body = serde_json::to_vec(&spec)?;
        self.store
            .put(&spec.name, body.into())
            .await
            .context("storing the plugin")?;
        Ok(spec)
    }

    /// `plugin.unregister`: whether there was such a plugin.
    pub async fn unregister(&self, name: &str) -> anyhow::Result<bool> {
        let existed = sexton_shared::leader_read::value(&self.store, name)
            .await
            .context("reading the plugin")?
            .is_some();
        if existed {
            self.store
                .delete(name)
                .await
                .context("removing the plugin")?;
        }
        Ok(existed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn plugin(name: &str, selector: &[(&str, &str)]) -> Registration {
        Registration::Plugin(PluginSpec {
            schema_version: 1,
            name: name.into(),
            subject: format!("sexton.v1.plugin.{name}"),
            selector: labels(selector),
            timeout_seconds: None,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            registered_at: None,
        })
    }

    #[test]
    fn selection_and_order() {
        let registrations = vec![
            plugin("snapshots", &[("tier", "gold")]),
            plugin("audit", &[]),
            plugin("b10", &[]),
            plugin("b2", &[]),
            plugin("region-copy", &[("tier", "gold"), ("region", "eu")]),
        ];
        let names = |labels: &BTreeMap<String, String>| -> Vec<String> {
            applicable(&registrations, labels)
                .iter()
                .map(|r| r.name().to_string())
                .collect()
        };
        assert_eq!(names(&labels(&[])), ["audit", "b10", "b2"]);
        assert_eq!(
            names(&labels(&[("tier", "gold")])),
            ["audit", "b10", "b2", "snapshots"]
        );
        assert_eq!(
            names(&labels(&[("tier", "gold"), ("region", "eu"), ("x", "y")])),
            ["audit", "b10", "b2", "region-copy", "snapshots"]
        );
        assert_eq!(
            names(&labels(&[("tier", "silver"), ("region", "eu")])),
            ["audit", "b10", "b2"]
        );
    }

    #[test]
    fn registrations_are_validated() {
        let good = r#"{"schema_version":1,"name":"snap","subject":"sexton.v1.plugin.snap"}"#;
        sexton_model::wire::decode::<PluginSpec>(good.as_bytes()).unwrap();
        let cases = [
            (
                good.replace("\"snap\",", "\"../x\","),
                "invalid plugin name",
            ),
            (
                good.replace("sexton.v1.plugin.snap", "sexton.v1.job.delete.c1"),
                "must start with",
            ),
            (
                good.replace("sexton.v1.plugin.snap", "sexton.v1.plugin.>"),
                "no wildcards",
            ),
            (
                good.replace("sexton.v1.plugin.snap", "sexton.v1.plugin.a..b"),
                "no wildcards",
            ),
            (
                good.replace("sexton.v1.plugin.snap", "sexton.v1.plugin."),
                "no wildcards",
            ),
            (
                good.replace("}", r#","timeout_seconds":0}"#),
                "timeout_seconds",
            ),
            (good.replace("}", r#","selector":{"":"x"}}"#), "empty"),
            (good.replace("}", r#","selectr":{}}"#), "unknown field"),
            (good.replace("\"name\":\"snap\",", ""), "missing field"),
        ];
        for (body, needle) in cases {
            let err = sexton_model::wire::decode::<PluginSpec>(body.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{body}: {err}");
        }
    }
}
