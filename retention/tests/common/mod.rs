//! Builders and assertions shared by the integration tests: records and plans are written
//! the way a reader checks them, by id and reason.

#![allow(dead_code)]

use chrono::{DateTime, FixedOffset, Utc};
use sexton_retention::{
    plan, BackupKind, BackupRecord, BackupStatus, BinlogSegment, Catalog, Plan, Policy,
};

/// An RFC 3339 time with its offset.
pub fn at(text: &str) -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339(text).unwrap_or_else(|error| panic!("{text}: {error}"))
}

pub fn utc(text: &str) -> DateTime<Utc> {
    at(text).with_timezone(&Utc)
}

pub fn full(id: &str, completed_at: &str) -> BackupRecord {
    BackupRecord::completed_full(id, at(completed_at))
}

pub fn incremental(id: &str, completed_at: &str, parent: &str) -> BackupRecord {
    BackupRecord::completed_incremental(id, at(completed_at), parent)
}

pub fn failed(id: &str, completed_at: &str) -> BackupRecord {
    BackupRecord {
        id: id.to_owned(),
        completed_at: Some(at(completed_at)),
        status: BackupStatus::Failed,
        ..BackupRecord::default()
    }
}

pub fn with_status(mut backup: BackupRecord, status: BackupStatus) -> BackupRecord {
    backup.status = status;
    backup
}

pub fn segment(key: &str, first: Option<&str>, last: Option<&str>) -> BinlogSegment {
    BinlogSegment {
        key: key.to_owned(),
        first_event: first.map(at),
        last_event: last.map(at),
    }
}

pub fn catalog(backups: Vec<BackupRecord>) -> Catalog {
    Catalog {
        backups,
        binlog_segments: Vec::new(),
    }
}

pub fn policy(json: &str) -> Policy {
    Policy::from_json(json).unwrap_or_else(|error| panic!("{json}: {error}"))
}

/// Plans and checks that every backup is decided exactly once.
pub fn run(catalog: &Catalog, policy: &Policy, now: &str) -> Plan {
    let plan = plan(catalog, policy, utc(now)).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        plan.keep.len() + plan.delete.len(),
        catalog.backups.len(),
        "every backup is decided once"
    );
    plan
}

pub fn kept(plan: &Plan) -> Vec<&str> {
    plan.keep.iter().map(|d| d.id.as_str()).collect()
}

pub fn deleted(plan: &Plan) -> Vec<&str> {
    plan.delete.iter().map(|d| d.id.as_str()).collect()
}

/// The reasons given for `id`, whichever list it is in.
pub fn reasons(plan: &Plan, id: &str) -> Vec<String> {
    let (_, decision) = plan
        .decision(id)
        .unwrap_or_else(|| panic!("{id} is not in the plan"));
    decision.reasons.iter().map(ToString::to_string).collect()
}

/// A daily chain description: `F` full, `I` incremental on the previous good backup, `X`
/// failed; day `k` (1-based) completes at `2024-01-<k>T02:00:00Z` with id `d<k>`.
pub fn daily_chain(pattern: &str) -> Vec<BackupRecord> {
    let mut backups = Vec::new();
    let mut last_good: Option<String> = None;
    for (day, kind) in pattern.chars().filter(|c| !c.is_whitespace()).enumerate() {
        let id = format!("d{}", day + 1);
        let time = format!("2024-01-{:02}T02:00:00Z", day + 1);
        let backup = match kind {
            'F' => full(&id, &time),
            'I' => incremental(
                &id,
                &time,
                last_good.as_deref().expect("a good backup first"),
            ),
            'X' => BackupRecord {
                kind: BackupKind::Incremental,
                parent: last_good.clone(),
                ..failed(&id, &time)
            },
            other => panic!("unknown kind {other}"),
        };
        if kind != 'X' {
            last_good = Some(id);
        }
        backups.push(backup);
    }
    backups
}
