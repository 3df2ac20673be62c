//! The docker driver's worker: applies the desired state on every change and every second
//! (containers are found by label, so an agent restart adopts them), and keeps what it saw for
//! the sync loop.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::agent::{Mode, StatusCode};
use tokio::sync::{Notify, watch};

use super::DockerConfig;
use super::egress::{self, NETWORK as EGRESS_NETWORK, Network};
use super::engine::{ContainerSummary, Engine, EngineError};
use super::gpus::GpuAccess;
use super::spec::{
    LABEL_ATTEMPT, LABEL_FINGERPRINT, LABEL_MACHINE, LABEL_NETWORK, LABEL_WORKLOAD, Sandbox,
};
use crate::drivers::local::dirs::Places;
use crate::drivers::local::disk::Disks;
use crate::drivers::local::fence::Fence;
use crate::drivers::local::output::{self as shipping, Cursors, Outbox};
use crate::drivers::local::probe::{Probe, answers};
use crate::drivers::local::records::Records;
use crate::drivers::local::{Seen, SeenMap, Wanted};

use crate::drivers::local::STOP_GRACE;
use crate::drivers::local::prepare::{Preparation, Unprepared};
const PULL_LIMIT: Duration = Duration::from_secs(30 * 60);
/// How soon output that is behind is read again, between passes.
const DRAIN_EVERY: Duration = Duration::from_millis(100);

pub struct Worker {
    engine: Engine,
    config: DockerConfig,
    seen: SeenMap,
    /// Notified when what the driver sees changed.
    changed: Arc<Notify>,
    /// How the engine gives containers NVIDIA GPUs, if it can.
    gpus: GpuAccess,
    /// Takes what workloads print, and where it is in each one's output.
    outbox: Outbox,
    cursors: Cursors,
    /// Stopped containers whose log was read to its end, and on which sync stream: not asked
    /// for it again every pass (a new stream reads from the store's head again).
    drained: HashMap<String, u64>,
    /// Workloads whose earlier attempt's container was removed with lines not yet shipped:
    /// their next attempt's first line says lines may be missing before it.
    unshipped: HashSet<String>,
    /// Running workloads' containers as the last pass found them, each with whether its last
    /// read shipped a full batch or more (it is printing faster than a pass a second reads):
    /// those are read again every [`DRAIN_EVERY`] between passes until they are caught up.
    printing: Vec<(Wanted, ContainerSummary, bool)>,
    records: Records,
    /// Workloads' disks and run directories, and the free-space floor.
    disks: Disks,
    user: (u32, u32),
    /// Images being pulled, and those whose pull failed.
    pulls: HashMap<String, watch::Receiver<Option<bool>>>,
    /// The egress network's fence, put up when a workload wants egress.
    fence: Fence,
    unprepared: Unprepared,
}

/// What one workload came to in a pass.
type Outcome = (StatusCode, Option<(String, String)>);

impl Worker {
    pub fn new(
        engine: Engine,
        config: DockerConfig,
        seen: SeenMap,
        changed: Arc<Notify>,
        gpus: GpuAccess,
        outbox: Outbox,
    ) -> Worker {
        let user = crate::drivers::local::workload_user();
        Worker {
            fence: Fence::new(config.egress, config.controllers.clone()),
            records: Records::open(&config.state_dir, super::NAME),
            disks: Disks::new(config.disks.clone(), &config.state_dir),
            engine,
            config,
            seen,
            changed,
            gpus,
            outbox,
            cursors: Cursors::default(),
            drained: HashMap::new(),
            unshipped: HashSet::new(),
            printing: Vec::new(),
            user,
            pulls: HashMap::new(),
            unprepared: Unprepared::default(),
        }
    }

