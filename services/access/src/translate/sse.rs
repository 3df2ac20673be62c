//! An engine's streamed chat answer (server-sent events of chat completion chunks) turned, as
//! it passes, into another API's events. The engine's stream is attacker input: a line is
//! looked at up to [`MAX_LINE`], each `data:` line must be JSON or `[DONE]`, and anything else
//! (a garbled event, an error event, a stream that breaks off or ends before it finished) ends
//! the answer with one error event in the client's API's shape. Nothing here panics.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::body::{Body, Bytes};
use hyper::body::Frame;
use serde_json::Value;

/// The longest line of the engine's stream looked at (llama.cpp's chunks are a few hundred
/// bytes).
pub(super) const MAX_LINE: usize = 256 << 10;

/// One API's events, made from the engine's chunks.
pub(super) trait Events: Send + Unpin + 'static {
    /// One chunk of the engine's stream (a JSON value, anything at all).
    fn chunk(&mut self, chunk: &Value, out: &mut Vec<u8>) -> Result<(), String>;
    /// The engine said `[DONE]`, or its stream ended: the closing events, or why it can't
    /// close.
    fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), String>;
    /// The one error event that ends the answer.
    fn fail(&mut self, message: &str, out: &mut Vec<u8>);
}

/// One `event:`/`data:` pair.
pub(super) fn event(out: &mut Vec<u8>, kind: &str, data: &Value) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// What the engine's `{"error": …}` chunk said, bounded.
pub(super) fn engine_error(chunk: &Value) -> Option<String> {
    let error = chunk.get("error")?;
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .unwrap_or("no message");
    Some(format!("the engine failed: {}", bounded(message, 500)))
}

/// At most `max` bytes of `text`, cut at a character boundary.
pub(super) fn bounded(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The engine's streamed answer, translated.
pub(super) struct Translated<E> {
    inner: Body,
    events: E,
    /// The partial line the last frame ended in.
    line: Vec<u8>,
    ended: bool,
}

impl<E: Events> Translated<E> {
    pub(super) fn new(inner: Body, events: E) -> Self {
        Translated {
            inner,
            events,
            line: Vec::new(),
            ended: false,
        }
    }

    /// The events for one frame of the engine's stream.
    fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) {
        let mut rest = data;
        while !self.ended {
            let Some(end) = rest.iter().position(|b| *b == b'\n') else {
                if self.line.len() + rest.len() > MAX_LINE {
                    self.fail("the engine sent an event line over 256 KiB", out);
                } else {
                    self.line.extend_from_slice(rest);
                }
                return;
            };
            if self.line.len() + end > MAX_LINE {
                self.fail("the engine sent an event line over 256 KiB", out);
                return;
            }
            if self.line.is_empty() {
                self.line_of(&rest[..end], out);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&rest[..end]);
                self.line_of(&line, out);
            }
            rest = &rest[end + 1..];
        }
    }

    fn line_of(&mut self, line: &[u8], out: &mut Vec<u8>) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // Comments, `event:`, `id:` and blank lines carry nothing of a chat stream.
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            let finished = self.events.finish(out);
            self.end(finished, out);
            return;
        }
        let outcome = match serde_json::from_slice::<Value>(data) {
            Ok(chunk) => match engine_error(&chunk) {
                Some(message) => Err(message),
                None => self.events.chunk(&chunk, out),
            },
            Err(_) => Err("the engine sent an event that is not JSON".to_owned()),
        };
        if let Err(message) = outcome {
            self.fail(&message, out);
        }
    }

    fn end(&mut self, finished: Result<(), String>, out: &mut Vec<u8>) {
        match finished {
            Ok(()) => self.ended = true,
            Err(message) => self.fail(&message, out),
        }
    }

    fn fail(&mut self, message: &str, out: &mut Vec<u8>) {
        if !self.ended {
            self.ended = true;
            self.events.fail(message, out);
        }
    }
}

