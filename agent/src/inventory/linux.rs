//! A Linux machine's memory and hostname, read from `/proc` and its cgroup.

use std::io::ErrorKind;
use std::path::Path;

use super::error::InventoryError;

pub(crate) const MEMINFO: &str = "/proc/meminfo";
pub(crate) const HOSTNAME: &str = "/proc/sys/kernel/hostname";
/// The memory limit of the agent's cgroup, where it runs in its own cgroup namespace (a
/// container); absent on a host.
pub(crate) const CGROUP_MEMORY_MAX: &str = "/sys/fs/cgroup/memory.max";

/// `MemTotal` from `/proc/meminfo`, in bytes.
pub fn parse_meminfo(text: &str) -> Result<u64, InventoryError> {
    for (index, line) in text.lines().enumerate() {
        let Some(value) = line.strip_prefix("MemTotal:") else {
            continue;
        };
        let bad = || InventoryError::bad_line(MEMINFO, index, line, "expected `MemTotal: <n> kB`");
        return match value.split_whitespace().collect::<Vec<_>>().as_slice() {
            [kib, "kB"] => kib
                .parse::<u64>()
                .ok()
                .and_then(|kib| kib.checked_mul(1024))
                .filter(|&bytes| bytes > 0)
                .ok_or_else(bad),
            _ => Err(bad()),
        };
    }
    Err(InventoryError::Missing {
        origin: MEMINFO,
        what: "MemTotal",
    })
}

/// A cgroup v2 `memory.max`: bytes, or `None` for `max` (no limit).
pub fn parse_cgroup_memory_max(text: &str) -> Result<Option<u64>, InventoryError> {
    match text.trim() {
        "max" => Ok(None),
        value => value.parse::<u64>().map(Some).map_err(|_| {
            InventoryError::bad_line(CGROUP_MEMORY_MAX, 0, text, "expected bytes or `max`")
        }),
    }
}

/// The memory the agent may use: the machine's, or less if its cgroup is limited.
pub(crate) async fn memory_bytes() -> Result<u64, InventoryError> {
    let total = parse_meminfo(&read(MEMINFO).await?)?;
    let limit = match tokio::fs::read_to_string(CGROUP_MEMORY_MAX).await {
        Ok(text) => parse_cgroup_memory_max(&text)?,
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(cause) => {
            return Err(InventoryError::Read {
                path: CGROUP_MEMORY_MAX.into(),
                cause,
            });
        }
    };
    Ok(limit.map_or(total, |limit| limit.min(total)))
}

pub(crate) async fn hostname() -> Result<String, InventoryError> {
    let name = read(HOSTNAME).await?.trim().to_owned();
    if name.is_empty() {
        return Err(InventoryError::Missing {
            origin: HOSTNAME,
            what: "the hostname",
        });
    }
    Ok(name)
}

async fn read(path: &str) -> Result<String, InventoryError> {
    tokio::fs::read_to_string(Path::new(path))
        .await
        .map_err(|cause| InventoryError::Read {
            path: path.into(),
            cause,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_without_a_good_mem_total_is_an_error_naming_it() {
        let err = parse_meminfo("MemFree: 1 kB\n").unwrap_err().to_string();
        assert_eq!(err, "/proc/meminfo does not say MemTotal");
        for bad in ["MemTotal: 16318412", "MemTotal: lots kB", "MemTotal: 16 MB"] {
            let text = format!("Active: 2 kB\n{bad}\n");
            let err = parse_meminfo(&text).unwrap_err().to_string();
            assert!(err.starts_with("/proc/meminfo, line 2: expected"), "{err}");
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn cgroup_memory_max_is_bytes_or_no_limit() {
        assert_eq!(parse_cgroup_memory_max("max\n").unwrap(), None);
        assert_eq!(
            parse_cgroup_memory_max("4294967296\n").unwrap(),
            Some(4 << 30)
        );
        let err = parse_cgroup_memory_max("4G\n").unwrap_err().to_string();
        assert!(
            err.contains("memory.max, line 1") && err.contains("4G"),
            "{err}"
        );
    }
}
