//! Tokens an endpoint's answers used, as its engine counted them, whatever the client asked:
//!
//! - A streamed request is sent on asking for usage (`stream_options.include_usage`) and for
//!   llama.cpp's per-chunk counts (`timings_per_token`) where the client didn't
//!   ([`ask_engine`], in the one parse of the body in `limits.rs`); what the client didn't ask
//!   for is taken out of the answer it sees: the usage-only chunk (`"choices": []`) and each
//!   chunk's `timings`.
//! - An answer's usage (OpenAI's `prompt_tokens`, `completion_tokens`) is read from a JSON
//!   answer once it has come whole (up to [`MAX_JSON`]), or from a streamed one's usage event;
//!   a stream the client leaves is counted from its last chunk's `timings` (llama.cpp's
//!   `cache_n` + `prompt_n` prompt tokens, `predicted_n` generated so far: the same numbers
//!   its usage says at the end), and the engine's request ends with it (its connection closes:
//!   `kept.rs`).
//! - Once counted (the answer ended or was dropped): `einsora_endpoint_tokens_total` by class
//!   and kind, the tally of tokens per hour, endpoint, key and user (`tally.rs`), and the
//!   caller's [`OnSpent`] (the rate limiter's).
//!
//! What the engine says is its own word: a count is taken only if it is a whole number up to
//! [`MAX_TOKENS`], lines are looked at up to [`MAX_EVENT`], and nothing of it is trusted beyond
//! counting.

use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, ready};

use einsora_runtime::metrics::{self, Counters};
use hyper::body::{Body, Bytes, Frame, SizeHint};
use serde_json::{Map, Value};

use crate::json_member;
use crate::tally::{Tally, Who};

/// The most of a JSON answer kept to read its usage.
const MAX_JSON: usize = 1 << 20;
/// The longest line of a streamed answer looked at (a longer one passes untouched).
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

/// Tokens one answer used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Spent {
    pub(crate) prompt: u64,
    pub(crate) completion: u64,
}

/// Told, once per answer whose tokens were counted, what it used: when the answer has ended,
/// or when it was dropped (the client left, the stream was cut). The rate limiter passes one
/// to count tokens per minute and per day.
pub(crate) type OnSpent = Arc<dyn Fn(Spent) + Send + Sync>;

/// What the proxy asked of the engine that the client didn't: taken out of the answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Added {
    /// `stream_options.include_usage`: the usage-only chunk is removed.
    pub(crate) usage: bool,
    /// `timings_per_token`: each chunk's `timings` is removed.
    pub(crate) timings: bool,
}

impl Added {
    fn any(self) -> bool {
        self.usage || self.timings
    }
}

/// Asks the engine for usage where a streamed generation request doesn't: what it added.
pub(crate) fn ask_engine(request: &mut Map<String, Value>) -> Added {
    if request.get("stream") != Some(&Value::Bool(true)) {
        return Added::default();
    }
    let mut added = Added::default();
    let yes = Some(&Value::Bool(true));
    match request.get_mut("stream_options") {
        None | Some(Value::Null) => {
            let options = Map::from_iter([("include_usage".to_owned(), Value::Bool(true))]);
            request.insert("stream_options".to_owned(), Value::Object(options));
            added.usage = true;
        }
        Some(Value::Object(options)) if options.get("include_usage") != yes => {
            options.insert("include_usage".to_owned(), Value::Bool(true));
            added.usage = true;
        }
        // Asked already, or not an object: the engine answers that as it would have.
        Some(_) => {}
    }
    if request.get("timings_per_token") != yes {
        request.insert("timings_per_token".to_owned(), Value::Bool(true));
        added.timings = true;
    }
    added
}

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

/// Where an answer's count goes, beside the metric.
#[derive(Clone, Default)]
pub(crate) struct Counting {
    /// The class the endpoint runs on (the metric's label).
    pub(crate) class: String,
    /// What the proxy added to the request.
    pub(crate) added: Added,
    /// The tally of tokens per hour, endpoint, key and user, and whose answer this is.
    pub(crate) tally: Option<(Arc<Tally>, Who)>,
    pub(crate) on_spent: Option<OnSpent>,
}

/// What becomes of a streamed answer's line.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Keep,
    Drop,
    Rewritten(Vec<u8>),
}

/// An answer's body, its usage looked for as it passes; a stream's lines rewritten only when
/// the proxy added to the request.
pub(crate) struct Usage<B> {
    inner: B,
    shape: Shape,
    counting: Counting,
    /// A JSON answer so far; a stream's partial line.
    seen: Vec<u8>,
    /// Inside a line too long to look at: it passes as it is, up to its end.
    long_line: bool,
    /// A usage-only chunk was removed: the blank line ending its event goes too.
    skip_blank: bool,
    /// The usage a streamed answer said (it may repeat it).
    usage: Option<Spent>,
    /// What the last chunk's `timings` said so far.
    progress: Option<Spent>,
    counted: bool,
    ended: bool,
}

