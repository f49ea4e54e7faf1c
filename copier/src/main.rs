//! `sexton-copier`: see [`sexton_copier::run`].

fn main() -> anyhow::Result<()> {
    sexton_shared::service::main("sexton-copier", sexton_copier::run)
}
