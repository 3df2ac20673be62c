//! A Mac, as `sysctl` describes it. On Apple Silicon the GPU is one device sharing the Mac's
//! unified memory; which class it is (the largest Apple class that memory holds) is the
//! catalog's decision (`Catalog::class_for_apple_memory`), not the agent's.

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::machine::{CpuCores, Device};

use super::error::InventoryError;

pub(crate) const SYSCTL: &str = "/usr/sbin/sysctl";
/// Asked without `-n`, so each answer names its key and order doesn't matter.
pub(crate) const KEYS: [&str; 4] = [
    "hw.memsize",
    "machdep.cpu.brand_string",
    "hw.ncpu",
    "kern.hostname",
];
/// Apple Silicon's two kinds of cores: `perflevel0` the performance cores, `perflevel1` the
/// efficiency ones.
pub(crate) const CORE_KEYS: [&str; 2] = ["hw.perflevel0.physicalcpu", "hw.perflevel1.physicalcpu"];

/// The Apple GPU's device ID: a Mac has exactly one.
pub const APPLE_GPU_ID: &str = "apple-gpu-0";

/// What `sysctl` says about a Mac.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacHardware {
    /// Unified memory, shared by the CPU and the GPU.
    pub memory_bytes: u64,
    /// `Apple M2 Max`, or an Intel model on an Intel Mac.
    pub chip: String,
    pub cpus: u32,
    pub hostname: String,
}

impl MacHardware {
    /// The Apple GPU, on Apple Silicon; `None` on an Intel Mac. (An agent built for x86_64
    /// running under Rosetta sees a `VirtualApple` chip, and so no GPU: ship it for arm64.)
    pub fn apple_gpu(&self) -> Option<Device> {
        self.chip.starts_with("Apple ").then(|| Device {
            vendor: AcceleratorKind::Apple,
            model: self.chip.clone(),
            uuid: APPLE_GPU_ID.to_owned(),
            memory_bytes: self.memory_bytes,
        })
    }
}

/// One `key: value` line of sysctl's answer, and how to say what is wrong with it.
struct Entry<'a> {
    key: &'a str,
    value: &'a str,
    index: usize,
    line: &'a str,
}

impl Entry<'_> {
    fn bad(&self, problem: &str) -> InventoryError {
        InventoryError::bad_line("sysctl", self.index, self.line, problem)
    }
}

/// The `key: value` lines of sysctl's answer, blank ones skipped; a line of another shape is an
/// error naming it.
fn entries(output: &str) -> impl Iterator<Item = Result<Entry<'_>, InventoryError>> {
    output
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| match line.split_once(':') {
            Some((key, value)) => Ok(Entry {
                key: key.trim(),
                value: value.trim(),
                index,
                line,
            }),
            None => Err(InventoryError::bad_line(
                "sysctl",
                index,
                line,
                "expected `key: value`",
            )),
        })
}

/// Parses the answer to `sysctl hw.memsize machdep.cpu.brand_string hw.ncpu kern.hostname`:
/// one `key: value` line each. Other keys are ignored; a missing one is an error naming it.
pub fn parse_sysctl(output: &str) -> Result<MacHardware, InventoryError> {
    let (mut memory_bytes, mut chip, mut cpus, mut hostname) = (None, None, None, None);
    for entry in entries(output) {
        let entry = entry?;
        let (value, bad) = (entry.value, |problem: &str| entry.bad(problem));
        match entry.key {
            "hw.memsize" => {
                let bytes = value.parse::<u64>().ok().filter(|&b| b > 0);
                memory_bytes = Some(bytes.ok_or_else(|| bad("the memory is not a number"))?);
            }
            "hw.ncpu" => {
                let count = value.parse::<u32>().ok().filter(|&n| n > 0);
                cpus = Some(count.ok_or_else(|| bad("the CPU count is not a number"))?);
            }
            "machdep.cpu.brand_string" if !value.is_empty() => chip = Some(value.to_owned()),
            "kern.hostname" if !value.is_empty() => hostname = Some(value.to_owned()),
            _ => {}
        }
    }
    let missing = |what| InventoryError::Missing {
        origin: "sysctl",
        what,
    };
    Ok(MacHardware {
        memory_bytes: memory_bytes.ok_or_else(|| missing("hw.memsize"))?,
        chip: chip.ok_or_else(|| missing("machdep.cpu.brand_string"))?,
        cpus: cpus.ok_or_else(|| missing("hw.ncpu"))?,
        hostname: hostname.ok_or_else(|| missing("kern.hostname"))?,
    })
}

