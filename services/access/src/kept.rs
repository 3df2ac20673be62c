//! Connections to workloads kept alive between requests, on this host and relayed alike, as a
//! reverse proxy's upstream keepalive. A new connection costs: a local socket is pinned and
//! checked before it is dialled (`workload_socket`, several system calls), a relayed one is a
//! tunnel (a stream to the controller paired with one its machine's agent opens: about a
//! millisecond before the first byte); either then needs an HTTP handshake and a task of its
//! own. So a connection whose answer was read in full comes back here, and the next request to
//! the same run of the same workload takes it. A kept connection is the one that was checked
//! when it was dialled, to the same listener; every request on it carries the workload's token
//! as on a fresh one, and was checked against its session or API token first.
//!
//! Keyed by the workload's run (its ID and attempt), so a restarted workload's connections are
//! never reused. WebSockets are never kept, nor a connection whose answer (or request) was
//! dropped halfway: hyper closes it. Bounded: at most [`IDLE_LOCAL`] idle per run
//! ([`IDLE_RELAYED`] relayed, each holding one of its machine's tunnels), each dropped after
//! [`IDLE_FOR`] unused. The workload may close a kept connection whenever it likes: one found
//! closed is skipped, one that closes before the request was written to it is replaced by a
//! fresh dial, and one that closes under an idempotent request without a body has it sent again
//! on a fresh one (`forward::dial`); any other request it closes under is answered 503. A workload whose socket was tampered with is killed by its
//! agent before it is reported failed, so no kept connection reaches a failed workload's server.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use hyper::body::{Body as _, Bytes, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use uuid::Uuid;

use crate::upstream::Route;

/// Idle connections kept for one run of a workload on this host: as many as the requests a
/// busy notebook or endpoint has in flight at once, so a burst's connections serve the next.
const IDLE_LOCAL: usize = 256;
/// Idle connections kept for one run of a relayed workload: each holds one of its machine's
/// tunnels (64 at most).
const IDLE_RELAYED: usize = 8;
/// How long an idle connection is kept: shorter than servers' own keep-alive (5 s for
/// llama.cpp's and uvicorn's), so the proxy rarely takes one its server is closing.
const IDLE_FOR: Duration = Duration::from_secs(4);

/// A workload's run: its ID and attempt.
pub(crate) type Run = (Uuid, u32);

#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// Each run's idle connections, the most recently idle last.
    idle: Mutex<HashMap<Run, VecDeque<Idle>>>,
}

#[derive(Debug)]
struct Idle {
    sender: SendRequest<Body>,
    since: Instant,
}

impl Idle {
    fn stale(&self) -> bool {
        self.since.elapsed() >= IDLE_FOR
    }
}

impl Kept {
    /// The most recently idle connection of `run` still open.
    pub(crate) fn take(&self, run: Run) -> Option<SendRequest<Body>> {
        let mut idle = self.lock();
        let kept = idle.get_mut(&run)?;
        let mut taken = None;
        while let Some(i) = kept.pop_back() {
            if i.stale() {
                // The ones before it are older still.
                kept.clear();
            } else if !i.sender.is_closed() {
                taken = Some(i.sender);
                break;
            }
        }
        if kept.is_empty() {
            idle.remove(&run);
        }
        taken
    }

    /// The answer `body` that came on `sender`, to `run` by `route`: the connection is kept once
    /// the body has been read to its end.
    pub(crate) fn answer(
        self: &Arc<Self>,
        run: Run,
        route: &Route,
        sender: SendRequest<Body>,
        body: Incoming,
    ) -> Answer {
        let bound = match route {
            Route::Socket(_) => IDLE_LOCAL,
            Route::Relayed { .. } => IDLE_RELAYED,
        };
        let back = Back {
            kept: Arc::clone(self),
            run,
            bound,
            sender,
        };
        Answer {
            body,
            ended: false,
            back: Some(back),
        }
    }

    /// Keeps `sender` among `run`'s idle connections, within `bound`.
    fn keep(&self, run: Run, bound: usize, sender: SendRequest<Body>) {
        let mut idle = self.lock();
        let run_idle = idle.entry(run).or_default();
        while run_idle.front().is_some_and(Idle::stale) {
            run_idle.pop_front();
        }
        if run_idle.len() < bound {
            run_idle.push_back(Idle {
                sender,
                since: Instant::now(),
            });
        }
    }

    /// Drops what has been idle too long, or was closed by its workload (the proxy's sweep).
    pub(crate) fn sweep(&self) {
        self.lock().retain(|_, kept| {
            kept.retain(|i| !i.stale() && !i.sender.is_closed());
            !kept.is_empty()
        });
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Run, VecDeque<Idle>>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A workload's answer body; dropped once read to its end, it gives its connection back to be
/// kept, and dropped sooner it closes the connection with it (hyper closes one whose answer
/// was not read). A WebSocket's handshake answer keeps nothing.
#[derive(Debug)]
pub(crate) struct Answer {
    body: Incoming,
    /// The body has said it ended (a chunked one says so only by ending).
    ended: bool,
    back: Option<Back>,
}

#[derive(Debug)]
struct Back {
    kept: Arc<Kept>,
    run: Run,
    bound: usize,
    sender: SendRequest<Body>,
}

impl Answer {
    /// A body whose connection is never kept.
    pub(crate) fn unkept(body: Incoming) -> Self {
        Answer {
            body,
            ended: false,
            back: None,
        }
    }
}

impl hyper::body::Body for Answer {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        let ended = self.ended || self.body.is_end_stream();
        let Some(Back {
            kept,
            run,
            bound,
            mut sender,
        }) = self.back.take().filter(|_| ended)
        else {
            return;
        };
        // Usually the connection has read the answer's end before its reader did; otherwise
        // (the last of the request still being sent, or the answer's end not yet seen) it is
        // kept once done with the exchange, unless it closes.
        if sender.is_ready() {
            kept.keep(run, bound, sender);
        } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if sender.ready().await.is_ok() {
                    kept.keep(run, bound, sender);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use hyper_util::rt::TokioIo;

    use super::*;

    /// A connection whose other end is `server`'s: open while it is held.
    async fn connection() -> (SendRequest<Body>, tokio::io::DuplexStream) {
        let (ours, server) = tokio::io::duplex(1024);
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(ours))
            .await
            .unwrap();
        tokio::spawn(connection);
        (sender, server)
    }

    #[tokio::test]
    async fn idle_connections_are_bounded_per_run_and_closed_ones_are_dropped() {
        let kept = Kept::default();
        let (run, other) = ((Uuid::now_v7(), 1), (Uuid::now_v7(), 1));
        let mut servers = Vec::new();
        for _ in 0..IDLE_RELAYED + 2 {
            let (sender, server) = connection().await;
            kept.keep(run, IDLE_RELAYED, sender);
            servers.push(server);
        }
        let (sender, server) = connection().await;
        kept.keep(other, IDLE_RELAYED, sender);
        assert_eq!(kept.lock()[&run].len(), IDLE_RELAYED);
        assert!(
            kept.take((run.0, 2)).is_none(),
            "another attempt's are not its"
        );

        // Its workload closes them all: none is handed out, and the sweep lets them go.
        drop(servers);
        tokio::task::yield_now().await;
        kept.sweep();
        assert!(kept.take(run).is_none());
        assert!(!kept.lock().contains_key(&run));
        assert!(kept.take(other).is_some(), "the other run's is untouched");
        drop(server);
    }
}
