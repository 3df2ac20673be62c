//! `einsora up`, the Solo supervisor, and `einsora dev`, the same for development: every role
//! as a child process of this binary, on this machine's loopback, with all data in one
//! owner-only directory (docs/operations.md, "Solo").
//!
//! Before anything is started: every setting is validated, the public ports are checked free,
//! the database is migrated, the owner account exists (or is asked for), and the installation
//! CA has issued a certificate per role. The supervisor runs on one thread, so the children's
//! parent-death signal (Linux) is tied to a thread that lives as long as the process.

pub(crate) mod children;
mod local_agent;
mod logs;
mod metrics;
mod owner;
mod plan;
mod supervise;

use std::sync::Arc;

use anyhow::Context;
use einsora_runtime::grpc::InternalTls;
use einsora_runtime::settings::DATA_DIR;
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::telemetry::{self, TelemetryOptions};

pub use children::SUPERVISOR_PID;

/// With `EINSORA_ACCESS_TLS=issued`, the access proxy's certificate for its URL's host and
/// domain, made or renewed (`einsora up`, `einsora pki init`); the web CA root's path.
pub(crate) fn issue_access_certificate(
    settings: &einsora_runtime::settings::Settings,
) -> anyhow::Result<Option<std::path::PathBuf>> {
    use einsora_runtime::{access_url::AccessUrl, tls::web::AccessTls};
    let url = AccessUrl::from_settings(settings)?;
    let tls = AccessTls::from_settings(settings, &url)?;
    tls.issue(&url)
        .context("issuing the access proxy's certificate")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `einsora up`: the data directory of this user, local accounts.
    Solo,
    /// `einsora dev`: a throwaway data directory, the dev accounts.
    Dev,
}

pub fn run(profile: Profile) -> anyhow::Result<()> {
    // Removed when `einsora dev` ends, after its children have stopped.
    let data_dir_set = einsora_runtime::settings::Settings::from_env().is_set(DATA_DIR);
    let temp_dir = match profile {
        Profile::Dev if !data_dir_set => Some(
            tempfile::Builder::new()
                .prefix("einsora-dev-")
                .tempdir()
                .context("creating a temporary data directory")?,
        ),
        Profile::Dev | Profile::Solo => None,
    };
    let plan = plan::Plan::new(profile, temp_dir.as_ref().map(|d| d.path()))?;
    plan.create_data_dir()?;
    plan.check_ports()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        owner::ensure(&plan).await?;
        let tracing = telemetry::init(
            TelemetryOptions::for_role(&plan.settings, "up")?.with_terminal_prefix(),
        )?;
        let tls = InternalTls::from_settings(&plan.settings)?;
        let pki = tls.init()?;
        tracing::info!(data_dir = %plan.data_dir.display(), pki = %pki.display(), "starting");
        if let Some(root) = issue_access_certificate(&plan.settings)? {
            tracing::info!(root = %root.display(), "the access proxy serves HTTPS with a certificate from the web CA: browsers that install this root trust it");
        }
        let shutdown = Shutdown::new();
        shutdown
            .on_signals()
            .context("listening for SIGINT and SIGTERM")?;
        let ran = supervise::run(Arc::new(plan), tls, shutdown).await;
        tracing.flush();
        ran
    })
}
