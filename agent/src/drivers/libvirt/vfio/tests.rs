//! Fake sysfs trees, described one device a line (blank lines and `#` comments skipped):
//!
//! ```text
//! device <address> class=<0xccsspp> [group=<name>]
//! ```
//!
//! makes `devices/<address>/class` holding the class, links `bus/pci/devices/<address>` to
//! that directory, and with a group links `devices/<address>/iommu_group` to
//! `kernel/iommu_groups/<name>` and lists the device in that group's `devices/` (a symlink
//! back to it). Without a group there is no link, as with the IOMMU off. Real sysfs nests a
//! device's directory under its bridges' (`devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0`);
//! here it is flat, which the code can't tell apart: it reads only through `bus/pci/devices`.
//!
//! This layout (and `testdata/two-gpus/`) is typed from the kernel's documented sysfs shape
//! (Documentation/ABI/testing/sysfs-bus-pci, sysfs-kernel-iommu_groups), not recorded from
//! hardware.

use std::fs;
use std::os::unix::fs::symlink;

use super::*;

const GPU_A: &str = "GPU-5c1f2d8e-0b3a-4c6d-9e7f-1a2b3c4d5e6f";
const GPU_B: &str = "GPU-8e3d0a4b-7f21-4c9e-b6d5-2a1f0c9e8b7d";

/// Builds the fake sysfs tree `spec` describes (the format above) under `root`.
pub(crate) fn sysfs_from(spec: &str, root: &Path) {
    for line in spec.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let ["device", address, rest @ ..] = words.as_slice() else {
            panic!("not a device line: {line:?}");
        };
        let (mut class, mut group) = (None, None);
        for word in rest {
            match word.split_once('=') {
                Some(("class", value)) => class = Some(value),
                Some(("group", value)) => group = Some(value),
                _ => panic!("unknown word {word:?} in {line:?}"),
            }
        }
        let class = class.unwrap_or_else(|| panic!("no class= in {line:?}"));
        let dir = root.join("devices").join(address);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("class"), format!("{class}\n")).unwrap();
        let bus = root.join("bus/pci/devices");
        fs::create_dir_all(&bus).unwrap();
        symlink(format!("../../../devices/{address}"), bus.join(address)).unwrap();
        if let Some(group) = group {
            let members = root.join("kernel/iommu_groups").join(group).join("devices");
            fs::create_dir_all(&members).unwrap();
            symlink(
                format!("../../../../devices/{address}"),
                members.join(address),
            )
            .unwrap();
            let link = dir.join("iommu_group");
            symlink(format!("../../kernel/iommu_groups/{group}"), link).unwrap();
        }
    }
}

fn addr(s: &str) -> PciAddress {
    s.parse().unwrap()
}

fn bus_ids() -> BTreeMap<String, PciAddress> {
    parse_bus_ids(&format!(
        "{GPU_A}, 00000000:3B:00.0\n{GPU_B}, 00000000:AF:00.0\n"
    ))
    .unwrap()
}

/// The plan for `reserved` on the machine `spec` describes, with [`bus_ids`]'s GPUs.
fn plan_for(spec: &str, reserved: &[&str]) -> Result<Vec<PciAddress>, Refusal> {
    let root = tempfile::tempdir().unwrap();
    sysfs_from(spec, root.path());
    let reserved: Vec<String> = reserved.iter().map(|s| (*s).to_owned()).collect();
    plan(root.path(), &bus_ids(), &reserved)
}

/// Each GPU alone in its group with its HDMI audio function.
const TWO_GPUS: &str = "
    device 0000:3b:00.0 class=0x030000 group=40
    device 0000:3b:00.1 class=0x040300 group=40
    device 0000:af:00.0 class=0x030000 group=90
    device 0000:af:00.1 class=0x040300 group=90
";

