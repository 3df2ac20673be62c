//! VFIO passthrough of reserved GPUs: which PCI devices a VM must be given for them, and whether
//! that is safe on this machine. The IOMMU isolates groups, not devices, so a VM can only be
//! given whole IOMMU groups: a GPU sharing its group with, say, the host's NIC is refused rather
//! than handed over along with it. A GPU's other functions (its HDMI audio, its USB-C
//! controller) sit in its slot and share its reset, so they go with it.
//!
//! Everything here is read from sysfs by paths the agent builds itself (canonical PCI addresses
//! it formats, all-digit IOMMU group numbers), so nothing read can steer a path; what is read
//! (and `nvidia-smi`'s answer) is untrusted text: bounded, checked, and quoted only in part.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Read as _};
use std::path::{Path, PathBuf};

use super::domain::PciAddress;

/// nvidia-smi's answer: one line per GPU, `GPU-<uuid>, <bus id>`.
///
/// nvidia-smi lists only the GPUs its driver holds: one libvirt has bound to vfio-pci for a
/// running VM is missing from the answer, so it is asked while the GPUs are the host's.
pub const QUERY: [&str; 2] = ["--query-gpu=uuid,pci.bus_id", "--format=csv,noheader"];

/// Where QUERY's answer comes from, in errors.
const ORIGIN: &str = "nvidia-smi";
/// Longest piece of untrusted text (a line, a file's content, a name) quoted in an error.
const QUOTE_LIMIT: usize = 80;
/// Most devices an IOMMU group may list: a group that large is a broken listing, not a GPU's.
const GROUP_LIMIT: usize = 256;
/// Most bytes a sysfs `class` file may hold (`0x030000\n` is 9).
const CLASS_LIMIT: u64 = 32;
/// Longest IOMMU group number (a u32's digits).
const GROUP_DIGITS: usize = 10;
/// Longest GPU UUID accepted (`GPU-` and a 36-character UUID is 40).
const UUID_LIMIT: usize = 64;
/// Functions a (non-ARI) PCI device can have: `dddd:bb:ss.0` to `.7`.
const FUNCTIONS: u8 = 8;
/// The PCI class of PCI-to-PCI bridges (`0x0604xx`): they forward, they aren't endpoints, so
/// one in a GPU's group isn't given to anyone.
const BRIDGE_CLASS: u32 = 0x0604;

/// This machine's NVIDIA GPUs by UUID, as nvidia-smi listed them when the driver started, and
/// the sysfs their IOMMU groups are read from: what a VM's reserved GPUs are planned from.
#[derive(Debug, Clone, Default)]
pub struct Gpus {
    bus_ids: BTreeMap<String, PciAddress>,
    sysfs: PathBuf,
}

impl Gpus {
    /// How long nvidia-smi may take to answer.
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

    /// Asks nvidia-smi now, and adds what an earlier start of the agent heard and saved in
    /// `state_dir` (`gpu-bus-ids.json`): a GPU libvirt has bound to a VM isn't listed, so one
    /// held across an agent restart is known from there. None where nvidia-smi isn't installed
    /// or sees no GPU; a failed or unreadable answer is logged and counts as none (a VM given
    /// GPUs is then refused, `gpu_passthrough_unavailable`, naming them in the log).
    pub async fn read_now(state_dir: &Path) -> Gpus {
        let saved = state_dir.join(SAVED);
        let mut bus_ids = read_saved(&saved);
        bus_ids.extend(Self::listed_now().await);
        if !bus_ids.is_empty() {
            let text: BTreeMap<&String, String> =
                bus_ids.iter().map(|(u, a)| (u, a.to_string())).collect();
            let text = serde_json::to_string(&text).unwrap_or_default();
            if let Err(e) = crate::renew::write_private(&saved, &text) {
                tracing::warn!(path = %saved.display(), error = %e, "couldn't save the GPUs' PCI bus IDs");
            }
        }
        Gpus {
            bus_ids,
            sysfs: PathBuf::from("/sys"),
        }
    }

    async fn listed_now() -> BTreeMap<String, PciAddress> {
        let program = crate::inventory::nvidia::NVIDIA_SMI;
        let answer = crate::inventory::command::run_tool(program, &QUERY, Self::LIMIT).await;
        match answer {
            Ok(Some(out)) if out.status.success() => {
                parse_bus_ids(&out.stdout).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "nvidia-smi's PCI bus IDs don't read: no GPU passthrough");
                    BTreeMap::new()
                })
            }
            Ok(_) => BTreeMap::new(),
            Err(e) => {
                tracing::warn!(error = %e, "nvidia-smi didn't answer: no GPU passthrough");
                BTreeMap::new()
            }
        }
    }

    /// GPUs as `bus_ids` lists them, their groups read from the sysfs at `sysfs` (tests).
    #[cfg(test)]
    pub fn at(bus_ids: BTreeMap<String, PciAddress>, sysfs: &Path) -> Gpus {
        Gpus {
            bus_ids,
            sysfs: sysfs.to_path_buf(),
        }
    }

    /// The PCI devices to pass to a VM for the GPUs it was given ([`plan`]).
    pub fn plan(&self, reserved: &[String]) -> Result<Vec<PciAddress>, Refusal> {
        plan(&self.sysfs, &self.bus_ids, reserved)
    }
}

