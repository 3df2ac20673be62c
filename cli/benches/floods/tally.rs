//! A flood's own counts: what it sent and how each attempt ended, by a word (a status code, a
//! connection failure). Every attempt is counted exactly once, or the round fails.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub sent: u64,
    pub outcomes: BTreeMap<String, u64>,
    /// Other counts the flood keeps (answers it got, connections it held).
    pub notes: BTreeMap<String, u64>,
}

impl Tally {
    pub fn outcome(&mut self, word: impl Into<String>) {
        self.sent += 1;
        *self.outcomes.entry(word.into()).or_default() += 1;
    }

    pub fn note(&mut self, word: &str, n: u64) {
        *self.notes.entry(word.to_owned()).or_default() += n;
    }

    pub fn merge(&mut self, other: &Tally) {
        self.sent += other.sent;
        for (k, v) in &other.outcomes {
            *self.outcomes.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.notes {
            *self.notes.entry(k.clone()).or_default() += v;
        }
    }

    /// `Err` unless every attempt sent has one outcome.
    pub fn check(&self, flood: &str) -> anyhow::Result<()> {
        let counted: u64 = self.outcomes.values().sum();
        anyhow::ensure!(
            counted == self.sent,
            "{flood}: {} attempts sent, {counted} counted",
            self.sent
        );
        Ok(())
    }
}

/// A tally that many tasks add to.
pub type Shared = Arc<Mutex<Tally>>;

pub fn add(shared: &Shared, f: impl FnOnce(&mut Tally)) {
    f(&mut shared.lock().unwrap_or_else(PoisonError::into_inner));
}

pub fn take(shared: &Shared) -> Tally {
    std::mem::take(&mut *shared.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Waits for every task, `Err` if one panicked or was cancelled.
pub async fn join_all(tasks: Vec<tokio::task::JoinHandle<()>>, flood: &str) -> anyhow::Result<()> {
    for task in tasks {
        task.await
            .map_err(|e| anyhow::anyhow!("{flood}: a flood task failed: {e}"))?;
    }
    Ok(())
}
