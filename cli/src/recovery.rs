//! `sexton recovery window` as a person reads it (issue 47): per place and plan, one summary
//! row, then the timeline oldest first (each restore point, each stretch the log replays to,
//! each gap with why) and every objective checked. `-o json` prints the answer itself.

use chrono::{DateTime, SecondsFormat, Utc};
use sexton_shared::recovery::{seconds_text, PlaceRecovery};

fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The whole answer as text.
pub fn text(places: &[PlaceRecovery], now: DateTime<Utc>) -> String {
    if places.is_empty() {
        return "nothing to show: the cluster has no backups and no schedules here\n".into();
    }
    let header = [
        "PLACE",
        "PLAN",
        "POINTS",
        "RESTORABLE",
        "POINT AGE",
        "GAPS",
        "PROMISED",
        "TESTED",
        "OBJECTIVES",
    ]
    .map(String::from);
    let rows: Vec<Vec<String>> = places.iter().map(|place| row(place, now)).collect();
    let mut out = crate::output::table_text(&header, &rows);
    for place in places {
        out.push('\n');
        out.push_str(&format!("{} / {}:\n", place.location, place.plan));
        out.push_str(&timeline(place));
        for check in &place.objectives {
            out.push_str(&format!(
                "  objective {} {}: {} ({})\n",
                check.objective,
                check.target,
                if check.met {
                    "met".to_string()
                } else {
                    format!("MISSED by {}", seconds_text(check.short_seconds))
                },
                check.message
            ));
        }
    }
    out
}

fn row(place: &PlaceRecovery, now: DateTime<Utc>) -> Vec<String> {
    let recovery = &place.recovery;
    let span = match (recovery.oldest(), recovery.newest()) {
        (Some(oldest), Some(newest)) => format!("{} .. {}", time(oldest), time(newest)),
        _ => "nothing".into(),
    };
    let objectives = if place.objectives.is_empty() {
        "-".to_string()
    } else {
        place
            .objectives
            .iter()
            .map(|c| format!("{} {}", c.objective, if c.met { "met" } else { "MISSED" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        place.location.to_string(),
        place.plan.to_string(),
        recovery.points.len().to_string(),
        span,
        place
            .point_age_seconds
            .map_or_else(|| "-".into(), seconds_text),
        recovery.gaps.len().to_string(),
        place.promised_window.clone().unwrap_or_else(|| "-".into()),
        place.passed_test.as_ref().map_or_else(
            || "never".into(),
            |t| {
                format!(
                    "{} ago ({})",
                    seconds_text((now - t.at).num_seconds()),
                    t.id
                )
            },
        ),
        objectives,
    ]
}

/// One line above a preview's table (issue 47): what the place can restore once the plan is
/// carried out, and each objective missed then.
pub fn after_plan_line(cluster: &str, place: &PlaceRecovery) -> String {
    let recovery = &place.recovery;
    let span = match (recovery.oldest(), recovery.newest()) {
        (Some(oldest), Some(newest)) => format!(
            "restorable {} .. {} ({} point(s), {} gap(s))",
            time(oldest),
            time(newest),
            recovery.points.len(),
            recovery.gaps.len()
        ),
        _ => "nothing restorable".into(),
    };
    let mut line = format!(
        "{cluster}/{} at {} after this plan: {span}",
        place.plan, place.location
    );
    for check in place.objectives.iter().filter(|c| !c.met) {
        line.push_str(&format!(
            "; objective {} {} MISSED by {}",
            check.objective,
            check.target,
            seconds_text(check.short_seconds)
        ));
    }
    line.push('\n');
    line
}

/// The place's timeline, oldest first: points, replay stretches and gaps.
fn timeline(place: &PlaceRecovery) -> String {
    let recovery = &place.recovery;
    let mut lines: Vec<(DateTime<Utc>, u8, String)> = Vec::new();
    for point in &recovery.points {
        let chain = if point.chain.len() > 1 {
            format!(" (chain {})", point.chain.join(" → "))
        } else {
            String::new()
        };
        lines.push((
            point.at.to_utc(),
            0,
            format!(
                "  {}  point    {}{chain}\n",
                time(point.at.to_utc()),
                point.id
            ),
        ));
    }
    for interval in &recovery.intervals {
        lines.push((
            interval.from,
            1,
            format!(
                "  {} .. {}  replay   from {}\n",
                time(interval.from),
                time(interval.to),
                interval.bases.join(", ")
            ),
        ));
    }
    for gap in &recovery.gaps {
        lines.push((
            gap.from,
            2,
            format!(
                "  {} .. {}  GAP      {}\n",
                time(gap.from),
                time(gap.to),
                gap.reason
            ),
        ));
    }
    if lines.is_empty() {
        return "  nothing is restorable here\n".into();
    }
    lines.sort();
    lines.into_iter().map(|(_, _, line)| line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_reads_as_a_row_a_timeline_and_its_objectives() {
        let place: PlaceRecovery = serde_json::from_value(serde_json::json!({
            "location": "dr", "plan": "full",
            "recovery": {
                "points": [
                    {"id": "f1", "at": "2026-12-01T03:00:00Z", "chain": ["f1"]},
                    {"id": "i2", "at": "2026-12-02T03:00:00Z", "chain": ["f1", "i2"]}
                ],
                "intervals": [{"from": "2026-12-01T03:00:00Z", "to": "2026-12-01T20:00:00Z",
                               "bases": ["f1"]}],
                "gaps": [{"from": "2026-12-01T20:00:00Z", "to": "2026-12-02T03:00:00Z",
                          "reason": "no segment"}]
            },
            "promised_window": "2d",
            "point_age_seconds": 90000,
            "objectives": [{"objective": "rpo", "target": "1h", "met": false,
                            "short_seconds": 86400, "message": "the newest restorable instant is 1d 1h old"}]
        }))
        .unwrap();
        let text = text(
            std::slice::from_ref(&place),
            "2026-12-03T04:00:00Z".parse().unwrap(),
        );
        assert!(text.contains("PLACE"), "{text}");
        assert!(
            text.contains("2026-12-01T03:00:00Z .. 2026-12-02T03:00:00Z"),
            "{text}"
        );
        assert!(text.contains("point    i2 (chain f1 → i2)"), "{text}");
        assert!(text.contains("replay   from f1"), "{text}");
        assert!(text.contains("GAP      no segment"), "{text}");
        assert!(text.contains("objective rpo 1h: MISSED by 24h"), "{text}");
        assert!(text.contains("never"), "{text}");
        let line = after_plan_line("db1", &place);
        assert_eq!(
            line,
            "db1/full at dr after this plan: restorable 2026-12-01T03:00:00Z .. \
             2026-12-02T03:00:00Z (2 point(s), 1 gap(s)); objective rpo 1h MISSED by 24h\n"
        );
        assert_eq!(
            super::text(&[], Utc::now()),
            "nothing to show: the cluster has no backups and no schedules here\n"
        );
    }
}
