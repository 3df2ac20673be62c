use super::*;

fn domain(accel: Accel, gpus: Vec<PciAddress>) -> Domain {
    Domain {
        name: Domain::name_for("0190a5b2-0000-7000-8000-000000000001"),
        accel,
        vcpus: 2,
        memory_mib: 1024,
        boot: Boot {
            kernel: "/images/vm-debian/vmlinuz".into(),
            initrd: "/images/vm-debian/initrd.img".into(),
        },
        disk: "/state/vms/w1/disk.qcow2".into(),
        seed: "/state/vms/w1/seed.iso".into(),
        run_dir: "/state/vms/w1/run".into(),
        console: "/state/vms/w1/console.log".into(),
        gpus,
    }
}

fn metadata(fingerprint: &str) -> Metadata {
    Metadata {
        workload: "0190a5b2-0000-7000-8000-000000000001".into(),
        attempt: 3,
        machine: "m-1".into(),
        fingerprint: fingerprint.into(),
    }
}

#[test]
fn a_tcg_guest_has_no_network_and_talks_only_over_its_channels() {
    let d = domain(Accel::Tcg, vec![]);
    let xml = d.xml(&metadata(&d.fingerprint()));
    assert!(xml.starts_with("<domain type='qemu'>"), "{xml}");
    assert!(!xml.contains("<interface"), "no network interface: {xml}");
    assert!(!xml.contains("host-passthrough"), "emulated CPU under TCG");
    for (port, socket) in [
        ("org.einsora.ready", "ready"),
        ("org.einsora.ssh.0", "ssh-0"),
        ("org.einsora.ssh.3", "ssh-3"),
    ] {
        let socket = format!("<source mode='bind' path='/state/vms/w1/run/{socket}.sock'/>");
        assert!(xml.contains(&socket), "{port}: {xml}");
        assert!(xml.contains(&format!("<target type='virtio' name='{port}'/>")));
    }
    assert!(
        xml.contains("<target dev='sda' bus='scsi'/>"),
        "the seed on virtio-scsi"
    );
    assert!(xml.contains("<controller type='usb' model='none'/>"));
    assert!(!xml.contains("org.einsora.ssh.4"));
    assert!(xml.contains("<source file='/state/vms/w1/disk.qcow2'/>"));
    assert!(xml.contains("<readonly/>"), "the seed is read-only");
    assert!(xml.contains("<source path='/state/vms/w1/console.log' append='on'/>"));
    assert!(xml.contains("<memory unit='MiB'>1024</memory>"));
    assert!(xml.contains("<vcpu>2</vcpu>"));
    assert!(xml.contains("<einsora:attempt>3</einsora:attempt>"));
    assert!(xml.contains(&format!("xmlns:einsora='{METADATA_NS}'")));
    assert!(!xml.contains("<hostdev"));
}

#[test]
fn kvm_passes_the_host_cpu_through_and_gpus_through_vfio() {
    let gpu: PciAddress = "0000:3b:00.0".parse().unwrap();
    let d = domain(Accel::Kvm, vec![gpu]);
    let xml = d.xml(&metadata("f"));
    assert!(xml.starts_with("<domain type='kvm'>"));
    assert!(xml.contains("<cpu mode='host-passthrough'/>"));
    assert!(xml.contains("<hostdev mode='subsystem' type='pci' managed='yes'>"));
    assert!(xml.contains("<address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/>"));
}

#[test]
fn the_fingerprint_follows_what_the_guest_is_given_not_where_its_files_are() {
    let a = domain(Accel::Tcg, vec![]);
    let mut moved = a.clone();
    moved.disk = "/elsewhere/disk.qcow2".into();
    assert_eq!(a.fingerprint(), moved.fingerprint());
    let mut bigger = a.clone();
    bigger.memory_mib = 2048;
    assert_ne!(a.fingerprint(), bigger.fingerprint());
    let gpu = "0000:3b:00.0".parse().unwrap();
    assert_ne!(a.fingerprint(), domain(Accel::Tcg, vec![gpu]).fingerprint());
    // How its CPU runs is the probe's, at each start: a running guest under either is kept.
    assert_eq!(a.fingerprint(), domain(Accel::Kvm, vec![]).fingerprint());
    assert_eq!(a.fingerprint().len(), 16);
}

#[test]
fn text_in_the_xml_is_escaped() {
    let mut d = domain(Accel::Tcg, vec![]);
    d.console = "/state/a'b<c>&d/console.log".into();
    let xml = d.xml(&metadata("x"));
    assert!(
        xml.contains("<source path='/state/a&apos;b&lt;c&gt;&amp;d/console.log' append='on'/>"),
        "{xml}"
    );
}

#[test]
fn pci_addresses_read_as_sysfs_and_nvidia_smi_write_them() {
    let a: PciAddress = "00000000:3B:00.1".parse().unwrap();
    assert_eq!(a.to_string(), "0000:3b:00.1");
    for bad in [
        "",
        "3b:00.0",
        "0000:3b:00",
        "0000:3b:20.0",
        "0000:3b:00.8",
        "0000:1ff:00.0",
        "x:y:z.w",
    ] {
        assert!(bad.parse::<PciAddress>().is_err(), "{bad:?}");
    }
}
