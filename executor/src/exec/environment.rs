//! The environment a job's command sees, and the facts it hands back. Both are the contract
//! `docs/executors.md` documents; this module is pure so the contract is tested as data.
//!
//! In: `SEXTON_*` variables naming the job, its directories and, for an incremental, its
//! parent's `metadata.json` and the parent's facts (`SEXTON_PARENT_FACT_<KEY>`, so a shell
//! script needs no JSON parser to find its parent's checkpoint LSN). Every other `SEXTON_*`
//! variable of the executor's own environment (its NATS and S3 credentials) is removed.
//!
//! Out: a facts file (`SEXTON_FACTS_FILE`), `key=value` lines or one JSON object, which
//! becomes the `executor` object of the backup's `metadata.json`. One key means something to
//! Sexton: `kind=full` says the command took a full backup where an incremental was asked
//! for (it could not build on the parent), and the backup is reported as the full it is.

use std::path::Path;

use serde_json::{Map, Value};
use sexton_model::{
    metadata::BackupMetadata,
    records::BackupKind,
    wire::{DueBackup, MergeJob},
};

/// The largest facts file read.
pub const MAX_FACTS_BYTES: u64 = 64 * 1024;

/// The directories and files of one job.
#[derive(Debug, Clone)]
pub struct JobPaths {
    pub scratch: std::path::PathBuf,
    pub output: std::path::PathBuf,
    pub facts_file: std::path::PathBuf,
    pub event_file: std::path::PathBuf,
    /// Where parents' `metadata.json` files are put (backups) or the inputs (merges).
    pub inputs: std::path::PathBuf,
    /// A drill's log segments (created only for a drill).
    pub log: std::path::PathBuf,
}

fn path_text(path: &Path) -> String {
    path.display().to_string()
}

fn common(
    job: &str,
    cluster: &str,
    plan: &str,
    prefix: &str,
    paths: &JobPaths,
) -> Vec<(String, String)> {
    vec![
        ("SEXTON_JOB".into(), job.into()),
        ("SEXTON_CLUSTER".into(), cluster.into()),
        ("SEXTON_PLAN".into(), plan.into()),
        ("SEXTON_OBJECT_PREFIX".into(), prefix.into()),
        ("SEXTON_SCRATCH_DIR".into(), path_text(&paths.scratch)),
        ("SEXTON_OUTPUT_DIR".into(), path_text(&paths.output)),
        ("SEXTON_FACTS_FILE".into(), path_text(&paths.facts_file)),
        ("SEXTON_EVENT_FILE".into(), path_text(&paths.event_file)),
    ]
}

/// The environment of a backup command. `parent` is the parent's `metadata.json`, as saved in
/// the job's inputs, when the backup has a parent and its document could be read.
pub fn backup_env(
    due: &DueBackup,
    paths: &JobPaths,
    parent: Option<(&Path, &BackupMetadata)>,
) -> Vec<(String, String)> {
    let mut env = common(
        "backup",
        due.cluster.as_str(),
        due.plan.as_str(),
        &due.object_prefix,
        paths,
    );
    let kind = match due.kind {
        BackupKind::Full => "full",
        BackupKind::Incremental => "incremental",
    };
    env.extend([
        ("SEXTON_BACKUP_ID".into(), due.backup_id.to_string()),
        ("SEXTON_BACKUP_NAME".into(), due.backup_name.clone()),
        ("SEXTON_SCHEDULE".into(), due.schedule.to_string()),
        ("SEXTON_TICK".into(), due.tick.to_rfc3339()),
        ("SEXTON_KIND".into(), kind.into()),
        (
            "SEXTON_PARENT".into(),
            due.parent
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_default(),
        ),
        (
            "SEXTON_PARENT_METADATA".into(),
            parent.map(|(path, _)| path_text(path)).unwrap_or_default(),
        ),
        ("SEXTON_PARENTS_DIR".into(), path_text(&paths.inputs)),
        (
            "SEXTON_VOLUMES".into(),
            due.volumes
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        ),
    ]);
    if let Some(facts) = parent.and_then(|(_, m)| m.executor.as_ref()) {
        env.extend(parent_facts(facts));
    }
    env
}

