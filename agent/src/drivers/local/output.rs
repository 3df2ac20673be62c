//! What workloads print, on its way from the drivers to the controller (ADR 0011). A driver
//! reads each workload's source (its log) from where the store has it up to, splits it into
//! lines, removes the workload's token from them, and hands batches to the outbox, which the sync
//! loop sends on its stream. The outbox is bounded: a batch that doesn't fit is read again on
//! the driver's next pass (its place doesn't move), so a controller that is away or slow holds
//! output back rather than lose it, within what the source keeps.

use std::collections::HashMap;
use std::sync::Arc;

use einsora_core::output::{MAX_LINE_BYTES, OutputStream, PrintedLine, PrintedOutput};
use time::OffsetDateTime;
use tokio::sync::{Mutex, mpsc};

use super::Wanted;

/// Batches waiting for the stream, across all workloads.
const CAPACITY: usize = 64;
/// Lines in one batch (the controller's bound).
pub const BATCH_LINES: usize = einsora_proto::convert::bounds::MAX_OUTPUT_LINES;
/// Bytes of text in one batch at most (besides one line of up to `MAX_LINE_BYTES`), well
/// within the message size the controller decodes.
pub const BATCH_BYTES: usize = 640 << 10;
/// How often the sync loop sends a batch at most: within the controller's rate for output
/// (20 a second after a burst), so a chatty workload never gets its machine flagged.
pub const PACE: std::time::Duration = std::time::Duration::from_millis(60);
/// What one pass reads of one workload's source at most.
pub const READ_LIMIT: usize = 1 << 20;

/// A batch, and the sync stream whose desired state said where it was read from.
#[derive(Debug)]
pub struct Batch {
    pub stream: u64,
    pub printed: PrintedOutput,
}

/// The drivers' end of the outbox.
#[derive(Debug, Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Batch>,
}

/// The sync loop's end: one session at a time holds it. It sends only its own stream's
/// batches: one read before the stream's first desired state may start past where the store
/// is up to (a batch lost with the old stream), and storing it would skip that batch's lines
/// when they are read again from the head.
pub type Inbox = Arc<Mutex<mpsc::Receiver<Batch>>>;

pub fn outbox() -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::channel(CAPACITY);
    (Outbox { tx }, Arc::new(Mutex::new(rx)))
}

impl Outbox {
    /// Hands the batch over; `false` when the outbox is full (or no session will take it).
    pub fn offer(&self, batch: Batch) -> bool {
        self.tx.try_send(batch).is_ok()
    }
}

/// Where a driver is in one workload's source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    offset: u64,
    /// The attempt whose source `offset` is in (a workload's offsets grow across attempts).
    attempt: u32,
    /// The sync stream whose first desired state set it.
    stream: u64,
    /// It is in the rest of a line cut at the read limit: skipped up to its newline, so no
    /// part of it (a secret's tail, say) is shipped without its start.
    skipping: bool,
}

/// A driver's place in each workload's source.
#[derive(Debug, Default)]
pub struct Cursors {
    places: HashMap<String, Place>,
}

impl Cursors {
    /// Where to read `w`'s source from: on the first desired state of each sync stream, where
    /// the store has it up to (what was in flight on a lost stream is read again; the store
    /// keeps each line once), else where this driver is.
    pub fn from(&mut self, w: &Wanted) -> u64 {
        let fresh = Place {
            offset: w.output.map_or(0, |h| h.offset),
            attempt: w.output.map_or(0, |h| h.attempt),
            stream: w.stream,
            skipping: false,
        };
        let place = self.places.entry(w.workload.clone()).or_insert(fresh);
        if place.stream != w.stream {
            *place = fresh;
        }
        place.offset
    }

    /// Where it is in `workload`'s source, if it has read it.
    pub fn at(&self, workload: &str) -> Option<u64> {
        self.places.get(workload).map(|p| p.offset)
    }

    /// Whether `workload`'s place is in `attempt`'s own source (not where an earlier attempt's
    /// ended).
    pub fn in_attempt(&self, workload: &str, attempt: u32) -> bool {
        self.places
            .get(workload)
            .is_some_and(|p| p.attempt == attempt && p.offset > 0)
    }

    /// Whether `workload`'s next read starts in a cut line's rest.
    pub fn skipping(&self, workload: &str) -> bool {
        self.places.get(workload).is_some_and(|p| p.skipping)
    }