impl<E: Events> hyper::body::Body for Translated<E> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let mut out = Vec::new();
        while !this.ended && out.is_empty() {
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        this.feed(data, &mut out);
                    }
                }
                Some(Err(_)) => this.fail("the engine's answer broke off", &mut out),
                None => {
                    // Whatever the last line held, without its newline.
                    let line = std::mem::take(&mut this.line);
                    if !line.is_empty() {
                        this.line_of(&line, &mut out);
                    }
                    if !this.ended {
                        let finished = this.events.finish(&mut out);
                        this.end(finished, &mut out);
                    }
                }
            }
        }
        if out.is_empty() {
            Poll::Ready(None)
        } else {
            Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))))
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Writes what it was given, to check the framing alone.
    #[derive(Default)]
    struct Echo {
        finished: bool,
    }

    impl Events for Echo {
        fn chunk(&mut self, chunk: &Value, out: &mut Vec<u8>) -> Result<(), String> {
            event(out, "chunk", chunk);
            Ok(())
        }
        fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
            self.finished = true;
            out.extend_from_slice(b"finished\n");
            Ok(())
        }
        fn fail(&mut self, message: &str, out: &mut Vec<u8>) {
            out.extend_from_slice(format!("failed: {message}\n").as_bytes());
        }
    }

    /// The whole translated answer to an engine stream sent in these frames.
    pub(in crate::translate) async fn run<E: Events>(events: E, frames: &[&[u8]]) -> String {
        let frames: Vec<Result<Bytes, std::io::Error>> =
            frames.iter().map(|f| Ok(Bytes::from(f.to_vec()))).collect();
        let inner = Body::from_stream(tokio_stream::iter(frames));
        let body = Body::new(Translated::new(inner, events));
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn lines_are_framed_across_frames_and_bounded() {
        let out = run(
            Echo::default(),
            &[
                b": ping\n\nda",
                b"ta: {\"a\":1}\r\n\ndata:{\"b\":2}\n",
                b"data: [DONE]\n\n",
            ],
        )
        .await;
        assert_eq!(
            out,
            "event: chunk\ndata: {\"a\":1}\n\nevent: chunk\ndata: {\"b\":2}\n\nfinished\n"
        );
        // Nothing after [DONE] is looked at.
        let out = run(Echo::default(), &[b"data: [DONE]\n\ndata: {\"c\":3}\n\n"]).await;
        assert_eq!(out, "finished\n");
        // A last line without its newline still counts.
        let out = run(Echo::default(), &[b"data: {\"a\":1}"]).await;
        assert_eq!(out, "event: chunk\ndata: {\"a\":1}\n\nfinished\n");

        let long = vec![b'x'; MAX_LINE + 1];
        for frames in [vec![&b"data: "[..], &long[..]], vec![&long[..], b"\n"]] {
            let out = run(Echo::default(), &frames).await;
            assert_eq!(out, "failed: the engine sent an event line over 256 KiB\n");
        }
        for (garbled, says) in [
            (&b"data: {\"a\":\n\n"[..], "not JSON"),
            (b"data: \xff\xfe\n\n", "not JSON"),
            (
                b"data: {\"error\":{\"message\":\"slot died\"}}\n\n",
                "the engine failed: slot died",
            ),
        ] {
            let out = run(Echo::default(), &[garbled, b"data: {\"a\":1}\n\n"]).await;
            assert!(out.starts_with("failed: "), "{out}");
            assert!(out.contains(says), "{out}");
            assert_eq!(
                out.matches('\n').count(),
                1,
                "one error, then nothing: {out}"
            );
        }
    }

    #[test]
    fn text_is_bounded_at_a_character() {
        assert_eq!(bounded("héllo", 2), "h");
        assert_eq!(bounded("héllo", 3), "hé");
        assert_eq!(bounded("hi", 10), "hi");
    }
}
