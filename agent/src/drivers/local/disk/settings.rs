//! The local drivers' disk settings: the free-space floor below which they start no new work,
//! whether a workload may run without a size-limited disk, and how much of its output a
//! container's log keeps.

use einsora_runtime::settings::{ConfigError, Settings};

/// Free space the agent keeps for the machine: `2GiB` (the default), `512MiB`, or `5%` of the
/// filesystem its state directory is on.
pub const FLOOR: &str = "EINSORA_AGENT_DISK_FLOOR";
/// `auto` (the default): a size-limited disk where the agent can mount one, else none, said
/// once in its log; `required`: a workload the agent can't give one is refused.
pub const LIMITS: &str = "EINSORA_AGENT_DISK_LIMITS";
/// How much of a workload's output its container's log keeps, in all (default `20MiB`).
pub const LOG_LIMIT: &str = "EINSORA_AGENT_LOG_LIMIT";

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// A log smaller than this would lose a server's start-up lines.
const SMALLEST_LOG: u64 = 2 * MIB;

/// The free space below which no new work starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Floor {
    Bytes(u64),
    /// Percent of the filesystem's size, 1 to 99.
    Percent(u8),
}

impl Floor {
    /// The floor on a filesystem of `total` bytes.
    pub fn bytes_of(self, total: u64) -> u64 {
        match self {
            Floor::Bytes(bytes) => bytes,
            Floor::Percent(p) => total / 100 * u64::from(p),
        }
    }
}

/// Whether a workload may run without a size-limited disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limits {
    /// Limited wherever the agent can mount a filesystem (it is root); elsewhere not, which
    /// the agent says in its log when it starts.
    Auto,
    /// Never without: where the agent can't limit a workload's disk, the workload is refused.
    Required,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskConfig {
    pub floor: Floor,
    pub limits: Limits,
    /// A container's log, all its files together.
    pub log_bytes: u64,
}

impl Default for DiskConfig {
    fn default() -> Self {
        DiskConfig {
            floor: Floor::Bytes(2 * GIB),
            limits: Limits::Auto,
            log_bytes: 20 * MIB,
        }
    }
}

impl DiskConfig {
    pub fn from_settings(settings: &Settings) -> Result<DiskConfig, ConfigError> {
        let limits = settings.choice(
            LIMITS,
            &[("auto", Limits::Auto), ("required", Limits::Required)],
            "auto",
        )?;
        let floor = settings.parse_with(FLOOR, "2GiB", parse_floor)?;
        let log_bytes = settings.parse_with(LOG_LIMIT, "20MiB", |v| {
            let bytes = einsora_runtime::settings::parse_size(v)?;
            if bytes < SMALLEST_LOG {
                return Err("is less than 2MiB, too little for a server's log".to_owned());
            }
            Ok(bytes)
        })?;
        Ok(DiskConfig {
            floor,
            limits,
            log_bytes,
        })
    }
}

/// `5%` or a size.
fn parse_floor(text: &str) -> Result<Floor, String> {
    if let Some(percent) = text.trim().strip_suffix('%') {
        return match percent.trim().parse::<u8>() {
            Ok(p @ 1..=99) => Ok(Floor::Percent(p)),
            _ => Err("is not a percentage from 1% to 99%".to_owned()),
        };
    }
    einsora_runtime::settings::parse_size(text).map(Floor::Bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<DiskConfig, ConfigError> {
        DiskConfig::from_settings(&Settings::from_map(pairs.iter().copied()))
    }

    #[test]
    fn the_floor_is_a_size_or_a_percentage() {
        assert_eq!(config(&[]).unwrap(), DiskConfig::default());
        let c = config(&[(FLOOR, "5%"), (LIMITS, "required"), (LOG_LIMIT, "4MiB")]).unwrap();
        assert_eq!(c.floor, Floor::Percent(5));
        assert_eq!(c.floor.bytes_of(200 * GIB), 10 * GIB);
        assert_eq!(c.limits, Limits::Required);
        assert_eq!(c.log_bytes, 4 * MIB);
        assert_eq!(
            config(&[(FLOOR, "512MiB")]).unwrap().floor,
            Floor::Bytes(512 * MIB)
        );
        assert_eq!(Floor::Bytes(7).bytes_of(1), 7);
    }

    #[test]
    fn bad_values_name_their_setting() {
        for (name, value) in [
            (FLOOR, "0%"),
            (FLOOR, "100%"),
            (FLOOR, "lots"),
            (LIMITS, "sometimes"),
            (LOG_LIMIT, "1MiB"),
            (LOG_LIMIT, "big"),
        ] {
            let e = config(&[(name, value)]).unwrap_err();
            assert_eq!(e.setting(), name, "{value}: {e}");
        }
    }
}
