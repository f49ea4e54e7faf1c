//! What restic's golden files do not pin, checked against restic's (Go's) semantics: month
//! arithmetic that rolls forward, the strict within boundary, ISO weeks (week 53 and weeks
//! that start in the previous year), calendar fields read in each backup's own offset, ties,
//! and "latest" ignoring backups from the future.

mod common;

use chrono::{DateTime, FixedOffset};
use common::{at, catalog, full, kept, policy, reasons, run, utc};
use sexton_retention::gfs::{restic_keep, ResticKeep, Snapshot};

const NOW: &str = "2030-01-01T00:00:00Z";

/// Runs restic's core on snapshots given as RFC 3339 times (no tags) and returns the kept
/// input indices, newest first.
fn keep_indices(times: &[&str], policy_json: &str) -> Vec<usize> {
    keep_full(times, policy_json, NOW)
        .iter()
        .map(|k| k.input_index)
        .collect()
}

fn keep_full(times: &[&str], policy_json: &str, now: &str) -> Vec<ResticKeep> {
    let times: Vec<DateTime<FixedOffset>> = times.iter().map(|t| at(t)).collect();
    let snapshots: Vec<Snapshot<'_>> = times
        .iter()
        .map(|&time| Snapshot { time, tags: &[] })
        .collect();
    restic_keep(&snapshots, &policy(policy_json), utc(now)).unwrap()
}

