//! The recovery value of a catalog (issue 47): restore points, replay intervals and gaps, on
//! small catalogs written the way a reader checks them.

mod common;

use chrono::{DateTime, Duration, FixedOffset, Utc};
use common::{at, full, incremental, policy, utc, with_status};
use sexton_retention::{
    after_plan, drill, plan, restorable, BackupRecord, BackupStatus, BinlogSegment, Catalog,
    VolumeArtifact,
};

fn t(text: &str) -> DateTime<Utc> {
    utc(text)
}

/// Segment `mysql-bin.<k>` covers six hours from 2024-02-29T18:00 + 6k hours.
fn named(k: i64) -> BinlogSegment {
    let first: DateTime<FixedOffset> = at("2024-02-29T18:00:00Z") + Duration::hours(6 * k);
    BinlogSegment {
        key: format!("g/binlog/mysql-bin.{k:06}"),
        first_event: Some(first),
        last_event: Some(first + Duration::hours(6)),
    }
}

fn started(mut backup: BackupRecord, start: &str) -> BackupRecord {
    backup.started_at = Some(at(start));
    backup
}

fn spans(recovery: &sexton_retention::Recovery) -> Vec<(String, String, Vec<String>)> {
    recovery
        .intervals
        .iter()
        .map(|i| (i.from.to_rfc3339(), i.to.to_rfc3339(), i.bases.clone()))
        .collect()
}

const NOW: &str = "2024-03-03T12:00:00Z";

#[test]
fn fulls_and_a_whole_archive_restore_to_any_instant_from_the_oldest_point() {
    let catalog = Catalog {
        backups: vec![
            started(full("F2", "2024-03-02T00:40:00Z"), "2024-03-02T00:10:00Z"),
            started(full("F1", "2024-03-01T00:40:00Z"), "2024-03-01T00:10:00Z"),
        ],
        binlog_segments: (0..12).map(named).collect(),
    };
    let recovery = restorable(&catalog, t(NOW));
    let ids: Vec<&str> = recovery.points.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["F1", "F2"]);
    // Cut at now, though the archive reaches 2024-03-03T18:00.
    assert_eq!(
        spans(&recovery),
        vec![(
            "2024-03-01T00:40:00+00:00".to_owned(),
            "2024-03-03T12:00:00+00:00".to_owned(),
            vec!["F1".to_owned(), "F2".to_owned()]
        )]
    );
    assert!(recovery.gaps.is_empty());
    assert!(recovery.restorable_at(t("2024-03-02T07:13:00Z")));
    assert!(!recovery.restorable_at(t("2024-03-01T00:39:59Z")));
    assert_eq!(recovery.oldest(), Some(t("2024-03-01T00:40:00Z")));
    assert_eq!(recovery.newest(), Some(t(NOW)));
}

#[test]
fn a_missing_segment_number_is_a_gap_until_the_next_point() {
    let mut segments: Vec<BinlogSegment> = (0..12).map(named).collect();
    segments.retain(|s| !s.key.ends_with(".000003"));
    let catalog = Catalog {
        backups: vec![
            started(full("F2", "2024-03-02T00:40:00Z"), "2024-03-02T00:10:00Z"),
            started(full("F1", "2024-03-01T00:40:00Z"), "2024-03-01T00:10:00Z"),
        ],
        binlog_segments: segments,
    };
    let recovery = restorable(&catalog, t(NOW));
    // Segment 3 (2024-03-01T12:00–18:00) is gone: F1 replays to its start only.
    assert_eq!(recovery.intervals.len(), 2);
    assert_eq!(recovery.intervals[0].to, t("2024-03-01T12:00:00Z"));
    assert_eq!(recovery.gaps.len(), 1);
    let gap = &recovery.gaps[0];
    assert_eq!(
        (gap.from, gap.to),
        (t("2024-03-01T12:00:00Z"), t("2024-03-02T00:40:00Z"))
    );
    assert!(
        gap.reason
            .starts_with("no segment between 2024-03-01T12:00:00Z and 2024-03-01T18:00:00Z"),
        "{}",
        gap.reason
    );
}

#[test]
fn a_gaps_reason_says_its_instants_to_the_second() {
    // Events from a real server carry sub-second instants; people read the reason (issue 50).
    let fraction = Duration::nanoseconds(123_456_789);
    let mut segments: Vec<BinlogSegment> = (0..12)
        .map(|k| {
            let mut segment = named(k);
            segment.first_event = segment.first_event.map(|t| t + fraction);
            segment.last_event = segment.last_event.map(|t| t + fraction);
            segment
        })
        .collect();
    segments.retain(|s| !s.key.ends_with(".000003"));
    let catalog = Catalog {
        backups: vec![
            started(full("F2", "2024-03-02T00:40:00Z"), "2024-03-02T00:10:00Z"),
            started(full("F1", "2024-03-01T00:40:00Z"), "2024-03-01T00:10:00Z"),
        ],
        binlog_segments: segments,
    };
    let recovery = restorable(&catalog, t(NOW));
    let gap = &recovery.gaps[0];
    assert_eq!(gap.from, t("2024-03-01T12:00:00Z") + fraction);
    assert!(
        gap.reason
            .starts_with("no segment between 2024-03-01T12:00:00Z and 2024-03-01T18:00:00Z"),
        "{}",
        gap.reason
    );
    let refused = sexton_retention::drill(&catalog, t(NOW), gap.from + Duration::hours(1))
        .expect_err("in the gap");
    assert!(!refused.contains(".123"), "{refused}");
}

