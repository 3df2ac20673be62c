//! What a local driver must remember across agent restarts, in its state directory: the
//! attempt it last started for each workload (so an attempt is started at most once, even if
//! its container is gone), whether the workload's disk was ever made (so a notebook that ran
//! before never silently gets a fresh one), and the token its server was started with: the
//! agent's own copy, since the one the workload reads is never read back. The file is the
//! agent's own (mode 0600, in its state directory), never a workload's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub started_attempt: u32,
    pub had_disk: bool,
    /// SECRET: the started attempt's token.
    #[serde(default)]
    pub token: Option<String>,
    /// The sandbox it was started in, where the driver can't keep that with the workload
    /// itself (a container keeps it as a label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

impl Record {
    /// Whether `attempt` is the one this agent started. Attempts compare for equality: any
    /// other is new work, a lower one too (a database restored from a backup counts lower).
    pub fn started(&self, attempt: u32) -> bool {
        self.started_attempt == attempt
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("started_attempt", &self.started_attempt)
            .field("had_disk", &self.had_disk)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct Records {
    path: PathBuf,
    records: BTreeMap<String, Record>,
}

impl Records {
    /// Those `driver` keeps in `state_dir` (none yet, or unreadable: none).
    pub fn open(state_dir: &Path, driver: &str) -> Records {
        let path = state_dir.join(format!("{driver}.json"));
        let records = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Records { path, records }
    }

    pub fn get(&self, workload: &str) -> Record {
        self.records.get(workload).cloned().unwrap_or_default()
    }

    /// Saved before the container starts: a crash right after never starts it twice.
    pub fn set(&mut self, workload: &str, record: Record) -> std::io::Result<()> {
        self.records.insert(workload.to_owned(), record);
        self.save()
    }

    pub fn forget(&mut self, workload: &str) -> std::io::Result<()> {
        if self.records.remove(workload).is_some() {
            self.save()?;
        }
        Ok(())
    }

    fn save(&self) -> std::io::Result<()> {
        super::dirs::replace_file(&self.path, &serde_json::to_vec(&self.records)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_attempt_it_started_counts_as_started() {
        let record = Record {
            started_attempt: 5,
            ..Record::default()
        };
        assert!(record.started(5));
        assert!(!record.started(6), "the next attempt is new work");
        assert!(
            !record.started(3),
            "a restored database's lower attempt is new work, not one never run again"
        );
    }
}
