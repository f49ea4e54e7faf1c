//! Validated identifiers. Cluster names, plan names, schedule names and backup ids end up in
//! NATS subjects, key-value keys and S3 keys, so they are parsed once at the boundary into a
//! type that cannot hold a dot, a slash, `..` or a control character.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// The longest name we accept; long enough for generated ids, short enough for subjects.
pub const MAX_NAME_LEN: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: {why}")]
pub struct NameError {
    pub what: &'static str,
    pub value: String,
    pub why: &'static str,
}

/// Checks that `value` is a name usable as one token of a subject, a key and a path segment:
/// ASCII letters, digits, `-` and `_`, starting with a letter or digit.
pub fn check_name(what: &'static str, value: &str) -> Result<(), NameError> {
    let fail = |why| {
        Err(NameError {
            what,
            value: value.chars().take(MAX_NAME_LEN).collect(),
            why,
        })
    };
    if value.is_empty() {
        return fail("must not be empty");
    }
    if value.len() > MAX_NAME_LEN {
        return fail("is longer than 128 characters");
    }
    if !value.as_bytes()[0].is_ascii_alphanumeric() {
        return fail("must start with a letter or digit");
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return fail("may hold only letters, digits, '-' and '_'");
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $ty:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $ty(String);

        impl $ty {
            pub fn new(value: impl Into<String>) -> Result<Self, NameError> {
                let value = value.into();
                check_name($what, &value)?;
                Ok(Self(value))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $ty {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, NameError> {
                Self::new(s)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                Self::new(raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

name_type!(
    /// The database cluster (or application) a backup belongs to.
    ClusterName,
    "cluster name"
);
name_type!(
    /// A backup plan inside a cluster; retention groups backups by cluster and plan.
    PlanName,
    "plan name"
);
name_type!(
    /// A schedule's name, unique in the fleet.
    ScheduleName,
    "schedule name"
);
name_type!(
    /// A backup's id, unique within its cluster.
    BackupId,
    "backup id"
);
name_type!(
    /// A named object store (issue 28): `primary` is the `[s3]` store, others are the
    /// configuration's `[locations.<name>]`.
    LocationName,
    "location name"
);

impl LocationName {
    /// The location every backup is taken to: the configuration's `[s3]` store.
    pub const PRIMARY: &'static str = "primary";

    pub fn is_primary(&self) -> bool {
        self.0 == Self::PRIMARY
    }

    /// The name `primary`.
    pub fn primary() -> LocationName {
        LocationName(Self::PRIMARY.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for ok in ["a", "db-1", "Prod_2", "0abc"] {
            assert!(ClusterName::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_names_that_could_escape_a_subject_or_a_key() {
        let long = "a".repeat(MAX_NAME_LEN + 1);
        for bad in [
            "", "..", "a.b", "a/b", "../x", "-a", "_a", "a b", "a\u{0}b", "a\nb", "é", "*", ">",
            &long,
        ] {
            let err = ClusterName::new(bad).unwrap_err();
            assert!(err.to_string().starts_with("invalid cluster name"), "{err}");
        }
    }

    #[test]
    fn deserialising_validates() {
        let err = serde_json::from_str::<BackupId>("\"a/b\"").unwrap_err();
        assert!(err.to_string().contains("invalid backup id"), "{err}");
        let ok: BackupId = serde_json::from_str("\"b-1\"").unwrap();
        assert_eq!(ok.as_str(), "b-1");
    }
}
