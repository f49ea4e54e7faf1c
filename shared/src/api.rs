//! The request/reply API: its requests, replies and error codes are `sexton_model::api`,
//! re-exported here beside the one serve loop every service answers its verbs with.

pub use sexton_model::api::*;

mod serve;

pub use serve::{decode_request, reply_value, serve_requests, Incoming, Listener};
