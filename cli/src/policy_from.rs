//! `--policy-from TOOL:SETTINGS` (issue 30): a pgBackRest or barman retention setting,
//! translated into the Sexton policy that means the same, or refused with what Sexton lacks.
//! Pure: text in, a policy (and notes on what the translation approximates) out.
//!
//! - `pgbackrest:'repo1-retention-full=2 repo1-retention-full-type=count'` (options as
//!   `pgbackrest.conf` or the command line write them, with or without `--`, any `repoN-`):
//!   `repo-retention-full` of type `count` is `keep_full`; of type `time` it is a recovery
//!   window of that many days (pgBackRest keeps the fulls needed to restore to any point in
//!   the last N days). `repo-retention-archive` (of type full) is `pitr_full`.
//!   `repo-retention-diff` is `keep_diff` (with a count of fulls only).
//! - `barman:'retention_policy=REDUNDANCY 2, minimum_redundancy=1'` (`barman.conf` keys, `,`,
//!   `;` or new lines between them): `REDUNDANCY N` is `keep_full`; `RECOVERY WINDOW OF N
//!   DAYS|WEEKS|MONTHS` is `recovery_window`, with barman's 31-day months written in days;
//!   `minimum_redundancy` is the same floor.

use serde_json::{Map, Value};
use sexton_retention::Policy;

/// A translated policy, and what the translation says about itself.
#[derive(Debug)]
pub struct Translated {
    pub policy: Policy,
    /// The policy as Sexton writes it (what to put in a schedule).
    pub json: Value,
    pub notes: Vec<String>,
}

/// Translates `text` (`pgbackrest:SETTINGS` or `barman:SETTINGS`).
pub fn translate(text: &str) -> Result<Translated, String> {
    let (tool, settings) = text.split_once(':').ok_or_else(|| {
        format!("--policy-from {text:?}: expected pgbackrest:SETTINGS or barman:SETTINGS")
    })?;
    let (object, notes) = match tool {
        // A pgbackrest.conf as it is (issue 50: a migration starts from the file).
        "pgbackrest" if looks_like_a_file(settings) => {
            let text = std::fs::read_to_string(settings)
                .map_err(|err| format!("--policy-from pgbackrest:{settings}: {err}"))?;
            let (options, mut read) = conf_settings(&text, settings)?;
            let (object, notes) = pgbackrest(&options)?;
            read.extend(notes);
            (object, read)
        }
        "pgbackrest" => pgbackrest(settings)?,
        "barman" => barman(settings)?,
        other => {
            return Err(format!(
                "--policy-from: unknown tool {other:?}; pgbackrest and barman are known"
            ))
        }
    };
    let json = Value::Object(object);
    let policy = Policy::try_from(json.clone()).map_err(|err| {
        format!("--policy-from {tool}: the translated policy {json} is refused: {err}")
    })?;
    Ok(Translated {
        policy,
        json,
        notes,
    })
}

fn whole_number(key: &str, value: &str) -> Result<u32, String> {
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{key}={value:?}: expected a whole number from 1"))
}

type Parts = (Map<String, Value>, Vec<String>);

/// Whether `--policy-from pgbackrest:X` names a file (a path), not settings.
fn looks_like_a_file(settings: &str) -> bool {
    !settings.contains('=') && (settings.contains('/') || settings.ends_with(".conf"))
}

/// The retention options of a pgbackrest.conf (`[section]` headers, `#` comments, one
/// `key=value` a line), as the settings [`pgbackrest`] reads; the other options are left out
/// and counted in a note. An option set in two sections with two values is refused: which one
/// a stanza uses depends on pgBackRest's precedence, not on the file's order.
fn conf_settings(text: &str, file: &str) -> Result<(String, Vec<String>), String> {
    let mut kept: Vec<(String, String, usize)> = Vec::new();
    let mut ignored = 0usize;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('[') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("{file}:{}: {line:?} is not key=value", n + 1));
        };
        let (key, value) = (key.trim(), value.trim());
        let option = key
            .strip_prefix("repo")
            .map(|rest| {
                rest.trim_start_matches(|c: char| c.is_ascii_digit())
                    .trim_start_matches('-')
            })
            .unwrap_or(key);
        if !option.starts_with("retention-") {
            ignored += 1;
            continue;
        }
        if let Some((_, other, at)) = kept.iter().find(|(k, v, _)| k == key && v != value) {
            return Err(format!(
                "{file}:{}: {key}={value}, and {key}={other} at line {at}: one value per option, \
                 please (each stanza's own would be a policy each)",
                n + 1
            ));
        }
        kept.push((key.to_string(), value.to_string(), n + 1));
    }
    let options: Vec<String> = kept.iter().map(|(k, v, _)| format!("{k}={v}")).collect();
    let mut notes = vec![format!(
        "read {file}: {} retention option(s) translated ({}), {ignored} other option(s) left \
         out (paths, processes, compression: not retention)",
        options.len(),
        options.join(" ")
    )];
    notes.dedup();
    Ok((options.join(" "), notes))
}

