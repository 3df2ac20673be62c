//! `macos-native`: notebooks as processes of the Mac's owner under `sandbox-exec`, with a
//! profile written from a typed description ([`profile::Profile`]), from environments uv
//! builds from a lock with hashes ([`runtimes`]). The worker, supervisor, records and probes
//! are linux-native's (`drivers::native`, whose `Platform` says what differs). The profile is
//! judged on any OS by an evaluator of its rules ([`profile::check`]); on Linux CI the driver
//! runs with stand-ins for `sysctl` and `sandbox-exec` (`crates/standins`). Nothing here has
//! run on a Mac yet (docs/hardware.md; `scripts/mac-check`). MLX endpoints are not built yet.

pub mod config;
pub mod profile;
pub mod runtimes;
pub mod sandbox;

pub use config::MacosConfig;

/// Whether this Mac can run the driver's workloads: `sandbox-exec` and uv are here, and its run
/// directories' root is the agent's own.
pub async fn ready(tools: &MacosConfig) -> Result<(), String> {
    if !tools.sandbox_exec.is_file() {
        return Err(format!(
            "{} isn't here ({} names it)",
            tools.sandbox_exec.display(),
            config::SANDBOX_EXEC
        ));
    }
    let uv = tools.uv.display().to_string();
    match crate::inventory::command::run_tool(
        &uv,
        &["--version"],
        std::time::Duration::from_secs(10),
    )
    .await
    {
        Ok(Some(out)) => {
            out.success().map_err(|e| e.to_string())?;
        }
        Ok(None) => {
            return Err(format!(
                "uv isn't installed (brew install uv; or {} names it)",
                config::UV
            ));
        }
        Err(e) => return Err(e.to_string()),
    }
    sandbox::run_root(&tools.run_root).map_err(|e| e.to_string())
}