#[test]
fn bus_ids_map_each_gpu_to_its_address() {
    let ids = bus_ids();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[GPU_A], addr("0000:3b:00.0"));
    assert_eq!(ids[GPU_B], addr("0000:af:00.0"));
    assert_eq!(parse_bus_ids("\n  \n").unwrap(), BTreeMap::new());
}

#[test]
fn garbage_bus_ids_name_the_line_and_quote_little_of_it() {
    let good = format!("{GPU_A}, 00000000:3B:00.0");
    let long = format!("{GPU_B}, {}", "x".repeat(500));
    let cases = [
        (
            "Failed to initialize NVML: Driver/library version mismatch",
            "expected",
        ),
        ("5c1f2d8e-0b3a, 00000000:AF:00.0", "UUID"),
        ("GPU-, 00000000:AF:00.0", "UUID"),
        ("GPU-zz, 00000000:AF:00.0", "UUID"),
        ("GPU-8e3d0a4b, 00000000:AF:00.9", "PCI address"),
        ("GPU-8e3d0a4b, 00000000:AF:00.0, extra", "PCI address"),
        ("GPU-8e3d0a4b, 00000000:3B:00.0", "bus id is listed twice"),
        (GPU_A, "expected"),
        (long.as_str(), "PCI address"),
    ];
    for (bad, problem) in cases {
        let err = parse_bus_ids(&format!("{good}\n{bad}\n")).unwrap_err();
        assert!(err.starts_with("nvidia-smi, line 2:"), "{err}");
        assert!(err.contains(problem), "{err}");
        assert!(err.chars().count() < 200, "bounded: {err}");
    }
    let twice = parse_bus_ids(&format!("{good}\n{GPU_A}, 00000000:AF:00.0\n")).unwrap_err();
    assert!(twice.contains("UUID is listed twice"), "{twice}");
}

#[test]
fn two_gpus_alone_in_their_groups_pass_with_their_audio_sorted() {
    // Out of order and twice: the plan is sorted, each once.
    let planned = plan_for(TWO_GPUS, &[GPU_B, GPU_A, GPU_B]).unwrap();
    let want = [
        "0000:3b:00.0",
        "0000:3b:00.1",
        "0000:af:00.0",
        "0000:af:00.1",
    ]
    .map(addr);
    assert_eq!(planned, want);
    let one = plan_for(TWO_GPUS, &[GPU_A]).unwrap();
    assert_eq!(one, ["0000:3b:00.0", "0000:3b:00.1"].map(addr));
}

#[test]
fn nothing_reserved_reads_nothing() {
    let root = tempfile::tempdir().unwrap();
    assert_eq!(plan(root.path(), &bus_ids(), &[]), Ok(Vec::new()));
}

#[test]
fn a_bridge_in_the_group_is_fine() {
    let spec = format!("{TWO_GPUS}\ndevice 0000:3a:00.0 class=0x060400 group=40");
    let planned = plan_for(&spec, &[GPU_A]).unwrap();
    assert_eq!(planned, ["0000:3b:00.0", "0000:3b:00.1"].map(addr));
}

#[test]
fn a_nic_in_the_group_is_refused_by_name() {
    let spec = format!("{TWO_GPUS}\ndevice 0000:3c:00.0 class=0x020000 group=40");
    let refusal = plan_for(&spec, &[GPU_A]).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::SharedGroup {
            gpu: addr("0000:3b:00.0"),
            other: addr("0000:3c:00.0"),
            group: "40".into(),
        }
    );
    let said = refusal.to_string();
    for words in ["0000:3b:00.0", "0000:3c:00.0", "group 40", "slot", "ACS"] {
        assert!(said.contains(words), "{said}");
    }
}

