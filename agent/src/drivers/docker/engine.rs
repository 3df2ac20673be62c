//! The few Docker Engine API calls the driver makes, over the engine's Unix socket (HTTP/1.1,
//! one connection per call). Every call has a time limit, so a stuck engine never stalls the
//! agent's sync loop.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use crate::drivers::local::uds;

/// A call that takes longer than this failed (pulls have their own, longer limit).
const CALL_LIMIT: Duration = Duration::from_secs(30);
/// API version: Debian's engine (20.10) speaks 1.41; newer engines accept it too.
const API: &str = "/v1.41";
/// The API version whose `/info` lists the engine's CDI devices (Docker 28.2).
const CDI_API: (u32, u32) = (1, 50);

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("the Docker engine at {0} doesn't answer: {1}")]
    Unreachable(String, String),
    #[error("the Docker engine took longer than {0:?}")]
    Timeout(Duration),
    #[error("not found")]
    NotFound,
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("the Docker engine answered {status}: {message}")]
    Refused { status: u16, message: String },
    #[error("not a request the Docker engine can be sent: {0}")]
    BadRequest(String),
}

/// The engine's `/info`, as far as the driver reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineInfo {
    /// The runtimes it offers (`runc`, `nvidia`, …).
    pub runtimes: Vec<String>,
    /// The CDI devices it found in its spec directories (`nvidia.com/gpu=GPU-…`): none when
    /// CDI is off or the engine predates API 1.50, which first lists them.
    pub cdi_devices: Vec<String>,
}

