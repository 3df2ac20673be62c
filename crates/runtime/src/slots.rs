//! The connection slots of one listening port: a connection holds one until it closes, and the
//! next is accepted only once a slot is free (until then it waits, unread, in the backlog).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Debug)]
pub(crate) struct Slots {
    free: Arc<Semaphore>,
    max: usize,
    /// Logged once per spell of being full, so a flood doesn't flood the log.
    full: bool,
}

impl Slots {
    pub(crate) fn new(max: usize) -> Slots {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Slots {
            free: Arc::new(Semaphore::new(max)),
            max,
            full: false,
        }
    }

    /// A free slot, once there is one.
    pub(crate) async fn next(&mut self) -> OwnedSemaphorePermit {
        if let Ok(slot) = Arc::clone(&self.free).try_acquire_owned() {
            self.full = false;
            return slot;
        }
        if !self.full {
            tracing::warn!(
                max = self.max,
                "the port holds as many connections as it may; the next waits for one to close"
            );
            self.full = true;
        }
        match Arc::clone(&self.free).acquire_owned().await {
            Ok(slot) => slot,
            // The semaphore is never closed.
            Err(_) => std::future::pending().await,
        }
    }

    /// Once every slot is back: every connection has closed.
    pub(crate) async fn all_back(&self) {
        let all = u32::try_from(self.max).unwrap_or(u32::MAX);
        let _ = self.free.acquire_many(all).await;
    }
}
