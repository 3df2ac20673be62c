//! The libvirt driver's worker: applies the desired state on every change and every second.
//! Running guests are found by their domains' metadata (so an agent restart adopts them);
//! what outlives a guest is its directory (`<EINSORA_VM_DIR>/<workload>/`: disk, seed,
//! console, the channels' sockets while it runs) and the driver's record (the attempt it
//! started, that its disk was made, the image it was made from, the run's token).
//!
//! A VM's disk is a qcow2 overlay on its image's base disk. The base it was made on is kept
//! (`<EINSORA_VM_DIR>/bases/<image hash>/`, linked from the image cache when first used; its
//! hash is the record's `fingerprint`; bases aren't removed yet), so rebuilding the image never
//! changes a disk under a VM, and the VM keeps booting the kernel its disk's modules belong to.
//!
//! qemu runs as libvirt's own user, and libvirt hands it each VM's files (owner-only, the
//! agent's until then) as it starts: the directories only let others through (0711), never
//! list them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use einsora_core::agent::{Mode, StatusCode};
use einsora_proto::convert::WorkloadParams;
use tokio::sync::{Notify, watch};

use super::config::LibvirtConfig;
use super::domain::{Accel, Boot, Domain, Metadata, PciAddress, SOCKET_PATH_MAX, SSH_PORTS};
use super::ready::Readiness;
use super::seed;
use super::ssh::SshSocket;
use super::vfio::Gpus;
use super::virsh::Virsh;
use crate::drivers::local::output::{Cursors, Outbox};
use crate::drivers::local::records::{Record, Records};
use crate::drivers::local::{Seen, SeenMap, Wanted};
use crate::drivers::native::output as console;
use crate::inventory::command::run_tool;

/// How long a guest has to shut down by itself when parked, before it is ended.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(60);
/// A call to `qemu-img`.
const QEMU_IMG_LIMIT: Duration = Duration::from_secs(60);
/// The memory a VM gets when its class says none.
const DEFAULT_MEMORY_MIB: u64 = 1024;
/// The most of a guest's console kept on its machine at once (its logs hold the rest).
const CONSOLE_LIMIT: u64 = 8 << 20;

pub struct Worker {
    virsh: Virsh,
    config: LibvirtConfig,
    accel: Accel,
    /// The machine's GPUs, for VFIO.
    gpus: Arc<Gpus>,
    /// The GPUs its running VMs hold, by UUID, as of its last pass.
    passed: Arc<Mutex<BTreeSet<String>>>,
    seen: SeenMap,
    changed: Arc<Notify>,
    records: Records,
    /// Each running guest, as the worker watches it.
    guests: HashMap<String, Guest>,
    /// When each parked guest was asked to shut down.
    stopping: HashMap<String, Instant>,
    /// Attempts this worker refused to start, or ended for running under other settings, and
    /// what it said: said again (never tried again, nor logged again) while the attempt is
    /// wanted running.
    settled: HashMap<(String, u32), StatusCode>,
    /// Takes what guests print on their consoles, and where it is in each one's.
    outbox: Outbox,
    cursors: Cursors,
}

/// A running guest of one attempt: whether it said it is ready, and once it has, its SSH
/// socket.
struct Guest {
    attempt: u32,
    /// SECRET: the run's token.
    token: String,
    readiness: Readiness,
    ssh: Option<SshSocket>,
}

/// A running domain of this machine's, by its workload.
type Running = BTreeMap<String, (String, Metadata)>;

impl Worker {
    pub fn new(
        config: LibvirtConfig,
        accel: Accel,
        gpus: Arc<Gpus>,
        passed: Arc<Mutex<BTreeSet<String>>>,
        seen: SeenMap,
        changed: Arc<Notify>,
        outbox: Outbox,
    ) -> Worker {
        Worker {
            virsh: Virsh::new(&config.uri),
            records: Records::open(&config.state_dir, super::NAME),
            config,
            accel,
            gpus,
            passed,
            seen,
            changed,
            guests: HashMap::new(),
            stopping: HashMap::new(),
            settled: HashMap::new(),
            outbox,
            cursors: Cursors::default(),
        }
    }