impl<B> Usage<B> {
    pub(crate) fn new(inner: B, shape: Shape, counting: Counting) -> Self {
        Usage {
            inner,
            shape,
            counting,
            seen: Vec::new(),
            long_line: false,
            skip_blank: false,
            usage: None,
            progress: None,
            counted: false,
            ended: false,
        }
    }

    /// Lines are rewritten (and so held until whole).
    fn rewrites(&self) -> bool {
        self.shape == Shape::Events && self.counting.added.any()
    }

    /// Looks at a frame's bytes; `out` gets what passes on when lines are rewritten.
    fn look(&mut self, data: &[u8], mut out: Option<&mut Vec<u8>>) {
        if self.shape == Shape::Json {
            if self.seen.len() + data.len() <= MAX_JSON {
                self.seen.extend_from_slice(data);
            } else {
                // Too large to keep: not counted.
                self.seen = Vec::new();
                self.counted = true;
            }
            return;
        }
        // Each complete line once, where it lies: the partial line a frame ends in is kept
        // for the next (up to MAX_EVENT: a longer one passes without being looked at).
        let mut rest = data;
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            let (piece, after) = (&rest[..end], &rest[end + 1..]);
            rest = after;
            if self.long_line {
                self.long_line = false;
                if let Some(out) = out.as_deref_mut() {
                    out.extend_from_slice(piece);
                    out.push(b'\n');
                }
                continue;
            }
            let line = if self.seen.is_empty() {
                std::borrow::Cow::Borrowed(piece)
            } else {
                let mut line = std::mem::take(&mut self.seen);
                line.extend_from_slice(piece);
                std::borrow::Cow::Owned(line)
            };
            let fate = self.line(&line);
            if let Some(out) = out.as_deref_mut() {
                match fate {
                    Line::Keep => {
                        out.extend_from_slice(&line);
                        out.push(b'\n');
                    }
                    Line::Drop => {}
                    Line::Rewritten(new) => {
                        out.extend_from_slice(&new);
                        out.push(b'\n');
                    }
                }
            }
        }
        if self.long_line {
            if let Some(out) = out {
                out.extend_from_slice(rest);
            }
        } else if self.seen.len() + rest.len() <= MAX_EVENT {
            self.seen.extend_from_slice(rest);
        } else {
            self.long_line = true;
            let seen = std::mem::take(&mut self.seen);
            if let Some(out) = out {
                out.extend_from_slice(&seen);
                out.extend_from_slice(rest);
            }
        }
    }

    /// Whether a frame of a rewritten stream passes as it is: whole lines (nothing kept from
    /// the frame before, none left partial), none naming `usage` or `timings`, and no blank
    /// line owed to a removed event.
    fn passes_whole(&self, data: &[u8]) -> bool {
        self.seen.is_empty()
            && !self.long_line
            && !self.skip_blank
            && data.ends_with(b"\n")
            && !contains(data, b"\"usage\"")
            && !contains(data, b"\"timings\"")
    }

    /// The last line of a stream that ended without a newline.
    fn finish(&mut self, out: &mut Vec<u8>) {
        if self.shape != Shape::Events || self.seen.is_empty() {
            return;
        }
        let line = std::mem::take(&mut self.seen);
        match self.line(&line) {
            Line::Keep => out.extend_from_slice(&line),
            Line::Drop => {}
            Line::Rewritten(new) => out.extend_from_slice(&new),
        }
    }

    /// A streamed answer's line (without its `\n`): only a `data:` one naming `usage` or
    /// `timings` is parsed.
    fn line(&mut self, line: &[u8]) -> Line {
        let blank = line.trim_ascii().is_empty();
        if std::mem::take(&mut self.skip_blank) && blank {
            return Line::Drop;
        }
        let Some(json) = line.strip_prefix(b"data:") else {
            return Line::Keep;
        };
        if line.len() > MAX_EVENT {
            return Line::Keep;
        }
        // The usage chunk (once an answer) is parsed whole; every other just for its timings.
        if names_usage(json)
            && let Ok(Value::Object(chunk)) = serde_json::from_slice::<Value>(json.trim_ascii())
        {
            if let Some(spent) = chunk.get("usage").and_then(usage_of) {
                self.usage = Some(spent);
            }
            let usage_only = chunk
                .get("choices")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty);
            if self.counting.added.usage && usage_only {
                self.skip_blank = true;
                return Line::Drop;
            }
        }
        self.timings_line(json)
    }

    /// A `data:` line's JSON: its `timings` read and, where the proxy asked for them, taken out
    /// of the bytes as they came (`json_member.rs`); nothing else of the chunk is parsed.
    fn timings_line(&mut self, json: &[u8]) -> Line {
        if !contains(json, b"\"timings\"") {
            return Line::Keep;
        }
        let Some(member) = json_member::find(json, "timings") else {
            return Line::Keep;
        };
        let value = serde_json::from_slice::<Value>(&json[member.value.clone()]);
        if let Some(spent) = value.ok().as_ref().and_then(timings_of) {
            self.progress = Some(spent);
        }
        if !self.counting.added.timings {
            return Line::Keep;
        }
        let mut new = b"data:".to_vec();
        new.extend_from_slice(&json_member::without(json, &member));
        Line::Rewritten(new)
    }

    /// Counts the answer's tokens, once: the metric, the tally, the caller's hook.
    fn count(&mut self) {
        if std::mem::replace(&mut self.counted, true) {
            return;
        }
        let spent = match self.shape {
            Shape::Json => serde_json::from_slice::<Value>(self.seen.trim_ascii())
                .ok()
                .and_then(|answer| answer.get("usage").and_then(usage_of)),
            Shape::Events => self.usage.or(self.progress),
        };
        self.seen = Vec::new();
        let Some(spent) = spent else {
            return;
        };
        let counting = &self.counting;
        for (kind, n) in [("prompt", spent.prompt), ("completion", spent.completion)] {
            let labels = [("class", counting.class.clone()), ("kind", kind.to_owned())];
            TOKENS.get_or_create(&labels).inc_by(n);
        }
        if let Some((tally, who)) = &counting.tally {
            tally.add(who, spent);
        }
        if let Some(on_spent) = &counting.on_spent {
            on_spent(spent);
        }
    }
}

