//! The object store's key layout: every object of a cluster lies under `<prefix>/<cluster>/`,
//! a backup's under `<prefix>/<cluster>/<backup-name>/<backup-id>/`; the checks that keep a key
//! there, and what a listing says about one object. The client itself is
//! `sexton_shared::object_store`.

use crate::names::{check_name, ClusterName, NameError};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectInfo {
    pub key: String,
    pub size: i64,
    pub last_modified: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("object key {key:?} {why}")]
pub struct KeyError {
    pub key: String,
    pub why: &'static str,
}

/// Which store a backup's objects were written to (issue 54): the endpoint, bucket and prefix
/// the fleet was given when it recorded them. Records carry it so that a fleet moved to
/// another bucket (or prefix, or endpoint) knows which backups it can no longer read where it
/// looks, instead of calling them missing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreRef {
    /// The S3 endpoint; absent: the AWS endpoint of the region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    pub bucket: String,
    /// The prefix every key of the fleet lies under (empty: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
}

impl StoreRef {
    /// The same place, written alike: a trailing `/` on the endpoint or around the prefix
    /// makes no other place, nor does the case of the endpoint's scheme and host.
    pub fn normalised(&self) -> StoreRef {
        StoreRef {
            endpoint: self
                .endpoint
                .as_deref()
                .map(|e| e.trim_end_matches('/').to_ascii_lowercase())
                .filter(|e| !e.is_empty()),
            bucket: self.bucket.clone(),
            prefix: self.prefix.trim_matches('/').to_string(),
        }
    }

    /// Whether `self` and `other` name the same place.
    pub fn same_place(&self, other: &StoreRef) -> bool {
        self.normalised() == other.normalised()
    }
}

impl std::fmt::Display for StoreRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bucket {}", self.bucket)?;
        if !self.prefix.is_empty() {
            write!(f, " prefix {}", self.prefix)?;
        }
        match &self.endpoint {
            Some(endpoint) => write!(f, " at {endpoint}"),
            None => f.write_str(" at the AWS endpoint"),
        }
    }
}

pub fn cluster_prefix(prefix: &str, cluster: &ClusterName) -> String {
    if prefix.is_empty() {
        format!("{cluster}/")
    } else {
        format!("{prefix}/{cluster}/")
    }
}

/// Checks that `key` is a plain key under the cluster's prefix, so a forged job cannot reach
/// another cluster's objects or climb out with `..` (`ObjectStore::check_key` in `sexton-shared`).
pub fn check_key_under(prefix: &str, cluster: &ClusterName, key: &str) -> Result<(), KeyError> {
    let fail = |why| {
        Err(KeyError {
            key: key.chars().take(200).collect(),
            why,
        })
    };
    let Some(rest) = key.strip_prefix(&cluster_prefix(prefix, cluster)) else {
        return fail("is not under the cluster's prefix");
    };
    if rest.is_empty() {
        return fail("names the cluster's prefix itself");
    }
    for segment in rest.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return fail("has an empty, '.' or '..' segment");
        }
        if segment.chars().any(|c| c.is_control() || c == '\\') {
            return fail("has a control character or a backslash");
        }
    }
    Ok(())
}

/// Checks that `key` lies under the backup's own directory,
/// `<prefix>/<cluster>/<backup-name>/<backup-id>/`, so one backup's record can never name (and
/// have deleted) the objects of another backup of the same cluster.
pub fn check_backup_key(
    prefix: &str,
    cluster: &ClusterName,
    backup_name: &str,
    backup_id: &str,
    key: &str,
) -> Result<(), KeyError> {
    check_key_under(prefix, cluster, key)?;
    let own = format!(
        "{}{backup_name}/{backup_id}/",
        cluster_prefix(prefix, cluster)
    );
    if !key.starts_with(&own) {
        return Err(KeyError {
            key: key.chars().take(200).collect(),
            why: "is not under the backup's own <backup-name>/<backup-id>/ directory",
        });
    }
    Ok(())
}

/// Checks the `<backup-name>` segment of a key.
pub fn check_backup_name(name: &str) -> Result<(), NameError> {
    check_name("backup name", name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_must_stay_under_the_cluster_prefix() {
        let c = ClusterName::new("c1").unwrap();
        check_key_under("backups", &c, "backups/c1/s/b1/backup.xbstream").unwrap();
        check_key_under("", &c, "c1/s/b1/metadata.json").unwrap();
        for bad in [
            "backups/c2/s/b1/backup.xbstream",
            "backups/c1/../c2/s/b1/x",
            "backups/c1/s/../../c2/x",
            "/backups/c1/s/b1/x",
            "backups/c1/",
            "backups/c1//x",
            "backups/c1/./x",
            "backups/c10/s/b1/x",
            "backups/c1/s\u{0}/x",
            "other/backups/c1/x",
        ] {
            assert!(check_key_under("backups", &c, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn backup_keys_must_stay_under_their_own_directory() {
        let c = ClusterName::new("c1").unwrap();
        check_backup_key("backups", &c, "s", "b1", "backups/c1/s/b1/backup.xbstream").unwrap();
        for bad in [
            "backups/c1/s/b2/backup.xbstream",
            "backups/c1/s/b10/backup.xbstream",
            "backups/c1/t/b1/backup.xbstream",
            "backups/c1/s/b1/../b2/x",
            "backups/c2/s/b1/backup.xbstream",
            "backups/c1/s/b1/",
        ] {
            assert!(
                check_backup_key("backups", &c, "s", "b1", bad).is_err(),
                "{bad}"
            );
        }
    }
}
