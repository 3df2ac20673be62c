//! What the benches share: an installation's roles as real processes, and an API client.
// Each bench uses part of this module.
#![allow(dead_code)]

pub mod agents;
pub mod open_loop;
pub mod probe;
pub mod up;
pub mod wrk;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use einsora_testkit::spawn::{Spawned, Stop};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

pub type Http = Client<HttpConnector, Full<Bytes>>;

pub struct Api {
    pub http: Http,
    pub base: String,
    pub token: String,
}

impl Api {
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.token));
        let payload = match body {
            Some(b) => {
                request = request.header("content-type", "application/json");
                Bytes::from(b.to_string())
            }
            None => Bytes::new(),
        };
        let response = self.http.request(request.body(Full::new(payload))?).await?;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await?.to_bytes();
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    /// Polls the workload `id` every `poll` until it runs; an error once it failed, or at
    /// `deadline`.
    pub async fn wait_running(
        &self,
        id: &str,
        poll: Duration,
        deadline: Instant,
    ) -> anyhow::Result<()> {
        loop {
            let (status, w) = self
                .send(Method::GET, &format!("/v1/workloads/{id}"), None)
                .await?;
            anyhow::ensure!(status == 200, "reading it answered {status}: {w}");
            match w["state"].as_str() {
                Some("running") => return Ok(()),
                Some("failed") => anyhow::bail!("{id} failed: {w}"),
                _ => {}
            }
            anyhow::ensure!(Instant::now() < deadline, "{id} never ran: {w}");
            tokio::time::sleep(poll).await;
        }
    }

    pub async fn create(&self, name: &str) -> anyhow::Result<String> {
        let body = json!({ "kind": "notebook", "name": name, "gpu_class": "cpu-1c-2g", "image": "jupyterlab" });
        let (status, answer) = self.send(Method::POST, "/v1/workloads", Some(body)).await?;
        anyhow::ensure!(status == 202, "create answered {status}: {answer}");
        Ok(answer["id"].as_str().unwrap_or_default().to_owned())
    }
}

/// Roles of one installation (the api in dev mode) as real processes of the release binary.
pub struct Stack {
    /// Kept until the processes using it are gone.
    _dir: tempfile::TempDir,
    pub base: String,
    /// EINSORA_* settings every role got.
    pub env: Vec<(String, String)>,
    /// Stopped with SIGTERM when the stack is dropped.
    children: Vec<Spawned>,
}

impl Stack {
    /// Migrates, issues certificates, then starts `roles` (the api first) with `extra` settings.
    pub fn start(
        database: Option<&str>,
        roles: &[&str],
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Stack> {
        Stack::start_each(database, roles, extra, |_| Vec::new())
    }

    /// [`Stack::start`], each role with settings of its own besides (`own(role)`).
    pub fn start_each(
        database: Option<&str>,
        roles: &[&str],
        extra: &[(&str, &str)],
        own: impl Fn(&str) -> Vec<(String, String)>,
    ) -> anyhow::Result<Stack> {
        let dir = tempfile::tempdir()?;
        let http_addr = free_addr();
        let mut env: Vec<(String, String)> = vec![
            ("EINSORA_DATA_DIR".into(), dir.path().display().to_string()),
            ("EINSORA_API_ADDR".into(), free_addr()),
            ("EINSORA_CONTROLLER_ADDR".into(), free_addr()),
            ("EINSORA_METERING_ADDR".into(), free_addr()),
            ("EINSORA_AGENT_ADDR".into(), free_addr()),
            ("EINSORA_HTTP_ADDR".into(), http_addr.clone()),
            ("EINSORA_AUTH_MODE".into(), "dev".into()),
            ("EINSORA_LOG".into(), "warn".into()),
        ];
        if let Some(url) = database {
            env.push(("EINSORA_DATABASE_URL".into(), url.into()));
        }
        env.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let run = |args: &[&str]| {
            let mut cmd = einsora(args, &env);
            cmd.stdin(Stdio::null());
            cmd
        };
        install(&env)?;
        let mut children = Vec::new();
        for role in roles {
            let mut cmd = run(&[role]);
            cmd.envs(own(role));
            // The api's output holds dev@acme's password; it is read whole, always.
            let out = if *role == "api" {
                Stdio::piped()
            } else {
                Stdio::null()
            };
            cmd.stdout(out).stderr(Stdio::null());
            children.push(spawn(cmd)?);
        }
        Ok(Stack {
            _dir: dir,
            base: format!("http://{http_addr}"),
            env,
            children,
        })
    }

    /// The roles' process IDs, in the order `start` was given them.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Spawned::pid).collect()
    }

