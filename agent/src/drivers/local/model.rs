//! An endpoint's model, brought into its private storage and validated before its container
//! starts, then handed to the container read-only: a GGUF file for llama.cpp
//! (`crate::models`), a safetensors model directory for vLLM and MLX (`crate::models::weights`:
//! copied, validated, a checksum manifest recorded).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use einsora_core::agent::StatusCode;
use einsora_proto::convert::{PlacedSpec, WorkloadParams};

use super::contract::ModelServer;
use super::dirs;
use crate::models::weights::{DirLimits, prepare_dir};
use crate::models::{Limits, ModelSource, prepare as fetch};

/// Prepares the model the endpoint names into `dir`, readable by `user`; the timeline's code
/// when it can't (the reason goes to the agent's log).
pub async fn prepare(
    spec: &PlacedSpec,
    server: ModelServer,
    models_dir: Option<&Path>,
    dir: &Path,
    user: (u32, u32),
) -> Result<(), StatusCode> {
    let Some(WorkloadParams::Endpoint { model, .. }) = &spec.params else {
        return Err(StatusCode::ModelRefused);
    };
    let refused = |problem: crate::models::ModelProblem| {
        tracing::warn!(%model, %problem, "its model can't be served");
        problem.status()
    };
    let source = ModelSource::parse(model, None).map_err(refused)?;
    let files = match server {
        ModelServer::LlamaCpp => {
            let prepared = fetch(&source, models_dir, dir, &Limits::default()).await;
            vec![prepared.map_err(refused)?.path]
        }
        ModelServer::Vllm | ModelServer::Mlx => {
            let prepared = prepare_dir(&source, models_dir, dir, &DirLimits::default()).await;
            let model = prepared.map_err(refused)?.path;
            let listed = std::fs::read_dir(&model).and_then(|entries| {
                entries
                    .map(|e| e.map(|e| e.path()))
                    .collect::<std::io::Result<Vec<_>>>()
            });
            listed.map_err(|e| {
                tracing::warn!(error = %e, "can't list its model directory");
                StatusCode::ModelUnavailable
            })?
        }
    };
    // Read-only to the server: the directories and the files are its user's, the files 0400.
    let readable = files
        .iter()
        .try_for_each(|f| std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o400)))
        .and_then(|()| dirs::give_tree(dir, user));
    readable.map_err(|e| {
        tracing::warn!(error = %e, "can't hand its model to the workload's user");
        StatusCode::ModelUnavailable
    })
}
