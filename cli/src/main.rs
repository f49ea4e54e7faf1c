//! `sexton`: see [`sexton_cli::cli`].

#[tokio::main]
async fn main() -> std::process::ExitCode {
    sexton_cli::output::exit_quietly_on_closed_pipe();
    // Commands log only when asked to (RUST_LOG), on stderr, in SEXTON_LOG_FORMAT. The
    // services (`serve`, `executor`, `exec`) always log, and set logging up themselves once
    // their configuration (log.format, or SEXTON_LOG_FORMAT over it) is read.
    let runs_a_service = std::env::args()
        .skip(1)
        .any(|arg| matches!(arg.as_str(), "serve" | "executor" | "exec"));
    if std::env::var_os("RUST_LOG").is_some() && !runs_a_service {
        sexton_shared::telemetry::init_logging(sexton_shared::telemetry::log_format_from_env());
    }
    sexton_cli::cli::main(std::env::args_os()).await
}
