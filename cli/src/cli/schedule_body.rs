//! The bodies of `schedule create` and `schedule update` from their flags: a
//! [`ScheduleSpec`] and a [`ScheduleUpdate`], with the policy, its patch and the restore tests
//! checked here first for a quick error (the scheduler checks everything again).
//!
//! What the CLI checks itself comes first, then the values the scheduler would refuse while
//! decoding, in the order it meets them (a body's keys in alphabetical order), so a command
//! with two mistakes is told about the same one as before.

use serde_json::{Map, Value};
use sexton_retention::{FullEvery, Policy};
use sexton_shared::{
    api::{ScheduleSpec, ScheduleUpdate},
    records::{VerifyPick, VerifySpec, VerifyTimeout},
    wire::{Message, SCHEMA_VERSION},
};

use super::requests::{choice, parsed, refused_as};
use super::{CreateArgs, Failure, UpdateArgs};

/// `schedule create`: the new schedule as the flags give it.
pub(super) fn create(args: &CreateArgs) -> Result<ScheduleSpec, Failure> {
    type M = ScheduleSpec;
    let policy = policy_json(args.policy.as_deref(), args.keep_last, true)?.expect("required");
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
        confirm: args.yes,
        dry_run: args.dry_run,
    })
}

/// `schedule update`: only the fields the flags change (`Some(None)`: back to none).
pub(super) fn update(args: &UpdateArgs) -> Result<ScheduleUpdate, Failure> {
    type M = ScheduleUpdate;
    let (policy, policy_patch) = if args.replace_policy {
        let policy = policy_json(args.policy.as_deref(), args.keep_last, false)?
            .ok_or_else(|| Failure::input("--replace-policy needs --policy or --keep-last"))?;
        (Some(policy), None)
    } else {
        (None, policy_patch(args.policy.as_deref(), args.keep_last)?)
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

/// The policy of `--policy JSON` or `--keep-last N`, validated here for a quick error (the server
/// validates again). `required` makes giving neither an error.
fn policy_json(
    policy: Option<&str>,
    keep_last: Option<u32>,
    required: bool,
) -> Result<Option<Policy>, Failure> {
    match (policy, keep_last) {
        (Some(_), Some(_)) => Err(Failure::input("give --policy or --keep-last, not both")),
        (Some(text), None) => Policy::from_json(text)
            .map(Some)
            .map_err(|err| Failure::input(format!("invalid --policy: {err}"))),
        (None, Some(0)) => Err(Failure::input("--keep-last must be at least 1")),
        (None, Some(n)) => Ok(Some(Policy::keep_last(n))),
        (None, None) if required => Err(Failure::input(
            "a schedule needs a retention policy: --keep-last N or --policy JSON",
        )),
        (None, None) => Ok(None),
    }
}

/// The keys `schedule update` changes in the stored policy: `--keep-last N`, or the keys of
/// `--policy JSON` (an object; `null` removes a key).
fn policy_patch(
    policy: Option<&str>,
    keep_last: Option<u32>,
) -> Result<Option<Map<String, Value>>, Failure> {
    match (policy, keep_last) {
        (Some(_), Some(_)) => Err(Failure::input("give --policy or --keep-last, not both")),
        (None, Some(0)) => Err(Failure::input("--keep-last must be at least 1")),
        (None, Some(n)) => Ok(Some(Map::from_iter([("keep_last".to_string(), n.into())]))),
        (Some(text), None) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(keys)) => Ok(Some(keys)),
            Ok(_) => Err(Failure::input(
                "invalid --policy: expected a JSON object of the keys to change",
            )),
            Err(err) => Err(Failure::input(format!("invalid --policy: {err}"))),
        },
        (None, None) => Ok(None),
    }
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
        })
    }
}
