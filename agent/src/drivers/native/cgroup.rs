//! A cgroup per linux-native workload, made by a root agent before the workload starts: the
//! class's CPUs (a CFS quota), its memory with no swap, and the same PID limit as a container,
//! so a notebook can't take the machine from its siblings. It is also the one true list of the
//! workload's processes: every process the workload starts is in it and can't leave it (its
//! files are root's, and the sandbox has a cgroup namespace of its own), so the supervisor
//! adopts and stops the workload by its members, never by a process group ID the kernel may
//! have given to someone else.
//!
//! cgroup v2 (one hierarchy with the memory, cpu and pids controllers) or v1 (each controller
//! mounted apart, as on hybrid systems), under `<root>/einsora/<workload>`; nothing else of the
//! hierarchy is touched. The first process joins by writing its own PID into each of the
//! cgroup's `cgroup.procs` before it runs anything of the workload's (sandbox.rs).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::drivers::local::PIDS_LIMIT;

/// Where the kernel's cgroup hierarchies are mounted.
pub const ROOT: &str = "/sys/fs/cgroup";
/// The agent's own subtree, beside whatever else the machine runs.
const PARENT: &str = "einsora";
/// The controllers a workload is limited by.
const CONTROLLERS: [&str; 3] = ["memory", "cpu", "pids"];
/// CFS period: a CPU is this many microseconds of quota per period.
const CPU_PERIOD_US: u64 = 100_000;

#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct CgroupError {
    path: PathBuf,
    source: std::io::Error,
}

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError {
        path: path.to_owned(),
        source,
    }
}

/// What a workload's class gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub cpus: u32,
    pub memory_bytes: u64,
}

/// The cgroup hierarchy this machine has, as the agent may use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup v2 at this root.
    Unified(PathBuf),
    /// cgroup v1, each controller's hierarchy at `<root>/<controller>`; `swap`: whether swap
    /// is accounted (`memory.memsw.*`), so it can be kept at none.
    Legacy { root: PathBuf, swap: bool },
}

impl Hierarchy {
    /// The hierarchy at `root` with every controller a workload is limited by, if the agent
    /// can make cgroups there (it is root, and v2's controllers can be handed down to its
    /// subtree: they can't where the root is a container's cgroup that holds processes).
    pub fn detect(root: &Path) -> Result<Hierarchy, String> {
        let unified = root.join("cgroup.controllers");
        if let Ok(offered) = std::fs::read_to_string(&unified) {
            let offered: Vec<&str> = offered.split_whitespace().collect();
            if let Some(missing) = CONTROLLERS.iter().find(|c| !offered.contains(c)) {
                return Err(format!(
                    "cgroup v2 at {} lacks the {missing} controller",
                    root.display()
                ));
            }
            let hierarchy = Hierarchy::Unified(root.to_owned());
            hierarchy
                .hand_down()
                .map_err(|e| format!("can't hand cgroup controllers to its subtree: {e}"))?;
            return Ok(hierarchy);
        }
        if let Some(missing) = CONTROLLERS
            .iter()
            .find(|c| !root.join(c).join("cgroup.procs").exists())
        {
            return Err(format!(
                "no cgroup hierarchy at {} with the {missing} controller",
                root.display()
            ));
        }
        let swap = root.join("memory/memory.memsw.limit_in_bytes").exists();
        Ok(Hierarchy::Legacy {
            root: root.to_owned(),
            swap,
        })
    }

    /// v2: the controllers enabled for the agent's subtree and for each workload's cgroup in it.
    fn hand_down(&self) -> Result<(), CgroupError> {
        let Hierarchy::Unified(root) = self else {
            return Ok(());
        };
        let enable = CONTROLLERS.map(|c| format!("+{c}")).join(" ");
        let parent = root.join(PARENT);
        make_dir(&parent)?;
        for dir in [root.as_path(), parent.as_path()] {
            let control = dir.join("cgroup.subtree_control");
            std::fs::write(&control, &enable).map_err(at(&control))?;
        }
        Ok(())
    }

