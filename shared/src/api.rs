//! The request/reply API behind the `sexton` CLI: versioned subjects
//! (`sexton.v1.api.<resource>.<verb>`), JSON bodies with a schema version, and one reply shape
//! carrying either a result or an error with a stable code.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::names::{ClusterName, PlanName, ScheduleName};
use crate::records::{BackupOwner, OverlapPolicy, Policy, MAX_BACKFILL_TICKS};
use crate::wire::{Message, SCHEMA_VERSION};
use chrono::{DateTime, Utc};
use sexton_retention::FullEvery;
use sexton_schedule::{OnBlackout, Span, WindowSpec};

mod serve;

pub use serve::{decode_request, reply_value, serve_requests, Incoming, Listener};

fn v1() -> u32 {
    SCHEMA_VERSION
}

/// Error codes a client can branch on.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCode {
    /// The request is malformed or names invalid values; retrying will not help.
    Invalid,
    NotFound,
    AlreadyExists,
    /// Something changed underneath; retrying may help.
    Conflict,
    /// A dependency failed; retrying later may help.
    Unavailable,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// What a client may show beside the message: for a refusal that needs confirmation
    /// (`confirmation_required: true`), the preview of what the request would do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// A refusal of a request that would delete backups unless confirmed, with the preview.
    pub fn unconfirmed(message: impl Into<String>, preview: serde_json::Value) -> ApiError {
        let mut details = serde_json::json!({"confirmation_required": true});
        details["preview"] = preview;
        ApiError {
            code: ErrorCode::Invalid,
            message: message.into(),
            details: Some(details),
        }
    }

    /// Whether the request would go ahead with `confirm: true`.
    pub fn needs_confirmation(&self) -> bool {
        self.details
            .as_ref()
            .and_then(|d| d.get("confirmation_required"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Reply {
    #[serde(default = "v1")]
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
}

impl Message for Reply {
    const KIND: &'static str = "api reply";
}

impl Reply {
    pub fn from_result(result: Result<serde_json::Value, ApiError>) -> Reply {
        match result {
            Ok(value) => Reply {
                schema_version: SCHEMA_VERSION,
                result: Some(value),
                error: None,
            },
            Err(error) => Reply {
                schema_version: SCHEMA_VERSION,
                result: None,
                error: Some(error),
            },
        }
    }

    pub fn into_result(self) -> Result<serde_json::Value, ApiError> {
        match (self.error, self.result) {
            (Some(error), _) => Err(error),
            (None, Some(value)) => Ok(value),
            (None, None) => Ok(serde_json::Value::Null),
        }
    }
}

/// `schedule.create`: a new schedule as the user writes it. Unknown fields are refused, so a
/// misspelt option is an error rather than a silently ignored setting.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    pub cluster: ClusterName,
    pub plan: PlanName,
    pub cron: String,
    #[serde(default)]
    pub paused: bool,
    #[serde(default)]
    pub skip_immediately: Option<bool>,
    pub policy: Policy,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub remote_cleanup: bool,
    #[serde(default)]
    pub overlap_policy: OverlapPolicy,
    /// The old spelling of `starting_deadline`, in seconds; still accepted.
    #[serde(default)]
    pub starting_deadline_seconds: Option<u64>,
    /// Skip a missed run older than this (`15m`, `2h`, or seconds) instead of firing it late.
    #[serde(default)]
    pub starting_deadline: Option<Span>,
    /// A full backup, then N − 1 incrementals (a positive whole number, or a numeric string).
    #[serde(default)]
    pub full_every: Option<FullEvery>,
    /// The application's volumes, each with its own chain (seed 001).
    #[serde(default)]
    pub volumes: Vec<String>,
    /// What deleting the schedule does to its backup records (default `none`: they stay).
    #[serde(default)]
    pub backup_owner: BackupOwner,
    /// Scheduled restore tests (issue 13).
    #[serde(default)]
    pub verify: Option<crate::records::VerifySpec>,
    /// Every run moves by a fixed offset in `[0, jitter)` drawn from the schedule's name.
    #[serde(default)]
    pub jitter: Option<Span>,
    /// Blackout windows.
    #[serde(default)]
    pub exclude: Vec<WindowSpec>,
    /// What a run due inside a blackout window does: `skip` (default) or `defer`.
    #[serde(default)]
    pub on_blackout: OnBlackout,
    /// Pause the schedule after this many consecutive failed backups.
    #[serde(default)]
    pub pause_after_failures: Option<u32>,
    /// Free-form notes for executors, carried on every due-backup.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// The circuit breaker's settings for the schedule's group (docs/safety.md).
    #[serde(default)]
    pub breaker: Option<crate::breaker::BreakerSpec>,
    /// Create it even though its policy deletes backups of the group at once (the reply of a
    /// request without it says which, and nothing is created).
    #[serde(default)]
    pub confirm: bool,
    /// Say what creating it would do (the policy's effect on the group now); create nothing.
    #[serde(default)]
    pub dry_run: bool,
}

impl ScheduleSpec {
    /// The starting deadline in seconds, from either spelling.
    pub fn deadline_seconds(&self) -> Option<u64> {
        self.starting_deadline
            .map(Span::seconds)
            .or(self.starting_deadline_seconds)
    }
}

impl Message for ScheduleSpec {
    const KIND: &'static str = "schedule";

    fn validate(&self) -> Result<(), String> {
        // A backup id is `<schedule>-<14 digits>` (a backfill's adds `-backfill-<14 digits>`),
        // and ids stay within 128 characters.
        if self.name.as_str().len() > 63 {
            return Err("schedule name is longer than 63 characters".into());
        }
        validate_deadline_spellings(self.starting_deadline, self.starting_deadline_seconds)?;
        validate_deadline(self.deadline_seconds())?;
        validate_pause_after_failures(self.pause_after_failures)?;
        validate_volumes(&self.volumes)?;
        if let Some(verify) = &self.verify {
            verify.validate()?;
        }
        validate_labels(&self.labels)?;
        validate_annotations(&self.annotations)
    }
}

/// `schedule.get`, `schedule.describe`, `schedule.delete`, `schedule.pause`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ByName {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
}

impl Message for ByName {
    const KIND: &'static str = "request";
}

/// `schedule.update`: the fields to change; absent fields stay as they are.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleUpdate {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    #[serde(default)]
    pub cron: Option<String>,
    #[serde(default)]
    pub policy: Option<Policy>,
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub remote_cleanup: Option<bool>,
    #[serde(default)]
    pub overlap_policy: Option<OverlapPolicy>,
    #[serde(default)]
    pub starting_deadline_seconds: Option<u64>,
    /// Absent: unchanged; `null`: off again (fulls only without volumes, forever incremental
    /// with them); a number: the new cadence.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub full_every: Option<Option<FullEvery>>,
    /// Replaces the volume list: a volume added starts with a full at the next backup.
    #[serde(default)]
    pub volumes: Option<Vec<String>>,
    #[serde(default)]
    pub backup_owner: Option<BackupOwner>,
    /// Absent: unchanged; `null`: no deadline; a span (`15m`) or seconds: the new deadline.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub starting_deadline: Option<Option<Span>>,
    /// Absent: unchanged; `null`: no jitter; a span: the new jitter.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub jitter: Option<Option<Span>>,
    /// Replaces the blackout windows (`[]` removes them all).
    #[serde(default)]
    pub exclude: Option<Vec<WindowSpec>>,
    #[serde(default)]
    pub on_blackout: Option<OnBlackout>,
    /// Absent: unchanged; `null`: never pause on failures; a number: the new threshold.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub pause_after_failures: Option<Option<u32>>,
    /// Replaces the annotations.
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Absent: unchanged; `null`: no restore tests any more; an object: the new tests.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub verify: Option<Option<crate::records::VerifySpec>>,
    /// Policy keys to change, merged into the stored policy (`null` removes a key): what
    /// `sexton schedule update --keep-last 5` sends, so the other rules stay. `policy`
    /// replaces the whole policy instead; giving both is refused.
    #[serde(default)]
    pub policy_patch: Option<serde_json::Map<String, serde_json::Value>>,
    /// Absent: unchanged; `null`: the server's defaults; an object: the new settings.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub breaker: Option<Option<crate::breaker::BreakerSpec>>,
    /// Apply a policy change even though it deletes backups at once (the reply of a request
    /// without it says which, and nothing changes).
    #[serde(default)]
    pub confirm: bool,
    /// Say what the change would do (the policy's diff and what it deletes now); change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// `schedule.backfill` (`sexton schedule backfill NAME --from T --to T [--overlap skip|allow]`):
/// fire the schedule's ticks in `[from, to)` once each, now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBackfill {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// `skip`: no two backups of the schedule run at once, so each tick waits for the one
    /// before to report; `allow`: all at once. Default: the schedule's overlap policy.
    #[serde(default)]
    pub overlap: Option<OverlapPolicy>,
}

