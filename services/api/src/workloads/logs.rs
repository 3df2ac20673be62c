//! ListWorkloadLogs: one page of what a workload printed, or, with `follow`, that page and
//! then each new batch of lines as it reaches the store, until the workload has stopped and its
//! last lines are in. A follower sends an empty page when it has had nothing to send for a
//! while (so a client, or a proxy between, sees the stream is alive), ends with UNAVAILABLE
//! when the api stops (the client follows again after its last line), and a tenant holds at
//! most [`FOLLOWS_PER_TENANT`] at once.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_proto::convert::optional_time;
use einsora_proto::workloads::v1::{self as pb};
use einsora_runtime::shutdown::Shutdown;
use einsora_store::{MAX_PAGE_LINES, OutputPage, OutputQuery, Store};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::metadata::MetadataMap;
use tracing::Instrument;

use crate::caller::{Access, Auth};
use crate::{scoped, status, wire};

pub type LogStream =
    Pin<Box<dyn Stream<Item = Result<pb::ListWorkloadLogsResponse, Status>> + Send>>;

/// Lines a page has when the request doesn't say.
const DEFAULT_LOG_LINES: u32 = 100;
/// How often a follower that has caught up asks the store again (the delay a follower sees is
/// at most this plus the agent's shipping pace).
const POLL: Duration = Duration::from_millis(200);
/// How long a follower goes on once the workload is seen stopped with nothing new: its agent
/// may ship its last lines after it reports the exit, behind a full outbox of other workloads'
/// (64 batches sent 60 ms apart) and a driver pass.
pub const SETTLE: Duration = Duration::from_secs(10);
/// How often a follower's credential is checked again, so a revoked token or an ended session
/// ends the stream.
const RECHECK: Duration = Duration::from_secs(30);
/// The longest a follower stays silent: then it sends an empty page.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// Followed streams one tenant may hold at once; one more is RESOURCE_EXHAUSTED.
pub const FOLLOWS_PER_TENANT: usize = 32;

/// The followed streams each tenant holds.
#[derive(Debug, Default)]
pub struct Follows(Mutex<HashMap<TenantId, usize>>);

impl Follows {
    /// One more for `tenant`, if it holds fewer than the limit.
    fn take(self: &Arc<Self>, tenant: TenantId) -> Result<FollowSlot, Status> {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(tenant).or_default();
        if *count >= FOLLOWS_PER_TENANT {
            return Err(Status::resource_exhausted(format!(
                "this tenant follows {FOLLOWS_PER_TENANT} workloads' logs already: end one first"
            )));
        }
        *count += 1;
        Ok(FollowSlot {
            follows: Arc::clone(self),
            tenant,
        })
    }
}

/// A followed stream's place in its tenant's count, given back when it ends.
#[derive(Debug)]
struct FollowSlot {
    follows: Arc<Follows>,
    tenant: TenantId,
}

impl Drop for FollowSlot {
    fn drop(&mut self) {
        let mut held = self
            .follows
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.tenant);
            }
        }
    }
}

/// The request's reading, validated.
#[derive(Debug)]
pub struct LogRequest {
    pub id: WorkloadId,
    pub query: OutputQuery,
    pub follow: bool,
}

impl TryFrom<&pb::ListWorkloadLogsRequest> for LogRequest {
    type Error = Status;

    fn try_from(req: &pb::ListWorkloadLogsRequest) -> Result<Self, Status> {
        if req.tail > MAX_PAGE_LINES || req.limit > MAX_PAGE_LINES {
            return Err(Status::invalid_argument(format!(
                "tail and limit are at most {MAX_PAGE_LINES}"
            )));
        }
        let since = optional_time("since", req.since.as_ref()).map_err(status::invalid)?;
        Ok(LogRequest {
            id: scoped::id(&req.id)?,
            query: OutputQuery {
                after: (req.after > 0).then_some(req.after),
                tail: (req.tail > 0).then_some(req.tail),
                since,
                limit: match (req.limit, req.tail) {
                    (0, 0) => DEFAULT_LOG_LINES,
                    (0, tail) => tail,
                    (limit, _) => limit,
                },
            },
            follow: req.follow,
        })
    }
}

