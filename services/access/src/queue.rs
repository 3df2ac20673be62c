//! Each endpoint's queue: at most `cap` of its requests go through to its engine at once (its
//! slots, and never more than `EINSORA_ENDPOINT_CONCURRENCY`), and the rest wait their turn in
//! order of arrival, at most `EINSORA_ENDPOINT_QUEUE` of them, each at most
//! `EINSORA_ENDPOINT_QUEUE_WAIT`. Past either bound a request is refused with 429 and a hint of
//! when a place is likely free, from the endpoint's recent service times (`Retry-After`,
//! `retry-after-ms`, which the OpenAI SDKs obey).
//!
//! A place is held until the answer ends (its body is dropped), then handed to the first still
//! waiting. A waiting request whose client went away leaves the queue (hyper drops its future):
//! its turn passes to the next, and nothing is served to nobody. [`Queues::depth`] is each
//! endpoint's load, for whoever balances across replicas.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use einsora_runtime::metrics::{self, Counters, Gauge, Latencies};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::errors::Failure;

/// Assumed of an endpoint that has served nothing yet.
const FIRST_GUESS: Duration = Duration::from_secs(1);
/// The shortest and the longest hint: the OpenAI SDKs wait as told up to 60 s.
const SHORTEST_HINT: Duration = Duration::from_millis(100);
const LONGEST_HINT: Duration = Duration::from_secs(60);
/// How long an idle endpoint's service times are remembered.
const REMEMBERED: Duration = Duration::from_secs(600);

static WAITING: LazyLock<Gauge> = LazyLock::new(|| {
    metrics::register(
        "einsora_endpoint_queue_waiting",
        "Requests waiting in endpoints' queues, all endpoints together.",
        Gauge::default(),
    )
});

static IN_FLIGHT: LazyLock<Gauge> = LazyLock::new(|| {
    metrics::register(
        "einsora_endpoint_in_flight",
        "Requests through to endpoints' engines, all endpoints together.",
        Gauge::default(),
    )
});

static REFUSED: LazyLock<Counters<1>> = LazyLock::new(|| {
    metrics::register(
        "einsora_endpoint_queue_refused",
        "Requests refused 429 by endpoints' queues, by reason (full, waited).",
        Counters::default(),
    )
});

static WAITED: LazyLock<Latencies<1>> = LazyLock::new(|| {
    metrics::latencies(
        "einsora_endpoint_queue_wait_seconds",
        "Time requests spent in endpoints' queues, by outcome (served, refused, left).",
    )
});

/// What one endpoint's queue is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// Requests through to the engine at once.
    pub(crate) cap: usize,
    /// Requests waiting behind them.
    pub(crate) length: usize,
    /// How long one may wait.
    pub(crate) wait: Duration,
}

/// An endpoint's load: requests through to its engine, and waiting for a place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Depth {
    pub in_flight: usize,
    pub waiting: usize,
}

/// Every endpoint's queue.
#[derive(Debug, Default)]
pub(crate) struct Queues {
    lanes: Mutex<HashMap<Uuid, Arc<Lane>>>,
}

impl Queues {
    /// A place among the endpoint's requests through to its engine, at once or in turn; held
    /// until the [`Place`] is dropped. Refused (429, with a hint) when the queue is full or
    /// the wait runs out.
    pub(crate) async fn enter(&self, endpoint: Uuid, bounds: Bounds) -> Result<Place, Failure> {
        let lane = self.lane(endpoint);
        let (ticket, turn) = {
            let mut state = lane.lock();
            state.cap = bounds.cap.max(1);
            // Places its cap gained (more slots after a restart) go to those waiting first.
            hand_over(&lane, &mut state);
            if state.waiting.is_empty() && state.running.len() < state.cap {
                return Ok(Place::start(&lane, &mut state));
            }
            if state.waiting.len() >= bounds.length {
                REFUSED
                    .get_or_create(&[("reason", "full".to_owned())])
                    .inc();
                let hint = state.hint(Instant::now());
                let message = format!(
                    "this endpoint is busy: {} requests in flight and {} waiting, as many as \
                     it queues (EINSORA_ENDPOINT_QUEUE); retry after the hinted delay",
                    state.running.len(),
                    state.waiting.len()
                );
                return Err(Failure::busy(message, hint));
            }
            let (tx, rx) = oneshot::channel();
            state.next_ticket += 1;
            let ticket = state.next_ticket;
            state.waiting.push_back(Waiter { ticket, tx });
            WAITING.inc();
            (ticket, rx)
        };
        let waiting = Waiting {
            lane: &lane,
            ticket,
            since: Instant::now(),
            outcome: "left",
        };
        waiting.wait(turn, bounds.wait).await
    }

