//! The checks at the door of a schedule's settings: Kubernetes label keys and values,
//! annotations, volume names, the starting deadline and the failures before a pause; and of a
//! backup's holds. Below `wire` and `api`, which both use them (re-exported at `api::*`).

use sexton_schedule::Span;

pub(crate) fn validate_labels<'a>(
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<(), String> {
    for (n, (key, value)) in labels.into_iter().enumerate() {
        if n >= 64 {
            return Err("more than 64 labels".into());
        }
        check_label_key("label", key)?;
        check_label_value(key, value)?;
    }
    Ok(())
}

/// The most bytes a schedule's annotations hold together (keys and values).
pub const MAX_ANNOTATION_BYTES: usize = 64 * 1024;

/// Annotations: Kubernetes' rules, label-style keys and values of any text (no control
/// characters: they end up in logs).
pub(crate) fn validate_annotations<'a>(
    annotations: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<(), String> {
    let mut bytes = 0;
    for (key, value) in annotations {
        check_label_key("annotation", key)?;
        if value.chars().any(char::is_control) {
            return Err(format!("annotation {key:?} holds a control character"));
        }
        bytes += key.len() + value.len();
        if bytes > MAX_ANNOTATION_BYTES {
            return Err(format!(
                "annotations hold more than {MAX_ANNOTATION_BYTES} bytes together"
            ));
        }
    }
    Ok(())
}

/// A Kubernetes label key: an optional DNS subdomain prefix (at most 253 characters,
/// lowercase letters, digits, `-` and `.`) and `/`, then a name of at most 63 letters,
/// digits, `-`, `_` and `.`, starting and ending with a letter or digit.
pub fn check_label_key(what: &str, key: &str) -> Result<(), String> {
    let shown: String = key.chars().take(80).collect();
    let refuse = |why: &str| {
        Err(format!(
            "{what} key {shown:?} is not a Kubernetes label key: {why} (expected [prefix/]name, \
             such as app or example.com/tier)"
        ))
    };
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() || prefix.len() > 253 {
            return refuse("the prefix before '/' must hold 1 to 253 characters");
        }
        let label_ok = |part: &str| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && part.as_bytes()[0].is_ascii_alphanumeric()
                && part.as_bytes()[part.len() - 1].is_ascii_alphanumeric()
        };
        if !prefix.split('.').all(label_ok) {
            return refuse(
                "the prefix before '/' must be a DNS subdomain (lowercase letters, digits, '-', \
                 dot-separated)",
            );
        }
    }
    if name.is_empty() || name.len() > 63 {
        return refuse("the name must hold 1 to 63 characters");
    }
    if !is_label_word(name) {
        return refuse(
            "the name may hold only letters, digits, '-', '_' and '.', and must start and end \
             with a letter or digit",
        );
    }
    Ok(())
}

/// A Kubernetes label value: empty, or at most 63 letters, digits, `-`, `_` and `.`, starting
/// and ending with a letter or digit.
pub fn check_label_value(key: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > 63 || !is_label_word(value) {
        let shown: String = value.chars().take(80).collect();
        return Err(format!(
            "label {key:?}: value {shown:?} is not a Kubernetes label value (at most 63 \
             letters, digits, '-', '_' and '.', starting and ending with a letter or digit); \
             free-form text belongs in an annotation"
        ));
    }
    Ok(())
}

fn is_label_word(word: &str) -> bool {
    let bytes = word.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The most volumes a schedule lists; a due-backup event carries one entry per volume.
pub const MAX_VOLUMES: usize = 256;

/// Volume names end up in object keys (`vol-<name>.img`): the same rules as other names,
/// no repeats, at most [`MAX_VOLUMES`].
pub fn validate_volumes<'a>(volumes: impl IntoIterator<Item = &'a String>) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for (n, volume) in volumes.into_iter().enumerate() {
        if n >= MAX_VOLUMES {
            return Err(format!("more than {MAX_VOLUMES} volumes"));
        }
        crate::names::check_name("volume name", volume).map_err(|e| e.to_string())?;
        if !seen.insert(volume.as_str()) {
            return Err(format!("volume {volume:?} is listed twice"));
        }
    }
    Ok(())
}

pub(crate) fn validate_deadline(seconds: Option<u64>) -> Result<(), String> {
    if seconds.is_some_and(|s| s == 0 || s > 366 * 86_400) {
        return Err(
            "starting_deadline_seconds must be between 1 and 31622400 (starting_deadline: 1s to 366d)"
                .into(),
        );
    }
    Ok(())
}

/// Both spellings of the starting deadline may be given only if they agree.
pub(crate) fn validate_deadline_spellings(
    span: Option<Span>,
    seconds: Option<u64>,
) -> Result<(), String> {
    match (span, seconds) {
        (Some(span), Some(seconds)) if span.seconds() != seconds => Err(format!(
            "starting_deadline {span} and starting_deadline_seconds {seconds} disagree; give one"
        )),
        _ => Ok(()),
    }
}