    /// The workload's cgroup (made or not).
    pub fn of(&self, workload: &str) -> Cgroup {
        let dirs = match self {
            Hierarchy::Unified(root) => vec![root.join(PARENT).join(workload)],
            Hierarchy::Legacy { root, .. } => CONTROLLERS
                .iter()
                .map(|c| root.join(c).join(PARENT).join(workload))
                .collect(),
        };
        Cgroup { dirs }
    }

    /// Makes the workload's cgroup with its class's limits, just before it starts. One left
    /// from an earlier start is emptied and made again, so nothing of that start remains in it
    /// and no limit of it carries over.
    pub fn make(&self, workload: &str, limits: Limits) -> Result<Cgroup, CgroupError> {
        self.hand_down()?;
        let cgroup = self.of(workload);
        cgroup.kill_members();
        cgroup.remove()?;
        for dir in &cgroup.dirs {
            // The agent's subtree first (v1 has one per controller).
            if let Some(parent) = dir.parent() {
                make_dir(parent)?;
            }
            make_dir(dir)?;
        }
        let quota = u64::from(limits.cpus.max(1)) * CPU_PERIOD_US;
        let memory = limits.memory_bytes.to_string();
        let pids = PIDS_LIMIT.to_string();
        match self {
            Hierarchy::Unified(_) => {
                let dir = &cgroup.dirs[0];
                write(dir, "cpu.max", &format!("{quota} {CPU_PERIOD_US}"))?;
                if limits.memory_bytes > 0 {
                    write(dir, "memory.max", &memory)?;
                    write_if_there(dir, "memory.swap.max", "0")?;
                }
                write(dir, "pids.max", &pids)?;
            }
            Hierarchy::Legacy { swap, .. } => {
                let (memory_dir, cpu_dir, pids_dir) =
                    (&cgroup.dirs[0], &cgroup.dirs[1], &cgroup.dirs[2]);
                if limits.memory_bytes > 0 {
                    write(memory_dir, "memory.limit_in_bytes", &memory)?;
                    if *swap {
                        // Memory and swap together no more than memory alone: no swap.
                        write(memory_dir, "memory.memsw.limit_in_bytes", &memory)?;
                    }
                }
                write(cpu_dir, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
                write(cpu_dir, "cpu.cfs_quota_us", &quota.to_string())?;
                write(pids_dir, "pids.max", &pids)?;
            }
        }
        Ok(cgroup)
    }
}

/// One workload's cgroup: a directory per hierarchy it is in (one on v2, one per controller on
/// v1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    dirs: Vec<PathBuf>,
}

impl Cgroup {
    /// The files its first process writes its PID into, to join it.
    pub fn joins(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// The file the kernel lists its processes in.
    pub fn members(&self) -> PathBuf {
        self.dirs[0].join("cgroup.procs")
    }

    /// Removes it; one already gone is removed. Fails while processes are in it.
    pub fn remove(&self) -> Result<(), CgroupError> {
        for dir in &self.dirs {
            match std::fs::remove_dir(dir) {
                Err(e) if e.kind() != ErrorKind::NotFound => return Err(at(dir)(e)),
                _ => {}
            }
        }
        Ok(())
    }

    /// SIGKILL to whatever is in it: what an earlier start left behind.
    fn kill_members(&self) {
        use crate::drivers::process::{members, signal};
        for pid in members(&self.members()).unwrap_or_default() {
            signal(pid, rustix::process::Signal::KILL);
        }
        // The kernel takes killed processes out of the cgroup as it reaps them.
        for _ in 0..50 {
            if members(&self.members()).is_ok_and(|left| left.is_empty()) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

fn make_dir(dir: &Path) -> Result<(), CgroupError> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != ErrorKind::AlreadyExists => Err(at(dir)(e)),
        _ => Ok(()),
    }
}

fn write(dir: &Path, file: &str, value: &str) -> Result<(), CgroupError> {
    let path = dir.join(file);
    std::fs::write(&path, value).map_err(at(&path))
}

/// For a file a kernel may not have (v2's swap accounting is a build option).
fn write_if_there(dir: &Path, file: &str, value: &str) -> Result<(), CgroupError> {
    if dir.join(file).exists() {
        write(dir, file, value)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