    /// The endpoint's load now: routing across replicas balances by it (`gateway.rs`).
    pub fn depth(&self, endpoint: Uuid) -> Depth {
        let lane = self.lock().get(&endpoint).map(Arc::clone);
        lane.map(|lane| {
            let state = lane.lock();
            Depth {
                in_flight: state.running.len(),
                waiting: state.waiting.len(),
            }
        })
        .unwrap_or_default()
    }

    /// The endpoints with a request in flight or waiting now (`touch.rs`).
    pub(crate) fn busy(&self) -> Vec<Uuid> {
        let lanes: Vec<(Uuid, Arc<Lane>)> = self
            .lock()
            .iter()
            .map(|(id, lane)| (*id, Arc::clone(lane)))
            .collect();
        lanes
            .into_iter()
            .filter(|(_, lane)| {
                let state = lane.lock();
                !state.running.is_empty() || !state.waiting.is_empty()
            })
            .map(|(id, _)| id)
            .collect()
    }

    fn lane(&self, endpoint: Uuid) -> Arc<Lane> {
        let mut lanes = self.lock();
        if let Some(lane) = lanes.get(&endpoint) {
            return Arc::clone(lane);
        }
        // A new endpoint's: those idle a while are forgotten first.
        lanes.retain(|_, lane| Arc::strong_count(lane) > 1 || !lane.lock().idle_for(REMEMBERED));
        Arc::clone(lanes.entry(endpoint).or_default())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<Lane>>> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug, Default)]
struct Lane {
    state: Mutex<State>,
}

impl Lane {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug, Default)]
struct State {
    cap: usize,
    /// Since when each place through to the engine has been held, by ticket.
    running: HashMap<u64, Instant>,
    waiting: VecDeque<Waiter>,
    next_ticket: u64,
    /// The mean time a place is held, of recent requests (weighted to the latest).
    service: Option<Duration>,
    last_used: Option<Instant>,
}

#[derive(Debug)]
struct Waiter {
    ticket: u64,
    tx: oneshot::Sender<Place>,
}

impl State {
    /// When a place is likely free: what is left of the longest-running request's expected
    /// time, and no less than a quarter of it (it may run long).
    fn hint(&self, now: Instant) -> Duration {
        let expected = self.service.unwrap_or(FIRST_GUESS);
        let oldest = self.running.values().map(|since| now - *since).max();
        let left = expected.saturating_sub(oldest.unwrap_or_default());
        left.max(expected / 4).clamp(SHORTEST_HINT, LONGEST_HINT)
    }

    fn idle_for(&self, long: Duration) -> bool {
        self.running.is_empty()
            && self.waiting.is_empty()
            && self.last_used.is_none_or(|t| t.elapsed() >= long)
    }

    fn served(&mut self, took: Duration) {
        self.service = Some(match self.service {
            None => took,
            // An exponentially weighted mean: the last eight or so count most.
            Some(mean) => (mean * 7 + took) / 8,
        });
        self.last_used = Some(Instant::now());
    }
}

/// A request's place among those through to its endpoint's engine, until dropped.
#[derive(Debug)]
pub(crate) struct Place {
    /// `None` once handed back (or never handed out).
    lane: Option<Arc<Lane>>,
    ticket: u64,
    since: Instant,
}

