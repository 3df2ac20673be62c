//! Kept-alive connections to workloads on other machines. A relayed connection costs a tunnel
//! (a stream to the controller, its pairing with the stream the machine's agent opens, the
//! agent's dial of the socket): about a millisecond before the first byte, where a local socket
//! costs microseconds. So a relayed connection whose answer was read in full comes back here,
//! and the next request to the same workload and run takes it, as a reverse proxy's upstream
//! keepalive does; a local one is dialled for every request as before. WebSockets are never
//! kept. Bounded: at most `IDLE_PER_RUN` idle per run (each holds one of its machine's
//! tunnels), each dropped after `IDLE_FOR` unused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use hyper::client::conn::http1::SendRequest;
use uuid::Uuid;

/// Idle connections kept for one run of a workload.
const IDLE_PER_RUN: usize = 8;
/// How long an idle connection is kept: short, so the proxy rarely takes one its server is
/// closing; one it takes and can't send on is replaced by a fresh one (`forward::dial`).
const IDLE_FOR: Duration = Duration::from_secs(4);

/// A workload's run: a restarted workload's connections are never reused.
pub(crate) type Run = (Uuid, u32);

#[derive(Debug, Default)]
pub(crate) struct RelayPool {
    idle: Mutex<HashMap<Run, Vec<Idle>>>,
}

#[derive(Debug)]
struct Idle {
    sender: SendRequest<Body>,
    since: Instant,
}

impl RelayPool {
    /// The most recently idle connection of `run` that can take a request now.
    pub(crate) fn take(&self, run: Run) -> Option<SendRequest<Body>> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = idle.get_mut(&run)?;
        kept.retain(|i| i.since.elapsed() < IDLE_FOR && !i.sender.is_closed());
        let taken = kept.pop().map(|i| i.sender);
        if kept.is_empty() {
            idle.remove(&run);
        }
        taken
    }

    /// Keeps `sender` for `run` once its answer has been read in full (hyper says it is ready
    /// again); a connection the answer's reader dropped halfway is closed, and not kept.
    pub(crate) fn give_back(self: &Arc<Self>, run: Run, mut sender: SendRequest<Body>) {
        let pool = Arc::clone(self);
        tokio::spawn(async move {
            if sender.ready().await.is_err() {
                return;
            }
            let mut idle = pool.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let kept = idle.entry(run).or_default();
            kept.retain(|i| i.since.elapsed() < IDLE_FOR && !i.sender.is_closed());
            if kept.len() < IDLE_PER_RUN {
                kept.push(Idle {
                    sender,
                    since: Instant::now(),
                });
            }
        });
    }

    /// Drops what has been idle too long (the proxy's sweep).
    pub(crate) fn sweep(&self) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|_, kept| {
            kept.retain(|i| i.since.elapsed() < IDLE_FOR && !i.sender.is_closed());
            !kept.is_empty()
        });
    }
}