/// The agent's saved UUID → bus ID map, in its state directory.
const SAVED: &str = "gpu-bus-ids.json";
/// The most a saved map may weigh: far more than a machine's GPUs.
const SAVED_LIMIT: u64 = 64 << 10;

/// The saved map; empty where there is none, and where it doesn't read (logged).
fn read_saved(path: &Path) -> BTreeMap<String, PciAddress> {
    let text = match File::open(path) {
        Ok(file) => {
            let mut text = String::new();
            match file.take(SAVED_LIMIT).read_to_string(&mut text) {
                Ok(_) => text,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "the saved GPU bus IDs don't read");
                    return BTreeMap::new();
                }
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound => return BTreeMap::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "the saved GPU bus IDs don't read");
            return BTreeMap::new();
        }
    };
    // Each entry a GPU's UUID and a PCI address, or none of it is used.
    let parsed = serde_json::from_str::<BTreeMap<String, String>>(&text)
        .ok()
        .and_then(|map| {
            map.into_iter()
                .map(|(uuid, address)| {
                    let address: PciAddress = address.parse().ok()?;
                    is_gpu_uuid(&uuid).then_some((uuid, address))
                })
                .collect::<Option<BTreeMap<String, PciAddress>>>()
        });
    parsed.unwrap_or_else(|| {
        tracing::warn!(path = %path.display(), "the saved GPU bus IDs don't read; asking nvidia-smi only");
        BTreeMap::new()
    })
}

/// Parses the answer to QUERY into UUID → PCI address. Blank lines skipped; any other line that
/// isn't `<uuid>, <address>` is an error naming the line (bounded: at most 80 chars of it quoted).
pub fn parse_bus_ids(output: &str) -> Result<BTreeMap<String, PciAddress>, String> {
    let mut ids = BTreeMap::new();
    for (index, line) in output.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad =
            |problem: &str| format!("{ORIGIN}, line {}: {problem}: {:?}", index + 1, quote(line));
        let Some((uuid, address)) = line.split_once(',') else {
            return Err(bad("expected `GPU-<uuid>, <PCI bus id>`"));
        };
        let uuid = uuid.trim();
        if !is_gpu_uuid(uuid) {
            return Err(bad("the UUID is not GPU-<hex digits and dashes>"));
        }
        let address: PciAddress = address
            .trim()
            .parse()
            .map_err(|_| bad("the bus id is not a PCI address (dddd:bb:ss.f)"))?;
        if ids.values().any(|known| *known == address) {
            return Err(bad("the bus id is listed twice"));
        }
        if ids.insert(uuid.to_owned(), address).is_some() {
            return Err(bad("the UUID is listed twice"));
        }
    }
    Ok(ids)
}

/// `GPU-` and hex digits and dashes, as nvidia-smi writes a GPU's UUID: anything else is not
/// what QUERY asked for.
fn is_gpu_uuid(uuid: &str) -> bool {
    uuid.len() <= UUID_LIMIT
        && uuid.strip_prefix("GPU-").is_some_and(|rest| {
            !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
        })
}

/// Why reserved GPUs can't be passed to a VM here (for the agent's WARN log; the workload gets
/// a status code, no text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A reserved GPU's UUID isn't in nvidia-smi's list.
    UnknownGpu(String),
    /// The device has no IOMMU group: the IOMMU is off (or the kernel wasn't booted with it).
    IommuOff(PciAddress),
    /// Its IOMMU group holds another endpoint device that isn't being passed to the same VM.
    /// `gpu` is the reserved GPU (the card to move), `group` the group found shared: the GPU's
    /// own, or that of one of its other functions.
    SharedGroup {
        gpu: PciAddress,
        other: PciAddress,
        group: String,
    },
    /// sysfs couldn't be read as expected (names the path).
    Unreadable(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::UnknownGpu(uuid) => write!(
                f,
                "reserved GPU {:?} is not among the GPUs nvidia-smi lists: check that it is \
                 still installed and held by the nvidia driver (`nvidia-smi -L`)",
                quote(uuid)
            ),
            Refusal::IommuOff(address) => write!(
                f,
                "PCI device {address} has no IOMMU group, so the IOMMU is off; turn the IOMMU \
                 on: boot with intel_iommu=on (Intel) or amd_iommu=on (AMD), and iommu=pt, \
                 with VT-d or AMD-Vi enabled in the firmware"
            ),
            Refusal::SharedGroup { gpu, other, group } => write!(
                f,
                "GPU {gpu} shares IOMMU group {group} with {other}, which is not passed to the \
                 same VM, and a VM can only be given whole groups: move the card to another \
                 slot, or to one behind an ACS-capable root port, so that it has a group of \
                 its own"
            ),
            Refusal::Unreadable(what) => {
                write!(f, "sysfs could not be read as expected: {what}")
            }
        }
    }
}