fn pgbackrest(settings: &str) -> Result<Parts, String> {
    let mut full = None;
    let mut full_type = "count".to_string();
    let mut archive = None;
    let mut diff = None;
    for item in settings.split_whitespace() {
        let item = item.trim_start_matches("--");
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("pgbackrest: {item:?} is not KEY=VALUE"))?;
        // repo1-retention-full, repo2-retention-full, … : the repository index does not matter.
        let option = match key.strip_prefix("repo") {
            Some(rest) => rest
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start_matches('-'),
            None => key,
        };
        match option {
            "retention-full" => full = Some(whole_number(key, value)?),
            "retention-full-type" => match value {
                "count" | "time" => full_type = value.to_string(),
                other => return Err(format!("{key}={other:?}: expected count or time")),
            },
            "retention-diff" => diff = Some(whole_number(key, value)?),
            "retention-archive" => archive = Some(whole_number(key, value)?),
            "retention-archive-type" => match value {
                "full" => {}
                other => {
                    return Err(format!(
                        "{key}={other}: Sexton counts point-in-time retention in full backups \
                         only (pitr_full); differential and incremental counts are not \
                         translated, and nothing is"
                    ))
                }
            },
            other => {
                return Err(format!(
                    "pgbackrest: {other:?} is not a retention option Sexton translates \
                     (repo-retention-full, repo-retention-full-type, repo-retention-diff, repo-retention-archive and repo-retention-archive-type are)"
                ))
            }
        }
    }
    let Some(full) = full else {
        return Err(
            "pgbackrest: no repo-retention-full: pgBackRest then keeps every backup; write \
             that as {\"keep_last\": -1}"
                .into(),
        );
    };
    let mut object = Map::new();
    let mut notes = Vec::new();
    if full_type == "count" {
        object.insert("keep_full".into(), Value::from(full));
    } else {
        object.insert("recovery_window".into(), Value::from(format!("{full}d")));
        notes.push(format!(
            "repo-retention-full-type=time {full} is read as recovery_window {full}d: every \
             backup needed to restore to any point in the last {full} days is kept; pgBackRest \
             compares whole seconds with a strict < where Sexton compares instants"
        ));
    }
    if let Some(diff) = diff {
        if full_type != "count" {
            return Err(format!(
                "pgbackrest: repo-retention-diff={diff} with repo-retention-full-type=time: \
                 Sexton's keep_diff narrows a count of full backups (keep_full); nothing is \
                 translated"
            ));
        }
        object.insert("keep_diff".into(), Value::from(diff));
    }
    if let Some(archive) = archive {
        object.insert("pitr_full".into(), Value::from(archive));
        notes.push(format!(
            "repo-retention-archive={archive} is pitr_full {archive}: point-in-time recovery \
             from the newest {archive} kept full backup(s); each older kept backup keeps the \
             segments that make it consistent"
        ));
    }
    Ok((object, notes))
}

