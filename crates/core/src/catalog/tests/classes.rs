//! One test per class problem; each checks the problem names the class.

use super::{expect_problem, problems, with_classes};
use crate::catalog::Catalog;

fn gpu(fields: &str) -> String {
    format!("{{name: h100-80gb, accelerator: nvidia, cpus: 16, memory_gib: 128, {fields}}}")
}

fn mac(fields: &str) -> String {
    format!("{{name: apple-silicon-64gb, accelerator: apple, cpus: 8, {fields}}}")
}

#[test]
fn duplicate_class_names_are_refused() {
    let yaml = with_classes(&["{name: cpu-1c-2g, accelerator: cpu, cpus: 2, memory_gib: 4}"]);
    expect_problem(&yaml, "class \"cpu-1c-2g\"", "more than once");
}

#[test]
fn bad_class_names_are_refused() {
    let yaml = with_classes(&["{name: Big CPU, accelerator: cpu, cpus: 2, memory_gib: 4}"]);
    expect_problem(&yaml, "class \"Big CPU\"", "name \"Big CPU\" is not valid");
}

#[test]
fn unknown_accelerators_are_refused() {
    let yaml =
        with_classes(&["{name: tpu-v5, accelerator: tpu, devices: 1, cpus: 2, memory_gib: 4}"]);
    expect_problem(
        &yaml,
        "class \"tpu-v5\"",
        "accelerator \"tpu\" is not one of",
    );
}

#[test]
fn a_gpu_class_needs_devices() {
    let yaml = with_classes(&[&gpu("models: [NVIDIA H100 PCIe]")]);
    expect_problem(&yaml, "class \"h100-80gb\"", "devices: 0");
}

#[test]
fn a_gpu_class_needs_device_models() {
    let yaml = with_classes(&[&gpu("devices: 1")]);
    expect_problem(&yaml, "class \"h100-80gb\"", "no device models");
    let yaml = with_classes(&[&gpu("devices: 1, models: [' ']")]);
    expect_problem(&yaml, "class \"h100-80gb\"", "empty device model");
}

#[test]
fn an_amd_class_is_matched_by_model_too() {
    let mi300 = "{name: mi300x-192gb, accelerator: amd, devices: 1, cpus: 16, memory_gib: 128, models: [AMD Instinct MI300X]}";
    let catalog = Catalog::from_yaml(&with_classes(&[mi300])).unwrap();
    let class = catalog
        .class_for_device_model("amd instinct mi300x")
        .unwrap();
    assert_eq!(class.name(), "mi300x-192gb");
    let yaml = with_classes(&["{name: mi300x-192gb, accelerator: amd, cpus: 16, memory_gib: 128}"]);
    let (_, problems) = problems(&yaml);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems.iter().all(|p| p.entry == "class \"mi300x-192gb\""));
}

#[test]
fn a_cpu_class_has_no_devices_or_models() {
    let yaml = with_classes(&[
        "{name: cpu-4c-16g, accelerator: cpu, devices: 1, cpus: 4, memory_gib: 16}",
    ]);
    expect_problem(
        &yaml,
        "class \"cpu-4c-16g\"",
        "cpu classes take no accelerator devices",
    );
    let yaml = with_classes(&[
        "{name: cpu-4c-16g, accelerator: cpu, cpus: 4, memory_gib: 16, models: [Xeon]}",
    ]);
    expect_problem(&yaml, "class \"cpu-4c-16g\"", "only nvidia and amd classes");
}

#[test]
fn a_class_needs_cpus_and_memory() {
    let yaml = with_classes(&["{name: cpu-0c-2g, accelerator: cpu, cpus: 0, memory_gib: 2}"]);
    expect_problem(&yaml, "class \"cpu-0c-2g\"", "cpus: 0");
    let yaml = with_classes(&["{name: cpu-1c-0g, accelerator: cpu, cpus: 1, memory_gib: 0}"]);
    expect_problem(&yaml, "class \"cpu-1c-0g\"", "memory_gib: 0");
}

#[test]
fn an_apple_class_has_one_device_and_a_tier() {
    let yaml = with_classes(&[&mac("devices: 2, memory_gib: 48, unified_memory_gib: 64")]);
    expect_problem(&yaml, "class \"apple-silicon-64gb\"", "devices: 2");
    let yaml = with_classes(&[&mac("devices: 1, memory_gib: 48")]);
    expect_problem(
        &yaml,
        "class \"apple-silicon-64gb\"",
        "needs unified_memory_gib",
    );
    let yaml = with_classes(&[&mac("devices: 1, memory_gib: 96, unified_memory_gib: 64")]);
    expect_problem(
        &yaml,
        "class \"apple-silicon-64gb\"",
        "more than its unified-memory tier",
    );
}