/// Parses the answer to `sysctl hw.perflevel0.physicalcpu hw.perflevel1.physicalcpu`: its
/// performance and efficiency cores, or `None` if it names only one kind. More cores than its
/// `cpus` is an error naming the line.
pub fn parse_cores(output: &str, cpus: u32) -> Result<Option<CpuCores>, InventoryError> {
    let (mut performance, mut efficiency) = (None, None);
    for entry in entries(output) {
        let entry = entry?;
        let count = || {
            let count = entry.value.parse::<u32>().ok();
            count
                .filter(|&n| n > 0 && n <= cpus)
                .ok_or_else(|| entry.bad("the core count is not a number of its CPUs"))
        };
        match entry.key {
            "hw.perflevel0.physicalcpu" => performance = Some(count()?),
            "hw.perflevel1.physicalcpu" => efficiency = Some(count()?),
            _ => {}
        }
    }
    Ok(match (performance, efficiency) {
        (Some(performance), Some(efficiency)) if performance + efficiency <= cpus => {
            Some(CpuCores {
                performance,
                efficiency,
            })
        }
        (Some(_), Some(_)) => {
            return Err(InventoryError::bad_line(
                "sysctl",
                0,
                output.lines().next().unwrap_or_default(),
                "more performance and efficiency cores than CPUs",
            ));
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: &str = "hw.memsize: 17179869184\nmachdep.cpu.brand_string: Apple M2\n\
                       hw.ncpu: 8\nkern.hostname: air.local\n";

    #[test]
    fn keys_may_come_in_any_order_and_unknown_ones_are_ignored() {
        let shuffled: Vec<&str> = MAC.lines().rev().collect();
        let text = format!("{}\nhw.optional.arm64: 1\n", shuffled.join("\n"));
        assert_eq!(parse_sysctl(&text).unwrap(), parse_sysctl(MAC).unwrap());
    }

    #[test]
    fn a_missing_key_is_named() {
        for key in KEYS {
            let text: String = MAC
                .lines()
                .filter(|l| !l.starts_with(key))
                .map(|l| format!("{l}\n"))
                .collect();
            let err = parse_sysctl(&text).unwrap_err().to_string();
            assert_eq!(err, format!("sysctl does not say {key}"));
        }
    }

    #[test]
    fn bad_values_name_the_line() {
        for (bad, problem) in [
            ("hw.memsize: lots", "line 1: the memory is not a number"),
            ("hw.memsize: 0", "line 1: the memory is not a number"),
            ("hw.ncpu: -4", "line 1: the CPU count is not a number"),
            ("garbage", "line 1: expected `key: value`"),
        ] {
            let err = parse_sysctl(&format!("{bad}\n{MAC}"))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(&format!("sysctl, {problem}")), "{err}");
        }
    }

    #[test]
    fn performance_and_efficiency_cores_are_read_when_both_are_there() {
        let m2_max = "hw.perflevel0.physicalcpu: 8\nhw.perflevel1.physicalcpu: 4\n";
        let cores = parse_cores(m2_max, 12).unwrap().unwrap();
        assert_eq!((cores.performance, cores.efficiency), (8, 4));
        assert_eq!(
            parse_cores("hw.perflevel0.physicalcpu: 8\n", 12).unwrap(),
            None
        );
        assert_eq!(parse_cores("", 12).unwrap(), None);
        assert!(parse_cores(m2_max, 10).is_err(), "more cores than CPUs");
        assert!(parse_cores("hw.perflevel0.physicalcpu: lots\n", 12).is_err());
    }

    #[test]
    fn an_intel_mac_has_no_apple_gpu() {
        let intel = MAC.replace("Apple M2", "Intel(R) Core(TM) i9-9980HK CPU @ 2.40GHz");
        assert_eq!(parse_sysctl(&intel).unwrap().apple_gpu(), None);
        let rosetta = MAC.replace("Apple M2", "VirtualApple @ 2.50GHz processor");
        assert_eq!(parse_sysctl(&rosetta).unwrap().apple_gpu(), None);
    }
}