impl Message for ScheduleBackfill {
    const KIND: &'static str = "request";

    fn validate(&self) -> Result<(), String> {
        if self.from >= self.to {
            return Err(format!(
                "backfill from {} is not before to {}",
                self.from.to_rfc3339(),
                self.to.to_rfc3339()
            ));
        }
        Ok(())
    }
}

/// The most ticks a backfill fires, for messages.
pub const BACKFILL_TICK_LIMIT: usize = MAX_BACKFILL_TICKS;

/// `schedule.delete`. With `dry_run` the reply says what deleting would do to the schedule's
/// backup records, and nothing is written.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleDelete {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    #[serde(default)]
    pub dry_run: bool,
}

impl Message for ScheduleDelete {
    const KIND: &'static str = "request";
}

/// `cluster.forget` (`sexton cluster forget --cluster C [--remote] [--dry-run]`): removes every
/// backup record of a cluster that has no schedule left (the records `backup_owner: cluster`
/// leaves behind). The records only; with `remote` their objects too, through the deleter.
/// With `dry_run` the reply says what would happen and nothing is written.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterForget {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    #[serde(default)]
    pub remote: bool,
    #[serde(default)]
    pub dry_run: bool,
}

impl Message for ClusterForget {
    const KIND: &'static str = "request";
}

