//! A container's output as a source with offsets (local/output.rs): the engine's log of it,
//! each entry with the engine's timestamp, read `since` the last one shipped. An offset is
//! that timestamp in nanoseconds since the epoch, so it survives agent restarts and every
//! attempt's container continues where the one before ended. The engine's own log is capped
//! (two files of half `EINSORA_AGENT_LOG_LIMIT`): what it rotated out before it was read is
//! gone, and the engine keeps no count of it. It is marked all the same ([`gap`]): a read
//! `since` an offset of this container's own log starts with the entry at that offset (the
//! engine's `since` keeps an entry at exactly that time) unless the file holding it was rotated
//! out, and then the first line read says lines may be missing before it (`gap_before`). The
//! first read of a container can only go by size: once it is as big as one of the engine's
//! files, the log has rotated, and may have rotated twice. It can't say how many are missing,
//! and now and then none are (the entry was the last of its file; the log rotated only once).
//!
//! The engine splits a line longer than 16 KiB into entries with the first part's time: they
//! are one line here, cut at [`MAX_LINE_BYTES`] like any other, and the parts that come after
//! it was read (at the offset already) are its cut rest.
//!
//! Everything here is the workload's: any bytes, any frame sizes. Frames that don't parse end
//! the read there; nothing panics on them.

use einsora_core::output::{MAX_LINE_BYTES, OutputStream, PrintedLine};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// One entry of the engine's log, as `GET /containers/{id}/logs?timestamps=1` frames it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub stream: OutputStream,
    pub at: OffsetDateTime,
    pub text: Vec<u8>,
}

/// The `since` query value for entries after `offset` (nanoseconds since the epoch).
pub fn since(offset: u64) -> String {
    format!("{}.{:09}", offset / 1_000_000_000, offset % 1_000_000_000)
}

/// The offset of an entry printed at `at`.
pub fn offset_of(at: OffsetDateTime) -> u64 {
    u64::try_from(at.unix_timestamp_nanos()).unwrap_or(0)
}

/// The entries of a non-TTY container's multiplexed log: frames of an 8-byte header (stream,
/// three zero bytes, the payload's length big-endian) and a payload of `<RFC 3339 time> <text>`.
pub fn parse(body: &[u8]) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut rest = body;
    while rest.len() >= 8 {
        let stream = match rest[0] {
            1 => OutputStream::Stdout,
            2 => OutputStream::Stderr,
            _ => break,
        };
        let len = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        let Some(payload) = rest.get(8..8 + len) else {
            break;
        };
        rest = &rest[8 + len..];
        let Some(space) = payload.iter().position(|b| *b == b' ') else {
            continue;
        };
        let Some(at) = std::str::from_utf8(&payload[..space])
            .ok()
            .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
        else {
            continue;
        };
        let mut text = &payload[space + 1..];
        if let Some(line) = text.strip_suffix(b"\n") {
            text = line;
        }
        entries.push(Entry {
            stream,
            at,
            text: text.to_vec(),
        });
    }
    entries
}

/// Whether lines may be missing before what a read `since` `offset` got: `own_offset` when
/// `offset` is an entry of this container's own log (then it is missing only if that entry is
/// gone), else this is the container's first read, which is suspect once it holds as much text
/// as one of the engine's files (`file_bytes`).
pub fn gap(entries: &[Entry], offset: u64, own_offset: bool, file_bytes: u64) -> bool {
    if entries.is_empty() {
        return false;
    }
    if own_offset {
        return !entries.iter().any(|e| offset_of(e.at) == offset);
    }
    entries.iter().map(|e| e.text.len() as u64).sum::<u64>() >= file_bytes
}

