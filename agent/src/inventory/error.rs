//! What can go wrong while taking the inventory. Every message names the command or file it
//! came from, and a parse error names the line.

use std::path::PathBuf;
use std::time::Duration;

/// Longest piece of a tool's output quoted in an error.
const QUOTE_LIMIT: usize = 160;

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("`{command}` did not answer within {limit:?}; it was killed")]
    Timeout { command: String, limit: Duration },
    #[error("could not run `{command}`: {cause}")]
    Spawn {
        command: String,
        cause: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {detail:?}")]
    Failed {
        command: String,
        status: String,
        detail: String,
    },
    #[error("could not read {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{origin}, line {number}: {problem}: {text:?}")]
    BadLine {
        origin: &'static str,
        number: usize,
        text: String,
        problem: String,
    },
    #[error("{origin} does not say {what}")]
    Missing {
        origin: &'static str,
        what: &'static str,
    },
    #[error("could not count the usable CPUs: {0}")]
    Cpus(std::io::Error),
    #[error("the agent takes no inventory on {0}; it runs on linux and macos")]
    UnsupportedOs(&'static str),
}

impl InventoryError {
    /// A parse error about line `index` (0-based) of `origin`'s output.
    pub(crate) fn bad_line(
        origin: &'static str,
        index: usize,
        text: &str,
        problem: impl Into<String>,
    ) -> InventoryError {
        InventoryError::BadLine {
            origin,
            number: index + 1,
            text: quote(text),
            problem: problem.into(),
        }
    }
}

/// At most [`QUOTE_LIMIT`] characters of `text`, so a runaway tool can't flood a log line.
pub(crate) fn quote(text: &str) -> String {
    let mut quoted: String = text.trim().chars().take(QUOTE_LIMIT).collect();
    if text.trim().chars().count() > QUOTE_LIMIT {
        quoted.push('…');
    }
    quoted
}
