//! The CLI's half of the safety envelope (docs/safety.md): who is asking (sent with every
//! request, for the audit), asking before a destructive command acts (on a terminal; `--yes`
//! otherwise), and showing what a policy change deletes and why a retention run is held.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::sync::OnceLock;

use serde_json::Value;
use sexton_shared::{audit::Actor, config::Config};

use crate::cli::Failure;

static ACTOR: OnceLock<Actor> = OnceLock::new();

/// Who runs this command, as the audit will name them: the OS user and host, the NATS user of
/// the configuration (or its credentials file), and this program.
pub fn actor_of(config: &Config) -> Actor {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty());
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty());
    let user = match (user, host) {
        (Some(user), Some(host)) => Some(format!("{user}@{host}")),
        (Some(user), None) => Some(user),
        (None, Some(host)) => Some(format!("unknown@{host}")),
        (None, None) => None,
    };
    let nats_user = config.nats.user.clone().or_else(|| {
        config.nats.creds_file.as_ref().map(|path| {
            let name = std::path::Path::new(path)
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_else(|| path.clone());
            format!("creds:{name}")
        })
    });
    Actor {
        user,
        nats_user,
        client: Some(format!("sexton-cli/{}", env!("CARGO_PKG_VERSION"))),
    }
}

/// Remembers who runs this command (once the configuration is read).
pub fn set_actor(config: &Config) {
    let _ = ACTOR.set(actor_of(config));
}

/// The headers every API request carries.
pub fn actor_headers() -> async_nats::HeaderMap {
    ACTOR.get().cloned().unwrap_or_default().headers()
}

/// Goes ahead only if the user says so: `--yes`, or `y` typed on a terminal. Without a terminal
/// and without `--yes` it refuses (exit code 2), so a script never deletes by accident.
pub fn confirm(question: &str, yes: bool) -> Result<(), Failure> {
    if yes {
        return Ok(());
    }
    let stdin = std::io::stdin();
    if !(stdin.is_terminal() && std::io::stderr().is_terminal()) {
        return Err(Failure::input(format!(
            "{question} Refused: no terminal to ask on; add --yes to go ahead (nothing was changed)"
        )));
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .map_err(|err| Failure::input(format!("cannot read the answer: {err}")))?;
    match answer.trim() {
        "y" | "Y" | "yes" | "YES" | "Yes" => Ok(()),
        _ => Err(Failure {
            code: 1,
            message: "cancelled; nothing was changed".into(),
        }),
    }
}

fn text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "(none)".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn reasons(value: Option<&Value>) -> String {
    value
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|r| text(Some(r)))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

/// A policy effect (`guard::PolicyEffect` as JSON) on stderr: the diff, then what it deletes.
pub fn print_policy_change(what: &str, effect: &Value) {
    if effect.is_null() {
        return;
    }
    let diff = effect.get("diff").and_then(Value::as_array);
    let deleted = effect.get("deleted").and_then(Value::as_array);
    let volumes = effect.get("volumes_deleted").and_then(Value::as_array);
    eprintln!("{what}:");
    match (effect.get("before"), effect.get("after")) {
        (_, _) if diff.is_some_and(|d| !d.is_empty()) => {
            for line in diff.into_iter().flatten() {
                eprintln!(
                    "  {}: {} -> {}",
                    text(line.get("key")),
                    text(line.get("before")),
                    text(line.get("after"))
                );
            }
        }
        (before, after) => {
            let side = |policy: Option<&Value>, unplanned: Option<&Value>| match unplanned {
                Some(Value::String(why)) => format!("not planned ({why})"),
                _ => text(policy),
            };
            eprintln!(
                "  policy: {} -> {}",
                side(before, effect.get("before_unplanned")),
                side(after, effect.get("after_unplanned"))
            );
        }
    }
    eprintln!(
        "  backups kept whole: {} -> {}",
        text(effect.get("n_keep_before")),
        text(effect.get("n_keep_after"))
    );
    match deleted.map(Vec::len).unwrap_or(0) {
        0 => eprintln!("  deletes nothing kept now"),
        n => {
            eprintln!("  deletes {n} backup(s) kept now:");
            for backup in deleted.into_iter().flatten() {
                eprintln!(
                    "    {} (completed {}): kept now by {}; would go: {}",
                    text(backup.get("id")),
                    text(backup.get("completed_at")),
                    reasons(backup.get("current_reasons")),
                    reasons(backup.get("proposed_reasons"))
                );
            }
        }
    }
    for volume in volumes.into_iter().flatten() {
        eprintln!(
            "    volume {} of {} goes",
            text(volume.get("volume")),
            text(volume.get("id"))
        );
    }
}

/// The breaker's state of one group (the preview's `breaker`), as lines.
pub fn held_lines(breaker: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    let held = breaker
        .get("held")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let deleting = breaker
        .get("deleting")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    lines.push(if held {
        format!("HELD by the circuit breaker: nothing is marked ({deleting} backup(s) would go)")
    } else {
        format!("tripped, but approved: the next run deletes {deleting} backup(s)")
    });
    for trip in breaker
        .get("trips")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        lines.push(format!(
            "  {}: {}",
            text(trip.get("kind")),
            text(trip.get("reason"))
        ));
    }
    if let Some(approval) = breaker.get("approval") {
        let by = approval
            .get("by")
            .and_then(|b| b.get("user"))
            .map(|u| text(Some(u)))
            .unwrap_or_else(|| "unknown".into());
        match approval.get("why_not") {
            Some(Value::String(why)) => lines.push(format!(
                "  an approval by {by} at {} does not cover it: {why}",
                text(approval.get("approved_at"))
            )),
            _ => lines.push(format!(
                "  approved by {by} at {}",
                text(approval.get("approved_at"))
            )),
        }
    }
    if held {
        lines.push(format!(
            "  to let this run through once: {}",
            text(breaker.get("approve_with"))
        ));
    }
    lines
}

/// `retention preview` as text: per group, what it keeps and deletes, and why it is held.
pub fn print_preview(groups: &Value) {
    for group in groups.as_array().into_iter().flatten() {
        let decision = group.get("decision");
        let count = |key: &str| {
            decision
                .and_then(|d| d.get(key))
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        };
        println!(
            "{}/{}: keep {}, trim {}, delete {}  (policy {})",
            text(group.get("cluster")),
            text(group.get("plan")),
            count("keep"),
            count("partial"),
            count("delete"),
            text(group.get("policy_hash"))
        );
        if let Some(Value::String(why)) = group.get("hold_reason") {
            println!("  {why}");
        }
        if let Some(breaker) = group.get("breaker") {
            for line in held_lines(breaker) {
                println!("  {line}");
            }
        }
        for (word, key) in [("delete", "delete"), ("trim", "partial")] {
            for entry in decision
                .and_then(|d| d.get(key))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                println!(
                    "  {word} {}: {}",
                    text(entry.get("id")),
                    reasons(entry.get("reasons"))
                );
            }
        }
    }
}
