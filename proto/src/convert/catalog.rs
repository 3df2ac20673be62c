//! The catalog and machines' inventory, to send.

use einsora_core::catalog::{Catalog, ComputeClass, Image};
use einsora_core::driver::{DriverInfo, Os};
use einsora_core::machine::{Device, Machine, ModelFile};

use super::ProtoEnum;
use crate::catalog::v1 as pb;
use crate::machines::v1 as machines_pb;

/// Drivers that run nothing, for development and tests only.
const DEVELOPMENT_ONLY: &[&str] = &["sim"];

impl From<&Catalog> for pb::Catalog {
    fn from(c: &Catalog) -> Self {
        pb::Catalog {
            regions: c
                .regions()
                .iter()
                .map(|r| pb::Region {
                    name: r.to_string(),
                    is_default: r == c.default_region(),
                })
                .collect(),
            classes: c.classes().iter().map(pb::ComputeClass::from).collect(),
            images: c.images().iter().map(pb::Image::from).collect(),
            drivers: c.drivers().iter().map(|&d| pb::Driver::from(d)).collect(),
        }
    }
}

impl From<&ComputeClass> for pb::ComputeClass {
    fn from(c: &ComputeClass) -> Self {
        pb::ComputeClass {
            name: c.name().to_owned(),
            accelerator: c.accelerator().to_field(),
            devices: c.devices(),
            cpus: c.cpus(),
            memory_gib: c.memory_gib(),
            regions: c
                .regions()
                .unwrap_or_default()
                .iter()
                .map(ToString::to_string)
                .collect(),
            device_models: c.device_models().to_vec(),
            unified_memory_gib: c.unified_memory_gib(),
        }
    }
}

impl From<&Image> for pb::Image {
    fn from(i: &Image) -> Self {
        pb::Image {
            name: i.name().to_owned(),
            kinds: i.kinds().iter().map(|k| k.to_field()).collect(),
            runtimes: i
                .runtimes()
                .iter()
                .map(|r| pb::Runtime {
                    name: r.name().to_owned(),
                    accelerators: r.accelerators().iter().map(|a| a.to_field()).collect(),
                })
                .collect(),
            driver_refs: i
                .driver_refs()
                .iter()
                .map(|r| pb::DriverRef {
                    driver: r.driver().name.to_owned(),
                    accelerators: r.accelerators().iter().map(|a| a.to_field()).collect(),
                })
                .collect(),
            classes: i.classes().unwrap_or_default().to_vec(),
        }
    }
}

impl From<&DriverInfo> for pb::Driver {
    fn from(d: &DriverInfo) -> Self {
        pb::Driver {
            name: d.name.to_owned(),
            isolation: d.isolation.to_field(),
            kinds: d.kinds.iter().map(|k| k.to_field()).collect(),
            accelerators: d.accelerators.iter().map(|a| a.to_field()).collect(),
            os: match d.os {
                Os::Linux => "linux",
                Os::MacOs => "macos",
                Os::Any => "",
            }
            .to_owned(),
            per_machine_limit: d.per_machine_limit,
            development_only: DEVELOPMENT_ONLY.contains(&d.name),
        }
    }
}

/// What the store knows of every machine; the service adds what depends on the reader and the
/// time (status, workloads, times, drivers).
impl From<&Machine> for machines_pb::Machine {
    fn from(m: &Machine) -> Self {
        machines_pb::Machine {
            id: m.id.to_string(),
            name: m.name.clone(),
            region: m.region.to_string(),
            os: m.os.clone(),
            arch: m.arch.clone(),
            cpus: m.cpus,
            memory_bytes: m.memory_bytes,
            devices: m.devices.iter().map(machines_pb::Device::from).collect(),
            sharing: m.sharing.to_field(),
            cores: m.cores.map(|c| crate::common::v1::CpuCores {
                performance: c.performance,
                efficiency: c.efficiency,
            }),
            ..machines_pb::Machine::default()
        }
    }
}

impl From<&ModelFile> for crate::common::v1::ModelFile {
    fn from(m: &ModelFile) -> Self {
        crate::common::v1::ModelFile {
            path: m.path.clone(),
            size_bytes: m.size_bytes,
        }
    }
}

impl From<&Device> for machines_pb::Device {
    fn from(d: &Device) -> Self {
        machines_pb::Device {
            vendor: d.vendor.to_field(),
            model: d.model.clone(),
            uuid: d.uuid.clone(),
            memory_bytes: d.memory_bytes,
            workload_ids: Vec::new(),
            gpu_use: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::v1::{AcceleratorKind as PbAccel, WorkloadKind as PbKind};

    #[test]
    fn the_builtin_catalog_converts_whole() {
        let catalog = Catalog::builtin();
        let pb = pb::Catalog::from(&catalog);
        let defaults: Vec<_> = pb.regions.iter().filter(|r| r.is_default).collect();
        assert_eq!(defaults.len(), 1);
        assert_eq!(defaults[0].name, catalog.default_region().as_str());
        assert_eq!(pb.classes.len(), catalog.classes().len());
        assert_eq!(pb.images.len(), catalog.images().len());

        let l40s = pb.classes.iter().find(|c| c.name == "l40s-48gb").unwrap();
        assert_eq!(
            (l40s.accelerator, l40s.devices),
            (PbAccel::Nvidia as i32, 1)
        );
        assert_eq!(l40s.device_models, ["NVIDIA L40S"]);
        let apple = pb
            .classes
            .iter()
            .find(|c| c.name == "apple-silicon-32gb")
            .unwrap();
        assert_eq!(apple.unified_memory_gib, Some(32));

        let jupyter = pb.images.iter().find(|i| i.name == "jupyterlab").unwrap();
        assert_eq!(jupyter.kinds, [PbKind::Notebook as i32]);
        assert_eq!(jupyter.runtimes[0].name, "jupyterlab-cuda");

        let sim = pb.drivers.iter().find(|d| d.name == "sim").unwrap();
        assert!(sim.development_only);
        let vz = pb.drivers.iter().find(|d| d.name == "macos-vz").unwrap();
        assert_eq!((vz.os.as_str(), vz.per_machine_limit), ("macos", Some(2)));
        assert!(!vz.development_only);
    }
}
