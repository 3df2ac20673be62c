//! A linux-native workload's output as a source with offsets (local/output.rs): its log
//! (`output.log`, stdout and stderr together, in the agent's own directory; a VM's serial
//! console, which the libvirt driver reads the same way) and the bytes
//! rotated out of it before (`output.base`, with the lines of them that weren't read first), so
//! an offset is the bytes the workload ever wrote there and survives rotations and agent
//! restarts. The worker rotates only what was read, unless the log is full: then what wasn't
//! read is counted as dropped. Bytes the workload writes while the log is being rotated, or a
//! crash between emptying the log and recording its base, can still lose lines uncounted.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use super::super::local::Wanted;
use super::super::local::output::{self as shipping, Cursors, Outbox, READ_LIMIT};

pub const LOG: &str = "output.log";
const BASE: &str = "output.base";

/// What one read of the source gave.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    pub bytes: Vec<u8>,
    /// The offset of its first byte.
    pub from: u64,
    /// Lines lost to a rotation between the read before and this one (at least one when any
    /// bytes were: their lines can't be counted any more).
    pub dropped: u64,
}

/// The offset the log's first byte has.
pub fn base(dir: &Path) -> u64 {
    recorded(dir).0
}

/// The log's base, and the lines the last rotation dropped unread.
fn recorded(dir: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(dir.join(BASE)).unwrap_or_default();
    let mut numbers = text.split_whitespace().map(|n| n.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// Up to `READ_LIMIT` bytes of the source from `offset`; nothing where there is no log yet.
pub fn read(dir: &Path, offset: u64) -> std::io::Result<Chunk> {
    let log = dir.join(LOG);
    let meta = match std::fs::symlink_metadata(&log) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => return Ok(Chunk::default()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Chunk::default()),
        Err(e) => return Err(e),
    };
    let (base, rotated_unread) = recorded(dir);
    let (start, dropped) = if offset < base {
        (0, rotated_unread.max(1))
    } else {
        (offset - base, 0)
    };
    if start >= meta.len() {
        return Ok(Chunk {
            bytes: Vec::new(),
            from: base + start.min(meta.len()),
            dropped,
        });
    }
    let mut file = std::fs::File::open(&log)?;
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(READ_LIMIT as u64).read_to_end(&mut bytes)?;
    Ok(Chunk {
        bytes,
        from: base + start,
        dropped,
    })
}

/// Offers what `w` wrote to the log in `dir` since it was last read (within a read's limit),
/// `token` removed from its lines.
pub fn ship(dir: &Path, outbox: &Outbox, cursors: &mut Cursors, w: &Wanted, token: Option<&str>) {
    let from = cursors.from(w);
    let chunk = match read(dir, from) {
        Ok(chunk) => chunk,
        Err(e) => {
            tracing::debug!(workload = %w.workload, error = %e, "can't read its output yet");
            return;
        }
    };
    if chunk.bytes.is_empty() {
        return;
    }
    let skip = cursors.skipping(&w.workload);
    let now = time::OffsetDateTime::now_utc();
    let read = shipping::lines(&chunk.bytes, chunk.from, token, chunk.dropped, skip, now);
    shipping::ship_read(outbox, cursors, w, read);
}

/// The log was emptied after holding `len` bytes, `dropped` lines of them unread: its next
/// byte's offset moves past them. Written whole (a temporary file renamed over it).
pub fn rotated(dir: &Path, len: u64, dropped: u64) -> std::io::Result<()> {
    let next = base(dir) + len;
    let tmp = dir.join("output.base.tmp");
    std::fs::write(&tmp, format!("{next} {dropped}"))?;
    std::fs::rename(&tmp, dir.join(BASE))
}

/// Keeps the log in `dir` within `limit` bytes: past half of it, what was read (up to
/// `read_to`, an offset) goes and the last half is moved to `output.log.1` (replacing the one
/// before), and the log starts again. What hasn't been read waits while the log is within the
/// limit; past it, it goes too, and its lines are counted as dropped. The writer must append
/// (`O_APPEND`), so its next write lands at the emptied log's start.
pub fn keep_bounded(dir: &Path, limit: u64, read_to: Option<u64>) -> std::io::Result<()> {
    let log = dir.join(LOG);
    let half = (limit / 2).max(1);
    let meta = match std::fs::symlink_metadata(&log) {
        Ok(meta) if meta.is_file() && meta.len() > half => meta,
        _ => return Ok(()),
    };
    let base = base(dir);
    let unread_from = read_to.unwrap_or(base).saturating_sub(base).min(meta.len());
    if unread_from < meta.len() && meta.len() <= limit {
        return Ok(());
    }
    let kept = log.with_extension("log.1");
    match std::fs::remove_file(&kept) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut from = std::fs::File::open(&log)?;
    from.seek(SeekFrom::Start(unread_from))?;
    let mut unread = Vec::new();
    (&mut from)
        .take(meta.len() - unread_from)
        .read_to_end(&mut unread)?;
    let dropped = unread.iter().filter(|b| **b == b'\n').count() as u64;
    from.seek(SeekFrom::Start(meta.len() - half))?;
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&kept)?;
    std::io::copy(&mut from.take(half), &mut to)?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)?
        .set_len(0)?;
    // Offsets into its output run on past what the log held.
    rotated(dir, meta.len(), dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_run_on_across_rotations_and_what_rotated_unread_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path(), 0).unwrap(), Chunk::default(), "no log yet");
        std::fs::write(dir.path().join(LOG), b"one\ntwo\n").unwrap();
        let chunk = read(dir.path(), 4).unwrap();
        assert_eq!((chunk.bytes.as_slice(), chunk.from), (&b"two\n"[..], 4));
        rotated(dir.path(), 8, 1).unwrap();
        std::fs::write(dir.path().join(LOG), b"three\n").unwrap();
        let chunk = read(dir.path(), 8).unwrap();
        assert_eq!(
            (chunk.bytes.as_slice(), chunk.from, chunk.dropped),
            (&b"three\n"[..], 8, 0)
        );
        let late = read(dir.path(), 4).unwrap();
        assert_eq!(
            (late.from, late.dropped),
            (8, 1),
            "`two` rotated out unread"
        );
        rotated(dir.path(), 6, 3).unwrap();
        let later = read(dir.path(), 8).unwrap();
        assert_eq!(
            (later.from, later.dropped),
            (14, 3),
            "the count a rotation recorded"
        );
        std::fs::write(dir.path().join(LOG), b"").unwrap();
        let caught_up = read(dir.path(), 14).unwrap();
        assert_eq!((caught_up.bytes.len(), caught_up.from), (0, 14));
    }
}
