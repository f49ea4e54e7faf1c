//! An online command: its request (after a dry run and a question for one that deletes), a
//! change the service wants confirmed shown and asked about, the answer printed, and again
//! every `--watch` interval.

use std::time::Duration;

use chrono::Utc;
use serde_json::Value;
use sexton_shared::{
    api::{ApiError, BackupDescription, PreviewGroup, ScheduleChangeNotes, VerifyAsked},
    config::Config,
    guard::PolicyEffect,
    topology,
};

use super::actions;
use super::args::*;
use super::known::{check_names_known, suggest};
use super::print::*;
use super::requests::{backup_ref, destructive, request_for, Body};
use super::values::given_cluster;
use crate::client::{decode_reply, Client};
use crate::failure::Failure;

/// Runs an online command: its request, the answer printed, again every `--watch` interval.
pub(super) async fn run(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
) -> Result<(), Failure> {
    let config = load_config()?;
    crate::safety::set_actor(&config);
    let (subject, mut body, columns) = request_for(command)?;
    let client = Client::connect(&config).await?;
    let announced = announce(&client, command, &body).await?;
    // Under --watch in a table: the rows of the last listing, so that the next prints only
    // what changed (kubectl's `get --watch`).
    let mut watched: Option<Vec<(String, Value)>> = None;
    loop {
        let mut value = call_confirmed(&client, command, &subject, &mut body).await?;
        print_notes(command, &subject, &value)?;
        let said_already = announced
            .as_ref()
            .is_some_and(|said| *said == cell(value.get("summary")));
        let columns: Vec<&str> = columns
            .iter()
            .copied()
            .filter(|column| !(said_already && *column == "summary"))
            .collect();
        check_names_known(&client, command, &value).await?;
        if waited_for_verdict(&client, command, &value, output).await? {
            return Ok(());
        }
        let listed = watch_seconds(command)
            .filter(|_| matches!(output, Output::Table | Output::Wide))
            .and_then(|_| listed_rows(command, &value));
        match (&watched, &listed) {
            (Some(before), Some(after)) => print_changes(command, output, before, after),
            _ => print_reply(
                command,
                output,
                &subject,
                &mut value,
                &columns,
                said_already,
            )?,
        }
        watched = listed;
        let Some(seconds) = watch_seconds(command) else {
            return Ok(());
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(seconds)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        // A blank line between two whole listings (a closed pipe ends the command here).
        if watched.is_none() {
            crate::output::emit("\n");
        }
    }
}

/// Commands that delete say what they will do first (a dry run of the same request) and, when
/// that deletes anything, ask (or need --yes): the dry run's summary, which the result then
/// says again only if it came out differently.
async fn announce(
    client: &Client,
    command: &Command,
    body: &Body,
) -> Result<Option<String>, Failure> {
    let Some((yes, (preview_subject, preview_body))) = destructive(command, body) else {
        return Ok(None);
    };
    let plan = match client.call(&preview_subject, &preview_body).await {
        Ok(plan) => plan,
        Err(failure) => return Err(suggest(client, command, failure).await),
    };
    let announced = cell(plan.get("summary"));
    let (summary, question) = describe_destructive(command, &preview_subject, plan)?;
    eprintln!("{summary}");
    if let Some(question) = question {
        crate::safety::confirm(&question, yes)?;
    }
    Ok(Some(announced))
}

/// The request's answer. A policy that deletes backups kept now is refused until confirmed:
/// show what, ask, and send the request again confirmed.
async fn call_confirmed(
    client: &Client,
    command: &Command,
    subject: &str,
    body: &mut Body,
) -> Result<Value, Failure> {
    match client.call_raw(subject, &*body).await? {
        Err(refusal) if refusal.needs_confirmation() => {
            print_confirmation_preview(subject, &refusal)?;
            crate::safety::confirm(&format!("{}.", refusal.message), false)?;
            body.confirm();
            match client.call(subject, &*body).await {
                Ok(value) => Ok(value),
                Err(failure) => Err(suggest(client, command, failure).await),
            }
        }
        Err(err) => Err(suggest(client, command, crate::client::refused(err)).await),
        Ok(value) => Ok(value),
    }
}

/// What a refusal that asks for confirmation would delete: the new policy's effect, or that of
/// a change of copy rules at each location it deletes copies at.
fn print_confirmation_preview(subject: &str, refusal: &ApiError) -> Result<(), Failure> {
    let preview = refusal
        .details
        .as_ref()
        .and_then(|d| d.get("preview"))
        .cloned()
        .unwrap_or(Value::Null);
    // A change of copy rules previews each location it deletes copies at.
    let is_copies = preview
        .as_object()
        .is_some_and(|fields| !fields.contains_key("deleted"));
    if is_copies {
        let per_location: std::collections::BTreeMap<String, PolicyEffect> =
            decode_reply(subject, preview)?;
        for (location, effect) in &per_location {
            crate::safety::print_policy_change(&format!("the copy rule at {location}"), effect);
        }
    } else {
        let preview: Option<PolicyEffect> = decode_reply(subject, preview)?;
        if let Some(preview) = &preview {
            crate::safety::print_policy_change("the new policy", preview);
        }
    }
    Ok(())
}

/// What a schedule's create and update say besides the schedule: the policy's effect, when
/// there is something to say (a changed rule, a deletion, or a dry run that asked for it),
/// warnings about what the spec means, and that a dry run's row is what would be.
fn print_notes(command: &Command, subject: &str, value: &Value) -> Result<(), Failure> {
    let notes: ScheduleChangeNotes = match command {
        Command::Schedule(ScheduleCommand::Create(_) | ScheduleCommand::Update(_)) => {
            decode_reply(subject, value.clone())?
        }
        _ => ScheduleChangeNotes::default(),
    };
    if let Some(change) = notes.policy_change.as_ref().filter(|change| {
        !change.diff.is_empty()
            || !change.deleted.is_empty()
            || !change.volumes_deleted.is_empty()
            || notes.dry_run
    }) {
        crate::safety::print_policy_change("policy change", change);
    }
    for (location, change) in &notes.copy_changes {
        crate::safety::print_policy_change(&format!("copy rule change at {location}"), change);
    }
    for warning in &notes.warnings {
        eprintln!("warning: {}", shown(warning));
    }
    // A dry run's row is what would be, not what is (issue 50: it looked created).
    if notes.dry_run {
        let what = match command {
            Command::Schedule(ScheduleCommand::Create(_)) => "created",
            _ => "changed",
        };
        eprintln!("dry run: nothing was {what}; the row below is what the schedule would be");
    }
    Ok(())
}

/// `backup verify --wait` and `recovery drill --wait`: follows the restore test asked for to
/// its verdict, and says whether the command was one that waits (its verdict then printed).
async fn waited_for_verdict(
    client: &Client,
    command: &Command,
    value: &Value,
    output: Output,
) -> Result<bool, Failure> {
    match command {
        Command::Backup(BackupCommand::Verify {
            id,
            cluster,
            wait: true,
            ..
        }) => {
            let asked: VerifyAsked = decode_reply("backup.verify", value.clone())?;
            wait_for_verdict(client, given_cluster(cluster)?, id, &asked, output).await?;
        }
        Command::Recovery(RecoveryCommand::Drill {
            cluster,
            wait: true,
            ..
        }) => {
            let asked: sexton_shared::api::DrillAsked =
                decode_reply("backup.drill", value.clone())?;
            let base = asked.asked.backup_id.clone();
            wait_for_verdict(client, cluster, &base, &asked.asked, output).await?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Prints an answer: a retention approval's dry run (in a table) as the preview it is, an
/// action as what became of what it named, and the rest as `print_answer` shows them.
fn print_reply(
    command: &Command,
    output: Output,
    subject: &str,
    value: &mut Value,
    columns: &[&str],
    said_already: bool,
) -> Result<(), Failure> {
    match command {
        Command::Retention(RetentionCommand::Approve { dry_run: true, .. })
            if matches!(output, Output::Table | Output::Wide) =>
        {
            crate::safety::print_preview(&decode_reply::<Vec<PreviewGroup>>(
                subject,
                value.clone(),
            )?)
        }
        command if actions::is_action(command) => {
            actions::print(command, output, value, said_already)?
        }
        command => print_answer(command, output, value, columns)?,
    }
    Ok(())
}

/// `--watch`'s interval of a list verb, if given.
fn watch_seconds(command: &Command) -> Option<u64> {
    match command {
        Command::Schedule(ScheduleCommand::List { list, .. })
        | Command::Backup(BackupCommand::List { list, .. })
        | Command::Plugin(PluginCommand::List { list }) => list.watch,
        _ => None,
    }
}

/// `backup verify --wait`: polls the backup until the test's verdict is recorded (or its
/// deadline passed) and prints it; a failed test or a timeout exits 1.
async fn wait_for_verdict(
    client: &Client,
    cluster: &str,
    id: &str,
    asked: &VerifyAsked,
    output: Output,
) -> Result<(), Failure> {
    let request_id = &asked.request_id;
    let deadline = asked
        .deadline
        .unwrap_or_else(|| Utc::now() + chrono::Duration::hours(1));
    let subject = topology::api_subject("backup", "describe");
    let asking = backup_ref(cluster, id)?;
    loop {
        let described: BackupDescription = client.call_as(&subject, &asking).await?;
        let verdict = described
            .backup
            .verification
            .into_iter()
            .flat_map(|verification| verification.history)
            .find(|entry| entry.request_id == *request_id);
        if let Some(entry) = verdict {
            let shown = serde_json::to_value(&entry).map_err(|err| Failure::runtime(err.into()))?;
            print_value(
                output,
                &shown,
                &[
                    "request_id",
                    "outcome",
                    "location",
                    "until",
                    "at",
                    "duration_ms",
                    "reason",
                ],
            );
            return match entry.outcome.as_str() {
                "verified" => Ok(()),
                _ => Err(Failure {
                    code: 1,
                    message: format!("restore test {request_id} of {id} did not pass"),
                }),
            };
        }
        if Utc::now() > deadline + chrono::Duration::minutes(1) {
            return Err(Failure {
                code: 1,
                message: format!("no verdict for restore test {request_id} of {id} by {deadline}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