/// The PCI devices to pass through for the GPUs `reserved` (UUIDs), given nvidia-smi's
/// `bus_ids` and the sysfs tree at `sysfs` (normally "/sys"): each GPU plus every other
/// function of the same device (dddd:bb:ss.*, e.g. its HDMI audio function), checked so that
/// every endpoint device in each one's IOMMU group is among those passed. PCI bridges
/// (class 0x0604xx) in a group are fine. Sorted, each once.
pub fn plan(
    sysfs: &Path,
    bus_ids: &BTreeMap<String, PciAddress>,
    reserved: &[String],
) -> Result<Vec<PciAddress>, Refusal> {
    let gpus = resolve(bus_ids, reserved)?;
    let mut cards = Vec::with_capacity(gpus.len());
    for gpu in gpus {
        cards.push((gpu, functions_of(sysfs, gpu)?));
    }
    // All of them first: two reserved GPUs may share a group (behind one PCIe switch).
    let mut passed: Vec<PciAddress> = cards
        .iter()
        .flat_map(|(_, functions)| functions.iter().copied())
        .collect();
    sort_unique(&mut passed);
    for (gpu, functions) in &cards {
        for &function in functions {
            check_group(sysfs, *gpu, function, &passed)?;
        }
    }
    Ok(passed)
}

