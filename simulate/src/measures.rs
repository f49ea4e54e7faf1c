//! What a day's backups mean to someone who must restore: the oldest point they can go back
//! to, and the worst recovery-point gap over the window the policy promises.
//!
//! The promised window is the longest time window the policy states (`recovery_window`,
//! `retention_duration`, `keep_within`, `keep_within_*`), measured back from the sampling
//! instant. A policy that states none (only counts) promises its whole kept span. The gap is
//! the largest interval between consecutive kept restore points whose later point lies inside
//! the window, so the pair straddling the window's start counts: restoring to the start goes
//! back to the backup before it.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;
use sexton_retention::Policy;

/// The largest interval between two consecutive kept backups.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Gap {
    pub seconds: i64,
    /// The older backup of the pair.
    pub after: String,
    /// The newer backup of the pair.
    pub before: String,
}

impl Gap {
    pub fn duration(&self) -> TimeDelta {
        TimeDelta::seconds(self.seconds)
    }
}

/// The start of the window the policy promises at `now`, or `None` when it states no time
/// window (then every kept backup is in scope).
pub fn promised_window_start(policy: &Policy, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let fixed_now = now.fixed_offset();
    let mut starts: Vec<DateTime<Utc>> = Vec::new();
    if let Some(window) = policy.recovery_window {
        starts.extend(now.checked_sub_signed(window.as_delta()));
    }
    if let Some(days) = policy.retention_duration {
        starts.extend(now.checked_sub_signed(days.as_delta()));
    }
    for duration in std::iter::once(policy.keep_within)
        .chain(policy.within_buckets())
        .flatten()
    {
        // Out of chrono's range: earlier than any backup.
        starts.push(
            duration
                .before(fixed_now)
                .map_or(DateTime::<Utc>::MIN_UTC, |start| start.with_timezone(&Utc)),
        );
    }
    starts.into_iter().min()
}

/// The worst gap between consecutive `points` (id, time; any order) whose newer point is after
/// `window_start`. `None` with fewer than two points in scope.
pub fn worst_gap(
    points: &[(&str, DateTime<Utc>)],
    window_start: Option<DateTime<Utc>>,
) -> Option<Gap> {
    let mut sorted: Vec<(&str, DateTime<Utc>)> = points.to_vec();
    sorted.sort_by_key(|&(_, time)| time);
    sorted
        .windows(2)
        .filter(|pair| window_start.is_none_or(|start| pair[1].1 > start))
        .map(|pair| Gap {
            seconds: (pair[1].1 - pair[0].1).num_seconds(),
            after: pair[0].0.to_owned(),
            before: pair[1].0.to_owned(),
        })
        .max_by_key(|gap| gap.seconds)
}

/// `3d`, `1d 6h`, `45min`, `90s`: the two largest non-zero units.
pub fn human_duration(delta: TimeDelta) -> String {
    let total = delta.num_seconds();
    if total == 0 {
        return "0s".to_owned();
    }
    let sign = if total < 0 { "-" } else { "" };
    let mut rest = total.unsigned_abs();
    let mut parts = Vec::new();
    for (unit, seconds) in [("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1)] {
        if rest >= seconds {
            parts.push(format!("{}{unit}", rest / seconds));
            rest %= seconds;
        }
    }
    parts.truncate(2);
    format!("{sign}{}", parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn the_pair_straddling_the_window_start_counts() {
        let points = [
            ("a", at("2026-01-01T00:00:00Z")),
            ("c", at("2026-01-05T00:00:00Z")),
            ("b", at("2026-01-02T00:00:00Z")),
        ];
        let gap = worst_gap(&points, Some(at("2026-01-03T00:00:00Z"))).unwrap();
        assert_eq!((gap.after.as_str(), gap.before.as_str()), ("b", "c"));
        assert_eq!(gap.duration(), TimeDelta::days(3));
        // Without a window the older pair is in scope too, and smaller.
        assert_eq!(worst_gap(&points, None).unwrap().seconds, 3 * 86_400);
        assert_eq!(worst_gap(&points[..1], None), None);
    }

    #[test]
    fn the_longest_stated_window_is_promised() {
        let now = at("2026-03-15T00:00:00Z");
        let policy = Policy::from_json(
            r#"{"keep_last": 3, "recovery_window": "1w", "retention_duration": 3, "keep_within": "1m"}"#,
        )
        .unwrap();
        assert_eq!(
            promised_window_start(&policy, now),
            Some(at("2026-02-15T00:00:00Z"))
        );
        assert_eq!(promised_window_start(&Policy::keep_last(3), now), None);
    }

    #[test]
    fn durations_read_like_a_person_wrote_them() {
        for (seconds, text) in [
            (0, "0s"),
            (90, "1min 30s"),
            (86_400, "1d"),
            (86_400 + 6 * 3600 + 5, "1d 6h"),
            (-3600, "-1h"),
        ] {
            assert_eq!(human_duration(TimeDelta::seconds(seconds)), text);
        }
    }
}
