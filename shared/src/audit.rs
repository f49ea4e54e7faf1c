//! The audit trail: an append-only JetStream stream (`SEXTON_AUDIT`) of who decided, marked,
//! claimed and deleted what, and why; who asked for what through the API; which policy said so
//! (by hash); when the circuit breaker held a run and who let it through.
//!
//! Each service publishes on a subject that names it and the cluster,
//! `sexton.v1.audit.<service>.<cluster>` (`_` for none: no cluster name starts with `_`), so
//! NATS permissions let a service write only its own entries, and `sexton audit --cluster C`
//! reads one cluster with a subject filter. The stream refuses message deletes and purges
//! (`deny_delete`, `deny_purge`) and no Sexton user may update or purge it; entries age out
//! after `audit.retention`.
//!
//! Entries are cheap: one per retention run, one per deleter batch and step listing every
//! backup (and object) of the batch, split only when an entry would exceed [`MAX_ENTRY_BYTES`].
//! Entries are published together and their acknowledgements awaited together.
//!
//! Who a user is: the CLI sends what it knows in request headers ([`Actor`]: the OS user and
//! host, the NATS user it connected as, the client). NATS does not tell a responder who sent a
//! request, so this is the client's word; what the server proves is only that the sender holds
//! a NATS user allowed to call the API (docs/safety.md).

use std::time::Duration;

use async_nats::{jetstream, HeaderMap};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sexton_retention::breaker::Trip;

use crate::names::{ClusterName, PlanName};
use crate::topology::SUBJECT_ROOT;
use crate::wire::SCHEMA_VERSION;

mod user_action;

pub use user_action::{
    changes_nothing, request_arguments, request_cluster, user_action_entry, ActionOutcome,
};

/// The subject token of entries about no cluster (a plugin registration).
pub const NO_CLUSTER: &str = "_";

/// The largest entry published; a longer list is split over several entries. Well under the
/// server's default 1 MiB message limit.
pub const MAX_ENTRY_BYTES: usize = 256 * 1024;

/// Where `service` publishes its entries about `cluster`.
pub fn subject(service: &str, cluster: Option<&ClusterName>) -> String {
    format!(
        "{SUBJECT_ROOT}.audit.{service}.{}",
        cluster.map_or(NO_CLUSTER, ClusterName::as_str)
    )
}

/// The filter that reads every entry, or one cluster's.
pub fn filter(cluster: Option<&ClusterName>) -> String {
    match cluster {
        None => format!("{SUBJECT_ROOT}.audit.>"),
        Some(cluster) => format!("{SUBJECT_ROOT}.audit.*.{cluster}"),
    }
}

pub use sexton_model::actor::Actor;

/// An [`Actor`] to and from a NATS request's headers (the header names and the rules for what
/// is dropped are the model's: [`Actor::from_header_values`], [`Actor::header_values`]).
pub trait ActorHeaders {
    /// The actor a request's headers name; fields missing (or longer than 200 characters, or
    /// holding control characters) stay unknown.
    fn from_headers(headers: Option<&HeaderMap>) -> Actor;
    /// The headers a client sends to name itself.
    fn headers(&self) -> HeaderMap;
}

impl ActorHeaders for Actor {
    fn from_headers(headers: Option<&HeaderMap>) -> Actor {
        Actor::from_header_values(|name| {
            headers
                .and_then(|h| h.get(name))
                .map(|value| value.as_str())
        })
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in self.header_values() {
            headers.insert(name, value);
        }
        headers
    }
}

/// One entry of the audit stream.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AuditEntry {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub at: DateTime<Utc>,
    /// `scheduler`, `retention-worker` or `deleter`.
    pub service: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanName>,
    /// Who asked, for what a person asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Actor>,
    /// Part `n` of `m` when one list did not fit one entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<(usize, usize)>,
    #[serde(flatten)]
    pub event: AuditEvent,
}

fn v1() -> u32 {
    SCHEMA_VERSION
}

