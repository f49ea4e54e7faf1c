//! What a copy job came to: done (copied, deferred, skipped) or failed (refused, wait, bad).
//! Below `copy` and `record`, which both speak it.

use sexton_model::wire::Incident;

/// Why a copy did not finish.
pub(crate) enum Failure {
    /// The job can never succeed (forged, stale, not asked for): refused, nothing copied.
    Refused(String),
    /// Try again later (a store that did not answer, a record that changed).
    Wait(String),
    /// The data is not what intake recorded (corrupt, missing): an incident, then retried
    /// slowly, since someone may mend the source.
    Bad(Incident),
}

impl From<anyhow::Error> for Failure {
    fn from(err: anyhow::Error) -> Failure {
        Failure::Wait(format!("{err:#}"))
    }
}

/// What a copy job came to, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Done {
    /// Whole at the location and recorded (or already there).
    Copied,
    /// Its rule's delay has not passed: the job is let go, and the periodic pass copies the
    /// backup once it has (the source holds it meanwhile).
    Deferred,
    /// Its `select: kept` rule's policy would delete the copy at once: recorded `skipped`.
    Skipped,
}

impl Done {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Done::Copied => "copied",
            Done::Deferred => "deferred",
            Done::Skipped => "skipped",
        }
    }
}
