//! A backup as the commands print it: `backup describe` as text, and the cells of a backup
//! row in `backup list` (VERIFIED, COPIES, STATUS).

use chrono::Utc;
use serde_json::Value;
use sexton_model::records::{Verification, VerificationState};
use sexton_shared::api::BackupDescription;

use super::{print_table, shown};

/// Where a described backup can be restored from: `primary, dr` when every place can, else
/// each place that cannot with why (`primary: no (…)`).
fn restorable_text(places: &[sexton_shared::api::RestorablePlace]) -> String {
    let can: Vec<&str> = places
        .iter()
        .filter(|p| p.restorable)
        .map(|p| p.location.as_str())
        .collect();
    let mut parts = vec![if can.is_empty() {
        "nowhere".to_string()
    } else {
        can.join(", ")
    }];
    for place in places.iter().filter(|p| !p.restorable) {
        parts.push(format!(
            "not at {} ({})",
            place.location,
            place.reason.as_deref().unwrap_or("-")
        ));
    }
    parts.join("; ")
}

/// `backup describe` as text: the backup, the retention verdict, and one row per volume.
pub(super) fn print_backup_description(described: &BackupDescription) {
    let backup = &described.backup;
    let size = backup
        .size_bytes
        .or_else(|| {
            (!backup.objects.is_empty()).then(|| backup.objects.iter().map(|o| o.size).sum())
        })
        .map_or_else(
            || "-".to_string(),
            |bytes| format!("{} ({bytes} bytes)", crate::output::size(bytes)),
        );
    // Everything a person asks of one backup (issue 26: parent, size, start time, labels and
    // objects were left out).
    for (label, value) in [
        ("id", shown(&backup.id)),
        ("cluster", shown(&backup.cluster)),
        ("plan", shown(&backup.plan)),
        ("schedule", shown(&backup.schedule)),
        ("status", backup.status_text().to_string()),
        ("kind", shown(&backup.kind)),
        ("parent", shown(&backup.parent)),
        ("started", shown(&backup.started_at)),
        ("completed", shown(&backup.completed_at)),
        ("size", size),
        ("labels", shown(&backup.labels)),
        ("tags", shown(&backup.tags)),
        ("holds", shown(&backup.holds)),
        ("legal hold", shown(&backup.legal_hold)),
        ("locked", locked_text(backup)),
        ("copies", copies_text(backup)),
        ("last error", shown(&backup.last_error)),
    ] {
        println!("{:<12}{value}", format!("{label}:"));
    }
    let verified = verified_text(backup.verification.as_ref(), Utc::now());
    println!("{:<12}{verified}", "verified:");
    let retention = &described.retention;
    println!(
        "{:<12}{}{}",
        "retention:",
        shown(&retention.verdict),
        in_parentheses(&retention.reasons)
    );
    for (location, verdict) in &described.copies_retention {
        println!(
            "{:<12}{}{}",
            format!("at {location}:"),
            shown(&verdict.verdict),
            in_parentheses(&verdict.reasons)
        );
    }
    if !described.restorable.is_empty() {
        println!(
            "{:<12}{}",
            "restorable:",
            restorable_text(&described.restorable)
        );
    }
    if !described.volumes.is_empty() {
        println!();
        let rows: Vec<Vec<String>> = described
            .volumes
            .iter()
            .map(|v| {
                vec![
                    shown(&v.name),
                    shown(&v.kind),
                    shown(&v.parent),
                    shown(&v.state),
                    join_reasons(&v.reasons),
                ]
            })
            .collect();
        print_table(
            &["VOLUME", "KIND", "PARENT", "STATE", "WHY"].map(String::from),
            &rows,
        );
    }
    println!();
    let rows: Vec<Vec<String>> = if backup.objects.is_empty() {
        // A record from before intake described objects: its keys, sizes unknown.
        backup
            .artifacts
            .iter()
            .map(|key| vec![key.clone(), "-".into(), "-".into()])
            .collect()
    } else {
        backup
            .objects
            .iter()
            .map(|o| {
                vec![
                    o.key.clone(),
                    o.size.to_string(),
                    o.sha256.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect()
    };
    print_table(&["OBJECT", "BYTES", "SHA256"].map(String::from), &rows);
    let history = backup.verification.as_ref().map(|v| &v.history);
    if let Some(history) = history.filter(|h| !h.is_empty()) {
        println!();
        let rows: Vec<Vec<String>> = history
            .iter()
            .map(|e| {
                vec![
                    shown(&e.at),
                    shown(&e.outcome),
                    shown(&e.duration_ms),
                    shown(&e.request_id),
                    shown(&e.reason),
                ]
            })
            .collect();
        print_table(
            &["TESTED", "OUTCOME", "MS", "REQUEST", "WHY"].map(String::from),
            &rows,
        );
    }
}

/// Whether `place` (`primary`, or a location) holds the backup of `row`: its objects at primary
/// are not deleted, or its copy there is in any state but `deleted` and `skipped`.
pub(super) fn held_at(row: &Value, place: &str) -> bool {
    if place == "primary" {
        return row.get("primary_deleted_at").is_none_or(Value::is_null);
    }
    row.pointer(&format!("/copies/{place}/state"))
        .and_then(Value::as_str)
        .is_some_and(|state| state != "deleted" && state != "skipped")
}

/// A backup row's cells worked out for the table: VERIFIED; COPIES (`dr:copied`, each place's
/// state); and STATUS `copies-only` once its objects at primary are gone and only copies
/// elsewhere hold it (issue 28), or, listing a location, the copy's state there (issue 50).
pub(super) fn backup_cells(row: &mut Value, now: chrono::DateTime<Utc>, location: Option<&str>) {
    row["verified_cell"] = Value::String(verified_cell(row, now));
    let copies: Vec<String> = row
        .get("copies")
        .and_then(Value::as_object)
        .map(|copies| {
            copies
                .iter()
                .map(|(name, copy)| format!("{name}:{}", copy["state"].as_str().unwrap_or("?")))
                .collect()
        })
        .unwrap_or_default();
    row["copies_cell"] = Value::String(if copies.is_empty() {
        "-".into()
    } else {
        copies.join(",")
    });
    match location.filter(|place| *place != "primary") {
        Some(place) => {
            if let Some(state) = row.pointer(&format!("/copies/{place}/state")).cloned() {
                row["status"] = state;
            }
        }
        None => {
            if row
                .get("primary_deleted_at")
                .is_some_and(|at| !at.is_null())
            {
                row["status"] = Value::String("copies-only".into());
            }
        }
    }
}

fn verified_cell(record: &Value, now: chrono::DateTime<Utc>) -> String {
    let verification = record
        .get("verification")
        .filter(|v| !v.is_null())
        .and_then(|v| serde_json::from_value::<Verification>(v.clone()).ok());
    verified_text(verification.as_ref(), now)
}

/// Where a backup's copies stand (issue 28): each location a copy rule sends it to, copied
/// (when) or awaiting its copy (the backup is held at its source meanwhile); `-` for none.
fn copies_text(backup: &sexton_model::records::BackupRecord) -> String {
    let mut parts: Vec<String> = backup
        .copies
        .iter()
        .map(|(location, copy)| {
            let at = copy
                .copied_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            match copy.state {
                sexton_model::copies::CopyState::Copied => {
                    let mut text = format!("{location}: copied {at}");
                    if let Some(class) = &copy.storage_class {
                        text.push_str(&format!(" in {class}"));
                    }
                    if let Some(test) = &copy.verification {
                        let when = test.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                        text.push_str(&match test.outcome.as_str() {
                            "verified" => format!(", restore-tested there {when}"),
                            other => format!(", restore test there {other} {when}"),
                        });
                    }
                    text
                }
                sexton_model::copies::CopyState::Deleted => format!(
                    "{location}: deleted {} ({})",
                    copy.deleted_at.map_or_else(
                        || "-".to_string(),
                        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    ),
                    copy.delete_reasons.join("; ")
                ),
                sexton_model::copies::CopyState::Skipped => format!(
                    "{location}: skipped {at} (its policy there would not keep it: {})",
                    copy.delete_reasons.join("; ")
                ),
                sexton_model::copies::CopyState::Missing => format!(
                    "{location}: missing (copied {at}; {})",
                    copy.problems.join("; ")
                ),
                state => format!(
                    "{location}: {} (copied {at}; {})",
                    state.as_str(),
                    copy.delete_reasons.join("; ")
                ),
            }
        })
        .collect();
    if let Some(at) = backup.primary_deleted_at {
        parts.insert(
            0,
            format!(
                "primary: deleted {}",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        );
    }
    parts.extend(backup.awaiting_copy().map(|location| {
        if backup.held_at_primary() {
            format!("{location}: awaiting copy (held at primary until copied)")
        } else {
            format!("{location}: awaiting copy, which cannot be made: primary's objects are gone")
        }
    }));
    if parts.is_empty() {
        "-".to_string()
    } else {
        parts.join(", ")
    }
}

/// How long ago a restore test proved the backup, `failed`, `testing` while one runs, `-` when
/// never tested.
fn verified_text(verification: Option<&Verification>, now: chrono::DateTime<Utc>) -> String {
    let Some(verification) = verification else {
        return "-".into();
    };
    if verification.pending.is_some() {
        return "testing".into();
    }
    match verification.state {
        VerificationState::Verified => verification
            .at
            .map(|at| format!("{} ago", crate::output::age(now - at)))
            .unwrap_or_else(|| "verified".into()),
        VerificationState::Failed => "failed".into(),
        VerificationState::Unverified => "-".into(),
    }
}

/// Reasons as one cell: each as the tables show text, `; ` between.
fn join_reasons(reasons: &[String]) -> String {
    reasons.iter().map(shown).collect::<Vec<_>>().join("; ")
}

/// ` (a; b)`, or nothing for no reasons (issue 50: an empty `()` said nothing).
fn in_parentheses(reasons: &[String]) -> String {
    if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", join_reasons(reasons))
    }
}

/// Until when each place's objects of the backup are under S3 Object Lock, one place after
/// another (issue 50: `locked: -` while the copy at dr was locked).
fn locked_text(backup: &sexton_model::records::BackupRecord) -> String {
    let at =
        |until: chrono::DateTime<Utc>| until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut places: Vec<String> = Vec::new();
    if let Some(until) = backup.locked_until.filter(|_| backup.held_at_primary()) {
        places.push(format!("primary until {}", at(until)));
    }
    for (location, copy) in &backup.copies {
        if let Some(until) = copy.locked_until.filter(|_| copy.is_held()) {
            places.push(format!("{location} until {}", at(until)));
        }
    }
    if places.is_empty() {
        "-".into()
    } else {
        format!("{} (S3 Object Lock)", places.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::{copies_text, in_parentheses, locked_text};

    #[test]
    fn copies_say_where_a_backup_lives_and_what_it_awaits() {
        let mut record: sexton_model::records::BackupRecord =
            serde_json::from_value(serde_json::json!({
                "id": "b1", "uid": "u1", "cluster": "c1", "plan": "p", "backup_name": "s",
                "kind": "full", "status": "completed", "copy_to": ["dr", "vault"],
                "copies": {"dr": {"state": "copied", "copied_at": "2026-03-01T00:00:00Z"}},
            }))
            .unwrap();
        assert_eq!(
            copies_text(&record),
            "dr: copied 2026-03-01T00:00:00Z, vault: awaiting copy (held at primary until copied)"
        );
        let dr = sexton_model::names::LocationName::new("dr").unwrap();
        let copy = record.copies.get_mut(&dr).unwrap();
        copy.storage_class = Some("STANDARD_IA".into());
        copy.verification = Some(
            serde_json::from_value(serde_json::json!({
                "request_id": "r", "outcome": "failed", "at": "2026-03-02T00:00:00Z"
            }))
            .unwrap(),
        );
        assert_eq!(
            copies_text(&record),
            "dr: copied 2026-03-01T00:00:00Z in STANDARD_IA, restore test there failed \
             2026-03-02T00:00:00Z, vault: awaiting copy (held at primary until copied)"
        );
        record.copy_to.clear();
        record.copies.clear();
        assert_eq!(copies_text(&record), "-");
    }

    #[test]
    fn locks_are_said_place_by_place() {
        let mut record: sexton_model::records::BackupRecord =
            serde_json::from_value(serde_json::json!({
                "id": "b1", "uid": "u1", "cluster": "c1", "plan": "p", "backup_name": "s",
                "kind": "full", "status": "completed",
                "copies": {"dr": {"state": "copied", "copied_at": "2026-03-01T00:00:00Z",
                                  "locked_until": "2026-04-01T00:00:00Z"}},
            }))
            .unwrap();
        assert_eq!(
            locked_text(&record),
            "dr until 2026-04-01T00:00:00Z (S3 Object Lock)"
        );
        record.locked_until = Some("2026-03-08T00:00:00Z".parse().unwrap());
        assert_eq!(
            locked_text(&record),
            "primary until 2026-03-08T00:00:00Z, dr until 2026-04-01T00:00:00Z (S3 Object Lock)"
        );
        // Gone at primary: its lock there says nothing any more.
        record.primary_deleted_at = Some("2026-03-09T00:00:00Z".parse().unwrap());
        record.copy_to = vec!["vault".parse().unwrap()];
        assert_eq!(
            locked_text(&record),
            "dr until 2026-04-01T00:00:00Z (S3 Object Lock)"
        );
        assert!(copies_text(&record).contains("vault: awaiting copy, which cannot be made"));
        assert_eq!(in_parentheses(&[]), "");
        assert_eq!(in_parentheses(&["a".into(), "b".into()]), " (a; b)");
    }
}
