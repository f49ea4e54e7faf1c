//! The bodies of `schedule create` and `schedule update` from their flags: a
//! [`ScheduleSpec`] and a [`ScheduleUpdate`], with the policy, its patch and the restore tests
//! checked here first for a quick error (the scheduler checks everything again).
//!
//! What the CLI checks itself comes first, then the values the scheduler would refuse while
//! decoding, in the order it meets them (a body's keys in alphabetical order), so a command
//! with two mistakes is told about the same one as before.

use serde_json::{Map, Value};
use sexton_model::{
    records::{VerifyPick, VerifySpec, VerifyTimeout},
    wire::{Message, SCHEMA_VERSION},
};
use sexton_retention::{FullEvery, Policy};
use sexton_shared::api::{ScheduleSpec, ScheduleUpdate};

use super::{
    args::{CreateArgs, PolicyArgs, UpdateArgs},
    values::{choice, parsed, refused_as},
};
use crate::failure::Failure;

/// `schedule create`: the new schedule as the flags give it.
pub(super) fn create(args: &CreateArgs) -> Result<ScheduleSpec, Failure> {
    type M = ScheduleSpec;
    let policy = policy_json(args.policy.as_deref(), &args.rules, true)?.expect("required");
    let verify = VerifyFlags::of(&args.verify_cron, &args.verify_pick, &args.verify_timeout)?;
    let backup_owner = args
        .backup_owner
        .as_deref()
        .map(choice::<M, _>)
        .transpose()?
        .unwrap_or_default();
    let cluster = parsed::<M, _>(&args.cluster)?;
    let full_every = full_every::<M>(args.full_every)?;
    let name = parsed::<M, _>(&args.name)?;
    let on_blackout = args
        .timing
        .on_blackout
        .as_deref()
        .map(choice::<M, _>)
        .transpose()?
        .unwrap_or_default();
    let overlap_policy = args
        .overlap_policy
        .as_deref()
        .map(choice::<M, _>)
        .transpose()?
        .unwrap_or_default();
    let plan = parsed::<M, _>(&args.plan)?;
    let verify = verify.map(VerifyFlags::spec::<M>).transpose()?;
    Ok(ScheduleSpec {
        schema_version: SCHEMA_VERSION,
        name,
        cluster,
        plan,
        cron: args.cron.clone(),
        paused: args.paused,
        skip_immediately: args.skip_immediately,
        policy,
        labels: args.labels.iter().cloned().collect(),
        remote_cleanup: args.remote_cleanup,
        overlap_policy,
        starting_deadline_seconds: args.starting_deadline_seconds,
        starting_deadline: args.starting_deadline,
        full_every,
        volumes: args.volumes.clone(),
        backup_owner,
        verify,
        jitter: args.timing.jitter,
        exclude: args.timing.exclude.clone(),
        on_blackout,
        pause_after_failures: args.pause_after_failures,
        annotations: args.annotations.iter().cloned().collect(),
        breaker: args.breaker.clone(),
        objectives: args.objectives.clone(),
        copies: args.copies.clone().map(|c| c.0).unwrap_or_default(),
        confirm: args.yes,
        dry_run: args.dry_run,
    })
}