#[test]
fn a_broken_chain_is_no_point_and_says_why() {
    let catalog = Catalog {
        backups: vec![
            full("F2", "2024-03-03T00:40:00Z"),
            incremental("I2", "2024-03-02T12:40:00Z", "I1"),
            with_status(
                incremental("I1", "2024-03-02T00:40:00Z", "F1"),
                BackupStatus::Expiring,
            ),
            full("F1", "2024-03-01T00:40:00Z"),
            incremental("I0", "2024-03-01T06:00:00Z", "F0"),
        ],
        binlog_segments: Vec::new(),
    };
    let recovery = restorable(&catalog, t(NOW));
    let ids: Vec<&str> = recovery.points.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["F1", "F2"]);
    assert_eq!(recovery.gaps.len(), 1);
    let reason = &recovery.gaps[0].reason;
    for part in [
        "no segment between",
        "I0 broken: F0 is missing",
        "I1 is expiring",
        "chain of I2 broken: I1 is expiring",
    ] {
        assert!(reason.contains(part), "{part}: {reason}");
    }
    // A whole chain, oldest first.
    let catalog = Catalog {
        backups: vec![
            incremental("I2", "2024-03-02T12:40:00Z", "I1"),
            incremental("I1", "2024-03-02T00:40:00Z", "F1"),
            full("F1", "2024-03-01T00:40:00Z"),
        ],
        binlog_segments: Vec::new(),
    };
    let recovery = restorable(&catalog, t(NOW));
    assert_eq!(recovery.point("I2").unwrap().chain, ["F1", "I1", "I2"]);
}

#[test]
fn what_the_archive_did_not_show_is_never_counted() {
    // Segment 2's end is unknown: the run ends at its first event.
    let mut segments: Vec<BinlogSegment> = (0..8).map(named).collect();
    segments[2].last_event = None;
    let catalog = Catalog {
        backups: vec![started(
            full("F1", "2024-03-01T00:40:00Z"),
            "2024-03-01T00:10:00Z",
        )],
        binlog_segments: segments,
    };
    let recovery = restorable(&catalog, t(NOW));
    assert_eq!(recovery.newest(), Some(t("2024-03-01T06:00:00Z")));
}

#[test]
fn names_that_do_not_compare_link_by_time_within_the_margin() {
    let segment = |key: &str, first: &str, last: &str| BinlogSegment {
        key: key.to_owned(),
        first_event: Some(at(first)),
        last_event: Some(at(last)),
    };
    let backups = vec![full("F1", "2024-03-01T00:40:00Z")];
    let catalog = Catalog {
        backups: backups.clone(),
        binlog_segments: vec![
            segment("a", "2024-03-01T00:00:00Z", "2024-03-01T02:00:00Z"),
            segment("b", "2024-03-01T02:04:00Z", "2024-03-01T04:00:00Z"),
            segment("c", "2024-03-01T04:06:00Z", "2024-03-01T08:00:00Z"),
        ],
    };
    // a–b are four minutes apart (within the margin), b–c six (a gap).
    let recovery = restorable(&catalog, t(NOW));
    assert_eq!(recovery.newest(), Some(t("2024-03-01T04:00:00Z")));
    // A seventh digit (another width) compares by time as well.
    let catalog = Catalog {
        backups,
        binlog_segments: vec![
            segment(
                "mysql-bin.999999",
                "2024-03-01T00:00:00Z",
                "2024-03-01T02:00:00Z",
            ),
            segment(
                "mysql-bin.1000000",
                "2024-03-01T02:00:00Z",
                "2024-03-01T04:00:00Z",
            ),
        ],
    };
    assert_eq!(
        restorable(&catalog, t(NOW)).newest(),
        Some(t("2024-03-01T04:00:00Z"))
    );
}

#[test]
fn volumes_restore_with_each_volumes_chain() {
    let with_volumes = |id: &str, time: &str, volumes: Vec<VolumeArtifact>| BackupRecord {
        volumes,
        ..full(id, time)
    };
    let mut expiring = VolumeArtifact::incremental("pv1", "B1", vec![]);
    expiring.expiring = true;
    let catalog = Catalog {
        backups: vec![
            with_volumes(
                "B3",
                "2024-03-03T00:00:00Z",
                vec![VolumeArtifact::incremental("pv0", "B2", vec![])],
            ),
            with_volumes(
                "B2",
                "2024-03-02T00:00:00Z",
                vec![VolumeArtifact::incremental("pv0", "B1", vec![]), expiring],
            ),
            with_volumes(
                "B1",
                "2024-03-01T00:00:00Z",
                vec![
                    VolumeArtifact::full("pv0", vec![]),
                    VolumeArtifact::full("pv1", vec![]),
                ],
            ),
        ],
        binlog_segments: Vec::new(),
    };
    let recovery = restorable(&catalog, t(NOW));
    // B2 loses pv1 (expiring): no point; B3 has pv0 only, whose chain is whole through B2.
    let ids: Vec<&str> = recovery.points.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["B1", "B3"]);
    assert_eq!(recovery.point("B3").unwrap().chain, ["B1", "B2", "B3"]);
    assert!(
        recovery.gaps[0]
            .reason
            .contains("volume pv1 of B2 is expiring"),
        "{:?}",
        recovery.gaps
    );
}

