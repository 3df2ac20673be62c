//! The linux-native driver's worker: applies the desired state on every change and every
//! second (a workload's process is found by the supervisor's records, so an agent restart
//! adopts it), and keeps what it saw for the sync loop.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::agent::{Mode, StatusCode};
use tokio::sync::{Notify, watch};

use super::cgroup::{self, Hierarchy, Limits};
use super::egress::Egress;
use super::envs::{EnvState, Envs, Interpreter};
use super::platform::Platform;
use super::sandbox::{Command, Sandbox};
use super::{NativeConfig, gpus};
use crate::drivers::local::contract::Serves;
use crate::drivers::local::dirs::Places;
use crate::drivers::local::disk::Disks;
use crate::drivers::local::fence::EgressSetting;
use crate::drivers::local::output::{Cursors, Outbox};
use crate::drivers::local::prepare::{Preparation, Unprepared};
use crate::drivers::local::probe::{Probe, answers};
use crate::drivers::local::records::{Record, Records};
use crate::drivers::local::{STOP_GRACE, Seen, SeenMap, Wanted};
use crate::drivers::macos::profile::MACOS_LINKS;
use crate::drivers::macos::sandbox::{self as mac, MacSandbox};
use crate::drivers::process::{Launch, Running, Supervisor};

/// What the worker is made from (again, when it restarts after a panic).
#[derive(Clone)]
pub struct Parts {
    pub config: NativeConfig,
    pub operator: Option<Interpreter>,
    pub launchers: PathBuf,
    pub seen: SeenMap,
    pub changed: Arc<Notify>,
    pub nvidia: bool,
    /// Takes what workloads print.
    pub outbox: Outbox,
}

/// The worker, started afresh (its records read again from disk) whenever it panics.
pub async fn supervised(
    parts: Parts,
    wanted: watch::Receiver<Option<Vec<Wanted>>>,
    restarts: Arc<AtomicU32>,
) {
    let counter = Arc::clone(&restarts);
    let name = parts.config.platform.name();
    einsora_runtime::panics::restart_on_panic(name, &counter, || {
        parts.changed.notify_one();
        let mut wanted = wanted.clone();
        wanted.mark_changed();
        let parts = parts.clone();
        async move {
            match Worker::new(parts) {
                Ok(worker) => worker.run(wanted).await,
                Err(e) => {
                    tracing::error!(driver = name, error = %e, "the driver can't keep its records")
                }
            }
        }
    })
    .await;
}

/// What one workload came to in a pass.
type Outcome = (StatusCode, Option<(String, String)>);

/// A workload's sandbox, on this driver's OS.
enum Confined {
    Linux(Sandbox),
    Macos(MacSandbox),
}

impl Confined {
    fn command(&self) -> Command {
        match self {
            Confined::Linux(s) => s.command(),
            Confined::Macos(s) => s.command(),
        }
    }

    fn fingerprint(&self) -> String {
        match self {
            Confined::Linux(s) => s.fingerprint(),
            Confined::Macos(s) => s.fingerprint(),
        }
    }

    /// Whether its command makes a session of its own (Linux's `setsid`); else the supervisor
    /// starts it in a process group of its own (macOS has no `setsid` program).
    fn own_session(&self) -> bool {
        matches!(self, Confined::Linux(_))
    }
}

struct Worker {
    parts: Parts,
    supervisor: Supervisor,
    records: Records,
    disks: Disks,
    envs: Envs,
    user: (u32, u32),
    logs: PathBuf,
    unprepared: Unprepared,
    egress: Egress,
    /// Where each workload's cgroup is made; `None`: they run without limits of their own.
    cgroups: Option<Hierarchy>,
    /// Where it is in each workload's output.
    cursors: Cursors,
}

impl Worker {
    fn new(parts: Parts) -> Result<Worker, crate::drivers::process::ProcessError> {
        let root = parts.config.state_dir.join(parts.config.platform.dir());
        let cgroups = match parts.config.platform {
            Platform::Linux => cgroups(),
            Platform::Macos(_) => None,
        };
        let supervisor = Supervisor::new(&root.join("processes"))?;
        let logs = root.join("logs");
        crate::drivers::local::dirs::agent_dir(&logs).map_err(|e| {
            crate::drivers::process::ProcessError::Io {
                path: logs.clone(),
                source: e,
            }
        })?;
        Ok(Worker {
            records: Records::open(&parts.config.state_dir, parts.config.platform.name()),
            disks: Disks::new(parts.config.disks.clone(), &parts.config.state_dir),
            envs: Envs::new(
                root.join("envs"),
                parts.config.platform.builder(),
                parts.config.wheels.clone(),
                parts.operator.clone(),
            ),
            user: parts.config.platform.user(),
            egress: Egress::new(
                parts.config.egress,
                parts.config.controllers.clone(),
                parts.config.egress_subnet,
            ),
            supervisor,
            logs,
            parts,
            unprepared: Unprepared::default(),
            cgroups,
            cursors: Cursors::default(),
        })
    }

