//! A cgroup per linux-native workload, made by a root agent before the workload starts: the
//! class's CPUs (a CFS quota), its memory with no swap, and the same PID limit as a container,
//! so a notebook can't take the machine from its siblings. It is also the one true list of the
//! workload's processes: every process the workload starts is in it and can't leave it (its
//! files are root's, and the sandbox has a cgroup namespace of its own), so the supervisor
//! adopts and stops the workload by its members, never by a process group ID the kernel may
//! have given to someone else.
//!
//! cgroup v2 (one hierarchy with the memory, cpu and pids controllers) or v1 (each controller
//! mounted apart, as on hybrid systems), under `<root>/einsora/<workload>`. Outside its own
//! subtree the agent writes only v2's root `cgroup.subtree_control`, enabling those controllers
//! for the root's children (systemd has them on already; where it hasn't, enabling `cpu` there
//! puts every top-level cgroup under the CPU controller's weights). Swap is kept at none where
//! the kernel accounts it (v1's `memory.memsw.*`, v2's `memory.swap.max`); a kernel without swap
//! accounting leaves a workload free to be swapped out. The first process joins by writing its
//! own PID into each of the cgroup's `cgroup.procs` before it runs anything of the workload's
//! (sandbox.rs).

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
        match self {
            Hierarchy::Unified(root) => Cgroup {
                main: root.join(PARENT).join(workload),
                others: Vec::new(),
            },
            Hierarchy::Legacy { root, .. } => Cgroup {
                main: legacy_dir(root, "memory", workload),
                others: ["cpu", "pids"]
                    .map(|c| legacy_dir(root, c, workload))
                    .to_vec(),
            },
        }
    }

    /// Makes the workload's cgroup with its class's limits, just before it starts. One left
    /// from an earlier start is emptied and made again, so nothing of that start remains in it
    /// and no limit of it carries over.
    pub fn make(&self, workload: &str, limits: Limits) -> Result<Cgroup, CgroupError> {
        self.hand_down()?;
        let cgroup = self.of(workload);
        cgroup.kill_members();
        cgroup.remove()?;
        for dir in cgroup.dirs() {
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
                let dir = &cgroup.main;
                write(dir, "cpu.max", &format!("{quota} {CPU_PERIOD_US}"))?;
                if limits.memory_bytes > 0 {
                    write(dir, "memory.max", &memory)?;
                    write_if_there(dir, "memory.swap.max", "0")?;
                }
                write(dir, "pids.max", &pids)?;
            }
            Hierarchy::Legacy { root, swap } => {
                let memory_dir = &cgroup.main;
                let cpu_dir = legacy_dir(root, "cpu", workload);
                let pids_dir = legacy_dir(root, "pids", workload);
                if limits.memory_bytes > 0 {
                    write(memory_dir, "memory.limit_in_bytes", &memory)?;
                    if *swap {
                        // Memory and swap together no more than memory alone: no swap.
                        write(memory_dir, "memory.memsw.limit_in_bytes", &memory)?;
                    }
                }
                write(&cpu_dir, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
                write(&cpu_dir, "cpu.cfs_quota_us", &quota.to_string())?;
                write(&pids_dir, "pids.max", &pids)?;
            }
        }
        Ok(cgroup)
    }
}

/// v1: the workload's directory in `controller`'s hierarchy.
fn legacy_dir(root: &Path, controller: &str, workload: &str) -> PathBuf {
    root.join(controller).join(PARENT).join(workload)
}

/// One workload's cgroup: a directory per hierarchy it is in (one on v2; on v1 the memory
/// hierarchy's, and the cpu and pids ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    /// Where its members are read from.
    main: PathBuf,
    others: Vec<PathBuf>,
}

impl Cgroup {
    fn dirs(&self) -> impl Iterator<Item = &PathBuf> {
        std::iter::once(&self.main).chain(&self.others)
    }

    /// The files its first process writes its PID into, to join it.
    pub fn joins(&self) -> Vec<PathBuf> {
        self.dirs().map(|d| d.join("cgroup.procs")).collect()
    }

    /// The file the kernel lists its processes in.
    pub fn members(&self) -> PathBuf {
        self.main.join("cgroup.procs")
    }

    /// Removes it; one already gone is removed. Fails while processes are in it.
    pub fn remove(&self) -> Result<(), CgroupError> {
        for dir in self.dirs() {
            match std::fs::remove_dir(dir) {
                Err(e) if e.kind() != ErrorKind::NotFound => return Err(at(dir)(e)),
                _ => {}
            }
        }
        Ok(())
    }

    /// SIGKILL to whatever is in it, in any of its hierarchies: what an earlier start left
    /// behind. Blocking (up to a second while the kernel reaps them).
    fn kill_members(&self) {
        use crate::drivers::process::{members, signal_members};
        for procs in self.joins() {
            signal_members(&procs, rustix::process::Signal::KILL);
        }
        let empty = |procs: &PathBuf| members(procs).is_ok_and(|left| left.is_empty());
        for _ in 0..50 {
            if self.joins().iter().all(empty) {
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