    pub async fn run(mut self, mut wanted: watch::Receiver<Option<Vec<Wanted>>>) {
        let mut next = Duration::ZERO;
        loop {
            tokio::select! {
                moved = wanted.changed() => if moved.is_err() { return },
                () = tokio::time::sleep(next) => {}
            }
            let Some(current) = wanted.borrow_and_update().clone() else {
                next = Duration::from_secs(1);
                continue;
            };
            if let Err(e) = self.pass(&current).await {
                tracing::warn!(error = %e, "libvirt failed a pass; trying again");
            }
            next = crate::drivers::local::next_pass(&self.seen, &[StatusCode::Starting]);
        }
    }

    async fn pass(&mut self, wanted: &[Wanted]) -> Result<(), super::virsh::VirshError> {
        let running = self.running().await?;
        let mut statuses = BTreeMap::new();
        for w in wanted {
            if w.mode != Mode::Remove {
                self.ship_console(w);
            }
            let code = match w.mode {
                Mode::Run => self.run_one(w, running.get(&w.workload)).await,
                Mode::Park => self.park(&w.workload, running.get(&w.workload)).await,
                Mode::Remove => self.remove(&w.workload, running.get(&w.workload)).await,
            };
            // A ready VM is reached at its SSH socket, the agent's own; its token is the run's
            // (which only the guest's ready line says back).
            let target = self
                .guests
                .get(&w.workload)
                .filter(|_| code == StatusCode::Ready)
                .and_then(|g| g.ssh.as_ref().map(|ssh| (ssh, g.token.clone())))
                .map(|(ssh, token)| (ssh.path().display().to_string(), token));
            let seen = Seen {
                attempt: w.attempt,
                mode: w.mode,
                code,
                target,
            };
            statuses.insert(w.workload.clone(), seen);
        }
        // A guest it wasn't told about is stopped and kept, never removed.
        for (workload, running) in &running {
            if !statuses.contains_key(workload) {
                self.park(workload, Some(running)).await;
            }
        }
        self.guests.retain(|w, _| running.contains_key(w));
        let passed: BTreeSet<String> = wanted
            .iter()
            .filter(|w| running.contains_key(&w.workload))
            .flat_map(reserved)
            .collect();
        *self.passed.lock().unwrap_or_else(PoisonError::into_inner) = passed;
        self.settled.retain(|(workload, attempt), _| {
            wanted
                .iter()
                .any(|w| w.workload == *workload && w.attempt == *attempt && w.mode == Mode::Run)
        });
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if *seen != statuses {
            *seen = statuses;
            self.changed.notify_one();
        }
        Ok(())
    }

    /// This machine's running domains, by workload.
    async fn running(&self) -> Result<Running, super::virsh::VirshError> {
        let mut found = Running::new();
        for name in self.virsh.running().await? {
            if !name.starts_with("einsora-") || name.starts_with("einsora-probe-") {
                continue;
            }
            if let Some(m) = self.virsh.metadata(&name).await?
                && m.machine == self.config.machine
                && Domain::name_for(&m.workload) == name
            {
                found.insert(m.workload.clone(), (name, m));
            }
        }
        Ok(found)
    }

    async fn run_one(&mut self, w: &Wanted, running: Option<&(String, Metadata)>) -> StatusCode {
        self.stopping.remove(&w.workload);
        let record = self.records.get(&w.workload);
        if let Some((name, m)) = running {
            if m.attempt != w.attempt {
                // An earlier attempt's guest: ended before this one starts.
                let _ = self.virsh.destroy(name).await;
                self.guests.remove(&w.workload);
                return StatusCode::Stopping;
            }
            if !self.guests.contains_key(&w.workload) && !self.runs_as_it_would_start(w, &record, m)
            {
                // Found as the agent starts, started under other settings: ended, as a
                // container whose sandbox changed is; its disk is kept for a new start.
                tracing::warn!(workload = %w.workload, "a running VM was started under other settings (its fingerprint differs); ending it, its disk kept");
                let _ = self.virsh.destroy(name).await;
                return self.settle(w, StatusCode::SandboxChanged);
            }
            return self.watch(w, &record);
        }
        self.guests.remove(&w.workload);
        if let Some(&said) = self.settled.get(&(w.workload.clone(), w.attempt)) {
            return said;
        }
        if record.started(w.attempt) {
            // This attempt's guest ended by itself (powered off from inside, or crashed): an
            // attempt is started once.
            return StatusCode::Exited;
        }
        let code = match self.start(w, record).await {
            Ok(code) => code,
            Err(e) => {
                tracing::warn!(workload = %w.workload, error = %e, "a VM didn't start");
                StatusCode::StartFailed
            }
        };
        if code.is_failure() {
            return self.settle(w, code);
        }
        code
    }

