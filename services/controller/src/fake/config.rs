//! The fake backend's settings: capacity per class, the delay before ready, injected faults.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use einsora_core::catalog::Catalog;
use einsora_core::region::Region;
use einsora_runtime::settings::{ConfigError, Settings};

/// `class=units,…`; default: `DEFAULT_UNITS` of every class in the catalog.
pub const CAPACITY: &str = "EINSORA_FAKE_CAPACITY";
/// How long a workload takes to become ready after it is run.
pub const READY_DELAY: &str = "EINSORA_FAKE_READY_DELAY";
/// `fault:name-prefix,…`: workloads whose name starts with the prefix meet the fault.
pub const FAULTS: &str = "EINSORA_FAKE_FAULTS";
/// Where the fake runtime journals what it runs, so it outlives a controller restart
/// (default `<data dir>/fake-runtime-<region>.jsonl`).
pub const STATE: &str = "EINSORA_FAKE_STATE";

const DEFAULT_UNITS: u64 = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeConfig {
    pub capacity: BTreeMap<String, u64>,
    pub ready_delay: Duration,
    pub faults: Vec<(Fault, String)>,
    pub state_file: Option<PathBuf>,
}

/// What the fake runtime can be made to do to a workload, for tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Refuses to run it.
    Refuse,
    /// Runs it, then reports it failed instead of ready.
    Fail,
    /// Runs it until it is ready once, then loses it.
    Vanish,
    /// Can't tell its status.
    Unreadable,
}

const FAULT_NAMES: [(&str, Fault); 4] = [
    ("refuse", Fault::Refuse),
    ("fail", Fault::Fail),
    ("vanish", Fault::Vanish),
    ("unreadable", Fault::Unreadable),
];

impl FakeConfig {
    pub fn from_settings(
        settings: &Settings,
        catalog: &Catalog,
        region: &Region,
    ) -> Result<Self, ConfigError> {
        let default_capacity = catalog
            .classes()
            .iter()
            .map(|c| format!("{}={DEFAULT_UNITS}", c.name()))
            .collect::<Vec<_>>()
            .join(",");
        let capacity =
            settings.parse_with(CAPACITY, &default_capacity, |v| parse_capacity(v, catalog))?;
        Ok(FakeConfig {
            capacity,
            ready_delay: settings.duration(READY_DELAY, "1s")?,
            faults: settings.parse_with(FAULTS, "", parse_faults)?,
            state_file: Some(
                settings.path(
                    STATE,
                    &settings
                        .data_dir()?
                        .join(format!("fake-runtime-{region}.jsonl")),
                )?,
            ),
        })
    }

    /// The first fault whose prefix `name` starts with.
    pub fn fault_for(&self, name: &str) -> Option<Fault> {
        self.faults
            .iter()
            .find(|(_, prefix)| name.starts_with(prefix.as_str()))
            .map(|(fault, _)| *fault)
    }
}

fn parse_capacity(v: &str, catalog: &Catalog) -> Result<BTreeMap<String, u64>, String> {
    let mut capacity = BTreeMap::new();
    for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((class, units)) = item.split_once('=') else {
            return Err(format!("{item:?} is not class=units"));
        };
        let class = class.trim();
        if catalog.class(class).is_none() {
            return Err(format!("{class:?} is not a class of the catalog"));
        }
        let units: u64 = units
            .trim()
            .parse()
            .map_err(|_| format!("{item:?}: units must be a whole number"))?;
        capacity.insert(class.to_owned(), units);
    }
    Ok(capacity)
}

fn parse_faults(v: &str) -> Result<Vec<(Fault, String)>, String> {
    let mut faults = Vec::new();
    for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, prefix) = item
            .split_once(':')
            .ok_or_else(|| format!("{item:?} is not fault:name-prefix"))?;
        let fault = FAULT_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                format!("{name:?} is not a fault (refuse, fail, vanish or unreadable)")
            })?;
        if prefix.is_empty() {
            return Err(format!("{item:?} needs a name prefix"));
        }
        faults.push((fault, prefix.to_owned()));
    }
    Ok(faults)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<FakeConfig, ConfigError> {
        FakeConfig::from_settings(
            &Settings::from_map(
                vars.iter()
                    .copied()
                    .chain([("EINSORA_DATA_DIR", "/tmp/einsora-test")]),
            ),
            &Catalog::builtin(),
            &Region::new("local").unwrap(),
        )
    }

    #[test]
    fn defaults_offer_every_class() {
        let cfg = settings(&[]).unwrap();
        assert_eq!(cfg.capacity.get("cpu-1c-2g"), Some(&DEFAULT_UNITS));
        assert_eq!(cfg.capacity.len(), Catalog::builtin().classes().len());
        assert!(cfg.faults.is_empty());
    }

    #[test]
    fn capacity_and_faults_parse() {
        let cfg = settings(&[
            (CAPACITY, "cpu-1c-2g=2, l40s-48gb=0"),
            (FAULTS, "refuse:bad-,vanish:gone-"),
            (READY_DELAY, "0s"),
        ])
        .unwrap();
        assert_eq!(cfg.capacity.len(), 2);
        assert_eq!(cfg.fault_for("bad-1"), Some(Fault::Refuse));
        assert_eq!(cfg.fault_for("gone-x"), Some(Fault::Vanish));
        assert_eq!(cfg.fault_for("fine"), None);
        assert_eq!(cfg.ready_delay, Duration::ZERO);
    }

    #[test]
    fn bad_values_name_the_setting_and_the_problem() {
        for (vars, needle) in [
            ((CAPACITY, "nope=1"), "not a class"),
            ((CAPACITY, "cpu-1c-2g"), "not class=units"),
            ((CAPACITY, "cpu-1c-2g=-1"), "whole number"),
            ((FAULTS, "explode:x"), "not a fault"),
            ((FAULTS, "refuse:"), "needs a name prefix"),
        ] {
            let err = settings(&[vars]).unwrap_err().to_string();
            assert!(err.contains(vars.0) && err.contains(needle), "{err}");
        }
    }
}
