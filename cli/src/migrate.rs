//! `einsora migrate`: applies the embedded migrations to EINSORA_DATABASE_URL.

use anyhow::Context;
use einsora_runtime::settings::Settings;
use einsora_store::DatabaseUrl;

pub fn run(settings: &Settings) -> anyhow::Result<()> {
    let url = DatabaseUrl::from_settings(settings)?;
    if let DatabaseUrl::Sqlite { path } = &url {
        let data_dir = settings.data_dir()?;
        if path.parent() == Some(data_dir.as_path()) {
            create_private_dir(&data_dir)?;
        }
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let (_, report) = runtime.block_on(einsora_store::migrate(&url))?;
    match report.applied.as_slice() {
        [] => eprintln!("{url} is up to date (version {})", report.version),
        applied => eprintln!(
            "{url}: applied {applied:?}, now at version {}",
            report.version
        ),
    }
    Ok(())
}

/// Solo keeps its data in one owner-only directory.
pub(crate) fn create_private_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the data directory {}", dir.display()))
}
