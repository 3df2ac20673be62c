//! The controller's settings, all validated before anything is bound or opened.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use einsora_core::catalog::Catalog;
use einsora_core::region::Region;
use einsora_runtime::grpc::InternalTls;
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_store::{DatabaseUrl, OutputCaps};

use crate::fake::FakeConfig;

pub const ADDR: &str = "EINSORA_CONTROLLER_ADDR";
pub const AGENT_ADDR: &str = "EINSORA_AGENT_ADDR";
pub const REGION: &str = "EINSORA_REGION";
pub const INTERVAL: &str = "EINSORA_CONTROLLER_INTERVAL";
pub const BACKEND: &str = "EINSORA_CLUSTER_BACKEND";
/// How long the region lease lasts unrenewed (default three intervals, at least 30 s).
pub const LEASE: &str = "EINSORA_CONTROLLER_LEASE";
/// How long a workload may stay provisioning before it fails.
pub const PROVISIONING_TIMEOUT: &str = "EINSORA_PROVISIONING_TIMEOUT";
/// A request waiting this long stops smaller requests of its class and region from
/// backfilling ahead of it (aging: large requests don't starve).
pub const AGING_AFTER: &str = "EINSORA_AGING_AFTER";
/// A machine silent this long is offline (agent backend).
pub const OFFLINE_AFTER: &str = "EINSORA_AGENT_OFFLINE_AFTER";
/// A machine offline this long fails its running workloads and stops its stopping ones.
pub const OFFLINE_FAIL: &str = "EINSORA_AGENT_OFFLINE_FAIL";
/// How long a machine certificate lasts; agents renew theirs over Sync at half of it.
pub const CERT_LIFETIME: &str = "EINSORA_AGENT_CERT_LIFETIME";

/// Enrolment attempts allowed per minute from one address (an IPv6 /64) on the agents' port.
pub const ENROL_PER_MINUTE: &str = "EINSORA_AGENT_ENROL_PER_MINUTE";
/// Connections the agents' port holds at once; one more waits until one closes. The default,
/// 16,384, holds the 10,000 machines one controller is built for, with room to reconnect.
pub const AGENT_CONNECTIONS: &str = "EINSORA_AGENT_MAX_CONNECTIONS";
/// How long workloads' output is kept (ADR 0011).
pub const LOG_RETENTION: &str = "EINSORA_LOG_RETENTION";
/// How long the activity log's entries are kept.
pub const ACTIVITY_RETENTION: &str = "EINSORA_ACTIVITY_RETENTION";
/// How much workloads' output the store keeps: each workload's, each tenant's, in all.
pub const LOG_WORKLOAD_CAP: &str = "EINSORA_LOG_WORKLOAD_CAP";
pub const LOG_TENANT_CAP: &str = "EINSORA_LOG_TENANT_CAP";
pub const LOG_TOTAL_CAP: &str = "EINSORA_LOG_TOTAL_CAP";

/// The caps' defaults (ADR 0011): the oldest lines are dropped past them.
pub const OUTPUT_CAPS: OutputCaps = OutputCaps {
    per_workload: 16 << 20,
    per_tenant: 512 << 20,
    total: 4 << 30,
};

const MIN_DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Where workloads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// Node agents syncing over mutual TLS (the default; arrives with node agents).
    Agent,
    /// In memory, for development and tests (the default of `einsora up` and `einsora dev`
    /// until node agents arrive).
    Fake,
    Kubernetes,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub agent_addr: SocketAddr,
    pub database: DatabaseUrl,
    pub catalog: Arc<Catalog>,
    pub region: Region,
    pub timers: Timers,
    pub limits: AgentLimits,
    pub backend: BackendKind,
    pub fake: FakeConfig,
    pub tls: InternalTls,
    /// The agent state directory of the machine the access proxy can reach (this host's own,
    /// `EINSORA_AGENT_STATE_DIR`): only its workloads are opened, at the socket it lays out.
    pub reachable_agent: einsora_core::run_dirs::RunDirs,
    /// How long workloads' output is kept (`EINSORA_LOG_RETENTION`).
    pub output_retention: Duration,
    /// How long activity log entries are kept (`EINSORA_ACTIVITY_RETENTION`).
    pub activity_retention: Duration,
    /// How much workloads' output is kept (`EINSORA_LOG_*_CAP`).
    pub output_caps: OutputCaps,
}