    /// `code` is what `w`'s attempt ends with here.
    fn settle(&mut self, w: &Wanted, code: StatusCode) -> StatusCode {
        self.settled.insert((w.workload.clone(), w.attempt), code);
        code
    }

    /// A running guest of `w`'s attempt: ready once it said so with its run's token, and then
    /// reached at its SSH socket.
    fn watch(&mut self, w: &Wanted, record: &Record) -> StatusCode {
        let vm_dir = self.vm_dir(&w.workload);
        let token = record.token.clone().unwrap_or_default();
        let guest = self
            .guests
            .entry(w.workload.clone())
            .or_insert_with(|| Guest {
                attempt: w.attempt,
                readiness: Readiness::watch(Domain::ready_socket(&vm_dir), token.clone()),
                token,
                ssh: None,
            });
        if guest.attempt != w.attempt || !guest.readiness.is_ready() {
            return StatusCode::Starting;
        }
        if guest.ssh.is_none() {
            let socket = einsora_core::run_dirs::socket_path(
                &self.config.state_dir,
                &w.workload,
                einsora_core::kind::WorkloadKind::Vm,
            )
            .unwrap_or_default();
            match SshSocket::listen(&socket, &vm_dir) {
                Ok(ssh) => guest.ssh = Some(ssh),
                Err(e) => {
                    tracing::warn!(workload = %w.workload, error = %e, "a VM's SSH socket couldn't listen");
                }
            }
        }
        StatusCode::Ready
    }

    async fn start(&mut self, w: &Wanted, mut record: Record) -> Result<StatusCode, String> {
        let dir = self.vm_dir(&w.workload);
        let disk = dir.join("disk.qcow2");
        if record.had_disk && !disk.exists() {
            return Ok(StatusCode::DiskMissing);
        }
        let Some(image) = self.config.images.get(&w.spec.runtime) else {
            return Ok(StatusCode::ImageMissing);
        };
        let gpus = match self.gpus.plan(&reserved(w)) {
            Ok(gpus) => gpus,
            Err(refusal) => {
                tracing::warn!(workload = %w.workload, %refusal, "a VM's GPUs can't be passed through here; not started");
                return Ok(StatusCode::GpuPassthroughUnavailable);
            }
        };
        let base = match self.base(image, record.fingerprint.as_deref()) {
            Ok(Some(base)) => base,
            Ok(None) => return Ok(StatusCode::ImageMissing),
            Err(e) => return Err(e),
        };
        let longest = Domain::ssh_socket(&dir, SSH_PORTS - 1);
        if longest.as_os_str().len() > SOCKET_PATH_MAX {
            return Err(format!(
                "{} is too long for a Unix socket's path: set EINSORA_VM_DIR to a shorter one",
                longest.display()
            ));
        }
        passable_dir(&dir)?;
        if !disk.exists() {
            make_disk(&base.dir.join("disk.qcow2"), &disk, disk_bytes(w)).await?;
        }
        let token = crate::drivers::local::dirs::new_token()
            .map_err(|e| format!("no randomness for the run's token: {e}"))?;
        let keys = match &w.spec.params {
            Some(WorkloadParams::Vm {
                ssh_authorized_keys,
                ..
            }) => ssh_authorized_keys.clone(),
            _ => Vec::new(),
        };
        seed::write(
            &dir.join("seed.iso"),
            &dir.join("seed"),
            &w.workload,
            &keys,
            &token,
        )
        .await?;
        let domain = self.domain_for(w, &base, gpus);
        let metadata = Metadata {
            workload: w.workload.clone(),
            attempt: w.attempt,
            machine: self.config.machine.clone(),
            fingerprint: domain.fingerprint(),
        };
        let xml_file = dir.join("domain.xml");
        std::fs::write(&xml_file, domain.xml(&metadata))
            .map_err(|e| format!("{}: {e}", xml_file.display()))?;
        // Saved before the guest starts: a crash right after never starts this attempt twice.
        record = Record {
            started_attempt: w.attempt,
            had_disk: true,
            token: Some(token),
            fingerprint: Some(base.hash),
        };
        self.records
            .set(&w.workload, record)
            .map_err(|e| format!("saving the driver's records: {e}"))?;
        self.virsh
            .create(&xml_file)
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(workload = %w.workload, attempt = w.attempt, accel = self.accel.as_str(), "VM started");
        Ok(StatusCode::Starting)
    }

