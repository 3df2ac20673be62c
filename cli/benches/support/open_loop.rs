//! Load on a fixed schedule, whatever the answers do (open loop): request `i` is sent at
//! `start + i / rate` on its own task, never waiting for an earlier answer, so a slow answer
//! can't hold back the requests behind it (no coordinated omission), and two peers compared
//! this way are compared at the same offered load. Each request's sample keeps both how late
//! its task sent it (`behind`: Tokio's timer fires up to a millisecond late, and a starved
//! sender later still) and how long its answer took from the send (`took`), so a bench can
//! count latency from the schedule or from the send and say which.

use std::future::Future;
use std::time::Duration;

use einsora_testkit::bench::quantile;

/// One request of a phase.
pub struct Sample<O> {
    /// From its scheduled time to its send.
    pub behind: Duration,
    /// From its send to its answer.
    pub took: Duration,
    pub outcome: O,
}

impl<O> Sample<O> {
    /// Its latency counted from its scheduled time.
    pub fn since_scheduled(&self) -> Duration {
        self.behind + self.took
    }
}

/// A phase's samples, in the order they were answered.
pub struct Phase<O> {
    pub samples: Vec<Sample<O>>,
    /// How many were scheduled (a request whose task never reported is missing from `samples`).
    pub scheduled: usize,
    /// Requests sent a second: below the rate when the sender itself fell behind.
    pub sent_per_s: f64,
}

/// Sends `rate` requests a second for `length`; `send(i)` makes request `i`.
pub async fn samples<F, Fut, O>(rate: f64, length: Duration, send: F) -> Phase<O>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = O> + Send + 'static,
    O: Send + 'static,
{
    let total = (rate * length.as_secs_f64()).round() as usize;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..total {
        let scheduled = start + interval.mul_f64(i as f64);
        tokio::time::sleep_until(scheduled).await;
        let request = send(i);
        let tx = tx.clone();
        tokio::spawn(async move {
            let sent = tokio::time::Instant::now();
            let outcome = request.await;
            let _ = tx.send(Sample {
                behind: sent - scheduled,
                took: sent.elapsed(),
                outcome,
            });
        });
    }
    let sending = start.elapsed();
    drop(tx);
    let mut samples = Vec::with_capacity(total);
    while let Some(sample) = rx.recv().await {
        samples.push(sample);
    }
    Phase {
        samples,
        scheduled: total,
        sent_per_s: total as f64 / sending.as_secs_f64().max(length.as_secs_f64()),
    }
}

/// What a phase of requests that succeed or fail saw, latency from each send.
pub struct Outcome {
    /// Every request's latency, ms, sorted; failed ones included (they waited too).
    pub ms: Vec<f64>,
    pub failed: usize,
    pub sent_per_s: f64,
}

impl Outcome {
    pub fn at(&self, q: f64) -> f64 {
        quantile(&self.ms, q)
    }
}

/// [`samples`] of requests that say whether they were answered as expected.
pub async fn run<F, Fut>(rate: f64, length: Duration, send: F) -> Outcome
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = bool> + Send + 'static,
{
    let phase = samples(rate, length, send).await;
    let mut ms: Vec<f64> = phase
        .samples
        .iter()
        .map(|s| s.took.as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    let answered = phase.samples.iter().filter(|s| s.outcome).count();
    Outcome {
        ms,
        failed: phase.scheduled - answered,
        sent_per_s: phase.sent_per_s,
    }
}
