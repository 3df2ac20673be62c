//! Marking each line with the process's role: in front of a readable line, or as the first
//! field of a JSON line. The fmt layer writes each event as one `write_all` of the whole line,
//! so a writer that consumes every buffer in one go sees one line per call.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

/// The start of a readable line from `role`, the same for a supervisor and its children.
pub fn terminal_prefix(role: &str) -> String {
    format!("{role:<10} | ")
}

/// A writer maker whose lines carry a tag; an empty tag writes lines untouched.
#[derive(Debug)]
pub(super) struct Tagged<M> {
    inner: M,
    tag: Vec<u8>,
    json: bool,
}

impl<M> Tagged<M> {
    pub(super) fn prefix(inner: M, prefix: String) -> Self {
        Tagged {
            inner,
            tag: prefix.into_bytes(),
            json: false,
        }
    }

    /// `role` is a plain word (a role's name), so it needs no JSON escaping.
    pub(super) fn json_role(inner: M, role: Option<&str>) -> Self {
        let tag = role.map_or_else(Vec::new, |r| format!("\"role\":\"{r}\",").into_bytes());
        Tagged {
            inner,
            tag,
            json: true,
        }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Tagged<M> {
    type Writer = TaggedWriter<'a, M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        TaggedWriter {
            inner: self.inner.make_writer(),
            tag: &self.tag,
            json: self.json,
        }
    }
}

#[derive(Debug)]
pub(super) struct TaggedWriter<'a, W> {
    inner: W,
    tag: &'a [u8],
    json: bool,
}

impl<W: Write> Write for TaggedWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.tag.is_empty() {
            return self.inner.write(buf);
        }
        let mut line = Vec::with_capacity(self.tag.len() + buf.len());
        match buf.strip_prefix(b"{") {
            Some(rest) if self.json => {
                line.push(b'{');
                line.extend_from_slice(self.tag);
                line.extend_from_slice(rest);
            }
            _ if self.json => line.extend_from_slice(buf),
            _ => {
                line.extend_from_slice(self.tag);
                line.extend_from_slice(buf);
            }
        }
        // One write of the whole line, so processes appending to one file don't interleave.
        self.inner.write_all(&line)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(tagged: Tagged<Vec<u8>>, line: &[u8]) -> String {
        let mut writer = TaggedWriter {
            inner: tagged.inner,
            tag: &tagged.tag,
            json: tagged.json,
        };
        writer.write_all(line).unwrap();
        String::from_utf8(writer.inner).unwrap()
    }

    #[test]
    fn json_lines_get_the_role_as_first_field() {
        let line = br#"{"level":"INFO"}"#;
        assert_eq!(
            written(Tagged::json_role(Vec::new(), Some("api")), line),
            r#"{"role":"api","level":"INFO"}"#
        );
        assert_eq!(
            written(Tagged::json_role(Vec::new(), None), line),
            r#"{"level":"INFO"}"#
        );
    }

    #[test]
    fn readable_lines_get_the_prefix() {
        let tagged = Tagged::prefix(Vec::new(), terminal_prefix("up"));
        assert_eq!(written(tagged, b"ready\n"), "up         | ready\n");
        let untagged = Tagged::prefix(Vec::new(), String::new());
        assert_eq!(written(untagged, b"ready\n"), "ready\n");
    }
}
