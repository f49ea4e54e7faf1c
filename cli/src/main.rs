//! `sexton`: see [`sexton_cli::cli`].

#[tokio::main]
async fn main() -> std::process::ExitCode {
    if std::env::var_os("RUST_LOG").is_some() {
        sexton_shared::telemetry::init_logging(sexton_shared::config::LogFormat::Text);
    }
    sexton_cli::cli::main(std::env::args_os()).await
}
