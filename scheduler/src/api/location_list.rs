//! `location.list`: the object stores the fleet's configuration names, without credentials
//! (what a `Location` manifest is checked against).

use serde_json::Value;
use sexton_shared::{
    api::{ApiError, LocationList, LocationLock, LocationSpec},
    config::{Config, LockConfig, S3Config},
};

use super::Api;

impl Api {
    pub(super) async fn location_list(&self, _req: LocationList) -> Result<Value, ApiError> {
        Ok(serde_json::to_value(locations(&self.config)).expect("locations serialise"))
    }
}

/// `primary` (`[s3]`) first, then `[locations.<name>]` in name order.
pub(super) fn locations(config: &Config) -> Vec<LocationSpec> {
    let mut out = vec![spec("primary", &config.s3, None)];
    for (name, location) in &config.locations {
        out.push(spec(name, &location.s3, location.storage_class.clone()));
    }
    out
}

fn spec(name: &str, s3: &S3Config, storage_class: Option<String>) -> LocationSpec {
    LocationSpec {
        name: name.into(),
        endpoint: s3.endpoint.clone(),
        region: Some(s3.region.clone()),
        bucket: Some(s3.bucket.clone()),
        prefix: Some(s3.prefix.clone()),
        force_path_style: Some(s3.force_path_style),
        storage_class,
        lock: Some(lock(s3.lock.as_ref())),
    }
}

fn lock(lock: Option<&LockConfig>) -> LocationLock {
    use sexton_retention::lock::LockMode;
    match lock {
        None => LocationLock {
            mode: "none".into(),
            tiers: String::new(),
        },
        Some(lock) => LocationLock {
            mode: match lock.mode {
                LockMode::Governance => "governance",
                LockMode::Compliance => "compliance",
            }
            .into(),
            tiers: lock.tiers.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_say_where_without_credentials() {
        let mut config = Config::default();
        config.s3.secret_access_key = Some("hunter2".into());
        config.s3.access_key_id = Some("AKIA-PRIMARY".into());
        let mut dr = sexton_shared::config::LocationConfig::default();
        dr.s3.bucket = "sexton-dr".into();
        dr.s3.secret_access_key = Some("s3cr3t".into());
        dr.storage_class = Some("STANDARD_IA".into());
        config.locations.insert("dr".into(), dr);
        let listed = locations(&config);
        let names: Vec<&str> = listed.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["primary", "dr"]);
        assert_eq!(listed[1].bucket.as_deref(), Some("sexton-dr"));
        assert_eq!(listed[1].storage_class.as_deref(), Some("STANDARD_IA"));
        assert_eq!(listed[0].lock.as_ref().unwrap().mode, "none");
        let text = serde_json::to_string(&listed).unwrap();
        for secret in ["hunter2", "AKIA-PRIMARY", "s3cr3t"] {
            assert!(!text.contains(secret), "{text}");
        }
    }
}