    async fn run(mut self, mut wanted: watch::Receiver<Option<Vec<Wanted>>>) {
        let mut next = Duration::ZERO;
        loop {
            tokio::select! {
                changed = wanted.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(next) => {}
            }
            let Some(current) = wanted.borrow_and_update().clone() else {
                continue;
            };
            self.pass(&current).await;
            // An environment being built is polled as often: its workload starts once it is.
            let soon = [StatusCode::Starting, StatusCode::PullingImage];
            next = crate::drivers::local::next_pass(&self.parts.seen, &soon);
        }
    }

    async fn pass(&mut self, wanted: &[Wanted]) {
        // What runs, as the kernel says: when it can't say, nothing is decided this pass (a
        // workload never taken for gone, nor its GPUs for free).
        let mut running = HashMap::new();
        let ids = match self.supervisor.ids() {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "can't list the workloads' processes; trying again");
                return;
            }
        };
        for id in ids {
            match self.supervisor.find(&id) {
                Ok(Some(r)) => {
                    running.insert(id, r);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(workload = %id, error = %e, "can't tell whether it runs; trying again");
                    return;
                }
            }
        }
        // One it wasn't told about: stopped and kept, before anything new starts (its GPUs
        // aren't known here, so they are free only once it has stopped).
        let listed: Vec<&str> = wanted.iter().map(|w| w.workload.as_str()).collect();
        let unlisted: Vec<String> = running
            .keys()
            .filter(|id| !listed.contains(&id.as_str()))
            .cloned()
            .collect();
        for id in &unlisted {
            if self.stop(id).await != StatusCode::Stopped {
                return;
            }
            running.remove(id);
        }
        let busy = gpus_in_use(wanted, &running);
        let mut seen = BTreeMap::new();
        for w in wanted {
            let runs = running.remove(&w.workload);
            let ran = runs.is_some();
            let (code, target) = match w.mode {
                Mode::Run => self.run_one(w, runs, &busy).await,
                Mode::Park => (self.stop(&w.workload).await, None),
                Mode::Remove => (self.remove(w).await, None),
            };
            if w.mode != Mode::Remove {
                self.ship_output(w);
            } else {
                self.cursors.forget(&w.workload);
            }
            if ran {
                self.keep_log_bounded(&w.workload);
            }
            let s = Seen {
                attempt: w.attempt,
                mode: w.mode,
                code,
                target,
            };
            seen.insert(w.workload.clone(), s);
        }
        let mut current = self
            .parts
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *current != seen {
            *current = seen;
            self.parts.changed.notify_one();
        }
    }

    async fn run_one(
        &mut self,
        w: &Wanted,
        runs: Option<Running>,
        busy: &HashMap<String, String>,
    ) -> Outcome {
        let refused = |code| (code, None);
        let nvidia = w.spec.accelerator == Some(AcceleratorKind::Nvidia);
        if nvidia && !self.parts.nvidia {
            // A GPU request never silently becomes CPU.
            return refused(StatusCode::StartFailed);
        }
        let record = self.records.get(&w.workload);
        let places = self.places(&w.workload);
        let serves = w.serves(&places);
        let mut runs = runs;
        if runs.is_some() && !record.started(w.attempt) {
            // An earlier attempt's server: this attempt replaces it, once it has stopped.
            let stopped = self.stop(&w.workload).await;
            if stopped != StatusCode::Stopped {
                return refused(stopped);
            }
            runs = None;
        }
        if w.spec.retired {
            // Its class or runtime left the catalog: the server of this attempt keeps running
            // as it was started, and nothing new starts.
            return match runs {
                Some(_) => self.ready(&w.workload, &places, &serves, &record).await,
                None => refused(StatusCode::Exited),
            };
        }
        let Some(runtime) = self.parts.config.platform.runtime(&w.spec.runtime) else {
            return refused(StatusCode::ImageMissing);
        };
        if !record.started(w.attempt)
            && let Err(code) = self.unprepared.admit(&self.disks, w)
        {
            return refused(code);
        }
        let interpreter = match self.envs.ensure(runtime) {
            EnvState::Ready(interpreter) => interpreter,
            EnvState::Building => return refused(StatusCode::PullingImage),
            EnvState::Failed => return refused(StatusCode::ImageMissing),
        };
        let reserved = w.spec.resources.clone().unwrap_or_default().device_uuids;
        let cpus = w.spec.resources.as_ref().map_or(1, |r| r.cpus);
        // The driver's table is read only for a workload that has GPUs, on Linux. A Mac's one
        // GPU is there when its inventory lists it (`gpus_missing`).
        let nodes = match &self.parts.config.platform {
            Platform::Linux if !reserved.is_empty() => {
                gpus::device_nodes(Path::new(gpus::PROC_GPUS))
            }
            Platform::Linux => HashMap::new(),
            Platform::Macos(_) => reserved
                .iter()
                .map(|u| (u.clone(), PathBuf::new()))
                .collect(),
        };
        let mut confined = match &self.parts.config.platform {
            Platform::Linux => {
                let mut gpu_nodes = Vec::new();
                if !reserved.is_empty() {
                    gpu_nodes.extend(gpus::shared_nodes());
                    gpu_nodes.extend(reserved.iter().filter_map(|u| nodes.get(u).cloned()));
                }
                let netns = self.egress.netns(&w.workload, w.spec.egress).await;
                Confined::Linux(Sandbox {
                    bwrap: self.parts.config.bwrap.clone(),
                    serves: serves.clone(),
                    cpus,
                    interpreter,
                    launcher: runtime.launcher.0,
                    launchers: self.parts.launchers.clone(),
                    run_dir: places.run.clone(),
                    token_file: places.secret.join(serves.token_name()),
                    gpus: reserved.clone(),
                    gpu_nodes,
                    user: rustix::process::geteuid().is_root().then_some(self.user),
                    netns,
                    cgroup: self
                        .cgroups
                        .as_ref()
                        .map(|h| h.of(&w.workload).joins())
                        .unwrap_or_default(),
                })
            }
            Platform::Macos(tools) => {
                let request = mac::Request {
                    sandbox_exec: &tools.sandbox_exec,
                    places: &places,
                    serves: &serves,
                    cpus,
                    interpreter: &interpreter,
                    launchers: &self.parts.launchers,
                    launcher: runtime.launcher.0,
                    profiles: &self.profiles(),
                    workload: &w.workload,
                    gpu: !reserved.is_empty(),
                    outbound: w.spec.egress && self.parts.config.egress == EgressSetting::Auto,
                    links: if tools.standin { &[] } else { MACOS_LINKS },
                };
                match MacSandbox::new(&request) {
                    Ok(sandbox) => Confined::Macos(sandbox),
                    Err(e) => {
                        tracing::warn!(workload = %w.workload, error = %e, "its sandbox can't be written; not starting");
                        return refused(StatusCode::StartFailed);
                    }
                }
            }
        };
        let mut fingerprint = confined.fingerprint();
        if runs.is_some() {
            if record.fingerprint.as_deref() != Some(&fingerprint) {
                tracing::warn!(workload = %w.workload, "its sandbox changed; stopping it");
                self.stop(&w.workload).await;
                return refused(StatusCode::SandboxChanged);
            }
            return self.ready(&w.workload, &places, &serves, &record).await;
        }
        if record.started(w.attempt) {
            // Started once already, and its server is gone: never started again.
            return refused(StatusCode::Exited);
        }
        let gone = reserved.iter().any(|u| !nodes.contains_key(u));
        if w.gpus_missing || gone {
            return refused(StatusCode::GpuMissing);
        }
        let held_by_another = |g: &String| busy.get(g).is_some_and(|by| *by != w.workload);
        if reserved.iter().any(held_by_another) {
            return refused(StatusCode::GpuBusy);
        }
        if let Confined::Linux(sandbox) = &mut confined
            && sandbox.netns.is_some()
            && let Err(e) = self.egress.provide(&w.workload).await
        {
            // Started without a network rather than not at all, as where the fence is down.
            tracing::warn!(workload = %w.workload, error = %e, "no outbound network for it: its network namespace can't be made");
            sandbox.netns = None;
            fingerprint = sandbox.fingerprint();
        }
        // A Mac's run directories' root is in every user's /private/tmp: checked to be the
        // agent's own before anything is made in it.
        if let Platform::Macos(tools) = &self.parts.config.platform
            && let Err(e) = mac::run_root(&tools.run_root)
        {
            tracing::warn!(workload = %w.workload, error = %e, "not starting");
            return refused(StatusCode::StartFailed);
        }
        let preparation = Preparation {
            disks: &self.disks,
            models_dir: self.parts.config.models_dir.as_deref(),
            user: self.user,
            places: &places,
            serves: &serves,
            record: &record,
        };
        let next = match self
            .unprepared
            .prepare(preparation, w, Some(fingerprint))
            .await
        {
            Ok(next) => next,
            Err(code) => return refused(code),
        };
        let log_room = self.disks.log_bytes().saturating_mul(2);
        if let Err(code) =
            self.disks
                .provide_log_dir(&w.workload, &self.log_dir(&w.workload), log_room)
        {
            return refused(code);
        }
        let limits = Limits {
            cpus,
            memory_bytes: w.spec.resources.as_ref().map_or(0, |r| r.memory_bytes),
        };
        let made = match self.cgroups.clone() {
            None => None,
            // Off the async threads: emptying a cgroup left from before waits for the kernel.
            Some(h) => {
                let id = w.workload.clone();
                let making = tokio::task::spawn_blocking(move || h.make(&id, limits));
                Some(
                    making
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|made| made.map_err(|e| e.to_string())),
                )
            }
        };
        let members = match made {
            None => None,
            Some(Ok(cgroup)) => Some(cgroup.members()),
            Some(Err(e)) => {
                // Never started without the limits its sandbox says it has.
                tracing::warn!(workload = %w.workload, error = %e, "can't make its cgroup; not starting");
                return refused(StatusCode::StartFailed);
            }
        };
        if let Confined::Macos(sandbox) = &confined
            && let Err(e) = crate::drivers::local::dirs::private_dir(&places.home, self.user)
                .and_then(|()| sandbox.write_profile())
        {
            tracing::warn!(workload = %w.workload, error = %e, "can't write its sandbox; not starting");
            return refused(StatusCode::StartFailed);
        }
        if let Err(e) = self.records.set(&w.workload, next) {
            tracing::warn!(error = %e, "can't record a start; not starting");
            return refused(StatusCode::StartFailed);
        }
        let command = confined.command();
        let launch = Launch {
            program: command.program,
            args: command.args,
            env: command.env,
            cwd: command.cwd,
            log: self.log(&w.workload),
            own_session: confined.own_session(),
            members,
        };
        match self.supervisor.start(&w.workload, &launch) {
            Ok(_) => {
                tracing::info!(workload = %w.workload, attempt = w.attempt, "process started");
                refused(StatusCode::Starting)
            }
            Err(e) => {
                tracing::warn!(workload = %w.workload, error = %e, "can't start its process");
                refused(StatusCode::StartFailed)
            }
        }
    }

    /// A running server: ready once it answers, on its own socket, the token the agent keeps.
    async fn ready(
        &self,
        workload: &str,
        places: &Places,
        serves: &Serves,
        record: &Record,
    ) -> Outcome {
        let Some(token) = record.token.as_deref() else {
            return (StatusCode::SandboxChanged, None);
        };
        let socket = places.run.join(serves.socket_name());
        match answers(&socket, serves, token).await {
            Probe::Answered => {
                let target = (socket.display().to_string(), token.to_owned());
                (StatusCode::Ready, Some(target))
            }
            Probe::NotYet => (StatusCode::Starting, None),
            Probe::Tampered(why) => {
                tracing::warn!(socket = %socket.display(), %why, "its socket was tampered with; failing it");
                // Killed before it is reported failed: a connection the access proxy keeps to
                // its server (`kept.rs`) dies with it, so nothing reaches a failed workload.
                if let Err(e) = self.supervisor.stop(workload, Duration::ZERO).await {
                    tracing::warn!(%workload, error = %e, "can't kill its processes yet");
                }
                (StatusCode::SocketTampered, None)
            }
        }
    }

    /// Stops its processes, then deletes its cgroup and its network namespace, if it has them.
    async fn stop(&self, id: &str) -> StatusCode {
        match self.supervisor.stop(id, STOP_GRACE).await {
            Ok(()) => {
                if let Some(Err(e)) = self.cgroups.as_ref().map(|h| h.of(id).remove()) {
                    tracing::debug!(workload = %id, error = %e, "its cgroup stays until it next stops");
                }
                if let Err(e) = self.egress.release(id).await {
                    tracing::warn!(workload = %id, error = %e, "can't delete its network namespace; trying again when it next stops");
                }
                StatusCode::Stopped
            }
            Err(e) => {
                tracing::warn!(workload = %id, error = %e, "can't stop its process yet");
                StatusCode::Stopping
            }
        }
    }

    async fn remove(&mut self, w: &Wanted) -> StatusCode {
        if self.stop(&w.workload).await != StatusCode::Stopped {
            return StatusCode::Stopping;
        }
        let places = self.places(&w.workload);
        let logs = self.log_dir(&w.workload);
        let removed = self
            .disks
            .release(&w.workload, &places.run, &places.data)
            .and_then(|()| self.disks.release_log_dir(&logs))
            .and_then(|()| places.remove_all())
            .and_then(|()| remove_file(&self.profiles().join(format!("{}.sb", w.workload))))
            .and_then(|()| match std::fs::remove_dir_all(&logs) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            })
            .and_then(|()| self.records.forget(&w.workload));
        if let Err(e) = removed {
            tracing::warn!(workload = %w.workload, error = %e, "can't delete its data yet");
            return StatusCode::Stopping;
        }
        StatusCode::Removed
    }

    /// Offers what it printed since it was last read (to the end of its log, within a pass's
    /// read limit), its token removed.
    fn ship_output(&mut self, w: &Wanted) {
        let token = self.records.get(&w.workload).token;
        let dir = self.log_dir(&w.workload);
        let outbox = &self.parts.outbox;
        super::output::ship(&dir, outbox, &mut self.cursors, w, token.as_deref());
    }

    fn places(&self, id: &str) -> Places {
        self.parts
            .config
            .platform
            .places(&self.parts.config.state_dir, id)
    }

    /// Where a Mac's sandbox profiles are written: the agent's own.
    fn profiles(&self) -> PathBuf {
        let dir = self.parts.config.platform.dir();
        self.parts.config.state_dir.join(dir).join("profiles")
    }

    /// Its output's directory, the agent's own (never one the workload can write).
    fn log_dir(&self, id: &str) -> PathBuf {
        self.logs.join(id)
    }

    fn log(&self, id: &str) -> PathBuf {
        self.log_dir(id).join(super::output::LOG)
    }

    /// Its output keeps a bounded tail, as a container's does: past half the log limit, its
    /// last half is moved to `output.log.1` (replacing the one before) and the log starts
    /// again. Checked each pass; where the agent can mount, the directory is a tmpfs of twice
    /// the limit, so a workload that writes (or truncates, or allocates) faster fills only that.
    fn keep_log_bounded(&self, id: &str) {
        let dir = self.log_dir(id);
        let read_to = self.cursors.at(id);
        let rotated = super::output::keep_bounded(&dir, self.disks.log_bytes(), read_to);
        if let Err(e) = rotated {
            tracing::warn!(workload = %id, error = %e, "can't keep its log bounded");
        }
    }
}

/// The machine's cgroup hierarchy, where a root agent can make cgroups in it.
fn cgroups() -> Option<Hierarchy> {
    if !rustix::process::geteuid().is_root() {
        tracing::warn!(
            "the agent isn't root: linux-native workloads run without CPU, memory or PID limits of their own"
        );
        return None;
    }
    match Hierarchy::detect(Path::new(cgroup::ROOT)) {
        Ok(h) => Some(h),
        Err(why) => {
            tracing::warn!(%why, "linux-native workloads run without CPU, memory or PID limits of their own");
            None
        }
    }
}

fn remove_file(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The GPUs held by workloads whose processes run, and by which.
fn gpus_in_use(wanted: &[Wanted], running: &HashMap<String, Running>) -> HashMap<String, String> {
    let mut busy = HashMap::new();
    for w in wanted.iter().filter(|w| running.contains_key(&w.workload)) {
        for gpu in w.spec.resources.clone().unwrap_or_default().device_uuids {
            busy.insert(gpu, w.workload.clone());
        }
    }
    busy
}
