//! `sexton-retention-worker`: see [`sexton_retention_worker::run`].

fn main() -> anyhow::Result<()> {
    sexton_shared::service::main("sexton-retention-worker", sexton_retention_worker::run)
}
