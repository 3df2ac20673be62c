//! The linux-native driver's settings.

use std::path::Path;

use einsora_runtime::settings::{ConfigError, Settings};

use super::NativeConfig;
use super::egress::{DEFAULT_SUBNET, SUBNET, Subnet};
use crate::drivers::local::DiskConfig;
use crate::drivers::local::fence::EgressSetting;
use crate::models::MODELS_DIR;

/// `auto` (offered where there is no docker driver and bubblewrap works), `on`, or `off`.
pub const ENABLED: &str = "EINSORA_AGENT_NATIVE";
/// An interpreter that already has what every runtime needs (JupyterLab, xllamacpp, PyTorch,
/// vLLM…), used as it is: for machines where no environment can be built.
pub const PYTHON: &str = "EINSORA_NATIVE_PYTHON";
/// A directory of wheels the environments are built from, offline; without it, from the
/// package index pip is configured with. Each wheel is checked against the lock's hashes
/// either way.
pub const WHEELS: &str = "EINSORA_NATIVE_WHEELS";

/// Bubblewrap's program, where it isn't Debian's.
pub const BWRAP: &str = "EINSORA_NATIVE_BWRAP";

/// Whether the driver is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enabled {
    /// Where the agent has no docker driver.
    Auto,
    On,
}

impl NativeConfig {
    /// `None` when the driver is turned off.
    pub fn from_settings(
        settings: &Settings,
        state_dir: &Path,
    ) -> Result<Option<NativeConfig>, ConfigError> {
        let choices = [
            ("auto", Some(Enabled::Auto)),
            ("on", Some(Enabled::On)),
            ("off", None),
        ];
        let Some(enabled) = settings.choice(ENABLED, &choices, "auto")? else {
            return Ok(None);
        };
        let models = settings.data_dir()?.join("models");
        Ok(Some(NativeConfig {
            enabled,
            state_dir: state_dir.to_path_buf(),
            models_dir: Some(settings.path(MODELS_DIR, &models)?),
            disks: DiskConfig::from_settings(settings)?,
            python: settings.optional_path(PYTHON)?,
            wheels: settings.optional_path(WHEELS)?,
            bwrap: settings.path(BWRAP, Path::new("/usr/bin/bwrap"))?,
            egress: EgressSetting::from_settings(settings)?,
            egress_subnet: settings.parse_with(SUBNET, DEFAULT_SUBNET, Subnet::parse)?,
            // Known once the agent knows its controllers: set before starting.
            controllers: Default::default(),
            platform: super::Platform::Linux,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn config(pairs: &[(&str, &str)]) -> Result<Option<NativeConfig>, ConfigError> {
        let mut all = vec![("EINSORA_DATA_DIR", "/d")];
        all.extend_from_slice(pairs);
        NativeConfig::from_settings(&Settings::from_map(all), Path::new("/state"))
    }

    #[test]
    fn it_is_auto_unless_turned_on_or_off_and_names_an_interpreter_only_when_given_one() {
        let c = config(&[]).unwrap().unwrap();
        assert_eq!(c.enabled, Enabled::Auto);
        assert_eq!(c.python, None);
        assert_eq!(c.wheels, None);
        let c = config(&[(ENABLED, "on"), (PYTHON, "/opt/conda/bin/python")])
            .unwrap()
            .unwrap();
        assert_eq!(c.enabled, Enabled::On);
        assert_eq!(c.python, Some(PathBuf::from("/opt/conda/bin/python")));
        assert!(config(&[(ENABLED, "off")]).unwrap().is_none());
        let err = config(&[(ENABLED, "yes")]).unwrap_err().to_string();
        assert!(err.contains(ENABLED), "{err}");
    }
}