fn barman(settings: &str) -> Result<Parts, String> {
    let mut object = Map::new();
    let mut notes = Vec::new();
    for item in settings
        .split([',', ';', '\n'])
        .map(str::trim)
        .filter(|i| !i.is_empty())
    {
        // A bare policy (`barman:'REDUNDANCY 2'`) is what `retention_policy` says: nothing
        // else in barman.conf reads as one.
        let bare_policy = {
            let upper = item.to_ascii_uppercase();
            !item.contains('=')
                && (upper.starts_with("REDUNDANCY ") || upper.starts_with("RECOVERY WINDOW "))
        };
        let (key, value) = if bare_policy {
            ("retention_policy", item)
        } else {
            item.split_once('=')
                .ok_or_else(|| format!("barman: {item:?} is not key = value"))?
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "retention_policy" => {
                let words: Vec<String> = value
                    .split_whitespace()
                    .map(str::to_ascii_uppercase)
                    .collect();
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                match words.as_slice() {
                    ["REDUNDANCY", n] => {
                        object.insert("keep_full".into(), Value::from(whole_number(key, n)?));
                    }
                    ["RECOVERY", "WINDOW", "OF", n, unit] => {
                        let n = whole_number(key, n)?;
                        let days_per = match unit.trim_end_matches('S') {
                            "DAY" => 1,
                            "WEEK" => 7,
                            "MONTH" => {
                                notes.push(format!(
                                    "barman's months are 31 days: {n} MONTHS is \
                                     recovery_window {}d (Sexton's own month is 30 days)",
                                    n * 31
                                ));
                                31
                            }
                            _ => {
                                return Err(format!(
                                    "{key}={value:?}: expected DAYS, WEEKS or MONTHS"
                                ))
                            }
                        };
                        object.insert(
                            "recovery_window".into(),
                            Value::from(format!("{}d", n * days_per)),
                        );
                    }
                    _ => {
                        return Err(format!(
                            "{key}={value:?}: expected REDUNDANCY N or RECOVERY WINDOW OF N \
                             DAYS|WEEKS|MONTHS"
                        ))
                    }
                }
            }
            "minimum_redundancy" => {
                object.insert(
                    "minimum_redundancy".into(),
                    Value::from(whole_number(key, value)?),
                );
            }
            "wal_retention_policy" | "retention_policy_mode" => {
                notes.push(format!(
                    "{key} is barman's default and has nothing to translate"
                ));
            }
            other => {
                return Err(format!(
                    "barman: {other:?} is not a retention key Sexton translates \
                     (retention_policy and minimum_redundancy are)"
                ))
            }
        }
    }
    if !object.contains_key("keep_full") && !object.contains_key("recovery_window") {
        return Err(
            "barman: no retention_policy: barman then keeps every backup; write that as \
             {\"keep_last\": -1}"
                .into(),
        );
    }
    Ok((object, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pgbackrest_conf_is_read_for_its_retention_options_only() {
        let conf = "[global]\nrepo1-path=/var/lib/pgbackrest\nrepo1-retention-full=2\n\
                    # a comment\nprocess-max=4\n\n[demo]\npg1-path=/var/lib/postgresql/15/main\n\
                    repo1-retention-diff=3\n";
        let (options, notes) = conf_settings(conf, "pgbackrest.conf").unwrap();
        assert_eq!(options, "repo1-retention-full=2 repo1-retention-diff=3");
        assert!(notes[0].contains("3 other option(s) left out"), "{notes:?}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pgbackrest.conf");
        std::fs::write(&path, conf).unwrap();
        let translated = translate(&format!("pgbackrest:{}", path.display())).unwrap();
        assert_eq!(
            translated.json,
            serde_json::json!({"keep_full": 2, "keep_diff": 3})
        );
        // Two values of one option, and a line that is not key=value, are refused by line.
        let twice = "[global]\nrepo1-retention-full=2\n[demo]\nrepo1-retention-full=4\n";
        let err = conf_settings(twice, "p.conf").unwrap_err();
        assert!(
            err.starts_with("p.conf:4: repo1-retention-full=4, and"),
            "{err}"
        );
        let err = conf_settings("[global]\nnonsense\n", "p.conf").unwrap_err();
        assert!(err.starts_with("p.conf:2:"), "{err}");
        // A file that is not there says so.
        let err = translate("pgbackrest:/nonexistent/pgbackrest.conf").unwrap_err();
        assert!(err.contains("/nonexistent/pgbackrest.conf"), "{err}");
    }

    fn json(text: &str) -> String {
        translate(text)
            .map(|t| t.json.to_string())
            .unwrap_or_else(|e| e)
    }

    #[test]
    fn pgbackrest_options_translate_or_are_refused_with_the_reason() {
        assert_eq!(
            json("pgbackrest:repo1-retention-full=2"),
            r#"{"keep_full":2}"#
        );
        assert_eq!(
            json("pgbackrest:--repo2-retention-full=3 --repo2-retention-full-type=count"),
            r#"{"keep_full":3}"#
        );
        let archive = translate(
            "pgbackrest:repo1-retention-full=4 repo1-retention-archive=2 \
             repo1-retention-archive-type=full",
        )
        .unwrap();
        assert_eq!(archive.json.to_string(), r#"{"keep_full":4,"pitr_full":2}"#);
        assert_eq!(
            json("pgbackrest:repo1-retention-full=2 repo1-retention-diff=3"),
            r#"{"keep_diff":3,"keep_full":2}"#
        );
        assert!(
            archive.notes[0].contains("pitr_full 2"),
            "{:?}",
            archive.notes
        );
        let time =
            translate("pgbackrest:repo1-retention-full=14 repo1-retention-full-type=time").unwrap();
        assert_eq!(time.json.to_string(), r#"{"recovery_window":"14d"}"#);
        assert!(time.notes[0].contains("recovery_window 14d"));
        for (bad, said) in [
            (
                "pgbackrest:repo1-retention-diff=2",
                "no repo-retention-full",
            ),
            (
                "pgbackrest:repo1-retention-full=14 repo1-retention-full-type=time \
                 repo1-retention-diff=2",
                "narrows a count of full backups",
            ),
            (
                "pgbackrest:repo1-retention-full=2 repo1-retention-archive=1 \
                 repo1-retention-archive-type=diff",
                "in full backups only",
            ),
            (
                "pgbackrest:repo1-retention-full=2 repo1-retention-archive=0",
                "a whole number from 1",
            ),
            ("pgbackrest:repo1-retention-full=0", "a whole number from 1"),
            (
                "pgbackrest:repo1-retention-full=two",
                "a whole number from 1",
            ),
            (
                "pgbackrest:repo1-retention-full-type=time",
                "no repo-retention-full",
            ),
            (
                "pgbackrest:repo1-retention-full-type=size",
                "expected count or time",
            ),
            ("pgbackrest:repo1-path=/var/lib", "not a retention option"),
            ("pgbackrest:retention", "not KEY=VALUE"),
            ("restic:--keep-last 3", "unknown tool"),
            ("keep_full=2", "expected pgbackrest:SETTINGS"),
        ] {
            let got = json(bad);
            assert!(got.contains(said), "{bad}: {got}");
        }
    }

    #[test]
    fn barman_settings_translate_with_its_31_day_months() {
        assert_eq!(
            json("barman:retention_policy = REDUNDANCY 2, minimum_redundancy = 1"),
            r#"{"keep_full":2,"minimum_redundancy":1}"#
        );
        assert_eq!(
            json("barman:retention_policy=RECOVERY WINDOW OF 4 WEEKS"),
            r#"{"recovery_window":"28d"}"#
        );
        // The policy alone, as barman prints it, is retention_policy.
        assert_eq!(json("barman:REDUNDANCY 2"), r#"{"keep_full":2}"#);
        assert_eq!(
            json("barman:recovery window of 2 weeks, minimum_redundancy=1"),
            r#"{"minimum_redundancy":1,"recovery_window":"14d"}"#
        );
        let months = translate("barman:retention_policy=recovery window of 12 months").unwrap();
        assert_eq!(months.json.to_string(), r#"{"recovery_window":"372d"}"#);
        assert!(months.notes[0].contains("31 days"), "{:?}", months.notes);
        assert_eq!(
            json("barman:retention_policy=RECOVERY WINDOW OF 1 DAY;wal_retention_policy=main"),
            r#"{"recovery_window":"1d"}"#
        );
        // A floor above the count of chains is not contradictory: chains hold several backups.
        assert_eq!(
            json("barman:retention_policy=REDUNDANCY 2, minimum_redundancy=3"),
            r#"{"keep_full":2,"minimum_redundancy":3}"#
        );
        for (bad, said) in [
            ("barman:minimum_redundancy=2", "no retention_policy"),
            (
                "barman:retention_policy=REDUNDANCY 0",
                "a whole number from 1",
            ),
            (
                "barman:retention_policy=RECOVERY WINDOW OF 4 YEARS",
                "DAYS, WEEKS or MONTHS",
            ),
            ("barman:retention_policy=KEEP ALL", "expected REDUNDANCY N"),
            ("barman:backup_method=rsync", "not a retention key"),
            ("barman:minimum_redundancy 2", "not key = value"),
        ] {
            let got = json(bad);
            assert!(got.contains(said), "{bad}: {got}");
        }
    }
}