    pub async fn run(mut self, mut wanted: watch::Receiver<Option<Vec<Wanted>>>) {
        let mut next = Duration::ZERO;
        loop {
            let pass_at = tokio::time::Instant::now() + next;
            // A workload printing fast is read again between passes until it is caught up
            // (never past the pass, nor past a change of what is wanted).
            let mut changed = false;
            while self.printing.iter().any(|(_, _, behind)| *behind) {
                let drain_at = tokio::time::Instant::now() + DRAIN_EVERY;
                if drain_at >= pass_at {
                    break;
                }
                tokio::select! {
                    moved = wanted.changed() => {
                        if moved.is_err() {
                            return;
                        }
                        changed = true;
                        break;
                    }
                    () = tokio::time::sleep_until(drain_at) => self.drain().await,
                }
            }
            if !changed {
                tokio::select! {
                    moved = wanted.changed() => if moved.is_err() { return },
                    () = tokio::time::sleep_until(pass_at) => {}
                }
            }
            let Some(current) = wanted.borrow_and_update().clone() else {
                continue;
            };
            self.printing.clear();
            if let Err(e) = self.pass(&current).await {
                tracing::warn!(error = %e, "the docker engine failed a pass; trying again");
            }
            next = crate::drivers::local::next_pass(&self.seen, &[StatusCode::Starting]);
        }
    }

    /// Reads again the output of the running workloads that were behind.
    async fn drain(&mut self) {
        let mut printing = std::mem::take(&mut self.printing);
        for (w, c, behind) in &mut printing {
            if *behind {
                *behind = self.ship_output(w, std::slice::from_ref(c)).await;
            }
        }
        self.printing = printing;
    }

    async fn pass(&mut self, wanted: &[Wanted]) -> Result<(), EngineError> {
        let mut ours: BTreeMap<String, Vec<ContainerSummary>> = BTreeMap::new();
        let this_machine = format!("{LABEL_MACHINE}={}", self.config.machine);
        for c in self.engine.containers(&this_machine).await? {
            let id = c.labels.get(LABEL_WORKLOAD).cloned().unwrap_or_default();
            ours.entry(id).or_default().push(c);
        }
        self.drained
            .retain(|id, _| ours.values().flatten().any(|c| c.id == *id));
        let busy_gpus = Self::gpus_in_use(wanted, &ours);
        let mut seen = BTreeMap::new();
        for w in wanted {
            let containers = ours.remove(&w.workload).unwrap_or_default();
            let (code, target) = match w.mode {
                Mode::Run => self.run_one(w, &containers, &busy_gpus).await?,
                Mode::Park => (self.park(&containers).await?, None),
                Mode::Remove => (self.remove(w, &containers).await?, None),
            };
            if w.mode == Mode::Remove {
                self.cursors.forget(&w.workload);
                self.unshipped.remove(&w.workload);
            } else {
                let behind = self.ship_output(w, &containers).await;
                if let Some(c) = containers
                    .iter()
                    .find(|c| of_attempt(c, w.attempt) && c.running())
                {
                    self.printing.push((w.clone(), c.clone(), behind));
                }
            }
            let s = Seen {
                attempt: w.attempt,
                mode: w.mode,
                code,
                target,
            };
            seen.insert(w.workload.clone(), s);
        }
        // One it wasn't told about: stopped and kept.
        for containers in ours.values() {
            self.park(containers).await?;
        }
        let mut current = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if *current != seen {
            *current = seen;
            // The sync loop reports a change at once rather than at its next check.
            self.changed.notify_one();
        }
        Ok(())
    }