/// A field given (its value, `null` included) as `Some`; an absent one is `None` by
/// `#[serde(default)]`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

impl Message for ScheduleUpdate {
    const KIND: &'static str = "schedule update";

    fn validate(&self) -> Result<(), String> {
        validate_labels(self.labels.iter().flatten())?;
        validate_annotations(self.annotations.iter().flatten())?;
        validate_volumes(self.volumes.iter().flatten())?;
        if let Some(Some(verify)) = &self.verify {
            verify.validate()?;
        }
        if let Some(Some(_)) = self.starting_deadline {
            validate_deadline_spellings(
                self.starting_deadline.flatten(),
                self.starting_deadline_seconds,
            )?;
        }
        validate_deadline(self.starting_deadline.flatten().map(Span::seconds))?;
        validate_deadline(self.starting_deadline_seconds)?;
        if self.policy.is_some() && self.policy_patch.is_some() {
            return Err(
                "give policy (a replacement) or policy_patch (keys to change), not both".into(),
            );
        }
        validate_pause_after_failures(self.pause_after_failures.flatten())
    }
}

fn validate_labels<'a>(
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<(), String> {
    for (n, (key, value)) in labels.into_iter().enumerate() {
        if n >= 64 {
            return Err("more than 64 labels".into());
        }
        check_label_key("label", key)?;
        check_label_value(key, value)?;
    }
    Ok(())
}

/// The most bytes a schedule's annotations hold together (keys and values).
pub const MAX_ANNOTATION_BYTES: usize = 64 * 1024;

/// Annotations: Kubernetes' rules, label-style keys and values of any text (no control
/// characters: they end up in logs).
fn validate_annotations<'a>(
    annotations: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<(), String> {
    let mut bytes = 0;
    for (key, value) in annotations {
        check_label_key("annotation", key)?;
        if value.chars().any(char::is_control) {
            return Err(format!("annotation {key:?} holds a control character"));
        }
        bytes += key.len() + value.len();
        if bytes > MAX_ANNOTATION_BYTES {
            return Err(format!(
                "annotations hold more than {MAX_ANNOTATION_BYTES} bytes together"
            ));
        }
    }
    Ok(())
}

