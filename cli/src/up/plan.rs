//! What a Solo installation runs with: the operator's `EINSORA_*` settings over Solo's defaults,
//! every role's configuration validated before anything is written or bound, and its ports
//! checked free.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use einsora_api::setup::{AuthMode, DEV_OWNER_SLUG, OWNER_SLUG};
use einsora_runtime::metrics::METRICS_ADDR;
use einsora_runtime::settings::{DATA_DIR, Settings};
use einsora_runtime::telemetry::LOG_FILE;

use einsora_controller::BackendKind;

use super::Profile;
use super::children::ChildRole;
use super::local_agent::LocalAgent;

/// `false`: this machine runs no workloads (a Lab's control host); no local agent.
pub const LOCAL_AGENT: &str = "EINSORA_LOCAL_AGENT";
/// The tenant (slug) that owns this machine: `owner`, or in dev auth mode `acme`.
pub const MACHINE_OWNER: &str = "EINSORA_MACHINE_OWNER";

/// The installation's metrics port under `up` (each role given its own, which `up` relays).
const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9464";

/// How long a child has to stop after SIGTERM before it gets SIGKILL.
pub const STOP_GRACE: &str = "EINSORA_STOP_GRACE";

#[derive(Debug)]
pub struct Plan {
    /// What every child sees: this process's settings with Solo's defaults filled in.
    pub settings: Settings,
    /// The defaults that were filled in, set in each child's environment.
    pub defaults: Vec<(&'static str, OsString)>,
    pub data_dir: PathBuf,
    pub auth_mode: AuthMode,
    pub http_addr: SocketAddr,
    pub access_addr: SocketAddr,
    pub api_addr: SocketAddr,
    pub controller_addr: SocketAddr,
    pub metering_addr: SocketAddr,
    /// Where `up` serves the installation's metrics (`EINSORA_METRICS_ADDR`).
    pub metrics_addr: SocketAddr,
    /// Where each role serves its own, for `up` to relay.
    pub role_metrics: BTreeMap<&'static str, SocketAddr>,
    pub stop_grace: Duration,
    /// On the agent backend (the default), this machine's own agent.
    pub local_agent: Option<LocalAgent>,
    /// Addresses the operator chose, with their settings, to check before starting.
    ports: Vec<(&'static str, SocketAddr)>,
}

impl Plan {
    /// `temp_dir` is `einsora dev`'s throwaway data directory, used unless EINSORA_DATA_DIR
    /// names one.
    pub fn new(profile: Profile, temp_dir: Option<&Path>) -> anyhow::Result<Plan> {
        Plan::of(Settings::from_env(), profile, temp_dir)
    }

    /// The plan for the operator's `operator` settings.
    fn of(operator: Settings, profile: Profile, temp_dir: Option<&Path>) -> anyhow::Result<Plan> {
        let mut defaults: Vec<(&'static str, OsString)> = Vec::new();
        let mut default = |name: &'static str, value: OsString| {
            if !operator.is_set(name) {
                defaults.push((name, value));
            }
        };
        let data_dir = match temp_dir {
            Some(dir) if !operator.is_set(DATA_DIR) => dir.to_path_buf(),
            _ => operator.data_dir()?,
        };
        default(DATA_DIR, data_dir.clone().into());
        default(LOG_FILE, data_dir.join("einsora.log").into());
        if profile == Profile::Dev {
            default(einsora_api::setup::AUTH_MODE, "dev".into());
            default(einsora_controller::BACKEND, "fake".into());
        }
        // Internal ports, and the agents' port (a Lab that enrols other machines sets
        // EINSORA_AGENT_ADDR to a routable address).
        let internal = [
            einsora_api::ADDR,
            einsora_controller::ADDR,
            einsora_metering::ADDR,
            einsora_controller::AGENT_ADDR,
        ];
        // And each role's metrics port, which `up` relays, and one for `up`'s own should it be
        // asked for any port (`:0`): all picked at once, so none is given twice (`up` binding
        // `:0` later could be handed a port just released here, before its role binds it).
        let all_roles = ChildRole::SERVICES.into_iter().chain([ChildRole::Agent]);
        let mut free = free_loopback_ports(internal.len() + ChildRole::SERVICES.len() + 2)?;
        let spare = free.pop().context("a spare port")?;
        let role_ports = free.split_off(internal.len());
        for (name, addr) in internal.into_iter().zip(free) {
            default(name, addr.to_string().into());
        }
        let mut settings = defaults
            .iter()
            .fold(operator.clone(), |s, (name, value)| s.with(name, value));
        let access = einsora_access::Config::from_settings(&settings)?;
        // Links point at the access proxy's own port unless the operator says otherwise.
        if !operator.is_set(einsora_access::URL) {
            let url = format!("http://localhost:{}", access.addr.port());
            settings = settings.with(einsora_access::URL, &url);
            defaults.push((einsora_access::URL, url.into()));
        }

        let api = einsora_api::Config::from_settings(&settings)?;
        let controller = einsora_controller::Config::from_settings(&settings)?;
        let metering = einsora_metering::Config::from_settings(&settings)?;
        let gateway = einsora_gateway::Config::from_settings(&settings)?;
        let agent = einsora_agent::Config::from_settings(&settings)?;
        let runs_agent =
            settings.choice(LOCAL_AGENT, &[("true", true), ("false", false)], "true")?;
        let owner_slug = match api.auth_mode {
            AuthMode::Local => OWNER_SLUG,
            AuthMode::Dev => DEV_OWNER_SLUG,
        };
        let owner = settings.parse_with(MACHINE_OWNER, owner_slug, |slug| Ok(slug.to_owned()))?;
        let on_agents = controller.backend == BackendKind::Agent;
        let local_agent = (on_agents && runs_agent).then(|| {
            let mut dial = controller.agent_addr;
            if dial.ip().is_unspecified() {
                dial.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            LocalAgent {
                state_dir: agent.state_dir,
                controller: dial.to_string(),
                region: controller.region.clone(),
                owner,
            }
        });
        let mut metrics_addr = settings.socket_addr(METRICS_ADDR, DEFAULT_METRICS_ADDR)?;
        if metrics_addr.port() == 0 {
            metrics_addr.set_port(spare.port());
        }
        let mut role_metrics: BTreeMap<&'static str, SocketAddr> =
            all_roles.map(ChildRole::name).zip(role_ports).collect();
        if local_agent.is_none() {
            role_metrics.remove(ChildRole::Agent.name());
        }
        let ports = [
            (METRICS_ADDR, metrics_addr),
            (einsora_gateway::HTTP_ADDR, gateway.http_addr),
            (einsora_access::ADDR, access.addr),
            (einsora_api::ADDR, api.addr),
            (einsora_controller::ADDR, controller.addr),
            (einsora_metering::ADDR, metering.addr),
            (einsora_controller::AGENT_ADDR, controller.agent_addr),
        ]
        .into_iter()
        .filter(|(name, _)| !defaults.iter().any(|(d, _)| d == name))
        .collect();
        Ok(Plan {
            stop_grace: settings.duration(STOP_GRACE, "10s")?,
            auth_mode: api.auth_mode,
            http_addr: gateway.http_addr,
            access_addr: access.addr,
            api_addr: api.addr,
            controller_addr: controller.addr,
            metering_addr: metering.addr,
            metrics_addr,
            role_metrics,
            local_agent,
            data_dir,
            defaults,
            ports,
            settings,
        })
    }

    /// The roles to run: every service, and this machine's agent on the agent backend.
    pub fn roles(&self) -> Vec<ChildRole> {
        let mut roles = ChildRole::SERVICES.to_vec();
        if self.local_agent.is_some() {
            roles.push(ChildRole::Agent);
        }
        roles
    }

    /// The data directory, created owner-only (0700), or made so if it exists.
    pub fn create_data_dir(&self) -> anyhow::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let dir = &self.data_dir;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
            .with_context(|| format!("{DATA_DIR}: can't make {} owner-only", dir.display()))
    }

    /// Fails on the first address something else already holds, naming its setting.
    pub fn check_ports(&self) -> anyhow::Result<()> {
        for &(setting, addr) in &self.ports {
            match TcpListener::bind(addr) {
                Ok(_) => {}
                Err(err) if err.kind() == ErrorKind::AddrInUse => bail!(
                    "port {} is already in use ({setting}={addr}): stop what holds it, or set \
                     {setting} to a free address",
                    addr.port()
                ),
                Err(err) => bail!("{setting}: can't listen on {addr}: {err}"),
            }
        }
        Ok(())
    }

    /// The dashboard's address as a browser on this machine reaches it.
    pub fn dashboard_url(&self) -> String {
        let mut addr = self.http_addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{addr}/")
    }
}

/// `n` distinct loopback ports free right now, for roles only the other roles dial. Each stays
/// bound until all are picked: released one by one, the kernel may hand the same port out
/// twice, and two roles would be given one address (seen in CI: the api and the controller).
fn free_loopback_ports(n: usize) -> anyhow::Result<Vec<SocketAddr>> {
    let held = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").context("finding a free loopback port"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    held.iter().map(|l| Ok(l.local_addr()?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `up`'s own metrics asked on any port get one picked with the roles' ports, none of them.
    #[test]
    fn metrics_on_any_port_get_a_port_no_role_has() {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..50 {
            let operator = Settings::from_map([(METRICS_ADDR, "127.0.0.1:0")]);
            let plan = Plan::of(operator, Profile::Dev, Some(dir.path())).unwrap();
            let port = plan.metrics_addr.port();
            assert_ne!(port, 0);
            let roles = [plan.api_addr, plan.controller_addr, plan.metering_addr]
                .into_iter()
                .chain(plan.role_metrics.values().copied());
            assert!(roles.map(|a| a.port()).all(|p| p != port), "{port}");
        }
    }

    #[test]
    fn the_internal_ports_picked_are_distinct() {
        for _ in 0..500 {
            let mut ports: Vec<u16> = super::free_loopback_ports(4)
                .unwrap()
                .iter()
                .map(std::net::SocketAddr::port)
                .collect();
            ports.sort_unstable();
            ports.dedup();
            assert_eq!(ports.len(), 4, "{ports:?}");
        }
    }
}
