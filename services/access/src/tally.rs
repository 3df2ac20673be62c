//! The tally of tokens endpoints' answers used (`usage.rs` counts each answer), summed in
//! memory per hour, tenant, endpoint, inference key and user, and sent to the api every
//! [`EVERY`] and at shutdown (`ApiInternalService.RecordTokenUsage`), which keeps them beside
//! the usage records.
//!
//! Nothing is lost when a call fails: a batch that wasn't taken is kept, with its ID, and sent
//! again at the next turn (the api adds a batch once, so a batch whose answer was lost isn't
//! counted twice). Bounded: at most [`MOST_UNSENT`] counts wait; past that the oldest batches
//! are dropped, said in the log and in `einsora_access_token_counts_dropped_total`. A batch the
//! api refuses as invalid is dropped the same way (sending it again can't help).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use einsora_proto::convert::timestamp;
use einsora_proto::internal::v1 as pb;
use einsora_runtime::metrics::{self, Counters};
use einsora_runtime::shutdown::Shutdown;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::upstream::Upstream;
use crate::usage::Spent;

/// How often the tally is sent.
pub(crate) const EVERY: Duration = Duration::from_secs(5);
/// The most counts in one batch (the api's own bound).
const MOST_PER_BATCH: usize = 10_000;
/// The most counts kept waiting for the api.
const MOST_UNSENT: usize = 100_000;
/// How long the last sending at shutdown may take.
const LAST_SENDING: Duration = Duration::from_secs(5);

static DROPPED: LazyLock<Counters<1>> = LazyLock::new(|| {
    metrics::register(
        "einsora_access_token_counts_dropped",
        "Token counts the access proxy dropped unsent, by why (backlog: the api didn't take \
         them for too long; refused: the api said they were invalid).",
        Counters::default(),
    )
});

/// Whose answer it is: its tenant, endpoint, user, and the inference key it came with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Who {
    pub(crate) tenant_id: String,
    pub(crate) endpoint: Uuid,
    pub(crate) user_id: String,
    /// `None` for an API token.
    pub(crate) key_id: Option<String>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Sums {
    requests: u64,
    prompt: u64,
    completion: u64,
}

#[derive(Debug)]
struct Batch {
    id: Uuid,
    counts: Vec<pb::TokenCount>,
}

#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Counted since the last sending, per hour (its start, Unix seconds) and whose.
    pending: Mutex<HashMap<(i64, Who), Sums>>,
    /// Batches made and not yet taken by the api, oldest first; held while sending.
    unsent: tokio::sync::Mutex<VecDeque<Batch>>,
}

impl Tally {
    /// Adds one answer's tokens to the hour it ended in.
    pub(crate) fn add(&self, who: &Who, spent: Spent) {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let hour = now - now.rem_euclid(3600);
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let sums = pending.entry((hour, who.clone())).or_default();
        sums.requests = sums.requests.saturating_add(1);
        sums.prompt = sums.prompt.saturating_add(spent.prompt);
        sums.completion = sums.completion.saturating_add(spent.completion);
    }

    /// Sends what was counted, and what waits from before, oldest first; `true` when nothing
    /// is left waiting.
    pub(crate) async fn send(&self, upstream: &Upstream) -> bool {
        let mut unsent = self.unsent.lock().await;
        let fresh =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        unsent.extend(batches(fresh));
        drop_past_bound(&mut unsent);
        while let Some(batch) = unsent.front() {
            let request = pb::RecordTokenUsageRequest {
                batch_id: batch.id.to_string(),
                counts: batch.counts.clone(),
            };
            match upstream.record_token_usage(request).await {
                Ok(()) => {}
                Err(status) if status.code() == tonic::Code::InvalidArgument => {
                    tracing::error!(
                        message = status.message(),
                        counts = batch.counts.len(),
                        "the api refused a batch of token counts; dropped"
                    );
                    DROPPED
                        .get_or_create(&[("why", "refused".to_owned())])
                        .inc_by(batch.counts.len() as u64);
                }
                Err(status) => {
                    tracing::warn!(code = ?status.code(), message = status.message(), waiting = unsent.len(), "token counts not sent; kept for the next turn");
                    return false;
                }
            }
            unsent.pop_front();
        }
        true
    }

