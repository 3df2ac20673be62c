//! The one cancellation mechanism of a process: every server, loop and child task holds a
//! [`Shutdown`] (or a child of it) and stops when it is triggered.

use std::future::Future;

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// A shutdown that is triggered with this one but can also be triggered alone, to stop
    /// one part without stopping the process.
    pub fn child(&self) -> Self {
        Self {
            token: self.token.child_token(),
        }
    }

    pub fn trigger(&self) {
        self.token.cancel();
    }

    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Completes once triggered; owns what it needs, so it can be handed to a server.
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + 'static {
        self.token.clone().cancelled_owned()
    }

    /// Triggers on SIGINT or SIGTERM. The handlers are in place when this returns (so a signal
    /// that arrives next is not lost); must be called inside a Tokio runtime.
    pub fn on_signals(&self) -> std::io::Result<()> {
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let shutdown = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = interrupt.recv() => tracing::info!("interrupted; shutting down"),
                _ = terminate.recv() => tracing::info!("terminated; shutting down"),
                () = shutdown.cancelled() => return,
            }
            shutdown.trigger();
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn triggering_the_parent_reaches_children_but_not_the_reverse() {
        let parent = Shutdown::new();
        let child = parent.child();
        let grandchild = child.child();

        child.trigger();
        assert!(child.is_triggered() && grandchild.is_triggered());
        assert!(!parent.is_triggered());

        let sibling = parent.child();
        let waiting = tokio::spawn(sibling.cancelled());
        parent.trigger();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("cancelled() completes after trigger")
            .unwrap();
    }
}
