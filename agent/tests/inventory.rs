//! The inventory's parsers on outputs recorded from real machines, how the catalog classes
//! what they find, and `collect` on the machine running the tests.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use einsora_agent::inventory::{
    APPLE_GPU_ID, collect, parse_meminfo, parse_nvidia_smi, parse_sysctl,
};
use einsora_core::accelerator::AcceleratorKind;
use einsora_core::catalog::Catalog;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

#[test]
fn two_h100s_are_two_devices_of_the_h100_class() {
    let devices = parse_nvidia_smi(include_str!("fixtures/inventory/nvidia-smi-2x-h100.csv"))
        .expect("recorded nvidia-smi output parses");
    let uuids: Vec<&str> = devices.iter().map(|d| d.uuid.as_str()).collect();
    assert_eq!(
        uuids,
        [
            "GPU-6c3c1e2a-9d0f-4a36-b0a2-5f1e8c7d9b10",
            "GPU-0e8f4b7d-2c41-4f5a-8e9b-3a6d1c2b7f44"
        ]
    );
    let catalog = Catalog::builtin();
    for device in &devices {
        assert_eq!(device.vendor, AcceleratorKind::Nvidia);
        assert_eq!(device.model, "NVIDIA H100 80GB HBM3");
        assert_eq!(device.memory_bytes, 81559 * MIB);
        let class = catalog.class_for_device_model(&device.model);
        assert_eq!(class.map(|c| c.name()), Some("h100-80gb"));
    }
}

#[test]
fn an_rtx_4090_is_of_the_4090_class() {
    let devices = parse_nvidia_smi(include_str!("fixtures/inventory/nvidia-smi-rtx-4090.csv"))
        .expect("recorded nvidia-smi output parses");
    let [gpu] = devices.as_slice() else {
        panic!("expected one GPU, got {devices:?}");
    };
    assert_eq!(gpu.model, "NVIDIA GeForce RTX 4090");
    assert_eq!(gpu.memory_bytes, 24564 * MIB);
    let class = Catalog::builtin()
        .class_for_device_model(&gpu.model)
        .map(|c| c.name().to_owned());
    assert_eq!(class.as_deref(), Some("rtx-4090-24gb"));
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
    let inventory = collect().await.expect("this machine's inventory");
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
