//! `sexton retention plan --catalog-from pgbackrest:FILE | barman:FILE` (issue 30): what those
//! tools print about their backups, read into Sexton's catalog, so a team can see what Sexton
//! would keep before it moves. Pure: text in, a catalog and notes out.
//!
//! - **pgBackRest**, `pgbackrest info --stanza=NAME --output=json`: one stanza's `backup` list.
//!   `label` is the id; `type` `full` is a full, `incr` an incremental on `prior`, `diff` a
//!   differential (an incremental on its full, marked `differential`, which `keep_diff`
//!   counts); `timestamp.start`/`stop` (Unix seconds) are the start and
//!   completion; `archive.start`/`stop` (the WAL files that make the backup consistent) are its
//!   log range. pgBackRest lists only what it keeps (its `expire` runs after every backup), so
//!   what it keeps is every listed backup.
//! - **barman**, `barman list-backups SERVER --format json`: one server's list. `backup_id` is
//!   the id; `status` `DONE` is completed, `FAILED` failed, anything else in progress;
//!   `end_time_timestamp` the completion; `backup_type` `incremental` needs a
//!   `parent_backup_id` (from `barman show-backup`, which the list lacks). `retention_status`
//!   says what barman keeps: `OBSOLETE` goes, everything else stays; `KEEP:FULL` and
//!   `KEEP:STANDALONE` become the holds `keep:barman` and `standalone:barman`, so Sexton keeps
//!   them as barman does.

use std::collections::BTreeSet;

use chrono::{DateTime, FixedOffset, TimeZone, Utc};
use serde_json::{Map, Value};
use sexton_retention::{BackupKind, BackupRecord, BackupStatus, Catalog, LogRange};

/// A tool's listing, read.
#[derive(Debug)]
pub struct Imported {
    pub tool: &'static str,
    pub catalog: Catalog,
    /// The ids the tool keeps (its own retention's answer, as far as the listing says).
    pub tool_keeps: BTreeSet<String>,
    /// What the reading changed or could not carry over.
    pub notes: Vec<String>,
}

/// Reads `text`, printed by the tool named in `spec` (`pgbackrest` or `barman`).
pub fn read(tool: &str, text: &str) -> Result<Imported, String> {
    let value: Value = serde_json::from_str(text).map_err(|err| {
        let hint = match tool {
            "pgbackrest" => " (print it with `pgbackrest info --stanza=NAME --output=json`; the text form is not read)",
            "barman" => " (print it with `barman list-backups SERVER --format json`; the text form is not read)",
            _ => "",
        };
        format!("{tool}: not valid JSON: {err}{hint}")
    })?;
    match tool {
        "pgbackrest" => pgbackrest(&value),
        "barman" => barman(&value),
        other => Err(format!(
            "--catalog-from {other:?}: expected pgbackrest:FILE or barman:FILE"
        )),
    }
}

fn field<'a>(object: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a Value, String> {
    object.get(key).ok_or_else(|| format!("{at}: no {key:?}"))
}

fn text<'a>(object: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a str, String> {
    field(object, key, at)?
        .as_str()
        .filter(|text| !text.is_empty())
        .ok_or_else(|| format!("{at}: {key:?} must be a non-empty string"))
}

/// Unix seconds (a number, or a string of digits as barman writes them) as a UTC time.
fn unix_time(value: &Value, what: &str) -> Result<DateTime<FixedOffset>, String> {
    let seconds = match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse::<i64>().ok(),
        _ => None,
    }
    .ok_or_else(|| format!("{what}: expected Unix seconds, got {value}"))?;
    Utc.timestamp_opt(seconds, 0)
        .single()
        .filter(|_| seconds >= 0)
        .map(|t| t.fixed_offset())
        .ok_or_else(|| format!("{what}: {seconds} is not a time"))
}

fn check_id(id: &str, at: &str) -> Result<(), String> {
    if id.len() > 200 || id.chars().any(char::is_control) {
        return Err(format!("{at}: {id:?} is not a backup label"));
    }
    Ok(())
}

