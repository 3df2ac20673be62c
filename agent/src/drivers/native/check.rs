//! One Python script run, in the foreground, in the sandbox a linux-native notebook gets, with
//! exactly the GPUs named: how an operator (and `scripts/gpu-check`) checks a machine before
//! trusting it with workloads. Its places are fresh and removed afterwards.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use anyhow::{Context, bail};

use super::envs::operator_interpreter;
use super::sandbox::{STAGE_DIR, Sandbox};
use super::{NativeConfig, gpus};
use crate::drivers::local::contract::Serves;
use crate::drivers::local::dirs;

/// What to run: the operator's interpreter, the GPUs it may see (by UUID), the script.
#[derive(Debug, Clone)]
pub struct ScriptRun {
    pub python: PathBuf,
    pub gpus: Vec<String>,
    pub script: PathBuf,
}

/// Runs it, its output on this process's; its exit status.
pub async fn run_script(config: &NativeConfig, run: &ScriptRun) -> anyhow::Result<ExitStatus> {
    if !config.bwrap.is_file() {
        bail!(
            "{} isn't there: install bubblewrap (apt install bubblewrap)",
            config.bwrap.display()
        );
    }
    let interpreter = operator_interpreter(&run.python)
        .await
        .map_err(anyhow::Error::msg)?;
    let nodes = gpus::device_nodes(Path::new(gpus::PROC_GPUS));
    let mut gpu_nodes = Vec::new();
    if !run.gpus.is_empty() {
        gpu_nodes.extend(gpus::shared_nodes());
    }
    for uuid in &run.gpus {
        let Some(node) = nodes.get(uuid) else {
            let mut known: Vec<&String> = nodes.keys().collect();
            known.sort();
            bail!("{uuid} isn't one of this machine's GPUs (the NVIDIA driver lists {known:?})");
        };
        gpu_nodes.push(node.clone());
    }
    let root = rustix::process::geteuid().is_root();
    if root {
        std::fs::create_dir_all(STAGE_DIR).with_context(|| STAGE_DIR.to_owned())?;
    }
    let user = super::super::local::workload_user();
    let places = tempfile::Builder::new()
        .prefix("einsora-sandbox-")
        .tempdir()
        .context("making its places")?;
    let dir = places.path();
    let (run_dir, data, secret, launchers) = (
        dir.join("run"),
        dir.join("data"),
        dir.join("secret"),
        dir.join("launchers"),
    );
    dirs::private_dir(&run_dir, user)?;
    dirs::private_dir(&data, user)?;
    dirs::agent_dir(&secret)?;
    let token_file = secret.join("token");
    dirs::secret_file(&token_file, &dirs::new_token()?, user)?;
    std::fs::create_dir(&launchers)?;
    std::fs::set_permissions(&launchers, std::fs::Permissions::from_mode(0o755))?;
    let script = launchers.join("script.py");
    std::fs::copy(&run.script, &script).with_context(|| run.script.display().to_string())?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644))?;
    let sandbox = Sandbox {
        bwrap: config.bwrap.clone(),
        serves: Serves::Notebook { data },
        cpus: 1,
        interpreter,
        launcher: "script.py",
        launchers,
        run_dir,
        token_file,
        gpus: run.gpus.clone(),
        gpu_nodes,
        user: root.then_some(user),
        netns: None,
        cgroup: Vec::new(),
    };
    let command = sandbox.command();
    let status = tokio::process::Command::new(&command.program)
        .args(&command.args)
        .env_clear()
        .envs(command.env)
        .current_dir(&command.cwd)
        .stdin(std::process::Stdio::null())
        .status()
        .await
        .with_context(|| command.program.display().to_string())?;
    Ok(status)
}
