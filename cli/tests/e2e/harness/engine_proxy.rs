//! A recording proxy on the Docker engine's socket: a test sees exactly what the docker driver
//! asks of the engine, and the engine stands in for one that can give containers NVIDIA GPUs
//! (its `/info` answer lists an `nvidia` runtime, or NVIDIA's CDI devices; every other answer
//! is the engine's own). The containers it is asked for are the real engine's.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{UnixListener, UnixStream};

/// How the engine the proxy stands in for gives containers GPUs.
#[derive(Debug, Clone)]
pub enum GpusBy {
    /// The container toolkit's `nvidia` runtime.
    Runtime,
    /// CDI, with these devices discovered (`nvidia.com/gpu=…`), as Docker 28.2 lists them.
    Cdi(Vec<String>),
}

impl GpusBy {
    fn patch(&self, info: &mut Value) {
        match self {
            GpusBy::Runtime => {
                info["Runtimes"]["nvidia"] = json!({ "path": "nvidia-container-runtime" });
            }
            GpusBy::Cdi(ids) => {
                info["CDISpecDirs"] = json!(["/etc/cdi", "/var/run/cdi"]);
                let devices: Vec<Value> = ids
                    .iter()
                    .map(|id| json!({ "Source": "cdi", "ID": id }))
                    .collect();
                info["DiscoveredDevices"] = json!(devices);
            }
        }
    }
}

/// One request the driver sent.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

pub struct EngineProxy {
    pub socket: PathBuf,
    requests: Arc<Mutex<Vec<Recorded>>>,
    _runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl EngineProxy {
    /// Serves on a socket of its own, passing every request on to `engine`.
    pub fn start(engine: &Path, gpus: GpusBy) -> EngineProxy {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("docker.sock");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(async { UnixListener::bind(&socket) })
            .unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (recorded, engine) = (Arc::clone(&requests), engine.to_owned());
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (recorded, engine) = (Arc::clone(&recorded), engine.clone());
                let gpus = gpus.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        forward(request, engine.clone(), Arc::clone(&recorded), gpus.clone())
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        EngineProxy {
            socket,
            requests,
            _runtime: runtime,
            _dir: dir,
        }
    }

    /// The bodies of the containers the driver asked the engine to create, in order.
    pub fn created(&self) -> Vec<Value> {
        let requests = self.requests.lock().unwrap();
        requests
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/containers/create"))
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }
}

async fn forward(
    request: Request<Incoming>,
    engine: PathBuf,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    gpus: GpusBy,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    let path = parts.uri.path().to_owned();
    recorded.lock().unwrap().push(Recorded {
        method: parts.method.to_string(),
        path: path.clone(),
        body: body.to_vec(),
    });
    let Ok(stream) = UnixStream::connect(&engine).await else {
        let mut gone = Response::new(Full::new(Bytes::from_static(b"no engine")));
        *gone.status_mut() = hyper::StatusCode::BAD_GATEWAY;
        return Ok(gone);
    };
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let answer = sender
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await?;
    let (mut head, body) = answer.into_parts();
    let mut body = body.collect().await?.to_bytes();
    if path.ends_with("/info") && head.status.is_success() {
        let mut info: Value = serde_json::from_slice(&body).unwrap();
        gpus.patch(&mut info);
        body = Bytes::from(serde_json::to_vec(&info).unwrap());
        head.headers.remove(hyper::header::TRANSFER_ENCODING);
        head.headers
            .insert(hyper::header::CONTENT_LENGTH, body.len().into());
    }
    Ok(Response::from_parts(head, Full::new(body)))
}
