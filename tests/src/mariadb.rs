//! A real MariaDB server for tests: Debian's packages, installed with apt-get when missing
//! (the test fails if they cannot be installed — it never skips), and a private server per
//! test on its own datadir, socket and loopback port, with binary logging on.
//!
//! Every MariaDB tool gets `--no-defaults` as its first argument, or `/etc/mysql` leaks in. The
//! server's `Child` is kept and waited for: an orphaned mariadbd lingers. Measured facts behind
//! these choices: `shared/design/test-infra.md` (MariaDB section).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

/// The tools the tests and the recipe in `deploy/executors/mariadb/` call.
pub const TOOLS: &[&str] = &[
    "mariadbd",
    "mariadb-install-db",
    "mariadb",
    "mariadb-admin",
    "mariabackup",
    "mbstream",
    "mariadb-binlog",
];

/// The Debian packages that hold [`TOOLS`].
pub const PACKAGES: &[&str] = &["mariadb-server", "mariadb-backup", "mariadb-client"];

fn on_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .any(|dir| dir.join(tool).is_file())
}

/// Installs the MariaDB packages once per process if a tool is missing; panics if it cannot.
pub fn ensure_installed() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let missing: Vec<&str> = TOOLS.iter().copied().filter(|t| !on_path(t)).collect();
        if missing.is_empty() {
            return;
        }
        eprintln!("installing {PACKAGES:?} for {missing:?}");
        // Keep the distribution's service from starting (no systemd here, and the tests run
        // their own servers). Only if the image has no such policy, and removed again after.
        let policy = Path::new("/usr/sbin/policy-rc.d");
        let wrote_policy = !policy.exists()
            && std::fs::write(policy, "#!/bin/sh\nexit 101\n").is_ok()
            && Command::new("chmod")
                .args(["+x", "/usr/sbin/policy-rc.d"])
                .status()
                .is_ok_and(|s| s.success());
        let install = || {
            Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends"])
                .args(PACKAGES)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success())
        };
        let installed = install()
            || (Command::new("apt-get")
                .arg("update")
                .status()
                .is_ok_and(|s| s.success())
                && install());
        if wrote_policy {
            let _ = std::fs::remove_file(policy);
        }
        assert!(
            installed,
            "cannot install {PACKAGES:?} with apt-get (needed: {missing:?}); install them and rerun"
        );
        let still: Vec<&str> = TOOLS.iter().copied().filter(|t| !on_path(t)).collect();
        assert!(
            still.is_empty(),
            "{still:?} missing after installing {PACKAGES:?}"
        );
    });
}

/// A private MariaDB server, stopped (SIGTERM, then waited for) on drop.
pub struct MariaDb {
    pub dir: PathBuf,
    pub datadir: PathBuf,
    pub socket: PathBuf,
    pub binlog_dir: PathBuf,
    pub port: u16,
    child: Option<Child>,
}

impl MariaDb {
    /// Initialises a datadir under `dir` and starts a server with binary logging (ROW format),
    /// UTC as its time zone, on a free loopback port.
    pub fn start(dir: &Path) -> MariaDb {
        ensure_installed();
        let datadir = dir.join("datadir");
        let binlog_dir = dir.join("binlog");
        std::fs::create_dir_all(&binlog_dir).expect("binlog dir");
        let output = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .args([
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ])
            .output()
            .expect("running mariadb-install-db");
        assert!(
            output.status.success(),
            "mariadb-install-db failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut db = MariaDb {
            dir: dir.to_path_buf(),
            socket: dir.join("mysqld.sock"),
            port: crate::free_port(),
            datadir,
            binlog_dir,
            child: None,
        };
        let child = Command::new("mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", db.datadir.display()))
            .arg(format!("--socket={}", db.socket.display()))
            .arg(format!("--port={}", db.port))
            .arg("--bind-address=127.0.0.1")
            .arg("--user=root")
            .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", dir.join("mysqld.err").display()))
            .args([
                "--innodb-buffer-pool-size=32M",
                "--innodb-log-file-size=8M",
                "--server-id=1",
                "--binlog-format=ROW",
                "--default-time-zone=+00:00",
            ])
            .arg(format!(
                "--log-bin={}",
                db.binlog_dir.join("mysql-bin").display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting mariadbd");
        db.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !db.ping() {
            assert!(
                Instant::now() < deadline,
                "mariadbd not ready within 30s: {}",
                std::fs::read_to_string(dir.join("mysqld.err")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        db
    }

    fn ping(&self) -> bool {
        Command::new("mariadb-admin")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["--user=root", "ping"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The `mariadb` client for this server, with `args` after the connection options.
    pub fn client(&self) -> Command {
        let mut command = Command::new("mariadb");
        command
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .arg("--user=root");
        command
    }

    /// Runs `sql` and returns its output (tab-separated, no column names).
    pub fn sql(&self, sql: &str) -> String {
        let output = self
            .client()
            .args(["-N", "-B", "-e", sql])
            .output()
            .expect("running mariadb");
        assert!(
            output.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("utf-8 output")
    }

    /// Stops the server (SIGTERM) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.stop();
    }
}