    async fn run_one(
        &mut self,
        w: &Wanted,
        containers: &[ContainerSummary],
        busy_gpus: &HashMap<String, String>,
    ) -> Result<Outcome, EngineError> {
        let refused = |code| Ok((code, None));
        let nvidia = w.spec.accelerator == Some(AcceleratorKind::Nvidia);
        let uuids = w.spec.resources.as_ref().map(|r| r.device_uuids.as_slice());
        if nvidia && self.gpus.path_for(uuids.unwrap_or_default()).is_none() {
            // A GPU request never silently becomes CPU.
            return refused(StatusCode::StartFailed);
        }
        let record = self.records.get(&w.workload);
        if w.spec.retired {
            // Its class or image left the catalog: the container of this attempt keeps running
            // as it was made (adopted by its own labels: the sandbox it was made with can't be
            // computed any more), and nothing new starts.
            let places = Places::of(&self.config.state_dir, &w.workload);
            let sandbox = self.sandbox(w, String::new(), String::new(), &places, Network::None);
            let Some(c) = containers.iter().find(|c| of_attempt(c, w.attempt)) else {
                return refused(StatusCode::Exited);
            };
            let egress = c.labels.get(LABEL_NETWORK).map(String::as_str) == Some(EGRESS_NETWORK);
            if egress
                && egress::network(&mut self.fence, &self.engine, true).await != Network::Egress
            {
                // Its fence can't be kept up: stopped, as any sandbox that changed.
                if c.running() {
                    self.engine.stop(&c.id, STOP_GRACE).await?;
                }
                return refused(StatusCode::SandboxChanged);
            }
            let token = record.token.as_deref();
            return self.running(c, &sandbox, token, Adopt::AsMade).await;
        }
        let Some(image) = self.config.images.get(&w.spec.runtime).cloned() else {
            return refused(StatusCode::ImageMissing);
        };
        let new_work =
            !record.started(w.attempt) && !containers.iter().any(|c| of_attempt(c, w.attempt));
        if new_work && let Err(code) = self.unprepared.admit(&self.disks, w) {
            return refused(code);
        }
        let Some(image_id) = self.image(&image).await? else {
            return refused(self.pull_status(&image));
        };
        let places = Places::of(&self.config.state_dir, &w.workload);
        // Where the fence can't be kept up, a container made with egress no longer matches its
        // sandbox and is stopped (fail closed), like any sandbox change.
        let network = egress::network(&mut self.fence, &self.engine, w.spec.egress).await;
        let sandbox = self.sandbox(w, image, image_id, &places, network);
        for old in containers.iter().filter(|c| !of_attempt(c, w.attempt)) {
            if self.unread_output(w, old).await {
                self.unshipped.insert(w.workload.clone());
            }
            self.engine.remove(&old.id).await?;
        }
        if let Some(c) = containers.iter().find(|c| of_attempt(c, w.attempt)) {
            let token = record.token.as_deref();
            return self.running(c, &sandbox, token, Adopt::SameSandbox).await;
        }
        if record.started(w.attempt) {
            // Started once already, and its container is gone: never started again.
            return refused(StatusCode::Exited);
        }
        if w.gpus_missing {
            return refused(StatusCode::GpuMissing);
        }
        let held_by_another = |g: &String| busy_gpus.get(g).is_some_and(|by| *by != w.workload);
        if sandbox.gpus.iter().any(held_by_another) {
            return refused(StatusCode::GpuBusy);
        }
        let preparation = Preparation {
            disks: &self.disks,
            models_dir: self.config.models_dir.as_deref(),
            user: self.user,
            places: &places,
            serves: &sandbox.serves,
            record: &record,
        };
        let next = match self.unprepared.prepare(preparation, w, None).await {
            Ok(next) => next,
            Err(code) => return refused(code),
        };
        if let Err(e) = self.records.set(&w.workload, next) {
            tracing::warn!(error = %e, "can't record a start; not starting");
            return refused(StatusCode::StartFailed);
        }
        let id = self
            .engine
            .create(&sandbox.name(), &sandbox.create_body())
            .await?;
        self.engine.start(&id).await?;
        tracing::info!(workload = %w.workload, attempt = w.attempt, "container started");
        Ok((StatusCode::Starting, None))
    }

