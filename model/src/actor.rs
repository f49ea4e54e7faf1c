//! Who asked, as the client said: the CLI sends what it knows in request headers (the OS user
//! and host, the NATS user it connected as, the client). NATS does not tell a responder who
//! sent a request, so this is the client's word (docs/safety.md). Reading and writing the NATS
//! headers themselves is `sexton_shared::audit::ActorHeaders`.

use serde::{Deserialize, Serialize};

/// Who asked, as the client said (see the module header).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Actor {
    /// The person: `<os user>@<host>` as the CLI found them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The NATS user the client connected as (`nats.user`, or its credentials file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nats_user: Option<String>,
    /// The program: `sexton-cli/<version>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

impl Actor {
    pub const HEADER_USER: &'static str = "Sexton-User";
    pub const HEADER_NATS_USER: &'static str = "Sexton-Nats-User";
    pub const HEADER_CLIENT: &'static str = "Sexton-Client";

    /// The actor named by the headers `header` reads; fields missing (or longer than 200
    /// characters, or holding control characters) stay unknown.
    pub fn from_header_values<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Actor {
        let read = |name: &str| {
            header(name).map(str::to_string).filter(|text| {
                !text.is_empty() && text.len() <= 200 && !text.chars().any(char::is_control)
            })
        };
        Actor {
            user: read(Self::HEADER_USER),
            nats_user: read(Self::HEADER_NATS_USER),
            client: read(Self::HEADER_CLIENT),
        }
    }

    /// The headers a client sends to name itself, as (name, value) pairs: the fields known.
    pub fn header_values(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            (Self::HEADER_USER, &self.user),
            (Self::HEADER_NATS_USER, &self.nats_user),
            (Self::HEADER_CLIENT, &self.client),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.as_deref().map(|value| (name, value)))
    }

    /// One short line: `alice@db-admin (nats operator)`, `unknown` when nothing is known.
    pub fn describe(&self) -> String {
        let who = self.user.clone().unwrap_or_else(|| "unknown".into());
        match &self.nats_user {
            Some(nats_user) => format!("{who} (nats {nats_user})"),
            None => who,
        }
    }
}
