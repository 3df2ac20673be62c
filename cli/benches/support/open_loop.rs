//! Load on a fixed schedule, whatever the answers do (open loop): request `i` is sent at
//! `start + i / rate` on its own task, never waiting for an earlier answer, so a slow answer
//! can't hold back the requests behind it (no coordinated omission), and two peers compared
//! this way are compared at the same offered load. A request's latency counts from when its
//! task sent it: Tokio's timer fires up to a millisecond late, which counted from the schedule
//! would add ~0.5 ms to every figure and hide sub-millisecond differences. If the sender itself
//! falls behind, `sent_per_s` shows it.

use std::future::Future;
use std::time::Duration;

use einsora_testkit::bench::quantile;

/// What one open-loop phase saw.
pub struct Outcome {
    /// Every request's latency, ms, sorted; failed ones included (they waited too).
    pub ms: Vec<f64>,
    pub failed: usize,
    pub sent: usize,
    /// Requests sent a second: below the rate when the sender itself fell behind.
    pub sent_per_s: f64,
}

impl Outcome {
    pub fn at(&self, q: f64) -> f64 {
        quantile(&self.ms, q)
    }
}

/// Sends `rate` requests a second for `phase`; `send(i)` makes request `i` and says whether it
/// was answered as expected.
pub async fn run<F, Fut>(rate: f64, phase: Duration, send: F) -> Outcome
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = bool> + Send + 'static,
{
    let total = (rate * phase.as_secs_f64()) as usize;
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
            let ok = request.await;
            let _ = tx.send((sent.elapsed(), ok));
        });
    }
    let sending = start.elapsed();
    drop(tx);
    let mut ms = Vec::with_capacity(total);
    let mut failed = 0;
    while let Some((latency, ok)) = rx.recv().await {
        ms.push(latency.as_secs_f64() * 1000.0);
        failed += usize::from(!ok);
    }
    ms.sort_by(f64::total_cmp);
    Outcome {
        ms,
        failed,
        sent: total,
        sent_per_s: total as f64 / sending.as_secs_f64().max(phase.as_secs_f64()),
    }
}
