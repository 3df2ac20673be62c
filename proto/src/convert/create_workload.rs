//! The create body, validated: everything that can be checked without the catalog or the
//! store. The api service then checks the class, image and region against the catalog.

use einsora_core::kind::WorkloadKind;
use einsora_core::region::Region;

use super::checks::{
    check_catalog_name, check_fallback, check_model, check_name, check_park_after_idle,
    check_served_name, check_slots, check_vm,
};
use super::{ConvertError, Problem, ProtoEnum};
use crate::common::v1::{EndpointParams, NotebookParams, VmParams};
use crate::workloads::v1::{self as pb, CreateWorkloadRequest};

/// Most fallback classes a workload may list.
pub const MAX_FALLBACK: usize = 8;
/// Longest wait before the fallback: a week.
pub const MAX_FALLBACK_AFTER_S: u32 = 7 * 24 * 3600;
/// Most SSH keys a VM may list.
pub const MAX_SSH_KEYS: usize = 32;
/// Largest VM disk in GiB.
pub const MAX_DISK_GIB: u32 = 65_536;
/// An endpoint's slots when it names none, and the most it may name.
pub const DEFAULT_SLOTS: u32 = 1;
pub const MAX_SLOTS: u32 = 64;
/// The idle times an endpoint may park itself after, in seconds: a minute to a week.
pub const PARK_AFTER_IDLE_S: std::ops::RangeInclusive<u32> = 60..=7 * 24 * 3600;

/// A create-workload request that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateWorkload {
    pub kind: WorkloadKind,
    /// A DNS label.
    pub name: String,
    /// The requested class: a well-formed catalog name (existence is the api's check).
    pub gpu_class: String,
    /// A well-formed catalog image name.
    pub image: String,
    /// `None`: the catalog's default region.
    pub region: Option<Region>,
    /// Well-formed class names, no repeats, not the requested class.
    pub fallback: Vec<String>,
    /// Only with a fallback.
    pub fallback_after_s: Option<u32>,
    /// Always of `kind`.
    pub params: WorkloadParams,
}

/// A kind's own parameters, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadParams {
    Notebook,
    Endpoint {
        /// The model it serves.
        model: String,
        /// Requests its engine serves at once, 1 to [`MAX_SLOTS`].
        slots: u32,
        /// The name it serves its model under, as named or else [`default_served_name`].
        served_name: String,
        /// Scale-to-zero: parked after this many seconds without requests (in
        /// [`PARK_AFTER_IDLE_S`]); `None` runs until stopped.
        park_after_idle_s: Option<u32>,
    },
    Vm {
        /// OpenSSH public keys, one line each.
        ssh_authorized_keys: Vec<String>,
        /// Root disk size in GiB; `None` for the image's default.
        disk_gib: Option<u32>,
    },
}

impl WorkloadParams {
    pub fn kind(&self) -> WorkloadKind {
        match self {
            WorkloadParams::Notebook => WorkloadKind::Notebook,
            WorkloadParams::Endpoint { .. } => WorkloadKind::Endpoint,
            WorkloadParams::Vm { .. } => WorkloadKind::Vm,
        }
    }

    /// Validates the parameters a message carries for a workload of `kind`; `None` means the
    /// message has none (fine for a notebook or a VM).
    pub fn from_proto(kind: WorkloadKind, raw: Option<RawParams>) -> Result<Self, ConvertError> {
        match (kind, raw) {
            (WorkloadKind::Notebook, None | Some(RawParams::Notebook(_))) => {
                Ok(WorkloadParams::Notebook)
            }
            (WorkloadKind::Endpoint, None) => {
                Err(ConvertError::new("endpoint.model", Problem::Missing))
            }
            (WorkloadKind::Endpoint, Some(RawParams::Endpoint(p))) => {
                check_model("endpoint.model", &p.model)?;
                let slots = check_slots(p.slots)?;
                let served_name = match p.served_name {
                    Some(name) => check_served_name("endpoint.served_name", name)?,
                    None => default_served_name(&p.model),
                };
                let park_after_idle_s = check_park_after_idle(p.park_after_idle_s)?;
                Ok(WorkloadParams::Endpoint {
                    model: p.model,
                    slots,
                    served_name,
                    park_after_idle_s,
                })
            }
            (WorkloadKind::Vm, None) => Ok(WorkloadParams::Vm {
                ssh_authorized_keys: Vec::new(),
                disk_gib: None,
            }),
            (WorkloadKind::Vm, Some(RawParams::Vm(p))) => {
                check_vm(&p)?;
                Ok(WorkloadParams::Vm {
                    ssh_authorized_keys: p.ssh_authorized_keys,
                    disk_gib: p.disk_gib,
                })
            }
            (kind, Some(other)) => Err(ConvertError::new(other.member(), Problem::WrongKind(kind))),
        }
    }
}

