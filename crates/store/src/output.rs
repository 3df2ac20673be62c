//! Where workloads' output lives (ADR 0011): each line a row, numbered per workload, with a head
//! row per workload saying where its agent's source is up to, so a restarted agent resumes
//! there and nothing is stored twice. Caps per workload, per tenant and in all drop the oldest
//! lines, counted as dropped; the retention sweep drops lines received before its cutoff.

use async_trait::async_trait;
use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::output::{OutputStream, PrintedLine};
use time::OffsetDateTime;

use crate::StoreError;

/// The most lines one page reads.
pub const MAX_PAGE_LINES: u32 = 1000;

#[async_trait]
pub trait OutputStore: Send + Sync {
    /// Appends one workload's batch in one transaction, then drops the oldest lines past
    /// `caps` (the workload's, then its tenant's, then the whole store's), counting them as
    /// dropped. Of the head's attempt, a line ending at or before where the head is was stored
    /// already and is skipped, so a batch shipped again (an agent that rewound to the head)
    /// stores only what is new; a batch of an older attempt stores nothing. The head is
    /// answered: the agent resumes from there.
    async fn append_output(
        &self,
        batch: &OutputBatch,
        caps: &OutputCaps,
    ) -> Result<OutputHead, StoreError>;

    /// Where each of these workloads' output is up to, for those that have printed.
    async fn output_heads(&self, workloads: &[WorkloadId]) -> Result<Vec<OutputHead>, StoreError>;

    /// A page of the workload's output, oldest first.
    async fn read_output(
        &self,
        workload: WorkloadId,
        query: &OutputQuery,
    ) -> Result<OutputPage, StoreError>;

    /// Drops every line received before `before`, counting them as dropped; how many.
    async fn sweep_output(&self, before: OffsetDateTime) -> Result<u64, StoreError>;
}

/// Lines one workload printed, as its agent shipped them: its source, for an attempt, read up
/// to `to` (offsets only grow within an attempt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputBatch {
    pub workload_id: WorkloadId,
    pub tenant_id: TenantId,
    pub attempt: u32,
    pub to: u64,
    pub received_at: OffsetDateTime,
    /// Redacted and cut already (`einsora_core::output::redact_line`).
    pub lines: Vec<PrintedLine>,
}

/// How much output the store keeps, in bytes of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputCaps {
    pub per_workload: u64,
    pub per_tenant: u64,
    pub total: u64,
}

/// Where a workload's output is up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputHead {
    pub workload_id: WorkloadId,
    /// The attempt its agent last shipped, and where in that attempt's source it is up to.
    pub attempt: u32,
    pub offset: u64,
    /// The number the next line gets.
    pub next_seq: u64,
    /// Bytes of text kept.
    pub bytes: u64,
    /// Lines dropped from its oldest end, by the caps and the retention sweep.
    pub dropped_lines: u64,
}

/// Which lines to read: after `after` (a line's `seq`), or else the last `tail`, or else from
/// the oldest kept; of those, only lines printed at or after `since`; at most `limit` (at most
/// [`MAX_PAGE_LINES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputQuery {
    pub after: Option<u64>,
    pub tail: Option<u32>,
    pub since: Option<OffsetDateTime>,
    pub limit: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLine {
    pub seq: u64,
    pub attempt: u32,
    pub stream: OutputStream,
    pub printed_at: OffsetDateTime,
    pub text: String,
    pub dropped_before: u64,
    /// Lines may be missing just before it, how many unknown (a container's rotated log).
    pub gap_before: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OutputPage {
    pub lines: Vec<OutputLine>,
    /// Lines dropped from the oldest end (caps, retention): none of them can be read.
    pub dropped_lines: u64,
    /// The number the next line will get: read `after` the last line to follow.
    pub next_seq: u64,
}
