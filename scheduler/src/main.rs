//! `sexton-scheduler`: see [`sexton_scheduler::run`].

fn main() -> anyhow::Result<()> {
    sexton_shared::service::main("sexton-scheduler", sexton_scheduler::run)
}
