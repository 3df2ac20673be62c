//! Model files for llama.cpp endpoints: one fixed model per endpoint, fetched into the
//! workload's private storage before anything is served, and validated as GGUF there.
//!
//! A model's source is either
//! - a file under the machine's models directory (`EINSORA_MODELS_DIR`): `name.gguf`,
//!   `file:dir/name.gguf` or an absolute path inside it; it must resolve, symlinks and all, to
//!   a regular file strictly inside that directory, and is copied (never linked: see
//!   [`fetch`]) into the private directory; or
//! - an `https://` URL, downloaded with a size limit, its SHA-256 computed while it's written
//!   and checked against the expected one when the endpoint names it. Plain `http://` is
//!   accepted for loopback hosts only, and only when [`Limits::allow_loopback_http`] says so
//!   (tests and development).
//!
//! S3 and other object stores are out of scope (an `s3://` source is refused); so are
//! credentials (a URL with user info is refused; private hubs that need a bearer token are
//! a later step). Nothing is downloaded by the serving process: it is handed the local file.
//!
//! The private directory then holds `model.gguf` and `manifest.json` (source, size, sha256,
//! fetched_at); preparing the same source again reuses them without fetching. Every failure is
//! a [`ModelProblem`]: a one-line reason for the agent's log, and a status code for the
//! timeline (`einsora_core::agent::StatusCode`), whose vocabulary is fixed.

pub mod fetch;
pub mod ggml_types;
pub mod gguf;
mod http;
pub mod listing;
mod source;
pub mod weights;

#[cfg(test)]
mod tests;

use std::fs::File;

use einsora_core::agent::StatusCode;
use std::path::{Path, PathBuf};

pub use fetch::prepare;
pub use gguf::{GgufProblem, GgufSummary};
pub use source::ModelSource;

/// The directory model files may be taken from; unset, file sources are refused.
pub const MODELS_DIR: &str = "EINSORA_MODELS_DIR";
/// The model's name in the private directory.
pub const MODEL_FILE: &str = "model.gguf";
/// What was fetched, from where, beside it.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Bounds on what is fetched and what a GGUF file may declare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest model file, downloaded or copied.
    pub max_file_size: u64,
    pub max_tensors: u64,
    pub max_metadata_count: u64,
    /// All metadata (keys and values) together.
    pub max_metadata_bytes: u64,
    pub max_key_len: u64,
    /// A metadata string, alone or in an array (chat templates and embedded tokenizer JSON
    /// can be large; the metadata limit still bounds their total).
    pub max_string_len: u64,
    pub max_array_len: u64,
    /// Accept `http://` URLs whose host is loopback: for tests and development only.
    pub allow_loopback_http: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_size: 64 << 30,
            max_tensors: 65_536,
            max_metadata_count: 65_536,
            max_metadata_bytes: 64 << 20,
            max_key_len: 64 << 10,
            max_string_len: 16 << 20,
            max_array_len: 1 << 24,
            allow_loopback_http: false,
        }
    }
}

/// A model ready to be served from the private directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedModel {
    /// `<private dir>/model.gguf`.
    pub path: PathBuf,
    /// Lowercase hex.
    pub sha256: String,
    pub size: u64,
    pub summary: GgufSummary,
    /// Already there from an earlier prepare of the same source: nothing was fetched.
    pub reused: bool,
}

/// Why a model can't be served. Its Display is one line for the agent's log: it never holds
/// a URL's path or query (signed URLs carry secrets there) nor file contents unescaped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelProblem {
    #[error("the model source is refused: {0}")]
    BadSource(&'static str),
    #[error("a model file was named but this machine has no models directory ({MODELS_DIR})")]
    NoModelsDir,
    #[error("the model file isn't inside the machine's models directory")]
    OutsideModelsDir,
    #[error("the model file doesn't exist in the machine's models directory")]
    NotFound,
    #[error("the model path isn't a regular file")]
    NotAFile,
    #[error("the model is over the {limit}-byte size limit")]
    TooLarge { limit: u64 },
    #[error("the model's SHA-256 is {actual}, not the expected {expected}")]
    ChecksumMismatch { expected: String, actual: String },
    /// Connection, TLS, HTTP status or redirect trouble; names the host, never the path.
    #[error("the model download failed: {0}")]
    Download(String),
    #[error("the model's private storage failed: {0}")]
    Storage(String),
    #[error("the model isn't a valid GGUF file: {0}")]
    Invalid(GgufProblem),
    #[error("the model directory isn't served: {0}")]
    Weights(weights::WeightsProblem),
}

impl From<weights::WeightsProblem> for ModelProblem {
    fn from(p: weights::WeightsProblem) -> Self {
        use weights::WeightsProblem as W;
        match p {
            W::Storage(e) => ModelProblem::Storage(format!("reading the model directory: {e}")),
            p => ModelProblem::Weights(p),
        }
    }
}

impl From<GgufProblem> for ModelProblem {
    fn from(p: GgufProblem) -> Self {
        match p {
            GgufProblem::FileTooLarge { limit, .. } => ModelProblem::TooLarge { limit },
            // The disk, not the file.
            GgufProblem::Io(e) => ModelProblem::Storage(format!("reading the model: {e}")),
            p => ModelProblem::Invalid(p),
        }
    }
}

impl ModelProblem {
    /// The timeline's code: what the workload's owner can act on (the detail is in the
    /// agent's log).
    pub fn status(&self) -> StatusCode {
        match self {
            ModelProblem::Invalid(_) => StatusCode::ModelInvalid,
            ModelProblem::Weights(p) => p.status(),
            ModelProblem::BadSource(_)
            | ModelProblem::NoModelsDir
            | ModelProblem::OutsideModelsDir
            | ModelProblem::NotAFile
            | ModelProblem::TooLarge { .. } => StatusCode::ModelRefused,
            ModelProblem::ChecksumMismatch { .. } => StatusCode::ModelChecksumMismatch,
            ModelProblem::NotFound | ModelProblem::Download(_) | ModelProblem::Storage(_) => {
                StatusCode::ModelUnavailable
            }
        }
    }
}

/// Opens a file for reading without following a symlink at its last component and without
/// blocking on a FIFO; the caller checks what it opened with `metadata()`.
pub(crate) fn open_no_follow(path: &Path) -> std::io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A SHA-256 in hex (either case) as lowercase hex, or None.
fn parse_sha256(s: &str) -> Option<String> {
    (s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| s.to_ascii_lowercase())
}
