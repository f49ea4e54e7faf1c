//! `sexton retention simulate` through the real binary: the terminal calendar of a known case,
//! its JSON, its agreement with `sexton retention plan` on the same synthetic catalog, the
//! comparison of two policies, and the HTML page rendered by a real browser (Debian's
//! headless Chromium, installed by the test when missing) with a screenshot kept under
//! `target/tmp/simulate/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

const COMBINED_POLICY: &str = r#"{"keep_last": 48, "keep_daily": 30, "keep_weekly": 12, "keep_monthly": 24, "keep_yearly": 10, "keep_within": "7d", "keep_tags": [["monthly-report"]], "retention_duration": 14, "recovery_window": "30d"}"#;

fn sexton(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sexton"))
        .args(args)
        .env("SEXTON_NATS_URL", "nats://127.0.0.1:1")
        .env_remove("NO_COLOR")
        .output()
        .expect("running sexton")
}

fn ok(args: &[&str]) -> String {
    let out = sexton(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn json_of(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&ok(&args)).expect("json output")
}

/// barman 274's case, as a user sees it: the calendar, the summary that explains the fourth
/// backup, and the reasons of the last day.
#[test]
fn the_terminal_calendar_of_a_three_day_window() {
    let text = ok(&[
        "retention",
        "simulate",
        "--cron",
        "@daily",
        "--policy",
        r#"{"recovery_window": "3d"}"#,
        "--from",
        "2026-01-01T00:00:00Z",
        "--days",
        "8",
    ]);
    let expected = r#"@daily with {"recovery_window":"3d"}
8 days from 2026-01-01T00:00:00+00:00 (UTC); failures none; full 10 GiB, incremental 1 GiB; retention after each backup and every 1h

DAY         COUNT    STORAGE  OLDEST      WORST GAP  backups at the day's end by age, one column a day, newest right
2026-01-01      1     10 GiB  2026-01-01          -  ······●
2026-01-02      2     20 GiB  2026-01-01         1d  ·····●●
2026-01-03      3     30 GiB  2026-01-01         1d  ····●●●
2026-01-04      4     40 GiB  2026-01-01         1d  ···●●●●
2026-01-05      4     40 GiB  2026-01-02         1d  ···●●●●
2026-01-06      4     40 GiB  2026-01-03         1d  ···●●●●
2026-01-07      4     40 GiB  2026-01-04         1d  ···●●●●
2026-01-08      4     40 GiB  2026-01-05         1d  ···●●●●

legend: ● kept by a rule, f kept by the floor alone, c a kept backup builds on it, p some volumes kept, x failed, within its grace period

Summary
  backups taken     8 (0 failed), every 1d; retention ran 192 times
  steady state      4 backups, 40 GiB (still changing in the last week)
  most              4 backups (first on 2026-01-04), 5 between a backup and the next sweep; storage 40 GiB (50 GiB at a peak)
  restorable at end 2026-01-05T00:00:00+00:00 → 2026-01-08T00:00:00+00:00: 4 restore points, 3 gaps (docs/recovery.md)
  worst gap         1d (sim-20260101000000 → sim-20260102000000, first on 2026-01-02)
  promised window   3d: gaps are measured over it
  rules             recovery_window 3d: kept 8 backups (8 by it alone)

Surprises
  - recovery_window 3d keeps 4 backups at the last day's end, not 3: the 3 inside the window and the newest before it, kept so that the window's first instant stays recoverable (barman 274)
  - on 4 days there are more backups between a backup and the next retention sweep than at the day's end (on 2026-01-05: 5 against 4): storage must hold the peak

On 2026-01-08, the last day: 4 backups exist; why each is kept
  sim-20260108000000  full      10 GiB  recovery_window 3d; floor: newest completed full backup
  sim-20260107000000  full      10 GiB  recovery_window 3d
  sim-20260106000000  full      10 GiB  recovery_window 3d
  sim-20260105000000  full      10 GiB  recovery_window 3d: newest before the window
"#;
    assert_eq!(text, expected, "\n{text}");
    assert!(
        !text.contains('\u{1b}'),
        "no colour when stdout is not a terminal"
    );
}

#[test]
fn json_holds_every_day_and_every_backup_with_its_reasons() {
    let value = json_of(&[
        "retention",
        "simulate",
        "--cron",
        "@daily",
        "--policy",
        r#"{"keep_last": 7}"#,
        "--from",
        "2026-01-01T00:00:00Z",
        "--days",
        "14",
        "--failures",
        "ok,ok,ok,fail",
        "--size-full",
        "2GiB",
    ]);
    let counts: Vec<u64> = value["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|day| day["count"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [1, 2, 3, 3, 4, 5, 6, 6, 7, 7, 7, 7, 7, 7]);
    assert_eq!(value["scenario"]["failures"], "ok,ok,ok,fail");
    assert_eq!(value["scenario"]["sizes"]["full"], 2u64 << 30);
    assert_eq!(value["summary"]["n_failed"], 3);
    assert_eq!(value["summary"]["max_gap"]["seconds"], 2 * 86_400);
    let first = &value["backups"][0];
    assert_eq!(first["id"], "sim-20260101000000");
    assert_eq!(first["status"], "completed");
    assert_eq!(first["spans"][0]["reasons"][0], "last snapshot");
    let failed = &value["backups"][3];
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        failed["spans"],
        json!([]),
        "cleaned up before the day's end"
    );
}

/// One engine, two paths: for several days of an hourly schedule under the combined policy,
/// `sexton retention plan` over every backup taken so far, at the day's sampling instant,
/// keeps exactly the backups the simulation shows for that day.
#[test]
fn retention_plan_keeps_what_the_simulation_shows() {
    let value = json_of(&[
        "retention",
        "simulate",
        "--cron",
        "@hourly",
        "--policy",
        COMBINED_POLICY,
        "--from",
        "2026-01-01T00:00:00Z",
        "--days",
        "35",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    std::fs::write(&policy, COMBINED_POLICY).unwrap();
    let backups = value["backups"].as_array().unwrap();
    for day in [0, 6, 13, 29, 30, 34] {
        let record = &value["days"][day];
        let now = record["sampled_at"].as_str().unwrap();
        let now_time = chrono::DateTime::parse_from_rfc3339(now).unwrap();
        let history: Vec<&Value> = backups
            .iter()
            .filter(|backup| {
                chrono::DateTime::parse_from_rfc3339(backup["completed_at"].as_str().unwrap())
                    .unwrap()
                    <= now_time
            })
            .collect();
        let catalog = dir.path().join(format!("catalog-{day}.json"));
        std::fs::write(&catalog, json!({ "backups": history }).to_string()).unwrap();
        let plan = json_of(&[
            "retention",
            "plan",
            "--catalog",
            catalog.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
            "--now",
            now,
        ]);
        let kept: Vec<&str> = plan["keep"]
            .as_array()
            .unwrap()
            .iter()
            .map(|decision| decision["id"].as_str().unwrap())
            .collect();
        let simulated: Vec<&str> = record["backups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|index| {
                backups[index.as_u64().unwrap() as usize]["id"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(kept, simulated, "day {}", record["date"]);
        assert_eq!(record["count"].as_u64().unwrap() as usize, kept.len());
    }
}

#[test]
fn against_says_what_narrowing_the_policy_deletes() {
    let value = json_of(&[
        "retention",
        "simulate",
        "--cron",
        "@daily",
        "--policy",
        r#"{"keep_last": 14}"#,
        "--against",
        r#"{"keep_last": 7}"#,
        "--from",
        "2026-01-01T00:00:00Z",
        "--days",
        "20",
        "--size-full",
        "1GiB",
    ]);
    let switch = &value["switch"];
    assert_eq!(switch["steady_count"], json!([14, 7]));
    assert_eq!(switch["deletes"].as_array().unwrap().len(), 7);
    assert_eq!(switch["deletes"][0]["id"], "sim-20260113000000");
    assert_eq!(
        switch["deletes"][0]["current_reasons"],
        json!(["last snapshot"])
    );
    assert_eq!(switch["freed_bytes"], 7u64 << 30);
    assert_eq!(switch["steady_storage_delta_bytes"], -(7i64 << 30));
    assert_eq!(value["days"][19]["count"], json!([14, 7]));
    let table = ok(&[
        "retention",
        "simulate",
        "--cron",
        "@daily",
        "--policy",
        r#"{"keep_last": 14}"#,
        "--against",
        r#"{"keep_last": 7}"#,
        "--from",
        "2026-01-01T00:00:00Z",
        "--days",
        "20",
    ]);
    assert!(
        table.contains(
            "Switching on 2026-01-20T23:00:00+00:00 deletes 7 backups at once (70 GiB freed)"
        ),
        "{table}"
    );
}

/// The page of a known case in a real browser: the script ran, the timeline holds one group
/// of marks per backup that existed at a day's end (14) and one mark per run of days with the
/// same reasons (27: every backup but the last is also the floor on its first day), the day
/// explorer lists the last day's 7 backups, and the page loaded nothing and had nothing
/// blocked. A screenshot is kept.
#[test]
fn the_html_page_renders_in_chromium_and_fetches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("keep-last-7.html");
    let printed = ok(&[
        "retention",
        "simulate",
        "--cron",
        "@daily",
        "--policy",
        r#"{"keep_last": 7}"#,
        "--from",
        "2026-01-01T00:00:00Z",
        "--days",
        "14",
        "-o",
        "html",
        page.to_str().unwrap(),
    ]);
    assert!(printed.starts_with("wrote "), "{printed}");
    let html = std::fs::read_to_string(&page).unwrap();
    check_fetches_nothing(&html);

    let dom = dump_dom(&page, dir.path());
    assert!(dom.contains(r#"data-ready="yes""#), "the page's script ran");
    assert_eq!(dom.matches(r#"<g class="backup"#).count(), 14);
    assert_eq!(dom.matches(r#"<rect class="mark "#).count(), 27);
    assert_eq!(dom.matches(r#"<li class="kept "#).count(), 7);
    assert!(dom.contains(
        "sim-20260114000000 (10 GiB): last snapshot; floor: newest completed full backup"
    ));
    assert!(
        dom.contains(r#"<span id="resource-count">0</span>"#),
        "no resource loaded"
    );
    assert!(
        dom.contains(r#"<span id="csp-violations">0</span>"#),
        "no request blocked"
    );
    let shots = screenshot_dir();
    screenshot(&page, &shots.join("keep-last-7.png"), dir.path());

    // A richer page for people: hourly backups under the combined policy, some failing,
    // against a narrower policy.
    let rich = dir.path().join("hourly-combined.html");
    ok(&[
        "retention",
        "simulate",
        "--cron",
        "@hourly",
        "--policy",
        COMBINED_POLICY,
        "--against",
        r#"{"keep_last": 48, "keep_daily": 14}"#,
        "--from",
        "2026-01-01T00:00:00Z",
        "--days",
        "45",
        "--failures",
        "5%",
        "-o",
        "html",
        rich.to_str().unwrap(),
    ]);
    check_fetches_nothing(&std::fs::read_to_string(&rich).unwrap());
    let dom = dump_dom(&rich, dir.path());
    assert!(dom.contains(r#"data-ready="yes""#));
    assert!(dom.contains(r#"<span id="csp-violations">0</span>"#));
    screenshot(&rich, &shots.join("hourly-combined.png"), dir.path());
}

/// No URL a browser could fetch, and a policy that would block one anyway.
fn check_fetches_nothing(html: &str) {
    assert!(
        html.contains(
            r#"content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline';"#
        ),
        "the page carries its content security policy"
    );
    for needle in ["http://", "https://", "src=", "href=", "url(", "@import"] {
        assert!(!html.contains(needle), "the page holds {needle:?}");
    }
}

fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("simulate");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Headless Chromium with everything that could reach a network off, a fresh profile.
fn chromium(work: &Path, args: &[&str]) -> Output {
    let profile = tempfile::tempdir_in(work).unwrap();
    let out = Command::new(chromium_binary())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .output()
        .expect("running chromium");
    assert!(
        out.status.success(),
        "chromium {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn dump_dom(page: &Path, work: &Path) -> String {
    let url = format!("file://{}", page.display());
    String::from_utf8(chromium(work, &["--dump-dom", &url]).stdout).unwrap()
}

fn screenshot(page: &Path, png: &Path, work: &Path) {
    let _ = std::fs::remove_file(png);
    let url = format!("file://{}", page.display());
    chromium(
        work,
        &[
            "--window-size=1200,2000",
            &format!("--screenshot={}", png.display()),
            &url,
        ],
    );
    let bytes = std::fs::read(png).expect("chromium wrote the screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "{} is a png", png.display());
    eprintln!("screenshot: {}", png.display());
}

/// Debian's chromium, installed with apt-get when it is missing: the test never skips.
fn chromium_binary() -> PathBuf {
    let find = || {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join("chromium"))
            .find(|path| path.is_file())
    };
    if let Some(path) = find() {
        return path;
    }
    let status = Command::new("apt-get")
        .args(["install", "-y", "chromium"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .expect("running apt-get to install chromium");
    assert!(status.success(), "apt-get install -y chromium failed");
    find().expect("chromium is on PATH after apt-get install")
}

/// `--lock` (issue 29): the bucket's lock setting in the simulation. The days count what only
/// the locks keep and its bytes, the summary says so, and the scenario names the tiers.
#[test]
fn locks_show_what_only_they_keep_and_its_cost() {
    let args = [
        "retention",
        "simulate",
        "--cron",
        "@hourly",
        "--policy",
        r#"{"keep_hourly": 24, "keep_daily": 7}"#,
        "--days",
        "40",
        "--from",
        "2026-01-01T00:00:00Z",
        "--lock",
        "min=1d,daily=35d",
    ];
    let simulation = json_of(&args);
    assert_eq!(simulation["scenario"]["lock"], "min=1d,daily=35d");
    let last = simulation["days"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["n_locked_only"], 28);
    assert_eq!(last["locked_only_bytes"], 28u64 * (10 << 30));
    let text = ok(&args);
    assert!(
        text.contains("only locks keep   at most 29 backups")
            && text.contains("28 backups, 280 GiB on the last day")
            && text.contains("Object Locks min=1d,daily=35d"),
        "{text}"
    );
}

/// `--copies` (issue 28): each copy rule's location simulated with its own policy; storage per
/// class and what early deletions cost, in the JSON and the text.
#[test]
fn copies_show_each_location_with_its_classes_and_early_deletions() {
    let args = [
        "retention",
        "simulate",
        "--cron",
        "0 3 * * *",
        "--policy",
        r#"{"keep_daily": 7}"#,
        "--days",
        "120",
        "--from",
        "2026-01-01T00:00:00Z",
        "--copies",
        r#"[{"to": "dr", "policy": {"keep_monthly": 12}, "select": "kept", "delay": "32d",
             "storage_class": "STANDARD_IA",
             "transitions": [{"after_days": 60, "storage_class": "GLACIER_IR"}]},
            {"to": "vault", "policy": {"keep_daily": 7, "keep_monthly": 3},
             "storage_class": "GLACIER_IR"}]"#,
    ];
    let simulation = json_of(&args);
    let locations = simulation["locations"].as_array().unwrap();
    assert_eq!(locations.len(), 2);
    assert_eq!(locations[0]["rule"]["to"], "dr");
    assert_eq!(locations[0]["summary"]["copied"], 3);
    assert_eq!(locations[0]["summary"]["skipped"], 85);
    assert_eq!(
        locations[0]["summary"]["storage_by_class"]["GLACIER_IR"],
        30u64 << 30
    );
    assert_eq!(locations[1]["summary"]["deleted_early"], 111);
    let text = ok(&args);
    assert!(
        text.contains("At dr (policy {\"keep_monthly\":12}, select kept, delay 32 days, written in STANDARD_IA, to GLACIER_IR after 60 days)")
            && text.contains("at the end: 3 copies, 30 GiB (GLACIER_IR 30 GiB)")
            && text.contains("copies made 3, skipped 85")
            && text.contains("deleted before their class's minimum: 111"),
        "{text}"
    );
    // Without --copies the JSON has no locations at all.
    let plain = json_of(&args[..args.len() - 2]);
    assert!(plain.get("locations").is_none());
}

/// Issue 47: the simulation says what can be restored at its end, by the recovery value: a
/// three-day window over daily backups keeps the window's four restore points, and without a
/// log nothing between them is restorable.
#[test]
fn the_simulation_ends_with_what_can_be_restored() {
    let value = json_of(&[
        "retention",
        "simulate",
        "--cron",
        "@daily",
        "--policy",
        r#"{"recovery_window": "3d"}"#,
        "--from",
        "2026-01-01T00:00:00Z",
        "--days",
        "8",
    ]);
    let points: Vec<&str> = value["recovery"]["points"]
        .as_array()
        .expect("recovery points")
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        points,
        [
            "sim-20260105000000",
            "sim-20260106000000",
            "sim-20260107000000",
            "sim-20260108000000"
        ]
    );
    assert_eq!(value["recovery"]["intervals"], json!([]));
    assert_eq!(value["recovery"]["gaps"].as_array().unwrap().len(), 3);
}
