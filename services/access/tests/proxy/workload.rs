//! A workload's server on a Unix socket, counting the connections it accepts and the requests
//! it answers: it echoes what it was sent as JSON (and plants cookies in its answer), streams
//! server-sent events forever when asked (`x-test-stream`; counting those that ended, which is
//! when their connection closed), echoes raw bytes after accepting a WebSocket upgrade, and
//! answers as an OpenAI-compatible engine when asked (`engine.rs`).

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use einsora_runtime::shutdown::Shutdown;
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Clone)]
pub struct Workload {
    pub socket: PathBuf,
    accepts: Arc<AtomicUsize>,
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    requests: AtomicUsize,
    streams_ended: AtomicUsize,
}

impl Workload {
    pub async fn start(socket: &Path, shutdown: &Shutdown) -> Workload {
        let accepts = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepts);
        let listener = tokio::net::UnixListener::bind(socket)
            .unwrap()
            .tap_io(move |_| {
                counter.fetch_add(1, Ordering::SeqCst);
            });
        let counts = Arc::new(Counts::default());
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&counts));
        let serving = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled());
        tokio::spawn(async move { serving.await.unwrap() });
        Workload {
            socket: socket.to_owned(),
            accepts,
            counts,
        }
    }

    /// Connections accepted so far.
    pub fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }

    /// Requests that reached it so far, WebSocket handshakes included.
    pub fn requests(&self) -> usize {
        self.counts.requests.load(Ordering::SeqCst)
    }

    /// Event streams that ended (their connection closed) so far.
    pub fn streams_ended(&self) -> usize {
        self.counts.streams_ended.load(Ordering::SeqCst)
    }

    pub fn socket(&self) -> &str {
        self.socket.to_str().unwrap()
    }
}

async fn answer(State(counts): State<Arc<Counts>>, mut request: Request) -> Response {
    counts.requests.fetch_add(1, Ordering::SeqCst);
    let wants_upgrade = request
        .headers()
        .get(header::UPGRADE)
        .is_some_and(|v| v == "websocket");
    if wants_upgrade {
        let upgrade = hyper::upgrade::on(&mut request);
        tokio::spawn(async move {
            let mut io = TokioIo::new(upgrade.await.unwrap());
            let mut buf = [0u8; 1024];
            while let Ok(n @ 1..) = io.read(&mut buf).await {
                if io.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        });
        return Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header(header::UPGRADE, "websocket")
            .header(header::CONNECTION, "Upgrade")
            .header("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
            .body(Body::empty())
            .unwrap();
    }
    if request.headers().contains_key(crate::engine::ENGINE) {
        return crate::engine::answer(request).await;
    }
    if request.headers().contains_key("x-test-stream") {
        let ticks = Ticks {
            every: tokio::time::interval(Duration::from_millis(200)),
            counts,
        };
        let mut response = Body::new(ticks).into_response();
        let content_type = header::HeaderValue::from_static("text/event-stream");
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
        return response;
    }
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_owned()))
        .collect();
    let echo = serde_json::json!({
        "method": parts.method.as_str(),
        "uri": parts.uri.to_string(),
        "headers": headers,
        "body": String::from_utf8_lossy(&body),
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::SET_COOKIE, "einsora_access=planted; Path=/")
        .header(header::SET_COOKIE, "_xsrf=kept; Path=/")
        .body(Body::from(echo.to_string()))
        .unwrap()
}

/// `data: tick` every 200 ms, forever: counted in `streams_ended` once dropped.
struct Ticks {
    every: tokio::time::Interval,
    counts: Arc<Counts>,
}

impl Drop for Ticks {
    fn drop(&mut self) {
        self.counts.streams_ended.fetch_add(1, Ordering::SeqCst);
    }
}

impl hyper::body::Body for Ticks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.every
            .poll_tick(cx)
            .map(|_| Some(Ok(Frame::data(Bytes::from_static(b"data: tick\n\n")))))
    }
}
