//! Running a job's command: `sh -c <command>` in a process group of its own, with the job's
//! environment, the event's JSON on stdin, every line it prints logged (with the job's span),
//! a timeout, and a bounded wait when the executor is asked to stop.
//!
//! The command runs in its own process group so that everything it starts can be stopped
//! together: on a timeout or an interrupted shutdown the group gets SIGTERM, then SIGKILL after
//! [`KILL_AFTER`]; and when the command ends, whatever it left running in its group is killed,
//! so nothing writes to the output directory while it is uploaded.

use std::{path::Path, process::Stdio, time::Duration};

use rustix::process::{kill_process_group, Pid, Signal};
use sexton_shared::Shutdown;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tracing::Instrument as _;

/// How long a command has between SIGTERM and SIGKILL.
pub const KILL_AFTER: Duration = Duration::from_secs(5);
/// Longer output lines are cut here (and marked) before they are logged.
pub const MAX_LINE_BYTES: usize = 4096;
/// The last lines of stderr kept for a failure's reason.
pub const STDERR_TAIL_LINES: usize = 10;

/// What to run.
#[derive(Debug, Clone)]
pub struct CommandSpec<'a> {
    /// Run with `/bin/sh -c`.
    pub command: &'a str,
    /// Added to the executor's own environment, from which every `SEXTON_*` variable (its
    /// credentials among them) is removed first.
    pub env: Vec<(String, String)>,
    pub stdin: Vec<u8>,
    pub cwd: &'a Path,
    pub timeout: Duration,
    /// After a shutdown request, how long the command may still run before it is stopped.
    pub grace: Duration,
}

/// How the command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself: `Some(code)`, or `None` if a signal ended it.
    Exited(Option<i32>),
    TimedOut,
    /// The executor was stopping and the command did not finish within the grace period.
    Interrupted,
    /// It could not be started.
    NotStarted(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub ending: Ending,
    /// The last lines it wrote to stderr, for a failure's reason.
    pub stderr_tail: Vec<String>,
}

impl Finished {
    pub fn succeeded(&self) -> bool {
        self.ending == Ending::Exited(Some(0))
    }

    /// Why the command failed, in one line, with the end of its stderr; `None` if it succeeded.
    pub fn failure(&self, timeout: Duration) -> Option<String> {
        let what = match &self.ending {
            Ending::Exited(Some(0)) => return None,
            Ending::Exited(Some(code)) => format!("the command exited with status {code}"),
            Ending::Exited(None) => "the command was killed by a signal".to_string(),
            Ending::TimedOut => format!(
                "the command did not finish within {}s (--timeout)",
                timeout.as_secs()
            ),
            Ending::Interrupted => "the executor stopped before the command finished".into(),
            Ending::NotStarted(why) => format!("the command could not be started: {why}"),
        };
        Some(if self.stderr_tail.is_empty() {
            what
        } else {
            format!("{what}; stderr ends: {}", self.stderr_tail.join(" | "))
        })
    }
}

/// Runs the command to its end. Never fails: every way it can end is an [`Ending`].
pub async fn run(spec: CommandSpec<'_>, shutdown: &mut Shutdown) -> Finished {
    let mut command = tokio::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(spec.command)
        .current_dir(spec.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("SEXTON_") {
            command.env_remove(key);
        }
    }
    command.envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            return Finished {
                ending: Ending::NotStarted(err.to_string()),
                stderr_tail: Vec::new(),
            }
        }
    };
    let group = child
        .id()
        .and_then(|id| Pid::from_raw(id as i32))
        .expect("a child just spawned has an id");
    if let Some(mut stdin) = child.stdin.take() {
        let body = spec.stdin.clone();
        // A command that does not read its stdin closes the pipe: that is no error.
        tokio::spawn(async move {
            let _ = stdin.write_all(&body).await;
        });
    }
    // In the job's span, so each line names its backup.
    let stdout = child
        .stdout
        .take()
        .map(|out| tokio::spawn(log_lines(out, "stdout", 0).in_current_span()));
    let stderr = child
        .stderr
        .take()
        .map(|err| tokio::spawn(log_lines(err, "stderr", STDERR_TAIL_LINES).in_current_span()));
    let ending = tokio::select! {
        status = child.wait() => Ending::Exited(status.ok().and_then(|s| s.code())),
        _ = tokio::time::sleep(spec.timeout) => {
            tracing::warn!(timeout = ?spec.timeout, "command timed out; stopping it");
            stop(&mut child, group).await;
            Ending::TimedOut
        }
        _ = shutdown.wait() => {
            tracing::info!(grace = ?spec.grace, "shutting down; the command may finish within the grace period");
            tokio::select! {
                status = child.wait() => Ending::Exited(status.ok().and_then(|s| s.code())),
                _ = tokio::time::sleep(spec.grace) => {
                    tracing::warn!("the command did not finish within the grace period; stopping it");
                    stop(&mut child, group).await;
                    Ending::Interrupted
                }
            }
        }
    };
    // Whatever the command left running would hold the output open, or write to it.
    let _ = kill_process_group(group, Signal::KILL);
    let mut stderr_tail = Vec::new();
    if let Some(task) = stdout {
        let _ = tokio::time::timeout(KILL_AFTER, task).await;
    }
    if let Some(task) = stderr {
        if let Ok(Ok(tail)) = tokio::time::timeout(KILL_AFTER, task).await {
            stderr_tail = tail;
        }
    }
    Finished {
        ending,
        stderr_tail,
    }
}

/// SIGTERM to the group, SIGKILL after [`KILL_AFTER`], and reaps the command.
async fn stop(child: &mut tokio::process::Child, group: Pid) {
    let _ = kill_process_group(group, Signal::TERM);
    if tokio::time::timeout(KILL_AFTER, child.wait())
        .await
        .is_err()
    {
        let _ = kill_process_group(group, Signal::KILL);
        let _ = child.wait().await;
    }
}

