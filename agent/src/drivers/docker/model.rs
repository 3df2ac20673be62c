//! An endpoint's model, brought into its private storage and validated before its container
//! starts (`crate::models`), then handed to the container read-only.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use einsora_core::agent::StatusCode;
use einsora_proto::convert::{PlacedSpec, WorkloadParams};

use super::dirs;
use crate::models::{Limits, ModelSource, prepare as fetch};

/// Prepares the model the endpoint names into `dir`, readable by `user`; the timeline's code
/// when it can't (the reason goes to the agent's log).
pub async fn prepare(
    spec: &PlacedSpec,
    models_dir: Option<&Path>,
    dir: &Path,
    user: (u32, u32),
) -> Result<(), StatusCode> {
    let Some(WorkloadParams::Endpoint { model }) = &spec.params else {
        return Err(StatusCode::ModelRefused);
    };
    let refused = |problem: crate::models::ModelProblem| {
        tracing::warn!(%model, %problem, "its model can't be served");
        problem.status()
    };
    let source = ModelSource::parse(model, None).map_err(refused)?;
    let prepared = fetch(&source, models_dir, dir, &Limits::default())
        .await
        .map_err(refused)?;
    // Read-only to the server: the directory and the file are its user's, the file 0400.
    let readable = std::fs::set_permissions(&prepared.path, std::fs::Permissions::from_mode(0o400))
        .and_then(|()| dirs::give_tree(dir, user));
    readable.map_err(|e| {
        tracing::warn!(error = %e, "can't hand its model to the workload's user");
        StatusCode::ModelUnavailable
    })
}