/// What happened. The tag is `kind`; a reader meets kinds it does not know as `Unknown`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AuditEvent {
    /// A retention run's plan for a group, before anything of it is marked: each backup kept,
    /// trimmed or deleted, with the reasons.
    RetentionDecision {
        policy_hash: String,
        decisions: Vec<Decided>,
    },
    /// Backups (or volumes of them) the run marked `expiring`, at the revisions their jobs name.
    BackupsMarked {
        policy_hash: String,
        backups: Vec<AuditBackup>,
    },
    /// The circuit breaker held the run: nothing of it was marked.
    BreakerHeld {
        policy_hash: String,
        trips: Vec<Trip>,
        deleting: Vec<String>,
        /// The location whose copies' plan was held (issue 28); none: primary.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        location: Option<String>,
    },
    /// A person approved the held run (`sexton retention approve`).
    BreakerApproved {
        trips: Vec<Trip>,
        deleting: Vec<String>,
        /// The location whose copies' plan was approved (issue 28); none: primary.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        location: Option<String>,
    },
    /// A held run went through on an approval, which is used up.
    BreakerReleased {
        approved_at: DateTime<Utc>,
        deleting: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        location: Option<String>,
    },
    /// Backups a deleter claimed (`deleting`), with the objects it is about to delete.
    BackupsClaimed { backups: Vec<AuditBackup> },
    /// Objects deleted from the bucket, by backup.
    ObjectsDeleted { backups: Vec<AuditBackup> },
    /// Catalog records removed (the backup is gone), or volumes dropped from a record.
    RecordsRemoved { backups: Vec<AuditBackup> },
    /// Delete plugins called before the objects went.
    PluginCalls { calls: Vec<PluginCallEntry> },
    /// An API request that changes something: the verb, its arguments, how it ended. Written
    /// by [`Audit::user_action`] alone.
    UserAction {
        verb: String,
        arguments: serde_json::Value,
        outcome: ActionOutcome,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A schedule created, changed or deleted: its settings before and after (without its
    /// status, which the scheduler rewrites on every run).
    ScheduleChanged {
        schedule: String,
        #[serde(default)]
        before: Option<serde_json::Value>,
        #[serde(default)]
        after: Option<serde_json::Value>,
    },
    /// Copies at a location that its retention run marked `expiring` (issue 28), at the
    /// revisions their jobs name.
    CopiesMarked {
        location: String,
        policy_hash: String,
        backups: Vec<AuditBackup>,
    },
    /// A copy a deleter claimed at a location, with the objects it is about to delete there.
    CopyClaimed {
        location: String,
        backups: Vec<AuditBackup>,
    },
    /// A copy's objects deleted at a location; `record_removed`: the record went with it (no
    /// place held the backup any more).
    CopyDeleted {
        location: String,
        backups: Vec<AuditBackup>,
        #[serde(default)]
        record_removed: bool,
    },
    /// Backups (or their copies at a location) a scrub found written over or under a delete
    /// marker while every recorded version is still there (issue 47): they keep counting.
    TamperingFound { backups: Vec<TamperedEntry> },
    #[serde(other)]
    Unknown,
}

/// One backup in a [`AuditEvent::TamperingFound`]: where (absent: primary), and what was done.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TamperedEntry {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub problems: Vec<String>,
}

impl AuditEvent {
    /// The `kind` word.
    pub fn kind(&self) -> &'static str {
        match self {
            AuditEvent::RetentionDecision { .. } => "retention-decision",
            AuditEvent::BackupsMarked { .. } => "backups-marked",
            AuditEvent::BreakerHeld { .. } => "breaker-held",
            AuditEvent::BreakerApproved { .. } => "breaker-approved",
            AuditEvent::BreakerReleased { .. } => "breaker-released",
            AuditEvent::BackupsClaimed { .. } => "backups-claimed",
            AuditEvent::ObjectsDeleted { .. } => "objects-deleted",
            AuditEvent::RecordsRemoved { .. } => "records-removed",
            AuditEvent::PluginCalls { .. } => "plugin-calls",
            AuditEvent::UserAction { .. } => "user-action",
            AuditEvent::ScheduleChanged { .. } => "schedule-changed",
            AuditEvent::CopiesMarked { .. } => "copies-marked",
            AuditEvent::CopyClaimed { .. } => "copy-claimed",
            AuditEvent::CopyDeleted { .. } => "copy-deleted",
            AuditEvent::TamperingFound { .. } => "tampering-found",
            AuditEvent::Unknown => "unknown",
        }
    }
}

/// One backup's verdict in a [`AuditEvent::RetentionDecision`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Decided {
    pub id: String,
    /// `keep`, `partial` or `delete`.
    pub verdict: String,
    pub reasons: Vec<String>,
}

/// One backup in a marking or deleting entry.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AuditBackup {
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// The hash of the policy that let it go (`None` for a user's delete of a group without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_hash: Option<String>,
    /// A partial deletion: the volumes that go.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<AuditObject>,
}

