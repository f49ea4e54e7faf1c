//! Golden tests of what `sexton` prints (issue 16): every output format of every list and
//! describe verb against a real fleet (nats-server, SeaweedFS, the three services) holding
//! genuinely uploaded backups, through one data-driven `check(name, args)`. Also the closed
//! pipe, logs on stderr under `RUST_LOG=debug`, `--watch`, completion scripts, and the errors
//! of a name that names nothing.
//!
//! The goldens are in `tests/golden/cli_output/`; `SEXTON_BLESS=1` rewrites them from what the
//! binary prints now (then read the diff). Instants the test chose print as tokens (`<B-2h>`),
//! other instants as `<time>`, random ids as `<uid>`; ages are measured from `SEXTON_CLI_NOW`.

use std::{
    collections::BTreeMap,
    io::Write as _,
    path::PathBuf,
    process::{Command, Stdio},
    time::Duration,
};

use chrono::{DateTime, DurationRound as _, Utc};
use serde_json::{json, Value};
use sexton_model::records::BackupStatus;
use sexton_tests::{
    setup::{Setup, World},
    *,
};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn sexton_with(url: &str, now: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let output = Command::new(service_binary("sexton"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SEXTON_NATS_URL", url)
        .env("SEXTON_CLI_NOW", now)
        .envs(env.iter().copied())
        .output()
        .expect("running sexton");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).to_string(),
    }
}

/// The instants and names a test knows, with the tokens they print as.
struct Tokens(Vec<(String, String)>);

impl Tokens {
    fn instant(&mut self, t: DateTime<Utc>, token: &str) {
        for text in [
            t.to_rfc3339(),
            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        ] {
            self.0.push((text, format!("<{token}>")));
        }
    }

