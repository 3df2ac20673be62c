//! `linux-native`: notebooks and endpoints as sandboxed processes, for Linux machines without
//! Docker (HPC boxes, GPU servers with only CUDA and Python). Each workload's server runs under
//! the process supervisor (`drivers::process`: adopted again after an agent restart), in a
//! bubblewrap sandbox (sandbox.rs), with the same entrypoint, paths and arguments as its image
//! (`local::contract`), from an environment built from the image's lock (envs.rs). Weak
//! isolation: the machine owner's own workloads only (`einsora_core::driver`). A root agent
//! gives each a cgroup with its class's CPU, memory and PID limits (cgroup.rs), and the owner's
//! notebooks outbound network behind the fence (egress.rs); docs/security.md says what holds.

mod cgroup;
mod check;
mod config;
mod egress;
mod envs;
mod gpus;
pub(crate) mod output;
mod platform;
pub(crate) mod runtimes;
mod sandbox;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

pub use check::{ScriptRun, run_script};
pub use config::{BWRAP, ENABLED, Enabled, PYTHON, WHEELS};
pub use egress::{
    BRIDGE as EGRESS_BRIDGE, DEFAULT_SUBNET, SUBNET as EGRESS_SUBNET, Subnet, netns_name,
};
pub use envs::Interpreter;
pub use platform::Platform;
pub use sandbox::{Command, system_args};

use super::local::fence::EgressSetting;
use super::local::{DiskConfig, Handle, SeenMap};

pub const NAME: &str = "linux-native";

/// How the driver is set up on this machine.
#[derive(Debug, Clone)]
pub struct NativeConfig {
    pub enabled: Enabled,
    pub state_dir: PathBuf,
    pub models_dir: Option<PathBuf>,
    pub disks: DiskConfig,
    /// The operator's interpreter (`EINSORA_NATIVE_PYTHON`), used for every runtime.
    pub python: Option<PathBuf>,
    /// Wheels the environments are built from, offline (`EINSORA_NATIVE_WHEELS`).
    pub wheels: Option<PathBuf>,
    /// Bubblewrap's program (`EINSORA_NATIVE_BWRAP`).
    pub bwrap: PathBuf,
    /// Whether the owner's notebooks may have outbound network here, and on which subnet
    /// (egress.rs).
    pub egress: EgressSetting,
    pub egress_subnet: egress::Subnet,
    /// Which OS's sandbox its workloads run in: linux-native's bubblewrap, or macos-native's
    /// `sandbox-exec`.
    pub platform: Platform,
    /// The region's controllers the agent syncs with, which egress can't reach.
    pub controllers: crate::controllers::Controllers,
}

#[derive(Debug)]
pub struct Native {
    name: &'static str,
    handle: Handle,
    nvidia: bool,
    restarts: Arc<AtomicU32>,
}

impl Native {
    /// The driver, if its sandbox can be made here: on Linux, bubblewrap is here and can make
    /// one (and the operator's interpreter, when one is set, answers); on a Mac,
    /// `sandbox-exec` and uv are here. Why not is said in the log. Its worker runs until the
    /// driver is dropped. `outbox` takes what its workloads print.
    pub async fn detect(
        config: NativeConfig,
        changed: Arc<Notify>,
        outbox: super::local::output::Outbox,
    ) -> Option<Native> {
        let name = config.platform.name();
        if let Platform::Macos(tools) = &config.platform {
            if let Err(why) = super::macos::ready(tools).await {
                tracing::warn!(%why, "no macos-native driver");
                return None;
            }
            return Native::start(config, None, changed, outbox, name);
        }
        if !config.bwrap.is_file() {
            tracing::info!(
                bwrap = %config.bwrap.display(),
                "no linux-native driver: bubblewrap isn't installed (Debian and Ubuntu: apt install bubblewrap; elsewhere {BWRAP} names it)"
            );
            return None;
        }
        if let Err(why) = sandbox_works(&config.bwrap).await {
            tracing::warn!(%why, "no linux-native driver: bubblewrap can't make a sandbox here");
            return None;
        }
        let operator = match &config.python {
            None => None,
            Some(python) => match envs::operator_interpreter(python).await {
                Ok(interpreter) => Some(interpreter),
                Err(why) => {
                    tracing::warn!(%why, setting = PYTHON, "no linux-native driver: its interpreter doesn't answer");
                    return None;
                }
            },
        };
        if rustix::process::geteuid().is_root()
            && let Err(e) = std::fs::create_dir_all(sandbox::STAGE_DIR)
        {
            tracing::warn!(error = %e, dir = sandbox::STAGE_DIR, "no linux-native driver: can't make its staging directory");
            return None;
        }
        Native::start(config, operator, changed, outbox, name)
    }