/// One object: its key, and its size when intake recorded it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AuditObject {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// One delete plugin called for one backup.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PluginCallEntry {
    pub backup: String,
    pub plugin: String,
    /// `ok`, `error` or `timeout`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl AuditEntry {
    /// Whether the entry names backup `id` (in a list, a decision, a trip's backups or a
    /// request's arguments).
    pub fn mentions(&self, id: &str) -> bool {
        let in_backups = |backups: &[AuditBackup]| backups.iter().any(|b| b.id == id);
        match &self.event {
            AuditEvent::RetentionDecision { decisions, .. } => decisions.iter().any(|d| d.id == id),
            AuditEvent::BackupsMarked { backups, .. }
            | AuditEvent::BackupsClaimed { backups }
            | AuditEvent::ObjectsDeleted { backups }
            | AuditEvent::RecordsRemoved { backups }
            | AuditEvent::CopiesMarked { backups, .. }
            | AuditEvent::CopyClaimed { backups, .. }
            | AuditEvent::CopyDeleted { backups, .. } => in_backups(backups),
            AuditEvent::BreakerHeld { deleting, .. }
            | AuditEvent::BreakerApproved { deleting, .. }
            | AuditEvent::BreakerReleased { deleting, .. } => deleting.iter().any(|d| d == id),
            AuditEvent::PluginCalls { calls } => calls.iter().any(|c| c.backup == id),
            AuditEvent::TamperingFound { backups } => backups.iter().any(|b| b.id == id),
            AuditEvent::UserAction { arguments, .. } => arguments
                .get("id")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|given| given == id),
            AuditEvent::ScheduleChanged { .. } | AuditEvent::Unknown => false,
        }
    }

    /// One line for people: what happened, to how many, and who asked.
    pub fn summary(&self) -> String {
        let ids = |backups: &[AuditBackup]| {
            backups
                .iter()
                .map(|b| b.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut line = match &self.event {
            AuditEvent::RetentionDecision {
                policy_hash,
                decisions,
            } => {
                let count =
                    |verdict: &str| decisions.iter().filter(|d| d.verdict == verdict).count();
                format!(
                    "policy {policy_hash}: keep {}, trim {}, delete {}",
                    count("keep"),
                    count("partial"),
                    count("delete")
                )
            }
            AuditEvent::BackupsMarked { backups, .. } => {
                format!("marked expiring: {}", ids(backups))
            }
            AuditEvent::BreakerHeld { trips, .. } => format!(
                "run held: {}",
                trips
                    .iter()
                    .map(|t| t.reason.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            AuditEvent::BreakerApproved { deleting, .. } => {
                format!("held run approved: {} backup(s) may go", deleting.len())
            }
            AuditEvent::BreakerReleased { deleting, .. } => {
                format!("approved run went through: {} backup(s)", deleting.len())
            }
            AuditEvent::BackupsClaimed { backups } => format!("claimed: {}", ids(backups)),
            AuditEvent::ObjectsDeleted { backups } => {
                let objects: usize = backups.iter().map(|b| b.objects.len()).sum();
                let bytes: u64 = backups
                    .iter()
                    .flat_map(|b| &b.objects)
                    .filter_map(|o| o.size)
                    .sum();
                format!(
                    "{objects} object(s), {bytes} bytes deleted of {}",
                    ids(backups)
                )
            }
            AuditEvent::RecordsRemoved { backups } => format!("records removed: {}", ids(backups)),
            AuditEvent::PluginCalls { calls } => format!(
                "{} plugin call(s), {} failed",
                calls.len(),
                calls.iter().filter(|c| c.outcome != "ok").count()
            ),
            AuditEvent::UserAction {
                verb,
                outcome,
                error,
                ..
            } => match error {
                Some(error) => format!("{verb}: {outcome}: {error}"),
                None => format!("{verb}: {outcome}"),
            },
            AuditEvent::ScheduleChanged {
                schedule,
                before,
                after,
            } => match (before, after) {
                (None, Some(_)) => format!("schedule {schedule} created"),
                (Some(_), None) => format!("schedule {schedule} deleted"),
                _ => format!("schedule {schedule} changed"),
            },
            AuditEvent::CopiesMarked {
                location, backups, ..
            } => format!("copies at {location} marked expiring: {}", ids(backups)),
            AuditEvent::CopyClaimed { location, backups } => {
                format!("copy at {location} claimed: {}", ids(backups))
            }
            AuditEvent::CopyDeleted {
                location,
                backups,
                record_removed,
            } => {
                let objects: usize = backups.iter().map(|b| b.objects.len()).sum();
                format!(
                    "{objects} object(s) of the copy at {location} deleted: {}{}",
                    ids(backups),
                    if *record_removed {
                        "; record removed (no place holds it)"
                    } else {
                        ""
                    }
                )
            }
            AuditEvent::TamperingFound { backups } => format!(
                "tampering found (recorded versions intact, still counted): {}",
                backups
                    .iter()
                    .map(|b| match &b.location {
                        Some(location) => format!("{} at {location}", b.id),
                        None => b.id.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            AuditEvent::Unknown => "an entry of a kind this build does not know".into(),
        };
        if let Some(actor) = &self.actor {
            line.push_str(&format!(" [by {}]", actor.describe()));
        }
        line
    }
}

/// The hash of a policy as audit entries name it: `sha256:` and 16 hex digits of its canonical
/// JSON (the stored form, so the same policy always has the same hash).
pub fn policy_hash(policy: &crate::records::Policy) -> String {
    let json = serde_json::to_vec(policy).expect("a policy serialises");
    format!("sha256:{}", &crate::digest::sha256_hex(&json)[..16])
}

/// Splits `items` into runs whose JSON stays under `max_bytes` together (a single larger item
/// keeps a run of its own). The entry around them costs little, so this is the entry's size.
pub fn chunked<T: Serialize>(items: Vec<T>, max_bytes: usize) -> Vec<Vec<T>> {
    let mut chunks: Vec<Vec<T>> = Vec::new();
    let mut current: Vec<T> = Vec::new();
    let mut bytes = 0;
    for item in items {
        let size = serde_json::to_vec(&item).map_or(0, |v| v.len()) + 1;
        if !current.is_empty() && bytes + size > max_bytes {
            chunks.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += size;
        current.push(item);
    }
    if !current.is_empty() || chunks.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// Why entries were not stored.
#[derive(Debug, thiserror::Error)]
#[error("audit entries not stored: {0}")]
pub struct AuditError(pub String);

impl AuditError {
    /// The stream was unreachable or slow: trying again later may work.
    pub fn is_retryable(&self) -> bool {
        true
    }
}

/// How long a service waits for the stream to store its entries.
const ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// A service's handle on the audit stream.
#[derive(Clone)]
pub struct Audit {
    jetstream: jetstream::Context,
    service: &'static str,
    /// `sexton_audit_entries_total{outcome}` of the service (`stored`, `failed`).
    entries: prometheus::IntCounterVec,
}

impl Audit {
    pub fn new(
        jetstream: jetstream::Context,
        service: &'static str,
        entries: prometheus::IntCounterVec,
    ) -> Audit {
        Audit {
            jetstream,
            service,
            entries,
        }
    }

    /// The counter every service registers as `sexton_audit_entries_total`.
    pub fn counter() -> prometheus::IntCounterVec {
        prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "sexton_audit_entries_total",
                "audit entries this service published, by outcome (stored, failed)",
            ),
            &["outcome"],
        )
        .expect("valid metric")
    }

    /// An entry of this service at `now`.
    pub fn entry(
        &self,
        cluster: Option<&ClusterName>,
        plan: Option<&PlanName>,
        event: AuditEvent,
    ) -> AuditEntry {
        AuditEntry {
            schema_version: SCHEMA_VERSION,
            at: Utc::now(),
            service: self.service.to_string(),
            cluster: cluster.cloned(),
            plan: plan.cloned(),
            actor: None,
            part: None,
            event,
        }
    }

    /// Entries over the runs of `items` ([`chunked`]): one when they fit, numbered parts
    /// otherwise.
    pub fn entries<T: Serialize>(
        &self,
        cluster: Option<&ClusterName>,
        plan: Option<&PlanName>,
        items: Vec<T>,
        event: impl Fn(Vec<T>) -> AuditEvent,
    ) -> Vec<AuditEntry> {
        let chunks = chunked(items, MAX_ENTRY_BYTES);
        let n = chunks.len();
        chunks
            .into_iter()
            .enumerate()
            .map(|(i, chunk)| {
                let mut entry = self.entry(cluster, plan, event(chunk));
                entry.part = (n > 1).then_some((i + 1, n));
                entry
            })
            .collect()
    }

    /// Stores `entries` that a person's request caused (a schedule changed, records or objects
    /// it removed, a held run approved), each naming who asked: [`Audit::record`] with the
    /// actor set on every part.
    pub async fn record_by(
        &self,
        actor: &Actor,
        mut entries: Vec<AuditEntry>,
    ) -> Result<(), AuditError> {
        for entry in &mut entries {
            entry.actor = Some(actor.clone());
        }
        self.record(entries).await
    }

    /// Publishes `entries` together and waits until the stream stored every one.
    pub async fn record(&self, entries: Vec<AuditEntry>) -> Result<(), AuditError> {
        self.record_with_id(entries, None).await
    }

    /// Like [`Audit::record`]; with a message id (one entry), a copy published again within
    /// the stream's de-duplication window is dropped (a held run seen by every replica).
    pub async fn record_with_id(
        &self,
        entries: Vec<AuditEntry>,
        message_id: Option<&str>,
    ) -> Result<(), AuditError> {
        let mut acks = Vec::with_capacity(entries.len());
        let mut failure = None;
        for entry in &entries {
            let subject = subject(self.service, entry.cluster.as_ref());
            let payload: bytes::Bytes = serde_json::to_vec(entry)
                .expect("audit entries serialise")
                .into();
            let mut message =
                async_nats::jetstream::message::PublishMessage::build().payload(payload);
            if let Some(id) = message_id {
                message = message.message_id(id);
            }
            match self.jetstream.send_publish(subject, message).await {
                Ok(ack) => acks.push(ack),
                Err(err) => {
                    failure.get_or_insert_with(|| err.to_string());
                }
            }
        }
        let mut stored = 0;
        for ack in acks {
            match tokio::time::timeout(ACK_TIMEOUT, ack).await {
                Ok(Ok(_)) => stored += 1,
                Ok(Err(err)) => {
                    failure.get_or_insert_with(|| err.to_string());
                }
                Err(_) => {
                    failure.get_or_insert_with(|| "no acknowledgement within 10s".into());
                }
            }
        }
        self.entries
            .with_label_values(&["stored"])
            .inc_by(stored as u64);
        let failed = entries.len() - stored;
        if failed > 0 {
            self.entries
                .with_label_values(&["failed"])
                .inc_by(failed as u64);
        }
        match failure {
            None => Ok(()),
            Some(why) => {
                tracing::warn!(service = self.service, failed, error = %why, "audit entries not stored");
                Err(AuditError(why))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use sexton_model::api::{ApiError, ErrorCode};

    use super::user_action::code_word;
    use super::*;

    #[test]
    fn lists_split_under_the_limit_and_never_lose_an_item() {
        let items: Vec<String> = (0..100).map(|i| format!("{i:08}")).collect();
        // Each item is 10 bytes of JSON plus the separator.
        let chunks = chunked(items.clone(), 55);
        assert_eq!(chunks.len(), 20);
        assert_eq!(chunks.concat(), items);
        assert_eq!(chunked(items.clone(), MAX_ENTRY_BYTES).len(), 1);
        assert_eq!(
            chunked(Vec::<String>::new(), 10),
            vec![Vec::<String>::new()]
        );
        // An item larger than the limit gets a chunk of its own.
        let big = vec!["x".repeat(100), "y".into()];
        assert_eq!(chunked(big, 50).len(), 2);
    }

    #[test]
    fn entries_read_back_and_unknown_kinds_are_tolerated() {
        let entry = AuditEntry {
            schema_version: 1,
            at: "2026-03-01T12:00:00Z".parse().unwrap(),
            service: "deleter".into(),
            cluster: Some("c1".parse().unwrap()),
            plan: None,
            actor: None,
            part: Some((1, 2)),
            event: AuditEvent::ObjectsDeleted {
                backups: vec![AuditBackup {
                    id: "b1".into(),
                    reasons: vec!["keep_last 1".into()],
                    policy_hash: Some("sha256:0123456789abcdef".into()),
                    objects: vec![AuditObject {
                        key: "backups/c1/p/b1/data".into(),
                        size: Some(5),
                    }],
                    ..Default::default()
                }],
            },
        };
        let json = serde_json::to_value(&entry).unwrap();
        assert_eq!(json["kind"], "objects-deleted");
        assert_eq!(serde_json::from_value::<AuditEntry>(json).unwrap(), entry);
        assert!(entry.mentions("b1"));
        assert!(!entry.mentions("b2"));
        assert_eq!(entry.summary(), "1 object(s), 5 bytes deleted of b1");
        let newer = serde_json::json!({"at": "2026-03-01T12:00:00Z", "service": "x",
                                       "kind": "something-new", "field": 1});
        let read: AuditEntry = serde_json::from_value(newer).unwrap();
        assert_eq!(read.event, AuditEvent::Unknown);
    }

    #[test]
    fn actors_travel_in_headers_and_junk_is_dropped() {
        let actor = Actor {
            user: Some("alice@db-admin".into()),
            nats_user: Some("operator".into()),
            client: Some("sexton-cli/0.1.0".into()),
        };
        assert_eq!(Actor::from_headers(Some(&actor.headers())), actor);
        assert_eq!(Actor::from_headers(None), Actor::default());
        let mut junk = HeaderMap::new();
        junk.insert(Actor::HEADER_USER, "x".repeat(300).as_str());
        assert_eq!(Actor::from_headers(Some(&junk)), Actor::default());
        assert_eq!(actor.describe(), "alice@db-admin (nats operator)");
    }

    #[test]
    fn subjects_name_the_service_and_the_cluster() {
        let c1: ClusterName = "c1".parse().unwrap();
        assert_eq!(subject("deleter", Some(&c1)), "sexton.v1.audit.deleter.c1");
        assert_eq!(subject("deleter", None), "sexton.v1.audit.deleter._");
        assert_eq!(filter(Some(&c1)), "sexton.v1.audit.*.c1");
        assert_eq!(filter(None), "sexton.v1.audit.>");
    }
    fn entry_of(json: Value) -> AuditEntry {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn outcome_words_are_the_api_codes_and_read_back() {
        for code in [
            ErrorCode::Invalid,
            ErrorCode::NotFound,
            ErrorCode::AlreadyExists,
            ErrorCode::Conflict,
            ErrorCode::Unavailable,
        ] {
            // The API's spelling, whatever serde calls it.
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                Value::String(code_word(code).into())
            );
            let outcome = ActionOutcome::Failed(code);
            assert_eq!(ActionOutcome::from_word(outcome.word()), outcome);
        }
        assert_eq!(ActionOutcome::from_word("done"), ActionOutcome::Done);
        assert_eq!(
            ActionOutcome::from_word("refused, needs confirmation"),
            ActionOutcome::NeedsConfirmation
        );
        let (outcome, error) = ActionOutcome::of(&Ok(Value::Null));
        assert_eq!((outcome.word(), error), ("done", None));
        let (outcome, error) = ActionOutcome::of(&Err(ApiError::new(
            ErrorCode::NotFound,
            "plugin p not found",
        )));
        assert_eq!(outcome.word(), "not-found");
        assert_eq!(error.as_deref(), Some("plugin p not found"));
        let (outcome, _) = ActionOutcome::of(&Err(ApiError::unconfirmed(
            "would delete 3 backups",
            serde_json::json!({}),
        )));
        assert_eq!(outcome.word(), "refused, needs confirmation");
    }

    /// Entries stored before the one writer: the deleter's `notfound` and `alreadyexists`, the
    /// scheduler's words, and a word no build wrote; each decodes, and shows as the code it
    /// meant (or as written).
    #[test]
    fn user_actions_of_either_older_writer_still_decode_and_show() {
        let old = |service: &str, outcome: &str| {
            entry_of(serde_json::json!({
                "schema_version": 1, "at": "2026-03-01T12:00:00Z", "service": service,
                "cluster": "c1", "actor": {"user": "alice@h"}, "kind": "user-action",
                "verb": "plugin.unregister", "arguments": {"name": "p"},
                "outcome": outcome, "error": "plugin p not found",
            }))
        };
        let outcome = |entry: &AuditEntry| match &entry.event {
            AuditEvent::UserAction { outcome, .. } => outcome.clone(),
            other => panic!("{other:?}"),
        };
        for (service, word, read, shown) in [
            (
                "deleter",
                "notfound",
                ActionOutcome::Failed(ErrorCode::NotFound),
                "not-found",
            ),
            (
                "deleter",
                "alreadyexists",
                ActionOutcome::Failed(ErrorCode::AlreadyExists),
                "already-exists",
            ),
            (
                "deleter",
                "unavailable",
                ActionOutcome::Failed(ErrorCode::Unavailable),
                "unavailable",
            ),
            (
                "scheduler",
                "not-found",
                ActionOutcome::Failed(ErrorCode::NotFound),
                "not-found",
            ),
            (
                "scheduler",
                "refused, needs confirmation",
                ActionOutcome::NeedsConfirmation,
                "refused, needs confirmation",
            ),
            ("scheduler", "done", ActionOutcome::Done, "done"),
            (
                "scheduler",
                "exploded",
                ActionOutcome::Other("exploded".into()),
                "exploded",
            ),
        ] {
            let entry = old(service, word);
            assert_eq!(outcome(&entry), read, "{word}");
            assert_eq!(
                entry.summary(),
                format!("plugin.unregister: {shown}: plugin p not found [by alice@h]")
            );
            // Written again (`sexton audit -o json`): the one spelling.
            assert_eq!(serde_json::to_value(&entry).unwrap()["outcome"], shown);
            assert_eq!(entry_of(serde_json::to_value(&entry).unwrap()), entry);
        }
    }

    #[test]
    fn one_user_action_entry_for_either_service() {
        let actor = Actor {
            user: Some("alice@h".into()),
            nats_user: None,
            client: Some("sexton-cli/0.1.0".into()),
        };
        let c1: ClusterName = "c1".parse().unwrap();
        let failed = Err(ApiError::new(ErrorCode::NotFound, "plugin p not found"));
        let entry = user_action_entry(
            "deleter",
            "plugin.unregister",
            request_arguments(br#"{"name":"p"}"#),
            Some(&c1),
            &actor,
            &failed,
        );
        assert_eq!(entry.service, "deleter");
        assert_eq!(entry.cluster.as_ref(), Some(&c1));
        assert_eq!(entry.plan, None);
        assert_eq!(entry.part, None);
        assert_eq!(entry.actor.as_ref(), Some(&actor));
        let json = serde_json::to_value(&entry).unwrap();
        assert_eq!(json["kind"], "user-action");
        assert_eq!(json["verb"], "plugin.unregister");
        assert_eq!(json["arguments"], serde_json::json!({"name": "p"}));
        assert_eq!(json["outcome"], "not-found");
        assert_eq!(json["error"], "plugin p not found");
        // Nobody known is still an actor: `[by unknown]`.
        let done = user_action_entry(
            "scheduler",
            "schedule.pause",
            Value::Null,
            None,
            &Actor::default(),
            &Ok(Value::Null),
        );
        assert_eq!(done.actor, Some(Actor::default()));
        assert_eq!(done.summary(), "schedule.pause: done [by unknown]");
        assert!(serde_json::to_value(&done).unwrap().get("error").is_none());
    }

    #[test]
    fn what_a_request_is_audited_with() {
        // Arguments: the JSON, or the first 1000 bytes as text.
        assert_eq!(
            request_arguments(br#"{"cluster":"c1"}"#),
            serde_json::json!({"cluster": "c1"})
        );
        let junk = vec![b'x'; 1500];
        assert_eq!(request_arguments(&junk), Value::String("x".repeat(1000)));
        // Reads and dry runs change nothing; anything else, an unknown verb too, is audited.
        let reads = ["plugin.list"];
        assert!(changes_nothing("plugin.list", &Value::Null, &reads));
        assert!(changes_nothing(
            "orphans.delete",
            &serde_json::json!({"dry_run": true}),
            &reads
        ));
        assert!(!changes_nothing(
            "orphans.delete",
            &serde_json::json!({"dry_run": false}),
            &reads
        ));
        assert!(!changes_nothing("plugin.frob", &Value::Null, &reads));
        // Filed under the cluster named, else the answer's schedule's, else none.
        let c1: ClusterName = "c1".parse().unwrap();
        let named = serde_json::json!({"cluster": "c1"});
        assert_eq!(request_cluster(&named, &Ok(Value::Null)), Some(c1.clone()));
        let created = Ok(serde_json::json!({"schedule": {"cluster": "c1"}}));
        assert_eq!(
            request_cluster(&serde_json::json!({"name": "s"}), &created),
            Some(c1)
        );
        let refused = Err(ApiError::new(ErrorCode::Invalid, "no"));
        assert_eq!(
            request_cluster(&serde_json::json!({"name": "s"}), &refused),
            None
        );
        assert_eq!(
            request_cluster(&serde_json::json!({"cluster": "../x"}), &Ok(Value::Null)),
            None
        );
    }
}
