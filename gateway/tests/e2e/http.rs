//! A plain HTTP/1.1 client for the tests, and a capture of every log line of the process.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::HeaderMap;
use hyper_util::rt::TokioIo;
use serde_json::Value as Json;
use tokio::net::TcpStream;

#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Json,
    pub raw: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }

    /// The value of the cookie `name` this answer sets, if it sets one.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        let prefix = format!("{name}=");
        self.headers
            .get_all("set-cookie")
            .iter()
            .find_map(|v| v.to_str().unwrap().strip_prefix(&prefix)?.split(';').next())
    }

    /// An error envelope with `code`, whose request ID is the response's.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(
            (self.status, self.body["error"]["code"].as_str()),
            (status, Some(code)),
            "{}",
            self.raw
        );
        assert_eq!(
            self.body["error"]["request_id"],
            self.header("x-request-id")
        );
    }
}

/// A request to `addr`, with `Host: addr` unless `headers` name another.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut request = hyper::Request::builder().method(method).uri(path);
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request = request.header("host", addr.to_string());
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    let raw = String::from_utf8_lossy(&bytes).into_owned();
    Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Json::Null),
        raw,
    }
}