/// The controller's timers, settable so tests can scale them down. (The 0.5 s recheck while
/// something is starting or stopping is a cap on the interval, not a timer of its own.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    /// A pass runs at least this often (and at once when the store signals a change).
    pub interval: Duration,
    pub lease: Duration,
    pub provisioning_timeout: Duration,
    /// Waiting this long, a request holds back smaller ones of its class and region (aging).
    pub aging_after: Duration,
    /// Agents: silent this long, a machine is offline; offline this long, its workloads fail.
    pub offline_after: Duration,
    pub offline_fail: Duration,
    pub cert_lifetime: Duration,
    /// Each machine's stream: not settings (tests scale them down).
    pub stream: crate::agents::StreamTimers,
}

/// The agents' port's limits on what its callers may ask of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentLimits {
    pub enrol_per_minute: usize,
    pub max_connections: usize,
}

impl Timers {
    /// The leader renews this often, so a long pass never lets the lease lapse.
    pub fn renew_every(&self) -> Duration {
        self.lease / 3
    }

    /// A leader that couldn't renew for this long stops (two thirds of the lease).
    pub fn give_up_after(&self) -> Duration {
        self.lease * 2 / 3
    }
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let catalog = einsora_runtime::catalog::from_settings(settings)?;
        let default_region = catalog.default_region().as_str().to_owned();
        let region = settings.parse_with(REGION, &default_region, |name| {
            let region =
                Region::new(name).map_err(|e| format!("is not a valid region: {}", e.problem))?;
            if !catalog.has_region(&region) {
                return Err("is not a region of the catalog".to_owned());
            }
            Ok(region)
        })?;
        let backends = [
            ("agent", BackendKind::Agent),
            ("fake", BackendKind::Fake),
            ("kubernetes", BackendKind::Kubernetes),
        ];
        let backend = settings.choice(BACKEND, &backends, "agent")?;
        let interval = settings.positive_duration(INTERVAL, "5s")?;
        let default_lease = (interval * 3).max(MIN_DEFAULT_LEASE);
        let lease =
            settings.positive_duration(LEASE, &format!("{}ms", default_lease.as_millis()))?;
        if lease < interval * 3 {
            return Err(ConfigError::new(
                LEASE,
                format!(
                    "must be at least three intervals ({}ms), so a leader renews it in time",
                    (interval * 3).as_millis()
                ),
            ));
        }
        let timers = Timers {
            interval,
            lease,
            provisioning_timeout: settings.positive_duration(PROVISIONING_TIMEOUT, "10m")?,
            aging_after: settings.positive_duration(AGING_AFTER, "10m")?,
            offline_after: settings.positive_duration(OFFLINE_AFTER, "45s")?,
            offline_fail: settings.positive_duration(OFFLINE_FAIL, "10m")?,
            cert_lifetime: settings.positive_duration(CERT_LIFETIME, "720h")?,
            stream: crate::agents::StreamTimers::default(),
        };
        let limits = AgentLimits {
            enrol_per_minute: count(settings, ENROL_PER_MINUTE, "10")?,
            max_connections: count(settings, AGENT_CONNECTIONS, "16384")?,
        };
        let cfg = Config {
            addr: settings.socket_addr(ADDR, "127.0.0.1:8082")?,
            agent_addr: settings.socket_addr(AGENT_ADDR, "127.0.0.1:8443")?,
            database: DatabaseUrl::from_settings(settings)?,
            timers,
            limits,
            backend,
            fake: FakeConfig::from_settings(settings, &catalog, &region)?,
            region,
            tls: InternalTls::from_settings(settings)?,
            reachable_agent: einsora_runtime::run_dirs::from_settings(settings)?,
            catalog: Arc::new(catalog),
            output_retention: settings.positive_duration(LOG_RETENTION, "336h")?,
            activity_retention: settings.positive_duration(ACTIVITY_RETENTION, "8760h")?,
            output_caps: output_caps(settings)?,
        };
        // Checked last, so a malformed setting is reported as such whatever the backend.
        if backend == BackendKind::Kubernetes {
            return Err(ConfigError::new(
                BACKEND,
                "kubernetes is not available in this version: use `agent` or `fake`",
            ));
        }
        Ok(cfg)
    }
}

