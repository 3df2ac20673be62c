//! The fake runtime outlives its controller, as a real runtime does: its entries are kept in a
//! file (written at most every `FLUSH_EVERY`, atomically), read when a controller starts leading.
//! A crash loses at most the last moments, which the reconcile loop repairs (run again, or a
//! workload that vanished).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use einsora_core::ids::WorkloadId;
use serde::{Deserialize, Serialize};

use super::FakeBackend;

const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// One workload as the file keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Saved {
    pub attempt: u32,
    pub running: bool,
    pub name: String,
    pub seen_ready: bool,
}

pub(super) fn load(path: &Path) -> HashMap<WorkloadId, Saved> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return HashMap::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "can't read the fake runtime's state; starting empty");
            return HashMap::new();
        }
    };
    let saved: HashMap<uuid::Uuid, Saved> = serde_json::from_str(&text).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "the fake runtime's state is unreadable; starting empty");
        HashMap::new()
    });
    saved
        .into_iter()
        .map(|(id, s)| (WorkloadId::from_uuid(id), s))
        .collect()
}

/// Writes the runtime to `path` whenever it changed, until the backend is dropped.
pub(super) fn keep_saved(backend: &Arc<FakeBackend>, path: PathBuf) {
    let weak: Weak<FakeBackend> = Arc::downgrade(backend);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(FLUSH_EVERY).await;
            let Some(backend) = weak.upgrade() else {
                return;
            };
            let Some(snapshot) = backend.snapshot_if_changed() else {
                continue;
            };
            drop(backend);
            if let Err(e) = save(&path, &snapshot) {
                tracing::warn!(path = %path.display(), error = %e, "can't save the fake runtime's state");
            }
        }
    });
}

fn save(path: &Path, snapshot: &HashMap<uuid::Uuid, Saved>) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(snapshot)?)?;
    std::fs::rename(&tmp, path)
}
