//! Tracing for a process: readable lines on stderr, optionally JSON lines in a log file (each
//! naming the process's role when it has one, so processes can share the file), both filtered
//! by `EINSORA_LOG` (default `info`); the store's query times for the metrics; and, when
//! `EINSORA_OTLP_ENDPOINT` is set, spans exported over OTLP ([`traces`]).

mod store_queries;
mod tag;
pub mod traces;

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
    /// Where spans go (`EINSORA_OTLP_ENDPOINT`), if anywhere.
    otlp: Option<String>,
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
            otlp: traces::endpoint(settings)?,
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
pub enum TelemetryError {
    #[error("cannot open the log file {path:?}: {source}")]
    LogFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot export spans: {0}")]
    Spans(String),
}

/// Installs the process's subscriber. Later calls (and calls after a test installed its own
/// subscriber) keep the one already installed and succeed. With `EINSORA_OTLP_ENDPOINT`, it
/// must run inside a Tokio runtime (the exporter's connection lives there), and the process
/// flushes the [`traces::Tracing`] it gets back as it stops.
pub fn init(options: TelemetryOptions) -> Result<traces::Tracing, TelemetryError> {
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
    // whatever it lets through, and the spans exported have theirs.
    let log = terminal.and_then(json).with_filter(options.filter);
    let (spans, tracing) = match &options.otlp {
        Some(endpoint) => {
            let (layer, tracing) = traces::layer(endpoint, role).map_err(TelemetryError::Spans)?;
            (Some(layer), tracing)
        }
        None => (None, traces::Tracing::default()),
    };
    let installed = tracing_subscriber::registry()
        .with(log)
        .with(store_queries::layer())
        .with(spans)
        .try_init();
    if installed.is_err() {
        tracing::debug!("a tracing subscriber was already installed; keeping it");
    }
    Ok(tracing)
}

fn open_log(path: &Path) -> Result<File, TelemetryError> {
    let error = |source| TelemetryError::LogFile {
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
