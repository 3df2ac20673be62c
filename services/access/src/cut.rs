//! A streamed answer (`text/event-stream`) whose engine dies mid-stream (its container killed,
//! its connection broken) ends with one last event saying so, in the OpenAI error shape
//! (`data: {"error": {...}}`), and then cleanly, rather than being cut off silently: a client
//! reading events learns the answer is incomplete. Once bytes have reached the client nothing
//! is retried (`routing.rs`); this is what it gets instead.

use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame, SizeHint};

/// The last event of a stream its engine broke off.
pub(crate) const EVENT: &str = "data: {\"error\":{\"message\":\"the endpoint stopped answering \
    mid-stream; the answer is incomplete\",\"type\":\"server_error\",\"code\":\"upstream_failed\"}}\n\n";

/// A stream's body whose error becomes [`EVENT`]: the error itself goes to the log only.
pub(crate) struct Cut<B> {
    inner: B,
    ended: bool,
}

impl<B> Cut<B> {
    pub(crate) fn new(inner: B) -> Self {
        Cut {
            inner,
            ended: false,
        }
    }
}

impl<B> Body for Cut<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Err(e))) => {
                tracing::warn!(error = %e, "the endpoint broke off a streamed answer; ending it with an error event");
                self.ended = true;
                // A fresh event: the engine may have stopped mid-line, so a blank line first
                // ends whatever it had begun.
                let event = format!("\n\n{EVENT}");
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(event)))))
            }
            polled => polled,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        // The event may add bytes: no exact length.
        let mut hint = SizeHint::new();
        hint.set_lower(self.inner.size_hint().lower());
        hint
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use http_body_util::BodyExt;

    use super::*;

    /// Frames, then an error where `fail` says.
    struct Script(VecDeque<Result<Bytes, String>>);

    impl Body for Script {
        type Data = Bytes;
        type Error = String;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, String>>> {
            Poll::Ready(self.0.pop_front().map(|f| f.map(Frame::data)))
        }
    }

    async fn read(script: Vec<Result<&'static str, &'static str>>) -> Result<String, String> {
        let frames = script
            .into_iter()
            .map(|f| {
                f.map(|s| Bytes::from_static(s.as_bytes()))
                    .map_err(str::to_owned)
            })
            .collect();
        let body = Cut::new(Script(frames)).collect().await?;
        Ok(String::from_utf8(body.to_bytes().to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_broken_stream_ends_with_an_error_event() {
        let read = read(vec![Ok("data: {\"a\":1}\n\nda"), Err("reset"), Ok("never")])
            .await
            .unwrap();
        assert!(read.starts_with("data: {\"a\":1}\n\nda\n\n"), "{read}");
        assert!(read.ends_with(EVENT), "{read}");
        let last = read.trim_end().rsplit("\n\n").next().unwrap();
        let json: serde_json::Value =
            serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(json["error"]["code"], "upstream_failed");
        assert_eq!(json["error"]["type"], "server_error");
    }

    #[tokio::test]
    async fn a_whole_stream_passes_untouched() {
        let whole = read(vec![Ok("data: 1\n\n"), Ok("data: [DONE]\n\n")]).await;
        assert_eq!(whole.unwrap(), "data: 1\n\ndata: [DONE]\n\n");
    }
}
