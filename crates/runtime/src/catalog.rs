//! EINSORA_CATALOG: the built-in catalog, or a replacement file.

use einsora_core::catalog::Catalog;

use crate::settings::{ConfigError, Settings};

pub const CATALOG: &str = "EINSORA_CATALOG";

/// The catalog this installation offers; a bad file is an error naming the setting, the file,
/// and each bad entry.
pub fn from_settings(settings: &Settings) -> Result<Catalog, ConfigError> {
    if settings.string(CATALOG, "")?.is_empty() {
        return Ok(Catalog::builtin());
    }
    let path = settings.path(CATALOG, std::path::Path::new(""))?;
    Catalog::load(&path).map_err(|e| ConfigError::new(CATALOG, e.to_string()))
}
