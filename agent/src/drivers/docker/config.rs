//! The docker driver's settings.

use std::collections::BTreeMap;
use std::path::Path;

use einsora_runtime::settings::{ConfigError, Settings};

use super::{DiskConfig, DockerConfig};
use crate::drivers::local::fence::EgressSetting;
use crate::models::MODELS_DIR;

/// `false` keeps the driver off even where an engine answers.
pub const ENABLED: &str = "EINSORA_AGENT_DOCKER";
pub const SOCKET: &str = "EINSORA_DOCKER_SOCKET";
/// `runtime=image,…` over the defaults (the images `einsora images build` makes).
pub const IMAGES: &str = "EINSORA_DOCKER_IMAGES";

/// The catalog runtimes this driver runs, and the image each becomes by default.
const DEFAULT_IMAGES: [(&str, &str); 4] = [
    ("jupyterlab-cpu", "einsora/notebook:local"),
    ("jupyterlab-cuda", "einsora/notebook-cuda:local"),
    ("llama.cpp", "einsora/llamacpp:local"),
    ("vllm", "einsora/vllm:local"),
];

impl DockerConfig {
    /// `None` when the driver is turned off.
    pub fn from_settings(
        settings: &Settings,
        state_dir: &Path,
    ) -> Result<Option<DockerConfig>, ConfigError> {
        if !settings.choice(ENABLED, &[("true", true), ("false", false)], "true")? {
            return Ok(None);
        }
        let mut images: BTreeMap<String, String> = DEFAULT_IMAGES
            .iter()
            .map(|(r, i)| ((*r).to_owned(), (*i).to_owned()))
            .collect();
        let overrides = settings.parse_with(IMAGES, "", |v| {
            v.split(',')
                .filter(|pair| !pair.trim().is_empty())
                .map(|pair| match pair.split_once('=') {
                    Some((runtime, image)) if !runtime.is_empty() && !image.is_empty() => {
                        Ok((runtime.trim().to_owned(), image.trim().to_owned()))
                    }
                    _ => Err(format!("{pair:?} is not runtime=image")),
                })
                .collect::<Result<Vec<_>, _>>()
        })?;
        images.extend(overrides);
        let models = settings.data_dir()?.join("models");
        Ok(Some(DockerConfig {
            socket: settings.path(SOCKET, Path::new("/var/run/docker.sock"))?,
            // Known once the machine has joined: the agent sets it before starting.
            machine: String::new(),
            state_dir: state_dir.to_path_buf(),
            models_dir: Some(settings.path(MODELS_DIR, &models)?),
            images,
            disks: DiskConfig::from_settings(settings)?,
            egress: EgressSetting::from_settings(settings)?,
            // Known once the agent knows its controllers: set before starting, like `machine`.
            controllers: Default::default(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivers::local::fence::EGRESS;

    fn config(pairs: &[(&str, &str)]) -> Result<Option<DockerConfig>, ConfigError> {
        let settings = Settings::from_map(pairs.iter().copied());
        DockerConfig::from_settings(&settings, Path::new("/state"))
    }

    #[test]
    fn images_default_to_the_local_builds_and_can_be_overridden() {
        let c = config(&[("EINSORA_DATA_DIR", "/d")]).unwrap().unwrap();
        assert_eq!(c.images["llama.cpp"], "einsora/llamacpp:local");
        let c = config(&[("EINSORA_DATA_DIR", "/d"), (IMAGES, "llama.cpp=mine:1")])
            .unwrap()
            .unwrap();
        assert_eq!(c.images["llama.cpp"], "mine:1");
        assert_eq!(c.images["jupyterlab-cpu"], "einsora/notebook:local");
        assert_eq!(c.images["jupyterlab-cuda"], "einsora/notebook-cuda:local");
        assert_eq!(c.images["vllm"], "einsora/vllm:local");
        assert!(config(&[("EINSORA_DATA_DIR", "/d"), (IMAGES, "nonsense")]).is_err());
        assert!(config(&[(ENABLED, "false")]).unwrap().is_none());
    }

    #[test]
    fn egress_is_auto_unless_turned_off() {
        let d = ("EINSORA_DATA_DIR", "/d");
        assert_eq!(config(&[d]).unwrap().unwrap().egress, EgressSetting::Auto);
        let off = config(&[d, (EGRESS, "off")]).unwrap().unwrap();
        assert_eq!(off.egress, EgressSetting::Off);
        let err = config(&[d, (EGRESS, "yes")]).unwrap_err().to_string();
        assert!(err.contains(EGRESS), "{err}");
    }
}