    /// `attempt`'s source was read and shipped up to `to`.
    pub fn advanced(&mut self, workload: &str, attempt: u32, to: u64) {
        if let Some(place) = self.places.get_mut(workload)
            && to > place.offset
        {
            place.offset = to;
            place.attempt = attempt;
        }
    }

    pub fn forget(&mut self, workload: &str) {
        self.places.remove(workload);
    }
}

/// The complete lines of `bytes` (read from offset `from` of a source), each cut to
/// [`MAX_LINE_BYTES`] with its token removed, where the last one ends, and whether the source is
/// then in the rest of a cut line. A trailing line with no newline yet waits for the next read,
/// unless it is longer than a line may be already (then it is taken cut, and the rest of it
/// skipped up to its newline: `skip` on the next read). `dropped` is counted before the first
/// line.
pub fn lines(
    bytes: &[u8],
    from: u64,
    token: Option<&str>,
    dropped: u64,
    skip: bool,
    now: OffsetDateTime,
) -> (Vec<PrintedLine>, u64, bool) {
    let mut lines = Vec::new();
    let mut start = 0;
    if skip {
        match bytes.iter().position(|b| *b == b'\n') {
            Some(newline) => start = newline + 1,
            None => return (lines, from + bytes.len() as u64, true),
        }
    }
    let mut skipping = false;
    let mut dropped = dropped;
    let mut take = |text: &[u8], end: usize, lines: &mut Vec<PrintedLine>| {
        let text = String::from_utf8_lossy(text);
        let text = text.strip_suffix('\r').unwrap_or(&text);
        lines.push(PrintedLine {
            stream: OutputStream::Stdout,
            printed_at: now,
            text: einsora_core::output::redact_line(text, token),
            dropped_before: std::mem::take(&mut dropped),
            gap_before: false,
            end: from + end as u64,
        });
    };
    while let Some(newline) = bytes[start..].iter().position(|b| *b == b'\n') {
        let end = start + newline + 1;
        take(&bytes[start..end - 1], end, &mut lines);
        start = end;
    }
    // A trailing line already longer than a line may be is taken cut now; its rest is skipped.
    if bytes.len() - start > MAX_LINE_BYTES {
        take(&bytes[start..], bytes.len(), &mut lines);
        start = bytes.len();
        skipping = true;
    }
    debug_assert!(lines.iter().all(|l| l.text.len() <= MAX_LINE_BYTES));
    (lines, from + start as u64, skipping)
}

/// Reads up to where `lines` found (`end`, and whether it is in a cut line's rest), ships the
/// lines, and moves its place past what was taken.
pub fn ship_read(
    outbox: &Outbox,
    cursors: &mut Cursors,
    w: &Wanted,
    read: (Vec<PrintedLine>, u64, bool),
) {
    let (lines, end, skipping) = read;
    if lines.is_empty() {
        // Nothing to ship: only a cut line's rest was skipped.
        if let Some(place) = cursors.places.get_mut(&w.workload) {
            place.offset = place.offset.max(end);
            place.skipping = skipping;
        }
        return;
    }
    ship(outbox, cursors, w, lines);
    if let Some(place) = cursors.places.get_mut(&w.workload)
        && place.offset >= end
    {
        place.skipping = skipping;
    }
}

/// Offers `lines` of `w` in batches, advancing its place past each one taken; stops at the
/// first the outbox has no room for.
pub fn ship(outbox: &Outbox, cursors: &mut Cursors, w: &Wanted, lines: Vec<PrintedLine>) {
    let mut lines = lines.into_iter().peekable();
    while lines.peek().is_some() {
        let mut batch: Vec<PrintedLine> = Vec::new();
        let mut bytes = 0;
        while batch.len() < BATCH_LINES && bytes < BATCH_BYTES {
            let Some(line) = lines.next() else { break };
            bytes += line.text.len();
            batch.push(line);
        }
        let to = batch.last().map_or(0, |l| l.end);
        let printed = PrintedOutput {
            workload_id: match w.workload.parse() {
                Ok(id) => id,
                Err(_) => return,
            },
            attempt: w.attempt,
            to,
            lines: batch,
        };
        if !outbox.offer(Batch {
            stream: w.stream,
            printed,
        }) {
            return;
        }
        cursors.advanced(&w.workload, w.attempt, to);
    }
}

#[cfg(test)]
mod tests;
