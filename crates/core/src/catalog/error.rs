//! What goes wrong loading a catalog, in words an operator can act on.

use std::fmt;
use std::path::PathBuf;

/// One thing wrong with one catalog entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The entry, e.g. `class "l40s-48gb"`, `image "jupyterlab"` or `regions`.
    pub entry: String,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.entry, self.problem)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot read the catalog file {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// Not YAML, or not the catalog's shape (a missing, mistyped or unknown field).
    #[error("the catalog{} is malformed: {message}", origin(path))]
    Malformed {
        path: Option<PathBuf>,
        message: String,
    },
    /// Well-formed, but some entries are wrong; every problem found is listed.
    #[error("the catalog{} is invalid:{}", origin(path), list(problems))]
    Invalid {
        path: Option<PathBuf>,
        problems: Vec<Problem>,
    },
}

impl CatalogError {
    /// The problems of an invalid catalog; empty for the other errors.
    pub fn problems(&self) -> &[Problem] {
        match self {
            CatalogError::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }

    pub(super) fn at(self, file: PathBuf) -> Self {
        match self {
            CatalogError::Malformed { message, .. } => CatalogError::Malformed {
                path: Some(file),
                message,
            },
            CatalogError::Invalid { problems, .. } => CatalogError::Invalid {
                path: Some(file),
                problems,
            },
            read @ CatalogError::Read { .. } => read,
        }
    }
}

fn origin(path: &Option<PathBuf>) -> String {
    match path {
        Some(path) => format!(" {}", path.display()),
        None => String::new(),
    }
}

/// One problem reads as one line; several as a list, one per line, since a problem's own text
/// may contain punctuation that would blur a one-line list.
fn list(problems: &[Problem]) -> String {
    match problems {
        [one] => format!(" {one}"),
        many => many.iter().map(|p| format!("\n  - {p}")).collect(),
    }
}
