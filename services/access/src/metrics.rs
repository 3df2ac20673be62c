//! What the proxy measures beyond every HTTP server's requests and connections
//! (`einsora_runtime::metrics`): how long workloads take to answer, and the bytes that pass
//! each way, by the kind of site (`notebook`, `endpoint`).

use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use std::time::Duration;

use einsora_runtime::metrics::{self, Counter, Counters, Latencies};
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

static UPSTREAM: LazyLock<Latencies<2>> = LazyLock::new(|| {
    metrics::latencies(
        "einsora_proxy_upstream_duration_seconds",
        "Time from dialling a workload's socket to its answer's head, by site kind and status code.",
    )
});

static BYTES: LazyLock<Counters<2>> = LazyLock::new(|| {
    metrics::register(
        "einsora_proxy_bytes",
        "Body and WebSocket bytes relayed, by site kind and direction (to_workload, from_workload).",
        Counters::default(),
    )
});

/// Which kind of site a request was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Site {
    Notebook,
    Endpoint,
}

impl Site {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Site::Notebook => "notebook",
            Site::Endpoint => "endpoint",
        }
    }
}

/// The workload answered `status` this long after it was dialled (0: it never answered).
pub(crate) fn upstream(site: Site, status: u16, elapsed: Duration) {
    let labels = [
        ("kind", site.word().to_owned()),
        ("code", metrics::status_code(status)),
    ];
    metrics::observe(&UPSTREAM, labels, elapsed);
}

/// The counter of bytes relayed for `site` in `direction`.
pub(crate) fn bytes(site: Site, direction: Direction) -> Counter {
    // Every request counts both ways: the four counters are found by their labels once.
    static EACH: LazyLock<[[Counter; 2]; 2]> = LazyLock::new(|| {
        [Site::Notebook, Site::Endpoint].map(|site| {
            [Direction::ToWorkload, Direction::FromWorkload].map(|direction| {
                let labels = [
                    ("kind", site.word().to_owned()),
                    ("direction", direction.word().to_owned()),
                ];
                BYTES.get_or_create(&labels).clone()
            })
        })
    });
    EACH[site as usize][direction as usize].clone()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    ToWorkload,
    FromWorkload,
}

impl Direction {
    fn word(self) -> &'static str {
        match self {
            Direction::ToWorkload => "to_workload",
            Direction::FromWorkload => "from_workload",
        }
    }
}

/// One side of a joined WebSocket whose reads are counted as they happen: what is read from
/// the client goes to the workload, and what is read from the workload goes to the client.
#[derive(Debug)]
pub(crate) struct CountedReads<T> {
    inner: T,
    counter: Counter,
}

impl<T> CountedReads<T> {
    pub(crate) fn new(inner: T, counter: Counter) -> Self {
        CountedReads { inner, counter }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for CountedReads<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len().saturating_sub(before);
        if read > 0 {
            self.counter.inc_by(read as u64);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CountedReads<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A body whose data frames are counted as they pass.
#[derive(Debug)]
pub(crate) struct Counted<B> {
    inner: B,
    counter: Counter,
}

impl<B> Counted<B> {
    pub(crate) fn new(inner: B, counter: Counter) -> Self {
        Counted { inner, counter }
    }
}

impl<B> Body for Counted<B>
where
    B: Body<Data = hyper::body::Bytes> + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.counter.inc_by(data.len() as u64);
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
