//! The well-behaved clients, each on a fixed schedule whatever the answers do, its latency
//! counted from each request's scheduled time (no coordinated omission):
//! - an agent that is pushed notebooks (`agent`);
//! - an agent enrolling, one every 2 s, from an address of its own (a new one every 8
//!   attempts, so its own attempts never reach the per-address limit of 10 a minute);
//! - GET /v1/catalog at the gateway and GET /e/<id>/v1/models at the proxy (an unknown
//!   endpoint with a good token: 404 after the api and the controller were asked), 20 a second
//!   each, a new connection each.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use super::world::{PATIENCE, World, code};
use crate::support::{get, open_loop};

/// What one well-behaved client saw in a window.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub sent: usize,
    pub ok: usize,
    /// Latencies of the successes, ms.
    pub ms: Vec<f64>,
    pub failures: BTreeMap<String, usize>,
}

impl Seen {
    pub fn merge(&mut self, other: &Seen) {
        self.sent += other.sent;
        self.ok += other.ok;
        self.ms.extend_from_slice(&other.ms);
        for (why, n) in &other.failures {
            *self.failures.entry(why.clone()).or_default() += n;
        }
    }

    pub fn record(&mut self, latency: Duration, outcome: Result<(), String>) {
        self.sent += 1;
        match outcome {
            Ok(()) => {
                self.ok += 1;
                self.ms.push(latency.as_secs_f64() * 1000.0);
            }
            Err(why) => *self.failures.entry(why).or_default() += 1,
        }
    }
}

/// Runs `request(i)` at `rate` a second for `window` (`support::open_loop`), each within
/// `PATIENCE`; latency counts from each request's scheduled time.
pub async fn open_loop<F, Fut>(rate: f64, window: Duration, request: F) -> anyhow::Result<Seen>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let phase = open_loop::samples(rate, window, |i| {
        let answer = request(i);
        async move {
            match tokio::time::timeout(PATIENCE, answer).await {
                Ok(outcome) => outcome,
                Err(_) => Err("no answer within 15 s".to_owned()),
            }
        }
    })
    .await;
    let mut seen = Seen::default();
    let counted = phase.samples.len();
    for sample in phase.samples {
        seen.record(sample.since_scheduled(), sample.outcome);
    }
    anyhow::ensure!(
        counted == phase.scheduled,
        "{} requests were never counted",
        phase.scheduled - counted
    );
    Ok(seen)
}

/// GET /v1/catalog at the gateway, 20 a second.
pub async fn gateway(world: &World, window: Duration) -> anyhow::Result<Seen> {
    let (addr, auth) = (
        world.gateway.to_string(),
        format!("Authorization: Bearer {}", world.api_token),
    );
    open_loop(20.0, window, |_| {
        let (addr, auth) = (addr.clone(), auth.clone());
        async move { expect(get(&addr, &addr, "/v1/catalog", &[auth]).await, 200) }
    })
    .await
}

/// GET /e/<unknown id>/v1/models at the proxy with a good token, 20 a second.
pub async fn proxy(world: &World, window: Duration, endpoint: uuid::Uuid) -> anyhow::Result<Seen> {
    let addr = world.access.to_string();
    let host = format!("localhost:{}", world.access.port());
    let auth = format!("Authorization: Bearer {}", world.api_token);
    let path = format!("/e/{endpoint}/v1/models");
    open_loop(20.0, window, |_| {
        let (addr, host, auth, path) = (addr.clone(), host.clone(), auth.clone(), path.clone());
        async move { expect(get(&addr, &host, &path, &[auth]).await, 404) }
    })
    .await
}

fn expect(answer: anyhow::Result<(u16, String)>, wanted: u16) -> Result<(), String> {
    match answer {
        Ok((status, _)) if status == wanted => Ok(()),
        Ok((status, _)) => Err(format!("HTTP {status}")),
        Err(e) => Err(io_word(&e)),
    }
}

/// An I/O failure as a word.
pub fn io_word(e: &anyhow::Error) -> String {
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        return format!("{:?}", io.kind());
    }
    if let Some(status) = e.downcast_ref::<tonic::Status>() {
        return code(status.code());
    }
    if e.downcast_ref::<tokio::time::error::Elapsed>().is_some() {
        return "timed out".to_owned();
    }
    if e.downcast_ref::<tonic::transport::Error>().is_some() {
        return "connect failed".to_owned();
    }
    "error".to_owned()
}

/// An agent enrolling, one every 2 s, the `i`-th from `from(i)`.
pub async fn enrolments(
    world: Arc<World>,
    window: Duration,
    from: impl Fn(usize) -> IpAddr,
) -> anyhow::Result<Seen> {
    open_loop(0.5, window, |i| {
        let (world, from) = (Arc::clone(&world), from(i));
        async move {
            match world.enrol(from, &format!("newcomer-{i}")).await {
                Ok(_) => Ok(()),
                Err(e) => Err(io_word(&e)),
            }
        }
    })
    .await
}