    /// An existing container of the attempt: the same sandbox, or stopped as changed (unless
    /// adopted as it was made). Ready
    /// once its server answers, on its own socket, the token the agent keeps (never one read
    /// back from anything the workload can write).
    async fn running(
        &self,
        c: &ContainerSummary,
        sandbox: &Sandbox,
        token: Option<&str>,
        adopt: Adopt,
    ) -> Result<Outcome, EngineError> {
        if adopt == Adopt::SameSandbox
            && c.labels.get(LABEL_FINGERPRINT) != Some(&sandbox.fingerprint())
        {
            if c.running() {
                tracing::warn!(workload = %sandbox.workload, "its sandbox changed; stopping it");
                self.engine.stop(&c.id, STOP_GRACE).await?;
            }
            return Ok((StatusCode::SandboxChanged, None));
        }
        if !c.running() {
            // Only a stopped container is inspected: why it stopped.
            let code = if self.engine.oom_killed(&c.id).await? {
                StatusCode::OutOfMemory
            } else {
                StatusCode::Exited
            };
            return Ok((code, None));
        }
        let Some(token) = token else {
            // Started by an agent that didn't keep its token: its sandbox is an older one.
            return Ok((StatusCode::SandboxChanged, None));
        };
        let socket = sandbox.socket();
        match answers(&socket, &sandbox.serves, token).await {
            Probe::Answered => {
                let target = (socket.display().to_string(), token.to_owned());
                Ok((StatusCode::Ready, Some(target)))
            }
            Probe::NotYet => Ok((StatusCode::Starting, None)),
            Probe::Tampered(why) => {
                tracing::warn!(workload = %sandbox.workload, %why, "its socket was tampered with; failing it");
                // Killed before it is reported failed: a connection the access proxy keeps to
                // its server (`kept.rs`) dies with it, so nothing reaches a failed workload.
                self.engine.stop(&c.id, Duration::ZERO).await?;
                Ok((StatusCode::SocketTampered, None))
            }
        }
    }

    async fn park(&self, containers: &[ContainerSummary]) -> Result<StatusCode, EngineError> {
        for c in containers {
            if c.running() {
                self.engine.stop(&c.id, STOP_GRACE).await?;
            }
        }
        Ok(StatusCode::Stopped)
    }

    async fn remove(
        &mut self,
        w: &Wanted,
        containers: &[ContainerSummary],
    ) -> Result<StatusCode, EngineError> {
        for c in containers {
            self.engine.remove(&c.id).await?;
        }
        let places = Places::of(&self.config.state_dir, &w.workload);
        if let Err(e) = self
            .disks
            .release(&w.workload, &places.run, &places.data)
            .and_then(|()| places.remove_all())
            .and_then(|()| self.records.forget(&w.workload))
        {
            tracing::warn!(workload = %w.workload, error = %e, "can't delete its data yet");
            return Ok(StatusCode::Stopping);
        }
        Ok(StatusCode::Removed)
    }

    fn sandbox(
        &self,
        w: &Wanted,
        image: String,
        image_id: String,
        places: &Places,
        network: Network,
    ) -> Sandbox {
        let resources = w.spec.resources.clone().unwrap_or_default();
        let serves = w.serves(places);
        Sandbox {
            machine: self.config.machine.clone(),
            workload: w.workload.clone(),
            attempt: w.attempt,
            image,
            image_id,
            user: self.user,
            cpus: resources.cpus,
            memory_bytes: resources.memory_bytes,
            log_bytes: self.disks.log_bytes(),
            gpu_path: self.gpus.path_for(&resources.device_uuids),
            gpus: resources.device_uuids,
            network,
            run_dir: places.run.clone(),
            secret_dir: places.secret.clone(),
            serves,
        }
    }

