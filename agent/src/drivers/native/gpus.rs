//! Which device node is which GPU: the NVIDIA driver's own table under
//! `/proc/driver/nvidia/gpus/<PCI address>/information` ("GPU UUID", "Device Minor"), so a
//! sandbox gets `/dev/nvidia<minor>` for exactly its reserved GPUs and no other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The driver's table on this machine.
pub const PROC_GPUS: &str = "/proc/driver/nvidia/gpus";
/// The nodes every CUDA process needs besides its GPUs' own (those that exist are given).
pub const SHARED_NODES: &[&str] = &[
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
];

/// The shared nodes this machine has.
pub fn shared_nodes() -> impl Iterator<Item = PathBuf> {
    SHARED_NODES
        .iter()
        .map(PathBuf::from)
        .filter(|node| node.exists())
}

/// Each GPU's device node by UUID, as the table under `dir` lists them. A directory that isn't
/// there (no NVIDIA driver) lists none; an entry that doesn't read is left out.
pub fn device_nodes(dir: &Path) -> HashMap<String, PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return HashMap::new();
    };
    let mut nodes = HashMap::new();
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("information")) else {
            continue;
        };
        if let Some((uuid, minor)) = parse(&text) {
            nodes.insert(uuid, PathBuf::from(format!("/dev/nvidia{minor}")));
        }
    }
    nodes
}

fn parse(text: &str) -> Option<(String, u32)> {
    let field = |name: &str| {
        text.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_owned())
        })
    };
    let uuid = field("GPU UUID").filter(|u| u.starts_with("GPU-"))?;
    let minor = field("Device Minor")?.parse().ok()?;
    Some((uuid, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The driver's file in its format, written for an H100 (not captured on one: its other
    /// lines vary).
    const INFORMATION: &str = "Model: \t\t NVIDIA H100 80GB HBM3\n\
        IRQ:   \t\t 0\n\
        GPU UUID: \t GPU-5b6a3c2e-8f1d-4e7a-9c0b-1d2e3f4a5b6c\n\
        Video BIOS: \t 96.00.99.00.01\n\
        Bus Type: \t PCIe\n\
        DMA Size: \t 52 bits\n\
        DMA Mask: \t 0xfffffffffffff\n\
        Bus Location: \t 0000:18:00.0\n\
        Device Minor: \t 3\n\
        GPU Excluded:\t No\n";

    #[test]
    fn each_gpu_is_its_own_minor_and_nothing_that_does_not_read_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let gpu = dir.path().join("0000:18:00.0");
        std::fs::create_dir(&gpu).unwrap();
        std::fs::write(gpu.join("information"), INFORMATION).unwrap();
        let odd = dir.path().join("0000:19:00.0");
        std::fs::create_dir(&odd).unwrap();
        std::fs::write(
            odd.join("information"),
            "GPU UUID: GPU-x\nDevice Minor: -1\n",
        )
        .unwrap();
        let nodes = device_nodes(dir.path());
        assert_eq!(nodes.len(), 1, "{nodes:?}");
        assert_eq!(
            nodes["GPU-5b6a3c2e-8f1d-4e7a-9c0b-1d2e3f4a5b6c"],
            PathBuf::from("/dev/nvidia3")
        );
        assert!(device_nodes(&dir.path().join("absent")).is_empty());
    }
}
