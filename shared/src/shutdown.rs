//! A cloneable shutdown signal: every service loop selects on it, `main` trips it on SIGTERM
//! or Ctrl-C, and tests trip it to stop an in-process service.

use tokio::sync::watch;

#[derive(Clone, Debug)]
pub struct Shutdown {
    receiver: watch::Receiver<bool>,
}

/// The side that trips the signal. Dropping it also counts as a shutdown.
#[derive(Debug)]
pub struct ShutdownTrigger {
    sender: watch::Sender<bool>,
}

impl Shutdown {
    pub fn new() -> (ShutdownTrigger, Shutdown) {
        let (sender, receiver) = watch::channel(false);
        (ShutdownTrigger { sender }, Shutdown { receiver })
    }

    pub fn is_triggered(&self) -> bool {
        *self.receiver.borrow()
    }

    /// Resolves once shutdown has been requested.
    pub async fn wait(&mut self) {
        // An error means the trigger was dropped, which is a shutdown too.
        let _ = self.receiver.wait_for(|stop| *stop).await;
    }
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        let _ = self.sender.send(true);
    }
}

/// Returns a shutdown signal tripped by SIGTERM or SIGINT, for a binary's `main`.
pub fn on_signals() -> Shutdown {
    let (trigger, shutdown) = Shutdown::new();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(term) => term,
                    Err(_) => {
                        let _ = ctrl_c.await;
                        trigger.trigger();
                        return;
                    }
                };
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutdown requested");
        trigger.trigger();
    });
    shutdown
}
