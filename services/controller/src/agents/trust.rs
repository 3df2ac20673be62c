//! One revocation sweep for every stream on this controller (Sync and the relay's listening
//! streams): each registers the machine and the certificate it presented, and every recheck
//! one store query asks which of them are still good (`AgentStore::trusted_certificates`); only
//! the streams of a certificate or machine revoked since are woken, to end. A sweep that can't
//! read the store ends nothing: the next one asks again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use einsora_runtime::shutdown::Shutdown;
use einsora_store::Store;
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct Trust {
    watched: Mutex<HashMap<u64, Watched>>,
    next: AtomicU64,
}

#[derive(Debug)]
struct Watched {
    fingerprint: [u8; 32],
    revoked: Arc<Notify>,
}

/// A stream's registration; dropped when the stream ends.
#[derive(Debug)]
pub struct Watch {
    trust: Arc<Trust>,
    id: u64,
    revoked: Arc<Notify>,
}

impl Trust {
    fn watched(&self) -> MutexGuard<'_, HashMap<u64, Watched>> {
        self.watched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Watches the certificate `fingerprint` a stream presented.
    pub fn watch(self: &Arc<Self>, fingerprint: [u8; 32]) -> Watch {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let revoked = Arc::new(Notify::new());
        let watched = Watched {
            fingerprint,
            revoked: Arc::clone(&revoked),
        };
        self.watched().insert(id, watched);
        Watch {
            trust: Arc::clone(self),
            id,
            revoked,
        }
    }

    /// Asks the store once about every watched certificate; wakes the streams of those no
    /// longer good. How many were woken.
    pub async fn sweep(&self, store: &dyn Store) -> Result<usize, einsora_store::StoreError> {
        let mut asked: Vec<[u8; 32]> = self.watched().values().map(|w| w.fingerprint).collect();
        if asked.is_empty() {
            return Ok(0);
        }
        asked.sort_unstable();
        asked.dedup();
        let trusted = store.trusted_certificates(&asked).await?;
        let watched = self.watched();
        let mut woken = 0;
        // Only what was asked about: a stream that registered (or renewed) since waits its turn.
        for w in watched.values() {
            if asked.binary_search(&w.fingerprint).is_ok() && !trusted.contains(&w.fingerprint) {
                w.revoked.notify_one();
                woken += 1;
            }
        }
        Ok(woken)
    }

    /// Sweeps every `every` until `shutdown`.
    pub fn spawn(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        every: Duration,
        shutdown: Shutdown,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut failing = false;
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                match self.sweep(&*store).await {
                    Ok(woken) => {
                        failing = false;
                        if woken > 0 {
                            tracing::info!(
                                streams = woken,
                                "machines or certificates revoked; closing their streams"
                            );
                        }
                    }
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "couldn't check the machines' certificates; trying again");
                    }
                    Err(_) => {}
                }
            }
        })
    }
}

impl Watch {
    /// Completes once a sweep found the certificate (or its machine) revoked.
    pub async fn revoked(&self) {
        self.revoked.notified().await;
    }

    /// The stream presents `fingerprint` from now on (a renewal put to use).
    pub fn renewed(&self, fingerprint: [u8; 32]) {
        if let Some(w) = self.trust.watched().get_mut(&self.id) {
            w.fingerprint = fingerprint;
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.trust.watched().remove(&self.id);
    }
}
