//! The `user-action` entries: what a person asked through any service's API, with how it
//! ended ([`ActionOutcome`], one spelling whichever service answered, older spellings read
//! back), its arguments and the cluster it is filed under; [`Audit::user_action`] is their one
//! writer.

use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::Value;
// The model's, not `crate::api`: the serve loop there reads the actor from this module.
use sexton_model::api::{ApiError, ErrorCode};

use super::{Actor, Audit, AuditEntry, AuditEvent};
use crate::names::ClusterName;
use crate::wire::SCHEMA_VERSION;

/// How a user's request ended, as its `user-action` entry says it: one spelling, whichever
/// service answered. `done`; `refused, needs confirmation` (a request that would delete,
/// sent without `confirm`); otherwise the API's error code as the API spells it (`invalid`,
/// `not-found`, `already-exists`, `conflict`, `unavailable`).
///
/// Entries already in the stream read as they were meant: until both services wrote through
/// [`Audit::user_action`] the deleter spelled codes without their hyphen (`notfound`,
/// `alreadyexists`); those read (and show) as the codes they name. A word this build does not
/// know stays as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionOutcome {
    Done,
    NeedsConfirmation,
    Failed(ErrorCode),
    /// A word this build does not know, as written.
    Other(String),
}

impl ActionOutcome {
    const DONE: &'static str = "done";
    const NEEDS_CONFIRMATION: &'static str = "refused, needs confirmation";
    /// The deleter's spellings of the codes whose words differ, before the one writer.
    const LEGACY: [(&'static str, ErrorCode); 2] = [
        ("notfound", ErrorCode::NotFound),
        ("alreadyexists", ErrorCode::AlreadyExists),
    ];

    /// How a request that answered `result` ended, and the error's message when it failed.
    pub fn of(result: &Result<Value, ApiError>) -> (ActionOutcome, Option<String>) {
        match result {
            Ok(_) => (ActionOutcome::Done, None),
            Err(err) if err.needs_confirmation() => {
                (ActionOutcome::NeedsConfirmation, Some(err.message.clone()))
            }
            Err(err) => (ActionOutcome::Failed(err.code), Some(err.message.clone())),
        }
    }

    /// The word an entry holds.
    pub fn word(&self) -> &str {
        match self {
            ActionOutcome::Done => Self::DONE,
            ActionOutcome::NeedsConfirmation => Self::NEEDS_CONFIRMATION,
            ActionOutcome::Failed(code) => code_word(*code),
            ActionOutcome::Other(word) => word,
        }
    }

    /// An entry's word read back: today's spellings, the deleter's older ones, or any other
    /// word as written.
    pub fn from_word(word: &str) -> ActionOutcome {
        if word == Self::DONE {
            return ActionOutcome::Done;
        }
        if word == Self::NEEDS_CONFIRMATION {
            return ActionOutcome::NeedsConfirmation;
        }
        // The API's own reading of its codes, then the older spellings.
        let code = serde_json::from_value::<ErrorCode>(Value::String(word.to_string()))
            .ok()
            .or_else(|| {
                Self::LEGACY
                    .into_iter()
                    .find(|(legacy, _)| *legacy == word)
                    .map(|(_, code)| code)
            });
        match code {
            Some(code) => ActionOutcome::Failed(code),
            None => ActionOutcome::Other(word.to_string()),
        }
    }
}

/// An error code's word in an entry: the API's own spelling (its serde name), which a test
/// holds this to.
pub(super) fn code_word(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Invalid => "invalid",
        ErrorCode::NotFound => "not-found",
        ErrorCode::AlreadyExists => "already-exists",
        ErrorCode::Conflict => "conflict",
        ErrorCode::Unavailable => "unavailable",
    }
}

impl std::fmt::Display for ActionOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

impl Serialize for ActionOutcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.word())
    }
}

impl<'de> Deserialize<'de> for ActionOutcome {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let word = String::deserialize(deserializer)?;
        Ok(ActionOutcome::from_word(&word))
    }
}

/// A request body as its `user-action` entry's arguments: the JSON sent, or its first 1000
/// bytes as text when it is not JSON (a malformed request is audited with what it held).
pub fn request_arguments(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|_| {
        Value::String(String::from_utf8_lossy(&body[..body.len().min(1000)]).into_owned())
    })
}

/// Whether a request changes nothing, and so has no `user-action` entry: a verb among the
/// service's `reads`, or a dry run (`"dry_run": true`). Any other verb is audited, one the
/// service does not know included.
pub fn changes_nothing(verb: &str, arguments: &Value, reads: &[&str]) -> bool {
    reads.contains(&verb) || arguments.get("dry_run") == Some(&Value::Bool(true))
}

/// The cluster a request's entry is filed under as far as the request shows it, so that
/// `sexton audit --cluster` finds it: the `cluster` its arguments name, else the cluster of the
/// schedule its answer holds (a schedule created).
pub fn request_cluster(arguments: &Value, result: &Result<Value, ApiError>) -> Option<ClusterName> {
    arguments
        .get("cluster")
        .and_then(Value::as_str)
        .or_else(|| {
            result
                .as_ref()
                .ok()
                .and_then(|reply| reply.pointer("/schedule/cluster"))
                .and_then(Value::as_str)
        })
        .and_then(|name| name.parse::<ClusterName>().ok())
}

/// The `user-action` entry `service` writes for a request: who asked, the verb, the arguments,
/// how it ended (the error's message beside a failure), filed under `cluster`.
pub fn user_action_entry(
    service: &str,
    verb: &str,
    arguments: Value,
    cluster: Option<&ClusterName>,
    actor: &Actor,
    result: &Result<Value, ApiError>,
) -> AuditEntry {
    let (outcome, error) = ActionOutcome::of(result);
    AuditEntry {
        schema_version: SCHEMA_VERSION,
        at: Utc::now(),
        service: service.to_string(),
        cluster: cluster.cloned(),
        plan: None,
        actor: Some(actor.clone()),
        part: None,
        event: AuditEvent::UserAction {
            verb: verb.to_string(),
            arguments,
            outcome,
            error,
        },
    }
}

impl Audit {
    /// The one writer of `user-action` entries, for every service's API: nothing for a request
    /// that changes nothing ([`changes_nothing`] with the service's read-only verbs); otherwise
    /// [`user_action_entry`], filed under [`request_cluster`] or, when the request shows none,
    /// `filed_under` (the scheduler's lookup of a schedule named alone), and stored before the
    /// reply goes, so a client that reads the audit after an answer finds its request there.
    /// Best effort: an entry not stored is logged and counted, and the reply still goes.
    pub async fn user_action(
        &self,
        verb: &str,
        arguments: Value,
        reads: &[&str],
        filed_under: Option<ClusterName>,
        actor: &Actor,
        result: &Result<Value, ApiError>,
    ) {
        if changes_nothing(verb, &arguments, reads) {
            return;
        }
        let cluster = request_cluster(&arguments, result).or(filed_under);
        let entry = user_action_entry(
            self.service,
            verb,
            arguments,
            cluster.as_ref(),
            actor,
            result,
        );
        let _ = self.record(vec![entry]).await;
    }
}
