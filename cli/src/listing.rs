//! What the list verbs share beyond printing: label selectors (`-l team=db,tier!=test`),
//! `--watch` and what changed between two of its listings, and the "did you mean" of a name
//! that names nothing.

use clap::Args;
use serde_json::Value;

/// `-l` / `--selector`: kubectl's equality-based label selectors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// `(key, value, wanted)`: `key=value` wants equality, `key!=value` inequality.
    terms: Vec<(String, String, bool)>,
}

impl Selector {
    /// `key=value`, `key==value`, `key!=value`, comma-separated; every term must hold.
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut terms = Vec::new();
        for term in text.split(',') {
            let term = term.trim();
            let (key, value, wanted) = if let Some((key, value)) = term.split_once("!=") {
                (key, value, false)
            } else if let Some((key, value)) = term.split_once("==") {
                (key, value, true)
            } else if let Some((key, value)) = term.split_once('=') {
                (key, value, true)
            } else {
                return Err(format!(
                    "selector term {term:?} is not key=value or key!=value (e.g. -l team=db,tier!=test)"
                ));
            };
            sexton_shared::api::check_label_key("selector", key)?;
            sexton_shared::api::check_label_value(key, value)?;
            terms.push((key.to_string(), value.to_string(), wanted));
        }
        Ok(Selector { terms })
    }

    /// Whether `labels` (a JSON object of strings, or nothing) satisfy every term.
    pub fn matches(&self, labels: Option<&Value>) -> bool {
        self.terms.iter().all(|(key, value, wanted)| {
            let actual = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
            (actual == Some(value.as_str())) == *wanted
        })
    }
}

/// The flags every list verb takes.
#[derive(Args, Debug, Default, Clone)]
pub struct ListArgs {
    /// Only what carries these labels: key=value or key!=value, comma-separated (all must
    /// hold).
    #[arg(short = 'l', long = "selector", value_parser = Selector::parse)]
    pub selector: Option<Selector>,
    /// List again every SECONDS (default 2) until Ctrl-C or until the reader goes away.
    #[arg(
        short = 'w',
        long,
        value_name = "SECONDS",
        num_args = 0..=1,
        default_missing_value = "2",
        require_equals = true,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub watch: Option<u64>,
}

/// What became of a row between two listings of `--watch` (kubectl's watch events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Its key was not in the listing before.
    New,
    /// Its key was, with a row that differed.
    Changed,
    /// Its key is no longer listed: the row is the one listed before.
    Deleted,
}

/// What a listing `after` says that `before` did not: its rows whose key is new or whose row
/// `same` finds different, in `after`'s order, then the rows of `before` whose key `after`
/// lacks, in `before`'s order. A row is `(key, row)`, a key naming one row of a listing.
pub fn changes<'a, T>(
    before: &'a [(String, T)],
    after: &'a [(String, T)],
    same: impl Fn(&T, &T) -> bool,
) -> Vec<(Change, &'a T)> {
    let was: std::collections::HashMap<&str, &T> = before
        .iter()
        .map(|(key, row)| (key.as_str(), row))
        .collect();
    let now: std::collections::HashSet<&str> = after.iter().map(|(key, _)| key.as_str()).collect();
    let mut changed: Vec<(Change, &T)> = after
        .iter()
        .filter_map(|(key, row)| match was.get(key.as_str()) {
            None => Some((Change::New, row)),
            Some(old) if !same(old, row) => Some((Change::Changed, row)),
            Some(_) => None,
        })
        .collect();
    changed.extend(
        before
            .iter()
            .filter(|(key, _)| !now.contains(key.as_str()))
            .map(|(_, row)| (Change::Deleted, row)),
    );
    changed
}

/// Edit distance between two names, a swap of two neighbours counting as one edit (optimal
/// string alignment), for suggestions.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The known name closest to `wanted`, if it is close enough to be a typo (at most a third of
/// its letters wrong, and at least two), or one that starts with it.
pub fn closest<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (wanted.chars().count() / 3).max(2);
    known
        .into_iter()
        .filter(|name| *name != wanted)
        .map(|name| {
            let d = if name.starts_with(wanted) {
                0
            } else {
                distance(wanted, name)
            };
            (d, name)
        })
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, name)| name)
}

/// ` (did you mean X?)`, or nothing.
pub fn did_you_mean<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(wanted, known)
        .map(|name| format!("; did you mean {name}?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn selectors_hold_when_every_term_does() {
        let selector = Selector::parse("team=db,tier!=test").unwrap();
        assert!(selector.matches(Some(&json!({"team": "db"}))));
        assert!(!selector.matches(Some(&json!({"team": "db", "tier": "test"}))));
        assert!(!selector.matches(None));
        assert!(Selector::parse("team").is_err());
        assert!(Selector::parse("te am=db").is_err());
    }

    /// Under --watch only new, changed and deleted rows print again, deleted ones last.
    #[test]
    fn a_watch_reprints_only_what_changed() {
        let row = |key: &str, value: u32| (key.to_string(), value);
        let before = [row("a", 1), row("b", 2), row("c", 3)];
        let after = [row("d", 4), row("c", 30), row("a", 1)];
        let same = |x: &u32, y: &u32| x == y;
        assert_eq!(
            changes(&before, &after, same),
            [
                (Change::New, &4),
                (Change::Changed, &30),
                (Change::Deleted, &2)
            ]
        );
        assert!(changes(&after, &after, same).is_empty());
        assert_eq!(
            changes(&[], &before[..1], same),
            [(Change::New, &1)],
            "the first listing is all new"
        );
        assert_eq!(changes(&before[..1], &[], same), [(Change::Deleted, &1)]);
        // What counts as the same is the caller's: here, equal up to tens.
        let by_tens = |x: &u32, y: &u32| x / 10 == y / 10;
        assert!(changes(&[row("a", 11)], &[row("a", 12)], by_tens).is_empty());
    }

    #[test]
    fn suggestions_are_close_names() {
        let known = ["nightly", "hourly", "weekly"];
        assert_eq!(closest("nighty", known), Some("nightly"));
        assert_eq!(closest("db9", ["db1", "web"]), Some("db1"));
        assert_eq!(closest("zzzzzz", known), None);
        assert_eq!(closest("wbe", ["db1", "web"]), Some("web"));
        assert_eq!(did_you_mean("hourl", known), "; did you mean hourly?");
    }
}