/// A page as the wire has it; `after` is what it was read after.
pub fn page(page: &OutputPage, after: u64) -> pb::ListWorkloadLogsResponse {
    pb::ListWorkloadLogsResponse {
        lines: page.lines.iter().map(wire::log_line).collect(),
        dropped: page.dropped_lines,
        next_after: page
            .lines
            .last()
            .map_or(after.max(page.next_seq.saturating_sub(1)), |l| l.seq),
    }
}

/// Whether no process of the workload runs, nor will until someone starts it again.
fn settled(state: State) -> bool {
    matches!(state, State::Stopped | State::Failed | State::Deleted)
}

/// Who follows which workload's output, from where.
#[derive(Debug)]
pub struct Follower {
    pub store: Arc<dyn Store>,
    pub auth: Arc<Auth>,
    pub metadata: MetadataMap,
    pub scope: crate::scoped::Scope,
    pub id: WorkloadId,
    pub since: Option<time::OffsetDateTime>,
    pub shutdown: Shutdown,
    /// [`SETTLE`], unless a test scales it down.
    pub settle: Duration,
}

impl Follower {
    /// Sends `first`, then new lines as they arrive; ends when the workload has settled, the
    /// caller's credential no longer reads it, the caller goes away or the api stops.
    pub fn stream(
        self,
        follows: &Arc<Follows>,
        first: pb::ListWorkloadLogsResponse,
    ) -> Result<LogStream, Status> {
        let slot = follows.take(self.scope.tenant)?;
        let self_id = self.id;
        let (tx, rx) = mpsc::channel(4);
        let follow = async move {
            if let Err(status) = self.run(first, &tx).await {
                let _ = tx.send(Err(status)).await;
            }
            drop(slot);
        };
        // Its own span, out of the traces: its polls would grow the request's trace for as
        // long as the log is followed.
        let span = tracing::info_span!(parent: None, "follow", workload = %self_id);
        einsora_runtime::telemetry::traces::untraced(&span);
        tokio::spawn(follow.instrument(span));
        Ok(Box::pin(ReceiverStream::new(rx)))
    }

    async fn run(
        &self,
        first: pb::ListWorkloadLogsResponse,
        tx: &mpsc::Sender<Result<pb::ListWorkloadLogsResponse, Status>>,
    ) -> Result<(), Status> {
        let mut after = first.next_after;
        if tx.send(Ok(first)).await.is_err() {
            return Ok(());
        }
        let (mut checked, mut settled_since, mut sent) = (Instant::now(), None, Instant::now());
        loop {
            if checked.elapsed() >= RECHECK {
                self.auth.caller(&self.metadata, Access::Read).await?;
                checked = Instant::now();
            }
            let query = OutputQuery {
                after: Some(after),
                since: self.since,
                limit: MAX_PAGE_LINES,
                tail: None,
            };
            let read = self.store.read_output(self.id, &query).await;
            let read = read.map_err(status::store)?;
            if !read.lines.is_empty() {
                let full = read.lines.len() == MAX_PAGE_LINES as usize;
                let batch = page(&read, after);
                after = batch.next_after;
                settled_since = None;
                if tx.send(Ok(batch)).await.is_err() {
                    return Ok(());
                }
                sent = Instant::now();
                if full {
                    continue;
                }
            } else if sent.elapsed() >= HEARTBEAT {
                if tx.send(Ok(page(&read, after))).await.is_err() {
                    return Ok(());
                }
                sent = Instant::now();
            }
            let w = scoped::workload(&*self.store, &self.scope, self.id, true).await?;
            match settled_since {
                _ if !settled(w.state) => settled_since = None,
                None => settled_since = Some(Instant::now()),
                Some(since) if since.elapsed() >= self.settle => return Ok(()),
                Some(_) => {}
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = tx.closed() => return Ok(()),
                () = self.shutdown.cancelled() => {
                    return Err(Status::unavailable("the api is stopping: follow again"));
                }
            }
        }
    }
}