/// `schedule update`: only the fields the flags change (`Some(None)`: back to none).
pub(super) fn update(args: &UpdateArgs) -> Result<ScheduleUpdate, Failure> {
    type M = ScheduleUpdate;
    let (policy, policy_patch) = if args.replace_policy {
        let policy = policy_json(args.policy.as_deref(), &args.rules, false)?.ok_or_else(|| {
            Failure::input("--replace-policy needs --policy or a rule flag (--keep-last, ...)")
        })?;
        (Some(policy), None)
    } else {
        (None, policy_patch(args.policy.as_deref(), &args.rules)?)
    };
    let verify = VerifyFlags::of(&args.verify_cron, &args.verify_pick, &args.verify_timeout)?;
    let backup_owner = args
        .backup_owner
        .as_deref()
        .map(choice::<M, _>)
        .transpose()?;
    let full_every = if args.no_full_every {
        Some(None)
    } else {
        full_every::<M>(args.full_every)?.map(Some)
    };
    let name = parsed::<M, _>(&args.name)?;
    let on_blackout = args
        .timing
        .on_blackout
        .as_deref()
        .map(choice::<M, _>)
        .transpose()?;
    let overlap_policy = args
        .overlap_policy
        .as_deref()
        .map(choice::<M, _>)
        .transpose()?;
    let verify = match verify {
        _ if args.no_verify => Some(None),
        Some(flags) => Some(Some(flags.spec::<M>()?)),
        None => None,
    };
    Ok(ScheduleUpdate {
        schema_version: SCHEMA_VERSION,
        name,
        cron: args.cron.clone(),
        policy,
        labels: (!args.labels.is_empty()).then(|| args.labels.iter().cloned().collect()),
        remote_cleanup: None,
        overlap_policy,
        starting_deadline_seconds: args.starting_deadline_seconds,
        full_every,
        volumes: (!args.volumes.is_empty()).then(|| args.volumes.clone()),
        backup_owner,
        starting_deadline: args
            .starting_deadline
            .map(Some)
            .or(cleared(args.no_starting_deadline)),
        jitter: args.timing.jitter.map(Some).or(cleared(args.no_jitter)),
        exclude: if args.no_exclude {
            Some(Vec::new())
        } else {
            (!args.timing.exclude.is_empty()).then(|| args.timing.exclude.clone())
        },
        on_blackout,
        pause_after_failures: args
            .pause_after_failures
            .map(Some)
            .or(cleared(args.no_pause_after_failures)),
        annotations: (!args.annotations.is_empty())
            .then(|| args.annotations.iter().cloned().collect()),
        verify,
        policy_patch,
        breaker: args
            .breaker
            .clone()
            .map(Some)
            .or(cleared(args.breaker_defaults)),
        copies: args.copies.clone().map(|c| c.0),
        objectives: args
            .objectives
            .clone()
            .map(Some)
            .or(cleared(args.no_objectives)),
        confirm: args.yes,
        dry_run: args.dry_run,
    })
}

/// A `--no-*` flag: `Some(None)` (back to none) when given.
fn cleared<T>(no: bool) -> Option<Option<T>> {
    no.then_some(None)
}

/// `--full-every N` (checked by clap to be at least 1) as the field of request `M`.
fn full_every<M: Message>(n: Option<u32>) -> Result<Option<FullEvery>, Failure> {
    n.map(|n| FullEvery::new(n).map_err(refused_as::<M>))
        .transpose()
}

/// The policy of `--policy JSON` and the rule flags (`--keep-last N`, `--ttl 720h`, ...)
/// together, validated here for a quick error (the server validates again). `required` makes
/// giving none an error.
fn policy_json(
    policy: Option<&str>,
    rules: &PolicyArgs,
    required: bool,
) -> Result<Option<Policy>, Failure> {
    let keys = merged_keys(policy, rules)?;
    if keys.is_empty() {
        return match required {
            true => Err(Failure::input(
                "a schedule needs a retention policy: a rule flag (--keep-last N, --keep-daily N, \
                 --ttl 720h, ...) or --policy JSON",
            )),
            false => Ok(None),
        };
    }
    let what = if policy.is_some() {
        "--policy"
    } else {
        "policy"
    };
    Policy::try_from(Value::Object(keys))
        .map(Some)
        .map_err(|err| Failure::input(format!("invalid {what}: {err}")))
}

/// The keys `schedule update` changes in the stored policy: those of the rule flags and of
/// `--policy JSON` (an object; `null` removes a key), together.
fn policy_patch(
    policy: Option<&str>,
    rules: &PolicyArgs,
) -> Result<Option<Map<String, Value>>, Failure> {
    let keys = merged_keys(policy, rules)?;
    Ok((!keys.is_empty()).then_some(keys))
}

