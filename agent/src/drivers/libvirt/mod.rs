//! `libvirt`: VMs as libvirt domains (qemu), each booting its image's kernel on its own
//! copy-on-write disk, with its NoCloud seed and no network interface: the host reaches the
//! guest only over virtio-serial channels on Unix sockets (readiness, SSH). KVM where it
//! works, decided by a probe boot when the agent starts; qemu's emulation (TCG) only where the
//! operator allows it (`EINSORA_VM_ACCEL=tcg`). A guest's serial console is its output (its
//! logs), so a VM that fails to boot says why. Parked = shut down (forced after a grace), its
//! disk kept; removed = its domain and disk gone. Off unless `EINSORA_AGENT_LIBVIRT=true`.

pub mod config;
pub mod domain;
mod probe;
mod ready;
mod reconcile;
pub mod seed;
mod ssh;
mod vfio;
mod virsh;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, watch};

use config::AccelSetting;
pub use config::LibvirtConfig;
use domain::Accel;
use einsora_core::machine::VmHost;

use super::local::output::Outbox;
use super::local::{Handle, SeenMap, Wanted};

pub const NAME: &str = "libvirt";

/// The worker, started afresh whenever it panics (as the docker driver's).
struct Supervised {
    config: LibvirtConfig,
    accel: Accel,
    gpus: Arc<vfio::Gpus>,
    passed: Arc<Mutex<BTreeSet<String>>>,
    seen: SeenMap,
    changed: Arc<Notify>,
    outbox: Outbox,
    restarts: Arc<AtomicU32>,
}

impl Supervised {
    async fn run(self, wanted: watch::Receiver<Option<Vec<Wanted>>>) {
        let restarts = Arc::clone(&self.restarts);
        einsora_runtime::panics::restart_on_panic(NAME, &restarts, || {
            self.changed.notify_one();
            let worker = reconcile::Worker::new(
                self.config.clone(),
                self.accel,
                Arc::clone(&self.gpus),
                Arc::clone(&self.passed),
                Arc::clone(&self.seen),
                Arc::clone(&self.changed),
                self.outbox.clone(),
            );
            let mut wanted = wanted.clone();
            wanted.mark_changed();
            worker.run(wanted)
        })
        .await;
    }
}

/// Makes `vm_dir` passable (0711) where every directory above it lets others through.
fn reachable(vm_dir: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    for above in vm_dir.ancestors().skip(1) {
        let Ok(meta) = std::fs::metadata(above) else {
            continue; // made below, passable
        };
        if meta.permissions().mode() & 0o001 == 0 {
            return Err(format!(
                "{} doesn't let others through (mode o+x), so qemu's user can't reach {}",
                above.display(),
                vm_dir.display()
            ));
        }
    }
    reconcile::passable_dir(vm_dir)
}

#[derive(Debug)]
pub struct Libvirt {
    handle: Handle,
    host: VmHost,
    /// The GPUs its running VMs were given, by UUID.
    passed: Arc<Mutex<BTreeSet<String>>>,
    restarts: Arc<AtomicU32>,
}

impl Libvirt {
    /// The driver, if libvirt answers and guests can run here (KVM, or TCG where allowed);
    /// `outbox` takes what its guests print on their consoles.
    pub async fn detect(
        config: LibvirtConfig,
        changed: Arc<Notify>,
        outbox: Outbox,
    ) -> Option<Libvirt> {
        let virsh = virsh::Virsh::new(&config.uri);
        if let Err(e) = virsh.answers().await {
            tracing::warn!(uri = %config.uri, error = %e, "no libvirt driver: libvirt doesn't answer");
            return None;
        }
        if let Err(why) = reachable(&config.vm_dir) {
            tracing::warn!(%why, "no libvirt driver: qemu's user couldn't reach VMs' files (EINSORA_VM_DIR)");
            return None;
        }
        let accel = match probe::kvm_works(&virsh, &config).await {
            Ok(()) => Accel::Kvm,
            Err(why) if config.accel == AccelSetting::TcgAllowed => {
                tracing::info!(%why, "KVM doesn't run guests here: VMs run under qemu's emulation (EINSORA_VM_ACCEL=tcg)");
                Accel::Tcg
            }
            Err(why) => {
                tracing::warn!(%why, "no libvirt driver: KVM doesn't run guests here (EINSORA_VM_ACCEL=tcg allows qemu's emulation)");
                return None;
            }
        };
        let host = VmHost {
            accel,
            limit: config.limit,
        };
        let gpus = vfio::Gpus::read_now(&config.state_dir).await;
        let passed = Arc::<Mutex<BTreeSet<String>>>::default();
        let seen = SeenMap::default();
        let (handle, receiver) = Handle::new(Arc::clone(&seen));
        let restarts = Arc::new(AtomicU32::new(0));
        let worker = Supervised {
            config,
            accel,
            gpus: Arc::new(gpus),
            passed: Arc::clone(&passed),
            seen,
            changed,
            outbox,
            restarts: Arc::clone(&restarts),
        };
        tokio::spawn(worker.run(receiver));
        tracing::info!(accel = accel.as_str(), "libvirt driver ready");
        Some(Libvirt {
            handle,
            host,
            passed,
            restarts,
        })
    }

    /// The GPUs its running VMs hold, by UUID: the host's nvidia-smi doesn't list a GPU
    /// passed through, which is still the machine's.
    pub fn passed_through(&self) -> BTreeSet<String> {
        self.passed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// How its guests run here, and how many at once.
    pub fn vm_host(&self) -> VmHost {
        self.host
    }

    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}