#[test]
fn after_plan_is_the_catalog_once_the_plan_is_carried_out() {
    let catalog = Catalog {
        backups: vec![
            started(full("F3", "2024-03-03T00:40:00Z"), "2024-03-03T00:10:00Z"),
            started(full("F2", "2024-03-02T00:40:00Z"), "2024-03-02T00:10:00Z"),
            started(full("F1", "2024-03-01T00:40:00Z"), "2024-03-01T00:10:00Z"),
        ],
        binlog_segments: (0..12).map(named).collect(),
    };
    let plan = plan(&catalog, &policy(r#"{"keep_last": 2}"#), t(NOW)).unwrap();
    let after = after_plan(&catalog, &plan);
    let ids: Vec<&str> = after.backups.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, ["F3", "F2"]);
    // Segments 0–4 end before F2's start.
    assert_eq!(after.binlog_segments.len(), 7);
    let recovery = restorable(&after, t(NOW));
    assert_eq!(recovery.oldest(), Some(t("2024-03-02T00:40:00Z")));
    assert_eq!(recovery.newest(), Some(t(NOW)));
    // The output is JSON for the services.
    let json = serde_json::to_value(&recovery).unwrap();
    assert_eq!(json["points"][0]["id"], "F2");
    assert_eq!(json["intervals"][0]["bases"][0], "F2");
    assert!(json["gaps"].as_array().unwrap().is_empty());
}

/// A drill's instant is drawn over the restorable instants laid end to end; kept to a window
/// by `since`; and what it reads is the newest base that reaches it.
#[test]
fn a_drill_picks_a_restorable_instant_and_reads_the_newest_base_that_reaches_it() {
    let catalog = drill_catalog();
    let now = t("2026-03-02T00:00:00Z");
    let recovery = restorable(&catalog, now);
    for k in 0..=20 {
        let at = recovery.instant_at(k as f64 / 20.0).unwrap();
        assert!(recovery.restorable_at(at), "{at}");
        let drill = drill(&catalog, now, at).unwrap();
        assert!(drill.base.at.to_utc() <= at);
    }
    assert_eq!(recovery.instant_at(f64::NAN), recovery.instant_at(0.0));
    let late = recovery.since(t("2026-03-01T12:00:00Z"));
    assert!(late.instant_at(0.0).unwrap() >= t("2026-03-01T12:00:00Z"));
    // Past f2's own instant, f2 is the base (not f1, whose replay reaches as far).
    let drill_to = drill(&catalog, now, t("2026-03-01T13:00:00Z")).unwrap();
    assert_eq!(drill_to.base.id, "f2");
    let replay = drill_to.replay.unwrap();
    assert_eq!(replay.until, t("2026-03-01T13:00:00Z"));
    assert_eq!(replay.since, t("2026-03-01T06:00:00Z"));
    // At a point exactly: no replay.
    assert_eq!(
        drill(&catalog, now, t("2026-03-01T02:00:00Z"))
            .unwrap()
            .replay,
        None
    );
    let refused = |at: &str| drill(&catalog, now, t(at)).unwrap_err();
    assert!(refused("2026-02-28T00:00:00Z").contains("before the oldest restorable instant"));
    assert!(refused("2026-03-01T23:00:00Z").contains("after the newest restorable instant"));
    assert!(refused("2026-03-03T00:00:00Z").contains("in the future"));
    assert!(drill(&Catalog::default(), now, t("2026-03-01T02:00:00Z"))
        .unwrap_err()
        .contains("nothing is restorable"));
}

/// Two fulls on 2026-03-01 (done 02:00 and 07:00) and an archive of three six-hour segments
/// from 00:00 to 18:00.
fn drill_catalog() -> Catalog {
    let segment = |k: i64| {
        let first: DateTime<FixedOffset> = at("2026-03-01T00:00:00Z") + Duration::hours(6 * k);
        BinlogSegment {
            key: format!("g/binlog/mysql-bin.{k:06}"),
            first_event: Some(first),
            last_event: Some(first + Duration::hours(6)),
        }
    };
    Catalog {
        backups: vec![
            started(full("f1", "2026-03-01T02:00:00Z"), "2026-03-01T01:50:00Z"),
            started(full("f2", "2026-03-01T07:00:00Z"), "2026-03-01T06:30:00Z"),
        ],
        binlog_segments: (0..3).map(segment).collect(),
    }
}
