//! `docker`: notebooks and endpoints as containers of a local Docker engine, each listening on a
//! Unix socket in its private run directory and on no TCP or UDP port (spec.rs has the
//! sandbox). The driver applies its desired state in a task of its own, beside the sync loop,
//! every call time-limited, so a slow engine or pull never makes the machine look offline.
//!
//! Offered only when the engine answers when the agent starts; NVIDIA classes only when the
//! engine can give containers the GPUs (gpus.rs: its `nvidia` runtime, or CDI devices by UUID).

mod config;
mod egress;
mod engine;
mod gpus;
mod logs;
mod reconcile;
mod spec;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

pub use super::local::Seen;
pub use super::local::fence::{EGRESS, EgressSetting};
use super::local::output::Outbox;
pub use super::local::{DISK_FLOOR, DISK_LIMITS, DiskConfig, LOG_LIMIT};
use super::local::{Handle, SeenMap, Wanted};
pub use config::{ENABLED, IMAGES, SOCKET};
pub use egress::NETWORK as EGRESS_NETWORK;
pub use engine::Engine;
pub use gpus::GpuAccess;

pub const NAME: &str = "docker";

/// How the driver is set up on this machine.
#[derive(Debug, Clone)]
pub struct DockerConfig {
    /// The engine's Unix socket.
    pub socket: PathBuf,
    /// This machine's ID: its containers carry it, so agents sharing an engine (tests, a
    /// reinstalled machine) never touch each other's.
    pub machine: String,
    pub state_dir: PathBuf,
    /// Where endpoints' models may come from (EINSORA_MODELS_DIR).
    pub models_dir: Option<PathBuf>,
    /// The container image for each catalog runtime.
    pub images: BTreeMap<String, String>,
    /// Workloads' disk and log limits, and the free-space floor.
    pub disks: DiskConfig,
    /// Whether the owner's notebooks may have outbound network here (egress.rs).
    pub egress: EgressSetting,
    /// The region's controllers the agent syncs with, which egress can't reach.
    pub controllers: crate::controllers::Controllers,
}

/// The worker, started afresh (its records read again from disk) whenever it panics. Nothing
/// a workload writes should make it panic; this is so that a bug never freezes a machine.
struct Supervised {
    engine: Engine,
    config: DockerConfig,
    seen: SeenMap,
    changed: Arc<Notify>,
    gpus: GpuAccess,
    outbox: Outbox,
    /// How many times it was restarted, for the controller.
    restarts: Arc<AtomicU32>,
}

impl Supervised {
    async fn run(self, wanted: watch::Receiver<Option<Vec<Wanted>>>) {
        let restarts = Arc::clone(&self.restarts);
        einsora_runtime::panics::restart_on_panic(NAME, &restarts, || {
            // A restart is a change the sync loop reports at once.
            self.changed.notify_one();
            let worker = reconcile::Worker::new(
                self.engine.clone(),
                self.config.clone(),
                Arc::clone(&self.seen),
                Arc::clone(&self.changed),
                self.gpus.clone(),
                self.outbox.clone(),
            );
            let mut wanted = wanted.clone();
            // The new worker applies the current desired state at once.
            wanted.mark_changed();
            worker.run(wanted)
        })
        .await;
    }
}

#[derive(Debug)]
pub struct Docker {
    handle: Handle,
    gpus: GpuAccess,
    restarts: Arc<AtomicU32>,
}

impl Docker {
    /// The driver, if the engine answers; its worker runs until the driver is dropped.
    /// `changed` is notified whenever a workload's status changes; `outbox` takes what its
    /// workloads print.
    pub async fn detect(
        config: DockerConfig,
        changed: Arc<Notify>,
        outbox: Outbox,
    ) -> Option<Docker> {
        let engine = Engine::new(config.socket.clone());
        if let Err(e) = tokio::time::timeout(Duration::from_secs(5), engine.ping())
            .await
            .unwrap_or_else(|_| Err(engine::EngineError::Timeout(Duration::from_secs(5))))
        {
            tracing::info!(error = %e, "no docker driver: the engine doesn't answer");
            return None;
        }
        let gpus = match engine.info().await {
            Ok(info) => GpuAccess::of(&info),
            Err(e) => {
                tracing::warn!(error = %e, "the docker engine didn't say how it gives containers GPUs: none are offered through it");
                GpuAccess::default()
            }
        };
        let seen = SeenMap::default();
        let (handle, receiver) = Handle::new(Arc::clone(&seen));
        let restarts = Arc::new(AtomicU32::new(0));
        let worker = Supervised {
            engine,
            config,
            seen,
            changed,
            gpus: gpus.clone(),
            outbox,
            restarts: Arc::clone(&restarts),
        };
        tokio::spawn(worker.run(receiver));
        tracing::info!(nvidia = gpus.any(), "docker driver ready");
        Some(Docker {
            handle,
            gpus,
            restarts,
        })
    }

    /// How many times its worker crashed and was restarted.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// How the engine gives containers NVIDIA GPUs, if it can.
    pub fn gpus(&self) -> &GpuAccess {
        &self.gpus
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}
