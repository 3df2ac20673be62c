//! ListWorkloadLogs: one page of what a workload printed, or, with `follow`, that page and
//! then each new batch of lines as it reaches the store, until the workload has stopped and its
//! last lines are in.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_proto::convert::optional_time;
use einsora_proto::workloads::v1::{self as pb};
use einsora_store::{MAX_PAGE_LINES, OutputPage, OutputQuery, Store};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::caller::{Access, Auth};
use crate::{scoped, status, wire};

pub type LogStream =
    Pin<Box<dyn Stream<Item = Result<pb::ListWorkloadLogsResponse, Status>> + Send>>;

/// Lines a page has when the request doesn't say.
const DEFAULT_LOG_LINES: u32 = 100;
/// How often a follower that has caught up asks the store again (the delay a follower sees is
/// at most this plus the agent's shipping pace).
const POLL: Duration = Duration::from_millis(200);
/// How long a follower goes on once the workload is seen stopped: its agent may ship its last
/// lines after it reports the exit.
const SETTLE: Duration = Duration::from_secs(2);
/// How often a follower's credential is checked again, so a revoked token or an ended session
/// ends the stream.
const RECHECK: Duration = Duration::from_secs(30);

/// The request's reading, validated.
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
pub struct Follower {
    pub store: Arc<dyn Store>,
    pub auth: Arc<Auth>,
    pub metadata: MetadataMap,
    pub tenant: TenantId,
    pub id: WorkloadId,
    pub since: Option<time::OffsetDateTime>,
}

impl Follower {
    /// Sends `first`, then new lines as they arrive; ends when the workload has settled, the
    /// caller's credential no longer reads it, or the caller goes away.
    pub fn stream(self, first: pb::ListWorkloadLogsResponse) -> LogStream {
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(async move {
            if let Err(status) = self.run(first, &tx).await {
                let _ = tx.send(Err(status)).await;
            }
        });
        Box::pin(ReceiverStream::new(rx))
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
        let (mut checked, mut settled_since) = (Instant::now(), None);
        loop {
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
                if full {
                    continue;
                }
            }
            if checked.elapsed() >= RECHECK {
                self.auth.caller(&self.metadata, Access::Read).await?;
                checked = Instant::now();
            }
            let w = scoped::workload(&*self.store, self.tenant, self.id, true).await?;
            match settled_since {
                _ if !settled(w.state) => settled_since = None,
                None => settled_since = Some(Instant::now()),
                Some(since) if since.elapsed() >= SETTLE => return Ok(()),
                Some(_) => {}
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = tx.closed() => return Ok(()),
            }
        }
    }
}
