//! Deleting objects: the one path every deletion takes, [`ObjectStore::delete_targets`]. It
//! splits what it is given into `DeleteObjects` requests of at most [`DELETE_BATCH`] keys,
//! sends them (several at once when asked), and settles each answer the same way:
//!
//! - a 200 answer can still carry per-key errors (Object Lock, a legal hold): those keys did
//!   not go, and are reported with their errors;
//! - an error that names no key, or a key the request did not send, could be about any key of
//!   the request: none of them counts as deleted;
//! - a request that failed as a whole (the store unreachable, the bucket gone) deleted nothing
//!   that anyone knows of: each of its keys is reported with that error, and the error itself
//!   is [`DeleteReport::request_failed`]. The other requests' keys still count.
//!
//! A key went when every one of its targets (its versions, on a versioned bucket) did.
//! [`ObjectStore::delete_keys_each`] and [`ObjectStore::delete_batch`] are this path with the
//! targets of whole keys, and of bare keys.

use std::collections::HashSet;

use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use futures::StreamExt as _;

use super::{object_error, ObjectError, ObjectStore, PERMANENT_CODES};

/// S3's limit of keys in one `DeleteObjects` request.
pub const DELETE_BATCH: usize = 1000;

/// One thing to delete: a key, and the version (`None`: the current one, which on a versioned
/// bucket only adds a delete marker and keeps the bytes; `Some`: that very version).
pub type Target = (String, Option<String>);

/// How the requests of one deletion are sent.
#[derive(Debug, Clone, Copy)]
pub struct Requests<'a> {
    /// Targets per request: at most [`DELETE_BATCH`] (more is cut to it), at least one.
    pub per_request: usize,
    /// Requests in flight at once (at least one).
    pub in_flight: usize,
    /// A permit each request holds while it is in flight: a bound shared with other deletions
    /// (the deleter replica's requests, all batches together).
    pub permits: Option<&'a tokio::sync::Semaphore>,
}

impl Default for Requests<'_> {
    /// Full requests, one at a time.
    fn default() -> Self {
        Requests {
            per_request: DELETE_BATCH,
            in_flight: 1,
            permits: None,
        }
    }
}

/// What a deletion did to each key.
#[derive(Debug, Clone, Default)]
pub struct DeleteReport {
    /// Keys that went (every target of the key was deleted, or was gone already), each once,
    /// in the order given.
    pub deleted: Vec<String>,
    /// Why the others did not: one failure or more per key, each naming a key that was sent
    /// (a version's failure says which version).
    pub failed: Vec<ObjectError>,
    /// The first request that failed as a whole; its keys are in `failed` with this error.
    pub request_failed: Option<ObjectError>,
}

impl ObjectStore {
    /// The one deletion: `targets` in requests as `requests` says, each answer settled as the
    /// module documentation says. Never fails as a whole: what a failed request would have
    /// deleted is in [`DeleteReport::failed`], its error in [`DeleteReport::request_failed`].
    pub async fn delete_targets(&self, targets: &[Target], requests: Requests<'_>) -> DeleteReport {
        let per_request = requests.per_request.clamp(1, DELETE_BATCH);
        // Collected first: a lazy iterator of futures here makes the caller's future one the
        // compiler cannot prove `Send`.
        let sent: Vec<_> = targets
            .chunks(per_request)
            .map(|chunk| async move {
                let _permit = match requests.permits {
                    Some(permits) => Some(permits.acquire().await),
                    None => None,
                };
                (chunk, self.delete_request(chunk).await)
            })
            .collect();
        let answers: Vec<_> = futures::stream::iter(sent)
            .buffered(requests.in_flight.max(1))
            .collect()
            .await;
        settle_all(targets.iter().map(|(key, _)| key), answers)
    }

    /// What deleting `keys` means on this bucket: each key (its current version) on a plain
    /// bucket; on a versioned one every version and delete marker of each key (a key delete
    /// there keeps the bytes), so a version under a lock refuses (issue 29). A key without
    /// versions left has no target: it is gone already.
    pub async fn targets_of(&self, keys: &[String]) -> Result<Vec<Target>, ObjectError> {
        Ok(if self.is_versioned().await? {
            self.versions_of(keys)
                .await?
                .into_iter()
                .map(|(key, version)| (key, Some(version)))
                .collect()
        } else {
            keys.iter().map(|key| (key.clone(), None)).collect()
        })
    }

    /// Deletes `keys` whole ([`ObjectStore::targets_of`], then
    /// [`ObjectStore::delete_targets`]) and says which went: a key with nothing left to delete
    /// went already. `Err` only when the bucket's versioning or the keys' versions could not
    /// be read (nothing was deleted); a request that failed as a whole is in the report.
    pub async fn delete_keys_each(&self, keys: &[String]) -> Result<DeleteReport, ObjectError> {
        let targets = self.targets_of(keys).await?;
        let mut report = self.delete_targets(&targets, Requests::default()).await;
        report.deleted = went(keys.iter(), &report.failed);
        Ok(report)
    }

