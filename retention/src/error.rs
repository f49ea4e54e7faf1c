//! Why the engine could not make a plan, and its size limit.

/// The largest catalog the engine accepts (indices are `u32`, and the plan's lookup index
/// uses the top bit).
pub const MAX_BACKUPS: usize = (1 << 31) - 1;

/// Why a plan could not be made. None of these is retryable: the same catalog and policy give
/// the same error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("policy has no retention rule; a policy without rules would delete every backup")]
    NoRule,
    #[error("backup {id}: {message}")]
    InvalidBackup { id: String, message: String },
    #[error("backup {id}: duplicate id")]
    DuplicateId { id: String },
    #[error("backup {id}: parent chain loops back on itself")]
    ParentCycle { id: String },
    #[error("binlog segment {key}: {message}")]
    InvalidSegment { key: String, message: String },
    #[error("{what}: time is outside the supported range (years 1678 to 2261)")]
    TimeOutOfRange { what: String },
    #[error("catalog has {n_backups} backups; at most {MAX_BACKUPS} are supported")]
    TooLarge { n_backups: usize },
    #[error(
        "catalog has {n_artifacts} volume artifacts or more; at most {MAX_BACKUPS} are supported"
    )]
    TooManyVolumes { n_artifacts: usize },
    #[error(
        "refusing to delete every completed backup of the group; check the policy and the catalog"
    )]
    WouldDeleteAll,
}

impl PlanError {
    pub fn is_retryable(&self) -> bool {
        false
    }
}