    /// `text` with known instants as tokens, other RFC 3339 instants as `<time>`, and the
    /// values of random fields (`uid`, `instance`, `sha256`, ...) as `<field>`.
    fn normalise(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (from, to) in &self.0 {
            text = text.replace(from.as_str(), to);
        }
        // Instants that are the same on every run (`schedule next --from`) stay as they are.
        let fixed: Vec<String> = (1..=3)
            .flat_map(|day| {
                [
                    format!("2026-01-0{day}T03:00:00+01:00"),
                    format!("2026-01-0{day}T02:00:00Z"),
                ]
            })
            .collect();
        for (n, instant) in fixed.iter().enumerate() {
            text = text.replace(instant.as_str(), &format!("\u{1}{n}\u{1}"));
        }
        let mut text = mask_instants(&text);
        for (n, instant) in fixed.iter().enumerate() {
            text = text.replace(&format!("\u{1}{n}\u{1}"), instant);
        }
        text.lines()
            .map(mask_digests)
            .map(|line| {
                // Ages the fleet measured against its own clock (the recovery value, issue 47)
                // differ by the seconds a run takes.
                for field in [
                    "uid",
                    "instance",
                    "sha256",
                    "etag",
                    "request_id",
                    "point_age_seconds",
                    "short_seconds",
                    // How many retention runs ended alike: the sweeps and checkpoints of a run.
                    "runs",
                    // The store a record names (issue 54): the test's S3 port.
                    "endpoint",
                ] {
                    for (prefix, quote) in [
                        (format!("\"{field}\": "), true),
                        (format!("{field}: "), false),
                    ] {
                        let trimmed = line.trim_start().trim_start_matches("- ");
                        if trimmed.starts_with(&prefix) {
                            let start = line.len() - trimmed.len() + prefix.len();
                            let comma = if line.ends_with(',') { "," } else { "" };
                            let value = if quote {
                                format!("\"<{field}>\"")
                            } else {
                                format!("<{field}>")
                            };
                            return format!("{}{value}{comma}", &line[..start]);
                        }
                    }
                }
                line.to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Every SHA-256 in hex (a word of exactly 64 hex digits) in `line` as `<sha256>`: a table
/// column of digests (`backup describe`'s objects), where `metadata.json`'s differs per run.
/// What bash completes for `line` (its last word the one being completed), with the script
/// `sexton completion bash` prints sourced in a real bash and the fleet at `url`.
fn complete_in_bash(url: &str, now: &str, line: &[&str]) -> String {
    let binary = service_binary("sexton");
    let script =
        std::env::temp_dir().join(format!("sexton-completion-{}.bash", std::process::id()));
    std::fs::write(
        &script,
        sexton_with(url, now, &["completion", "bash"], &[]).stdout,
    )
    .unwrap();
    let words: Vec<String> = line.iter().map(|w| format!("{w:?}")).collect();
    let program = format!(
        "source {}; COMP_WORDS=({}); COMP_CWORD={}; \
         _sexton_names sexton \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
         echo \"${{COMPREPLY[*]}}\"",
        script.display(),
        words.join(" "),
        line.len() - 1
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(program)
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}",
                binary.parent().unwrap().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("SEXTON_NATS_URL", url)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn mask_digests(line: &str) -> String {
    line.split(' ')
        .map(|word| {
            if word.len() == 64 && word.bytes().all(|b| b.is_ascii_hexdigit()) {
                "<sha256>"
            } else {
                word
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` left in `text` as `<time>`.
fn mask_instants(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let digit = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_digit);
    let at = |j: usize, c: u8| bytes.get(j) == Some(&c);
    while i < bytes.len() {
        let shaped = (0..4).all(|k| digit(i + k))
            && at(i + 4, b'-')
            && digit(i + 5)
            && digit(i + 6)
            && at(i + 7, b'-')
            && digit(i + 8)
            && digit(i + 9)
            && at(i + 10, b'T')
            && digit(i + 11)
            && digit(i + 12)
            && at(i + 13, b':')
            && digit(i + 14)
            && digit(i + 15)
            && at(i + 16, b':')
            && digit(i + 17)
            && digit(i + 18);
        if !shaped {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let mut j = i + 19;
        if at(j, b'.') {
            j += 1;
            while digit(j) {
                j += 1;
            }
        }
        if at(j, b'Z') {
            j += 1;
        } else if (at(j, b'+') || at(j, b'-')) && digit(j + 1) && at(j + 3, b':') {
            j += 6;
        }
        out.push_str("<time>");
        i = j;
    }
    out
}

fn golden_dir() -> PathBuf {
    repo_root().join("tests/golden/cli_output")
}

/// Runs `sexton args` and compares what it prints (exit code, stdout, stderr) with the golden
/// `name`, or writes the golden under `SEXTON_BLESS=1`. Returns the differences.
fn check(url: &str, now: &str, tokens: &Tokens, name: &str, args: &[&str]) -> Option<String> {
    let run = sexton_with(url, now, args, &[]);
    let got = format!(
        "$ sexton {}\nexit {}\n--- stdout\n{}\n--- stderr\n{}\n",
        args.join(" "),
        run.code,
        tokens.normalise(&run.stdout),
        tokens.normalise(&run.stderr),
    );
    let path = golden_dir().join(format!("{name}.txt"));
    if std::env::var_os("SEXTON_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, &got).unwrap();
        return None;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    (expected != got).then(|| {
        format!(
            "{name} differs from {} (SEXTON_BLESS=1 rewrites it):\n--- expected\n{expected}\n--- got\n{got}",
            path.display()
        )
    })
}

fn report(id: &str, parent: Option<&str>, completed_at: DateTime<Utc>) -> Value {
    json!({
        "schema_version": 1, "backup_id": id, "cluster": "db1", "plan": "full",
        "schedule": "nightly", "backup_name": "nightly", "status": "completed",
        "kind": if parent.is_some() { "incremental" } else { "full" }, "parent": parent,
        "started_at": (completed_at - chrono::Duration::minutes(5)).to_rfc3339(),
        "completed_at": completed_at.to_rfc3339(),
        "artifacts": [format!("backups/db1/nightly/{id}/backup.xbstream")],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_list_and_describe_verb_prints_every_format() {
    let world = Setup::new(Members::ALL).start().await;
    let World {
        nats,
        config,
        fleet,
        client,
        js,
        catalog,
        ..
    } = world;
    let store = object_store(&config).await;
    let url = nats.url();

    let base = Utc::now()
        .duration_trunc(chrono::Duration::seconds(1))
        .unwrap();
    // Ages are measured from here: every AGE prints the same whatever the time of the run.
    let cli_now = (base + chrono::Duration::minutes(210)).to_rfc3339();
    let mut tokens = Tokens(Vec::new());
    let created = create_schedule(
        &client,
        json!({"name": "nightly", "cluster": "db1", "plan": "full", "cron": "0 3 * * *",
               "paused": true, "labels": {"team": "db"},
               "policy": {"keep_last": 7, "recovery_window": "30d"}}),
    )
    .await;
    let created_at: DateTime<Utc> = created["schedule"]["created_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    tokens.instant(created_at, "created");
    create_schedule(
        &client,
        json!({"name": "weekly", "cluster": "web", "plan": "logical", "cron": "0 4 * * 0",
               "paused": true, "labels": {"team": "web"}, "policy": {"keep_last": 4}}),
    )
    .await;

    // Nothing below happens in the second the schedule was created in, so no other instant
    // prints as <created>.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // Three genuinely uploaded backups: a full, an incremental on it (held, labelled), a full.
    for (id, parent, hours, labels, holds) in [
        ("nightly-1", None, 50, json!({}), json!([])),
        (
            "nightly-2",
            Some("nightly-1"),
            26,
            json!({"team": "db"}),
            json!(["restore:r-1"]),
        ),
        ("nightly-3", None, 2, json!({"team": "db"}), json!([])),
    ] {
        let completed = base - chrono::Duration::hours(hours);
        tokens.instant(completed, &format!("B-{hours}h"));
        tokens.instant(
            completed - chrono::Duration::minutes(5),
            &format!("B-{hours}h-5m"),
        );
        let mut body = report(id, parent, completed);
        body["labels"] = labels;
        body["holds"] = holds;
        fixtures::upload_genuine_json(&store, &mut body).await;
        let size: u64 = body["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["size"].as_u64().unwrap())
            .sum();
        body["size_bytes"] = json!(size);
        js.publish(
            "sexton.v1.report.db1",
            serde_json::to_vec(&body).unwrap().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
        let record = wait_reported(&catalog, "db1", id).await;
        assert_eq!(record.status, BackupStatus::Completed, "{record:?}");
    }
    // An object no record owns, for `backup orphans --grace 1s`.
    store
        .put(
            "backups/db1/stray/left-behind.bin",
            b"0123456789".to_vec().into(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Both clusters' retention has run (the checkpoints, the first sweep) before anything is
    // printed: `schedule get` and `describe` show how it went (issue 54).
    for cluster in ["db1", "web"] {
        eventually(
            &format!("a retention status of {cluster}"),
            Duration::from_secs(30),
            || fixtures::retention_status(&js, cluster),
        )
        .await;
    }

    let mut cases: Vec<(String, Vec<&str>)> = Vec::new();
    let formats = ["table", "wide", "json", "yaml", "name"];
    let verbs: &[(&str, &[&str])] = &[
        ("schedule-list", &["schedule", "list"]),
        ("schedule-get", &["schedule", "get", "nightly"]),
        ("schedule-describe", &["schedule", "describe", "nightly"]),
        ("backup-list", &["backup", "list"]),
        (
            "backup-describe",
            &["backup", "describe", "nightly-2", "--cluster", "db1"],
        ),
        (
            "backup-orphans",
            &["backup", "orphans", "--cluster", "db1", "--grace", "1s"],
        ),
        (
            "retention-preview",
            &["retention", "preview", "--cluster", "db1"],
        ),
        ("plugin-list", &["plugin", "list"]),
        ("binlog-status", &["binlog", "status", "--cluster", "db1"]),
        (
            "schedule-next",
            &[
                "schedule",
                "next",
                "--cron",
                "CRON_TZ=Europe/Berlin 0 3 * * *",
                "--from",
                "2026-01-01T00:00:00Z",
                "-n",
                "3",
            ],
        ),
    ];
    for (name, args) in verbs {
        for format in formats {
            let mut args = args.to_vec();
            args.extend(["-o", format]);
            cases.push((format!("{name}.{format}"), args));
        }
    }
    // Filters, selectors, headers, and what names nothing.
    for (name, args) in [
        (
            "schedule-list.no-headers",
            vec!["schedule", "list", "--no-headers"],
        ),
        (
            "schedule-list.selector",
            vec!["schedule", "list", "-l", "team=web"],
        ),
        (
            "schedule-list.cluster",
            vec!["schedule", "list", "--cluster", "db1"],
        ),
        (
            "backup-list.cluster",
            vec!["backup", "list", "--cluster", "db1"],
        ),
        (
            "backup-list.schedule",
            vec!["backup", "list", "--schedule", "nightly", "-o", "name"],
        ),
        (
            "backup-list.selector",
            vec!["backup", "list", "-l", "team=db", "--no-headers"],
        ),
        (
            "backup-list.selector-not",
            vec!["backup", "list", "-l", "team!=db", "-o", "name"],
        ),
        (
            "backup-list.unknown-cluster",
            vec!["backup", "list", "--cluster", "db9"],
        ),
        (
            "schedule-list.unknown-cluster",
            vec!["schedule", "list", "--cluster", "wbe"],
        ),
        (
            "schedule-describe.unknown",
            vec!["schedule", "describe", "nighty"],
        ),
        ("schedule-get.unknown", vec!["schedule", "get", "zzz"]),
        ("bad.output", vec!["schedule", "list", "-o", "xml"]),
        ("bad.selector", vec!["backup", "list", "-l", "team"]),
        // CloudNativePG's 6-field cron: seconds 0 accepted (stored as 5 fields, said on
        // stderr), any other seconds refused. Last: it adds a schedule.
        (
            "schedule-create.cnpg-seconds-30",
            vec![
                "schedule",
                "create",
                "cnpg",
                "--cluster",
                "db1",
                "--plan",
                "pg",
                "--cron",
                "30 0 3 * * *",
                "--keep-last",
                "7",
                "--paused",
            ],
        ),
        (
            "schedule-create.cnpg",
            vec![
                "schedule",
                "create",
                "cnpg",
                "--cluster",
                "db1",
                "--plan",
                "pg",
                "--cron",
                "0 0 3 * * *",
                "--keep-last",
                "7",
                "--paused",
            ],
        ),
    ] {
        cases.push((name.to_string(), args));
    }
    // Names complete from the fleet (issue 50); clap's verbs and flags still complete
    // around them.
    let (url_for_blocking, now_for_blocking) = (url.clone(), cli_now.clone());
    tokio::task::spawn_blocking(move || {
        let completed =
            |line: &[&str]| complete_in_bash(&url_for_blocking, &now_for_blocking, line);
        assert_eq!(
            completed(&["sexton", "schedule", "describe", "n"]),
            "nightly"
        );
        assert_eq!(completed(&["sexton", "schedule", "pause", "w"]), "weekly");
        assert_eq!(
            completed(&["sexton", "backup", "list", "--cluster", "d"]),
            "db1"
        );
        assert_eq!(
            completed(&["sexton", "backup", "hold", "--cluster", "db1", "nightly-"]),
            "nightly-1 nightly-2 nightly-3"
        );
        let verbs = completed(&["sexton", "backup", "de"]);
        assert!(
            verbs.contains("describe") && verbs.contains("delete"),
            "{verbs}"
        );
    })
    .await
    .unwrap();
    let url_for_blocking = url.clone();
    let differences = tokio::task::spawn_blocking(move || {
        cases
            .iter()
            .filter_map(|(name, args)| check(&url_for_blocking, &cli_now, &tokens, name, args))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
    fleet.stop().await.unwrap();
}

/// The rest of what users of kubectl expect: a closed pipe ends quietly, logs never reach
/// stdout, `sexton version` hears every service, `--watch` lists again (a table's header once),
/// completion scripts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipes_logs_version_watch_and_completion_behave() {
    let setup = (0..200).fold(Setup::new(Members::ALL), |setup, i| {
        setup.schedule(
            json!({"name": format!("s{i:03}"), "cluster": "db1", "plan": "full",
                              "cron": "0 3 * * *", "paused": true}),
        )
    });
    let world = setup.start().await;
    let World { nats, fleet, .. } = world;
    let url = nats.url();
    let now = Utc::now().to_rfc3339();
    let blocking = tokio::task::spawn_blocking(move || {
        // A reader that goes away at once: exit 0, nothing on stderr.
        for args in [
            vec!["schedule", "list", "-o", "json"],
            vec!["schedule", "list"],
            vec!["schedule", "list", "-o", "yaml"],
            vec!["completion", "bash"],
        ] {
            let mut child = Command::new(service_binary("sexton"))
                .args(&args)
                .env("SEXTON_NATS_URL", &url)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            drop(child.stdout.take());
            let output = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(0), "{args:?} | true: {stderr}");
            assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        }
        // `| head -1` through a real shell.
        let output = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "set -o pipefail; {} schedule list -o name | head -1",
                service_binary("sexton").display()
            ))
            .env("SEXTON_NATS_URL", &url)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(stdout, "schedule/s000\n");
        assert!(output.status.success(), "{output:?}");
        assert!(
            !String::from_utf8_lossy(&output.stderr).contains("panicked"),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );

        // RUST_LOG=debug: stdout is still exactly the JSON; the logs are on stderr, in JSON
        // when SEXTON_LOG_FORMAT says so.
        for (format, json_logs) in [("text", false), ("json", true)] {
            let run = sexton_with(
                &url,
                &now,
                &["schedule", "list", "-o", "json"],
                &[("RUST_LOG", "debug"), ("SEXTON_LOG_FORMAT", format)],
            );
            assert_eq!(run.code, 0, "{}", run.stderr);
            let listed: Value = serde_json::from_str(&run.stdout)
                .unwrap_or_else(|err| panic!("stdout is not only JSON ({err}): {}", run.stdout));
            assert_eq!(listed.as_array().unwrap().len(), 200);
            assert!(
                run.stderr.contains("DEBUG") || run.stderr.contains("\"level\":\"DEBUG\""),
                "no debug logs on stderr: {}",
                run.stderr
            );
            if json_logs {
                for line in run.stderr.lines().filter(|l| !l.is_empty()) {
                    let log: Value = serde_json::from_str(line)
                        .unwrap_or_else(|err| panic!("not a JSON log line ({err}): {line}"));
                    assert!(log.get("level").is_some(), "{line}");
                }
            }
        }

        // The reference executor honours SEXTON_LOG_FORMAT=json also under RUST_LOG, on stderr.
        let mut executor = Command::new(service_binary("sexton"))
            .arg("executor")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SEXTON_NATS_URL", &url)
            .env("RUST_LOG", "debug")
            .env("SEXTON_LOG_FORMAT", "json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(3));
        let _ = Command::new("kill")
            .args(["-TERM", &executor.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while executor.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                executor.kill().unwrap();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let output = executor.wait_with_output().unwrap();
        assert!(
            output.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("reference executor started"), "{stderr}");
        for line in stderr.lines().filter(|l| !l.is_empty()) {
            let log: Value = serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("not a JSON log line ({err}): {line}"));
            // Sexton's own fields say values, not Rust's Option (a dependency's debug
            // lines are theirs).
            let ours = log["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("sexton"));
            assert!(!ours || !log.to_string().contains("Some("), "{line}");
        }

        // Every service answers `sexton version`, with this build's version.
        let run = sexton_with(&url, &now, &["version", "-o", "json"], &[]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let version: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(version["client"]["version"], env!("CARGO_PKG_VERSION"));
        let services: BTreeMap<String, String> = version["services"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["service"].as_str().unwrap().to_string(),
                    s["version"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let wanted: BTreeMap<String, String> = [
            "deleter",
            "reference-executor",
            "retention-worker",
            "scheduler",
        ]
        .iter()
        .map(|s| (s.to_string(), env!("CARGO_PKG_VERSION").to_string()))
        .collect();
        assert_eq!(services, wanted, "{}", run.stdout);
        let table = sexton_with(&url, &now, &["version"], &[]);
        assert!(table.stdout.starts_with("COMPONENT  "), "{}", table.stdout);

        // --watch lists again until its reader goes away.
        let mut child = Command::new(service_binary("sexton"))
            .args(["schedule", "list", "-o", "name", "--watch=1"])
            .env("SEXTON_NATS_URL", &url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut seen = Vec::new();
        let started = std::time::Instant::now();
        while seen
            .windows(b"schedule/s199\n".len())
            .filter(|w| *w == b"schedule/s199\n")
            .count()
            < 2
        {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no second listing"
            );
            let mut buffer = [0u8; 4096];
            let n = std::io::Read::read(&mut stdout, &mut buffer).unwrap();
            assert!(n > 0, "--watch stopped by itself");
            seen.extend_from_slice(&buffer[..n]);
        }
        drop(stdout);
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{:?}", output);

        // ... and until Ctrl-C, also exit 0.
        let child = Command::new(service_binary("sexton"))
            .args(["backup", "list", "--watch=1"])
            .env("SEXTON_NATS_URL", &url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        // In a table the listing is printed once; later ones print only what changed
        // (nothing here), never the header again.
        assert_eq!(
            String::from_utf8_lossy(&output.stdout)
                .matches("NAME ")
                .count(),
            1,
            "{output:?}"
        );

        // Completion scripts for the three shells people use, naming the verbs and formats.
        for (shell, marker) in [
            ("bash", "complete -F _sexton"),
            ("zsh", "#compdef sexton"),
            ("fish", "complete -c sexton"),
        ] {
            let run = sexton_with(&url, &now, &["completion", shell], &[]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            assert!(
                run.stdout.contains(marker),
                "{shell}: {}",
                &run.stdout[..200]
            );
            for word in [
                "schedule",
                "backup",
                "orphans",
                "yaml",
                "wide",
                "no-headers",
            ] {
                assert!(run.stdout.contains(word), "{shell} completion lacks {word}");
            }
        }
        // With the fleet unreachable: no names and no error in the user's line.
        let run = sexton_with(
            "nats://127.0.0.1:1",
            &now,
            &["__complete-names", "schedule"],
            &[],
        );
        assert_eq!(
            (run.code, run.stdout.as_str(), run.stderr.as_str()),
            (0, "", "")
        );
        let zsh = sexton_with(&url, &now, &["completion", "zsh"], &[]).stdout;
        for kind in ["cluster", "schedule", "backup"] {
            assert!(
                zsh.contains(&format!(":_sexton_names {kind}'")),
                "zsh completes no {kind} names"
            );
        }
        // `executor --help` offers no -o; list verbs do, with examples.
        let run = sexton_with(&url, &now, &["executor", "--help"], &[]);
        assert_eq!(run.code, 0);
        assert!(!run.stdout.contains("--output"), "{}", run.stdout);
        let run = sexton_with(&url, &now, &["backup", "list", "--help"], &[]);
        assert!(
            run.stdout.contains("--output") && run.stdout.contains("Examples:"),
            "{}",
            run.stdout
        );
        let _ = std::io::stderr().flush();
    });
    blocking.await.unwrap();
    fleet.stop().await.unwrap();
}
