//! What the kernel says about a process: whether it lives, when it started (so a reused PID is
//! never taken for the process recorded), and its process group.

/// A live (not zombie) process as the kernel describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessInfo {
    /// When it started, in the kernel's ticks since boot: with the PID, what identifies it.
    pub started: u64,
    pub group: u32,
}

/// `Ok(None)` when there is no such process, or only its zombie; `Err` when the kernel
/// couldn't be asked (too many open files…), which is never taken for "gone".
#[cfg(target_os = "linux")]
pub fn info(pid: u32) -> std::io::Result<Option<ProcessInfo>> {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => Ok(parse_stat(&stat)),
        // ESRCH: it ended while being read.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(3) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Identifies this boot, so a record from before a reboot is never taken for a live process.
#[cfg(target_os = "linux")]
pub fn boot_id() -> std::io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?
        .trim()
        .to_owned())
}

/// Identifies this boot, so a record from before a reboot is never taken for a live process.
#[cfg(not(target_os = "linux"))]
pub fn boot_id() -> std::io::Result<String> {
    let out = std::process::Command::new("sysctl")
        .args(["-n", "kern.boottime"])
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `Ok(None)` when there is no such process, or only its zombie.
#[cfg(not(target_os = "linux"))]
pub fn info(pid: u32) -> std::io::Result<Option<ProcessInfo>> {
    // `ps` is the portable reader elsewhere (macOS): the start time in seconds is identity
    // enough, since a PID is reused only after wrapping around.
    let out = std::process::Command::new("ps")
        .args(["-o", "stat=,pgid=,lstart=", "-p", &pid.to_string()])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace();
    let (Some(state), Some(group)) = (fields.next(), fields.next()) else {
        return Ok(None);
    };
    let Ok(group) = group.parse() else {
        return Ok(None);
    };
    let started: String = fields.collect::<Vec<_>>().join(" ");
    if state.starts_with('Z') || started.is_empty() {
        return Ok(None);
    }
    let started = started
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    Ok(Some(ProcessInfo { started, group }))
}

/// Fields of /proc/<pid>/stat; the command name may hold spaces and parentheses, so the fields
/// are counted from its last ')'.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_stat(stat: &str) -> Option<ProcessInfo> {
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // fields[0] is field 3 of proc(5): the state; the group is field 5, the start time 22.
    if fields.first()? == &"Z" {
        return None;
    }
    Some(ProcessInfo {
        group: fields.get(2)?.parse().ok()?,
        started: fields.get(19)?.parse().ok()?,
    })
}

/// Live processes of process group `group`.
#[cfg(target_os = "linux")]
pub fn group_members(group: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| info(*pid).ok().flatten().is_some_and(|i| i.group == group))
        .collect()
}

/// Live processes of process group `group`.
#[cfg(not(target_os = "linux"))]
pub fn group_members(group: u32) -> Vec<u32> {
    let out = std::process::Command::new("ps")
        .args(["-A", "-o", "pid=,pgid=,stat="])
        .output();
    let Ok(out) = out else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let pid = f.next()?.parse().ok()?;
            let pgid: u32 = f.next()?.parse().ok()?;
            let state = f.next()?;
            (pgid == group && !state.starts_with('Z')).then_some(pid)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_after_the_command_name() {
        let stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 \
                    987654 1000 100 18446744073709551615";
        assert_eq!(
            parse_stat(stat),
            Some(ProcessInfo {
                started: 987654,
                group: 4242
            })
        );
        let zombie = "4242 (gone) Z 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        assert_eq!(parse_stat(zombie), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_with_a_start_time() {
        let me = info(std::process::id())
            .unwrap()
            .expect("this process lives");
        assert!(me.started > 0 || cfg!(not(target_os = "linux")));
    }
}