/// A Kubernetes label key: an optional DNS subdomain prefix (at most 253 characters,
/// lowercase letters, digits, `-` and `.`) and `/`, then a name of at most 63 letters,
/// digits, `-`, `_` and `.`, starting and ending with a letter or digit.
pub fn check_label_key(what: &str, key: &str) -> Result<(), String> {
    let shown: String = key.chars().take(80).collect();
    let refuse = |why: &str| {
        Err(format!(
            "{what} key {shown:?} is not a Kubernetes label key: {why} (expected [prefix/]name, \
             such as app or example.com/tier)"
        ))
    };
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() || prefix.len() > 253 {
            return refuse("the prefix before '/' must hold 1 to 253 characters");
        }
        let label_ok = |part: &str| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && part.as_bytes()[0].is_ascii_alphanumeric()
                && part.as_bytes()[part.len() - 1].is_ascii_alphanumeric()
        };
        if !prefix.split('.').all(label_ok) {
            return refuse(
                "the prefix before '/' must be a DNS subdomain (lowercase letters, digits, '-', \
                 dot-separated)",
            );
        }
    }
    if name.is_empty() || name.len() > 63 {
        return refuse("the name must hold 1 to 63 characters");
    }
    if !is_label_word(name) {
        return refuse(
            "the name may hold only letters, digits, '-', '_' and '.', and must start and end \
             with a letter or digit",
        );
    }
    Ok(())
}

/// A Kubernetes label value: empty, or at most 63 letters, digits, `-`, `_` and `.`, starting
/// and ending with a letter or digit.
pub fn check_label_value(key: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > 63 || !is_label_word(value) {
        let shown: String = value.chars().take(80).collect();
        return Err(format!(
            "label {key:?}: value {shown:?} is not a Kubernetes label value (at most 63 \
             letters, digits, '-', '_' and '.', starting and ending with a letter or digit); \
             free-form text belongs in an annotation"
        ));
    }
    Ok(())
}

fn is_label_word(word: &str) -> bool {
    let bytes = word.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The most volumes a schedule lists; a due-backup event carries one entry per volume.
pub const MAX_VOLUMES: usize = 256;

/// Volume names end up in object keys (`vol-<name>.img`): the same rules as other names,
/// no repeats, at most [`MAX_VOLUMES`].
pub fn validate_volumes<'a>(volumes: impl IntoIterator<Item = &'a String>) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for (n, volume) in volumes.into_iter().enumerate() {
        if n >= MAX_VOLUMES {
            return Err(format!("more than {MAX_VOLUMES} volumes"));
        }
        crate::names::check_name("volume name", volume).map_err(|e| e.to_string())?;
        if !seen.insert(volume.as_str()) {
            return Err(format!("volume {volume:?} is listed twice"));
        }
    }
    Ok(())
}

fn validate_deadline(seconds: Option<u64>) -> Result<(), String> {
    if seconds.is_some_and(|s| s == 0 || s > 366 * 86_400) {
        return Err(
            "starting_deadline_seconds must be between 1 and 31622400 (starting_deadline: 1s to 366d)"
                .into(),
        );
    }
    Ok(())
}

/// Both spellings of the starting deadline may be given only if they agree.
fn validate_deadline_spellings(span: Option<Span>, seconds: Option<u64>) -> Result<(), String> {
    match (span, seconds) {
        (Some(span), Some(seconds)) if span.seconds() != seconds => Err(format!(
            "starting_deadline {span} and starting_deadline_seconds {seconds} disagree; give one"
        )),
        _ => Ok(()),
    }
}

/// The most consecutive failures a schedule may wait for before it pauses.
pub const MAX_PAUSE_AFTER_FAILURES: u32 = 1_000;

fn validate_pause_after_failures(n: Option<u32>) -> Result<(), String> {
    if n.is_some_and(|n| n == 0 || n > MAX_PAUSE_AFTER_FAILURES) {
        return Err(format!(
            "pause_after_failures must be between 1 and {MAX_PAUSE_AFTER_FAILURES}"
        ));
    }
    Ok(())
}

/// `schedule.unpause`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Unpause {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    /// Overrides the schedule's own value and the server default for this unpause.
    #[serde(default)]
    pub skip_immediately: Option<bool>,
}

impl Message for Unpause {
    const KIND: &'static str = "request";
}

/// `schedule.list`, `backup.list`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ListFilter {
    #[serde(default = "v1")]
    pub schema_version: u32,
    #[serde(default)]
    pub cluster: Option<ClusterName>,
    #[serde(default)]
    pub plan: Option<PlanName>,
}

impl Message for ListFilter {
    const KIND: &'static str = "request";
}

/// `backup.describe` (`sexton backup describe ID --cluster C`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackupRef {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub id: crate::names::BackupId,
}

impl Message for BackupRef {
    const KIND: &'static str = "request";
}

