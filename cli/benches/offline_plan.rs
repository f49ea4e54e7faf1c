//! Issue 17's offline-plan benchmark: `sexton retention plan` over a catalog file of a million
//! backups (`SEXTON_BENCH_LARGE=1`; 100,000 by default), next to what it cannot do without,
//! measured in the same run on the same file:
//!
//! - *parse*: a process that reads the file and parses it into the engine's structs (the
//!   memory baseline);
//! - *parse + evaluate*: the same, then the engine's `evaluate` (the time baseline);
//! - *old*: what the command did before issue 17 (the owned plan, a `serde_json::Value` of
//!   it, a pretty string of that, printed), for the record;
//! - the command itself (`-o json`, compact for a plan this large; `--pretty`; `-o table`),
//!   its output to `/dev/null`.
//!
//! Each is its own process, started `--runs` times; wall time and peak resident memory
//! (`VmHWM`, polled every 2 ms) are the medians. Then, in this process, the engine alone:
//! `evaluate`, `plan` (evaluate + the owned `Plan`) and evaluate + the streamed plan written to
//! a sink.
//!
//! The catalog: one backup every 5 minutes (a full at midnight, incrementals on the last good
//! backup, about 1 % failed, a `manual` tag once a week), in a shuffled order as a key-value
//! listing returns it (`--sorted`: oldest first). The policy is the issue's: keep last 10,
//! hourly 48, daily 30, weekly 12, monthly 24, yearly unlimited, within 7d, tag `manual`.
//!
//! ```sh
//! cargo bench -p sexton-cli --bench offline_plan -- [--backups 100000] [--runs 3] [--sorted]
//! SEXTON_BENCH_LARGE=1 cargo bench -p sexton-cli --bench offline_plan   # 1,000,000 backups
//! ```

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sexton_retention::{Catalog, Policy};

/// The issue's catalog, the same as `retention/benches/plan.rs` builds in memory.
#[path = "../../retention/benches/support/catalog.rs"]
mod catalog;

const POLICY: &str = r#"{"keep_last": 10, "keep_hourly": 48, "keep_daily": 30, "keep_weekly": 12,
    "keep_monthly": 24, "keep_yearly": -1, "keep_within": "7d", "keep_tags": [["manual"]]}"#;

/// Makes a fresh command for one measured run of a step.
type CommandMaker<'a> = Box<dyn Fn() -> Command + 'a>;

struct Args {
    backups: usize,
    runs: usize,
    sorted: bool,
}