fn pgbackrest(value: &Value) -> Result<Imported, String> {
    let stanzas = value
        .as_array()
        .ok_or("pgbackrest: expected the array `pgbackrest info --output=json` prints")?;
    let stanza = match stanzas.as_slice() {
        [one] => one
            .as_object()
            .ok_or("pgbackrest: a stanza must be an object")?,
        [] => return Err("pgbackrest: the listing holds no stanza".into()),
        many => {
            let names: Vec<&str> = many
                .iter()
                .filter_map(|s| s.get("name").and_then(Value::as_str))
                .collect();
            return Err(format!(
                "pgbackrest: the listing holds {} stanzas ({}); read one with \
                 `pgbackrest info --stanza=NAME --output=json`",
                many.len(),
                names.join(", ")
            ));
        }
    };
    let name = stanza.get("name").and_then(Value::as_str).unwrap_or("?");
    let backups = field(stanza, "backup", "pgbackrest stanza")?
        .as_array()
        .ok_or("pgbackrest: \"backup\" must be an array")?;
    let mut catalog = Catalog::default();
    let mut notes = Vec::new();
    let mut seen = BTreeSet::new();
    let mut differentials = 0;
    for (n, backup) in backups.iter().enumerate() {
        let at = format!("pgbackrest backup {n}");
        let backup = backup
            .as_object()
            .ok_or_else(|| format!("{at}: must be an object"))?;
        let label = text(backup, "label", &at)?;
        check_id(label, &at)?;
        let at = format!("pgbackrest backup {label}");
        if !seen.insert(label.to_string()) {
            return Err(format!("{at}: listed twice"));
        }
        let (kind, differential) = match text(backup, "type", &at)? {
            "full" => (BackupKind::Full, false),
            "incr" => (BackupKind::Incremental, false),
            "diff" => {
                differentials += 1;
                (BackupKind::Incremental, true)
            }
            other => return Err(format!("{at}: type {other:?} is not full, diff or incr")),
        };
        let parent = match (kind, backup.get("prior")) {
            (BackupKind::Full, _) => None,
            (_, Some(Value::String(prior))) if !prior.is_empty() => Some(prior.clone()),
            _ => {
                return Err(format!(
                    "{at}: a {} backup needs its \"prior\"",
                    text(backup, "type", &at)?
                ))
            }
        };
        let times = field(backup, "timestamp", &at)?
            .as_object()
            .ok_or_else(|| format!("{at}: \"timestamp\" must be an object"))?;
        let started = unix_time(
            field(times, "start", &at)?,
            &format!("{at} timestamp.start"),
        )?;
        let stopped = unix_time(field(times, "stop", &at)?, &format!("{at} timestamp.stop"))?;
        if stopped < started {
            return Err(format!("{at}: it stops before it starts"));
        }
        let log_range = match backup.get("archive").and_then(Value::as_object) {
            Some(archive) => match (
                archive.get("start").and_then(Value::as_str),
                archive.get("stop").and_then(Value::as_str),
            ) {
                (Some(first), Some(last)) => {
                    let range = LogRange {
                        first: first.to_string(),
                        last: last.to_string(),
                    };
                    sexton_model::checks::check_log_range(&range)
                        .map_err(|why| format!("{at}: archive: {why}"))?;
                    Some(range)
                }
                _ => None,
            },
            None => None,
        };
        if backup.get("error").and_then(Value::as_bool) == Some(true) {
            notes.push(format!(
                "{label}: pgBackRest found page checksum errors in it; read as completed, as \
                 pgBackRest keeps it"
            ));
        }
        catalog.backups.push(BackupRecord {
            id: label.to_string(),
            started_at: Some(started),
            completed_at: Some(stopped),
            status: BackupStatus::Completed,
            kind,
            parent,
            log_range,
            differential,
            ..BackupRecord::default()
        });
    }
    if differentials > 0 {
        notes.push(format!(
            "{differentials} differential backup(s): incrementals on their full, marked \
             differential, which keep_diff (repo-retention-diff) counts"
        ));
    }
    notes.push(format!(
        "stanza {name}: {} backup(s); pgBackRest lists only what its expire kept",
        catalog.backups.len()
    ));
    let tool_keeps = catalog.backups.iter().map(|b| b.id.clone()).collect();
    Ok(Imported {
        tool: "pgBackRest",
        catalog,
        tool_keeps,
        notes,
    })
}

