//! The requests of `plugin.*`, answered by the deleter: a delete plugin as its author declares
//! it (also what the `sexton-plugins` bucket stores), and one named.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::v1;
use crate::names::check_name;
use crate::wire::Message;

/// Delete plugins answer requests on subjects under this prefix (seed 004; re-exported by
/// `sexton_shared::topology` with the other subjects).
pub const PLUGIN_SUBJECT_PREFIX: &str = "sexton.v1.plugin.";

/// `plugin.register`: a plugin as its author declares it; also what the bucket stores.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: String,
    /// Where the plugin answers requests; must start with `sexton.v1.plugin.`.
    pub subject: String,
    /// Labels a backup must carry, all of them, for the plugin to apply (`matchLabels`). Empty
    /// applies to every backup.
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    /// Overrides `deleter.plugin_timeout` for this plugin.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// The plugin's own labels (for selecting it: `sexton apply --prune -l`), not to be
    /// confused with `selector`, the backups' labels it applies to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Free-form notes (Kubernetes annotations); `sexton apply` records its ownership here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub registered_at: Option<DateTime<Utc>>,
}

impl PluginSpec {
    /// What a manifest declares of the plugin, to compare a live one with a manifest's: the
    /// spec without the registration time and apply's own annotations.
    pub fn compared(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(PluginSpec {
            registered_at: None,
            schema_version: super::v1(),
            ..self.clone()
        })
        .expect("a plugin serialises");
        super::schedule::without_apply_annotations(&mut value);
        value
    }
}

impl Message for PluginSpec {
    const KIND: &'static str = "plugin";

    fn validate(&self) -> Result<(), String> {
        check_name("plugin name", &self.name).map_err(|e| e.to_string())?;
        check_plugin_subject(&self.subject)?;
        if self.selector.len() > 64 {
            return Err("more than 64 selector labels".into());
        }
        for (key, value) in &self.selector {
            if key.is_empty() || key.len() > 63 || value.len() > 253 {
                return Err(format!("selector label {key:?} is empty or too long"));
            }
            if key.chars().chain(value.chars()).any(char::is_control) {
                return Err(format!("selector label {key:?} holds a control character"));
            }
        }
        if self
            .timeout_seconds
            .is_some_and(|t| !(1..=600).contains(&t))
        {
            return Err("timeout_seconds must be between 1 and 600".into());
        }
        crate::checks::validate_labels(&self.labels)?;
        crate::checks::validate_annotations(&self.annotations)
    }
}

/// A plugin subject is a plain subject (no wildcards, no empty tokens) under
/// `sexton.v1.plugin.`, so the deleter's NATS user needs publish rights there and nowhere else.
pub fn check_plugin_subject(subject: &str) -> Result<(), String> {
    let Some(rest) = subject.strip_prefix(PLUGIN_SUBJECT_PREFIX) else {
        return Err(format!(
            "plugin subject {subject:?} must start with {PLUGIN_SUBJECT_PREFIX:?}"
        ));
    };
    if subject.len() > 256 {
        return Err("plugin subject is longer than 256 characters".into());
    }
    let valid_token = |token: &str| {
        !token.is_empty()
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !rest.split('.').all(valid_token) {
        return Err(format!(
            "plugin subject {subject:?} may hold only letters, digits, '-', '_' and single dots, no wildcards"
        ));
    }
    Ok(())
}

/// `plugin.unregister`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginByName {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: String,
}

impl Message for PluginByName {
    const KIND: &'static str = "request";

    fn validate(&self) -> Result<(), String> {
        check_name("plugin name", &self.name).map_err(|e| e.to_string())
    }
}

/// `plugin.list`: every registered plugin. No parameters; an empty body is one too.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PluginList {
    #[serde(default = "v1")]
    pub schema_version: u32,
}

impl Default for PluginList {
    fn default() -> PluginList {
        PluginList {
            schema_version: v1(),
        }
    }
}

impl Message for PluginList {
    const KIND: &'static str = "request";
}