    /// Offers what its attempt's container printed since it was last read, its token removed;
    /// whether it shipped a full batch or more, all of it taken (it is printing fast: read it
    /// again soon).
    async fn ship_output(&mut self, w: &Wanted, containers: &[ContainerSummary]) -> bool {
        let Some(c) = containers.iter().find(|c| of_attempt(c, w.attempt)) else {
            return false;
        };
        let from = self.cursors.from(w);
        if self.drained.get(&c.id) == Some(&w.stream) {
            return false;
        }
        let entries = match self.engine.logs(&c.id, from).await {
            Ok(entries) => entries,
            Err(e) => {
                tracing::debug!(workload = %w.workload, error = %e, "can't read its output yet");
                return false;
            }
        };
        let token = self.records.get(&w.workload).token;
        let own_offset = self.cursors.in_attempt(&w.workload, w.attempt);
        let file_bytes = self.disks.log_bytes() / 2;
        let gap = super::logs::gap(&entries, from, own_offset, file_bytes)
            || (!own_offset && self.unshipped.contains(&w.workload));
        let lines = super::logs::lines(entries, from, gap, token.as_deref());
        let end = lines.last().map_or(from, |l| l.end);
        let bytes: usize = lines.iter().map(|l| l.text.len()).sum();
        let full = lines.len() >= shipping::BATCH_LINES || bytes >= shipping::BATCH_BYTES;
        shipping::ship(&self.outbox, &mut self.cursors, w, lines);
        if self.cursors.in_attempt(&w.workload, w.attempt) {
            self.unshipped.remove(&w.workload);
        }
        let read_to_end = self.cursors.at(&w.workload).is_some_and(|at| at >= end);
        if !c.running() && read_to_end {
            self.drained.insert(c.id.clone(), w.stream);
        }
        // An outbox with no room is a controller away or slow: the pass's pace will do.
        full && read_to_end
    }

    /// Whether `old` (an earlier attempt's container, about to be removed) printed lines past
    /// where shipping is: the controller takes only the current attempt's, so they are lost.
    async fn unread_output(&mut self, w: &Wanted, old: &ContainerSummary) -> bool {
        let from = self.cursors.from(w);
        match self.engine.logs(&old.id, from).await {
            Ok(entries) => entries.iter().any(|e| super::logs::offset_of(e.at) > from),
            // Can't tell: say lines may be missing.
            Err(_) => true,
        }
    }

    /// The image's ID; `None` while it is being pulled (a pull starts in the background).
    async fn image(&mut self, image: &str) -> Result<Option<String>, EngineError> {
        if let Some(id) = self.engine.image_id(image).await? {
            self.pulls.remove(image);
            return Ok(Some(id));
        }
        if !self.pulls.contains_key(image) {
            let (done, receiver) = watch::channel(None);
            let (engine, name) = (self.engine.clone(), image.to_owned());
            tokio::spawn(async move {
                let pulled = engine.pull(&name, PULL_LIMIT).await;
                if let Err(e) = &pulled {
                    tracing::warn!(image = %name, error = %e, "pull failed");
                }
                let _ = done.send(Some(pulled.is_ok()));
            });
            self.pulls.insert(image.to_owned(), receiver);
        }
        Ok(None)
    }

    fn pull_status(&self, image: &str) -> StatusCode {
        match self.pulls.get(image).and_then(|p| *p.borrow()) {
            Some(false) => StatusCode::ImageMissing,
            _ => StatusCode::PullingImage,
        }
    }

    /// The GPUs held by workloads whose containers run, and by which.
    fn gpus_in_use(
        wanted: &[Wanted],
        ours: &BTreeMap<String, Vec<ContainerSummary>>,
    ) -> HashMap<String, String> {
        let mut busy = HashMap::new();
        for w in wanted {
            let runs = ours
                .get(&w.workload)
                .is_some_and(|containers| containers.iter().any(ContainerSummary::running));
            if runs {
                let resources = w.spec.resources.clone().unwrap_or_default();
                for gpu in resources.device_uuids {
                    busy.insert(gpu, w.workload.clone());
                }
            }
        }
        busy
    }
}

fn of_attempt(c: &ContainerSummary, attempt: u32) -> bool {
    c.labels.get(LABEL_ATTEMPT) == Some(&attempt.to_string())
}

/// Which existing container of the attempt is adopted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Adopt {
    /// One made with the sandbox the spec makes now; any other is stopped as changed.
    SameSandbox,
    /// The one there, as it was made (its class or image left the catalog).
    AsMade,
}
