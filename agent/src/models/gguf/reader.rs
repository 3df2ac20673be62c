//! Bounded reads from a GGUF file.

use std::fs::File;
use std::io::{BufReader, Read};

use super::problem::{GgufProblem, Section, io};

/// Bounded reads: every read or skip is checked against the file's length (and, in the
/// metadata, against the metadata limit) before it happens.
pub(super) struct Reader {
    pub(super) inner: BufReader<File>,
    pub(super) pos: u64,
    pub(super) len: u64,
    pub(super) section: Section,
    /// (where the metadata starts, its byte limit) while reading it.
    pub(super) metadata: (u64, u64),
}

impl Reader {
    fn need(&self, n: u64) -> Result<(), GgufProblem> {
        let end = self.pos.checked_add(n);
        let (start, limit) = self.metadata;
        if end.is_none_or(|end| end - start > limit) {
            return Err(GgufProblem::MetadataTooLarge { limit });
        }
        if end.is_none_or(|end| end > self.len) {
            return Err(GgufProblem::Truncated(self.section));
        }
        Ok(())
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<(), GgufProblem> {
        self.need(buf.len() as u64)?;
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            // The file shrank while being read.
            std::io::ErrorKind::UnexpectedEof => GgufProblem::Truncated(self.section),
            _ => io(e),
        })?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], GgufProblem> {
        let mut buf = [0; N];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    pub(super) fn u32(&mut self) -> Result<u32, GgufProblem> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(super) fn u64(&mut self) -> Result<u64, GgufProblem> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub(super) fn skip(&mut self, n: u64) -> Result<(), GgufProblem> {
        self.need(n)?;
        let by = i64::try_from(n).map_err(|_| GgufProblem::Truncated(self.section))?;
        self.inner.seek_relative(by).map_err(io)?;
        self.pos += n;
        Ok(())
    }

    fn string_len(&mut self, limit: u64) -> Result<u64, GgufProblem> {
        let len = self.u64()?;
        if len > limit {
            return Err(GgufProblem::StringTooLong {
                section: self.section,
                len,
                limit,
            });
        }
        Ok(len)
    }

    pub(super) fn string(&mut self, limit: u64) -> Result<Vec<u8>, GgufProblem> {
        let len = self.string_len(limit)?;
        self.need(len)?;
        let mut buf = vec![0; len as usize];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    pub(super) fn skip_string(&mut self, limit: u64) -> Result<(), GgufProblem> {
        let len = self.string_len(limit)?;
        self.skip(len)
    }
}
