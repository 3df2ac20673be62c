//! The inventory on nvidia-smi's answers replayed by a stand-in (1, 2 and 8 GPUs, MIG, a GPU
//! that vanishes) and on recorded `sysctl` and `/proc/meminfo` outputs, how the catalog
//! classes what it finds, and `collect` on the machine running the tests.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use einsora_agent::inventory::{
    APPLE_GPU_ID, Probe, collect, parse_meminfo, parse_nvidia_smi, parse_sysctl,
};
use einsora_core::accelerator::AcceleratorKind;
use einsora_core::catalog::Catalog;
use einsora_core::machine::Device;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// nvidia-smi's answers to the inventory's query, in the format it prints (written to that
/// format; none yet captured on a GPU machine: `scripts/gpu-check` saves one there).
const RECORDINGS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/inventory");

/// A stand-in `nvidia-smi` that prints what the file `answer` holds when it runs, so a test
/// can change the machine between reads; it refuses any query but the inventory's.
fn stand_in(dir: &Path, answer: &Path) -> Probe {
    let script = dir.join("nvidia-smi");
    let body = format!(
        "#!/bin/sh\n[ \"$1\" = --query-gpu=uuid,name,memory.total,mig.mode.current ] || {{ echo \"unexpected: $*\" >&2; exit 9; }}\ncat '{}'\n",
        answer.display()
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    Probe {
        nvidia_smi: script.to_str().unwrap().to_owned(),
        ..Probe::default()
    }
}

/// The GPUs the agent's inventory finds with the stand-in replaying `recording`.
async fn replayed(recording: &str) -> Vec<Device> {
    let dir = tempfile::tempdir().unwrap();
    let answer = dir.path().join("answer");
    std::fs::copy(Path::new(RECORDINGS).join(recording), &answer).unwrap();
    collect(&stand_in(dir.path(), &answer))
        .await
        .unwrap()
        .devices
}

fn classes(devices: &[Device]) -> Vec<String> {
    let catalog = Catalog::builtin();
    devices
        .iter()
        .map(|d| {
            let class = catalog.class_for_device_model(&d.model);
            class.map_or("none".to_owned(), |c| c.name().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn one_rtx_4090_is_one_device_of_the_4090_class() {
    let devices = replayed("nvidia-smi-1x-rtx-4090.csv").await;
    let [gpu] = devices.as_slice() else {
        panic!("expected one GPU, got {devices:?}");
    };
    assert_eq!(gpu.model, "NVIDIA GeForce RTX 4090");
    assert_eq!(gpu.uuid, "GPU-a3b9e1f0-5d27-4c8e-91b6-2f0d7e4c3a58");
    assert_eq!(gpu.memory_bytes, 24564 * MIB);
    assert_eq!(classes(&devices), ["rtx-4090-24gb"]);
}

#[tokio::test]
async fn two_h100s_are_two_devices_of_the_h100_class() {
    let devices = replayed("nvidia-smi-2x-h100.csv").await;
    let uuids: Vec<&str> = devices.iter().map(|d| d.uuid.as_str()).collect();
    assert_eq!(
        uuids,
        [
            "GPU-6c3c1e2a-9d0f-4a36-b0a2-5f1e8c7d9b10",
            "GPU-0e8f4b7d-2c41-4f5a-8e9b-3a6d1c2b7f44"
        ]
    );
    for device in &devices {
        assert_eq!(device.vendor, AcceleratorKind::Nvidia);
        assert_eq!(device.model, "NVIDIA H100 80GB HBM3");
        assert_eq!(device.memory_bytes, 81559 * MIB);
    }
    assert_eq!(classes(&devices), ["h100-80gb", "h100-80gb"]);
}

#[tokio::test]
async fn eight_h200s_are_eight_devices_each_its_own_uuid() {
    let devices = replayed("nvidia-smi-8x-h200.csv").await;
    assert_eq!(devices.len(), 8, "{devices:?}");
    let uuids: std::collections::HashSet<&str> = devices.iter().map(|d| d.uuid.as_str()).collect();
    assert_eq!(uuids.len(), 8, "no UUID twice");
    assert!(devices.iter().all(|d| d.memory_bytes == 143_771 * MIB));
    assert_eq!(classes(&devices), vec!["h200-141gb"; 8]);
}

/// A GPU in MIG mode can't be given out whole (Einsora doesn't give out MIG instances yet):
/// it is left out, and its sibling with MIG off is offered.
#[tokio::test]
async fn a_gpu_in_mig_mode_is_not_offered_whole() {
    let devices = replayed("nvidia-smi-2x-a100-one-mig.csv").await;
    let uuids: Vec<&str> = devices.iter().map(|d| d.uuid.as_str()).collect();
    assert_eq!(uuids, ["GPU-649dda6e-b49c-43dc-acbc-408cc5521660"]);
    assert_eq!(classes(&devices), ["a100-80gb"]);
    let parsed = parse_nvidia_smi(
        &std::fs::read_to_string(Path::new(RECORDINGS).join("nvidia-smi-2x-a100-one-mig.csv"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        parsed.in_mig_mode,
        ["GPU-f3a3c571-7476-4899-b5a3-adb3254a9493"]
    );
}

/// A GPU that falls off the bus is gone from the next read; a driver that stops answering
/// fails the read (the machine isn't offered as smaller), and one that sees no GPU is none.
#[tokio::test]
async fn a_gpu_that_vanishes_is_gone_from_the_next_read() {
    let dir = tempfile::tempdir().unwrap();
    let answer = dir.path().join("answer");
    let two =
        std::fs::read_to_string(Path::new(RECORDINGS).join("nvidia-smi-2x-h100.csv")).unwrap();
    std::fs::write(&answer, &two).unwrap();
    let probe = stand_in(dir.path(), &answer);
    assert_eq!(collect(&probe).await.unwrap().devices.len(), 2);
    std::fs::write(&answer, two.lines().nth(1).unwrap()).unwrap();
    let left = collect(&probe).await.unwrap().devices;
    let uuids: Vec<&str> = left.iter().map(|d| d.uuid.as_str()).collect();
    assert_eq!(uuids, ["GPU-0e8f4b7d-2c41-4f5a-8e9b-3a6d1c2b7f44"]);
    std::fs::write(
        &answer,
        "Unable to determine the device handle for GPU0000:41:00.0: Unknown Error\n",
    )
    .unwrap();
    let err = collect(&probe).await.unwrap_err().to_string();
    assert!(
        err.contains("nvidia-smi") && err.contains("device handle"),
        "{err}"
    );
    std::fs::write(&answer, "No devices were found\n").unwrap();
    assert_eq!(collect(&probe).await.unwrap().devices, []);
}

/// An `EINSORA_NVIDIA_SMI` that names nothing is a machine without NVIDIA GPUs, as a missing
/// `nvidia-smi` is.
#[tokio::test]
async fn a_missing_nvidia_smi_is_no_gpus() {
    let probe = Probe {
        nvidia_smi: "/nonexistent/nvidia-smi".into(),
        ..Probe::default()
    };
    assert_eq!(collect(&probe).await.unwrap().devices, []);
}

#[test]
fn a_32_gib_mac_has_one_apple_gpu_of_the_32_gib_class() {
    let mac = parse_sysctl(include_str!(
        "fixtures/inventory/sysctl-mac-m1-max-32gb.txt"
    ))
    .expect("recorded sysctl output parses");
    assert_eq!(mac.memory_bytes, 32 * GIB);
    assert_eq!(mac.cpus, 10);
    assert_eq!(mac.hostname, "Annas-MacBook-Pro.local");
    let gpu = mac.apple_gpu().expect("Apple Silicon has a GPU");
    assert_eq!(gpu.vendor, AcceleratorKind::Apple);
    assert_eq!(gpu.model, "Apple M1 Max");
    assert_eq!(gpu.uuid, APPLE_GPU_ID);
    assert_eq!(gpu.memory_bytes, 32 * GIB);
    let class = Catalog::builtin()
        .class_for_apple_memory(gpu.memory_bytes)
        .map(|c| c.name().to_owned());
    assert_eq!(class.as_deref(), Some("apple-silicon-32gb"));
}

#[test]
fn an_8_gib_mac_reports_its_gpu_though_no_class_fits_it() {
    let mac = parse_sysctl(include_str!("fixtures/inventory/sysctl-mac-m1-8gb.txt"))
        .expect("recorded sysctl output parses");
    let gpu = mac.apple_gpu().expect("Apple Silicon has a GPU");
    assert_eq!(gpu.memory_bytes, 8 * GIB);
    assert_eq!(
        Catalog::builtin().class_for_apple_memory(gpu.memory_bytes),
        None
    );
}

#[test]
fn meminfo_gives_mem_total_in_bytes() {
    let bytes = parse_meminfo(include_str!("fixtures/inventory/meminfo-16gb.txt"));
    assert_eq!(bytes.expect("recorded meminfo parses"), 16_318_412 * 1024);
}

/// Whether `program` is on `PATH`, as the inventory would find it.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// What a command prints, trimmed; it must succeed.
fn output_of(program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The UUIDs of the GPUs `nvidia-smi -L` lists (`GPU 0: NVIDIA H200 (UUID: GPU-…)`, MIG
/// devices left out), sorted: another way of asking than the inventory's query. None on a
/// machine whose driver sees no GPU.
fn gpus_nvidia_smi_lists() -> Vec<String> {
    let out = std::process::Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .expect("nvidia-smi runs");
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let said = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
        assert!(
            said.contains("No devices were found"),
            "nvidia-smi -L: {said}"
        );
        return Vec::new();
    }
    let mut uuids: Vec<String> = text
        .lines()
        .filter(|line| line.starts_with("GPU "))
        .map(|line| {
            let (_, uuid) = line
                .rsplit_once("(UUID: ")
                .unwrap_or_else(|| panic!("a GPU line without its UUID: {line}"));
            uuid.trim_end_matches(')').to_owned()
        })
        .collect();
    uuids.sort();
    uuids
}

#[tokio::test]
async fn collect_describes_this_machine() {
    let inventory = collect(&Probe::default())
        .await
        .expect("this machine's inventory");
    assert_eq!(inventory.os, std::env::consts::OS);
    assert_eq!(inventory.arch, std::env::consts::ARCH);
    assert!(inventory.cpus > 0, "{inventory:?}");
    assert!(inventory.memory_bytes > 0, "{inventory:?}");
    assert!(!inventory.hostname.trim().is_empty(), "{inventory:?}");
    if cfg!(target_os = "linux") {
        // Checked against what other tools say of this machine.
        assert_eq!(inventory.hostname, output_of("uname", &["-n"]));
        let usable: u32 = output_of("nproc", &[]).parse().unwrap();
        assert!(
            inventory.cpus <= usable,
            "{} CPUs, of the {usable} this process may run on",
            inventory.cpus
        );
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let total = parse_meminfo(&meminfo).unwrap();
        assert!(
            inventory.memory_bytes <= total,
            "{} bytes, of the machine's {total}",
            inventory.memory_bytes
        );
        if on_path("nvidia-smi") {
            let listed = gpus_nvidia_smi_lists();
            let mut found: Vec<String> = inventory.devices.iter().map(|d| d.uuid.clone()).collect();
            found.sort();
            assert_eq!(
                found, listed,
                "every GPU nvidia-smi lists, once each: {inventory:?}"
            );
            for device in &inventory.devices {
                assert_eq!(device.vendor, AcceleratorKind::Nvidia, "{device:?}");
                assert!(!device.model.is_empty(), "{device:?}");
                assert!(device.memory_bytes > 0, "{device:?}");
            }
        } else {
            assert_eq!(inventory.devices, [], "no nvidia-smi, so no accelerators");
        }
    }
}
