//! `einsora agent inventory` and `einsora agent sandbox`: what an operator checks a machine
//! with before trusting it with workloads (scripts/gpu-check runs both).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use einsora_agent::drivers::native::{NativeConfig, ScriptRun, run_script};
use einsora_agent::inventory::{self, NVIDIA_SMI_QUERY, Probe};
use einsora_runtime::settings::Settings;
use serde_json::json;

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}

pub fn inventory(settings: &Settings, recording: Option<&Path>) -> anyhow::Result<()> {
    let probe = Probe::from_settings(settings)?;
    let found = runtime()?.block_on(inventory::collect(&probe))?;
    let devices: Vec<_> = found
        .devices
        .iter()
        .map(|d| {
            json!({ "vendor": d.vendor.to_string(), "model": d.model, "uuid": d.uuid,
                    "memory_bytes": d.memory_bytes })
        })
        .collect();
    let report = json!({ "hostname": found.hostname, "os": found.os, "arch": found.arch,
                         "cpus": found.cpus, "memory_bytes": found.memory_bytes,
                         "devices": devices });
    println!("{}", serde_json::to_string_pretty(&report)?);
    if let Some(file) = recording {
        let out = std::process::Command::new(&probe.nvidia_smi)
            .args(NVIDIA_SMI_QUERY)
            .output()
            .with_context(|| probe.nvidia_smi.clone())?;
        if !out.status.success() {
            bail!("{} failed ({})", probe.nvidia_smi, out.status);
        }
        std::fs::write(file, &out.stdout).with_context(|| file.display().to_string())?;
    }
    Ok(())
}

pub fn sandbox(
    settings: &Settings,
    python: PathBuf,
    gpus: Vec<String>,
    script: PathBuf,
) -> anyhow::Result<()> {
    let state_dir = einsora_agent::Config::from_settings(settings)?.state_dir;
    let Some(config) = NativeConfig::from_settings(settings, &state_dir)? else {
        bail!("the linux-native driver is turned off (EINSORA_AGENT_NATIVE=off)");
    };
    let run = ScriptRun {
        python,
        gpus,
        script,
    };
    let status = runtime()?.block_on(run_script(&config, &run))?;
    if !status.success() {
        bail!("the script failed in the sandbox ({status})");
    }
    Ok(())
}