/// Longest served name (`EndpointParams.served_name`).
pub const MAX_SERVED_NAME: usize = 128;

/// The name an endpoint serves `model` under when it names none: the file's name without its
/// `.gguf` (`team/tiny.gguf` → `tiny`; a directory's name as it is), made to fit the served
/// name's rule (no leading `-`, at most [`MAX_SERVED_NAME`] characters).
pub fn default_served_name(model: &str) -> String {
    let file = model.rsplit('/').next().unwrap_or(model);
    let stem = file
        .strip_suffix(".gguf")
        .filter(|s| !s.is_empty())
        .unwrap_or(file);
    let name: String = stem
        .trim_start_matches('-')
        .chars()
        .take(MAX_SERVED_NAME)
        .collect();
    if name.is_empty() {
        "model".to_owned()
    } else {
        name
    }
}

/// The `params` oneof of any message that has one, before validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawParams {
    Notebook(NotebookParams),
    Endpoint(EndpointParams),
    Vm(VmParams),
}

impl RawParams {
    /// The oneof member's field name.
    fn member(&self) -> &'static str {
        match self {
            RawParams::Notebook(_) => "notebook",
            RawParams::Endpoint(_) => "endpoint",
            RawParams::Vm(_) => "vm",
        }
    }
}

/// Conversions between `WorkloadParams`/`RawParams` and one message's `params` oneof.
macro_rules! params_oneof {
    ($oneof:ty) => {
        impl From<$oneof> for RawParams {
            fn from(p: $oneof) -> Self {
                type O = $oneof;
                match p {
                    O::Notebook(p) => RawParams::Notebook(p),
                    O::Endpoint(p) => RawParams::Endpoint(p),
                    O::Vm(p) => RawParams::Vm(p),
                }
            }
        }

        impl From<WorkloadParams> for $oneof {
            fn from(p: WorkloadParams) -> Self {
                type O = $oneof;
                match p {
                    WorkloadParams::Notebook => O::Notebook(NotebookParams {}),
                    WorkloadParams::Endpoint {
                        model,
                        slots,
                        served_name,
                        park_after_idle_s,
                    } => O::Endpoint(EndpointParams {
                        model,
                        slots: Some(slots),
                        served_name: Some(served_name),
                        park_after_idle_s,
                    }),
                    WorkloadParams::Vm {
                        ssh_authorized_keys,
                        disk_gib,
                    } => O::Vm(VmParams {
                        ssh_authorized_keys,
                        disk_gib,
                    }),
                }
            }
        }
    };
}

params_oneof!(pb::create_workload_request::Params);
params_oneof!(pb::workload::Params);
params_oneof!(crate::agent::v1::workload_spec::Params);

impl TryFrom<CreateWorkloadRequest> for CreateWorkload {
    type Error = ConvertError;

    fn try_from(req: CreateWorkloadRequest) -> Result<Self, ConvertError> {
        let kind = WorkloadKind::from_field("kind", req.kind)?;
        check_name("name", &req.name)?;
        check_catalog_name("gpu_class", &req.gpu_class)?;
        check_catalog_name("image", &req.image)?;
        let region = match req.region.as_deref() {
            None => None,
            Some("") => {
                return Err(ConvertError::invalid(
                    "region",
                    "it is empty; leave it out for the default region",
                ));
            }
            Some(name) => {
                Some(Region::new(name).map_err(|e| ConvertError::invalid("region", e.problem))?)
            }
        };
        check_fallback(&req.gpu_class, &req.fallback, req.fallback_after_s)?;
        let params = WorkloadParams::from_proto(kind, req.params.map(RawParams::from))?;
        Ok(CreateWorkload {
            kind,
            name: req.name,
            gpu_class: req.gpu_class,
            image: req.image,
            region,
            fallback: req.fallback,
            fallback_after_s: req.fallback_after_s,
            params,
        })
    }
}

impl From<CreateWorkload> for CreateWorkloadRequest {
    fn from(c: CreateWorkload) -> Self {
        CreateWorkloadRequest {
            kind: c.kind.to_field(),
            name: c.name,
            gpu_class: c.gpu_class,
            image: c.image,
            region: c.region.map(|r| r.as_str().to_owned()),
            fallback: c.fallback,
            fallback_after_s: c.fallback_after_s,
            params: Some(c.params.into()),
        }
    }
}

#[cfg(test)]
#[path = "create_workload_tests.rs"]
mod tests;
