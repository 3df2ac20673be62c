//! The process supervisor the native drivers build on: each workload runs as its own process
//! group with its output in a log file; the group leader's PID and start time are recorded, so
//! an agent that restarts adopts the workload again, and a PID the kernel reused for another
//! process is never taken for it; stopping ends the whole group, gracefully first. A workload
//! started in a cgroup of its own (`Launch::members`) is known by the cgroup's members instead
//! of its group: what it runs can't leave the cgroup, and its ID is never reused by another.

mod proc_table;
mod record;

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use record::Record;
use rustix::process::{Pid, Signal, kill_process, kill_process_group};

/// How often a stopping group is looked at.
const STOP_POLL: Duration = Duration::from_millis(20);
/// How long a group has to vanish after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("{0:?} is not a workload ID the supervisor accepts")]
    BadId(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("can't start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{0} still has processes after SIGKILL")]
    Unkillable(String),
}

impl ProcessError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        ProcessError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// What to run for a workload.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The whole environment: nothing of the agent's leaks in.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Where its standard output and error go (appended, owner-only).
    pub log: PathBuf,
    /// Its program makes a session of its own (`setsid(1)`), so it has no controlling
    /// terminal: the supervisor then doesn't make it a process group first (a group leader
    /// can't start a session), and the session's group is the one it keeps.
    pub own_session: bool,
    /// Where the kernel lists every process of the workload (its cgroup's `cgroup.procs`, which
    /// its program joins first), if it has one: then that list alone says whether it runs once
    /// its first process has ended, and what a stop signals.
    pub members: Option<PathBuf>,
}

/// A workload's processes, running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub pid: u32,
    pub group: u32,
    pub members: Option<PathBuf>,
}

impl Running {
    /// Whether any of its processes is left: its cgroup's members where it has one, else its
    /// process group's. `Err` when the kernel couldn't be asked, never taken for "none".
    fn any_left(&self) -> std::io::Result<bool> {
        match &self.members {
            Some(file) => Ok(!members(file)?.is_empty()),
            None => Ok(!proc_table::group_members(self.group).is_empty()),
        }
    }

    fn signal(&self, signal: Signal) {
        match &self.members {
            Some(file) => signal_members(file, signal),
            None => signal_group(self.group, signal),
        }
    }
}

#[derive(Debug)]
pub struct Supervisor {
    dir: PathBuf,
}

impl Supervisor {
    /// Keeps its records in `dir` (created owner-only if missing).
    pub fn new(dir: &Path) -> Result<Self, ProcessError> {
        std::fs::create_dir_all(dir).map_err(|e| ProcessError::io(dir, e))?;
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(|e| ProcessError::io(dir, e))?;
        Ok(Supervisor {
            dir: dir.to_owned(),
        })
    }

    /// The workload if it still runs, in this boot: its recorded leader is alive with the
    /// recorded start time; or, for a workload in a cgroup, any process is in its cgroup
    /// (whatever became of the leader's PID); or, for one without, the leader has exited and
    /// members of its group remain (a PID isn't reused while it names a live group). A record
    /// that no longer matches (everything ended, or the leader's PID now belongs to another
    /// process) is dropped. The kernel failing to answer is an error, never taken for "gone".
    pub fn find(&self, id: &str) -> Result<Option<Running>, ProcessError> {
        let path = record::path(&self.dir, id)?;
        let Some(rec) = record::read(&path)? else {
            return Ok(None);
        };
        let proc = |e| ProcessError::io(Path::new("/proc"), e);
        let running = Running {
            pid: rec.pid,
            group: rec.group,
            members: rec.members.clone(),
        };
        let left = |r: &Running| {
            r.any_left().map_err(|e| {
                let listed = r.members.as_deref().unwrap_or(Path::new("/proc"));
                ProcessError::io(listed, e)
            })
        };
        let alive = rec.boot == proc_table::boot_id().map_err(proc)?
            && match (proc_table::info(rec.pid).map_err(proc)?, &running.members) {
                (Some(now), _) if now.started == rec.started && now.group == rec.group => true,
                (_, Some(_)) | (None, None) => left(&running)?,
                (Some(_), None) => false,
            };
        if alive {
            return Ok(Some(running));
        }
        record::remove(&path)?;
        Ok(None)
    }

