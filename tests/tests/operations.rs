//! Operating the services as processes: health and readiness endpoints (also while NATS is
//! down), a `/metrics` page that `promtool check metrics` accepts, and a clean exit on SIGTERM.

use std::{process::Command, time::Duration};

use sexton_tests::*;

fn promtool_check(page: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|err| format!("promtool is required (deploy/check installs it): {err}"))?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn services_report_health_and_readiness_and_stop_on_sigterm() {
    let mut nats = Nats::start();
    let s3 = S3::start();
    let logs = tempfile::tempdir().unwrap();
    let mut services = Vec::new();
    for binary in [
        "sexton-scheduler",
        "sexton-retention-worker",
        "sexton-deleter",
    ] {
        let port = free_port();
        let mut config = config(&nats, &s3);
        config.http.listen = format!("127.0.0.1:{port}");
        services.push((
            ServiceProcess::start(binary, &[], &config, logs.path()),
            port,
        ));
    }
    let wait = |port: u16, path: &str, want: u16| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if http_status(port, path) == Some(want) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    };
    for (service, port) in &services {
        assert!(
            wait(*port, "/healthz", 200),
            "{} /healthz\n{}",
            service.name,
            service.logs()
        );
        assert!(
            wait(*port, "/readyz", 200),
            "{} /readyz\n{}",
            service.name,
            service.logs()
        );
        let (status, page) = http_get(*port, "/metrics").unwrap();
        assert_eq!(status, 200);
        assert!(page.contains("sexton_"), "{}: {page}", service.name);
        promtool_check(&page).unwrap_or_else(|err| panic!("{}: {err}\n{page}", service.name));
        // What every exporter has: build info, the process collector, and here NATS
        // connectivity as a metric (not only /readyz).
        let short = service.name.trim_start_matches("sexton-");
        let build_info = format!(
            "sexton_build_info{{service=\"{short}\",version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        for wanted in [
            build_info.as_str(),
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "sexton_nats_connected 1",
        ] {
            assert!(
                page.contains(wanted),
                "{}: no {wanted}\n{page}",
                service.name
            );
        }
    }

    // NATS down: alive, but not ready.
    nats.server.kill();
    for (service, port) in &services {
        assert!(
            wait(*port, "/readyz", 503),
            "{} still ready without nats",
            service.name
        );
        assert_eq!(
            http_status(*port, "/healthz"),
            Some(200),
            "{}",
            service.name
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (_, page) = http_get(*port, "/metrics").unwrap();
            if page.contains("sexton_nats_connected 0") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{}: sexton_nats_connected is not 0 without nats",
                service.name
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    nats.restart();
    for (service, port) in &services {
        assert!(
            wait(*port, "/readyz", 200),
            "{} not ready after nats returned",
            service.name
        );
    }

    for (mut service, _) in services {
        let status = service.terminate(Duration::from_secs(30));
        assert!(
            status.is_some_and(|s| s.success()),
            "{} did not exit cleanly on SIGTERM: {status:?}\n{}",
            service.name,
            service.logs()
        );
    }
}

/// With `--log-format json`, what a service logs while handling a message carries the message's
/// span: subject, stream sequence, cluster and backup id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_span_of_the_message_being_handled() {
    let nats = Nats::start();
    let mut config = nats_config(&nats);
    config.log.format = sexton_shared::config::LogFormat::Json;
    let logs = tempfile::tempdir().unwrap();
    let mut scheduler = ServiceProcess::start("sexton-scheduler", &[], &config, logs.path());
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    // A report for a schedule nobody created: refused, and the refusal logged in its span.
    let report = serde_json::json!({
        "schema_version": 1, "backup_id": "span-probe", "cluster": "spans", "plan": "full",
        "schedule": "nobody", "backup_name": "nobody", "status": "started",
    });
    eventually("the report stream", Duration::from_secs(30), || {
        let (js, report) = (js.clone(), report.clone());
        async move {
            js.publish("sexton.v1.report.spans", report.to_string().into())
                .await
                .ok()?
                .await
                .ok()
        }
    })
    .await;
    let line = eventually("the refusal logged", Duration::from_secs(30), || {
        let logs = scheduler.logs();
        async move {
            logs.lines()
                .find(|line| line.contains("span-probe") && line.contains("incident"))
                .map(str::to_string)
        }
    })
    .await;
    let line: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|err| panic!("not a JSON log line ({err}): {line}"));
    let span = &line["span"];
    assert_eq!(span["name"], "message", "{line}");
    assert_eq!(span["subject"], "sexton.v1.report.spans", "{line}");
    assert_eq!(span["cluster"], "spans", "{line}");
    assert_eq!(span["backup"], "span-probe", "{line}");
    assert!(span["sequence"].as_u64().is_some_and(|s| s >= 1), "{line}");
    let status = scheduler.terminate(Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}