#[test]
fn only_apple_classes_have_a_unified_memory_tier() {
    let yaml = with_classes(&[
        "{name: cpu-4c-16g, accelerator: cpu, cpus: 4, memory_gib: 16, unified_memory_gib: 16}",
    ]);
    expect_problem(&yaml, "class \"cpu-4c-16g\"", "only apple classes");
}

#[test]
fn a_mac_matches_one_class_only() {
    let yaml = with_classes(&[
        "{name: apple-m4-max, accelerator: apple, devices: 1, cpus: 8, memory_gib: 24, unified_memory_gib: 32}",
    ]);
    expect_problem(
        &yaml,
        "class \"apple-m4-max\"",
        "same unified-memory tier (32 GiB) as class \"apple-silicon-32gb\"",
    );
}

#[test]
fn a_device_model_matches_one_class_only() {
    let yaml = with_classes(&[&gpu("devices: 1, models: [NVIDIA H100 PCIe, nvidia  L40S]")]);
    expect_problem(
        &yaml,
        "class \"h100-80gb\"",
        "also listed by class \"l40s-48gb\"",
    );
    let yaml = with_classes(&[&gpu(
        "devices: 1, models: [NVIDIA H100 PCIe, NVIDIA H100 pcie]",
    )]);
    expect_problem(&yaml, "class \"h100-80gb\"", "twice");
}

#[test]
fn a_class_must_be_in_a_known_region() {
    let yaml = with_classes(&[&gpu(
        "devices: 1, models: [NVIDIA H100 PCIe], regions: [us-east]",
    )]);
    expect_problem(
        &yaml,
        "class \"h100-80gb\"",
        "region \"us-east\", which is not one of the catalog's regions (local, eu-west)",
    );
    let yaml = with_classes(&[&gpu("devices: 1, models: [NVIDIA H100 PCIe], regions: []")]);
    expect_problem(&yaml, "class \"h100-80gb\"", "offered nowhere");
    let yaml = with_classes(&[&gpu(
        "devices: 1, models: [NVIDIA H100 PCIe], regions: [Local]",
    )]);
    expect_problem(
        &yaml,
        "class \"h100-80gb\"",
        "region \"Local\" is not valid",
    );
    let yaml = with_classes(&[&gpu(
        "devices: 1, models: [NVIDIA H100 PCIe], regions: [local, local]",
    )]);
    expect_problem(&yaml, "class \"h100-80gb\"", "twice");
}

#[test]
fn a_class_limits_its_disk_to_disk_gib_or_the_default() {
    let sized = "{name: cpu-8c-8g, accelerator: cpu, cpus: 8, memory_gib: 8, disk_gib: 3}";
    let plain = "{name: cpu-2c-2g, accelerator: cpu, cpus: 2, memory_gib: 2}";
    let catalog = Catalog::from_yaml(&with_classes(&[sized, plain])).unwrap();
    let sized = catalog.class("cpu-8c-8g").unwrap();
    assert_eq!((sized.disk_gib(), sized.disk_bytes()), (3, 3 << 30));
    let plain = catalog.class("cpu-2c-2g").unwrap();
    assert_eq!(plain.disk_gib(), crate::catalog::DEFAULT_DISK_GIB);
    assert_eq!(
        plain.disk_bytes(),
        u64::from(crate::catalog::DEFAULT_DISK_GIB) << 30
    );
}

#[test]
fn a_class_without_disk_is_refused() {
    let yaml =
        with_classes(&["{name: cpu-2c-2g, accelerator: cpu, cpus: 2, memory_gib: 2, disk_gib: 0}"]);
    expect_problem(&yaml, "class \"cpu-2c-2g\"", "disk_gib: 0");
}

#[test]
fn a_class_gives_egress_unless_it_says_egress_false() {
    let closed = "{name: cpu-2c-2g, accelerator: cpu, cpus: 2, memory_gib: 2, egress: false}";
    let open = "{name: cpu-4c-4g, accelerator: cpu, cpus: 4, memory_gib: 4}";
    let catalog = Catalog::from_yaml(&with_classes(&[closed, open])).unwrap();
    assert!(!catalog.class("cpu-2c-2g").unwrap().egress());
    assert!(catalog.class("cpu-4c-4g").unwrap().egress());
    let yaml = with_classes(&[
        "{name: cpu-2c-2g, accelerator: cpu, cpus: 2, memory_gib: 2, egress: maybe}",
    ]);
    assert!(
        Catalog::from_yaml(&yaml).is_err(),
        "egress is true or false"
    );
}
