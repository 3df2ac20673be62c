//! Where an agent keeps each workload's run directory, and the name of the Unix socket its
//! server listens on there. The agent lays them out; the controller accepts no other socket path
//! for a workload; the access proxy dials nothing else.

use std::path::{Path, PathBuf};

use crate::kind::WorkloadKind;

/// The agent's state directory (machine ID, certificate, workload state).
pub const STATE_DIR: &str = "EINSORA_AGENT_STATE_DIR";

/// The agent's state directory when [`STATE_DIR`] is not set.
pub fn default_state_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("agent")
}

/// The workload's run directory: the only place its server's socket may be.
pub fn run_dir(state_dir: &Path, workload: &str) -> PathBuf {
    state_dir.join("run").join(workload)
}

/// Where the macos-native driver lays out its workloads' run directories
/// ([`MacosRunDirs`]).
pub const MACOS_RUN_DIR: &str = "EINSORA_MACOS_RUN_DIR";
/// The macos-native driver's driver name, whose run directories are laid out apart.
pub const MACOS_DRIVER: &str = "macos-native";

/// Where the macos-native driver's run directories are when [`MACOS_RUN_DIR`] is not set:
/// `/private/tmp/einsora-<uid>`, made by the agent, its own and owner-only (checked: `/tmp` is
/// every user's). macOS binds no Unix socket whose path passes 103 bytes, and a kernel's socket
/// there is `kernel-<uuid>-ipc-<n>`: the state directory
/// (`~/Library/Application Support/Einsora/agent`) is far too long a start.
pub fn default_macos_run_dir(uid: u32) -> PathBuf {
    PathBuf::from(format!("/private/tmp/einsora-{uid}"))
}

/// The run directories of the agent on this host, for each of its drivers: `<state>/run/<id>`,
/// and for macos-native `<macos root>/<compact id>` (socket paths short enough for macOS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDirs {
    pub state_dir: PathBuf,
    pub macos_root: PathBuf,
}

impl RunDirs {
    /// The run directory of `workload` on `driver`.
    pub fn run_dir(&self, driver: &str, workload: &str) -> PathBuf {
        if driver == MACOS_DRIVER {
            self.macos_root.join(compact(workload))
        } else {
            run_dir(&self.state_dir, workload)
        }
    }

    /// The one socket path a workload of `kind` on `driver` may report.
    pub fn socket_path(&self, driver: &str, workload: &str, kind: WorkloadKind) -> Option<PathBuf> {
        Some(self.run_dir(driver, workload).join(socket_name(kind)?))
    }
}

/// A workload ID in 26 characters: its UUID's 128 bits in lowercase base32 (RFC 4648's
/// alphabet, unpadded), one case only since a Mac's disk ignores case. Anything that isn't a
/// UUID is kept as it is.
pub fn compact(workload: &str) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let Ok(uuid) = uuid::Uuid::try_parse(workload) else {
        return workload.to_owned();
    };
    let bits = uuid.as_u128();
    // 26 digits of five bits: the first holds only the top three.
    (0..26_u32)
        .map(|i| char::from(ALPHABET[((bits >> (125 - 5 * i)) & 31) as usize]))
        .collect()
}

/// A notebook's JupyterLab socket, in its run directory.
pub const NOTEBOOK_SOCKET: &str = "jl.sock";
/// An endpoint's model server socket, in its run directory.
pub const ENDPOINT_SOCKET: &str = "llm.sock";
/// A VM's SSH, in its run directory: the agent's own socket, joined to the guest's channels.
pub const VM_SSH_SOCKET: &str = "ssh.sock";

/// The socket's name in the run directory, by what the workload serves there; every kind has
/// one (`Option` for a kind that may have none).
pub fn socket_name(kind: WorkloadKind) -> Option<&'static str> {
    match kind {
        WorkloadKind::Notebook => Some(NOTEBOOK_SOCKET),
        WorkloadKind::Endpoint => Some(ENDPOINT_SOCKET),
        WorkloadKind::Vm => Some(VM_SSH_SOCKET),
    }
}

/// The one socket path a workload of `kind` may report.
pub fn socket_path(state_dir: &Path, workload: &str, kind: WorkloadKind) -> Option<PathBuf> {
    Some(run_dir(state_dir, workload).join(socket_name(kind)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notebook_listens_in_its_own_run_directory() {
        assert_eq!(
            socket_path(Path::new("/s"), "w1", WorkloadKind::Notebook),
            Some(PathBuf::from("/s/run/w1/jl.sock"))
        );
        assert_eq!(
            socket_path(Path::new("/s"), "w1", WorkloadKind::Endpoint),
            Some(PathBuf::from("/s/run/w1/llm.sock"))
        );
        assert_eq!(
            socket_path(Path::new("/s"), "w1", WorkloadKind::Vm),
            Some(PathBuf::from("/s/run/w1/ssh.sock"))
        );
    }

    #[test]
    fn macos_native_run_directories_are_short_and_apart() {
        let dirs = RunDirs {
            state_dir: "/s".into(),
            macos_root: "/private/tmp/einsora-501".into(),
        };
        let id = "0192f0c4-6a1e-7c3b-9d2e-5f4a3b2c1d0e";
        let mac = dirs
            .socket_path(MACOS_DRIVER, id, WorkloadKind::Notebook)
            .unwrap();
        let name = compact(id);
        assert_eq!(name.len(), 26);
        assert_eq!(
            mac,
            Path::new("/private/tmp/einsora-501")
                .join(&name)
                .join("jl.sock")
        );
        assert_eq!(
            dirs.socket_path("linux-native", id, WorkloadKind::Notebook),
            socket_path(Path::new("/s"), id, WorkloadKind::Notebook)
        );
        // A kernel's socket there still fits macOS's 103 bytes.
        let kernel = format!("kernel-{id}-ipc-5");
        assert!(
            dirs.run_dir(MACOS_DRIVER, id)
                .join(kernel)
                .as_os_str()
                .len()
                <= 103
        );
    }

    #[test]
    fn compact_ids_are_one_to_one_and_lowercase() {
        let a = compact("00000000-0000-0000-0000-000000000000");
        let b = compact("00000000-0000-0000-0000-000000000001");
        let top = compact("80000000-0000-0000-0000-000000000000");
        let all = compact("ffffffff-ffff-ffff-ffff-ffffffffffff");
        assert_eq!(a, "a".repeat(26));
        assert_eq!(b, format!("{}b", "a".repeat(25)));
        assert_eq!(top, format!("e{}", "a".repeat(25)));
        assert_eq!(all, format!("h{}", "7".repeat(25)));
        assert_eq!(compact("w1"), "w1");
    }
}
