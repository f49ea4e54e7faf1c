//! `binlog`: `append` (files shipped to the object store) and `fetch` (segments fetched from it)
//! run here; the rest are online requests.

use sexton_shared::config::Config;

use crate::cli::args::*;
use crate::cli::print::print_shipped;
use crate::cli::{fetch, online};
use crate::failure::Failure;

/// Runs a `binlog` command.
pub(in crate::cli) async fn run(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
) -> Result<(), Failure> {
    match command {
        Command::Binlog(BinlogCommand::Append {
            cluster,
            format,
            allow_in_use,
            files,
        }) => {
            binlog_append(
                output,
                load_config,
                cluster,
                (*format).into(),
                *allow_in_use,
                files,
            )
            .await
        }
        Command::Binlog(BinlogCommand::Fetch {
            cluster,
            location,
            since,
            until,
            to,
        }) => {
            fetch::binlog_fetch(
                output,
                load_config,
                cluster,
                location.as_deref(),
                (since.as_deref(), until.as_deref()),
                to,
            )
            .await
        }
        command => online::run(output, load_config, command).await,
    }
}

/// `binlog append`: ships binlog files and appends them to the cluster's index.
async fn binlog_append(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    cluster: &str,
    format: sexton_executor::binlog_append::SegmentFormat,
    allow_in_use: bool,
    files: &[std::path::PathBuf],
) -> Result<(), Failure> {
    let cluster = sexton_model::names::ClusterName::new(cluster)
        .map_err(|err| Failure::input(format!("--cluster: {err}")))?;
    for file in files {
        if !file.is_file() {
            return Err(Failure::input(format!(
                "{}: not a regular file",
                file.display()
            )));
        }
    }
    let config = load_config()?;
    let store = sexton_shared::object_store::ObjectStore::connect(&config.s3)
        .await
        .map_err(Failure::runtime)?;
    let mut shipped = Vec::new();
    for file in files {
        let outcome = sexton_executor::binlog_append::append(
            &store,
            &config.s3.prefix,
            &cluster,
            file,
            format,
            allow_in_use,
            Default::default(),
        )
        .await;
        match outcome {
            Ok(done) => shipped.push(done),
            // A file that is not what it claims is the caller's to fix (exit 2); the
            // files before it are shipped and stay so.
            Err(err)
                if err
                    .downcast_ref::<sexton_executor::binlog_file::BinlogFileError>()
                    .is_some() =>
            {
                print_shipped(output, &shipped);
                return Err(Failure::input(format!("{err:#}")));
            }
            Err(err) => {
                print_shipped(output, &shipped);
                return Err(Failure::runtime(err));
            }
        }
    }
    print_shipped(output, &shipped);
    Ok(())
}