/// The keys of `--policy JSON` (which must be an object) and of the rule flags in one map; a
/// key both give is refused, since neither would say which one counts.
fn merged_keys(policy: Option<&str>, rules: &PolicyArgs) -> Result<Map<String, Value>, Failure> {
    let mut keys = match policy.map(serde_json::from_str::<Value>) {
        None => Map::new(),
        Some(Ok(Value::Object(keys))) => keys,
        Some(Ok(_)) => {
            return Err(Failure::input(
                "invalid --policy: expected a JSON object of policy keys",
            ))
        }
        Some(Err(err)) => return Err(Failure::input(format!("invalid --policy: {err}"))),
    };
    for (key, flag, value) in rule_keys(rules)? {
        if keys.contains_key(key) {
            return Err(Failure::input(format!(
                "{flag} sets {key}, which --policy sets too: give it once"
            )));
        }
        keys.insert(key.to_string(), value);
    }
    Ok(keys)
}

/// The policy keys the rule flags give: `(key, the flag that gave it, value)`. `--ttl` is said
/// on stderr as the `retention_duration` it becomes.
fn rule_keys(rules: &PolicyArgs) -> Result<Vec<(&'static str, String, Value)>, Failure> {
    let flag = |key: &str| format!("--{}", key.replace('_', "-"));
    let mut keys = Vec::new();
    let mut push = |key: &'static str, value: Option<Value>| {
        if let Some(value) = value {
            keys.push((key, flag(key), value));
        }
    };
    for (key, count) in [
        ("keep_last", rules.keep_last),
        ("keep_hourly", rules.keep_hourly),
        ("keep_daily", rules.keep_daily),
        ("keep_weekly", rules.keep_weekly),
        ("keep_monthly", rules.keep_monthly),
        ("keep_yearly", rules.keep_yearly),
        ("keep_verified", rules.keep_verified),
        ("keep_full", rules.keep_full),
        ("keep_diff", rules.keep_diff),
    ] {
        push(key, count.map(Value::from));
    }
    for (key, text) in [
        ("keep_within", &rules.keep_within),
        ("keep_within_hourly", &rules.keep_within_hourly),
        ("keep_within_daily", &rules.keep_within_daily),
        ("keep_within_weekly", &rules.keep_within_weekly),
        ("keep_within_monthly", &rules.keep_within_monthly),
        ("keep_within_yearly", &rules.keep_within_yearly),
        ("recovery_window", &rules.recovery_window),
        ("failed_grace", &rules.failed_grace),
        ("chain_mode", &rules.chain_mode),
    ] {
        push(key, text.clone().map(Value::from));
    }
    push(
        "retention_duration",
        rules.retention_duration.map(Value::from),
    );
    push(
        "minimum_redundancy",
        rules.minimum_redundancy.map(Value::from),
    );
    push("pitr_full", rules.pitr_full.map(Value::from));
    if !rules.keep_tags.is_empty() {
        let lists: Vec<Value> = rules
            .keep_tags
            .iter()
            .map(|list| Value::from(list.split(',').map(str::trim).collect::<Vec<_>>()))
            .collect();
        keys.push(("keep_tags", "--keep-tag".to_string(), Value::from(lists)));
    }
    if let Some(ttl) = &rules.ttl {
        let days = ttl_days(ttl).map_err(Failure::input)?;
        eprintln!(
            "note: --ttl {ttl} is kept as retention_duration {days} (days): every backup that \
             completed at most {days} days ago is kept, as Velero keeps a backup until {ttl} \
             after it was taken (Sexton also keeps the newest full backup and what kept backups \
             need)"
        );
        keys.push(("retention_duration", "--ttl".to_string(), Value::from(days)));
    }
    Ok(keys)
}

