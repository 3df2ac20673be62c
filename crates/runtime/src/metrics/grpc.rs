//! A tower layer for tonic servers: each call's handling time by service, method and gRPC
//! code (`einsora_grpc_server_handling_seconds`, as grpc-go's interceptors name it). The time
//! runs to the answer's head: a streaming call's stream is not waited for. The code is the
//! head's `grpc-status` (an error before any message), else OK.

use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::{Request, Response};

use einsora_metrics::Latencies;

static HANDLING: LazyLock<Latencies<3>> = LazyLock::new(|| {
    einsora_metrics::latencies(
        "einsora_grpc_server_handling_seconds",
        "Time a gRPC server took to answer a call's head, by service, method and code.",
    )
});

/// Measures every call of the server it wraps.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrpcMetricsLayer;

impl<S> tower::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> GrpcMetrics<S> {
        GrpcMetrics { inner }
    }
}

#[derive(Debug, Clone)]
pub struct GrpcMetrics<S> {
    inner: S,
}

impl<S, B, R> tower::Service<Request<B>> for GrpcMetrics<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (service, method) = split(request.uri().path());
        let started = Instant::now();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            let code = match &answer {
                Ok(response) => code_name(
                    response
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok()),
                ),
                Err(_) => "UNAVAILABLE",
            };
            // A path no service has would make a new series per caller's whim.
            let (service, method) = if code == "UNIMPLEMENTED" {
                ("other".to_owned(), "other".to_owned())
            } else {
                (service, method)
            };
            let labels = [
                ("service", service),
                ("method", method),
                ("code", code.to_owned()),
            ];
            einsora_metrics::observe(&HANDLING, labels, started.elapsed());
            answer
        })
    }
}

/// `/package.Service/Method` → (`package.Service`, `Method`).
fn split(path: &str) -> (String, String) {
    let path = path.trim_start_matches('/');
    match path.split_once('/') {
        Some((service, method)) => (service.to_owned(), method.to_owned()),
        None => ("other".to_owned(), "other".to_owned()),
    }
}

/// A `grpc-status` value's name; none (the code comes in the trailers) is OK.
fn code_name(status: Option<&str>) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    match status {
        None => "OK",
        Some(v) => v
            .parse::<usize>()
            .ok()
            .and_then(|n| NAMES.get(n).copied())
            .unwrap_or("UNKNOWN"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_codes_become_labels() {
        assert_eq!(
            split("/einsora.workloads.v1.WorkloadService/GetWorkload"),
            (
                "einsora.workloads.v1.WorkloadService".to_owned(),
                "GetWorkload".to_owned()
            )
        );
        assert_eq!(split("/nonsense"), ("other".to_owned(), "other".to_owned()));
        assert_eq!(code_name(None), "OK");
        assert_eq!(code_name(Some("5")), "NOT_FOUND");
        assert_eq!(code_name(Some("16")), "UNAUTHENTICATED");
        assert_eq!(code_name(Some("99")), "UNKNOWN");
        assert_eq!(code_name(Some("x")), "UNKNOWN");
    }
}
