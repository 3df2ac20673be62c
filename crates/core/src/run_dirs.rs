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

/// A notebook's JupyterLab socket, in its run directory.
pub const NOTEBOOK_SOCKET: &str = "jl.sock";
/// An endpoint's model server socket, in its run directory.
pub const ENDPOINT_SOCKET: &str = "llm.sock";

/// The socket's name in the run directory, by what the server serves; `None` for a kind with
/// no server to open (a VM).
pub fn socket_name(kind: WorkloadKind) -> Option<&'static str> {
    match kind {
        WorkloadKind::Notebook => Some(NOTEBOOK_SOCKET),
        WorkloadKind::Endpoint => Some(ENDPOINT_SOCKET),
        WorkloadKind::Vm => None,
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
        assert_eq!(socket_path(Path::new("/s"), "w1", WorkloadKind::Vm), None);
    }
}