/// The most consecutive failures a schedule may wait for before it pauses.
pub const MAX_PAUSE_AFTER_FAILURES: u32 = 1_000;

pub(crate) fn validate_pause_after_failures(n: Option<u32>) -> Result<(), String> {
    if n.is_some_and(|n| n == 0 || n > MAX_PAUSE_AFTER_FAILURES) {
        return Err(format!(
            "pause_after_failures must be between 1 and {MAX_PAUSE_AFTER_FAILURES}"
        ));
    }
    Ok(())
}

/// The most holds one backup carries.
pub const MAX_HOLDS: usize = 32;

/// A hold reason is `<what>:<id>`, such as `restore:r-42` or `clone:db2`: a lowercase word,
/// a colon, and an id of letters, digits, `.`, `-` and `_`; at most 160 characters.
pub fn check_hold_reason(reason: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "invalid hold reason {:?}: {why} (expected <what>:<id>, such as restore:r-42)",
            reason.chars().take(160).collect::<String>()
        ))
    };
    if reason.len() > 160 {
        return bad("longer than 160 characters");
    }
    let Some((what, id)) = reason.split_once(':') else {
        return bad("no ':'");
    };
    if what.is_empty()
        || !what.as_bytes()[0].is_ascii_lowercase()
        || !what
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return bad("what comes before ':' must be a lowercase word");
    }
    if id.is_empty()
        || !id.as_bytes()[0].is_ascii_alphanumeric()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return bad("the id after ':' may hold only letters, digits, '.', '-' and '_'");
    }
    Ok(())
}

/// A backup's log range as an executor claims it: two segment file names (1 to 255 bytes, no
/// `/`, no control characters), the first not after the last where they compare (same length
/// and stem: [`sexton_retention::range_covers`]).
pub fn check_log_range(range: &sexton_retention::LogRange) -> Result<(), String> {
    for (which, name) in [("first", &range.first), ("last", &range.last)] {
        if name.is_empty() || name.len() > 255 {
            return Err(format!(
                "log_range {which}: a segment name holds 1 to 255 bytes"
            ));
        }
        if name.contains('/') || name.chars().any(char::is_control) {
            return Err(format!(
                "log_range {which} {name:?}: a segment's file name, without '/' or control characters"
            ));
        }
    }
    let stem = |name: &str| name.rsplit_once('.').map(|(stem, _)| stem.to_owned());
    if range.first.len() == range.last.len()
        && stem(&range.first) == stem(&range.last)
        && range.first > range.last
    {
        return Err(format!(
            "log_range: first {:?} is after last {:?}",
            range.first, range.last
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// `Ok(())` accepted; `Err(text)`: refused with a message holding `text`.
    fn check(key: &str, value: &str, expected: Result<(), &str>) {
        let got = check_label_key("label", key).and_then(|()| check_label_value(key, value));
        match (&got, expected) {
            (Ok(()), Ok(())) => {}
            (Err(message), Err(fragment)) => {
                assert!(message.contains(fragment), "{key}={value}: {message}")
            }
            _ => panic!("{key}={value}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn labels_are_kubernetes_labels() {
        check("app", "db", Ok(()));
        check("example.com/tier", "gold", Ok(()));
        check("sexton.io/executor-fail-volumes", "pv1", Ok(()));
        check("a_b.c-d", "A_b.c-9", Ok(()));
        check("team", "", Ok(()));
        check(&"k".repeat(63), &"v".repeat(63), Ok(()));
        check("../x", "1", Err("must be a DNS subdomain"));
        check(
            "/x",
            "1",
            Err("the prefix before '/' must hold 1 to 253 characters"),
        );
        check("x/", "1", Err("the name must hold 1 to 63 characters"));
        check("a/b/c", "1", Err("the name may hold only"));
        check("Example.com/x", "1", Err("DNS subdomain"));
        check(
            "-app",
            "1",
            Err("must start and end with a letter or digit"),
        );
        check("app.", "1", Err("must start and end"));
        check(&"k".repeat(64), "v", Err("1 to 63 characters"));
        check("team", &"v".repeat(64), Err("not a Kubernetes label value"));
        check("team", "db,ops", Err("not a Kubernetes label value"));
        check("team", "*", Err("free-form text belongs in an annotation"));
        check("team", "db\0", Err("not a Kubernetes label value"));
    }

    #[test]
    fn annotations_take_any_text_under_label_keys() {
        let ok: BTreeMap<String, String> = [(
            "sexton.io/executor-holds".to_string(),
            "upgrade:pg16, *".to_string(),
        )]
        .into();
        assert_eq!(validate_annotations(&ok), Ok(()));
        let climbing: BTreeMap<String, String> = [("../x".to_string(), "v".to_string())].into();
        assert!(validate_annotations(&climbing).is_err());
        let control: BTreeMap<String, String> = [("a".to_string(), "\u{1b}[2J".to_string())].into();
        assert!(validate_annotations(&control).is_err());
        let big: BTreeMap<String, String> = [("a".to_string(), "x".repeat(70_000))].into();
        assert!(validate_annotations(&big).is_err());
    }
}
