//! A request's values parsed as its service parses them (a name, an id, a duration, a flag's
//! word), so that one the service would refuse is refused before anything is sent, in the
//! service's words and with its exit code (2). Used by the requests and the schedule bodies.

use std::{fmt::Display, str::FromStr};

use serde::de::DeserializeOwned;
use serde_json::Value;
use sexton_model::wire::Message;

use crate::failure::Failure;

/// A value of request `M` parsed as its service parses it (a name, an id, a duration): one the
/// service would refuse is refused here with the service's words (`invalid request: invalid
/// schedule name "../x": ...`), as bad input.
pub(super) fn parsed<M: Message, T>(value: &str) -> Result<T, Failure>
where
    T: FromStr,
    T::Err: Display,
{
    value.parse().map_err(refused_as::<M>)
}

/// An optional value of request `M`, parsed as [`parsed`] does.
pub(super) fn parsed_opt<M: Message, T>(value: Option<&String>) -> Result<Option<T>, Failure>
where
    T: FromStr,
    T::Err: Display,
{
    value.map(|value| parsed::<M, T>(value)).transpose()
}

/// A backup's `--cluster`, once given or found from its id ([`super::resolve_cluster`]).
pub(super) fn given_cluster(cluster: &Option<String>) -> Result<&str, Failure> {
    cluster
        .as_deref()
        .ok_or_else(|| Failure::input("--cluster: the cluster the backup belongs to is needed"))
}

/// A flag's word (`skip`, `allow`, `schedule`, ...) as the field of request `M` it sets, read
/// as the service reads the field.
pub(super) fn choice<M: Message, T: DeserializeOwned>(word: &str) -> Result<T, Failure> {
    serde_json::from_value(Value::String(word.to_string())).map_err(refused_as::<M>)
}

/// A refusal of request `M` before it is sent, in the words of the service's decoding.
pub(super) fn refused_as<M: Message>(err: impl Display) -> Failure {
    Failure::input(format!("invalid {}: {err}", M::KIND))
}
