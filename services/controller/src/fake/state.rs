//! The fake runtime outlives its controller, as a real runtime does: every change is appended
//! to a journal (one JSON line, no fsync: a killed process's writes are still in the page
//! cache), which a controller replays and compacts when it starts leading.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use einsora_core::ids::WorkloadId;
use serde::{Deserialize, Serialize};

/// One workload as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Saved {
    pub attempt: u32,
    pub running: bool,
    pub name: String,
    pub seen_ready: bool,
}

/// A journal line: the workload's entry now, or `None` once it is gone.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    id: uuid::Uuid,
    entry: Option<Saved>,
}

#[derive(Debug)]
pub(super) struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Replays the journal at `path` (if any), then rewrites it as one line per entry.
    pub fn open(path: &Path) -> std::io::Result<(Journal, HashMap<WorkloadId, Saved>)> {
        let mut entries = HashMap::new();
        match File::open(path) {
            Ok(file) => {
                for line in BufReader::new(file).lines() {
                    // A line cut short by a crash is the last one: skip it.
                    let Ok(line) = serde_json::from_str::<Line>(&line?) else {
                        continue;
                    };
                    let id = WorkloadId::from_uuid(line.id);
                    match line.entry {
                        Some(saved) => entries.insert(id, saved),
                        None => entries.remove(&id),
                    };
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let tmp = path.with_extension("tmp");
        let mut compact = File::create(&tmp)?;
        for (id, saved) in &entries {
            compact.write_all(&line(*id, Some(saved)))?;
        }
        std::fs::rename(&tmp, path)?;
        let file = OpenOptions::new().append(true).open(path)?;
        let journal = Journal {
            path: path.to_owned(),
            file,
        };
        Ok((journal, entries))
    }

    pub fn record(&mut self, id: WorkloadId, entry: Option<&Saved>) {
        if let Err(e) = self.file.write_all(&line(id, entry)) {
            tracing::warn!(path = %self.path.display(), error = %e, "can't record the fake runtime's state");
        }
    }
}

fn line(id: WorkloadId, entry: Option<&Saved>) -> Vec<u8> {
    let line = Line {
        id: *id.as_uuid(),
        entry: entry.cloned(),
    };
    let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}
