//! What a command's failure is: its message and the exit code it maps to (2 bad input, 1 the
//! fleet or a dependency failed, 77 a permission denial by NATS). Below every command's module,
//! so that none of them needs `cli.rs` for it.

use chrono::{DateTime, Utc};

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

/// The exit code of a permission denial by NATS (sysexits' EX_NOPERM).
pub const EXIT_DENIED: u8 = 77;

impl Failure {
    pub(crate) fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
    pub(crate) fn runtime(err: anyhow::Error) -> Failure {
        Failure {
            code: 1,
            message: format!("{err:#}"),
        }
    }
}

/// An RFC 3339 time given to `--<flag>`; a bad one is bad input (exit 2).
pub(crate) fn parse_time(flag: &str, text: &str) -> Result<DateTime<Utc>, Failure> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|err| Failure::input(format!("--{flag} {text:?} is not an RFC 3339 time: {err}")))
}
