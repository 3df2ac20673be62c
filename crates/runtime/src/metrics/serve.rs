//! `/metrics` over HTTP: the Prometheus text format (0.0.4), or OpenMetrics to a scraper that
//! asks for it in `Accept`, as Prometheus does.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

use super::{Exposition, encode};
use crate::http::HttpLimits;
use crate::settings::{ConfigError, Settings};
use crate::shutdown::Shutdown;

/// Where a process serves its metrics; unset, it serves none.
pub const METRICS_ADDR: &str = "EINSORA_METRICS_ADDR";

/// A scraper or two, and a person with curl.
const LIMITS: HttpLimits = HttpLimits {
    max_connections: 16,
    header_read: Duration::from_secs(10),
};

/// The address `EINSORA_METRICS_ADDR` names, if it is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsAddr(pub Option<SocketAddr>);

impl MetricsAddr {
    pub fn from_settings(settings: &Settings) -> Result<MetricsAddr, ConfigError> {
        if !settings.is_set(METRICS_ADDR) {
            return Ok(MetricsAddr(None));
        }
        Ok(MetricsAddr(Some(settings.socket_addr(METRICS_ADDR, "")?)))
    }

    /// Binds it, if set: a port in use is an error naming the setting.
    pub async fn bind(&self) -> Result<Option<TcpListener>, crate::grpc::ServeError> {
        match self.0 {
            Some(addr) => Ok(Some(crate::grpc::bind(METRICS_ADDR, addr).await?)),
            None => Ok(None),
        }
    }
}

/// Serves `GET /metrics` until `shutdown`; any other path is 404, another method 405.
pub async fn serve(listener: TcpListener, shutdown: Shutdown) -> std::io::Result<()> {
    crate::http::serve(listener, LIMITS, None, shutdown, |_peer: SocketAddr| {
        tower::service_fn(|request: Request<Incoming>| async move {
            Ok::<_, Infallible>(answer(&request))
        })
    })
    .await
}

fn answer(request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *response.status_mut() = status;
        response
    };
    if request.uri().path() != "/metrics" {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let accept = request.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
    let exposition = Exposition::accepted(accept);
    let mut response = Response::new(Full::new(Bytes::from(encode(exposition))));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(exposition.content_type()),
    );
    response
}