    /// The API as dev@acme, over a pooled client: what the load benches drive.
    pub async fn api(&self) -> anyhow::Result<std::sync::Arc<Api>> {
        let http: Http = Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_max_idle_per_host(256)
            .build_http();
        let token = self.token(&http).await?;
        Ok(std::sync::Arc::new(Api {
            http,
            base: self.base.clone(),
            token,
        }))
    }

    /// Logs in as dev@acme (its password is on the api's standard output) and makes a token.
    pub async fn token(&self, http: &Http) -> anyhow::Result<String> {
        let api = self.children.first().context("no api")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let password = loop {
            let said = api.logs();
            let line = said.lines().find(|l| l.contains("email dev@acme "));
            if let Some(password) = line.and_then(|l| l.split_whitespace().last()) {
                break password.to_owned();
            }
            anyhow::ensure!(Instant::now() < deadline, "no dev password");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        token(http, &self.base, &password).await
    }
}

/// Logs in as dev@acme with `password` through the gateway at `base` and makes an API token.
pub async fn token(http: &Http, base: &str, password: &str) -> anyhow::Result<String> {
    let session = sign_in(http, base, password).await?;
    let (_, made) = session
        .post(http, base, "/v1/tokens", json!({ "name": "load" }))
        .await?;
    Ok(made["token"].as_str().unwrap_or_default().to_owned())
}

/// dev@acme signed in: what only a person may do (make tokens, enrol machines) is done so.
pub struct Session {
    cookie: String,
    csrf: String,
}

/// Signs in as dev@acme with `password` through the gateway at `base`, retrying for 30 s while
/// it starts.
pub async fn sign_in(http: &Http, base: &str, password: &str) -> anyhow::Result<Session> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let login = loop {
        let body = json!({ "email": "dev@acme", "password": password }).to_string();
        let request = Request::post(format!("{base}/v1/sessions"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))?;
        match http.request(request).await {
            Ok(r) if r.status() == 200 => break r,
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            other => anyhow::bail!("login failed: {other:?}"),
        }
    };
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|c| c.to_str().ok())
        .and_then(|c| c.split(';').next())
        .unwrap_or_default()
        .to_owned();
    let session: Value = serde_json::from_slice(&login.into_body().collect().await?.to_bytes())?;
    Ok(Session {
        cookie,
        csrf: session["csrf_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    })
}

impl Session {
    /// A POST of `body` as the signed-in person: the status and the JSON answer.
    pub async fn post(
        &self,
        http: &Http,
        base: &str,
        path: &str,
        body: Value,
    ) -> anyhow::Result<(u16, Value)> {
        let request = Request::post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .header("cookie", &self.cookie)
            .header("x-csrf-token", &self.csrf)
            .body(Full::new(Bytes::from(body.to_string())))?;
        let response = http.request(request).await?;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await?.to_bytes();
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }
}

/// A role's process, stopped with SIGTERM (and waited for, then killed after 30 s) when
/// dropped, on every path out of a bench, errors included, so none outlives it holding a port.
pub fn spawn(cmd: Command) -> anyhow::Result<Spawned> {
    Ok(Spawned::start(
        cmd,
        Stop::TermWithin(Duration::from_secs(30)),
    )?)
}
/// A loopback address for a process the bench starts, held (testkit's `Port`) for the rest of
/// the bench's run, so nothing else takes it between the pick and that process's bind.
pub fn free_addr() -> String {
    static HELD: std::sync::Mutex<Vec<einsora_testkit::Port>> = std::sync::Mutex::new(Vec::new());
    let port = einsora_testkit::Port::loopback();
    let addr = port.addr().to_string();
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(port);
    addr
}

/// The release binary.
pub const EINSORA: &str = env!("CARGO_BIN_EXE_einsora");

/// The release binary with these settings.
pub fn einsora(args: &[&str], env: &[(String, String)]) -> Command {
    let mut cmd = Command::new(EINSORA);
    cmd.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    cmd
}

/// Migrates the database and issues the certificates, as an install does.
pub fn install(env: &[(String, String)]) -> anyhow::Result<()> {
    for args in [&["migrate"][..], &["pki", "init"]] {
        let status = einsora(args, env)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        anyhow::ensure!(status.success(), "{args:?} failed");
    }
    Ok(())
}

/// A `cpu-1c-2g` notebook of `tenant` by `owner` in the `local` region, as the benches create
/// them (on agents, weakly isolated drivers run only the machine's owning user's).
pub fn notebook(
    tenant: einsora_core::ids::TenantId,
    owner: Option<einsora_core::ids::UserId>,
    name: &str,
) -> einsora_store::NewWorkload {
    einsora_store::NewWorkload {
        owner,
        id: einsora_core::ids::WorkloadId::new(),
        tenant_id: tenant,
        kind: einsora_core::kind::WorkloadKind::Notebook,
        name: name.to_owned(),
        gpu_class: "cpu-1c-2g".into(),
        units: 1,
        // cpu-1c-2g's shape in the built-in catalog.
        shape: einsora_store::UnitShape {
            cpus: 1,
            memory_gib: 2,
        },
        image: "jupyterlab".into(),
        region: einsora_core::region::Region::new("local").expect("a valid region"),
        fallback: vec![],
        fallback_after_s: None,
        params: "{}".into(),
        trace_context: None,
    }
}

/// What a bench's own creates are recorded as.
pub fn created_by_bench() -> einsora_core::reasons::Reason {
    use einsora_core::reasons::{Actor, Credential, Reason};
    Reason::Created {
        by: Actor {
            subject: "bench".into(),
            credential: Credential::Dev,
        },
    }
}

/// Opens a running notebook as the dashboard's link does: asks the API for access and trades
/// the link's ticket at the proxy `access` for a session cookie. The notebook's host (as
/// browsers send it) and the cookie (`name=value`).
pub async fn open_notebook(api: &Api, access: &str, id: &str) -> anyhow::Result<(String, String)> {
    let path = format!("/v1/workloads/{id}/access");
    let (status, grant) = api.send(Method::POST, &path, Some(json!({}))).await?;
    anyhow::ensure!(status == 200, "access answered {status}: {grant}");
    let link = grant["notebook"]["link"].as_str().context("a link")?;
    let port = access.rsplit_once(':').map(|(_, p)| p).unwrap_or_default();
    let host = format!("w-{id}.localhost:{port}");
    let target = link.split_once(&host).context("the link's host")?.1;
    let (status, head) = get(access, &host, target, &[]).await?;
    anyhow::ensure!(status == 200, "opening answered {status}");
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .context("no session cookie")?
        .to_owned();
    Ok((host, cookie))
}

/// A GET on a new connection, with `headers` (`Name: value`): the status and the head, names
/// lowercased.
pub async fn get(
    addr: &str,
    host: &str,
    path: &str,
    headers: &[String],
) -> anyhow::Result<(u16, String)> {
    use anyhow::Context;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for h in headers {
        request.push_str(&format!("{h}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no status")?;
    let head = head
        .lines()
        .map(|l| match l.split_once(':') {
            Some((n, v)) => format!("{}: {}", n.to_ascii_lowercase(), v.trim()),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    Ok((status, head))
}