    /// Its entrypoints written, its worker started.
    fn start(
        config: NativeConfig,
        operator: Option<envs::Interpreter>,
        changed: Arc<Notify>,
        outbox: super::local::output::Outbox,
        name: &'static str,
    ) -> Option<Native> {
        let launchers = config
            .state_dir
            .join(config.platform.dir())
            .join("launchers");
        let runtimes = match &config.platform {
            Platform::Linux => runtimes::RUNTIMES,
            Platform::Macos(_) => super::macos::runtimes::RUNTIMES,
        };
        if let Err(e) = write_launchers(&launchers, runtimes) {
            tracing::warn!(error = %e, "no {name} driver: can't write its entrypoints");
            return None;
        }
        let nvidia = config.platform == Platform::Linux && Path::new("/dev/nvidiactl").exists();
        let seen = SeenMap::default();
        let (handle, receiver) = Handle::new(Arc::clone(&seen));
        let restarts = Arc::new(AtomicU32::new(0));
        let parts = worker::Parts {
            config,
            operator,
            launchers,
            seen,
            changed,
            nvidia,
            outbox,
        };
        tokio::spawn(worker::supervised(parts, receiver, Arc::clone(&restarts)));
        tracing::info!(nvidia, "{name} driver ready");
        Some(Native {
            name,
            handle,
            nvidia,
            restarts,
        })
    }

    /// Its name: linux-native or macos-native.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether NVIDIA classes can run here: the driver's device nodes are.
    pub fn nvidia(&self) -> bool {
        self.nvidia
    }

    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

/// Whether bubblewrap makes a sandbox as a workload would get one (as the workload's user when
/// the agent is root): user namespaces may be turned off, or forbidden to unprivileged users.
async fn sandbox_works(bwrap: &Path) -> Result<(), String> {
    let (uid, gid) = super::local::workload_user();
    let mut command = if rustix::process::geteuid().is_root() {
        let mut c = tokio::process::Command::new("/usr/bin/setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .args(["--clear-groups", "--no-new-privs", "--"])
            .arg(bwrap);
        c
    } else {
        tokio::process::Command::new(bwrap)
    };
    command
        // What every sandbox asks for (sandbox.rs): a hardened service manager can forbid a
        // new /proc or a hostname of its own, and then no workload would ever start.
        .args([
            "--unshare-all",
            "--hostname",
            "einsora",
            "--ro-bind",
            "/",
            "/",
        ])
        .args(["--proc", "/proc", "--dev", "/dev", "--", "/bin/true"])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(10), command.output())
        .await
        .map_err(|_| "bubblewrap didn't finish in 10 s".to_owned())?
        .map_err(|e| format!("{}: {e}", bwrap.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(format!(
        "{} ({}); user namespaces may be off (sysctl user.max_user_namespaces, \
         kernel.apparmor_restrict_unprivileged_userns)",
        said.trim(),
        output.status
    ))
}

/// The entrypoints, written afresh at each start (the agent's own files, readable by the
/// workloads they are mounted into).
fn write_launchers(dir: &Path, runtimes: &[runtimes::Runtime]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    for runtime in runtimes {
        let (name, text) = runtime.launcher;
        let path = dir.join(name);
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(())
}
