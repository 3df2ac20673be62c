//! Tracing for a process: readable lines on stderr, optionally JSON lines in a log file (each
//! naming the process's role when it has one, so processes can share the file), both filtered
//! by `EINSORA_LOG` (default `info`).

mod store_queries;
mod tag;

use std::fs::{File, OpenOptions};
use std::io::IsTerminal;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::settings::{ConfigError, Settings};

pub use tag::terminal_prefix;

pub const LOG: &str = "EINSORA_LOG";
/// A file that also gets every line as JSON (appended; `einsora up` sets
/// `<data dir>/einsora.log`). Unset: the terminal only.
pub const LOG_FILE: &str = "EINSORA_LOG_FILE";

/// What [`init`] sets up; built from settings so a bad filter is caught with the other config.
#[derive(Debug)]
pub struct TelemetryOptions {
    filter: EnvFilter,
    log_file: Option<PathBuf>,
    role: Option<&'static str>,
    prefix_terminal: bool,
}

impl TelemetryOptions {
    /// `log_file` is usually `<data dir>/einsora.log`; `None` logs to the terminal only.
    pub fn from_settings(
        settings: &Settings,
        log_file: Option<PathBuf>,
    ) -> Result<Self, ConfigError> {
        let filter = settings.parse_with(LOG, "info", |v| {
            EnvFilter::try_new(v).map_err(|_| {
                "is not a log filter (e.g. info, or einsora_api=debug,info)".to_owned()
            })
        })?;
        Ok(Self {
            filter,
            log_file,
            role: None,
            prefix_terminal: false,
        })
    }

    /// For a process of `role`: its JSON lines carry `"role": "<role>"`, and the log file is
    /// `EINSORA_LOG_FILE` when set.
    pub fn for_role(settings: &Settings, role: &'static str) -> Result<Self, ConfigError> {
        let log_file = settings.optional_path(LOG_FILE)?;
        Ok(Self {
            role: Some(role),
            ..Self::from_settings(settings, log_file)?
        })
    }

    /// Readable lines start with the role, as a supervisor shows its children's lines.
    pub fn with_terminal_prefix(self) -> Self {
        Self {
            prefix_terminal: true,
            ..self
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot open the log file {path:?}: {source}")]
pub struct TelemetryError {
    path: PathBuf,
    source: std::io::Error,
}

/// Installs the process's subscriber. Later calls (and calls after a test installed its own
/// subscriber) keep the one already installed and succeed.
pub fn init(options: TelemetryOptions) -> Result<(), TelemetryError> {
    let file = options.log_file.as_deref().map(open_log).transpose()?;
    let role = options.role.unwrap_or_default();
    let prefix = match options.prefix_terminal {
        true => terminal_prefix(role),
        false => String::new(),
    };
    let terminal = tracing_subscriber::fmt::layer()
        .with_writer(tag::Tagged::prefix(std::io::stderr, prefix))
        .with_ansi(std::io::stderr().is_terminal());
    let json = file.map(|file| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_ansi(false)
            .with_writer(tag::Tagged::json_role(Mutex::new(file), options.role))
    });
    // The log filter is the log's own: the store's query timings see sqlx's statement events
    // whatever it lets through.
    let log = terminal.and_then(json).with_filter(options.filter);
    let installed = tracing_subscriber::registry()
        .with(log)
        .with(store_queries::layer())
        .try_init();
    if installed.is_err() {
        tracing::debug!("a tracing subscriber was already installed; keeping it");
    }
    Ok(())
}

fn open_log(path: &Path) -> Result<File, TelemetryError> {
    let error = |source| TelemetryError {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(error)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(error)
}
