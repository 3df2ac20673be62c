use crate::accelerator::AcceleratorKind::{Amd, Apple, Cpu, Nvidia};
use crate::catalog::Catalog;
use crate::kind::WorkloadKind::{Endpoint, Notebook, Vm};
use crate::region::Region;

const GIB: u64 = 1 << 30;

#[test]
fn builtin_catalog_loads_and_validates() {
    let catalog = Catalog::from_yaml(super::super::BUILTIN).unwrap();
    assert_eq!(catalog, Catalog::builtin());
    assert_eq!(catalog.default_region().as_str(), "local");
    assert_eq!(catalog.regions().len(), 1);
}

#[test]
fn builtin_catalog_has_the_classes_others_rely_on() {
    let catalog = Catalog::builtin();
    for name in [
        "cpu-1c-2g",
        "cpu-4c-16g",
        "cpu-16c-64g",
        "l40s-48gb",
        "a100-80gb",
        "h100-80gb",
        "h200-141gb",
        "rtx-4090-24gb",
        "apple-silicon-16gb",
        "apple-silicon-32gb",
        "apple-silicon-64gb",
        "apple-silicon-128gb",
    ] {
        assert!(catalog.class(name).is_some(), "{name} missing");
    }
    let small = catalog.class("cpu-1c-2g").unwrap();
    assert_eq!(
        (small.accelerator(), small.devices(), small.cpus()),
        (Cpu, 0, 1)
    );
    assert_eq!(small.memory_bytes(), 2 * GIB);
    assert_eq!(small.disk_bytes(), 10 * GIB);
    let l40s = catalog.class("l40s-48gb").unwrap();
    assert_eq!((l40s.accelerator(), l40s.devices()), (Nvidia, 1));
    let mac = catalog.class("apple-silicon-32gb").unwrap();
    assert_eq!(mac.unified_memory_bytes(), Some(32 * GIB));
    assert!(catalog.class("tpu-v5").is_none());
}

#[test]
fn endpoint_runtimes_follow_the_accelerator_in_order() {
    let catalog = Catalog::builtin();
    let image = catalog.image("openai-endpoint").unwrap();
    assert!(image.supports(Endpoint) && !image.supports(Notebook));
    let runtime = |a| image.runtime_for(a).map(|r| r.name());
    assert_eq!(runtime(Nvidia), Some("vllm"));
    assert_eq!(runtime(Apple), Some("mlx"));
    assert_eq!(runtime(Cpu), Some("llama.cpp"));
    assert_eq!(runtime(Amd), Some("llama.cpp"));
}

#[test]
fn notebook_and_vm_images_have_their_runtimes() {
    let catalog = Catalog::builtin();
    let notebook = catalog.image("jupyterlab").unwrap();
    assert!(notebook.supports(Notebook));
    for accelerator in [Nvidia, Apple, Cpu] {
        assert!(notebook.runtime_for(accelerator).is_some(), "{accelerator}");
    }
    assert!(notebook.runtime_for(Amd).is_none());
    let vm = catalog.image("ubuntu-24.04").unwrap();
    assert_eq!(vm.kinds(), [Vm]);
    assert!(vm.runs_on(catalog.class("cpu-4c-16g").unwrap()));
    assert!(!vm.runs_on(catalog.class("apple-silicon-32gb").unwrap()));
}

#[test]
fn driver_refs_pick_drivers_by_kind_and_accelerator() {
    let catalog = Catalog::builtin();
    let names = |image: &str, kind, accelerator| -> Vec<&str> {
        let image = catalog.image(image).unwrap();
        image
            .drivers_for(kind, accelerator)
            .map(|d| d.name)
            .collect()
    };
    assert_eq!(
        names("openai-endpoint", Endpoint, Nvidia),
        ["docker", "linux-native", "sim"]
    );
    assert_eq!(
        names("openai-endpoint", Endpoint, Apple),
        ["macos-native", "sim"]
    );
    assert_eq!(
        names("openai-endpoint", Endpoint, Cpu),
        ["docker", "linux-native", "macos-native", "sim"]
    );
    assert!(names("openai-endpoint", Notebook, Nvidia).is_empty());
    assert_eq!(
        names("jupyterlab", Notebook, Cpu),
        [
            "docker",
            "linux-native",
            "macos-native",
            "macos-container",
            "sim"
        ]
    );
    assert_eq!(
        names("ubuntu-24.04", Vm, Cpu),
        ["libvirt", "macos-vz", "sim"]
    );
    assert_eq!(names("debian-12", Vm, Cpu), ["libvirt", "sim"]);
    assert_eq!(names("debian-12", Vm, Nvidia), ["libvirt", "sim"]);
    assert_eq!(names("tiny", Vm, Nvidia), Vec::<&str>::new());
    assert!(catalog.driver("docker").is_some());
}

#[test]
fn a_mac_matches_the_largest_apple_tier_its_memory_holds() {
    let catalog = Catalog::builtin();
    let class = |gib: u64| catalog.class_for_apple_memory(gib * GIB).map(|c| c.name());
    assert_eq!(class(8), None);
    assert_eq!(class(16), Some("apple-silicon-16gb"));
    assert_eq!(class(24), Some("apple-silicon-16gb"));
    assert_eq!(class(36), Some("apple-silicon-32gb"));
    assert_eq!(class(64), Some("apple-silicon-64gb"));
    assert_eq!(class(512), Some("apple-silicon-128gb"));
    assert_eq!(
        catalog
            .class_for_apple_memory(32 * GIB - 1)
            .map(|c| c.name()),
        Some("apple-silicon-16gb")
    );
}

#[test]
fn device_models_match_ignoring_case_and_spacing() {
    let catalog = Catalog::builtin();
    let class = |model: &str| catalog.class_for_device_model(model).map(|c| c.name());
    assert_eq!(class("NVIDIA L40S"), Some("l40s-48gb"));
    assert_eq!(class("  nvidia   l40s "), Some("l40s-48gb"));
    assert_eq!(class("NVIDIA A100 80GB PCIe"), Some("a100-80gb"));
    assert_eq!(class("NVIDIA GeForce RTX 4090"), Some("rtx-4090-24gb"));
    assert_eq!(class("NVIDIA L40"), None);
    assert_eq!(class("NVIDIA L40S 2"), None);
    assert_eq!(class(""), None);
    assert!(
        catalog
            .class("l40s-48gb")
            .unwrap()
            .matches_device_model("nvidia l40s")
    );
    assert!(
        !catalog
            .class("a100-80gb")
            .unwrap()
            .matches_device_model("NVIDIA L40S")
    );
}

#[test]
fn every_builtin_class_is_offered_in_local_only() {
    let catalog = Catalog::builtin();
    let local = Region::new("local").unwrap();
    assert_eq!(catalog.classes_in(&local).count(), catalog.classes().len());
    let elsewhere = Region::new("eu-west").unwrap();
    assert!(!catalog.has_region(&elsewhere));
    assert_eq!(catalog.classes_in(&elsewhere).count(), 0);
    assert_eq!(catalog.region("local"), Some(&local));
    assert_eq!(catalog.region("eu-west"), None);
}