    /// Deletes the current version of each of `keys` (on a versioned bucket: adds a delete
    /// marker, the bytes stay) and returns the per-key failures; `Err` when a request failed
    /// as a whole (its keys are not known to be gone).
    pub async fn delete_batch(&self, keys: &[String]) -> Result<Vec<ObjectError>, ObjectError> {
        let targets: Vec<Target> = keys.iter().map(|key| (key.clone(), None)).collect();
        let report = self.delete_targets(&targets, Requests::default()).await;
        match report.request_failed {
            Some(err) => Err(err),
            None => Ok(report.failed),
        }
    }

    /// One `DeleteObjects` request for at most [`DELETE_BATCH`] targets: `Err` when it failed
    /// as a whole, else the per-key errors of its 200 answer.
    async fn delete_request(&self, batch: &[Target]) -> Answer {
        let Some((first, _)) = batch.first() else {
            return Ok(Vec::new());
        };
        let build_error = |message: String| ObjectError {
            operation: "delete",
            key: first.clone(),
            code: "Build".into(),
            message,
            permanent: true,
        };
        if batch.len() > DELETE_BATCH {
            return Err(build_error(format!(
                "{} keys in one request, more than {DELETE_BATCH}",
                batch.len()
            )));
        }
        let objects = batch
            .iter()
            .map(|(key, version)| {
                ObjectIdentifier::builder()
                    .key(key)
                    .set_version_id(version.clone())
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| build_error(err.to_string()))?;
        let delete = Delete::builder()
            .set_objects(Some(objects))
            .quiet(true)
            .build()
            .map_err(|err| build_error(err.to_string()))?;
        let out = self
            .client
            .delete_objects()
            .bucket(&self.bucket)
            .delete(delete)
            .send()
            .await
            .map_err(|err| object_error("delete", first, err))?;
        Ok(out
            .errors()
            .iter()
            .map(|e| {
                let code = e.code().unwrap_or("Unknown").to_string();
                let version = e
                    .version_id()
                    .map(|v| format!(" (version {v})"))
                    .unwrap_or_default();
                ObjectError {
                    operation: "delete",
                    key: e.key().unwrap_or_default().to_string(),
                    permanent: PERMANENT_CODES.contains(&code.as_str()),
                    code,
                    message: format!("{}{version}", e.message().unwrap_or_default()),
                }
            })
            .collect())
    }
}

/// How one `DeleteObjects` request ended: failed as a whole, or the per-key errors of its 200
/// answer.
type Answer = Result<Vec<ObjectError>, ObjectError>;

/// The report of a deletion of `keys` from the answers of its requests, each with the targets
/// it carried.
fn settle_all<'k>(
    keys: impl Iterator<Item = &'k String>,
    answers: Vec<(&[Target], Answer)>,
) -> DeleteReport {
    let mut report = DeleteReport::default();
    for (sent, answer) in answers {
        if let Err(err) = &answer {
            report.request_failed.get_or_insert_with(|| err.clone());
        }
        report.failed.extend(settle(sent, answer));
    }
    report.deleted = went(keys, &report.failed);
    report
}

/// The keys of `keys` that no failure names, each once, in order.
fn went<'k>(keys: impl Iterator<Item = &'k String>, failed: &[ObjectError]) -> Vec<String> {
    let failed: HashSet<&str> = failed.iter().map(|f| f.key.as_str()).collect();
    let mut seen = HashSet::new();
    keys.filter(|key| !failed.contains(key.as_str()) && seen.insert(key.as_str()))
        .cloned()
        .collect()
}