/// Logs every line of `stream` and returns its last `keep` lines.
async fn log_lines(
    mut stream: impl AsyncRead + Unpin,
    name: &'static str,
    keep: usize,
) -> Vec<String> {
    let mut splitter = LineSplitter::default();
    let mut tail = std::collections::VecDeque::new();
    let mut buffer = vec![0u8; 8192];
    loop {
        let n = match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        let lines = if n == 0 {
            splitter.finish()
        } else {
            splitter.push(&buffer[..n])
        };
        for line in lines {
            tracing::info!(stream = name, "{line}");
            if keep > 0 {
                if tail.len() == keep {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
        if n == 0 {
            return tail.into();
        }
    }
}

/// Cuts a byte stream into lines of at most [`MAX_LINE_BYTES`] (longer ones are cut and end in
/// `…`), decoded lossily, without holding more than one line.
#[derive(Debug, Default)]
pub struct LineSplitter {
    line: Vec<u8>,
    /// The current line was cut: skip the rest of it.
    cut: bool,
}

impl LineSplitter {
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        for &byte in bytes {
            if byte == b'\n' {
                if !self.cut {
                    lines.push(self.take());
                }
                self.line.clear();
                self.cut = false;
            } else if self.cut {
                continue;
            } else if self.line.len() == MAX_LINE_BYTES {
                let mut line = self.take();
                line.push('…');
                lines.push(line);
                self.cut = true;
            } else {
                self.line.push(byte);
            }
        }
        lines
    }

    /// The last line, if the stream did not end with a newline.
    pub fn finish(&mut self) -> Vec<String> {
        if self.line.is_empty() || self.cut {
            return Vec::new();
        }
        vec![self.take()]
    }

    fn take(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.line)
            .trim_end_matches('\r')
            .to_string();
        self.line.clear();
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_cut_and_finished() {
        let mut s = LineSplitter::default();
        assert_eq!(s.push(b"a\nb"), ["a"]);
        assert_eq!(s.push(b"c\r\n\n"), ["bc", ""]);
        let long = vec![b'x'; MAX_LINE_BYTES + 10];
        let lines = s.push(&long);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].ends_with('…'));
        assert_eq!(s.push(b"yyy\nz"), Vec::<String>::new());
        assert_eq!(s.finish(), ["z"]);
        assert_eq!(s.finish(), Vec::<String>::new());
        assert_eq!(s.push(&[0xff, b'\n']), ["\u{fffd}"]);
    }

    fn spec<'a>(command: &'a str, dir: &'a Path, timeout: Duration) -> CommandSpec<'a> {
        CommandSpec {
            command,
            env: vec![("SEXTON_BACKUP_ID".into(), "b1".into())],
            stdin: b"{\"event\": 1}".to_vec(),
            cwd: dir,
            timeout,
            grace: Duration::from_secs(1),
        }
    }

    #[tokio::test]
    async fn a_command_sees_its_environment_and_stdin_and_its_status_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (_trigger, mut shutdown) = Shutdown::new();
        let script = "test \"$SEXTON_BACKUP_ID\" = b1 && test -z \"$SEXTON_S3_SECRET_ACCESS_KEY\" \
                      && cat > stdin.json && echo to stderr >&2 && exit 3";
        let finished = run(
            spec(script, dir.path(), Duration::from_secs(20)),
            &mut shutdown,
        )
        .await;
        assert_eq!(finished.ending, Ending::Exited(Some(3)));
        assert_eq!(finished.stderr_tail, ["to stderr"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("stdin.json")).unwrap(),
            "{\"event\": 1}"
        );
        let reason = finished.failure(Duration::from_secs(20)).unwrap();
        assert!(
            reason.contains("status 3") && reason.contains("to stderr"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn a_command_past_its_timeout_is_stopped_with_everything_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let (_trigger, mut shutdown) = Shutdown::new();
        let started = std::time::Instant::now();
        // The background sleep would outlive the shell without the group kill.
        let script = "sleep 30 & echo $! > child.pid; sleep 30";
        let finished = run(
            spec(script, dir.path(), Duration::from_millis(500)),
            &mut shutdown,
        )
        .await;
        assert_eq!(finished.ending, Ending::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(10));
        let pid = std::fs::read_to_string(dir.path().join("child.pid")).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !Path::new(&format!("/proc/{}", pid.trim())).exists()
                || std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                    .unwrap_or_default()
                    .contains(") Z "),
            "the command's background child survived"
        );
        assert!(finished
            .failure(Duration::from_millis(500))
            .unwrap()
            .contains("did not finish"));
    }

    #[tokio::test]
    async fn a_shutdown_waits_for_the_grace_period_then_stops_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let (trigger, mut shutdown) = Shutdown::new();
        trigger.trigger();
        let finished = run(
            spec("sleep 0.2; exit 0", dir.path(), Duration::from_secs(20)),
            &mut shutdown,
        )
        .await;
        assert!(finished.succeeded(), "{finished:?}");
        let finished = run(
            spec("sleep 30", dir.path(), Duration::from_secs(20)),
            &mut shutdown,
        )
        .await;
        assert_eq!(finished.ending, Ending::Interrupted);
    }

    #[tokio::test]
    async fn a_command_that_cannot_start_says_why() {
        let (_trigger, mut shutdown) = Shutdown::new();
        let finished = run(
            spec(
                "true",
                Path::new("/nonexistent/dir"),
                Duration::from_secs(5),
            ),
            &mut shutdown,
        )
        .await;
        assert!(
            matches!(finished.ending, Ending::NotStarted(_)),
            "{finished:?}"
        );
    }
}