impl Place {
    fn start(lane: &Arc<Lane>, state: &mut State) -> Place {
        state.next_ticket += 1;
        let ticket = state.next_ticket;
        let since = Instant::now();
        state.running.insert(ticket, since);
        IN_FLIGHT.inc();
        Place {
            lane: Some(Arc::clone(lane)),
            ticket,
            since,
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let Some(lane) = self.lane.take() else {
            return;
        };
        let mut state = lane.lock();
        state.running.remove(&self.ticket);
        IN_FLIGHT.dec();
        state.served(self.since.elapsed());
        hand_over(&lane, &mut state);
    }
}

/// Free places go to the first still waiting, in order; one whose client left has dropped its
/// end, and is passed over.
fn hand_over(lane: &Arc<Lane>, state: &mut State) {
    while state.running.len() < state.cap {
        let Some(next) = state.waiting.pop_front() else {
            break;
        };
        WAITING.dec();
        let place = Place::start(lane, state);
        if let Err(mut unwanted) = next.tx.send(place) {
            // Handed back here, under the lock: no one was there to take it.
            state.running.remove(&unwanted.ticket);
            IN_FLIGHT.dec();
            unwanted.lane = None;
        }
    }
}

/// A request waiting in its endpoint's queue; leaves it when dropped (its client went away).
struct Waiting<'a> {
    lane: &'a Arc<Lane>,
    ticket: u64,
    since: Instant,
    outcome: &'static str,
}