impl EngineInfo {
    /// Reads what it needs from `info`, skipping what isn't shaped as documented.
    pub fn read(info: &Value) -> EngineInfo {
        let runtimes = info["Runtimes"]
            .as_object()
            .map(|r| r.keys().cloned().collect())
            .unwrap_or_default();
        let cdi_devices = info["DiscoveredDevices"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["Source"] == "cdi")
            .filter_map(|d| d["ID"].as_str().map(str::to_owned))
            .collect();
        EngineInfo {
            runtimes,
            cdi_devices,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Engine {
    socket: PathBuf,
}

/// A container as the driver sees it.
#[derive(Debug, Clone, Deserialize)]
pub struct ContainerSummary {
    #[serde(rename = "Id")]
    pub id: String,
    #[serde(rename = "Labels", default)]
    pub labels: std::collections::HashMap<String, String>,
    /// `running`, `exited`, `created`, …
    #[serde(rename = "State", default)]
    pub state: String,
}

impl ContainerSummary {
    pub fn running(&self) -> bool {
        self.state == "running"
    }
}

impl Engine {
    pub fn new(socket: PathBuf) -> Engine {
        Engine { socket }
    }

    pub async fn ping(&self) -> Result<(), EngineError> {
        self.call(Method::GET, "/_ping", None).await.map(drop)
    }

    /// What the engine says about itself that the driver needs. Asked at API 1.50 where the
    /// engine speaks it: engines leave out of `/info` what the version asked didn't have, and
    /// the CDI devices came in 1.50.
    pub async fn info(&self) -> Result<EngineInfo, EngineError> {
        let version = self.json(Method::GET, "/version", None).await?;
        let speaks_cdi = speaks(&version, CDI_API);
        let info = if speaks_cdi {
            let uri = format!("/v{}.{}/info", CDI_API.0, CDI_API.1);
            let bytes = self.call_uri(Method::GET, uri, None).await?;
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        } else {
            self.json(Method::GET, "/info", None).await?
        };
        Ok(EngineInfo::read(&info))
    }

    /// The image's ID, or `None` if the engine doesn't have it.
    pub async fn image_id(&self, image: &str) -> Result<Option<String>, EngineError> {
        let path = format!("/images/{}/json", encode(image));
        match self.json(Method::GET, &path, None).await {
            Ok(v) => Ok(v["Id"].as_str().map(str::to_owned)),
            Err(EngineError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Pulls `image` (a reference with a tag or digest); `limit` bounds the whole pull.
    pub async fn pull(&self, image: &str, limit: Duration) -> Result<(), EngineError> {
        let path = format!("/images/create?fromImage={}", encode(image));
        let body =
            tokio::time::timeout(limit, self.send(Method::POST, format!("{API}{path}"), None))
                .await
                .map_err(|_| EngineError::Timeout(limit))??;
        // The engine streams progress lines; a failure is a line with `error`.
        for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            if let Ok(v) = serde_json::from_slice::<Value>(line)
                && let Some(error) = v["error"].as_str()
            {
                return Err(EngineError::Refused {
                    status: 500,
                    message: error.to_owned(),
                });
            }
        }
        Ok(())
    }

    /// Containers carrying `label` (`key=value` or `key`), stopped ones included.
    pub async fn containers(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError> {
        let filters = serde_json::json!({ "label": [label] }).to_string();
        let path = format!("/containers/json?all=true&filters={}", encode(&filters));
        let v = self.json(Method::GET, &path, None).await?;
        serde_json::from_value(v).map_err(|e| EngineError::Refused {
            status: 200,
            message: e.to_string(),
        })
    }

    pub async fn create(&self, name: &str, spec: &Value) -> Result<String, EngineError> {
        let path = format!("/containers/create?name={}", encode(name));
        let v = self.json(Method::POST, &path, Some(spec)).await?;
        Ok(v["Id"].as_str().unwrap_or_default().to_owned())
    }

    pub async fn start(&self, id: &str) -> Result<(), EngineError> {
        let path = format!("/containers/{}/start", encode(id));
        self.call(Method::POST, &path, None).await.map(drop)
    }

    /// SIGTERM, then SIGKILL after `grace`; one removed meanwhile (by hand, between a listing
    /// and this) is as stopped as it gets.
    pub async fn stop(&self, id: &str, grace: Duration) -> Result<(), EngineError> {
        let path = format!("/containers/{}/stop?t={}", encode(id), grace.as_secs());
        match self.call(Method::POST, &path, None).await {
            Ok(_) | Err(EngineError::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub async fn remove(&self, id: &str) -> Result<(), EngineError> {
        let path = format!("/containers/{}?force=true&v=true", encode(id));
        match self.call(Method::DELETE, &path, None).await {
            Ok(_) | Err(EngineError::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The container's log entries printed after `offset` (docker/logs.rs), stdout and
    /// stderr, as far as the engine's capped log still holds them.
    pub async fn logs(
        &self,
        id: &str,
        offset: u64,
    ) -> Result<Vec<super::logs::Entry>, EngineError> {
        let path = format!(
            "/containers/{}/logs?stdout=1&stderr=1&timestamps=1&since={}",
            encode(id),
            super::logs::since(offset)
        );
        let body = self.call(Method::GET, &path, None).await?;
        Ok(super::logs::parse(&body))
    }

    /// Whether the (stopped) container was killed for running out of memory; one removed
    /// meanwhile can't say, and wasn't.
    pub async fn oom_killed(&self, id: &str) -> Result<bool, EngineError> {
        let path = format!("/containers/{}/json", encode(id));
        match self.json(Method::GET, &path, None).await {
            Ok(v) => Ok(v["State"]["OOMKilled"].as_bool().unwrap_or(false)),
            Err(EngineError::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// A network by name, as the engine describes it, or `None` if there is none.
    pub async fn network(&self, name: &str) -> Result<Option<Value>, EngineError> {
        let path = format!("/networks/{}", encode(name));
        match self.json(Method::GET, &path, None).await {
            Ok(v) => Ok(Some(v)),
            Err(EngineError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates a network; one of that name made meanwhile (another agent) is a `Conflict`.
    pub async fn create_network(&self, spec: &Value) -> Result<(), EngineError> {
        self.call(Method::POST, "/networks/create", Some(spec))
            .await
            .map(drop)
    }

    async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, EngineError> {
        let bytes = self.call(method, path, body).await?;
        Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// `path` at the API version the driver speaks.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Bytes, EngineError> {
        self.call_uri(method, format!("{API}{path}"), body).await
    }

    async fn call_uri(
        &self,
        method: Method,
        uri: String,
        body: Option<&Value>,
    ) -> Result<Bytes, EngineError> {
        tokio::time::timeout(CALL_LIMIT, self.send(method, uri, body))
            .await
            .map_err(|_| EngineError::Timeout(CALL_LIMIT))?
    }

    async fn send(
        &self,
        method: Method,
        uri: String,
        body: Option<&Value>,
    ) -> Result<Bytes, EngineError> {
        let payload = body.map(|b| b.to_string()).unwrap_or_default();
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("host", "docker")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(payload)))
            .map_err(|e| EngineError::BadRequest(e.to_string()))?;
        let (status, bytes) = uds::send(&self.socket, request).await.map_err(|e| {
            EngineError::Unreachable(self.socket.display().to_string(), e.to_string())
        })?;
        match status {
            s if s.is_success() => Ok(bytes),
            StatusCode::NOT_FOUND => Err(EngineError::NotFound),
            StatusCode::CONFLICT => Err(EngineError::Conflict(message(&bytes))),
            // 304: already started or stopped.
            StatusCode::NOT_MODIFIED => Ok(bytes),
            s => Err(EngineError::Refused {
                status: s.as_u16(),
                message: message(&bytes),
            }),
        }
    }
}

/// Whether the engine's `/version` answer says it speaks API `at` or later.
fn speaks(version: &Value, at: (u32, u32)) -> bool {
    version["ApiVersion"]
        .as_str()
        .and_then(|v| v.split_once('.'))
        .and_then(|(major, minor)| Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?)))
        .is_some_and(|v| v >= at)
}

fn message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect())
}

/// Percent-encodes everything but unreserved characters, for a path segment or query value.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b));
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_api_version_is_compared_as_numbers() {
        let of = |v: &str| serde_json::json!({ "ApiVersion": v });
        assert!(super::speaks(&of("1.50"), (1, 50)));
        assert!(super::speaks(&of("1.51"), (1, 50)));
        assert!(!super::speaks(&of("1.41"), (1, 50)));
        assert!(
            !super::speaks(&of("1.5"), (1, 50)),
            "1.5 is older than 1.50"
        );
        assert!(!super::speaks(&of("new"), (1, 50)));
        assert!(!super::speaks(&serde_json::Value::Null, (1, 50)));
    }

    #[test]
    fn references_and_filters_are_encoded_whole() {
        assert_eq!(
            super::encode("einsora/notebook:local"),
            "einsora%2Fnotebook%3Alocal"
        );
        assert_eq!(super::encode(r#"{"a":1}"#), "%7B%22a%22%3A1%7D");
    }

    /// An engine that answers every call 404, as it does for a container removed by hand
    /// between the driver's listing and its next call.
    async fn removed_meanwhile(socket: &std::path::Path) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::UnixListener::bind(socket).unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let body = r#"{"message":"No such container: c1"}"#;
                let answer = format!(
                    "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
    }

    #[tokio::test]
    async fn a_container_removed_meanwhile_is_stopped_and_was_not_killed_for_memory() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("docker.sock");
        removed_meanwhile(&socket).await;
        let engine = super::Engine::new(socket);
        let grace = std::time::Duration::from_secs(1);
        engine.stop("c1", grace).await.expect("gone is stopped");
        assert!(!engine.oom_killed("c1").await.expect("gone can't say"));
        engine.remove("c1").await.expect("gone is removed");
        assert!(matches!(
            engine.start("c1").await,
            Err(super::EngineError::NotFound)
        ));
    }
}
