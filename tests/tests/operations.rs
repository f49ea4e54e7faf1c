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