#[test]
fn gpus_sharing_a_group_pass_together_but_not_apart() {
    // Two GPUs behind one PCIe switch without ACS.
    let spec = "
        device 0000:3b:00.0 class=0x030200 group=40
        device 0000:af:00.0 class=0x030200 group=40
    ";
    let both = plan_for(spec, &[GPU_A, GPU_B]).unwrap();
    assert_eq!(both, ["0000:3b:00.0", "0000:af:00.0"].map(addr));
    let refusal = plan_for(spec, &[GPU_B]).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::SharedGroup {
            gpu: addr("0000:af:00.0"),
            other: addr("0000:3b:00.0"),
            group: "40".into(),
        }
    );
}

#[test]
fn a_shared_group_of_another_function_is_refused_for_its_gpu() {
    let spec = "
        device 0000:3b:00.0 class=0x030000 group=40
        device 0000:3b:00.1 class=0x040300 group=41
        device 0000:00:1f.3 class=0x040300 group=41
    ";
    let refusal = plan_for(spec, &[GPU_A]).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::SharedGroup {
            gpu: addr("0000:3b:00.0"),
            other: addr("0000:00:1f.3"),
            group: "41".into(),
        }
    );
}

#[test]
fn no_group_link_means_the_iommu_is_off() {
    let spec = "
        device 0000:3b:00.0 class=0x030000
        device 0000:3b:00.1 class=0x040300
    ";
    let refusal = plan_for(spec, &[GPU_A]).unwrap_err();
    assert_eq!(refusal, Refusal::IommuOff(addr("0000:3b:00.0")));
    let said = refusal.to_string();
    assert!(
        said.contains("intel_iommu=on") && said.contains("amd_iommu=on"),
        "{said}"
    );
    assert!(said.contains("iommu=pt"), "{said}");
}

#[test]
fn an_unknown_uuid_is_refused() {
    let stranger = "GPU-00000000-1111-2222-3333-444444444444";
    let refusal = plan_for(TWO_GPUS, &[GPU_A, stranger]).unwrap_err();
    assert_eq!(refusal, Refusal::UnknownGpu(stranger.to_owned()));
    assert!(refusal.to_string().contains(stranger), "{refusal}");
}

#[test]
fn a_group_link_not_ending_in_digits_is_unreadable() {
    for name in ["forty", "40a", "..", "99999999999"] {
        let spec = format!("device 0000:3b:00.0 class=0x030000 group={name}");
        let refusal = plan_for(&spec, &[GPU_A]).unwrap_err();
        let said = unreadable(&refusal);
        assert!(said.contains("0000:3b:00.0/iommu_group"), "{said}");
    }
}

#[test]
fn a_gpu_sysfs_lacks_is_unreadable_naming_the_path() {
    let spec = "device 0000:af:00.0 class=0x030000 group=90";
    let refusal = plan_for(spec, &[GPU_A]).unwrap_err();
    let said = unreadable(&refusal);
    assert!(said.contains("bus/pci/devices/0000:3b:00.0"), "{said}");
}

#[test]
fn a_group_entry_not_named_by_an_address_is_unreadable() {
    let root = tempfile::tempdir().unwrap();
    sysfs_from(TWO_GPUS, root.path());
    let group = root.path().join("kernel/iommu_groups/40/devices");
    fs::write(group.join("not-a-device"), "").unwrap();
    let refusal = plan(root.path(), &bus_ids(), &[GPU_A.to_owned()]).unwrap_err();
    let said = unreadable(&refusal);
    assert!(said.contains("not-a-device"), "{said}");
}

#[test]
fn a_member_class_that_isnt_one_is_unreadable() {
    let long = "0".repeat(40);
    for class in ["bridge", "0x", "0x1234567", long.as_str()] {
        let spec = format!("{TWO_GPUS}\ndevice 0000:3c:00.0 class={class} group=40");
        let refusal = plan_for(&spec, &[GPU_A]).unwrap_err();
        let said = unreadable(&refusal);
        assert!(said.contains("0000:3c:00.0/class"), "{said}");
    }
}

