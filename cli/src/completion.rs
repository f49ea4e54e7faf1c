//! `sexton completion bash|zsh|fish`: clap's scripts for verbs and flags, plus the names of the
//! fleet's clusters, schedules and backups where a command takes one (issue 50: kubectl and
//! velero complete the names of what exists). The names come from the hidden verb
//! `sexton __complete-names KIND`, which asks the fleet with the line's `--config` and
//! `--nats-url`, and prints nothing (exit 0) when the fleet cannot be reached: a completion
//! must never print an error into the user's line.

use std::{collections::BTreeSet, time::Duration};

use serde_json::Value;
use sexton_model::names::ClusterName;
use sexton_shared::{api::ListFilter, topology};

use crate::{client::Client, failure::Failure};

/// The verb the scripts call; hidden from help.
pub const NAMES_VERB: &str = "__complete-names";

/// What a completion can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NameKind {
    Cluster,
    Schedule,
    Backup,
}

/// The script for `shell`: clap's for `command` (the command line's definition, which the
/// caller owns: this module sits below it), with names completed where a command takes one.
pub fn script(shell: clap_complete::Shell, mut command: clap::Command) -> Result<String, Failure> {
    let mut generated = Vec::new();
    clap_complete::generate(shell, &mut command, "sexton", &mut generated);
    let generated = String::from_utf8_lossy(&generated).into_owned();
    match shell {
        clap_complete::Shell::Bash => Ok(format!("{generated}\n{BASH_NAMES}")),
        clap_complete::Shell::Zsh => zsh(&generated),
        clap_complete::Shell::Fish => Ok(format!("{generated}\n{FISH_NAMES}")),
        // PowerShell and Elvish: verbs and flags only.
        _ => Ok(generated),
    }
}

/// Bash: a function in front of clap's `_sexton` that answers where a name goes (after
/// `--cluster`, `--schedule`, `--from-schedule`, and a `schedule` or `backup` verb's first
/// argument) and leaves everything else to clap's.
const BASH_NAMES: &str = r#"# Names of the fleet's clusters, schedules and backups (sexton __complete-names).
_sexton_names() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local kind="" cluster="" fleet=() words=() i word
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        case "$word" in
            --config|--nats-url) fleet+=("$word" "${COMP_WORDS[i+1]}"); ((i++)) ;;
            --cluster) cluster="${COMP_WORDS[i+1]}"; ((i++)) ;;
            -o|--output|--plan|--schedule|--from-schedule|--reason|--location|--timeout|--grace|-l|--selector) ((i++)) ;;
            -*) ;;
            *) words+=("$word") ;;
        esac
    done
    case "$prev" in
        --cluster) kind=cluster ;;
        --schedule|--from-schedule) kind=schedule ;;
    esac
    if [[ -z "$kind" && "$cur" != -* && ${#words[@]} -eq 2 ]]; then
        case "${words[0]} ${words[1]}" in
            "schedule get"|"schedule describe"|"schedule pause"|"schedule unpause"|"schedule delete"|"schedule update"|"schedule backfill"|"schedule next") kind=schedule ;;
            "backup get"|"backup describe"|"backup hold"|"backup release"|"backup delete"|"backup verify"|"backup fetch") kind=backup ;;
        esac
    fi
    if [[ -n "$kind" ]]; then
        local args=(__complete-names "$kind" "${fleet[@]}")
        [[ -n "$cluster" && "$kind" == backup ]] && args+=(--cluster "$cluster")
        local IFS=$'\n'
        COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" "${args[@]}" 2>/dev/null)" -- "$cur"))
        return 0
    fi
    _sexton "$@"
}
if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _sexton_names -o nosort -o bashdefault -o default sexton
else
    complete -F _sexton_names -o bashdefault -o default sexton
fi
"#;

