//! A VM's libvirt domain, written as XML from what the agent decided: never from anything a
//! guest or a user wrote (its name is derived from the workload's ID, its paths are the
//! agent's own). The guest gets its class's vCPUs and memory, its own copy-on-write disk, its
//! NoCloud seed, and no network interface: the host reaches it only through virtio-serial
//! channels on Unix sockets in its run directory (readiness, and one per SSH session), so no
//! TCP listener exists for it, as for containers. Its serial console goes to a file the agent
//! reads as the workload's output. Reserved GPUs are passed through with VFIO.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub use einsora_core::machine::VmAccel as Accel;

/// The namespace of Einsora's metadata in a domain: how an agent restart finds its own.
pub const METADATA_NS: &str = "https://einsora.dev/xmlns/workload/1";
/// The version of how domains are built: raised by a change to the XML that a running VM
/// must not keep (a device removed, a channel changed), so that the next agent start ends
/// running VMs built the old way ([`Domain::fingerprint`]).
const LAYOUT: u32 = 1;
/// The virtio-serial port the guest says it is ready on.
const READY_PORT: &str = "org.einsora.ready";
/// SSH sessions a VM serves at once: one virtio-serial port each, `org.einsora.ssh.<n>`.
pub const SSH_PORTS: u32 = 4;
/// The longest path a Unix socket may have (`sun_path`, less its NUL).
pub const SOCKET_PATH_MAX: usize = 107;

/// libvirt's domain type for how the guest's CPU runs.
fn domain_type(accel: Accel) -> &'static str {
    match accel {
        Accel::Kvm => "kvm",
        Accel::Tcg => "qemu",
    }
}

/// A PCI device passed through whole (a GPU reserved for the VM), `dddd:bb:ss.f`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciAddress {
    pub domain: u16,
    pub bus: u8,
    pub slot: u8,
    pub function: u8,
}

impl std::str::FromStr for PciAddress {
    type Err = String;

    /// `0000:3b:00.0` as `nvidia-smi` and sysfs write it (`00000000:3B:00.0` too).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a PCI address (dddd:bb:ss.f)");
        let (domain, rest) = s.split_once(':').ok_or_else(bad)?;
        let (bus, rest) = rest.split_once(':').ok_or_else(bad)?;
        let (slot, function) = rest.split_once('.').ok_or_else(bad)?;
        let hex = |v: &str, max: u32| {
            u32::from_str_radix(v, 16)
                .ok()
                .filter(|n| *n <= max && !v.is_empty() && v.len() <= 8)
                .ok_or_else(bad)
        };
        Ok(PciAddress {
            domain: u16::try_from(hex(domain, 0xffff)?).map_err(|_| bad())?,
            bus: u8::try_from(hex(bus, 0xff)?).map_err(|_| bad())?,
            slot: u8::try_from(hex(slot, 0x1f)?).map_err(|_| bad())?,
            function: u8::try_from(hex(function, 7)?).map_err(|_| bad())?,
        })
    }
}

impl std::fmt::Display for PciAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.slot, self.function
        )
    }
}

/// What a guest boots: a kernel and initrd booted directly, with the root on its first disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boot {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
}

/// Which run of which workload a domain is: written into it, read back after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub workload: String,
    pub attempt: u32,
    /// The machine whose agent started it: agents sharing one libvirt never touch each
    /// other's.
    pub machine: String,
    /// What the domain was built from ([`Domain::fingerprint`]).
    pub fingerprint: String,
}

/// One VM's domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub name: String,
    pub accel: Accel,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub boot: Boot,
    /// Its root disk: a qcow2 overlay on the image's base disk.
    pub disk: PathBuf,
    /// Its NoCloud seed (an ISO labelled `cidata`).
    pub seed: PathBuf,
    /// Where its channels' sockets are made (by libvirt).
    pub run_dir: PathBuf,
    /// Where its serial console is written (its output).
    pub console: PathBuf,
    pub gpus: Vec<PciAddress>,
}

impl Domain {
    /// A domain's name for a workload: from its ID only.
    pub fn name_for(workload: &str) -> String {
        format!("einsora-{workload}")
    }

    /// The socket the guest says it is ready on, in its directory.
    pub fn ready_socket(dir: &Path) -> PathBuf {
        dir.join("ready.sock")
    }

    /// The socket of SSH channel `n`, in its directory.
    pub fn ssh_socket(dir: &Path, n: u32) -> PathBuf {
        dir.join(format!("ssh-{n}.sock"))
    }

