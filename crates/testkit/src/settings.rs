//! Settings as a role reads them, from a map instead of the environment.

use std::path::Path;

use einsora_settings::Settings;

/// `EINSORA_DATA_DIR` at `dir`, and `extra` on top.
pub fn settings_in(dir: &Path, extra: &[(&str, &str)]) -> Settings {
    let mut vars = vec![("EINSORA_DATA_DIR".to_owned(), dir.display().to_string())];
    vars.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    Settings::from_map(vars)
}
