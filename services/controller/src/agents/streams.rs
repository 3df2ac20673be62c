//! One live Sync stream per machine identity. A stream claims its machine as it opens; a newer
//! claim replaces the older one, whose session is told to end (its agent sees the stream close
//! and reconnects), and the replacement is logged with both peers' addresses. A machine's
//! certificate is its identity, so two live streams for one machine mean a reconnect racing a
//! half-dead connection, or a copied identity: either way the newest one speaks for it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use einsora_core::ids::MachineId;
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct Streams {
    live: Mutex<HashMap<MachineId, Live>>,
    next: AtomicU64,
}

#[derive(Debug)]
struct Live {
    claim: u64,
    peer: Option<SocketAddr>,
    replaced: Arc<Notify>,
}

/// A stream's hold on its machine; dropped when the stream ends.
#[derive(Debug)]
pub struct Claim {
    streams: Arc<Streams>,
    machine: MachineId,
    id: u64,
    replaced: Arc<Notify>,
}

impl Streams {
    fn live(&self) -> MutexGuard<'_, HashMap<MachineId, Live>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the stream from `peer` the machine's live one, ending the one it replaces.
    pub fn claim(self: &Arc<Self>, machine: MachineId, peer: Option<SocketAddr>) -> Claim {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let replaced = Arc::new(Notify::new());
        let new = Live {
            claim: id,
            peer,
            replaced: Arc::clone(&replaced),
        };
        if let Some(older) = self.live().insert(machine, new) {
            // Stored as a permit: the older session ends even if it isn't waiting right now.
            older.replaced.notify_one();
            tracing::warn!(
                %machine, older = ?older.peer, newer = ?peer,
                "a second stream with this machine's identity; it replaces the older one, which is closed"
            );
        }
        Claim {
            streams: Arc::clone(self),
            machine,
            id,
            replaced,
        }
    }

    /// How many machines have a live stream.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.live().len()
    }
}

impl Claim {
    /// Completes once a newer stream of the same machine replaced this one.
    pub async fn replaced(&self) {
        self.replaced.notified().await;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut live = self.streams.live();
        // Only its own entry: a replaced stream ending must not unclaim its successor.
        if live.get(&self.machine).is_some_and(|l| l.claim == self.id) {
            live.remove(&self.machine);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const PATIENCE: Duration = Duration::from_secs(5);
    const A_WHILE: Duration = Duration::from_millis(100);

    #[tokio::test]
    async fn a_newer_stream_replaces_the_older_which_alone_is_told_to_end() {
        let streams = Arc::new(Streams::default());
        let (machine, other) = (MachineId::new(), MachineId::new());
        let older = streams.claim(machine, None);
        let neighbour = streams.claim(other, None);
        let newer = streams.claim(machine, None);
        tokio::time::timeout(PATIENCE, older.replaced())
            .await
            .expect("the older stream is told to end");
        for (name, claim) in [("the newer", &newer), ("another machine's", &neighbour)] {
            let told = tokio::time::timeout(A_WHILE, claim.replaced()).await;
            assert!(told.is_err(), "{name} stream is left alone");
        }

        drop(older);
        assert_eq!(
            streams.len(),
            2,
            "the older ending doesn't unclaim the newer"
        );
        let newest = streams.claim(machine, None);
        tokio::time::timeout(PATIENCE, newer.replaced())
            .await
            .expect("the newest replaces the newer in turn");
        drop((newer, newest, neighbour));
        assert_eq!(streams.len(), 0, "every ended stream let go");
    }
}
