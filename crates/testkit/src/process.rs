//! The host's processes, as `/proc` shows them: what a test checks was started, reparented or
//! left behind. Linux only, like the tests that ask.

use std::path::Path;

/// One process, from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    /// `R`, `S`, `Z`, …
    pub state: char,
    /// Its process group.
    pub group: u32,
}

impl Proc {
    /// `None` once it is gone.
    pub fn of(pid: u32) -> Option<Proc> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses: the fields follow its last ')'.
        let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let ppid = fields.next()?.parse().ok()?;
        let group = fields.next()?.parse().ok()?;
        Some(Proc {
            pid,
            ppid,
            state,
            group,
        })
    }

    /// Running, or able to: not a zombie.
    pub fn live(&self) -> bool {
        self.state != 'Z'
    }

    /// Its `index`th argument (0 is the program).
    pub fn argument(&self, index: usize) -> Option<String> {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.pid)).ok()?;
        let arg = cmdline.split(|b| *b == 0).nth(index)?;
        Some(String::from_utf8_lossy(arg).into_owned())
    }

    /// Whether its environment holds `var` (`NAME=value`).
    pub fn has_env(&self, var: &str) -> bool {
        std::fs::read(format!("/proc/{}/environ", self.pid))
            .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == var.as_bytes()))
    }

    /// A field of its `/proc/<pid>/status` ([`status_field`]).
    pub fn status(&self, field: &str) -> Option<String> {
        status_field(&self.pid.to_string(), field)
    }
}

/// A field of `/proc/<pid>/status` (`Uid`, `Gid`, `CapEff`, …), its value trimmed; `pid` may be
/// `self`.
pub fn status_field(pid: &str, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        (name == field).then(|| value.trim().to_owned())
    })
}

/// Every process there is now.
pub fn processes() -> impl Iterator<Item = Proc> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| Proc::of(entry.ok()?.file_name().to_str()?.parse().ok()?))
}

/// The live processes whose parent is `parent`.
pub fn children_of(parent: u32) -> Vec<Proc> {
    processes()
        .filter(|p| p.ppid == parent && p.live())
        .collect()
}

/// The live processes whose environment holds `EINSORA_DATA_DIR=<dir>`: every process an
/// installation on `dir` started, wherever it was reparented.
pub fn processes_on(dir: &Path) -> Vec<u32> {
    let wanted = format!("EINSORA_DATA_DIR={}", dir.display());
    processes()
        .filter(|p| p.live() && p.has_env(&wanted))
        .map(|p| p.pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_seen_with_its_parent_group_and_arguments() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = std::process::id();
        let seen = children_of(me);
        let it = seen.iter().find(|p| p.pid == child.id()).unwrap();
        assert_eq!(it.ppid, me);
        assert_eq!(it.argument(1).as_deref(), Some("30"));
        assert_eq!(Proc::of(me).unwrap().group, it.group);
        assert!(it.status("Uid").is_some());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(Proc::of(child.id()).is_none());
    }
}
