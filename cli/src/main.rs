//! `sexton`: see [`sexton_cli::cli`].

#[tokio::main]
async fn main() -> std::process::ExitCode {
    sexton_cli::output::exit_quietly_on_closed_pipe();
    // Commands log only when asked to (RUST_LOG), on stderr, in SEXTON_LOG_FORMAT; the
    // services (`serve`, `executor`, `exec`) set logging up themselves otherwise.
    if std::env::var_os("RUST_LOG").is_some() {
        sexton_shared::telemetry::init_logging(sexton_shared::telemetry::log_format_from_env());
    }
    sexton_cli::cli::main(std::env::args_os()).await
}
