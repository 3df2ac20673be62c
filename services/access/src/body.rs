//! A response body streamed from a workload that ends early when told to: at shutdown, and for
//! endpoints once the caller's API token stops working.

use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, SizeHint};

pub(crate) type Stop = Pin<Box<dyn Future<Output = ()> + Send>>;

pub(crate) struct Guarded<B> {
    inner: B,
    stop: Stop,
    stopped: bool,
}

impl<B> Guarded<B> {
    pub(crate) fn new(inner: B, stop: Stop) -> Self {
        Guarded {
            inner,
            stop,
            stopped: false,
        }
    }
}

impl<B> std::fmt::Debug for Guarded<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl<B: Body + Unpin> Body for Guarded<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if self.stopped || self.stop.as_mut().poll(cx).is_ready() {
            // A chunked stream ends cleanly here; one with a length is cut short, which the
            // server turns into a closed connection.
            self.stopped = true;
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.stopped || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