#[test]
fn one_month_before_march_31_is_march_2_not_february_29() {
    let times = [
        "2016-03-31T12:00:00Z",           // latest
        "2016-03-02T12:00:00.000000001Z", // one nanosecond after the cutoff
        "2016-03-02T12:00:00Z",           // exactly the cutoff: not kept (strictly after)
        "2016-03-01T12:00:00Z",           // kept if the cutoff were clamped to February 29
    ];
    assert_eq!(keep_indices(&times, r#"{"keep_within": "1m"}"#), vec![0, 1]);
}

#[test]
fn one_year_before_a_leap_day_is_march_1() {
    let times = [
        "2016-02-29T12:00:00Z",
        "2015-03-01T12:00:01Z",
        "2015-03-01T12:00:00Z",
        "2015-02-28T23:00:00Z", // kept if the cutoff were clamped to February 28
    ];
    assert_eq!(keep_indices(&times, r#"{"keep_within": "1y"}"#), vec![0, 1]);
}

#[test]
fn within_is_computed_in_the_latest_backups_own_offset() {
    // Latest is April 1 01:00 at +02:00 (March 31 23:00 UTC). One month earlier in its own
    // offset is March 1 01:00 +02:00 = February 29 23:00 UTC; computed in UTC it would be
    // "February 31" 23:00 = March 2 23:00 UTC.
    let times = [
        "2016-04-01T01:00:00+02:00",
        "2016-03-01T00:00:00Z", // after Feb 29 23:00 UTC, before Mar 2 23:00 UTC
        "2016-02-29T22:00:00Z",
    ];
    assert_eq!(keep_indices(&times, r#"{"keep_within": "1m"}"#), vec![0, 1]);
}

#[test]
fn within_a_day_is_strictly_after_the_cutoff() {
    let times = [
        "2024-05-10T08:00:00Z",
        "2024-05-09T08:00:00Z", // exactly 24 hours before the latest
        "2024-05-09T08:00:00.5Z",
    ];
    assert_eq!(keep_indices(&times, r#"{"keep_within": "1d"}"#), vec![0, 2]);
    assert_eq!(
        keep_indices(&times, r#"{"keep_within": "24h"}"#),
        vec![0, 2]
    );
}

#[test]
fn iso_week_53_spans_the_new_year() {
    let times = [
        "2021-01-04T12:00:00Z", // Monday, 2021-W01
        "2021-01-03T12:00:00Z", // Sunday, 2020-W53
        "2021-01-01T12:00:00Z", // Friday, 2020-W53
        "2020-12-28T12:00:00Z", // Monday, 2020-W53
        "2020-12-27T12:00:00Z", // Sunday, 2020-W52
        "2020-12-20T12:00:00Z", // Sunday, 2020-W51
    ];
    assert_eq!(keep_indices(&times, r#"{"keep_weekly": 3}"#), vec![0, 1, 4]);
}

#[test]
fn an_iso_week_can_start_in_the_previous_calendar_year() {
    let times = [
        "2020-01-01T12:00:00Z", // Wednesday, 2020-W01
        "2019-12-30T12:00:00Z", // Monday, 2020-W01
        "2019-12-29T12:00:00Z", // Sunday, 2019-W52
        "2019-12-01T12:00:00Z",
    ];
    assert_eq!(keep_indices(&times, r#"{"keep_weekly": 2}"#), vec![0, 2]);
}

#[test]
fn calendar_buckets_are_read_in_each_backups_own_offset() {
    let times = [
        "2021-06-30T23:30:00-02:00", // newest; July 1 01:30 UTC but June where it was taken
        "2021-07-01T00:30:00Z",      // July
        "2021-06-15T12:00:00Z",      // June
    ];
    // Read in the recorded offsets: June, July, June → the first two months are kept.
    assert_eq!(keep_indices(&times, r#"{"keep_monthly": 2}"#), vec![0, 1]);
    // The same days, read the same way.
    assert_eq!(keep_indices(&times, r#"{"keep_daily": 2}"#), vec![0, 1]);
}

#[test]
fn equal_instants_keep_input_order_whatever_their_offsets() {
    let times = [
        "2021-01-01T00:00:00Z",
        "2021-01-01T01:00:00+01:00",
        "2020-12-31T23:00:00-01:00",
        "2020-12-30T12:00:00Z",
    ];
    assert_eq!(keep_indices(&times, r#"{"keep_last": 1}"#), vec![0]);
    assert_eq!(keep_indices(&times, r#"{"keep_last": 2}"#), vec![0, 1]);
    // Daily buckets of the tied backups: Jan 1, Jan 1, Dec 31 in their own offsets.
    assert_eq!(keep_indices(&times, r#"{"keep_daily": 2}"#), vec![0, 2]);
    let reversed: Vec<&str> = times.iter().rev().copied().collect();
    // Reversed input: index 1 is now the -01:00 backup (Dec 31), index 2 the +01:00 one.
    assert_eq!(keep_indices(&reversed, r#"{"keep_last": 1}"#), vec![1]);
    assert_eq!(keep_indices(&reversed, r#"{"keep_daily": 2}"#), vec![1, 2]);
}

#[test]
fn latest_ignores_backups_from_the_future_but_within_keeps_them() {
    let times = [
        "2021-01-20T00:00:00Z", // after "now"
        "2021-01-09T00:00:00Z", // latest
        "2021-01-06T00:00:00Z",
        "2021-01-01T00:00:00Z",
    ];
    let kept = keep_full(&times, r#"{"keep_within": "3d"}"#, "2021-01-10T00:00:00Z");
    let indices: Vec<usize> = kept.iter().map(|k| k.input_index).collect();
    assert_eq!(indices, vec![0, 1]);
}

#[test]
fn the_oldest_backup_uses_a_count_that_is_left() {
    let times = [
        "2024-03-01T20:00:00Z",
        "2024-03-01T10:00:00Z",
        "2024-03-01T01:00:00Z",
    ];
    let kept = keep_full(&times, r#"{"keep_daily": 5}"#, NOW);
    let summary: Vec<(usize, Vec<String>, i64)> = kept
        .iter()
        .map(|k| (k.input_index, k.matches.clone(), k.counters.daily))
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, vec!["daily snapshot".to_owned()], 4),
            (2, vec!["oldest daily snapshot".to_owned()], 3),
        ]
    );
}

#[test]
fn unlimited_counts_every_period_and_shows_minus_one() {
    let times = [
        "2024-03-03T12:00:00Z",
        "2024-03-02T12:00:00Z",
        "2024-03-02T08:00:00Z",
    ];
    let kept = keep_full(&times, r#"{"keep_daily": -1}"#, NOW);
    let summary: Vec<(usize, i64)> = kept
        .iter()
        .map(|k| (k.input_index, k.counters.daily))
        .collect();
    // The oldest is kept too: an unlimited bucket always has a count left.
    assert_eq!(summary, vec![(0, -1), (1, -1), (2, -1)]);
    assert_eq!(kept[2].matches, vec!["oldest daily snapshot".to_owned()]);
}

#[test]
fn the_engine_reports_restic_reasons_and_measures_within_from_the_newest_backup() {
    // A schedule that stopped two months ago: keep_within is relative to the newest backup,
    // not to now, so its last week survives.
    let backups = (1..=20)
        .map(|day| full(&format!("b{day}"), &format!("2024-01-{day:02}T02:00:00Z")))
        .collect();
    let catalog = catalog(backups);
    let plan = run(
        &catalog,
        &policy(r#"{"keep_within": "7d"}"#),
        "2024-03-20T00:00:00Z",
    );
    assert_eq!(
        kept(&plan),
        vec!["b20", "b19", "b18", "b17", "b16", "b15", "b14"]
    );
    assert_eq!(
        reasons(&plan, "b20"),
        vec!["within 7d", "floor: newest completed full backup"]
    );
    assert_eq!(reasons(&plan, "b13"), vec!["no rule keeps it"]);
}