    /// What the guest is given (not where its files are, nor how its CPU runs: KVM or TCG is
    /// decided by the agent's probe at each start, and a running guest under either is as
    /// good): a running domain whose fingerprint differs was started under other settings, or
    /// by an agent that builds domains otherwise ([`LAYOUT`]).
    pub fn fingerprint(&self) -> String {
        let gpus: Vec<String> = self.gpus.iter().map(ToString::to_string).collect();
        let text = format!(
            "layout={LAYOUT} vcpus={} memory={} kernel={} initrd={} gpus={}",
            self.vcpus,
            self.memory_mib,
            self.boot.kernel.display(),
            self.boot.initrd.display(),
            gpus.join(",")
        );
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(text.as_bytes());
        digest[..8].iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    /// The domain's XML, with `metadata` in Einsora's namespace.
    pub fn xml(&self, metadata: &Metadata) -> String {
        let e = |p: &Path| escape(&p.display().to_string());
        let mut x = String::new();
        let _ = writeln!(x, "<domain type='{}'>", domain_type(self.accel));
        let _ = writeln!(x, "  <name>{}</name>", escape(&self.name));
        let _ = writeln!(x, "  <metadata>");
        let _ = writeln!(x, "    <einsora:workload xmlns:einsora='{METADATA_NS}'>");
        let _ = writeln!(
            x,
            "      <einsora:id>{}</einsora:id>",
            escape(&metadata.workload)
        );
        let _ = writeln!(
            x,
            "      <einsora:attempt>{}</einsora:attempt>",
            metadata.attempt
        );
        let _ = writeln!(
            x,
            "      <einsora:machine>{}</einsora:machine>",
            escape(&metadata.machine)
        );
        let _ = writeln!(
            x,
            "      <einsora:fingerprint>{}</einsora:fingerprint>",
            escape(&metadata.fingerprint)
        );
        let _ = writeln!(x, "    </einsora:workload>");
        let _ = writeln!(x, "  </metadata>");
        let _ = writeln!(x, "  <memory unit='MiB'>{}</memory>", self.memory_mib);
        let _ = writeln!(x, "  <vcpu>{}</vcpu>", self.vcpus.max(1));
        let _ = writeln!(x, "  <os>");
        let _ = writeln!(x, "    <type arch='x86_64' machine='q35'>hvm</type>");
        let _ = writeln!(x, "    <kernel>{}</kernel>", e(&self.boot.kernel));
        let _ = writeln!(x, "    <initrd>{}</initrd>", e(&self.boot.initrd));
        let _ = writeln!(x, "    <cmdline>root=/dev/vda rw console=ttyS0</cmdline>");
        let _ = writeln!(x, "  </os>");
        let _ = writeln!(x, "  <features><acpi/></features>");
        if self.accel == Accel::Kvm {
            let _ = writeln!(x, "  <cpu mode='host-passthrough'/>");
        }
        let _ = writeln!(x, "  <on_poweroff>destroy</on_poweroff>");
        let _ = writeln!(x, "  <on_reboot>restart</on_reboot>");
        let _ = writeln!(x, "  <on_crash>destroy</on_crash>");
        let _ = writeln!(x, "  <devices>");
        let _ = writeln!(x, "    <disk type='file' device='disk'>");
        let _ = writeln!(x, "      <driver name='qemu' type='qcow2'/>");
        let _ = writeln!(x, "      <source file='{}'/>", e(&self.disk));
        let _ = writeln!(x, "      <target dev='vda' bus='virtio'/>");
        let _ = writeln!(x, "    </disk>");
        // On virtio-scsi: the guest's kernel has no SATA driver (q35's default for a cdrom).
        let _ = writeln!(x, "    <controller type='scsi' model='virtio-scsi'/>");
        let _ = writeln!(x, "    <disk type='file' device='cdrom'>");
        let _ = writeln!(x, "      <driver name='qemu' type='raw'/>");
        let _ = writeln!(x, "      <source file='{}'/>", e(&self.seed));
        let _ = writeln!(x, "      <target dev='sda' bus='scsi'/>");
        let _ = writeln!(x, "      <readonly/>");
        let _ = writeln!(x, "    </disk>");
        let _ = writeln!(x, "    <controller type='usb' model='none'/>");
        let _ = writeln!(x, "    <controller type='virtio-serial' index='0'/>");
        let ports = std::iter::once((READY_PORT.to_owned(), Domain::ready_socket(&self.run_dir)))
            .chain((0..SSH_PORTS).map(|n| {
                let port = format!("org.einsora.ssh.{n}");
                (port, Domain::ssh_socket(&self.run_dir, n))
            }));
        for (port, socket) in ports {
            let _ = writeln!(x, "    <channel type='unix'>");
            let _ = writeln!(x, "      <source mode='bind' path='{}'/>", e(&socket));
            let _ = writeln!(x, "      <target type='virtio' name='{port}'/>");
            let _ = writeln!(x, "    </channel>");
        }
        let _ = writeln!(x, "    <serial type='file'>");
        // Appended to: the driver empties it once read (native/output.rs).
        let _ = writeln!(x, "      <source path='{}' append='on'/>", e(&self.console));
        let _ = writeln!(x, "      <target port='0'/>");
        let _ = writeln!(x, "    </serial>");
        for gpu in &self.gpus {
            let _ = writeln!(x, "    <hostdev mode='subsystem' type='pci' managed='yes'>");
            let _ = writeln!(x, "      <source>");
            let _ = writeln!(
                x,
                "        <address domain='0x{:04x}' bus='0x{:02x}' slot='0x{:02x}' function='0x{:x}'/>",
                gpu.domain, gpu.bus, gpu.slot, gpu.function
            );
            let _ = writeln!(x, "      </source>");
            let _ = writeln!(x, "    </hostdev>");
        }
        let _ = writeln!(x, "    <memballoon model='none'/>");
        let _ = writeln!(x, "  </devices>");
        let _ = writeln!(x, "</domain>");
        x
    }
}

/// XML's five special characters, escaped for text and single-quoted attributes.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&apos;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