/// The entries after `offset` as lines, their token removed; each ends at its own offset, the
/// first one marked `gap_before` when [`gap`] said so. In the order of their times: the engine
/// interleaves stdout's and stderr's not quite in order. The parts of a line the engine split
/// (one stream, one time) are joined, and a line is kept only up to a little past
/// [`MAX_LINE_BYTES`] (enough to redact a credential across the cut).
pub fn lines(
    mut entries: Vec<Entry>,
    offset: u64,
    gap_before: bool,
    token: Option<&str>,
) -> Vec<PrintedLine> {
    const KEPT: usize = MAX_LINE_BYTES + 256;
    entries.sort_by_key(|e| e.at);
    let mut joined: Vec<Entry> = Vec::with_capacity(entries.len());
    for e in entries {
        match joined.last_mut() {
            Some(last) if last.at == e.at && last.stream == e.stream => {
                let room = KEPT.saturating_sub(last.text.len());
                last.text
                    .extend_from_slice(&e.text[..e.text.len().min(room)]);
            }
            _ => joined.push(e),
        }
    }
    let mut gap = gap_before;
    joined
        .into_iter()
        .filter(|e| offset_of(e.at) > offset)
        .map(|e| {
            let text = String::from_utf8_lossy(&e.text);
            PrintedLine {
                stream: e.stream,
                printed_at: e.at,
                text: einsora_core::output::redact_line(text.trim_end_matches('\r'), token),
                dropped_before: 0,
                gap_before: std::mem::take(&mut gap),
                end: offset_of(e.at),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stream: u8, payload: &str) -> Vec<u8> {
        let mut f = vec![stream, 0, 0, 0];
        f.extend((payload.len() as u32).to_be_bytes());
        f.extend(payload.as_bytes());
        f
    }

    #[test]
    fn frames_become_entries_with_their_streams_and_times() {
        let mut body = frame(1, "2026-12-02T10:00:00.000000001Z hello\n");
        body.extend(frame(2, "2026-12-02T10:00:01.5Z oops key=abc\r\n"));
        body.extend(frame(1, "2026-12-02T10:00:01.2Z in between\n"));
        let entries = parse(&body);
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].stream, OutputStream::Stdout);
        assert_eq!(entries[0].text, b"hello");
        let first = offset_of(entries[0].at);
        assert_eq!(since(first), "1796205600.000000001");
        assert!(
            !gap(&entries, first, true, 1 << 20),
            "the entry at the offset is there"
        );
        let lines = lines(entries, first, false, Some("abc"));
        assert_eq!(lines.len(), 2, "after the offset only");
        assert_eq!(lines[0].text, "in between", "in the order of their times");
        assert_eq!(lines[1].stream, OutputStream::Stderr);
        assert_eq!(lines[1].text, "oops key=[redacted]");
        assert_eq!(lines[1].end, first + 1_499_999_999);
    }

    /// A read since an offset of the container's own log that no longer holds the entry there
    /// (its file rotated out) is a gap, marked on its first line only; a first read is one
    /// once it holds a file's worth; a read with nothing new is none.
    #[test]
    fn a_rotated_out_offset_marks_a_gap_before_the_first_line() {
        let mut body = frame(1, "2026-12-02T10:00:05Z after the rotation\n");
        body.extend(frame(2, "2026-12-02T10:00:06Z and on\n"));
        let entries = parse(&body);
        let read_to = offset_of(parse(&frame(1, "2026-12-02T10:00:01Z x\n"))[0].at);
        assert!(gap(&entries, read_to, true, 1 << 20));
        let gaps: Vec<bool> = lines(entries.clone(), read_to, true, None)
            .iter()
            .map(|l| l.gap_before)
            .collect();
        assert_eq!(gaps, [true, false]);
        let text = ("after the rotation".len() + "and on".len()) as u64;
        assert!(
            !gap(&entries, read_to, false, text + 1),
            "a first read, smaller than a file"
        );
        assert!(
            gap(&entries, read_to, false, text),
            "a first read of a file's worth"
        );
        assert!(!gap(&[], read_to, true, 1));
    }

    /// The parts of a line the engine split share its time and stream: one line, kept to a
    /// little past the longest line, so a credential across a part's end is still redacted.
    #[test]
    fn a_line_split_by_the_engine_is_one_line() {
        // The token runs across the cut: whole only in the joined line's margin past it.
        let part = "y".repeat(MAX_LINE_BYTES - 9);
        let mut body = frame(1, &format!("2026-12-02T10:00:01Z {part}"));
        body.extend(frame(1, "2026-12-02T10:00:01Z secretsecret and the rest\n"));
        body.extend(frame(
            1,
            &format!("2026-12-02T10:00:01Z {}\n", "z".repeat(1 << 20)),
        ));
        body.extend(frame(2, "2026-12-02T10:00:01Z another stream\n"));
        let lines = lines(parse(&body), 0, false, Some("secretsecret"));
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].text.len() <= MAX_LINE_BYTES);
        assert!(
            !lines[0].text.contains("secret"),
            "{}",
            &lines[0].text[part.len()..]
        );
        assert_eq!(lines[1].text, "another stream");
    }

    #[test]
    fn what_isnt_a_frame_ends_the_read_without_a_panic() {
        let mut body = frame(1, "2026-12-02T10:00:00Z kept\n");
        body.extend([1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, b'x']);
        assert_eq!(parse(&body).len(), 1, "a frame longer than the body");
        assert_eq!(
            parse(&[9, 0, 0, 0, 0, 0, 0, 1, b'x']),
            vec![],
            "no such stream"
        );
        let untimed = frame(1, "not-a-time text\n");
        assert_eq!(
            parse(&untimed),
            vec![],
            "an entry without its time is skipped"
        );
        assert_eq!(parse(&[1, 0, 0]), vec![]);
    }
}