/// The failures of one request that carried `sent`, each naming a key it sent: the per-key
/// errors of its 200 answer; every key of it when the request failed as a whole, or when an
/// error names no key or one it did not send (such an error could be about any of them).
fn settle(sent: &[Target], answer: Result<Vec<ObjectError>, ObjectError>) -> Vec<ObjectError> {
    let mut keys: Vec<&str> = Vec::new();
    let mut seen = HashSet::new();
    for (key, _) in sent {
        if seen.insert(key.as_str()) {
            keys.push(key);
        }
    }
    let every_key = |error: &ObjectError, note: &str| -> Vec<ObjectError> {
        keys.iter()
            .map(|key| ObjectError {
                key: key.to_string(),
                message: format!("{}{note}", error.message),
                ..error.clone()
            })
            .collect()
    };
    let errors = match answer {
        Ok(errors) => errors,
        Err(err) => return every_key(&err, ""),
    };
    let (named, stray): (Vec<ObjectError>, Vec<ObjectError>) = errors
        .into_iter()
        .partition(|error| seen.contains(error.key.as_str()));
    let Some(stray) = stray.first() else {
        return named;
    };
    let note = match stray.key.as_str() {
        "" => " (an error that names no key: no key of the request counts as deleted)".into(),
        other => format!(
            " (an error about {other:?}, which the request did not send: no key of it counts \
             as deleted)"
        ),
    };
    let mut failed = named;
    let named: HashSet<String> = failed.iter().map(|f| f.key.clone()).collect();
    failed.extend(
        every_key(stray, &note)
            .into_iter()
            .filter(|f| !named.contains(&f.key)),
    );
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(key: &str, version: Option<&str>) -> Target {
        (key.to_string(), version.map(str::to_string))
    }

    fn error(key: &str, code: &str, permanent: bool) -> ObjectError {
        ObjectError {
            operation: "delete",
            key: key.to_string(),
            code: code.to_string(),
            message: "no".to_string(),
            permanent,
        }
    }

    fn keys_of(failed: &[ObjectError]) -> Vec<&str> {
        failed.iter().map(|f| f.key.as_str()).collect()
    }

    #[test]
    fn per_key_errors_of_a_200_answer_are_failures_not_deletions() {
        let sent = [target("a", None), target("b", None), target("c", None)];
        let report = settle_all(
            sent.iter().map(|(k, _)| k),
            vec![(&sent[..], Ok(vec![error("b", "AccessDenied", true)]))],
        );
        assert_eq!(report.deleted, ["a", "c"]);
        assert_eq!(keys_of(&report.failed), ["b"]);
        assert!(report.failed[0].permanent);
        assert!(report.request_failed.is_none());
    }

    /// A request that failed as a whole: its keys failed with its error; the other requests'
    /// keys still count (delete_keys_each returned only the error, and the keys an earlier
    /// request had deleted were reported as not deleted).
    #[test]
    fn a_failed_request_fails_its_keys_and_no_other() {
        let targets = [
            target("a", None),
            target("b", None),
            target("c", None),
            target("d", None),
        ];
        let outage = error("c", "Transport", false);
        let report = settle_all(
            targets.iter().map(|(k, _)| k),
            vec![
                (&targets[..2], Ok(Vec::new())),
                (&targets[2..], Err(outage.clone())),
            ],
        );
        assert_eq!(report.deleted, ["a", "b"]);
        assert_eq!(keys_of(&report.failed), ["c", "d"]);
        assert!(report
            .failed
            .iter()
            .all(|f| f.code == "Transport" && !f.permanent));
        assert_eq!(report.request_failed.unwrap().code, "Transport");
    }

    /// An error naming no key, or a key not sent, fails every key of its request and only of
    /// its request (delete_keys_each left that request's keys out of both lists, and on a
    /// versioned bucket left every key of the call out of `deleted`).
    #[test]
    fn an_error_about_no_key_sent_distrusts_its_request_only() {
        for stray in ["", "z"] {
            let targets = [
                target("a", None),
                target("b", None),
                target("c", None),
                target("d", None),
            ];
            let report = settle_all(
                targets.iter().map(|(k, _)| k),
                vec![
                    (&targets[..2], Ok(Vec::new())),
                    (
                        &targets[2..],
                        Ok(vec![
                            error(stray, "InternalError", false),
                            error("d", "AccessDenied", true),
                        ]),
                    ),
                ],
            );
            assert_eq!(report.deleted, ["a", "b"], "{stray:?}");
            // d keeps its own error; c gets the stray one.
            assert_eq!(keys_of(&report.failed), ["d", "c"], "{stray:?}");
            assert!(report.failed[0].permanent);
            assert_eq!(report.failed[1].code, "InternalError");
            assert!(report.failed[1].message.contains("counts as deleted"));
            assert!(report.request_failed.is_none());
        }
    }

    /// On a versioned bucket a key is several targets, maybe in several requests: it went only
    /// when all of them did.
    #[test]
    fn a_key_goes_when_every_version_does() {
        let targets = [
            target("a", Some("1")),
            target("a", Some("2")),
            target("b", Some("1")),
            target("b", Some("2")),
        ];
        let report = settle_all(
            targets.iter().map(|(k, _)| k),
            vec![
                (&targets[..1], Ok(Vec::new())),
                (&targets[1..3], Ok(vec![error("a", "AccessDenied", true)])),
                (&targets[3..], Ok(Vec::new())),
            ],
        );
        assert_eq!(report.deleted, ["b"]);
        assert_eq!(keys_of(&report.failed), ["a"]);
        // A whole-request failure names each key once, however many versions it carried.
        let failed = settle(&targets, Err(error("a", "Transport", false)));
        assert_eq!(keys_of(&failed), ["a", "b"]);
    }
}
