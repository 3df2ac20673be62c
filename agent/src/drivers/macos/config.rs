//! The macos-native driver's settings.

use std::path::{Path, PathBuf};

use einsora_runtime::settings::{ConfigError, Settings};

use crate::drivers::local::DiskConfig;
use crate::drivers::local::fence::EgressSetting;
use crate::drivers::native::{
    DEFAULT_SUBNET, EGRESS_SUBNET, Enabled, NativeConfig, Platform, Subnet,
};
use crate::models::MODELS_DIR;

/// `auto` (on a Mac), `on`, or `off`.
pub const ENABLED: &str = "EINSORA_AGENT_MACOS";
/// `sandbox-exec`, where it isn't macOS's own.
pub const SANDBOX_EXEC: &str = "EINSORA_MACOS_SANDBOX_EXEC";
/// uv, which builds each runtime's environment from its lock: a path, or a name on PATH.
pub const UV: &str = "EINSORA_MACOS_UV";
/// The Python uv builds environments with: a version it finds or installs, or a path.
pub const PYTHON: &str = "EINSORA_MACOS_PYTHON";
/// A directory of wheels the environments are built from, offline.
pub const WHEELS: &str = "EINSORA_MACOS_WHEELS";
/// Tests only: this agent is a Mac played on Linux by stand-ins (`crates/standins`): its
/// inventory from `EINSORA_MACOS_SYSCTL`, its environments from the Linux locks.
pub const STANDIN: &str = "EINSORA_MACOS_STANDIN";

/// The Mac's tools, and where its run directories are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacosConfig {
    pub sandbox_exec: PathBuf,
    pub uv: PathBuf,
    pub python: String,
    pub wheels: Option<PathBuf>,
    /// Where its workloads' run directories are (`einsora_core::run_dirs::RunDirs`).
    pub run_root: PathBuf,
    pub standin: bool,
}

/// Whether this agent is a Mac played by stand-ins.
pub fn standin(settings: &Settings) -> Result<bool, ConfigError> {
    settings.choice(STANDIN, &[("on", true), ("off", false)], "off")
}

/// The macos-native driver's setup, `None` when it is off (by default everywhere but a Mac and
/// its stand-in).
pub fn from_settings(
    settings: &Settings,
    state_dir: &Path,
) -> Result<Option<NativeConfig>, ConfigError> {
    let standin = standin(settings)?;
    let choices = [("auto", None), ("on", Some(true)), ("off", Some(false))];
    let mac = std::env::consts::OS == "macos" || standin;
    if !settings.choice(ENABLED, &choices, "auto")?.unwrap_or(mac) {
        return Ok(None);
    }
    let models = settings.data_dir()?.join("models");
    let dirs = einsora_runtime::run_dirs::from_settings(settings)?;
    let tools = MacosConfig {
        sandbox_exec: settings.path(SANDBOX_EXEC, Path::new("/usr/bin/sandbox-exec"))?,
        uv: PathBuf::from(settings.string(UV, "uv")?),
        python: settings.string(PYTHON, "3.11")?,
        wheels: settings.optional_path(WHEELS)?,
        run_root: dirs.macos_root,
        standin,
    };
    Ok(Some(NativeConfig {
        enabled: Enabled::On,
        state_dir: state_dir.to_path_buf(),
        models_dir: Some(settings.path(MODELS_DIR, &models)?),
        disks: DiskConfig::from_settings(settings)?,
        python: None,
        wheels: tools.wheels.clone(),
        bwrap: PathBuf::new(),
        egress: EgressSetting::from_settings(settings)?,
        // Unused: a Mac has no network namespaces.
        egress_subnet: settings.parse_with(EGRESS_SUBNET, DEFAULT_SUBNET, Subnet::parse)?,
        controllers: Default::default(),
        platform: Platform::Macos(tools),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Option<NativeConfig>, ConfigError> {
        let mut all = vec![("EINSORA_DATA_DIR", "/d")];
        all.extend_from_slice(pairs);
        from_settings(&Settings::from_map(all), Path::new("/state"))
    }

    #[test]
    fn it_is_on_on_a_mac_and_its_stand_in_and_off_elsewhere_unless_asked() {
        let here = config(&[]).unwrap();
        assert_eq!(here.is_some(), std::env::consts::OS == "macos");
        let c = config(&[(STANDIN, "on"), ("EINSORA_MACOS_RUN_DIR", "/r")])
            .unwrap()
            .unwrap();
        let Platform::Macos(tools) = c.platform else {
            panic!("{:?}", c.platform)
        };
        assert!(tools.standin);
        assert_eq!(tools.run_root, PathBuf::from("/r"));
        assert_eq!(tools.sandbox_exec, PathBuf::from("/usr/bin/sandbox-exec"));
        assert_eq!(tools.python, "3.11");
        assert!(
            config(&[(STANDIN, "on"), (ENABLED, "off")])
                .unwrap()
                .is_none()
        );
        let err = config(&[(STANDIN, "yes")]).unwrap_err().to_string();
        assert!(err.contains(STANDIN), "{err}");
    }
}
