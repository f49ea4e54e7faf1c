//! `sexton-deleter`: see [`sexton_deleter::run`].

fn main() -> anyhow::Result<()> {
    sexton_shared::service::main("sexton-deleter", sexton_deleter::run)
}
