//! The arguments of `sexton exec`, the executor run by hand.

use clap::Args;

use super::*;

/// `sexton exec`: every flag may also be given as its SEXTON_EXEC_* environment variable.
#[derive(Args, Debug)]
pub struct ExecArgs {
    /// The command that takes a backup, run with `sh -c` (see docs/executors.md for its
    /// environment, its output directory and its facts file).
    #[arg(long, env = "SEXTON_EXEC_BACKUP_COMMAND")]
    pub backup_command: String,
    /// The command that merges a chain into its oldest kept backup (chain_mode: merge);
    /// without it, merge jobs are left to another executor.
    #[arg(long, env = "SEXTON_EXEC_MERGE_COMMAND")]
    pub merge_command: Option<String>,
    /// The command that restores a chain and checks it (a restore test); its exit status is
    /// the verdict. Without it, restore tests are left to another executor.
    #[arg(long, env = "SEXTON_EXEC_VERIFY_COMMAND")]
    pub verify_command: Option<String>,
    /// Take only this cluster's backups (default: every cluster's).
    #[arg(long, env = "SEXTON_EXEC_CLUSTER")]
    pub cluster: Option<String>,
    /// The durable consumer of due backups (default sexton-exec[-<cluster>]).
    #[arg(long, env = "SEXTON_EXEC_DURABLE")]
    pub durable: Option<String>,
    /// The durable consumer of merge jobs (default <durable>-merge).
    #[arg(long, env = "SEXTON_EXEC_MERGE_DURABLE")]
    pub merge_durable: Option<String>,
    /// The durable consumer of restore tests (default <durable>-verify).
    #[arg(long, env = "SEXTON_EXEC_VERIFY_DURABLE")]
    pub verify_durable: Option<String>,
    /// Where job directories are made (default $TMPDIR/sexton-exec).
    #[arg(long, env = "SEXTON_EXEC_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// A command still running after this is stopped and the backup reported failed.
    #[arg(long, env = "SEXTON_EXEC_TIMEOUT", default_value = "6h", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Jobs (backups and merges) at once.
    #[arg(long, env = "SEXTON_EXEC_CONCURRENCY", default_value_t = 1)]
    pub concurrency: usize,
    /// The most bytes one backup's output may hold (1TiB, 500GiB, 10MiB, a number of bytes).
    #[arg(long, env = "SEXTON_EXEC_MAX_OUTPUT_BYTES", default_value = "1TiB", value_parser = parse_size)]
    pub max_output_bytes: u64,
    /// The most files one backup's output may hold.
    #[arg(long, env = "SEXTON_EXEC_MAX_OUTPUT_FILES", default_value_t = 10_000)]
    pub max_output_files: usize,
    /// Multipart upload part size (5MiB to 5GiB).
    #[arg(long, env = "SEXTON_EXEC_PART_SIZE", default_value = "8MiB", value_parser = parse_size)]
    pub part_size: u64,
    /// Parts of one file in memory (being read or sent) at once.
    #[arg(long, env = "SEXTON_EXEC_UPLOAD_CONCURRENCY", default_value_t = 4)]
    pub upload_concurrency: usize,
    /// On SIGTERM, how long running commands may still take before they are stopped and
    /// their jobs handed back.
    #[arg(long, env = "SEXTON_EXEC_SHUTDOWN_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// The consumers' ack wait; a running job sends progress every third of it.
    #[arg(long, env = "SEXTON_EXEC_ACK_WAIT", default_value = "60s", value_parser = parse_duration)]
    pub ack_wait: Duration,
    /// A new durable starts with the due backups of this last while (not the stream's week).
    #[arg(long, env = "SEXTON_EXEC_CATCH_UP", default_value = "1h", value_parser = parse_duration)]
    pub catch_up: Duration,
}

impl ExecArgs {
    pub(in crate::cli) fn options(&self) -> Result<sexton_executor::exec::ExecOptions, Failure> {
        let cluster = self
            .cluster
            .as_deref()
            .map(sexton_model::names::ClusterName::new)
            .transpose()
            .map_err(|err| Failure::input(format!("--cluster: {err}")))?;
        let (durable, merge_durable, verify_durable) =
            sexton_executor::exec::ExecOptions::default_durables(cluster.as_ref());
        let durable_given = self.durable.clone();
        let options = sexton_executor::exec::ExecOptions {
            backup_command: self.backup_command.clone(),
            merge_command: self.merge_command.clone(),
            verify_command: self.verify_command.clone(),
            verify_durable: self
                .verify_durable
                .clone()
                .unwrap_or_else(|| match &durable_given {
                    Some(durable) => format!("{durable}-verify"),
                    None => verify_durable,
                }),
            merge_durable: self
                .merge_durable
                .clone()
                .unwrap_or_else(|| match &durable_given {
                    Some(durable) => format!("{durable}-merge"),
                    None => merge_durable,
                }),
            durable: durable_given.unwrap_or(durable),
            cluster,
            work_dir: self
                .work_dir
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("sexton-exec")),
            timeout: self.timeout,
            concurrency: self.concurrency,
            limits: sexton_executor::exec::output::Limits {
                max_files: self.max_output_files,
                max_bytes: self.max_output_bytes,
            },
            upload: sexton_shared::object_store::transfer::UploadSettings {
                part_size: self.part_size,
                concurrency: self.upload_concurrency,
            },
            shutdown_grace: self.shutdown_grace,
            ack_wait: self.ack_wait,
            catch_up: self.catch_up,
        };
        options.validate().map_err(Failure::input)?;
        Ok(options)
    }
}
