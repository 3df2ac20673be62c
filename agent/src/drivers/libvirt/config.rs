//! The libvirt driver's settings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use einsora_runtime::settings::{ConfigError, Settings};

/// `true` turns the driver on; it is off by default (a machine runs VMs only when its owner
/// says so).
pub const ENABLED: &str = "EINSORA_AGENT_LIBVIRT";
/// libvirt's connection URI.
pub const URI: &str = "EINSORA_LIBVIRT_URI";
/// `kvm`: only hardware virtualisation, and VMs are not offered where it doesn't work;
/// `tcg`: qemu's emulation allowed where KVM doesn't work (slow: for tests and small guests).
pub const ACCEL: &str = "EINSORA_VM_ACCEL";
/// At most this many VMs on this machine at once (`none`: as many as its CPUs and memory
/// take). The control plane places no more here.
pub const LIMIT: &str = "EINSORA_VM_LIMIT";
/// Where `einsora images build vm-debian` (and `vm-tiny`) put the VM images.
pub const IMAGES: &str = "EINSORA_VM_IMAGES";
/// Where VMs' directories are (disks, seeds, channels' sockets, consoles) and the image builds
/// their disks were made on: qemu runs as its own user (`libvirt-qemu`), so every directory
/// above it must let others through (mode o+x), which the agent's own state directory doesn't.
pub const DIR: &str = "EINSORA_VM_DIR";
const DEFAULT_DIR: &str = "/var/lib/einsora-vms";

/// The catalog runtimes this driver runs, and the directory in [`IMAGES`] each boots from.
const RUNTIMES: [(&str, &str); 2] = [
    ("debian-12-cloud", "vm-debian"),
    ("tiny-busybox", "vm-tiny"),
];

/// What the operator allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccelSetting {
    KvmOnly,
    TcgAllowed,
}

#[derive(Debug, Clone)]
pub struct LibvirtConfig {
    pub uri: String,
    pub accel: AccelSetting,
    /// Each runtime's image directory (`disk.qcow2`, `vmlinuz`, `initrd.img`).
    pub images: BTreeMap<String, PathBuf>,
    /// The agent's state directory: the driver's records are there.
    pub state_dir: PathBuf,
    /// VMs' directories ([`DIR`]).
    pub vm_dir: PathBuf,
    /// This machine's ID, written into its domains: set once the machine has joined.
    pub machine: String,
    /// [`LIMIT`].
    pub limit: Option<u32>,
}

impl LibvirtConfig {
    /// `None` when the driver is off.
    pub fn from_settings(
        settings: &Settings,
        state_dir: &Path,
    ) -> Result<Option<LibvirtConfig>, ConfigError> {
        if !settings.choice(ENABLED, &[("true", true), ("false", false)], "false")? {
            return Ok(None);
        }
        let accel = settings.choice(
            ACCEL,
            &[
                ("kvm", AccelSetting::KvmOnly),
                ("tcg", AccelSetting::TcgAllowed),
            ],
            "kvm",
        )?;
        let images_dir = settings.path(IMAGES, &settings.data_dir()?.join("images-cache"))?;
        let images = RUNTIMES
            .iter()
            .map(|(runtime, dir)| ((*runtime).to_owned(), images_dir.join(dir)))
            .collect();
        Ok(Some(LibvirtConfig {
            uri: settings.string(URI, "qemu:///system")?,
            accel,
            images,
            state_dir: state_dir.to_path_buf(),
            vm_dir: settings.path(DIR, Path::new(DEFAULT_DIR))?,
            machine: String::new(),
            limit: settings.parse_with(LIMIT, "none", parse_limit)?,
        }))
    }
}

fn parse_limit(value: &str) -> Result<Option<u32>, String> {
    let max = einsora_core::machine::VmHost::MAX_LIMIT;
    if value == "none" {
        return Ok(None);
    }
    match value.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(Some(n)),
        _ => Err(format!("is not a number of VMs from 1 to {max}, or none")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Option<LibvirtConfig>, ConfigError> {
        let settings = Settings::from_map(pairs.iter().copied());
        LibvirtConfig::from_settings(&settings, Path::new("/state"))
    }

    #[test]
    fn off_unless_turned_on_and_kvm_only_unless_tcg_is_allowed() {
        let d = ("EINSORA_DATA_DIR", "/d");
        assert!(config(&[d]).unwrap().is_none());
        let c = config(&[d, (ENABLED, "true")]).unwrap().unwrap();
        assert_eq!(c.accel, AccelSetting::KvmOnly);
        assert_eq!(c.uri, "qemu:///system");
        assert_eq!(c.vm_dir, Path::new("/var/lib/einsora-vms"));
        assert_eq!(
            c.images["debian-12-cloud"],
            Path::new("/d/images-cache/vm-debian")
        );
        let c = config(&[d, (ENABLED, "true"), (ACCEL, "tcg"), (IMAGES, "/vm")])
            .unwrap()
            .unwrap();
        assert_eq!(c.accel, AccelSetting::TcgAllowed);
        assert_eq!(c.images["debian-12-cloud"], Path::new("/vm/vm-debian"));
        assert_eq!(c.images["tiny-busybox"], Path::new("/vm/vm-tiny"));
        assert_eq!(c.limit, None);
        let err = config(&[d, (ENABLED, "true"), (ACCEL, "hvf")]).unwrap_err();
        assert!(err.to_string().contains(ACCEL), "{err}");
        let c = config(&[d, (ENABLED, "true"), (LIMIT, "3")])
            .unwrap()
            .unwrap();
        assert_eq!(c.limit, Some(3));
        for bad in ["0", "-1", "1025", "two"] {
            let err = config(&[d, (ENABLED, "true"), (LIMIT, bad)]).unwrap_err();
            assert!(err.to_string().contains("EINSORA_VM_LIMIT"), "{err}");
        }
    }
}
