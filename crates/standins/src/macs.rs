//! Macs, as `sysctl` would describe them, written from Apple's published technical
//! specifications of each model (chip, CPU cores, unified memory). Transcribed, never captured
//! here: `brand_string` is the chip's name as Apple spells it, `kern.hostname` made up.

/// One Mac: its name for `STANDIN_MAC`, where its figures come from, and its `sysctl` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mac {
    pub name: &'static str,
    pub source: &'static str,
    pub values: &'static [(&'static str, &'static str)],
}

pub const MACS: &[Mac] = &[
    Mac {
        name: "m1-8gb",
        source: "Apple, MacBook Air (M1, 2020) technical specifications: Apple M1, 8-core CPU \
                 with 4 performance and 4 efficiency cores, 8GB unified memory",
        values: &[
            ("hw.memsize", "8589934592"),
            ("machdep.cpu.brand_string", "Apple M1"),
            ("hw.ncpu", "8"),
            ("hw.perflevel0.physicalcpu", "4"),
            ("hw.perflevel1.physicalcpu", "4"),
            ("kern.hostname", "air.local"),
        ],
    },
    Mac {
        name: "m3-pro-18gb",
        source: "Apple, MacBook Pro (14-inch, M3 Pro or M3 Max, Nov 2023) technical \
                 specifications: Apple M3 Pro, 11-core CPU with 5 performance and 6 efficiency \
                 cores, 18GB unified memory",
        values: &[
            ("hw.memsize", "19327352832"),
            ("machdep.cpu.brand_string", "Apple M3 Pro"),
            ("hw.ncpu", "11"),
            ("hw.perflevel0.physicalcpu", "5"),
            ("hw.perflevel1.physicalcpu", "6"),
            ("kern.hostname", "pro.local"),
        ],
    },
    Mac {
        name: "m2-max-32gb",
        source: "Apple, Mac Studio (2023) technical specifications: Apple M2 Max, 12-core CPU \
                 with 8 performance and 4 efficiency cores, 32GB unified memory",
        values: &[
            ("hw.memsize", "34359738368"),
            ("machdep.cpu.brand_string", "Apple M2 Max"),
            ("hw.ncpu", "12"),
            ("hw.perflevel0.physicalcpu", "8"),
            ("hw.perflevel1.physicalcpu", "4"),
            ("kern.hostname", "studio.local"),
        ],
    },
    Mac {
        name: "m2-ultra-192gb",
        source: "Apple, Mac Studio (2023) technical specifications: Apple M2 Ultra, 24-core CPU \
                 with 16 performance and 8 efficiency cores, 192GB unified memory",
        values: &[
            ("hw.memsize", "206158430208"),
            ("machdep.cpu.brand_string", "Apple M2 Ultra"),
            ("hw.ncpu", "24"),
            ("hw.perflevel0.physicalcpu", "16"),
            ("hw.perflevel1.physicalcpu", "8"),
            ("kern.hostname", "ultra.local"),
        ],
    },
];

/// The Mac called `name`.
pub fn mac(name: &str) -> Option<&'static Mac> {
    MACS.iter().find(|m| m.name == name)
}

/// What `sysctl <keys>` prints for `mac`: `key: value` per key asked, in order; an unknown key
/// is an error naming it, as sysctl's `unknown oid`.
pub fn sysctl(mac: &Mac, keys: &[String]) -> Result<String, String> {
    let mut out = String::new();
    for key in keys {
        let Some((_, value)) = mac.values.iter().find(|(k, _)| k == key) else {
            return Err(format!("sysctl: unknown oid '{key}'"));
        };
        out.push_str(&format!("{key}: {value}\n"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use einsora_agent::inventory::parse_sysctl;

    #[test]
    fn every_mac_reads_as_the_agent_reads_a_mac() {
        let keys: Vec<String> = [
            "hw.memsize",
            "machdep.cpu.brand_string",
            "hw.ncpu",
            "kern.hostname",
        ]
        .map(str::to_owned)
        .to_vec();
        for mac in MACS {
            let hardware = parse_sysctl(&sysctl(mac, &keys).unwrap()).unwrap();
            let gpu = hardware.apple_gpu().unwrap();
            assert_eq!(gpu.memory_bytes, hardware.memory_bytes, "{}", mac.name);
            assert!(mac.source.starts_with("Apple, "), "{}", mac.name);
        }
        let err = sysctl(&MACS[0], &["kern.proc.all".to_owned()]).unwrap_err();
        assert_eq!(err, "sysctl: unknown oid 'kern.proc.all'");
    }
}