impl Waiting<'_> {
    async fn wait(
        mut self,
        turn: oneshot::Receiver<Place>,
        limit: Duration,
    ) -> Result<Place, Failure> {
        let mut turn = turn;
        let answer = match tokio::time::timeout(limit, &mut turn).await {
            Ok(Ok(place)) => Ok(place),
            // Its sender is only dropped with the queue: not while this waits.
            Ok(Err(_)) => Err(Failure::unavailable(
                "the endpoint's queue went away; retry",
            )),
            Err(_) => {
                // Its turn may have come just now: then it is served after all.
                turn.close();
                match turn.try_recv() {
                    Ok(place) => Ok(place),
                    Err(_) => {
                        REFUSED
                            .get_or_create(&[("reason", "waited".to_owned())])
                            .inc();
                        self.outcome = "refused";
                        let hint = self.leave();
                        let message = format!(
                            "this endpoint is busy: the request waited {}s in its queue \
                             (EINSORA_ENDPOINT_QUEUE_WAIT); retry after the hinted delay",
                            limit.as_secs_f64()
                        );
                        return Err(Failure::busy(message, hint));
                    }
                }
            }
        };
        if answer.is_ok() {
            self.outcome = "served";
        }
        answer
    }

    /// Leaves the queue, if still in it; the hint for a retry.
    fn leave(&self) -> Duration {
        let mut state = self.lane.lock();
        if let Some(at) = state.waiting.iter().position(|w| w.ticket == self.ticket) {
            state.waiting.remove(at);
            WAITING.dec();
        }
        state.hint(Instant::now())
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.outcome == "left" {
            self.leave();
        }
        let labels = [("outcome", self.outcome.to_owned())];
        metrics::observe(&WAITED, labels, self.since.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits for `done`, failing after a few seconds rather than hanging.
    async fn until(done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(Instant::now() < deadline, "not in time");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn bounds(cap: usize, length: usize) -> Bounds {
        Bounds {
            cap,
            length,
            wait: Duration::from_secs(30),
        }
    }

    /// N through at once, M waiting in order, the rest refused with a hint; each place freed
    /// goes to the first waiting.
    #[tokio::test]
    async fn n_go_through_m_wait_in_order_and_the_rest_are_refused() {
        let queues = Arc::new(Queues::default());
        let endpoint = Uuid::now_v7();
        let (first, second) = (
            queues.enter(endpoint, bounds(2, 3)).await.unwrap(),
            queues.enter(endpoint, bounds(2, 3)).await.unwrap(),
        );
        let (tx, mut served) = tokio::sync::mpsc::unbounded_channel();
        for n in 0..3 {
            let (each, tx) = (Arc::clone(&queues), tx.clone());
            tokio::spawn(async move {
                let place = each.enter(endpoint, bounds(2, 3)).await;
                tx.send((n, place)).unwrap();
            });
            // Each joins the queue before the next.
            until(|| queues.depth(endpoint).waiting > n).await;
        }
        let depth = queues.depth(endpoint);
        assert_eq!((depth.in_flight, depth.waiting), (2, 3));
        let refused = queues.enter(endpoint, bounds(2, 3)).await.unwrap_err();
        assert_eq!(refused.code(), "rate_limited");
        assert!(refused.hinted().is_some_and(|h| h >= SHORTEST_HINT));
        assert!(
            queues.enter(Uuid::now_v7(), bounds(2, 3)).await.is_ok(),
            "another endpoint has its own"
        );
        drop(first);
        let (n, place) = served.recv().await.unwrap();
        assert_eq!(n, 0, "the first waiting is served first");
        drop(second);
        let (n, _second) = served.recv().await.unwrap();
        assert_eq!(n, 1);
        drop(place.unwrap());
        let (n, _third) = served.recv().await.unwrap();
        assert_eq!(n, 2);
        let depth = queues.depth(endpoint);
        assert_eq!((depth.in_flight, depth.waiting), (2, 0));
    }

    /// A waiting request whose client went away leaves the queue: the place it would have had
    /// goes to the next, and is never held by no one.
    #[tokio::test]
    async fn one_that_leaves_the_queue_frees_its_turn() {
        let queues = Arc::new(Queues::default());
        let endpoint = Uuid::now_v7();
        let held = queues.enter(endpoint, bounds(1, 2)).await.unwrap();
        let leaving = {
            let queues = Arc::clone(&queues);
            tokio::spawn(async move { queues.enter(endpoint, bounds(1, 2)).await })
        };
        until(|| queues.depth(endpoint).waiting == 1).await;
        let staying = {
            let queues = Arc::clone(&queues);
            tokio::spawn(async move { queues.enter(endpoint, bounds(1, 2)).await })
        };
        until(|| queues.depth(endpoint).waiting == 2).await;
        leaving.abort();
        let _ = leaving.await;
        assert_eq!(queues.depth(endpoint).waiting, 1, "it left the queue");
        drop(held);
        let place = staying.await.unwrap().unwrap();
        assert_eq!(queues.depth(endpoint).in_flight, 1);
        drop(place);
        let depth = queues.depth(endpoint);
        assert_eq!((depth.in_flight, depth.waiting), (0, 0), "nothing is held");
    }

    /// A place handed to a request that went away at that moment is handed on, not lost.
    #[tokio::test]
    async fn a_place_handed_to_no_one_is_handed_on() {
        let queues = Queues::default();
        let endpoint = Uuid::now_v7();
        let lane = queues.lane(endpoint);
        let held = queues.enter(endpoint, bounds(1, 2)).await.unwrap();
        let (tx, rx) = oneshot::channel();
        drop(rx);
        let (tx2, rx2) = oneshot::channel();
        {
            let mut state = lane.lock();
            state.waiting.push_back(Waiter { ticket: 1001, tx });
            state.waiting.push_back(Waiter {
                ticket: 1002,
                tx: tx2,
            });
        }
        drop(held);
        let place = rx2.await.unwrap();
        assert_eq!(queues.depth(endpoint).in_flight, 1);
        drop(place);
        assert_eq!(queues.depth(endpoint).in_flight, 0);
    }

    #[tokio::test]
    async fn a_request_waits_no_longer_than_the_bound() {
        let queues = Queues::default();
        let endpoint = Uuid::now_v7();
        let _held = queues.enter(endpoint, bounds(1, 2)).await.unwrap();
        let short = Bounds {
            wait: Duration::from_millis(300),
            ..bounds(1, 2)
        };
        let started = Instant::now();
        let refused = queues.enter(endpoint, short).await.unwrap_err();
        assert_eq!(refused.code(), "rate_limited");
        let waited = started.elapsed();
        assert!(
            waited >= short.wait && waited < Duration::from_secs(3),
            "{waited:?}"
        );
        assert_eq!(queues.depth(endpoint).waiting, 0, "it left the queue");
    }

    /// The hint is what is likely left of the longest-running request, by recent service
    /// times: never less than a quarter of one, within what the SDKs obey.
    #[test]
    fn the_hint_follows_recent_service_times() {
        let now = Instant::now();
        let mut state = State::default();
        assert_eq!(state.hint(now), FIRST_GUESS, "nothing known yet");
        state.served(Duration::from_secs(8));
        state.running.insert(1, now - Duration::from_secs(3));
        assert_eq!(state.hint(now), Duration::from_secs(5));
        state.running.insert(2, now - Duration::from_secs(10));
        assert_eq!(
            state.hint(now),
            Duration::from_secs(2),
            "a quarter, once overdue"
        );
        state.served(Duration::from_secs(600));
        assert_eq!(state.hint(now), LONGEST_HINT);
        let mut quick = State::default();
        quick.served(Duration::from_millis(4));
        assert_eq!(quick.hint(now), SHORTEST_HINT);
    }
}