fn barman(value: &Value) -> Result<Imported, String> {
    let servers = value
        .as_object()
        .ok_or("barman: expected the object `barman list-backups SERVER --format json` prints")?;
    let (server, backups) = match servers.len() {
        1 => servers.iter().next().expect("one"),
        0 => return Err("barman: the listing holds no server".into()),
        n => {
            return Err(format!(
                "barman: the listing holds {n} servers ({}); list one with `barman \
                 list-backups SERVER --format json`",
                servers.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        }
    };
    let backups = backups
        .as_array()
        .ok_or_else(|| format!("barman server {server}: expected a list of backups"))?;
    let mut catalog = Catalog::default();
    let mut tool_keeps = BTreeSet::new();
    let mut notes = Vec::new();
    let mut seen = BTreeSet::new();
    for (n, backup) in backups.iter().enumerate() {
        let at = format!("barman backup {n}");
        let backup = backup
            .as_object()
            .ok_or_else(|| format!("{at}: must be an object (list without --minimal)"))?;
        let id = text(backup, "backup_id", &at)?;
        check_id(id, &at)?;
        let at = format!("barman backup {id}");
        if !seen.insert(id.to_string()) {
            return Err(format!("{at}: listed twice"));
        }
        let status = match text(backup, "status", &at)? {
            "DONE" => BackupStatus::Completed,
            "FAILED" => BackupStatus::Failed,
            "EMPTY" | "STARTED" | "WAITING_FOR_WALS" | "SYNCING" => BackupStatus::InProgress,
            other => return Err(format!("{at}: status {other:?} is not one barman writes")),
        };
        let completed_at = match backup.get("end_time_timestamp") {
            Some(value) => Some(unix_time(value, &format!("{at} end_time_timestamp"))?),
            None if status == BackupStatus::Completed => {
                return Err(format!("{at}: a DONE backup needs its end_time_timestamp"))
            }
            None => None,
        };
        let (kind, parent) = match backup.get("backup_type").and_then(Value::as_str) {
            Some("incremental") => match backup.get("parent_backup_id").and_then(Value::as_str) {
                Some(parent) if !parent.is_empty() => {
                    (BackupKind::Incremental, Some(parent.to_string()))
                }
                _ => {
                    return Err(format!(
                        "{at}: an incremental backup needs its parent_backup_id, which \
                         `barman list-backups` does not print: add it from `barman show-backup \
                         SERVER {id} --format json` (catalog_information.parent_backup_id)"
                    ))
                }
            },
            None | Some("full" | "rsync" | "snapshot") => (BackupKind::Full, None),
            Some(other) => {
                return Err(format!(
                    "{at}: backup_type {other:?} is not one barman writes"
                ))
            }
        };
        let mut holds = Vec::new();
        let retention = backup.get("retention_status").and_then(Value::as_str);
        match retention {
            Some("KEEP:FULL") => holds.push("keep:barman".to_string()),
            Some("KEEP:STANDALONE") => holds.push("standalone:barman".to_string()),
            _ => {}
        }
        if status == BackupStatus::Completed && retention != Some("OBSOLETE") {
            tool_keeps.insert(id.to_string());
        }
        if status != BackupStatus::Completed {
            // barman keeps failed backups until a user deletes them.
            tool_keeps.insert(id.to_string());
        }
        catalog.backups.push(BackupRecord {
            id: id.to_string(),
            completed_at,
            status,
            kind,
            parent,
            holds,
            ..BackupRecord::default()
        });
    }
    notes.push(format!(
        "server {server}: {} backup(s); barman marks {} OBSOLETE",
        catalog.backups.len(),
        catalog.backups.len() - tool_keeps.len()
    ));
    if catalog.backups.iter().any(|b| !b.holds.is_empty()) {
        notes.push(
            "KEEP:FULL and KEEP:STANDALONE are read as the holds keep:barman and \
             standalone:barman"
                .into(),
        );
    }
    Ok(Imported {
        tool: "barman",
        catalog,
        tool_keeps,
        notes,
    })
}

/// Where Sexton's plan and the tool's own retention part ways, a line each, oldest listing
/// order: what the tool keeps and Sexton deletes, and the reverse.
pub fn differences(imported: &Imported, plan: &sexton_retention::Plan) -> Vec<String> {
    let reasons = |decision: &sexton_retention::Decision| {
        decision
            .reasons
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut lines = Vec::new();
    for backup in &imported.catalog.backups {
        let tool_keeps = imported.tool_keeps.contains(&backup.id);
        let sexton = plan
            .keep
            .iter()
            .map(|d| (true, d))
            .chain(plan.delete.iter().map(|d| (false, d)))
            .find(|(_, d)| d.id == backup.id);
        let Some((sexton_keeps, decision)) = sexton else {
            continue;
        };
        if tool_keeps != sexton_keeps {
            lines.push(format!(
                "{}: {} {}, Sexton {} ({})",
                backup.id,
                imported.tool,
                if tool_keeps { "keeps" } else { "deletes" },
                if sexton_keeps { "keeps" } else { "deletes" },
                reasons(decision)
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pgbackrest info --stanza=demo --output=json`, in the shape the pgBackRest user guide
    /// ("Information", `info --output=json`) and its command reference document: a full, a
    /// differential and an incremental on it, a second full and an incremental.
    fn pgbackrest_info() -> String {
        let backup = |label: &str, kind: &str, prior: Option<&str>, start: i64, wal: &str| {
            serde_json::json!({
                "archive": {"start": wal, "stop": wal},
                "backrest": {"format": 5, "version": "2.54.0"},
                "database": {"id": 1, "repo-key": 1},
                "error": false,
                "info": {"delta": 1, "size": 2, "repository": {"delta": 1, "size": 1}},
                "label": label,
                "lsn": {"start": "0/2000028", "stop": "0/2000100"},
                "prior": prior,
                "reference": prior.map(|p| vec![p]),
                "timestamp": {"start": start, "stop": start + 60},
                "type": kind,
            })
        };
        let day = 86_400;
        let jan1 = 1_704_067_200;
        serde_json::json!([{
            "archive": [{"database": {"id": 1, "repo-key": 1}, "id": "16-1",
                         "max": "000000010000000000000009", "min": "000000010000000000000002"}],
            "backup": [
                backup("20240101-000000F", "full", None, jan1, "000000010000000000000002"),
                backup("20240101-000000F_20240102-000000D", "diff", Some("20240101-000000F"),
                       jan1 + day, "000000010000000000000004"),
                backup("20240101-000000F_20240103-000000I", "incr",
                       Some("20240101-000000F_20240102-000000D"), jan1 + 2 * day,
                       "000000010000000000000005"),
                backup("20240108-000000F", "full", None, jan1 + 7 * day, "000000010000000000000007"),
                backup("20240108-000000F_20240109-000000I", "incr", Some("20240108-000000F"),
                       jan1 + 8 * day, "000000010000000000000009"),
            ],
            "cipher": "none",
            "name": "demo",
            "status": {"code": 0, "message": "ok"},
        }])
        .to_string()
    }

    #[test]
    fn pgbackrest_info_reads_into_a_catalog_with_ranges_and_chains() {
        let read = read("pgbackrest", &pgbackrest_info()).unwrap();
        assert_eq!(read.catalog.backups.len(), 5);
        let diff = &read.catalog.backups[1];
        assert_eq!(diff.kind, BackupKind::Incremental);
        assert!(diff.differential && !read.catalog.backups[2].differential);
        assert_eq!(diff.parent.as_deref(), Some("20240101-000000F"));
        assert_eq!(
            diff.started_at.unwrap().to_rfc3339(),
            "2024-01-02T00:00:00+00:00"
        );
        assert_eq!(
            diff.completed_at.unwrap().to_rfc3339(),
            "2024-01-02T00:01:00+00:00"
        );
        assert_eq!(
            diff.log_range,
            Some(LogRange {
                first: "000000010000000000000004".into(),
                last: "000000010000000000000004".into()
            })
        );
        assert_eq!(
            read.catalog.backups[2].parent.as_deref(),
            Some("20240101-000000F_20240102-000000D")
        );
        assert!(read.notes[0].contains("1 differential"), "{:?}", read.notes);
        // pgBackRest lists what it keeps.
        assert_eq!(read.tool_keeps.len(), 5);

        // repo-retention-full=2 keeps both chains, as pgBackRest did; with 1, Sexton would
        // delete the older chain that pgBackRest still holds.
        let now: DateTime<Utc> = "2024-01-10T00:00:00Z".parse().unwrap();
        let plan = |setting: &str| {
            let policy = crate::policy_from::translate(setting).unwrap().policy;
            sexton_retention::plan(&read.catalog, &policy, now).unwrap()
        };
        let same = plan("pgbackrest:repo1-retention-full=2");
        assert!(differences(&read, &same).is_empty());
        let fewer = plan("pgbackrest:repo1-retention-full=1");
        let lines = differences(&read, &fewer);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(
            lines[0].starts_with("20240101-000000F: pgBackRest keeps, Sexton deletes ("),
            "{}",
            lines[0]
        );
        // pitr_full 1: the older chain keeps only its own WAL ranges (by name).
        let mut with_wal = read.catalog.clone();
        with_wal.binlog_segments = (2..=9)
            .map(|n| sexton_retention::BinlogSegment {
                key: format!("wal/0000000100000000000000{n:02X}"),
                first_event: None,
                last_event: Some((now - chrono::Duration::days(10 - n)).fixed_offset()),
            })
            .collect();
        let policy = crate::policy_from::translate(
            "pgbackrest:repo1-retention-full=2 repo1-retention-archive=1",
        )
        .unwrap()
        .policy;
        let plan = sexton_retention::plan(&with_wal, &policy, now).unwrap();
        assert_eq!(
            plan.binlog.range_only.len(),
            3,
            "the older full, its differential and its incremental: {:?}",
            plan.binlog
        );
    }

    /// `barman list-backups pg --format json`, as barman's JSON writer
    /// (`barman/output.py`, `JsonOutputWriter.result_list_backup`) writes it.
    fn barman_list() -> String {
        let done = |id: &str, end: i64, retention: &str| {
            serde_json::json!({
                "backup_id": id, "backup_type": "rsync",
                "end_time_timestamp": end.to_string(), "end_time": "Mon Jan  8 00:01:00 2024",
                "size_bytes": 1024, "wal_size_bytes": 16, "size": "1.0 KiB", "wal_size": "16 B",
                "status": "DONE", "retention_status": retention,
            })
        };
        serde_json::json!({"pg": [
            {"backup_id": "20240110T000000", "backup_type": "rsync", "status": "FAILED"},
            done("20240108T000000", 1_704_672_060, "VALID"),
            done("20240101T000000", 1_704_067_260, "OBSOLETE"),
            done("20231225T000000", 1_703_462_460, "KEEP:STANDALONE"),
        ]})
        .to_string()
    }

    #[test]
    fn barman_lists_read_with_what_barman_keeps() {
        let read = read("barman", &barman_list()).unwrap();
        assert_eq!(read.catalog.backups.len(), 4);
        assert_eq!(read.catalog.backups[0].status, BackupStatus::Failed);
        assert_eq!(read.catalog.backups[3].holds, vec!["standalone:barman"]);
        assert!(!read.tool_keeps.contains("20240101T000000"));
        assert!(read.tool_keeps.contains("20240110T000000"));
        let now: DateTime<Utc> = "2024-01-11T00:00:00Z".parse().unwrap();
        let policy = crate::policy_from::translate("barman:retention_policy=REDUNDANCY 1")
            .unwrap()
            .policy;
        let plan = sexton_retention::plan(&read.catalog, &policy, now).unwrap();
        // The same: barman's OBSOLETE backup goes, the standalone one stays by its hold, and the
        // failed one, which the list gives no time, is kept as barman keeps it.
        assert!(
            differences(&read, &plan).is_empty(),
            "{:?}",
            differences(&read, &plan)
        );
        assert_eq!(
            plan.delete
                .iter()
                .map(|d| d.id.as_str())
                .collect::<Vec<_>>(),
            vec!["20240101T000000"]
        );
        // A policy keeping more than barman did shows where they part.
        let more = sexton_retention::Policy::from_json(r#"{"keep_full": 3}"#).unwrap();
        let plan = sexton_retention::plan(&read.catalog, &more, now).unwrap();
        let lines = differences(&read, &plan);
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].starts_with("20240101T000000: barman deletes, Sexton keeps (keep_full 3"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn malformed_listings_get_clear_errors() {
        let stanza =
            |backup: Value| serde_json::json!([{"name": "demo", "backup": [backup]}]).to_string();
        let full = serde_json::json!({"label": "F", "type": "full", "prior": null,
                                      "timestamp": {"start": 10, "stop": 20}});
        let with = |key: &str, value: Value| {
            let mut backup = full.clone();
            backup[key] = value;
            stanza(backup)
        };
        for (tool, text, says) in [
            ("pgbackrest", "not json".to_string(), "not valid JSON"),
            (
                "pgbackrest",
                "stanza: main\n    status: ok".to_string(),
                "--output=json",
            ),
            (
                "barman",
                "Server main:".to_string(),
                "--format json",
            ),
            ("pgbackrest", "{}".to_string(), "expected the array"),
            ("pgbackrest", "[]".to_string(), "no stanza"),
            (
                "pgbackrest",
                r#"[{"name": "a", "backup": []}, {"name": "b", "backup": []}]"#.to_string(),
                "2 stanzas (a, b)",
            ),
            ("pgbackrest", r#"[{"name": "a"}]"#.to_string(), "no \"backup\""),
            ("pgbackrest", with("type", "snapshot".into()), "not full, diff or incr"),
            ("pgbackrest", with("type", "incr".into()), "needs its \"prior\""),
            ("pgbackrest", with("label", "".into()), "non-empty string"),
            ("pgbackrest", with("timestamp", serde_json::json!({"start": "soon", "stop": 1})), "Unix seconds"),
            ("pgbackrest", with("timestamp", serde_json::json!({"start": 30, "stop": 20})), "stops before it starts"),
            ("pgbackrest", with("timestamp", serde_json::json!({"start": -5, "stop": 20})), "not a time"),
            (
                "pgbackrest",
                with("archive", serde_json::json!({"start": "000000010000000000000009", "stop": "000000010000000000000002"})),
                "is after last",
            ),
            (
                "pgbackrest",
                serde_json::json!([{"name": "d", "backup": [full.clone(), full.clone()]}]).to_string(),
                "listed twice",
            ),
            ("barman", "[]".to_string(), "expected the object"),
            ("barman", "{}".to_string(), "no server"),
            ("barman", r#"{"a": [], "b": []}"#.to_string(), "2 servers"),
            ("barman", r#"{"pg": ["20240101T000000"]}"#.to_string(), "without --minimal"),
            ("barman", r#"{"pg": [{"backup_id": "x", "status": "GONE"}]}"#.to_string(), "not one barman writes"),
            ("barman", r#"{"pg": [{"backup_id": "x", "status": "DONE"}]}"#.to_string(), "end_time_timestamp"),
            (
                "barman",
                r#"{"pg": [{"backup_id": "x", "status": "DONE", "end_time_timestamp": "1", "backup_type": "incremental"}]}"#.to_string(),
                "parent_backup_id",
            ),
            ("restic", "{}".to_string(), "expected pgbackrest:FILE or barman:FILE"),
        ] {
            let error = read(tool, &text).unwrap_err();
            assert!(error.contains(says), "{tool} {text}: {error}");
        }
    }
}