/// Velero's `--ttl` (a Go duration such as `720h`, `1h30m`, `90m`; also `30d`) as whole days,
/// the unit of `retention_duration`: exactly, or refused with why.
pub(super) fn ttl_days(text: &str) -> Result<u32, String> {
    const NANOS_PER_DAY: u128 = 86_400 * 1_000_000_000;
    let bad = || {
        format!(
            "--ttl {text:?} is not a duration such as 720h, 30d or 1h30m (units d, h, m, s, ms, \
             us, ns)"
        )
    };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(bad)?;
        let (number, tail) = rest.split_at(digits);
        let units = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(units);
        let per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "d" => NANOS_PER_DAY,
            _ => return Err(bad()),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(bad());
        }
        let digits = |digits: &str| -> Result<u128, String> {
            match digits {
                "" => Ok(0),
                digits => digits.parse().map_err(|_| bad()),
            }
        };
        // A fraction counts only where it is a whole number of nanoseconds (Go rounds).
        let scale = u32::try_from(fraction.len())
            .ok()
            .and_then(|len| 10u128.checked_pow(len))
            .ok_or_else(bad)?;
        let fraction = digits(fraction)?.checked_mul(per_unit).ok_or_else(bad)?;
        if !fraction.is_multiple_of(scale) {
            return Err(bad());
        }
        let part = digits(whole)?
            .checked_mul(per_unit)
            .and_then(|n| n.checked_add(fraction / scale))
            .ok_or_else(bad)?;
        nanos = nanos.checked_add(part).ok_or_else(bad)?;
        rest = tail;
    }
    if !nanos.is_multiple_of(NANOS_PER_DAY) || nanos == 0 {
        return Err(format!(
            "--ttl {text} is not a whole number of days: it is kept as retention_duration, which \
             counts days; give a multiple of 24h (24h, 168h, 720h, 30d), or --recovery-window \
             for a window of hours"
        ));
    }
    u32::try_from(nanos / NANOS_PER_DAY).map_err(|_| format!("--ttl {text} is too long"))
}

/// The restore-test flags of a schedule: none without `--verify-cron` (the others alone are
/// refused: they would change nothing).
struct VerifyFlags<'a> {
    cron: &'a str,
    pick: Option<&'a str>,
    timeout: Option<&'a str>,
}

impl<'a> VerifyFlags<'a> {
    fn of(
        cron: &'a Option<String>,
        pick: &'a Option<String>,
        timeout: &'a Option<String>,
    ) -> Result<Option<VerifyFlags<'a>>, Failure> {
        let Some(cron) = cron else {
            if pick.is_some() || timeout.is_some() {
                return Err(Failure::input(
                    "--verify-pick and --verify-timeout need --verify-cron (the whole verify block is set at once)",
                ));
            }
            return Ok(None);
        };
        Ok(Some(VerifyFlags {
            cron,
            pick: pick.as_deref(),
            timeout: timeout.as_deref(),
        }))
    }

    /// The `verify` block, its pick and timeout read as the scheduler reads them (unset: the
    /// defaults it would take, the newest backup and an hour). The cron is the scheduler's to
    /// check.
    fn spec<M: Message>(self) -> Result<VerifySpec, Failure> {
        let pick: VerifyPick = self
            .pick
            .map(choice::<M, _>)
            .transpose()?
            .unwrap_or_default();
        let timeout: VerifyTimeout = self
            .timeout
            .map(choice::<M, _>)
            .transpose()?
            .unwrap_or_default();
        Ok(VerifySpec {
            cron: self.cron.to_string(),
            pick,
            timeout,
            // Restore tests at a location are set through the API's `verify.location`.
            location: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ttl_days;

    /// Go durations of whole days become days exactly; anything else is refused, with why.
    #[test]
    fn a_ttl_is_whole_days_or_refused() {
        for (text, days) in [
            ("720h", 30),
            ("720h0m0s", 30),
            ("30d", 30),
            ("24h", 1),
            ("1440m", 1),
            ("86400s", 1),
            ("1d24h", 2),
            ("36h12h", 2),
            ("1.5d12h", 2),
            ("0.5d12h", 1),
        ] {
            assert_eq!(ttl_days(text), Ok(days), "{text}");
        }
        for text in ["1h30m", "12h", "0h", "25h"] {
            let err = ttl_days(text).unwrap_err();
            assert!(err.contains("not a whole number of days"), "{text}: {err}");
        }
        for text in ["", "30", "h", "3x", "1.2.3h", "-24h", "24 h", ".h"] {
            let err = ttl_days(text).unwrap_err();
            assert!(err.contains("is not a duration"), "{text:?}: {err}");
        }
    }
}