    /// Starts the workload as a new process group, or adopts the one already running.
    pub fn start(&self, id: &str, launch: &Launch) -> Result<Running, ProcessError> {
        if let Some(running) = self.find(id)? {
            return Ok(running);
        }
        let path = record::path(&self.dir, id)?;
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&launch.log)
            .map_err(|e| ProcessError::io(&launch.log, e))?;
        let err_log = log
            .try_clone()
            .map_err(|e| ProcessError::io(&launch.log, e))?;
        let mut command = Command::new(&launch.program);
        if !launch.own_session {
            command.process_group(0);
        }
        let mut child = command
            .args(&launch.args)
            .env_clear()
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&launch.cwd)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            .spawn()
            .map_err(|source| ProcessError::Spawn {
                program: launch.program.display().to_string(),
                source,
            })?;
        let pid = child.id();
        // A workload that can't be recorded must not run unrecorded: it would be started again.
        let recorded = proc_table::info(pid)
            .and_then(|info| Ok((info, proc_table::boot_id()?)))
            .map_err(|e| ProcessError::io(Path::new("/proc"), e))
            .and_then(|(info, boot)| {
                let started = info.map_or(0, |i| i.started);
                record::write(
                    &path,
                    &Record {
                        pid,
                        started,
                        group: pid,
                        boot,
                        members: launch.members.clone(),
                    },
                )
            });
        if let Err(e) = recorded {
            // The process itself, by its handle (it may not have made its group or session
            // yet), then whatever of its group there is.
            let _ = child.kill();
            let _ = child.wait();
            signal_group(pid, Signal::KILL);
            return Err(e);
        }
        // Reaped when it ends, so it never lingers as a zombie of this agent.
        std::thread::spawn(move || child.wait());
        Ok(Running {
            pid,
            group: pid,
            members: launch.members.clone(),
        })
    }

    /// The workloads it has records of, running or not.
    pub fn ids(&self) -> Result<Vec<String>, ProcessError> {
        let entries = std::fs::read_dir(&self.dir).map_err(|e| ProcessError::io(&self.dir, e))?;
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| ProcessError::io(&self.dir, e))?;
            let name = entry.file_name();
            let id = name.to_str().and_then(|n| n.strip_suffix(".json"));
            if let Some(id) = id.filter(|id| record::path(&self.dir, id).is_ok()) {
                ids.push(id.to_owned());
            }
        }
        Ok(ids)
    }

    /// Ends all the workload's processes (its cgroup's, or its process group's): SIGTERM, then
    /// SIGKILL to whatever is left after `grace`. A workload not running (or whose PID another
    /// process now has) is left alone.
    pub async fn stop(&self, id: &str, grace: Duration) -> Result<(), ProcessError> {
        let path = record::path(&self.dir, id)?;
        let Some(running) = self.find(id)? else {
            return Ok(());
        };
        running.signal(Signal::TERM);
        if !gone_within(&running, grace).await {
            running.signal(Signal::KILL);
            if !gone_within(&running, KILL_WAIT).await {
                let what = match &running.members {
                    Some(file) => format!("the cgroup listed in {}", file.display()),
                    None => format!("process group {}", running.group),
                };
                return Err(ProcessError::Unkillable(what));
            }
        }
        record::remove(&path)
    }
}

/// The PIDs a cgroup's `cgroup.procs` lists; none once the cgroup is gone.
pub fn members(procs: &Path) -> std::io::Result<Vec<u32>> {
    match std::fs::read_to_string(procs) {
        Ok(text) => Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Signals every process `procs` lists. Each is first held by a pidfd and then found still
/// listed, so a PID a member freed meanwhile and another process took is never signalled.
pub fn signal_members(procs: &Path, signal: Signal) {
    for pid in members(procs).unwrap_or_default() {
        let Some(target) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            continue;
        };
        #[cfg(target_os = "linux")]
        let held = match rustix::process::pidfd_open(target, rustix::process::PidfdFlags::empty()) {
            Ok(fd) => Some(fd),
            // A kernel before 5.3 has no pidfds: signalled by its PID.
            Err(rustix::io::Errno::NOSYS) => None,
            // It ended meanwhile.
            Err(_) => continue,
        };
        // Pidfds are Linux's (as are the cgroups whose members these are): signalled by its PID.
        #[cfg(not(target_os = "linux"))]
        let held: Option<std::convert::Infallible> = None;
        if !members(procs).is_ok_and(|now| now.contains(&pid)) {
            continue;
        }
        let sent = match held {
            #[cfg(target_os = "linux")]
            Some(fd) => rustix::process::pidfd_send_signal(&fd, signal),
            None => kill_process(target, signal),
        };
        if let Err(e) = sent {
            tracing::debug!(pid, error = %e, "signalling a workload's process");
        }
    }
}

fn signal_group(group: u32, signal: Signal) {
    let pid = i32::try_from(group).ok().and_then(Pid::from_raw);
    if let Some(pid) = pid
        && let Err(e) = kill_process_group(pid, signal)
    {
        tracing::debug!(group, error = %e, "signalling the process group");
    }
}

async fn gone_within(running: &Running, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if running.any_left().is_ok_and(|left| !left) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(STOP_POLL).await;
    }
}
