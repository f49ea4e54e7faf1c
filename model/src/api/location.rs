//! `location.list`, answered by the scheduler: the object stores the fleet's configuration
//! names (`[s3]` is `primary`, `[locations.<name>]` the others), without credentials. A
//! `Location` manifest declares the same fields, and `sexton apply` checks the fleet against
//! them: a location is service configuration, read by every service at start, so apply never
//! changes one (docs/gitops.md).

use serde::{Deserialize, Serialize};

use super::v1;
use crate::wire::Message;

/// `location.list`: every location. No parameters; an empty body is one too.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LocationList {
    #[serde(default = "v1")]
    pub schema_version: u32,
}

impl Default for LocationList {
    fn default() -> LocationList {
        LocationList {
            schema_version: v1(),
        }
    }
}

impl Message for LocationList {
    const KIND: &'static str = "request";
}

/// A location's settings, as the fleet has them (every field set but `endpoint`,
/// `storage_class` and `lock`, which may be unset) or as a manifest declares them (only the
/// fields it means to check).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LocationSpec {
    pub name: String,
    /// The S3 endpoint; unset: the SDK's default for the region (AWS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// Every object Sexton touches lies under `<prefix>/<cluster>/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_path_style: Option<bool>,
    /// The storage class copies are written in unless their rule names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// S3 Object Lock on the store (docs/immutability.md); `unlocked` when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<LocationLock>,
}

/// A location's Object Lock: its mode and how long each kind of keep is locked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LocationLock {
    /// `governance`, `compliance`, or `none` (the store locks nothing).
    pub mode: String,
    /// The tiers as a lock setting writes them (`min=1d,daily=35d`); empty without a lock.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tiers: String,
}

impl LocationSpec {
    /// Where the fleet's `live` location differs from what this declaration says: one
    /// `field: live → declared` per field the declaration sets and the fleet has otherwise.
    pub fn differences(&self, live: &LocationSpec) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |field: &str, declared: Option<String>, have: Option<String>| {
            if let Some(declared) = declared {
                if have.as_ref() != Some(&declared) {
                    out.push(format!(
                        "{field}: {} → {declared}",
                        have.as_deref().unwrap_or("(unset)")
                    ));
                }
            }
        };
        check("endpoint", self.endpoint.clone(), live.endpoint.clone());
        check("region", self.region.clone(), live.region.clone());
        check("bucket", self.bucket.clone(), live.bucket.clone());
        check("prefix", self.prefix.clone(), live.prefix.clone());
        check(
            "force_path_style",
            self.force_path_style.map(|b| b.to_string()),
            live.force_path_style.map(|b| b.to_string()),
        );
        check(
            "storage_class",
            self.storage_class.clone(),
            live.storage_class.clone(),
        );
        let lock_text = |lock: &Option<LocationLock>| {
            lock.as_ref().map(|lock| match lock.tiers.as_str() {
                "" => lock.mode.clone(),
                tiers => format!("{} {tiers}", lock.mode),
            })
        };
        let live_lock = lock_text(&live.lock).or_else(|| Some("none".into()));
        check("lock", lock_text(&self.lock), live_lock);
        out
    }
}

impl Message for LocationSpec {
    const KIND: &'static str = "location";

    fn validate(&self) -> Result<(), String> {
        crate::names::check_name("location name", &self.name).map_err(|e| e.to_string())?;
        if let Some(lock) = &self.lock {
            if !matches!(lock.mode.as_str(), "governance" | "compliance" | "none") {
                return Err(format!(
                    "lock mode {:?}: expected governance, compliance or none",
                    lock.mode
                ));
            }
            if lock.mode == "none" && !lock.tiers.is_empty() {
                return Err("a lock of mode none has no tiers".into());
            }
        }
        for (field, value) in [
            ("endpoint", &self.endpoint),
            ("region", &self.region),
            ("bucket", &self.bucket),
            ("prefix", &self.prefix),
            ("storage_class", &self.storage_class),
        ] {
            if value
                .as_deref()
                .is_some_and(|v| v.len() > 1024 || v.chars().any(char::is_control))
            {
                return Err(format!(
                    "{field} is longer than 1024 characters or holds a control character"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> LocationSpec {
        LocationSpec {
            name: "dr".into(),
            endpoint: Some("http://127.0.0.1:9000".into()),
            region: Some("us-east-1".into()),
            bucket: Some("sexton-dr".into()),
            prefix: Some("sexton".into()),
            force_path_style: Some(true),
            storage_class: None,
            lock: None,
        }
    }

    #[test]
    fn a_declaration_checks_only_the_fields_it_sets() {
        let only_bucket = LocationSpec {
            name: "dr".into(),
            bucket: Some("sexton-dr".into()),
            ..LocationSpec::default()
        };
        assert!(only_bucket.differences(&live()).is_empty());
        let other = LocationSpec {
            bucket: Some("elsewhere".into()),
            storage_class: Some("GLACIER".into()),
            ..only_bucket
        };
        assert_eq!(
            other.differences(&live()),
            [
                "bucket: sexton-dr → elsewhere",
                "storage_class: (unset) → GLACIER"
            ]
        );
    }

    #[test]
    fn a_declared_lock_must_be_the_fleets() {
        let locked = LocationSpec {
            name: "dr".into(),
            lock: Some(LocationLock {
                mode: "compliance".into(),
                tiers: "min=1d".into(),
            }),
            ..LocationSpec::default()
        };
        assert_eq!(
            locked.differences(&live()),
            ["lock: none → compliance min=1d"]
        );
        let unlocked = LocationSpec {
            lock: Some(LocationLock {
                mode: "none".into(),
                tiers: String::new(),
            }),
            ..locked.clone()
        };
        assert!(unlocked.differences(&live()).is_empty());
        let mut have = live();
        have.lock = locked.lock.clone();
        assert!(locked.differences(&have).is_empty());
        assert_eq!(
            unlocked.differences(&have),
            ["lock: compliance min=1d → none"]
        );
    }

    #[test]
    fn bad_declarations_are_refused() {
        let mut bad = live();
        bad.lock = Some(LocationLock {
            mode: "forever".into(),
            tiers: String::new(),
        });
        assert!(bad.validate().unwrap_err().contains("lock mode"));
        bad.lock = Some(LocationLock {
            mode: "none".into(),
            tiers: "min=1d".into(),
        });
        assert!(bad.validate().is_err());
        let mut bad = live();
        bad.bucket = Some("a\nb".into());
        assert!(bad.validate().is_err());
        let mut bad = live();
        bad.name = "../x".into();
        assert!(bad.validate().is_err());
    }
}
