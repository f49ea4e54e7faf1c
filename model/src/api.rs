//! The request/reply API behind the `sexton` CLI: versioned subjects
//! (`sexton.v1.api.<resource>.<verb>`), JSON bodies with a schema version, and one reply shape
//! carrying either a result or an error with a stable code.
//!
//! Every request type lives here, one submodule per area (`schedule`, `backup`, `cluster`, ...),
//! re-exported at `sexton_model::api::*` (and at `sexton_shared::api::*`, beside the serve
//! loop): the services decode them and the CLI builds them. Beside them, the answers the CLI reads to decide something (what a destructive dry run
//! would delete, a restore test asked for): the services serialise these very types.

use serde::{Deserialize, Serialize};

use crate::wire::{Message, SCHEMA_VERSION};

mod backup;
mod binlog;
mod catalog;
mod cluster;
mod location;
mod orphans;
mod plugin;
mod retention;
mod schedule;

pub use crate::checks::{
    check_hold_reason, check_label_key, check_label_value, validate_volumes, MAX_ANNOTATION_BYTES,
    MAX_HOLDS, MAX_PAUSE_AFTER_FAILURES, MAX_VOLUMES,
};
pub use backup::{
    BackupDelete, BackupDeleted, BackupDescription, BackupHold, BackupRef, BackupTaken,
    ChainRequest, DeleteAction, DrillAsked, DrillRequest, RestorablePlace, RestoreChain,
    RetentionVerdict, VerifyAsked, VerifyRequest, VolumeFate,
};
pub use binlog::StatusRequest;
pub use catalog::{
    AdoptRefusal, AdoptReport, AdoptRequest, Adopted, ImportRequest, ScrubRequest, Stranded,
    StrandedGroup, StrandedRequest,
};
pub use cluster::{ClusterForget, ClusterForgotten};
pub use location::{LocationList, LocationLock, LocationSpec};
pub use orphans::{FailedKey, OrphansFound, OrphansRequest, DEFAULT_GRACE};
pub use plugin::{
    check_plugin_subject, PluginByName, PluginList, PluginSpec, PLUGIN_SUBJECT_PREFIX,
};
pub use retention::{
    ApprovalView, ApproveRequest, BreakerState, LockedOnly, PreviewGroup, PreviewRequest,
    RecoveryRequest,
};
pub use schedule::{
    drifted, without_apply_annotations, ByName, KeptRecord, LastSkip, ListFilter, ScheduleBackfill,
    ScheduleChangeNotes, ScheduleDelete, ScheduleDeleted, ScheduleDescription, ScheduleSpec,
    ScheduleUpdate, TimingView, Unpause, BACKFILL_TICK_LIMIT, LAST_APPLIED, MANAGED_BY, MANAGER,
};

pub(crate) fn v1() -> u32 {
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

/// A field given (its value, `null` included) as `Some`; an absent one is `None` by
/// `#[serde(default)]`.
pub(crate) fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}
