//! The run directories of this host's agent, as settings say where they are: read the same way
//! by the agent (which lays them out) and the controller (which accepts no other socket path).

use einsora_core::run_dirs::{
    MACOS_RUN_DIR, RunDirs, STATE_DIR, default_macos_run_dir, default_state_dir,
};

use crate::settings::{ConfigError, Settings};

/// [`RunDirs`] from `EINSORA_AGENT_STATE_DIR` and `EINSORA_MACOS_RUN_DIR`.
pub fn from_settings(settings: &Settings) -> Result<RunDirs, ConfigError> {
    let state_dir = settings.path(STATE_DIR, &default_state_dir(&settings.data_dir()?))?;
    let uid = rustix::process::getuid().as_raw();
    let macos_root = settings.path(MACOS_RUN_DIR, &default_macos_run_dir(uid))?;
    Ok(RunDirs {
        state_dir,
        macos_root,
    })
}
