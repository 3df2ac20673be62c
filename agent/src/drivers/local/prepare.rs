//! A workload's places made before its server starts: its notebook's disk, its run directory
//! (no stale socket left in it), its token (a fresh one, the agent's own copy kept in its
//! secret directory), its endpoint's model.

use std::path::Path;

use einsora_core::agent::StatusCode;
use einsora_proto::convert::PlacedSpec;

use super::Wanted;
use super::contract::Serves;
use super::dirs::{self, Places};
use super::disk::Disks;
use super::records::Record;

/// The token its server is started with, or why it can't start (the reason in the log).
pub async fn prepare(
    disks: &Disks,
    models_dir: Option<&Path>,
    user: (u32, u32),
    places: &Places,
    serves: &Serves,
    record: &Record,
    w: &Wanted,
) -> Result<String, StatusCode> {
    let failed = |e: std::io::Error| {
        tracing::warn!(workload = %w.workload, error = %e, "can't prepare its directories");
        StatusCode::StartFailed
    };
    if let Serves::Notebook { data } = serves {
        let bytes = disk_bytes(&w.spec);
        disks
            .provide_data(&w.workload, data, bytes, user, record.had_disk)
            .await?;
    }
    disks.provide_run_dir(&w.workload, &places.run, user)?;
    // A stale socket from an earlier run would look ready.
    let _ = std::fs::remove_file(places.run.join(serves.socket_name()));
    dirs::agent_dir(&places.secret).map_err(failed)?;
    let token = dirs::new_token().map_err(failed)?;
    dirs::secret_file(&places.secret.join(serves.token_name()), &token, user).map_err(failed)?;
    if let Serves::Endpoint { server, .. } = serves {
        super::model::prepare(&w.spec, *server, models_dir, &places.model, user).await?;
    }
    Ok(token)
}

/// The size limit of a notebook's files: its class's, or the catalog's default from a
/// controller that doesn't say.
fn disk_bytes(spec: &PlacedSpec) -> u64 {
    let said = spec.resources.as_ref().map_or(0, |r| r.disk_bytes);
    if said > 0 {
        return said;
    }
    u64::from(einsora_core::catalog::DEFAULT_DISK_GIB) << 30
}
