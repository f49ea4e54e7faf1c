//! The arguments of `sexton binlog ...`: shipping binlog files to the archive, fetching them
//! back, and the archive's status.

use clap::{Subcommand, ValueEnum};

use super::*;

#[derive(Subcommand, Debug)]
pub enum BinlogCommand {
    /// Ship closed log files into the cluster's archive: each is uploaded, then appended to
    /// <prefix>/<cluster>/binlog/_index.json with a conditional write. Files already indexed
    /// (or older than the archive's oldest segment) are skipped, so shipping is idempotent.
    #[command(after_help = "Examples:
  sexton binlog append --cluster db1 /var/lib/mysql/mysql-bin.000041 /var/lib/mysql/mysql-bin.000042
  sexton binlog append --cluster db1 --format file wal/0000000100000000000000A1")]
    Append {
        /// The cluster whose archive takes the files.
        #[arg(long)]
        cluster: String,
        /// How event times are found: binlog (MySQL/MariaDB headers) or file (modification time).
        #[arg(long, value_enum, default_value_t = SegmentFormat::Binlog)]
        format: SegmentFormat,
        /// Ship a binlog still flagged as open (one a crashed server left so).
        #[arg(long)]
        allow_in_use: bool,
        /// The files, oldest first.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Download the archive's segments for a point-in-time recovery, each checked against the
    /// size and SHA-256 its index entry records; a segment written over or "deleted" since is
    /// read from the version that is the recorded one. Files are named as in the archive.
    #[command(after_help = "Examples:
  sexton binlog fetch --cluster db1 --to /restore/binlog
  sexton binlog fetch --cluster db1 --since 2026-11-23T03:00:00Z --until 2026-11-23T09:30:00Z --to /restore/binlog
  sexton binlog fetch --cluster db1 --location dr --to /restore/binlog")]
    Fetch {
        /// The cluster whose archive is read.
        #[arg(long)]
        cluster: String,
        /// Read the archive's copy at this location instead of the primary's.
        #[arg(long)]
        location: Option<String>,
        /// Only segments that may hold events at or after this instant (RFC 3339), such as
        /// the start of the backup restored.
        #[arg(long)]
        since: Option<String>,
        /// Only segments that may hold events at or before this instant (RFC 3339): the
        /// point to recover to.
        #[arg(long)]
        until: Option<String>,
        /// The directory to write into (created if missing).
        #[arg(long)]
        to: PathBuf,
    },
    /// The binlog index of a cluster: its state and ETag, the PITR horizon retention gives
    /// now, and how many segments it lists, would delete, and keep for want of an end time.
    #[command(after_help = "Examples:
  sexton binlog status --cluster db1
  sexton binlog status --cluster db1 -o yaml")]
    Status {
        /// The cluster whose archive is described.
        #[arg(long)]
        cluster: String,
    },
}

/// How a file's event times are found: `--format`'s values, turned into the executor crate's
/// [`sexton_executor::binlog_append::SegmentFormat`] (which knows nothing of clap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SegmentFormat {
    /// A MySQL/MariaDB binlog: times from its event headers.
    Binlog,
    /// Any other closed log file (a WAL segment): it ends at its modification time and starts
    /// where the newest indexed segment ends.
    File,
}

impl From<SegmentFormat> for sexton_executor::binlog_append::SegmentFormat {
    fn from(format: SegmentFormat) -> Self {
        match format {
            SegmentFormat::Binlog => Self::Binlog,
            SegmentFormat::File => Self::File,
        }
    }
}
