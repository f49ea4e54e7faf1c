//! Benchmark, not a test (ignored by `cargo test`): `sexton exec` uploading a 1 GiB output
//! against `aws s3 cp` of the same file to the same SeaweedFS, in the same run, and the resident
//! memory of the `sexton exec` process while it uploads.
//!
//! ```sh
//! cargo test --release -p sexton-tests --test bench_exec -- --ignored --nocapture
//! SEXTON_BENCH_MIB=4096 cargo test --release ...   # another size
//! ```
//!
//! awscli (pinned below) is installed into `.sexton/awscli` with pip. Each side runs twice,
//! alternating, and the better run counts. `sexton exec`'s time is the upload phase its log
//! reports (from the first byte read to the last part completed, SHA-256 included); the
//! command only hard-links the file into the output directory. Memory is sampled from
//! `/proc/<pid>/status` every 20 ms (VmRSS) and read at the end (VmHWM, the peak).

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use sexton_tests::*;

const AWSCLI: &str = "awscli==1.45.11";

fn awscli() -> PathBuf {
    let venv = repo_root().join(".sexton/awscli");
    let aws = venv.join("bin/aws");
    if !aws.exists() {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success())
            && Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", AWSCLI])
                .status()
                .is_ok_and(|s| s.success());
        assert!(ok, "cannot install {AWSCLI} into {}", venv.display());
    }
    aws
}

fn status_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn mib_per_s(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / 1_048_576.0 / seconds
}

fn aws_cp(aws: &Path, s3: &S3, file: &Path, key: &str) -> f64 {
    let started = Instant::now();
    let status = Command::new(aws)
        .args([
            "s3",
            "cp",
            "--only-show-errors",
            "--endpoint-url",
            &s3.endpoint(),
        ])
        .arg(file)
        .arg(format!("s3://{BUCKET}/{key}"))
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .status()
        .expect("running aws");
    assert!(status.success(), "aws s3 cp failed");
    started.elapsed().as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run with --ignored --nocapture"]
async fn exec_upload_against_awscli() {
    let mib: u64 = std::env::var("SEXTON_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let bytes = mib * 1024 * 1024;
    let aws = awscli();
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let fleet = Fleet::start(&config, SCHEDULER_ONLY);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();

    // The output: random bytes, so nothing compresses or deduplicates.
    let file = dir.path().join("output.bin");
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
        let mut random = std::fs::File::open("/dev/urandom").unwrap();
        let mut chunk = vec![0u8; 8 << 20];
        for _ in 0..(bytes / chunk.len() as u64) {
            std::io::Read::read_exact(&mut random, &mut chunk).unwrap();
            out.write_all(&chunk).unwrap();
        }
    }
    let command = format!("ln {} \"$SEXTON_OUTPUT_DIR/output.bin\"", file.display());
    let work = dir.path().join("work");
    // More flags for the executor, e.g. SEXTON_BENCH_EXEC_ARGS="--upload-concurrency 8".
    let extra = std::env::var("SEXTON_BENCH_EXEC_ARGS").unwrap_or_default();
    let mut args = vec![
        "exec",
        "--backup-command",
        &command,
        "--work-dir",
        work.to_str().unwrap(),
        "--max-output-bytes",
        "1TiB",
    ];
    args.extend(extra.split_whitespace());
    let exec = ServiceProcess::start("sexton", &args, &config, dir.path());
    let pid = exec.pid().expect("exec runs");
    create_schedule(
        &client,
        serde_json::json!({"name": "bench", "cluster": "c1", "plan": "bench", "cron": "@every 1h"}),
    )
    .await;
    let js = async_nats::jetstream::new(client.clone());
    let catalog = sexton_shared::catalog::Catalog::new(
        sexton_shared::topology::ensure(&js, 1)
            .await
            .expect("topology")
            .catalog,
    );

    let mut aws_best = f64::MAX;
    let mut exec_best = f64::MAX;
    let mut exec_total_best = f64::MAX;
    let mut rss_peak_sampled = 0u64;
    // Idle: connected, consumers created, waiting for work.
    eventually("the executor consuming", Duration::from_secs(60), || {
        let js = js.clone();
        async move {
            consumer_backlog(&js, sexton_shared::topology::STREAM_DUE, "sexton-exec").await
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let baseline_kib = status_field(pid, "VmRSS:").unwrap_or(0);
    for round in 0..2 {
        let seconds = aws_cp(&aws, &s3, &file, &format!("bench/awscli-{round}.bin"));
        aws_best = aws_best.min(seconds);
        eprintln!(
            "aws s3 cp: {seconds:.2} s, {:.0} MiB/s",
            mib_per_s(bytes, seconds)
        );

        let started = Instant::now();
        let id = trigger_backup(&client, "bench").await;
        let record = loop {
            if let Some(kib) = status_field(pid, "VmRSS:") {
                rss_peak_sampled = rss_peak_sampled.max(kib);
            }
            let cluster = "c1".parse().unwrap();
            if let Some(entry) = catalog.get(&cluster, &id.parse().unwrap()).await.unwrap() {
                if entry.value.status != sexton_model::records::BackupStatus::InProgress {
                    break entry.value;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "no report\n{}",
                exec.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let total = started.elapsed().as_secs_f64();
        assert_eq!(
            record.status,
            sexton_model::records::BackupStatus::Completed,
            "{:?}\n{}",
            record.last_error,
            exec.logs()
        );
        // The upload phase, as the executor logged it for this backup.
        let logs = exec.logs();
        let upload = logs
            .lines()
            .filter(|l| l.contains(&id) && l.contains("output uploaded"))
            .find_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("seconds="))
                    .and_then(|s| s.parse::<f64>().ok())
            })
            .expect("the upload's duration in the log");
        exec_best = exec_best.min(upload);
        exec_total_best = exec_total_best.min(total);
        eprintln!(
            "sexton exec: upload {upload:.2} s ({:.0} MiB/s), due-backup to recorded {total:.2} s",
            mib_per_s(bytes, upload)
        );
    }
    let peak_kib = status_field(pid, "VmHWM:").unwrap_or(0);
    let aws_rate = mib_per_s(bytes, aws_best);
    let exec_rate = mib_per_s(bytes, exec_best);
    println!(
        "\n{mib} MiB to SeaweedFS, best of 2:\n  aws s3 cp ({AWSCLI}): {aws_best:.2} s = {aws_rate:.0} MiB/s\n  sexton exec upload:   {exec_best:.2} s = {exec_rate:.0} MiB/s ({:.0} % of awscli; {:.2} s from due-backup to recorded)\n  sexton exec memory:   {:.1} MiB peak resident (VmHWM), {:.1} MiB peak sampled, {:.1} MiB idle",
        100.0 * exec_rate / aws_rate,
        exec_total_best,
        peak_kib as f64 / 1024.0,
        rss_peak_sampled as f64 / 1024.0,
        baseline_kib as f64 / 1024.0,
    );
    drop(exec);
    fleet.stop().await.unwrap();
}