    /// Sends every [`EVERY`] until shutdown.
    pub(crate) async fn run(self: Arc<Self>, upstream: Upstream, shutdown: Shutdown) {
        let stop = shutdown.cancelled();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = tokio::time::sleep(EVERY) => {}
                () = &mut stop => return,
            }
            self.send(&upstream).await;
        }
    }

    /// The last sending, once the proxy's answers have ended: tried until it is through or
    /// [`LAST_SENDING`] has passed.
    pub(crate) async fn send_last(&self, upstream: &Upstream) {
        let tries = async {
            while !self.send(upstream).await {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        };
        if tokio::time::timeout(LAST_SENDING, tries).await.is_err() {
            let left: usize = self
                .unsent
                .lock()
                .await
                .iter()
                .map(|b| b.counts.len())
                .sum();
            tracing::error!(counts = left, "token counts not sent before shutdown; lost");
        }
    }
}

/// The counts as batches of at most [`MOST_PER_BATCH`].
fn batches(sums: HashMap<(i64, Who), Sums>) -> Vec<Batch> {
    let counts: Vec<pb::TokenCount> = sums
        .into_iter()
        .map(|((hour, who), sums)| pb::TokenCount {
            tenant_id: who.tenant_id,
            endpoint_id: who.endpoint.to_string(),
            key_id: who.key_id.unwrap_or_default(),
            user_id: who.user_id,
            hour_start: OffsetDateTime::from_unix_timestamp(hour)
                .ok()
                .map(timestamp),
            requests: sums.requests,
            prompt_tokens: sums.prompt,
            completion_tokens: sums.completion,
        })
        .collect();
    counts
        .chunks(MOST_PER_BATCH)
        .map(|counts| Batch {
            id: Uuid::now_v7(),
            counts: counts.to_vec(),
        })
        .collect()
}

/// Drops the oldest batches while more than [`MOST_UNSENT`] counts wait.
fn drop_past_bound(unsent: &mut VecDeque<Batch>) {
    let mut waiting: usize = unsent.iter().map(|b| b.counts.len()).sum();
    while waiting > MOST_UNSENT
        && let Some(oldest) = unsent.pop_front()
    {
        waiting -= oldest.counts.len();
        tracing::error!(
            counts = oldest.counts.len(),
            "token counts waited too long for the api; the oldest dropped"
        );
        DROPPED
            .get_or_create(&[("why", "backlog".to_owned())])
            .inc_by(oldest.counts.len() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(user: &str) -> Who {
        Who {
            tenant_id: "t".into(),
            endpoint: Uuid::nil(),
            user_id: user.into(),
            key_id: None,
        }
    }

    #[test]
    fn answers_of_one_hour_and_caller_are_summed() {
        let tally = Tally::default();
        let spent = |prompt, completion| Spent { prompt, completion };
        tally.add(&who("a"), spent(3, 4));
        tally.add(&who("a"), spent(10, 20));
        tally.add(&who("b"), spent(1, 1));
        let pending = std::mem::take(&mut *tally.pending.lock().unwrap());
        let batches = batches(pending);
        assert_eq!(batches.len(), 1);
        let mut counts: Vec<_> = batches[0]
            .counts
            .iter()
            .map(|c| {
                (
                    c.user_id.as_str(),
                    c.requests,
                    c.prompt_tokens,
                    c.completion_tokens,
                )
            })
            .collect();
        counts.sort();
        assert_eq!(counts, [("a", 2, 13, 24), ("b", 1, 1, 1)]);
        let hour = batches[0].counts[0].hour_start.unwrap();
        assert_eq!((hour.seconds % 3600, hour.nanos), (0, 0));
    }

    #[test]
    fn batches_are_bounded_and_the_backlog_drops_its_oldest() {
        let many: HashMap<_, _> = (0..MOST_PER_BATCH + 1)
            .map(|i| ((0, who(&i.to_string())), Sums::default()))
            .collect();
        let made = batches(many);
        assert_eq!(
            made.iter().map(|b| b.counts.len()).collect::<Vec<_>>(),
            [MOST_PER_BATCH, 1]
        );
        let mut unsent: VecDeque<Batch> = VecDeque::new();
        for _ in 0..MOST_UNSENT / MOST_PER_BATCH {
            unsent.push_back(Batch {
                id: Uuid::now_v7(),
                counts: vec![pb::TokenCount::default(); MOST_PER_BATCH],
            });
        }
        let oldest = unsent[0].id;
        drop_past_bound(&mut unsent);
        assert_eq!(unsent[0].id, oldest, "at the bound nothing is dropped");
        unsent.push_back(Batch {
            id: Uuid::now_v7(),
            counts: vec![pb::TokenCount::default()],
        });
        drop_past_bound(&mut unsent);
        assert_ne!(unsent[0].id, oldest, "past it the oldest goes");
        assert_eq!(unsent.len(), MOST_UNSENT / MOST_PER_BATCH);
    }
}