fn args() -> Args {
    // The issue's million backups take a minute and half a GiB per process: asked for with
    // SEXTON_BENCH_LARGE=1 (or --backups), a tenth of it by default.
    let large = std::env::var("SEXTON_BENCH_LARGE").is_ok_and(|v| v == "1");
    let mut args = Args {
        backups: if large { 1_000_000 } else { 100_000 },
        runs: 3,
        sorted: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut number = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match flag.as_str() {
            "--backups" => args.backups = number("--backups"),
            "--runs" => args.runs = number("--runs").max(1),
            "--sorted" => args.sorted = true,
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

fn main() {
    // A child: one measured step, then exit.
    if let Ok(step) = std::env::var("SEXTON_BENCH_CHILD") {
        child(&step);
        return;
    }
    let args = args();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let catalog_path = dir.path().join("catalog.json");
    let policy_path = dir.path().join("policy.json");
    let now = write_catalog(&catalog_path, args.backups, args.sorted);
    std::fs::write(&policy_path, POLICY).unwrap();
    let file_mib = std::fs::metadata(&catalog_path).unwrap().len() as f64 / (1 << 20) as f64;
    println!(
        "catalog: {} backups, {}, {file_mib:.0} MiB of JSON; now {}",
        args.backups,
        if args.sorted {
            "oldest first"
        } else {
            "shuffled"
        },
        now.to_rfc3339()
    );
    println!(
        "policy: {}",
        POLICY.split_whitespace().collect::<Vec<_>>().join(" ")
    );

    let now_text = now.to_rfc3339();
    let me = std::env::current_exe().unwrap();
    let sexton = PathBuf::from(env!("CARGO_BIN_EXE_sexton"));
    let plan_args = |extra: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = [
            "retention",
            "plan",
            "--catalog",
            catalog_path.to_str().unwrap(),
            "--policy",
            policy_path.to_str().unwrap(),
            "--now",
            &now_text,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        all.extend(extra.iter().map(|s| s.to_string()));
        all
    };
    let child_of = |step: &str| {
        let mut command = Command::new(&me);
        command
            .env("SEXTON_BENCH_CHILD", step)
            .env("SEXTON_BENCH_CATALOG", &catalog_path)
            .env("SEXTON_BENCH_POLICY_FILE", &policy_path)
            .env("SEXTON_BENCH_NOW", &now_text);
        command
    };
    let steps: Vec<(&str, CommandMaker)> = vec![
        ("parse (memory baseline)", Box::new(|| child_of("parse"))),
        (
            "parse + evaluate (time baseline)",
            Box::new(|| child_of("evaluate")),
        ),
        (
            "sexton retention plan -o json",
            Box::new(|| {
                let mut command = Command::new(&sexton);
                command.args(plan_args(&["-o", "json"]));
                command
            }),
        ),
        (
            "sexton retention plan -o json --pretty",
            Box::new(|| {
                let mut command = Command::new(&sexton);
                command.args(plan_args(&["-o", "json", "--pretty"]));
                command
            }),
        ),
        (
            "sexton retention plan -o table",
            Box::new(|| {
                let mut command = Command::new(&sexton);
                command.args(plan_args(&["-o", "table"]));
                command
            }),
        ),
        (
            "before issue 17: plan + Value + pretty string",
            Box::new(|| child_of("old")),
        ),
    ];
    let mut results = Vec::new();
    for (name, make) in &steps {
        let mut walls = Vec::new();
        let mut peaks = Vec::new();
        for _ in 0..args.runs {
            let (wall, peak_kib) = measure(make());
            walls.push(wall);
            peaks.push(peak_kib);
        }
        walls.sort();
        peaks.sort();
        let wall = walls[walls.len() / 2];
        let peak = peaks[peaks.len() / 2];
        println!(
            "  {name:<48} {:>8.2?} (runs {})  peak {:>6.0} MiB",
            wall,
            walls
                .iter()
                .map(|w| format!("{:.2}", w.as_secs_f64()))
                .collect::<Vec<_>>()
                .join(" "),
            peak as f64 / 1024.0
        );
        results.push((wall, peak));
    }
    let (parse_wall, parse_peak) = results[0];
    let (evaluate_wall, _) = results[1];
    let _ = parse_wall;
    for (index, label) in [
        (2, "-o json"),
        (3, "--pretty"),
        (4, "-o table"),
        (5, "before"),
    ] {
        let (wall, peak) = results[index];
        println!(
            "  {label:<10} time {:.2}x parse + evaluate (goal <= 2), peak {:.2}x parse (goal <= 2)",
            wall.as_secs_f64() / evaluate_wall.as_secs_f64(),
            peak as f64 / parse_peak as f64
        );
    }

    // The engine alone, in this process.
    let catalog: Catalog = serde_json::from_slice(&std::fs::read(&catalog_path).unwrap()).unwrap();
    let policy = Policy::from_json(POLICY).unwrap();
    let mut evaluate = Vec::new();
    let mut plan = Vec::new();
    let mut streamed = Vec::new();
    for _ in 0..args.runs.max(3) {
        let started = Instant::now();
        let evaluation = sexton_retention::evaluate(&catalog, &policy, now).unwrap();
        evaluate.push(started.elapsed());
        drop(evaluation);

        let started = Instant::now();
        let owned = sexton_retention::plan(&catalog, &policy, now).unwrap();
        plan.push(started.elapsed());
        drop(owned);

        let started = Instant::now();
        let evaluation = sexton_retention::evaluate(&catalog, &policy, now).unwrap();
        let mut sink = std::io::BufWriter::new(std::io::sink());
        serde_json::to_writer(&mut sink, &evaluation.plan_json()).unwrap();
        sink.flush().unwrap();
        streamed.push(started.elapsed());
    }
    let median = |samples: &mut Vec<Duration>| {
        samples.sort();
        samples[samples.len() / 2]
    };
    let (evaluate, plan, streamed) = (
        median(&mut evaluate),
        median(&mut plan),
        median(&mut streamed),
    );
    println!("engine, in process (median):");
    println!("  evaluate                                      {evaluate:>10.2?}");
    println!(
        "  plan (evaluate + owned Plan)                  {plan:>10.2?}  {:.2}x evaluate (goal <= 2)",
        plan.as_secs_f64() / evaluate.as_secs_f64()
    );
    println!(
        "  evaluate + streamed JSON to a sink            {streamed:>10.2?}  {:.2}x evaluate",
        streamed.as_secs_f64() / evaluate.as_secs_f64()
    );
}

/// Runs `command` with its output to /dev/null; its wall time and peak resident KiB.
fn measure(mut command: Command) -> (Duration, u64) {
    let started = Instant::now();
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting a measured process");
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Some(hwm) = vm_hwm_kib(&status_path) {
            peak = peak.max(hwm);
        }
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{command:?} failed: {status}");
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    (started.elapsed(), peak)
}

fn vm_hwm_kib(status_path: &str) -> Option<u64> {
    let status = std::fs::read_to_string(status_path).ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix("VmHWM:")?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

/// One measured step in a process of its own.
fn child(step: &str) {
    let catalog_path = std::env::var("SEXTON_BENCH_CATALOG").unwrap();
    let policy_path = std::env::var("SEXTON_BENCH_POLICY_FILE").unwrap();
    let now: DateTime<Utc> = std::env::var("SEXTON_BENCH_NOW").unwrap().parse().unwrap();
    let bytes = std::fs::read(&catalog_path).unwrap();
    let catalog: Catalog = serde_json::from_slice(&bytes).unwrap();
    drop(bytes);
    let policy = Policy::from_json(&std::fs::read_to_string(&policy_path).unwrap()).unwrap();
    match step {
        "parse" => {
            std::hint::black_box(&catalog);
        }
        "evaluate" => {
            let evaluation = sexton_retention::evaluate(&catalog, &policy, now).unwrap();
            std::hint::black_box(&evaluation);
        }
        "old" => {
            let plan = sexton_retention::plan(&catalog, &policy, now).unwrap();
            let value = serde_json::to_value(&plan).unwrap();
            println!("{}", serde_json::to_string_pretty(&value).unwrap());
        }
        other => panic!("unknown step {other}"),
    }
}

/// Writes the catalog file; returns the `now` to decide at (5 minutes after the newest).
fn write_catalog(path: &Path, n_backups: usize, sorted: bool) -> DateTime<Utc> {
    let (slots, now) = catalog::issue_catalog(n_backups, sorted);
    let file = std::fs::File::create(path).unwrap();
    let mut out = std::io::BufWriter::new(file);
    out.write_all(b"{\"backups\": [\n").unwrap();
    for (n, backup) in slots.iter().enumerate() {
        let mut record = serde_json::json!({
            "id": format!("db1-{:08}", backup.slot),
            "completed_at": backup.completed.to_rfc3339(),
            "started_at": backup.started.to_rfc3339(),
            "status": if backup.failed { "failed" } else { "completed" },
            "kind": if backup.parent.is_some() { "incremental" } else { "full" },
        });
        if let Some(parent) = backup.parent {
            record["parent"] = format!("db1-{parent:08}").into();
        }
        if backup.manual {
            record["tags"] = serde_json::json!(["manual"]);
        }
        if n > 0 {
            out.write_all(b",\n").unwrap();
        }
        serde_json::to_writer(&mut out, &record).unwrap();
    }
    out.write_all(b"\n]}\n").unwrap();
    out.flush().unwrap();
    now
}
