//! Spreading a fleet's schedules over the hour, day or week, deterministically.
//!
//! Hundreds of schedules written `0 3 * * *` all hit the object store at 03:00. Two remedies,
//! both keyed on the schedule's **name** only (names are unique across the fleet, and a hash of
//! it is the same on every replica, after every restart, and offline in `sexton schedule next`):
//!
//! * `jitter: <span>`: every run of the schedule moves by one fixed offset in `[0, jitter)`
//!   (Temporal's jitter, without the randomness: a replica that restarts must not move runs);
//! * `@hourly-random`, `@daily-random`, `@weekly-random` (K8up's descriptors): the minute, the
//!   hour and the weekday are drawn once from the name, giving an ordinary cron spec.
//!
//! The hash is FNV-1a over the name's bytes followed by SplitMix64's finaliser, written out
//! here rather than taken from `std` (whose `DefaultHasher` may change between Rust releases,
//! which would move every schedule's runs on an upgrade). The tests pin a few values.

/// The seed of a schedule: FNV-1a (64 bit) of its name.
pub fn schedule_seed(name: &str) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    name.bytes().fold(OFFSET_BASIS, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

/// SplitMix64's finaliser: every input bit affects every output bit, so names that differ in
/// one character land far apart.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What a draw is for: each purpose gets its own independent value from the same seed.
#[derive(Debug, Clone, Copy)]
enum Purpose {
    Jitter = 1,
    Minute = 2,
    Hour = 3,
    Weekday = 4,
}

/// A value in `0..bound` drawn from the seed for `purpose` (`bound` ≥ 1). The modulo bias is
/// below 2⁻³⁰ for every bound used here.
fn draw(seed: u64, purpose: Purpose, bound: u64) -> u64 {
    let salted = seed ^ (purpose as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    mix(salted) % bound.max(1)
}

/// The offset, in whole seconds within `[0, jitter_seconds)`, by which every run of the
/// schedule `name` moves.
pub fn jitter_offset_seconds(name: &str, jitter_seconds: u64) -> u64 {
    draw(schedule_seed(name), Purpose::Jitter, jitter_seconds)
}

/// The descriptors that draw their fields from the schedule's name.
pub const RANDOM_DESCRIPTORS: [&str; 3] = ["@hourly-random", "@daily-random", "@weekly-random"];

/// If `spec` (optionally after a `CRON_TZ=`/`TZ=` prefix) is one of the random descriptors,
/// the ordinary 5-field spec it stands for for schedule `name`, prefix kept: for example
/// `CRON_TZ=Europe/Berlin @daily-random` → `CRON_TZ=Europe/Berlin 17 4 * * *`. `None` for any
/// other spec (which is then parsed as it is).
pub fn resolve_random_descriptor(spec: &str, name: &str) -> Option<String> {
    let (prefix, body) = split_zone_prefix(spec);
    let seed = schedule_seed(name);
    let minute = draw(seed, Purpose::Minute, 60);
    let hour = draw(seed, Purpose::Hour, 24);
    let weekday = draw(seed, Purpose::Weekday, 7);
    let fields = match body {
        "@hourly-random" => format!("{minute} * * * *"),
        "@daily-random" => format!("{minute} {hour} * * *"),
        "@weekly-random" => format!("{minute} {hour} * * {weekday}"),
        _ => return None,
    };
    Some(format!("{prefix}{fields}"))
}

/// A `CRON_TZ=<zone> ` or `TZ=<zone> ` prefix (with its space) and the rest, as robfig splits
/// them; no prefix gives `("", spec)`.
fn split_zone_prefix(spec: &str) -> (&str, &str) {
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        if let Some(space) = spec.find(' ') {
            return (&spec[..=space], spec[space..].trim());
        }
    }
    ("", spec.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned values (computed independently from the published FNV-1a and SplitMix64
    /// definitions): if one of these changes, every deployed schedule's runs move. Change them
    /// only on purpose, with a note for users.
    #[test]
    fn offsets_and_draws_are_pinned() {
        assert_eq!(schedule_seed(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(schedule_seed("a"), 0xaf63_dc4c_8601_ec8c);
        let check = |name: &str, jitter: u64, expected: u64| {
            assert_eq!(jitter_offset_seconds(name, jitter), expected, "{name}");
        };
        check("nightly", 3_600, PINNED_NIGHTLY_HOUR);
        check("db1-hourly", 600, PINNED_DB1_TEN_MINUTES);
        check("anything", 1, 0);
        assert_eq!(
            resolve_random_descriptor("@daily-random", "nightly").as_deref(),
            Some(PINNED_NIGHTLY_DAILY)
        );
    }

    const PINNED_NIGHTLY_HOUR: u64 = 2_206;
    const PINNED_DB1_TEN_MINUTES: u64 = 343;
    const PINNED_NIGHTLY_DAILY: &str = "23 0 * * *";

    #[test]
    fn random_descriptors_keep_the_zone_prefix() {
        let resolved = resolve_random_descriptor("CRON_TZ=Europe/Berlin  @weekly-random", "w");
        let resolved = resolved.unwrap_or_default();
        assert!(resolved.starts_with("CRON_TZ=Europe/Berlin "), "{resolved}");
        assert_eq!(resolved.split_whitespace().count(), 6, "{resolved}");
        assert_eq!(resolve_random_descriptor("@daily", "w"), None);
        assert_eq!(resolve_random_descriptor("@daily-randomly", "w"), None);
    }
}