    /// `w`'s domain on `base`: how it runs decided here, its files in its directory.
    fn domain_for(&self, w: &Wanted, base: &Base, gpus: Vec<PciAddress>) -> Domain {
        let dir = self.vm_dir(&w.workload);
        let resources = w.spec.resources.clone().unwrap_or_default();
        Domain {
            name: Domain::name_for(&w.workload),
            accel: self.accel,
            vcpus: resources.cpus.max(1),
            memory_mib: match resources.memory_bytes / (1024 * 1024) {
                0 => DEFAULT_MEMORY_MIB,
                mib => mib,
            },
            boot: Boot {
                kernel: base.dir.join("vmlinuz"),
                initrd: base.dir.join("initrd.img"),
            },
            disk: dir.join("disk.qcow2"),
            seed: dir.join("seed.iso"),
            console: dir.join(console::LOG),
            run_dir: dir,
            gpus,
        }
    }

    /// Whether a running guest of `w`'s attempt that the worker isn't watching yet (found as
    /// the agent starts, or just started) runs as the agent would start it now (its
    /// fingerprint, as containers' sandboxes): `false` when it was started under other
    /// settings (its GPUs passed otherwise, or by an agent that builds domains otherwise).
    /// Where that can't be told (its record names no base, its base is gone, or its GPUs
    /// can't be planned), it is left running.
    fn runs_as_it_would_start(&self, w: &Wanted, record: &Record, found: &Metadata) -> bool {
        let Some(hash) = record.fingerprint.as_deref() else {
            return true;
        };
        let base = self
            .config
            .images
            .get(&w.spec.runtime)
            .and_then(|image| self.base(image, Some(hash)).ok().flatten());
        let (Some(base), Ok(gpus)) = (base, self.gpus.plan(&reserved(w))) else {
            return true;
        };
        self.domain_for(w, &base, gpus).fingerprint() == found.fingerprint
    }

    async fn park(&mut self, workload: &str, running: Option<&(String, Metadata)>) -> StatusCode {
        self.guests.remove(workload);
        let Some((name, _)) = running else {
            self.stopping.remove(workload);
            return StatusCode::Stopped;
        };
        let asked = *self
            .stopping
            .entry(workload.to_owned())
            .or_insert_with(Instant::now);
        if asked.elapsed() >= SHUTDOWN_GRACE {
            tracing::info!(%workload, "a VM didn't shut down within its grace; ending it");
            let _ = self.virsh.destroy(name).await;
        } else if let Err(e) = self.virsh.shutdown(name).await {
            tracing::warn!(%workload, error = %e, "asking a VM to shut down failed");
        }
        StatusCode::Stopping
    }