/// `SEXTON_PARENT_FACT_<KEY>` for each scalar fact whose key is a plain word.
pub fn parent_facts(facts: &Value) -> Vec<(String, String)> {
    let Some(object) = facts.as_object() else {
        return Vec::new();
    };
    object
        .iter()
        .filter(|(key, _)| {
            !key.is_empty()
                && key.len() <= 64
                && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
        .filter_map(|(key, value)| {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some((
                format!("SEXTON_PARENT_FACT_{}", key.to_ascii_uppercase()),
                text,
            ))
        })
        .collect()
}

/// The environment of a merge command. Its inputs hold one directory per backup, oldest
/// first (`00-<full>`, `01-<incremental>`, …, the target last), each with the backup's data
/// objects (its volume's, for a volume merge) under their names in the backup's directory.
pub fn merge_env(job: &MergeJob, target_prefix: &str, paths: &JobPaths) -> Vec<(String, String)> {
    let mut env = common(
        "merge",
        job.cluster.as_str(),
        job.plan.as_str(),
        target_prefix,
        paths,
    );
    env.extend([
        ("SEXTON_TARGET_ID".into(), job.target.id.to_string()),
        ("SEXTON_TARGET_UID".into(), job.target.uid.clone()),
        ("SEXTON_BACKUP_ID".into(), job.target.id.to_string()),
        ("SEXTON_BACKUP_NAME".into(), job.target.backup_name.clone()),
        (
            "SEXTON_SOURCES".into(),
            job.sources
                .iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        (
            "SEXTON_VOLUME".into(),
            job.volume.clone().unwrap_or_default(),
        ),
        ("SEXTON_INPUT_DIR".into(), path_text(&paths.inputs)),
    ]);
    env
}

/// The environment of a verify command (a restore test). Its inputs hold one directory per
/// backup of the chain, oldest first (`00-<full>`, `01-<incremental>`, …, the target last),
/// each with every object of the backup (its `metadata.json` too, for the facts a restore
/// needs) under its name in the backup's directory.
pub fn verify_env(
    due: &sexton_model::wire::VerifyDue,
    target_prefix: &str,
    paths: &JobPaths,
) -> Vec<(String, String)> {
    let mut env = common(
        "verify",
        due.cluster.as_str(),
        due.plan.as_str(),
        target_prefix,
        paths,
    );
    env.extend([
        ("SEXTON_REQUEST_ID".into(), due.request_id.clone()),
        ("SEXTON_BACKUP_ID".into(), due.backup_id.to_string()),
        ("SEXTON_BACKUP_UID".into(), due.uid.clone()),
        (
            "SEXTON_CHAIN".into(),
            due.chain
                .iter()
                .map(|b| b.id.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        ("SEXTON_DEADLINE".into(), due.deadline.to_rfc3339()),
        ("SEXTON_INPUT_DIR".into(), path_text(&paths.inputs)),
    ]);
    // A drill (issue 47): the segments that reach the instant are in SEXTON_LOG_DIR, by their
    // file names; replay them from the restored backup's position up to SEXTON_RECOVER_UNTIL.
    if let Some(replay) = &due.replay {
        env.extend([
            (
                "SEXTON_RECOVER_UNTIL".into(),
                replay
                    .until
                    .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            ),
            ("SEXTON_LOG_DIR".into(), path_text(&paths.log)),
        ]);
    }
    env
}

/// What the command said about its backup.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// Everything, for `metadata.json`'s `executor` object.
    pub all: Map<String, Value>,
    /// `kind`, if the command set it.
    pub kind: Option<BackupKind>,
    /// `log_first` and `log_last`: the first and last binlog (or WAL) segment the backup needs
    /// to be consistent (issue 30), both or neither.
    pub log_range: Option<sexton_model::records::LogRange>,
}

/// Parses a facts file: one JSON object, or `key=value` lines (blank lines and `#` comments
/// skipped; keys of letters, digits, `_`, `-` and `.`; a later line wins).
pub fn parse_facts(text: &str) -> Result<Facts, String> {
    let mut all = Map::new();
    if text.trim_start().starts_with('{') {
        all = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(object)) => object,
            Ok(_) => return Err("the facts file is not a JSON object".into()),
            Err(err) => return Err(format!("the facts file is not valid JSON: {err}")),
        };
    } else {
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(format!("facts line {}: expected key=value", n + 1));
            };
            let key = key.trim();
            if key.is_empty()
                || key.len() > 64
                || !key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            {
                return Err(format!(
                    "facts line {}: key {key:?} must be 1 to 64 letters, digits, '_', '-' or '.'",
                    n + 1
                ));
            }
            all.insert(key.to_string(), Value::String(value.to_string()));
        }
    }
    let kind = match all.get("kind") {
        None => None,
        Some(Value::String(k)) if k == "full" => Some(BackupKind::Full),
        Some(Value::String(k)) if k == "incremental" => Some(BackupKind::Incremental),
        Some(other) => {
            return Err(format!(
                "facts: kind must be \"full\" or \"incremental\", not {other}"
            ))
        }
    };
    let text_fact = |key: &str| match all.get(key) {
        None => Ok(None),
        Some(Value::String(text)) if text.is_empty() => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!(
            "facts: {key} must be a segment's file name, not {other}"
        )),
    };
    let log_range = match (text_fact("log_first")?, text_fact("log_last")?) {
        (None, None) => None,
        (Some(first), Some(last)) => {
            let range = sexton_model::records::LogRange { first, last };
            sexton_model::checks::check_log_range(&range).map_err(|why| format!("facts: {why}"))?;
            Some(range)
        }
        _ => return Err("facts: log_first and log_last go together; give both or neither".into()),
    };
    Ok(Facts {
        all,
        kind,
        log_range,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(kind: &str, parent: Option<&str>) -> DueBackup {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "schedule": "nightly", "cluster": "db1", "plan": "base",
            "tick": "2026-03-01T03:00:00Z", "fired_at": "2026-03-01T03:00:01Z",
            "backup_id": "nightly-20260301030000", "backup_name": "nightly",
            "object_prefix": "backups/db1/nightly/nightly-20260301030000/",
            "kind": kind, "parent": parent,
        }))
        .unwrap()
    }

    fn paths() -> JobPaths {
        JobPaths {
            scratch: "/w/j/scratch".into(),
            output: "/w/j/output".into(),
            facts_file: "/w/j/facts".into(),
            event_file: "/w/j/event.json".into(),
            inputs: "/w/j/inputs".into(),
            log: "/w/j/log".into(),
        }
    }

    #[test]
    fn a_drill_says_until_when_and_where_the_log_is_and_a_test_does_not() {
        let due = |replay: serde_json::Value| -> sexton_model::wire::VerifyDue {
            serde_json::from_value(serde_json::json!({
                "request_id": "drill-1", "cluster": "db1", "plan": "p", "backup_id": "b1",
                "uid": "u", "requested_at": "2026-03-01T06:00:00Z",
                "deadline": "2026-03-01T07:00:00Z",
                "chain": [{"id": "b1", "uid": "u", "backup_name": "s", "kind": "full",
                           "objects": []}],
                "replay": replay,
            }))
            .unwrap()
        };
        let drill = verify_env(
            &due(serde_json::json!({"since": "2026-03-01T02:00:00Z",
                                    "until": "2026-03-01T05:30:00Z"})),
            "backups/db1/s/b1/",
            &paths(),
        );
        assert_eq!(
            get(&drill, "SEXTON_RECOVER_UNTIL"),
            Some("2026-03-01T05:30:00Z")
        );
        assert_eq!(get(&drill, "SEXTON_LOG_DIR"), Some("/w/j/log"));
        assert_eq!(get(&drill, "SEXTON_INPUT_DIR"), Some("/w/j/inputs"));
        let test = verify_env(&due(serde_json::Value::Null), "backups/db1/s/b1/", &paths());
        assert_eq!(get(&test, "SEXTON_RECOVER_UNTIL"), None);
        assert_eq!(get(&test, "SEXTON_LOG_DIR"), None);
    }

    fn get<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
        env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    #[test]
    fn a_full_backups_environment() {
        let env = backup_env(&due("full", None), &paths(), None);
        for (key, value) in [
            ("SEXTON_JOB", "backup"),
            ("SEXTON_BACKUP_ID", "nightly-20260301030000"),
            ("SEXTON_KIND", "full"),
            ("SEXTON_PARENT", ""),
            ("SEXTON_PARENT_METADATA", ""),
            ("SEXTON_CLUSTER", "db1"),
            (
                "SEXTON_OBJECT_PREFIX",
                "backups/db1/nightly/nightly-20260301030000/",
            ),
            ("SEXTON_OUTPUT_DIR", "/w/j/output"),
            ("SEXTON_SCRATCH_DIR", "/w/j/scratch"),
            ("SEXTON_TICK", "2026-03-01T03:00:00+00:00"),
            ("SEXTON_VOLUMES", ""),
        ] {
            assert_eq!(get(&env, key), Some(value), "{key}");
        }
    }

    #[test]
    fn an_incremental_sees_its_parents_facts() {
        let parent: BackupMetadata = serde_json::from_value(serde_json::json!({
            "format": "sexton.backup-metadata", "schema_version": 1, "backup_id": "p1",
            "cluster": "db1", "plan": "base", "backup_name": "nightly", "kind": "full",
            "completed_at": "2026-03-01T00:00:00Z", "objects": [],
            "executor": {"to_lsn": "44894", "n": 3, "ok": true, "nested": {"x": 1},
                         "bad key": "x", "lower_case": "y"},
        }))
        .unwrap();
        let path = Path::new("/w/j/inputs/p1.metadata.json");
        let env = backup_env(
            &due("incremental", Some("p1")),
            &paths(),
            Some((path, &parent)),
        );
        assert_eq!(get(&env, "SEXTON_KIND"), Some("incremental"));
        assert_eq!(get(&env, "SEXTON_PARENT"), Some("p1"));
        assert_eq!(
            get(&env, "SEXTON_PARENT_METADATA"),
            Some("/w/j/inputs/p1.metadata.json")
        );
        assert_eq!(get(&env, "SEXTON_PARENT_FACT_TO_LSN"), Some("44894"));
        assert_eq!(get(&env, "SEXTON_PARENT_FACT_N"), Some("3"));
        assert_eq!(get(&env, "SEXTON_PARENT_FACT_OK"), Some("true"));
        assert_eq!(get(&env, "SEXTON_PARENT_FACT_LOWER_CASE"), Some("y"));
        assert!(get(&env, "SEXTON_PARENT_FACT_NESTED").is_none());
        assert!(!env.iter().any(|(k, _)| k.contains(' ')));
    }

    #[test]
    fn facts_files_in_both_forms() {
        let facts =
            parse_facts("# mariabackup\nto_lsn=44894\nfrom_lsn=0\n\nkind=full\r\nx.y-z=a=b\n")
                .unwrap();
        assert_eq!(facts.kind, Some(BackupKind::Full));
        assert_eq!(facts.all["to_lsn"], "44894");
        assert_eq!(facts.all["x.y-z"], "a=b");
        let facts = parse_facts(r#"{"to_lsn": 44894, "tool": {"v": 1}}"#).unwrap();
        assert_eq!(facts.all["to_lsn"], 44894);
        assert_eq!(facts.kind, None);
        assert_eq!(parse_facts("").unwrap(), Facts::default());
        // The segments the backup needs to be consistent (issue 30): both or neither; empty
        // values (a script whose server has no binlog) are neither.
        let facts = parse_facts("log_first=mysql-bin.000004\nlog_last=mysql-bin.000005\n").unwrap();
        assert_eq!(
            facts.log_range,
            Some(sexton_model::records::LogRange {
                first: "mysql-bin.000004".into(),
                last: "mysql-bin.000005".into()
            })
        );
        assert_eq!(
            parse_facts("log_first=\nlog_last=\n").unwrap().log_range,
            None
        );
        for (bad, why) in [
            ("no equals sign", "expected key=value"),
            ("bad key=1", "must be 1 to 64"),
            ("=1", "must be 1 to 64"),
            ("kind=differential", "kind must be"),
            ("[1, 2]", "expected key=value"),
            ("{\"a\": ", "not valid JSON"),
            (r#"{"kind": 3}"#, "kind must be"),
            ("log_first=mysql-bin.000004", "go together"),
            ("log_last=mysql-bin.000004", "go together"),
            (
                "log_first=mysql-bin.000005\nlog_last=mysql-bin.000004",
                "is after last",
            ),
            ("log_first=../x\nlog_last=y", "without '/'"),
            (
                r#"{"log_first": 4, "log_last": "m.000004"}"#,
                "segment's file name",
            ),
        ] {
            let err = parse_facts(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }
}
