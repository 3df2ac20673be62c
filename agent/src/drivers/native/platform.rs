//! What a native driver does differently on each OS, in one place: linux-native runs each
//! server in bubblewrap (sandbox.rs) as a user of no account when root, from environments pip
//! builds; macos-native runs it under `sandbox-exec` (`drivers::macos`) as the Mac's owner,
//! from environments uv builds, with its run directory laid out apart (short socket paths).
//! The supervisor, records, output, probes and the worker's passes are the same code.

use std::path::Path;

use einsora_core::run_dirs::{MACOS_DRIVER, RunDirs};

use super::envs::Builder;
use super::runtimes::{self, Runtime};
use crate::drivers::local::dirs::Places;
use crate::drivers::macos::{self, MacosConfig};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Platform {
    Linux,
    Macos(MacosConfig),
}

impl Platform {
    /// The driver's name, as the catalog and the controller know it.
    pub fn name(&self) -> &'static str {
        match self {
            Platform::Linux => super::NAME,
            Platform::Macos(_) => MACOS_DRIVER,
        }
    }

    /// Its directory in the agent's state directory.
    pub fn dir(&self) -> &'static str {
        match self {
            Platform::Linux => "native",
            Platform::Macos(_) => "macos",
        }
    }

    /// The runtime called `name`, if this driver runs it.
    pub fn runtime(&self, name: &str) -> Option<&'static Runtime> {
        match self {
            Platform::Linux => runtimes::lookup(name),
            Platform::Macos(tools) => macos::runtimes::lookup(name, tools.standin),
        }
    }

    /// How its environments are built.
    pub fn builder(&self) -> Builder {
        match self {
            Platform::Linux => Builder::Pip,
            Platform::Macos(tools) => Builder::Uv {
                uv: tools.uv.clone(),
                python: tools.python.clone(),
            },
        }
    }

    /// The user its servers run as: on a Mac always the agent's own (the owner), else a user
    /// of no account when the agent is root.
    pub fn user(&self) -> (u32, u32) {
        match self {
            Platform::Linux => crate::drivers::local::workload_user(),
            Platform::Macos(_) => (
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            ),
        }
    }

    /// A workload's places.
    pub fn places(&self, state_dir: &Path, workload: &str) -> Places {
        let places = Places::of(state_dir, workload);
        match self {
            Platform::Linux => places,
            Platform::Macos(tools) => {
                let dirs = RunDirs {
                    state_dir: state_dir.to_owned(),
                    macos_root: tools.run_root.clone(),
                };
                Places {
                    run: dirs.run_dir(MACOS_DRIVER, workload),
                    ..places
                }
            }
        }
    }
}
