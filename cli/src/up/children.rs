//! The roles `einsora up` runs, each a child process of this same binary: how one is started,
//! how the supervisor knows it is ready, and how it is stopped. Only a child that has not been
//! reaped yet is ever signalled, so a PID the system has given to another process never is.

use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::metrics::METRICS_ADDR;
use einsora_runtime::pki::Role;
use einsora_runtime::tls::ClientTls;
use rustix::process::{Pid, Signal, kill_process};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use super::local_agent;
use super::plan::Plan;

/// Set in each child's environment to the supervisor's PID (see `role::follow_supervisor`).
pub const SUPERVISOR_PID: &str = "EINSORA_SUPERVISOR_PID";

const PROBE_EVERY: Duration = Duration::from_millis(20);

/// A role `einsora up` spawns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChildRole {
    Api,
    Controller,
    Metering,
    Access,
    Gateway,
    /// This machine's node agent (agent backend only).
    Agent,
}

impl ChildRole {
    /// The roles every installation runs.
    pub const SERVICES: [ChildRole; 5] = [
        ChildRole::Api,
        ChildRole::Controller,
        ChildRole::Metering,
        ChildRole::Access,
        ChildRole::Gateway,
    ];

    /// Its subcommand, and the name its lines carry.
    /// Roles that call the others while they stop (the access proxy's last token counts go
    /// to the api, the gateway's last answers come from the services): stopped before the rest.
    pub fn stops_first(self) -> bool {
        matches!(self, ChildRole::Access | ChildRole::Gateway)
    }

    pub fn name(self) -> &'static str {
        match self {
            ChildRole::Api => "api",
            ChildRole::Controller => "controller",
            ChildRole::Metering => "metering",
            ChildRole::Access => "access",
            ChildRole::Gateway => "gateway",
            ChildRole::Agent => "agent",
        }
    }

    /// Starts the role with Solo's defaults in its environment (and everything this process
    /// has), standard error piped to the supervisor, standard output shared (dev mode's
    /// accounts), in its own process group so a Ctrl-C reaches the supervisor alone.
    pub fn spawn(self, plan: &Plan, exe: &std::path::Path) -> std::io::Result<Child> {
        let mut command = Command::new(exe);
        // The agents' port is chosen afresh at every start unless pinned: the local agent
        // dials the current one, not the one it joined through.
        if let (ChildRole::Agent, Some(agent)) = (self, &plan.local_agent) {
            command.env(einsora_agent::CONTROLLER, &agent.controller);
        }
        if let Some(addr) = plan.role_metrics.get(self.name()) {
            command.env(METRICS_ADDR, addr.to_string());
        }
        command
            .arg(self.name())
            .envs(plan.defaults.iter().map(|(k, v)| (k, v)))
            .env(SUPERVISOR_PID, std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped())
            .process_group(0)
            // The last resort if the supervisor unwinds without stopping it.
            .kill_on_drop(true)
            .spawn()
    }

    /// What must hold before the role starts: the local agent is enrolled.
    pub async fn prepare(self, plan: &Plan, tls: &InternalTls) -> anyhow::Result<()> {
        match (self, &plan.local_agent) {
            (ChildRole::Agent, Some(agent)) => local_agent::ensure_joined(plan, agent, tls).await,
            _ => Ok(()),
        }
    }

    /// Completes once the role answers: gRPC health over mutual TLS for the gRPC roles (as the
    /// role that calls each one, the only callers they admit), a TCP connection for the HTTP
    /// ones (access has no gRPC server; the gateway dials the api on first use). The agent
    /// serves nothing: enrolled and started, it is as ready as the supervisor can tell (its
    /// machine's status shows the rest).
    pub async fn ready(self, plan: &Plan, tls: &InternalTls) -> anyhow::Result<()> {
        let addr = match self {
            ChildRole::Agent => return Ok(()),
            ChildRole::Api => plan.api_addr,
            ChildRole::Controller => plan.controller_addr,
            ChildRole::Metering => plan.metering_addr,
            ChildRole::Access => plan.access_addr,
            ChildRole::Gateway => plan.http_addr,
        };
        let caller = self.caller(tls)?;
        while !Self::answers(caller.as_ref(), addr).await {
            tokio::time::sleep(PROBE_EVERY).await;
        }
        Ok(())
    }

    /// How a probe calls the role: as the role that calls it (the only callers it admits) for
    /// the gRPC roles; `None` for the HTTP ones, which a TCP connection tells.
    pub fn caller(self, tls: &InternalTls) -> anyhow::Result<Option<ClientTls>> {
        Ok(match self {
            ChildRole::Api => Some(tls.client(Role::Gateway, Role::Api)?),
            ChildRole::Controller => Some(tls.client(Role::Api, Role::Controller)?),
            ChildRole::Metering => Some(tls.client(Role::Api, Role::Metering)?),
            ChildRole::Access | ChildRole::Gateway | ChildRole::Agent => None,
        })
    }

    /// Whether the role at `addr` answers now: gRPC health over mutual TLS, or a connection.
    pub async fn answers(caller: Option<&ClientTls>, addr: SocketAddr) -> bool {
        let addr = addr.to_string();
        match caller {
            Some(client) => grpc::is_serving(client, &addr).await,
            None => TcpStream::connect(&addr).await.is_ok(),
        }
    }

    /// SIGTERM, then SIGKILL if the child still runs after `grace`; returns once it is reaped.
    pub async fn stop(self, child: &mut Child, grace: Duration) -> Option<ExitStatus> {
        // `id()` is None once the child is reaped: its PID may belong to someone else by then.
        if let Some(pid) = child.id().and_then(|id| Pid::from_raw(id.try_into().ok()?)) {
            let _ = kill_process(pid, Signal::TERM);
        }
        match tokio::time::timeout(grace, child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                tracing::warn!(
                    child = self.name(),
                    ?grace,
                    "did not stop in time; killing it"
                );
                let _ = child.start_kill();
                child.wait().await.ok()
            }
        }
    }
}
