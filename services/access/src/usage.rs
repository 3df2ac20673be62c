//! Tokens an endpoint's answers say they used (OpenAI's `usage`: `prompt_tokens`,
//! `completion_tokens`), counted in `einsora_endpoint_tokens_total` by class and kind as the
//! answer passes: read from a JSON answer once it has come whole (up to [`MAX_JSON`]), or from
//! the last `data:` event of a streamed one that carries `usage` (OpenAI clients ask for it
//! with `stream_options.include_usage`). What the worker says is its own word: a count is
//! taken only if it is a whole number up to [`MAX_TOKENS`], and nothing of it is trusted
//! beyond the metric.

use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};

use einsora_runtime::metrics::{self, Counters};
use hyper::body::{Body, Bytes, Frame, SizeHint};
use serde_json::Value;

/// The most of a JSON answer kept to read its usage.
const MAX_JSON: usize = 1 << 20;
/// The longest `data:` line of a streamed answer looked at.
const MAX_EVENT: usize = 64 << 10;
/// A count above this is not believed.
const MAX_TOKENS: u64 = 10_000_000;

static TOKENS: LazyLock<Counters<2>> = LazyLock::new(|| {
    metrics::register(
        "einsora_endpoint_tokens",
        "Tokens endpoints' answers said they used, by placed class and kind (prompt, completion).",
        Counters::default(),
    )
});

/// How an answer carries its usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Json,
    Events,
}

impl Shape {
    /// From the answer's content type; `None` for anything else (nothing is read).
    pub(crate) fn of(content_type: Option<&str>) -> Option<Shape> {
        let essence = content_type?.split(';').next()?.trim();
        match essence {
            "application/json" => Some(Shape::Json),
            "text/event-stream" => Some(Shape::Events),
            _ => None,
        }
    }
}

/// An answer's body, passed on untouched while its usage is looked for.
pub(crate) struct Usage<B> {
    inner: B,
    shape: Shape,
    class: String,
    seen: Vec<u8>,
    /// The last usage found (a streamed answer may repeat it).
    usage: Option<(u64, u64)>,
    counted: bool,
}

impl<B> Usage<B> {
    pub(crate) fn new(inner: B, shape: Shape, class: &str) -> Self {
        Usage {
            inner,
            shape,
            class: class.to_owned(),
            seen: Vec::new(),
            usage: None,
            counted: false,
        }
    }

    fn look(&mut self, data: &[u8]) {
        match self.shape {
            Shape::Json => {
                if self.seen.len() + data.len() <= MAX_JSON {
                    self.seen.extend_from_slice(data);
                } else {
                    self.seen.clear();
                    self.shape_off();
                }
            }
            Shape::Events => {
                // Each complete line once, where it lies: the partial line a frame ends in
                // is kept for the next (up to MAX_EVENT: a longer one is no usage event).
                let mut rest = data;
                while let Some(end) = rest.iter().position(|b| *b == b'\n') {
                    if self.seen.is_empty() {
                        self.event(&rest[..end]);
                    } else {
                        self.seen.extend_from_slice(&rest[..end]);
                        let line = std::mem::take(&mut self.seen);
                        self.event(&line);
                    }
                    rest = &rest[end + 1..];
                }
                if self.seen.len() + rest.len() <= MAX_EVENT {
                    self.seen.extend_from_slice(rest);
                } else {
                    self.seen.clear();
                }
            }
        }
    }

    /// A streamed answer's line: only a `data:` one naming `usage` is parsed.
    fn event(&mut self, line: &[u8]) {
        let Some(json) = line.strip_prefix(b"data:") else {
            return;
        };
        if line.len() > MAX_EVENT || !names_usage(json) {
            return;
        }
        if let Some(usage) = usage_in(json) {
            self.usage = Some(usage);
        }
    }

    /// Stops looking (an answer too large to keep).
    fn shape_off(&mut self) {
        self.counted = true;
    }

    fn count(&mut self) {
        if self.counted {
            return;
        }
        self.counted = true;
        if self.shape == Shape::Json {
            self.usage = usage_in(&self.seen);
        }
        if let Some((prompt, completion)) = self.usage {
            for (kind, n) in [("prompt", prompt), ("completion", completion)] {
                let labels = [("class", self.class.clone()), ("kind", kind.to_owned())];
                TOKENS.get_or_create(&labels).inc_by(n);
            }
        }
    }
}

impl<B> Drop for Usage<B> {
    /// An answer cut short (the caller went away) counts what usage it had shown.
    fn drop(&mut self) {
        if self.shape == Shape::Events {
            self.count();
        }
    }
}

/// Whether `json` names `usage` with a value other than `null` (OpenAI's streamed chunks say
/// `"usage":null` on every event but the last): only those are parsed.
fn names_usage(json: &[u8]) -> bool {
    json.windows(7)
        .enumerate()
        .filter(|(_, w)| *w == b"\"usage\"")
        .any(|(at, _)| {
            let rest = json[at + 7..].trim_ascii_start();
            let value = rest
                .strip_prefix(b":")
                .map_or(rest, <[u8]>::trim_ascii_start);
            !value.starts_with(b"null")
        })
}

/// `usage`'s two counts in a JSON object, if it has them and they are believable.
fn usage_in(json: &[u8]) -> Option<(u64, u64)> {
    let value: Value = serde_json::from_slice(json.trim_ascii()).ok()?;
    let usage = value.get("usage")?;
    let count = |key: &str| usage.get(key)?.as_u64().filter(|n| *n <= MAX_TOKENS);
    Some((count("prompt_tokens")?, count("completion_tokens")?))
}

impl<B> Body for Usage<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && !self.counted
                {
                    self.look(data);
                }
                // An answer of known length isn't polled past its last byte.
                if self.inner.is_end_stream() {
                    self.count();
                }
            }
            Poll::Ready(None) => self.count(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_read_from_json_answers_and_streamed_events() {
        let answer = br#"{"object":"chat.completion","usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}"#;
        assert_eq!(usage_in(answer), Some((12, 8)));
        assert_eq!(usage_in(br#"{"usage":null}"#), None);
        assert!(
            !names_usage(br#"{"choices":[],"usage": null}"#),
            "not parsed"
        );
        assert!(names_usage(br#"{"usage" : {"prompt_tokens":1}}"#));
        assert_eq!(
            usage_in(br#"{"usage":{"prompt_tokens":-1,"completion_tokens":1}}"#),
            None
        );
        let absurd = format!(
            r#"{{"usage":{{"prompt_tokens":1,"completion_tokens":{}}}}}"#,
            MAX_TOKENS + 1
        );
        assert_eq!(usage_in(absurd.as_bytes()), None);

        let mut events = Usage::new((), Shape::Events, "cpu-1c-2g");
        for piece in [
            &b"data: {\"choices\":[]}\n\nda"[..],
            b"ta: {\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":5}}\n\n",
            b"data: [DONE]\n\n",
        ] {
            events.look(piece);
        }
        assert_eq!(events.usage, Some((3, 5)));
        assert_eq!(
            Shape::of(Some("text/event-stream; charset=utf-8")),
            Some(Shape::Events)
        );
        assert_eq!(Shape::of(Some("application/json")), Some(Shape::Json));
        assert_eq!(Shape::of(Some("text/html")), None);
        assert_eq!(Shape::of(None), None);
    }
}