    async fn remove(&mut self, workload: &str, running: Option<&(String, Metadata)>) -> StatusCode {
        self.guests.remove(workload);
        self.stopping.remove(workload);
        if let Some((name, _)) = running
            && let Err(e) = self.virsh.destroy(name).await
        {
            tracing::warn!(%workload, error = %e, "ending a VM to remove it failed");
            return StatusCode::Stopping;
        }
        let run_dir = einsora_core::run_dirs::run_dir(&self.config.state_dir, workload);
        let _ = std::fs::remove_dir_all(run_dir);
        let dir = self.vm_dir(workload);
        if let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(%workload, error = %e, "removing a VM's directory failed");
            return StatusCode::Stopping;
        }
        let _ = self.records.forget(workload);
        self.cursors.forget(workload);
        StatusCode::Removed
    }

    /// Offers what the guest printed on its console since it was last read, the run's token
    /// removed, and keeps the console's file bounded.
    fn ship_console(&mut self, w: &Wanted) {
        let dir = self.vm_dir(&w.workload);
        let token = self.records.get(&w.workload).token;
        console::ship(&dir, &self.outbox, &mut self.cursors, w, token.as_deref());
        let read_to = self.cursors.at(&w.workload);
        if let Err(e) = console::keep_bounded(&dir, CONSOLE_LIMIT, read_to) {
            tracing::warn!(workload = %w.workload, error = %e, "can't keep its console bounded");
        }
    }

    fn vm_dir(&self, workload: &str) -> PathBuf {
        self.config.vm_dir.join(workload)
    }

    /// The base a VM's disk is made on: the one it was made on (`hash`), or for a new disk
    /// the image's current build, linked into the driver's own directory first. `None` when
    /// the image isn't built.
    fn base(&self, image: &Path, hash: Option<&str>) -> Result<Option<Base>, String> {
        let bases = self.config.vm_dir.join("bases");
        if let Some(hash) = hash {
            let dir = bases.join(hash);
            return Ok(dir.is_dir().then(|| Base {
                dir,
                hash: hash.to_owned(),
            }));
        }
        let Ok(inputs) = std::fs::read_to_string(image.join("inputs")) else {
            return Ok(None);
        };
        let hash = inputs.trim();
        if hash.is_empty() || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("{} doesn't read", image.join("inputs").display()));
        }
        let dir = bases.join(hash);
        if !dir.is_dir() {
            let partial = bases.join(format!(".{hash}.partial"));
            let _ = std::fs::remove_dir_all(&partial);
            passable_dir(&bases)?;
            passable_dir(&partial)?;
            for file in ["disk.qcow2", "vmlinuz", "initrd.img"] {
                let (from, to) = (image.join(file), partial.join(file));
                std::fs::hard_link(&from, &to)
                    .or_else(|_| std::fs::copy(&from, &to).map(drop))
                    .map_err(|e| format!("{}: {e}", from.display()))?;
            }
            std::fs::rename(&partial, &dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        Ok(Some(Base {
            dir,
            hash: hash.to_owned(),
        }))
    }
}

/// The GPUs `w` was given, by UUID.
fn reserved(w: &Wanted) -> Vec<String> {
    w.spec
        .resources
        .as_ref()
        .map(|r| r.device_uuids.clone())
        .unwrap_or_default()
}

/// Makes `dir` (and what is missing above it) with mode 0711: qemu's user passes through,
/// nobody lists it.
pub fn passable_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(dir)
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)))
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// An image's build the driver keeps: its directory and its hash.
struct Base {
    dir: PathBuf,
    hash: String,
}

/// The root disk's size the VM asked for; `None` for its image's.
fn disk_bytes(w: &Wanted) -> Option<u64> {
    match &w.spec.params {
        Some(WorkloadParams::Vm {
            disk_gib: Some(gib),
            ..
        }) => Some(u64::from(*gib) << 30),
        _ => w
            .spec
            .resources
            .as_ref()
            .map(|r| r.disk_bytes)
            .filter(|b| *b > 0),
    }
}

/// A VM's disk, on `base`: as large as asked for, where that is more than the base (a
/// smaller one would cut the base's filesystem short; the guest grows its own to fill it).
async fn make_disk(base: &Path, disk: &Path, bytes: Option<u64>) -> Result<(), String> {
    let (Some(base_s), Some(disk_s)) = (base.to_str(), disk.to_str()) else {
        return Err("a VM path is not UTF-8".to_owned());
    };
    let size = match bytes {
        Some(bytes) if bytes > virtual_size(base_s).await? => Some(bytes.to_string()),
        _ => None,
    };
    let mut args = vec![
        "create", "-q", "-f", "qcow2", "-b", base_s, "-F", "qcow2", disk_s,
    ];
    args.extend(size.as_deref());
    qemu_img(&args).await?;
    owner_only(disk)
}

/// The size of the disk `image` holds, as its guest sees it.
async fn virtual_size(image: &str) -> Result<u64, String> {
    let info = qemu_img(&["info", "--output=json", image]).await?;
    serde_json::from_str::<serde_json::Value>(&info)
        .ok()
        .and_then(|v| v["virtual-size"].as_u64())
        .ok_or_else(|| format!("qemu-img didn't say how large {image} is"))
}

async fn qemu_img(args: &[&str]) -> Result<String, String> {
    match run_tool("qemu-img", args, QEMU_IMG_LIMIT).await {
        Ok(Some(out)) => out.success().map_err(|e| e.to_string()),
        Ok(None) => Err("qemu-img isn't installed".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// Mode 0600: the agent's until libvirt hands it to qemu.
pub fn owner_only(file: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("{}: {e}", file.display()))
}

#[cfg(test)]
mod tests;