/// `backup.hold` and `backup.release` (`sexton backup hold ID --cluster C --reason
/// restore:<id>`): a backup in use (a restore, a clone, a bootstrap) is kept with that reason
/// until the same reason is released.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackupHold {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub id: crate::names::BackupId,
    pub reason: String,
}

/// The most holds one backup carries.
pub const MAX_HOLDS: usize = 32;

impl Message for BackupHold {
    const KIND: &'static str = "request";

    fn validate(&self) -> Result<(), String> {
        check_hold_reason(&self.reason)
    }
}

/// A hold reason is `<what>:<id>`, such as `restore:r-42` or `clone:db2`: a lowercase word,
/// a colon, and an id of letters, digits, `.`, `-` and `_`; at most 160 characters.
pub fn check_hold_reason(reason: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "invalid hold reason {:?}: {why} (expected <what>:<id>, such as restore:r-42)",
            reason.chars().take(160).collect::<String>()
        ))
    };
    if reason.len() > 160 {
        return bad("longer than 160 characters");
    }
    let Some((what, id)) = reason.split_once(':') else {
        return bad("no ':'");
    };
    if what.is_empty()
        || !what.as_bytes()[0].is_ascii_lowercase()
        || !what
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return bad("what comes before ':' must be a lowercase word");
    }
    if id.is_empty()
        || !id.as_bytes()[0].is_ascii_alphanumeric()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return bad("the id after ':' may hold only letters, digits, '.', '-' and '_'");
    }
    Ok(())
}

/// `backup.delete` (`sexton backup delete ID --cluster C [--remote] [--force]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackupDelete {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub id: crate::names::BackupId,
    /// Remove the objects too, even if neither the backup nor its schedule opted in.
    #[serde(default)]
    pub remote: bool,
    /// Delete even the newest full backup, or one a kept backup depends on, now.
    #[serde(default)]
    pub force: bool,
    /// Say what deleting would do; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

impl Message for BackupDelete {
    const KIND: &'static str = "request";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Ok(())` accepted; `Err(text)`: refused with a message holding `text`.
    fn check(key: &str, value: &str, expected: Result<(), &str>) {
        let got = check_label_key("label", key).and_then(|()| check_label_value(key, value));
        match (&got, expected) {
            (Ok(()), Ok(())) => {}
            (Err(message), Err(fragment)) => {
                assert!(message.contains(fragment), "{key}={value}: {message}")
            }
            _ => panic!("{key}={value}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn labels_are_kubernetes_labels() {
        check("app", "db", Ok(()));
        check("example.com/tier", "gold", Ok(()));
        check("sexton.io/executor-fail-volumes", "pv1", Ok(()));
        check("a_b.c-d", "A_b.c-9", Ok(()));
        check("team", "", Ok(()));
        check(&"k".repeat(63), &"v".repeat(63), Ok(()));
        check("../x", "1", Err("must be a DNS subdomain"));
        check(
            "/x",
            "1",
            Err("the prefix before '/' must hold 1 to 253 characters"),
        );
        check("x/", "1", Err("the name must hold 1 to 63 characters"));
        check("a/b/c", "1", Err("the name may hold only"));
        check("Example.com/x", "1", Err("DNS subdomain"));
        check(
            "-app",
            "1",
            Err("must start and end with a letter or digit"),
        );
        check("app.", "1", Err("must start and end"));
        check(&"k".repeat(64), "v", Err("1 to 63 characters"));
        check("team", &"v".repeat(64), Err("not a Kubernetes label value"));
        check("team", "db,ops", Err("not a Kubernetes label value"));
        check("team", "*", Err("free-form text belongs in an annotation"));
        check("team", "db\0", Err("not a Kubernetes label value"));
    }

    #[test]
    fn annotations_take_any_text_under_label_keys() {
        let ok: BTreeMap<String, String> = [(
            "sexton.io/executor-holds".to_string(),
            "upgrade:pg16, *".to_string(),
        )]
        .into();
        assert_eq!(validate_annotations(&ok), Ok(()));
        let climbing: BTreeMap<String, String> = [("../x".to_string(), "v".to_string())].into();
        assert!(validate_annotations(&climbing).is_err());
        let control: BTreeMap<String, String> = [("a".to_string(), "\u{1b}[2J".to_string())].into();
        assert!(validate_annotations(&control).is_err());
        let big: BTreeMap<String, String> = [("a".to_string(), "x".repeat(70_000))].into();
        assert!(validate_annotations(&big).is_err());
    }
}
