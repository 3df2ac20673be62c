//! Validated catalog entries. They are built only by `validate`, so every reference they hold
//! (regions, drivers, runtimes) is known to be good.

use crate::accelerator::AcceleratorKind;
use crate::driver::DriverInfo;
use crate::kind::WorkloadKind;
use crate::region::Region;

const GIB: u64 = 1 << 30;

/// A class's `disk_gib` when the catalog leaves it out.
pub const DEFAULT_DISK_GIB: u32 = 10;

/// A compute class: what a workload asks for (`gpu_class`) and what quotas, capacity and usage
/// are counted in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeClass {
    pub(super) name: String,
    pub(super) accelerator: AcceleratorKind,
    pub(super) devices: u32,
    pub(super) cpus: u32,
    pub(super) memory_gib: u32,
    pub(super) disk_gib: u32,
    pub(super) unified_memory_gib: Option<u32>,
    pub(super) egress: bool,
    pub(super) device_models: Vec<String>,
    pub(super) regions: Option<Vec<Region>>,
}

impl ComputeClass {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn accelerator(&self) -> AcceleratorKind {
        self.accelerator
    }

    /// Accelerator devices a workload of this class takes: 0 for CPU classes, 1 for Apple.
    pub fn devices(&self) -> u32 {
        self.devices
    }

    pub fn cpus(&self) -> u32 {
        self.cpus
    }

    /// Memory a workload of this class reserves on its machine, in GiB.
    pub fn memory_gib(&self) -> u32 {
        self.memory_gib
    }

    pub fn memory_bytes(&self) -> u64 {
        u64::from(self.memory_gib) * GIB
    }

    /// The size limit of a workload's writable storage (a notebook's files), in GiB: what a
    /// machine sets aside for it, and where it gets "no space left on device".
    pub fn disk_gib(&self) -> u32 {
        self.disk_gib
    }

    pub fn disk_bytes(&self) -> u64 {
        u64::from(self.disk_gib) * GIB
    }

    /// Whether the machine owner's own notebooks of this class get outbound network (the
    /// catalog's `egress`, true unless set to false). Guests' workloads and endpoints never
    /// do (docs/security.md, "Workload network").
    pub fn egress(&self) -> bool {
        self.egress
    }

    /// The unified-memory tier of an Apple class, in GiB; `None` for every other class.
    pub fn unified_memory_gib(&self) -> Option<u32> {
        self.unified_memory_gib
    }

    pub fn unified_memory_bytes(&self) -> Option<u64> {
        self.unified_memory_gib.map(|gib| u64::from(gib) * GIB)
    }

    /// Device models this class matches (NVIDIA and AMD classes only), as written in the catalog.
    pub fn device_models(&self) -> &[String] {
        &self.device_models
    }

    /// Whether a device the agent reports as `model` is one of this class's devices. Case and
    /// runs of whitespace are ignored, since tools differ in both.
    pub fn matches_device_model(&self, model: &str) -> bool {
        self.device_models
            .iter()
            .any(|m| same_device_model(m, model))
    }

    /// The regions the class is limited to; `None` means every region of the catalog.
    pub fn regions(&self) -> Option<&[Region]> {
        self.regions.as_deref()
    }

    /// Whether the class is offered in `region`. The caller checks that `region` is one of the
    /// catalog's regions ([`super::Catalog::has_region`]).
    pub fn offered_in(&self, region: &Region) -> bool {
        match &self.regions {
            None => true,
            Some(regions) => regions.contains(region),
        }
    }
}

pub(super) fn same_device_model(a: &str, b: &str) -> bool {
    let mut a = a.split_whitespace();
    let mut b = b.split_whitespace();
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x.eq_ignore_ascii_case(y) => {}
            _ => return false,
        }
    }
}

/// An image: what a workload runs, with the runtime that serves it on each accelerator and the
/// drivers allowed to run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub(super) name: String,
    pub(super) kinds: Vec<WorkloadKind>,
    pub(super) runtimes: Vec<Runtime>,
    pub(super) driver_refs: Vec<DriverRef>,
    pub(super) classes: Option<Vec<String>>,
}

impl Image {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kinds(&self) -> &[WorkloadKind] {
        &self.kinds
    }

    pub fn supports(&self, kind: WorkloadKind) -> bool {
        self.kinds.contains(&kind)
    }

    /// The runtimes in the catalog's order of preference.
    pub fn runtimes(&self) -> &[Runtime] {
        &self.runtimes
    }

    /// The first runtime in order that runs on `accelerator`.
    pub fn runtime_for(&self, accelerator: AcceleratorKind) -> Option<&Runtime> {
        self.runtimes.iter().find(|r| r.runs_on(accelerator))
    }

    pub fn driver_refs(&self) -> &[DriverRef] {
        &self.driver_refs
    }

    /// The drivers, in catalog order, that may run this image as a `kind` workload on
    /// `accelerator`: listed for that accelerator here, and able to by the driver table.
    pub fn drivers_for(
        &self,
        kind: WorkloadKind,
        accelerator: AcceleratorKind,
    ) -> impl Iterator<Item = &'static DriverInfo> + '_ {
        let usable = self.supports(kind) && self.runtime_for(accelerator).is_some();
        self.driver_refs
            .iter()
            .filter(move |r| {
                usable && r.accelerators.contains(&accelerator) && r.driver.runs(kind, accelerator)
            })
            .map(|r| r.driver)
    }

    /// The classes this image is limited to; `None` means any class it has a runtime for.
    pub fn classes(&self) -> Option<&[String]> {
        self.classes.as_deref()
    }

    /// Whether a workload of `class` can use this image: the image has a runtime for the
    /// class's accelerator and is not limited to other classes.
    pub fn runs_on(&self, class: &ComputeClass) -> bool {
        let allowed = match &self.classes {
            None => true,
            Some(names) => names.contains(&class.name),
        };
        allowed && self.runtime_for(class.accelerator).is_some()
    }
}

/// A runtime of an image, such as `vllm` or `llama.cpp`; the driver turns it into something it
/// can start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    pub(super) name: String,
    pub(super) accelerators: Vec<AcceleratorKind>,
}

impl Runtime {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn accelerators(&self) -> &[AcceleratorKind] {
        &self.accelerators
    }

    pub fn runs_on(&self, accelerator: AcceleratorKind) -> bool {
        self.accelerators.contains(&accelerator)
    }
}

/// One of an image's `driver_refs`: a driver that may run the image on these accelerators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverRef {
    pub(super) driver: &'static DriverInfo,
    pub(super) accelerators: Vec<AcceleratorKind>,
}

impl DriverRef {
    pub fn driver(&self) -> &'static DriverInfo {
        self.driver
    }

    pub fn accelerators(&self) -> &[AcceleratorKind] {
        &self.accelerators
    }
}
