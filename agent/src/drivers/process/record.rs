//! What the supervisor keeps of each workload's process group on disk, so an agent that
//! restarts finds it again: the leader's PID and start time, and the group.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ProcessError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub pid: u32,
    pub started: u64,
    pub group: u32,
    /// The boot it started in: after a reboot the same PID and start tick mean nothing.
    pub boot: String,
    /// Its cgroup's `cgroup.procs`, if it has one (`Launch::members`); none in records written
    /// before workloads had cgroups.
    #[serde(default)]
    pub members: Option<PathBuf>,
}

/// A workload's record file; the ID is checked to be a plain name first.
pub fn path(dir: &Path, id: &str) -> Result<PathBuf, ProcessError> {
    let plain = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !plain {
        return Err(ProcessError::BadId(id.chars().take(64).collect()));
    }
    Ok(dir.join(format!("{id}.json")))
}

pub fn read(path: &Path) -> Result<Option<Record>, ProcessError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ProcessError::io(path, e)),
    }
}

/// Written whole or not at all (a temp file renamed over it).
pub fn write(path: &Path, record: &Record) -> Result<(), ProcessError> {
    let tmp = path.with_extension("tmp");
    let bytes = serde_json::to_vec(record).map_err(|e| ProcessError::io(path, e.into()))?;
    std::fs::write(&tmp, bytes).map_err(|e| ProcessError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| ProcessError::io(path, e))
}

pub fn remove(path: &Path) -> Result<(), ProcessError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(ProcessError::io(path, e)),
        _ => Ok(()),
    }
}
