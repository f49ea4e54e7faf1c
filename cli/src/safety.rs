//! The CLI's half of the safety envelope (docs/safety.md): who is asking (sent with every
//! request, for the audit), asking before a destructive command acts (on a terminal; `--yes`
//! otherwise), and showing what a policy change deletes and why a retention run is held (from
//! the typed answers: `guard::PolicyEffect`, `api::BreakerState`, `api::PreviewGroup`).

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::sync::OnceLock;

use serde::Serialize;
use serde_json::Value;
use sexton_retention::{Decision, Plan, Policy, Reason};
use sexton_shared::{
    api::{BreakerState, PreviewGroup},
    audit::{Actor, ActorHeaders as _},
    config::Config,
    guard::PolicyEffect,
};

use crate::failure::Failure;

static ACTOR: OnceLock<Actor> = OnceLock::new();

/// Who runs this command, as the audit will name them: the OS user and host, the NATS user of
/// the configuration (or its credentials file), and this program.
pub fn actor_of(config: &Config) -> Actor {
    // `$USER` is unset under cron, in CI and in Kubernetes Jobs: then the user this process
    // runs as (issue 50), by name where /etc/passwd has one.
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(process_user);
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

/// The user this process runs as: its name in /etc/passwd, else `uid:<n>` (a container's
/// user often has no entry). `None` where the process's own uid cannot be read.
fn process_user() -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    Some(user_named(&passwd, uid).unwrap_or_else(|| format!("uid:{uid}")))
}

/// The name of `uid` in an /etc/passwd text (`name:x:uid:gid:...`).
fn user_named(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?.parse::<u32>().ok()?;
        (id == uid && !name.is_empty()).then(|| name.to_string())
    })
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

/// A typed value as its JSON reads (as [`text`] shows it): a policy as its rules, an instant
/// as the service wrote it.
fn shown<T: Serialize>(value: &T) -> String {
    text(serde_json::to_value(value).ok().as_ref())
}

/// A policy effect (`guard::PolicyEffect`) on stderr: the diff, then what it deletes.
pub fn print_policy_change(what: &str, effect: &PolicyEffect) {
    eprintln!("{what}:");
    if effect.diff.is_empty() {
        let side = |policy: &Option<Policy>, unplanned: &Option<String>| match unplanned {
            Some(why) => format!("not planned ({why})"),
            None => shown(policy),
        };
        eprintln!(
            "  policy: {} -> {}",
            side(&effect.before, &effect.before_unplanned),
            side(&effect.after, &effect.after_unplanned)
        );
    } else {
        for line in &effect.diff {
            eprintln!(
                "  {}: {} -> {}",
                line.key,
                text(line.before.as_ref()),
                text(line.after.as_ref())
            );
        }
    }
    eprintln!(
        "  backups kept whole: {} -> {}",
        effect.n_keep_before, effect.n_keep_after
    );
    for broken in &effect.objectives_broken {
        eprintln!("  breaks the recovery objective {broken}");
    }
    match effect.deleted.len() {
        0 => eprintln!("  deletes nothing kept now"),
        n => {
            eprintln!("  deletes {n} backup(s) kept now:");
            for backup in &effect.deleted {
                eprintln!(
                    "    {} (completed {}): kept now by {}; would go: {}",
                    backup.id,
                    shown(&backup.completed_at),
                    backup.current_reasons.join("; "),
                    backup.proposed_reasons.join("; ")
                );
            }
        }
    }
    for volume in &effect.volumes_deleted {
        eprintln!("    volume {} of {} goes", volume.volume, volume.id);
    }
    if let Some(held) = &effect.breaker_holds {
        eprintln!(
            "  the circuit breaker will hold the retention run that deletes them: {}",
            held.reasons.join("; ")
        );
        eprintln!(
            "  nothing is deleted until a person lets that run through: {} (see it first \
             with --dry-run instead of --yes)",
            held.approve
        );
    }
}

/// The breaker's state of one group (the preview's `breaker`), as lines.
pub fn held_lines(breaker: &BreakerState) -> Vec<String> {
    let mut lines = Vec::new();
    let deleting = breaker.deleting.len();
    lines.push(if breaker.held {
        format!("HELD by the circuit breaker: nothing is marked ({deleting} backup(s) would go)")
    } else {
        format!("tripped, but approved: the next run deletes {deleting} backup(s)")
    });
    for trip in &breaker.trips {
        lines.push(format!("  {}: {}", shown(&trip.kind), trip.reason));
    }
    if let Some(approval) = &breaker.approval {
        let by = approval.by.user.as_deref().unwrap_or("unknown");
        let at = shown(&approval.approved_at);
        match &approval.why_not {
            Some(why) => lines.push(format!(
                "  an approval by {by} at {at} does not cover it: {why}"
            )),
            None => lines.push(format!("  approved by {by} at {at}")),
        }
    }
    if breaker.held {
        lines.push(format!(
            "  to let this run through once: {}",
            breaker.approve_with
        ));
    }
    lines
}

/// `retention preview` as text: per group, what it keeps and deletes, and why it is held.
pub fn print_preview(groups: &[PreviewGroup]) {
    for group in groups {
        let decision = group.decision.as_ref();
        let count = |list: fn(&Plan) -> &Vec<Decision>| decision.map_or(0, |d| list(d).len());
        println!(
            "{}/{}{}: keep {}, trim {}, delete {}  (policy {})",
            group.cluster,
            group.plan,
            group
                .location
                .as_ref()
                .map_or_else(String::new, |location| format!(" at {location}")),
            count(|d| &d.keep),
            count(|d| &d.partial),
            count(|d| &d.delete),
            group.policy_hash.as_deref().unwrap_or("(none)")
        );
        if let Some(why) = &group.hold_reason {
            println!("  {why}");
        }
        if let Some(breaker) = &group.breaker {
            for line in held_lines(breaker) {
                println!("  {line}");
            }
        }
        let lists = decision.map(|d| [("delete", &d.delete), ("trim", &d.partial)]);
        for (word, entries) in lists.into_iter().flatten() {
            for entry in entries {
                println!(
                    "  {word} {}: {}",
                    entry.id,
                    Reason::texts(&entry.reasons).join("; ")
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_is_named_from_passwd_and_only_an_exact_entry_counts() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      # a comment\n\
                      broken line\n\
                      backup:x:34:34:backup:/var/backups:/usr/sbin/nologin\n\
                      :x:35:35::/:/bin/false\n";
        assert_eq!(user_named(passwd, 0).as_deref(), Some("root"));
        assert_eq!(user_named(passwd, 34).as_deref(), Some("backup"));
        assert_eq!(user_named(passwd, 3), None, "no entry with uid 3");
        assert_eq!(user_named(passwd, 35), None, "an entry without a name");
        assert_eq!(user_named("", 0), None);
    }
}