#[test]
fn a_recorded_two_gpu_machine_passes_both_gpus_and_their_audio() {
    // Typed from the kernel's documented sysfs shape, not recorded from hardware.
    let root = tempfile::tempdir().unwrap();
    sysfs_from(include_str!("../testdata/two-gpus/sysfs.txt"), root.path());
    let bus_ids = parse_bus_ids(include_str!("../testdata/two-gpus/nvidia-smi.txt")).unwrap();
    assert_eq!(bus_ids.len(), 2);
    let reserved: Vec<String> = bus_ids.keys().cloned().collect();
    let planned = plan(root.path(), &bus_ids, &reserved).unwrap();
    let want = [
        "0000:3b:00.0",
        "0000:3b:00.1",
        "0000:af:00.0",
        "0000:af:00.1",
    ]
    .map(addr);
    assert_eq!(planned, want);

    // The domain a VM given both gets, against the committed golden file (regenerated with
    // EINSORA_UPDATE_VM_GOLDEN=1): every planned function is a managed <hostdev>.
    let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/drivers/libvirt/testdata/two-gpus/domain.xml");
    let id = "0190a5b2-0000-7000-8000-000000000002";
    let dir = PathBuf::from("/var/lib/einsora-vms").join(id);
    let domain = super::super::domain::Domain {
        name: super::super::domain::Domain::name_for(id),
        accel: super::super::domain::Accel::Kvm,
        vcpus: 16,
        memory_mib: 65536,
        boot: super::super::domain::Boot {
            kernel: "/var/lib/einsora-vms/bases/63c84834557105db/vmlinuz".into(),
            initrd: "/var/lib/einsora-vms/bases/63c84834557105db/initrd.img".into(),
        },
        disk: dir.join("disk.qcow2"),
        seed: dir.join("seed.iso"),
        console: dir.join("output.log"),
        run_dir: dir.clone(),
        gpus: planned,
    };
    let metadata = super::super::domain::Metadata {
        workload: id.into(),
        attempt: 1,
        machine: "0190a5b2-0000-7000-8000-00000000000a".into(),
        fingerprint: domain.fingerprint(),
    };
    let xml = domain.xml(&metadata);
    #[allow(clippy::disallowed_methods)] // the test's own switch
    let update = std::env::var_os("EINSORA_UPDATE_VM_GOLDEN").is_some();
    if update {
        std::fs::write(&golden, &xml).unwrap();
    }
    let committed = std::fs::read_to_string(&golden).unwrap_or_default();
    assert_eq!(
        xml,
        committed,
        "{} differs: EINSORA_UPDATE_VM_GOLDEN=1 writes it",
        golden.display()
    );
}

/// What an `Unreadable` refusal says; any other refusal fails the test.
fn unreadable(refusal: &Refusal) -> &str {
    match refusal {
        Refusal::Unreadable(said) => said,
        other => panic!("not unreadable: {other:?}"),
    }
}

/// What an earlier start heard is kept in the state directory and used again (a GPU bound to
/// a VM isn't listed by nvidia-smi); a saved map that doesn't read is ignored whole.
#[tokio::test]
async fn the_bus_ids_heard_before_are_kept_across_agent_starts() {
    let state = tempfile::tempdir().unwrap();
    let saved = state.path().join(SAVED);
    fs::write(&saved, format!("{{\"{GPU_A}\": \"0000:3b:00.0\"}}")).unwrap();
    let gpus = Gpus::read_now(state.path()).await;
    assert_eq!(gpus.bus_ids.get(GPU_A), Some(&addr("0000:3b:00.0")));
    for bad in [
        "not json".to_owned(),
        format!("{{\"{GPU_A}\": \"../../etc\"}}"),
        "{\"../x\": \"0000:3b:00.0\"}".to_owned(),
    ] {
        fs::write(&saved, bad).unwrap();
        let gpus = Gpus::read_now(state.path()).await;
        assert!(!gpus.bus_ids.contains_key(GPU_A));
    }
}