impl<B> Drop for Usage<B> {
    /// A stream cut short (the client went away) counts what it had shown.
    fn drop(&mut self) {
        if self.shape == Shape::Events {
            self.count();
        }
    }
}

/// Whether `json` names `usage` with a value other than `null` (OpenAI's streamed chunks say
/// `"usage":null` on every event but the last): only those are parsed for it.
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

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A believable count of `key` in `object`.
fn believed(object: &Value, key: &str) -> Option<u64> {
    object.get(key)?.as_u64().filter(|n| *n <= MAX_TOKENS)
}

/// `usage`'s counts, if believable: `completion_tokens` may be absent (embeddings).
fn usage_of(usage: &Value) -> Option<Spent> {
    let completion = match usage.get("completion_tokens") {
        None => 0,
        Some(_) => believed(usage, "completion_tokens")?,
    };
    Some(Spent {
        prompt: believed(usage, "prompt_tokens")?,
        completion,
    })
}

/// llama.cpp's `timings`: the prompt is the tokens taken from its cache and those evaluated.
fn timings_of(timings: &Value) -> Option<Spent> {
    let cached = match timings.get("cache_n") {
        None => 0,
        Some(_) => believed(timings, "cache_n")?,
    };
    Some(Spent {
        prompt: (believed(timings, "prompt_n")? + cached).min(MAX_TOKENS),
        completion: believed(timings, "predicted_n")?,
    })
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
        loop {
            if self.ended {
                return Poll::Ready(None);
            }
            let polled = ready!(Pin::new(&mut self.inner).poll_frame(cx));
            let frame = match polled {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => {
                    self.ended = true;
                    let mut out = Vec::new();
                    if self.rewrites() {
                        self.finish(&mut out);
                    }
                    self.count();
                    if out.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                }
            };
            let data = match frame.into_data() {
                Ok(data) => data,
                Err(frame) => return Poll::Ready(Some(Ok(frame))),
            };
            // An answer of known length isn't polled past its last byte.
            let last = self.inner.is_end_stream();
            if !self.rewrites() {
                if !self.counted {
                    self.look(&data, None);
                }
                if last {
                    self.count();
                }
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            if !last && self.passes_whole(&data) {
                // Whole lines with nothing to read or take out (most of a stream): as they came.
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            let mut out = Vec::with_capacity(data.len());
            self.look(&data, Some(&mut out));
            if last {
                self.ended = true;
                self.finish(&mut out);
                self.count();
            }
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        if self.rewrites() {
            self.ended
        } else {
            self.inner.is_end_stream()
        }
    }

    fn size_hint(&self) -> SizeHint {
        if self.rewrites() {
            SizeHint::default()
        } else {
            self.inner.size_hint()
        }
    }
}

#[cfg(test)]
#[path = "usage_tests.rs"]
mod tests;
