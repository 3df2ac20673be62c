//! The catalog file as written: plain strings and numbers, checked by `validate` before any of
//! it becomes a domain type.

use serde::{Deserialize, Deserializer};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCatalog {
    pub regions: Vec<String>,
    #[serde(default)]
    pub drivers: Vec<String>,
    pub classes: Vec<RawClass>,
    pub images: Vec<RawImage>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClass {
    pub name: String,
    pub accelerator: String,
    #[serde(default)]
    pub devices: u32,
    pub cpus: u32,
    pub memory_gib: u32,
    /// The size limit of a workload's writable storage; the default when absent.
    #[serde(default)]
    pub disk_gib: Option<u32>,
    #[serde(default)]
    pub unified_memory_gib: Option<u32>,
    /// Whether its notebooks may reach out (true when absent).
    #[serde(default)]
    pub egress: Option<bool>,
    #[serde(default)]
    pub models: Vec<String>,
    /// `None` only when the key is absent: an explicit `regions:` with no value is an error
    /// rather than a silent "every region".
    #[serde(default, deserialize_with = "present")]
    pub regions: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawImage {
    pub name: String,
    pub kinds: Vec<String>,
    pub runtimes: Vec<RawRuntime>,
    #[serde(default)]
    pub driver_refs: Vec<RawDriverRef>,
    #[serde(default, deserialize_with = "present")]
    pub classes: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRuntime {
    pub name: String,
    pub accelerators: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDriverRef {
    pub driver: String,
    pub accelerators: Vec<String>,
}

fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}