/// A whole number, at least 1.
fn count(settings: &Settings, name: &str, default: &str) -> Result<usize, ConfigError> {
    settings.parse_with(name, default, |v| match v.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("is not a whole number above zero".to_owned()),
    })
}

/// The output caps, each at least 1 MiB (a line of 16 KiB must fit many times over), a
/// workload's no more than a tenant's, a tenant's no more than the whole store's.
fn output_caps(settings: &Settings) -> Result<OutputCaps, ConfigError> {
    let at_least = |name: &str, default: &str| match settings.size(name, default)? {
        bytes if bytes < 1 << 20 => Err(ConfigError::new(name, "must be at least 1MiB")),
        bytes => Ok(bytes),
    };
    let caps = OutputCaps {
        per_workload: at_least(LOG_WORKLOAD_CAP, "16MiB")?,
        per_tenant: at_least(LOG_TENANT_CAP, "512MiB")?,
        total: at_least(LOG_TOTAL_CAP, "4GiB")?,
    };
    if caps.per_workload > caps.per_tenant {
        return Err(ConfigError::new(
            LOG_WORKLOAD_CAP,
            format!("is more than {LOG_TENANT_CAP}"),
        ));
    }
    if caps.per_tenant > caps.total {
        return Err(ConfigError::new(
            LOG_TENANT_CAP,
            format!("is more than {LOG_TOTAL_CAP}"),
        ));
    }
    Ok(caps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_parses() {
        let settings = Settings::from_map([("EINSORA_DATA_DIR", "/tmp/einsora-test")]);
        let cfg = Config::from_settings(&settings).unwrap();
        assert_eq!(
            cfg.timers.cert_lifetime,
            Duration::from_secs(30 * 24 * 3600)
        );
        assert_eq!(cfg.timers.offline_after, Duration::from_secs(45));
        assert_eq!(cfg.timers.lease, Duration::from_secs(30));
        assert_eq!(cfg.timers.aging_after, Duration::from_secs(600));
        assert_eq!(cfg.limits.enrol_per_minute, 10);
        assert_eq!(cfg.limits.max_connections, 16384);
    }

    #[test]
    fn a_limit_must_be_a_whole_number_above_zero() {
        for bad in ["0", "-1", "ten", "1.5"] {
            let settings = Settings::from_map([
                ("EINSORA_DATA_DIR", "/tmp/einsora-test"),
                (ENROL_PER_MINUTE, bad),
            ]);
            let err = Config::from_settings(&settings).unwrap_err().to_string();
            assert!(err.contains(ENROL_PER_MINUTE), "{bad}: {err}");
        }
    }

    #[test]
    fn the_output_caps_are_sizes_in_order() {
        let with = |pairs: &[(&str, &str)]| {
            let mut all = vec![("EINSORA_DATA_DIR", "/tmp/einsora-test")];
            all.extend_from_slice(pairs);
            Config::from_settings(&Settings::from_map(all))
        };
        assert_eq!(with(&[]).unwrap().output_caps, OUTPUT_CAPS);
        let caps = with(&[(LOG_WORKLOAD_CAP, "64MiB"), (LOG_TOTAL_CAP, "1TiB")])
            .unwrap()
            .output_caps;
        assert_eq!((caps.per_workload, caps.total), (64 << 20, 1 << 40));
        for (bad, names) in [
            ((LOG_WORKLOAD_CAP, "1KiB"), LOG_WORKLOAD_CAP),
            ((LOG_WORKLOAD_CAP, "1GiB"), LOG_WORKLOAD_CAP),
            ((LOG_TENANT_CAP, "8GiB"), LOG_TENANT_CAP),
            ((LOG_TOTAL_CAP, "lots"), LOG_TOTAL_CAP),
        ] {
            let err = with(&[bad]).unwrap_err().to_string();
            assert!(err.starts_with(names), "{bad:?}: {err}");
        }
    }
}