/// Fish: completions added to clap's for the same places.
const FISH_NAMES: &str = r#"# Names of the fleet's clusters, schedules and backups (sexton __complete-names).
complete -c sexton -l cluster -f -a '(sexton __complete-names cluster 2>/dev/null)'
complete -c sexton -l schedule -f -a '(sexton __complete-names schedule 2>/dev/null)'
complete -c sexton -l from-schedule -f -a '(sexton __complete-names schedule 2>/dev/null)'
complete -c sexton -n '__fish_seen_subcommand_from schedule; and __fish_seen_subcommand_from get describe pause unpause delete update backfill next' -f -a '(sexton __complete-names schedule 2>/dev/null)'
complete -c sexton -n '__fish_seen_subcommand_from backup; and __fish_seen_subcommand_from get describe hold release delete verify fetch' -f -a '(sexton __complete-names backup 2>/dev/null)'
"#;

/// Zsh: clap's `_default` actions where a name goes become `_sexton_names KIND`. Refused, not
/// silently left without names, if clap's script no longer has the places this rewrites.
fn zsh(generated: &str) -> Result<String, Failure> {
    let mut out = String::with_capacity(generated.len() + 512);
    let (mut clusters, mut schedules, mut backups) = (0, 0, 0);
    for line in generated.lines() {
        let rewritten = if line.contains(":CLUSTER:_default'") {
            clusters += 1;
            line.replace(":CLUSTER:_default'", ":CLUSTER:_sexton_names cluster'")
        } else if line.starts_with("':name -- The schedule")
            || line.starts_with("'::name -- The schedule")
        {
            schedules += 1;
            line.replace(":_default'", ":_sexton_names schedule'")
        } else if line.starts_with("':id -- The backup") || line.starts_with("'::id -- The backup")
        {
            backups += 1;
            line.replace(":_default'", ":_sexton_names backup'")
        } else {
            line.to_string()
        };
        out.push_str(&rewritten);
        out.push('\n');
    }
    if clusters == 0 || schedules == 0 || backups == 0 {
        return Err(Failure::runtime(anyhow::anyhow!(
            "the zsh completion script has no place for cluster, schedule or backup names \
             ({clusters}, {schedules}, {backups} found): clap's format changed"
        )));
    }
    // Defined before clap's `compdef` runs the completion.
    let names = r#"
# Names of the fleet's clusters, schedules and backups (sexton __complete-names).
_sexton_names() {
    local -a names
    names=(${(f)"$(sexton __complete-names $1 2>/dev/null)"})
    compadd -a names
}
"#;
    Ok(match out.find("\n_sexton() {") {
        Some(at) => format!("{}{names}{}", &out[..at], &out[at..]),
        None => format!("{names}{out}"),
    })
}

/// `sexton __complete-names KIND`: one name a line, sorted; nothing when the fleet does not
/// answer within two seconds.
pub async fn names(
    config: &sexton_shared::config::Config,
    kind: NameKind,
    cluster: Option<&str>,
) -> Result<(), Failure> {
    let asked = async {
        let client = Client::connect(config).await.ok()?;
        listed(&client, kind, cluster).await.ok()
    };
    let names = tokio::time::timeout(Duration::from_secs(2), asked)
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    for name in names {
        crate::output::emit(&format!("{name}\n"));
    }
    Ok(())
}

async fn listed(
    client: &Client,
    kind: NameKind,
    cluster: Option<&str>,
) -> Result<BTreeSet<String>, Failure> {
    let field = |rows: &Value, path: &str| -> BTreeSet<String> {
        rows.as_array()
            .into_iter()
            .flatten()
            .filter_map(|row| crate::output::lookup(row, path).and_then(Value::as_str))
            .map(str::to_string)
            .collect()
    };
    let schedules = topology::api_subject("schedule", "list");
    let backups = topology::api_subject("backup", "list");
    let every = ListFilter::default();
    Ok(match kind {
        NameKind::Schedule => field(&client.call(&schedules, &every).await?, "schedule.name"),
        NameKind::Cluster => {
            let mut names = field(&client.call(&schedules, &every).await?, "schedule.cluster");
            names.extend(field(&client.call(&backups, &every).await?, "cluster"));
            names
        }
        NameKind::Backup => {
            // A name on the line that is not a cluster's is no filter: every backup.
            let filter = ListFilter {
                cluster: cluster.and_then(|c| ClusterName::new(c).ok()),
                ..ListFilter::default()
            };
            field(&client.call(&backups, &filter).await?, "id")
        }
    })
}