/// The reserved GPUs' addresses, sorted, each once: every UUID must be one nvidia-smi listed.
fn resolve(
    bus_ids: &BTreeMap<String, PciAddress>,
    reserved: &[String],
) -> Result<Vec<PciAddress>, Refusal> {
    let mut gpus = reserved
        .iter()
        .map(|uuid| {
            bus_ids
                .get(uuid)
                .copied()
                .ok_or_else(|| Refusal::UnknownGpu(uuid.clone()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    sort_unique(&mut gpus);
    Ok(gpus)
}

/// Sorted by address (`PciAddress` has no `Ord`), duplicates dropped.
fn sort_unique(addresses: &mut Vec<PciAddress>) {
    addresses.sort_by_key(|a| (a.domain, a.bus, a.slot, a.function));
    addresses.dedup();
}

/// A device's directory: `<sysfs>/bus/pci/devices/<address>`, its name formatted here.
fn device_dir(sysfs: &Path, address: PciAddress) -> PathBuf {
    sysfs.join("bus/pci/devices").join(address.to_string())
}

/// The functions of `gpu`'s device that sysfs has (`gpu` among them). Its eight possible
/// addresses are looked up, rather than the whole device list read, so a machine with
/// thousands of SR-IOV functions costs no more than one with a few.
fn functions_of(sysfs: &Path, gpu: PciAddress) -> Result<Vec<PciAddress>, Refusal> {
    let mut found = Vec::new();
    for function in 0..FUNCTIONS {
        let address = PciAddress { function, ..gpu };
        if is_present(sysfs, address)? {
            found.push(address);
        }
    }
    if !found.contains(&gpu) {
        return Err(Refusal::Unreadable(format!(
            "{} does not exist, though nvidia-smi lists a GPU at {gpu}: check that {} is \
             where sysfs is mounted",
            device_dir(sysfs, gpu).display(),
            sysfs.display()
        )));
    }
    Ok(found)
}

/// Whether sysfs has a device at `address` (its directory; a symlink into `devices/` there).
fn is_present(sysfs: &Path, address: PciAddress) -> Result<bool, Refusal> {
    let dir = device_dir(sysfs, address);
    match std::fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => Ok(true),
        Ok(_) => Err(Refusal::Unreadable(format!(
            "{} is not a directory",
            dir.display()
        ))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(unreadable(&dir, &e)),
    }
}

/// Refuses if `device`'s IOMMU group holds an endpoint that isn't in `passed`.
fn check_group(
    sysfs: &Path,
    gpu: PciAddress,
    device: PciAddress,
    passed: &[PciAddress],
) -> Result<(), Refusal> {
    let group = iommu_group(sysfs, device)?;
    for member in group_members(sysfs, &group)? {
        if passed.contains(&member) || is_bridge(sysfs, member)? {
            continue;
        }
        return Err(Refusal::SharedGroup {
            gpu,
            other: member,
            group,
        });
    }
    Ok(())
}

/// The number of `device`'s IOMMU group: the last part of its `iommu_group` link's target
/// (`../../../kernel/iommu_groups/40`), which must be all digits, since it names a directory.
fn iommu_group(sysfs: &Path, device: PciAddress) -> Result<String, Refusal> {
    let link = device_dir(sysfs, device).join("iommu_group");
    let target = match std::fs::read_link(&link) {
        Ok(target) => target,
        // No link in a device that's there: the kernel made no groups.
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if is_present(sysfs, device)? {
                return Err(Refusal::IommuOff(device));
            }
            return Err(Refusal::Unreadable(format!(
                "{} does not exist",
                device_dir(sysfs, device).display()
            )));
        }
        Err(e) => return Err(unreadable(&link, &e)),
    };
    let name = target.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let is_number =
        !name.is_empty() && name.len() <= GROUP_DIGITS && name.bytes().all(|b| b.is_ascii_digit());
    if !is_number {
        return Err(Refusal::Unreadable(format!(
            "{} points to {:?}, which does not end in an IOMMU group number",
            link.display(),
            quote(&target.to_string_lossy())
        )));
    }
    Ok(name.to_owned())
}

/// The devices IOMMU group `group` lists (by their entries' names only), sorted.
fn group_members(sysfs: &Path, group: &str) -> Result<Vec<PciAddress>, Refusal> {
    let dir = sysfs
        .join("kernel/iommu_groups")
        .join(group)
        .join("devices");
    let entries = std::fs::read_dir(&dir).map_err(|e| unreadable(&dir, &e))?;
    let mut members = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| unreadable(&dir, &e))?;
        if members.len() == GROUP_LIMIT {
            return Err(Refusal::Unreadable(format!(
                "{} lists more than {GROUP_LIMIT} devices",
                dir.display()
            )));
        }
        let name = entry.file_name();
        let member = name
            .to_str()
            .and_then(|n| n.parse::<PciAddress>().ok())
            .ok_or_else(|| {
                Refusal::Unreadable(format!(
                    "{} holds {:?}, which is not named by a PCI address",
                    dir.display(),
                    quote(&name.to_string_lossy())
                ))
            })?;
        members.push(member);
    }
    sort_unique(&mut members);
    Ok(members)
}

/// Whether `device` is a PCI-to-PCI bridge, by its `class` file (`0x060400`).
fn is_bridge(sysfs: &Path, device: PciAddress) -> Result<bool, Refusal> {
    let path = device_dir(sysfs, device).join("class");
    let text = read_small(&path)?;
    let class = parse_class(&text).ok_or_else(|| {
        Refusal::Unreadable(format!(
            "{} holds {:?}, not a PCI class (0xccsspp)",
            path.display(),
            quote(&text)
        ))
    })?;
    Ok(class >> 8 == BRIDGE_CLASS)
}

/// `0xccsspp` (class, subclass, programming interface) as the kernel writes it, or None.
fn parse_class(text: &str) -> Option<u32> {
    let text = text.trim();
    let hex = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))?;
    if hex.is_empty() || hex.len() > 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

/// A small sysfs attribute's text: a regular file (not through a symlink at its last part, never
/// blocking on a FIFO), at most [`CLASS_LIMIT`] bytes of UTF-8.
fn read_small(path: &Path) -> Result<String, Refusal> {
    let read = |e: std::io::Error| unreadable(path, &e);
    let file: File = crate::models::open_no_follow(path).map_err(read)?;
    if !file.metadata().map_err(read)?.is_file() {
        return Err(Refusal::Unreadable(format!(
            "{} is not a file",
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    file.take(CLASS_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    if bytes.len() as u64 > CLASS_LIMIT {
        return Err(Refusal::Unreadable(format!(
            "{} holds more than {CLASS_LIMIT} bytes",
            path.display()
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| Refusal::Unreadable(format!("{} does not hold text", path.display())))
}

/// An I/O failure on `path`, as a refusal naming it.
fn unreadable(path: &Path, e: &std::io::Error) -> Refusal {
    Refusal::Unreadable(format!("{}: {e}", path.display()))
}

/// At most [`QUOTE_LIMIT`] characters of untrusted `text`, so it can't flood a log line.
fn quote(text: &str) -> String {
    let text = text.trim();
    let mut quoted: String = text.chars().take(QUOTE_LIMIT).collect();
    if text.chars().nth(QUOTE_LIMIT).is_some() {
        quoted.push('…');
    }
    quoted
}

#[cfg(test)]
pub(crate) mod tests;
