//! The installation under attack: the api, the controller (agent backend), the gateway and the
//! access proxy as real processes of the release binary (`support::Stack`), the store opened
//! beside them for what the bench sets up and reads back, and how this process reaches the
//! agents' port from any loopback address (each flood and each well-behaved client has its own).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use einsora_core::ids::TenantId;
use einsora_store::{DatabaseUrl, Store};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tonic::transport::Channel;

use crate::support::agents::{AgentsPort, enrolment_tokens, owner};
pub use crate::support::agents::{Enrolled, PATIENCE};
use crate::support::{Http, Stack, free_addr};

/// Enrolment tokens made at the start (each well-behaved enrolment uses one).
const TOKENS: usize = 300;

/// The roles' processes.
#[derive(Debug, Clone, Copy)]
pub struct Pids {
    pub controller: u32,
    pub gateway: u32,
    pub access: u32,
}

pub struct World {
    /// The processes, until the world is dropped.
    _stack: Stack,
    pub store: Arc<dyn Store>,
    pub tenant: TenantId,
    /// The user who owns the tenant and enrols its machines (their workloads run there).
    pub owner: einsora_core::ids::UserId,
    pub agents: SocketAddr,
    pub gateway: SocketAddr,
    pub access: SocketAddr,
    /// An API token of dev@acme, for the gateway's and the proxy's well-behaved clients.
    pub api_token: String,
    pub pids: Pids,
    /// Where every role's JSON log lines go (EINSORA_LOG_FILE).
    pub log: PathBuf,
    pub port: AgentsPort,
    tokens: Mutex<Vec<String>>,
    _dir: tempfile::TempDir,
}

impl World {
    pub async fn start() -> anyhow::Result<World> {
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite:{}/einsora.db", dir.path().display());
        let log = dir.path().join("einsora.log");
        let access = free_addr();
        let access_port = access.rsplit(':').next().unwrap_or_default().to_owned();
        let extra = [
            ("EINSORA_CLUSTER_BACKEND", "agent".to_owned()),
            ("EINSORA_CONTROLLER_INTERVAL", "1s".to_owned()),
            ("EINSORA_ACCESS_ADDR", access.clone()),
            (
                "EINSORA_ACCESS_URL",
                format!("http://localhost:{access_port}"),
            ),
            // A real installation's level, so what a flood makes the roles log is counted.
            ("EINSORA_LOG", "info".to_owned()),
            ("EINSORA_LOG_FILE", log.display().to_string()),
            // The one limit not at its default: the agents' port's cap (16,384, for 10,000
            // machines) lowered to the gateway's, so one bench's floods can reach it.
            ("EINSORA_AGENT_MAX_CONNECTIONS", "1024".to_owned()),
        ];
        let extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let stack = Stack::start(
            Some(&url),
            &["api", "controller", "gateway", "access"],
            &extra,
        )?;
        let pids = match stack.pids()[..] {
            [_api, controller, gateway, access] => Pids {
                controller,
                gateway,
                access,
            },
            _ => anyhow::bail!("the stack didn't start four roles"),
        };
        let setting = |name: &str| -> anyhow::Result<String> {
            stack
                .env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .with_context(|| format!("the stack has no {name}"))
        };
        let agents: SocketAddr = setting("EINSORA_AGENT_ADDR")?.parse()?;
        let gateway: SocketAddr = setting("EINSORA_HTTP_ADDR")?.parse()?;
        let data_dir = PathBuf::from(setting("EINSORA_DATA_DIR")?);
        let http: Http = Client::builder(TokioExecutor::new()).build_http();
        let api_token = stack.token(&http).await.context("an API token")?;
        anyhow::ensure!(api_token.starts_with("tsk_"), "no API token");

        let store = einsora_store::open(&DatabaseUrl::parse(&url)?).await?;
        let (tenant, user) = owner(&*store, "bench-owner").await?;
        let ca_pem = std::fs::read_to_string(data_dir.join("pki/ca.pem"))?;
        let tokens = enrolment_tokens(&*store, (tenant, user), &ca_pem, TOKENS, "flood").await?;
        let world = World {
            access: access.parse()?,
            _stack: stack,
            store,
            tenant,
            owner: user,
            agents,
            gateway,
            api_token,
            pids,
            log,
            port: AgentsPort::new(agents, ca_pem),
            tokens: Mutex::new(tokens),
            _dir: dir,
        };
        world.wait_for_ports().await?;
        Ok(world)
    }

    /// Every port accepts connections, and the proxy answers.
    async fn wait_for_ports(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        for addr in [self.agents, self.gateway, self.access] {
            while tokio::net::TcpStream::connect(addr).await.is_err() {
                anyhow::ensure!(
                    tokio::time::Instant::now() < deadline,
                    "{addr} never accepted"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// An unused enrolment token.
    pub fn token(&self) -> anyhow::Result<String> {
        self.tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .context("out of enrolment tokens")
    }

    /// Connects to the agents' port from `from` now, as `own` if given.
    pub async fn connect(&self, from: IpAddr, own: Option<&Enrolled>) -> anyhow::Result<Channel> {
        self.port.connect(from, own).await
    }

    /// Enrols a new machine from `from` with a fresh token and key.
    pub async fn enrol(&self, from: IpAddr, hostname: &str) -> anyhow::Result<Enrolled> {
        self.port.enrol(from, self.token()?, hostname).await
    }
}

/// A status code as a word for the tables.
pub fn code(code: tonic::Code) -> String {
    let debug = format!("{code:?}");
    let mut word = String::new();
    for (i, c) in debug.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            word.push('_');
        }
        word.push(c.to_ascii_lowercase());
    }
    word
}
