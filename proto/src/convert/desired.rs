//! The agent protocol's desired state as validated types: what a controller sends is converted
//! once, as the agent receives it, so drivers take domain types only. A missing spec, an
//! unknown or unspecified enum and a malformed ID are errors naming the field, never defaults.
//! Statuses and inventories going the other way are `report`'s.

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::agent::Mode;
use einsora_core::ids::WorkloadId;
use einsora_core::kind::WorkloadKind;
use einsora_core::output::OutputResume;

use super::{ConvertError, Problem, ProtoEnum, RawParams, WorkloadParams};
use crate::agent::v1 as pb;
use crate::common::v1 as common_pb;

/// One workload of a machine's desired state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredWorkload {
    pub workload_id: WorkloadId,
    /// The attempt to run; an agent starts an attempt at most once.
    pub attempt: u32,
    pub mode: Mode,
    pub spec: PlacedSpec,
    /// Where the store has its output up to, if it has any.
    pub output: Option<OutputResume>,
}

/// The placed workload, self-contained (an agent needs no catalog).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedSpec {
    pub kind: WorkloadKind,
    pub compute_class: String,
    /// `None` when the class left the catalog (the spec is then `retired`).
    pub accelerator: Option<AcceleratorKind>,
    pub image: String,
    /// The image's runtime for the accelerator; empty when the catalog no longer says.
    pub runtime: String,
    pub driver: String,
    /// `None` when the class left the catalog.
    pub resources: Option<Resources>,
    pub requires_strong_isolation: bool,
    pub egress: bool,
    pub retired: bool,
    /// `None` when the store's copy no longer reads: the agent refuses to start what needs
    /// them (an endpoint's model), and can still park and remove it.
    pub params: Option<WorkloadParams>,
}

/// What the workload may use on its machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpus: u32,
    pub memory_bytes: u64,
    pub device_count: u32,
    /// The exact devices, by UUID; empty lets the agent pick.
    pub device_uuids: Vec<String>,
    /// 0 means the catalog's default.
    pub disk_bytes: u64,
}

impl TryFrom<pb::DesiredWorkload> for DesiredWorkload {
    type Error = ConvertError;

    fn try_from(d: pb::DesiredWorkload) -> Result<Self, ConvertError> {
        let workload_id = d
            .workload_id
            .parse()
            .map_err(|_| ConvertError::invalid("workload_id", "a workload ID (a UUID)"))?;
        let mode = Mode::from_field("mode", d.mode)?;
        let spec = d
            .spec
            .ok_or_else(|| ConvertError::new("spec", Problem::Missing))?;
        Ok(DesiredWorkload {
            workload_id,
            attempt: d.attempt,
            mode,
            spec: PlacedSpec::try_from(spec)?,
            output: d.output.map(|h| OutputResume {
                attempt: h.attempt,
                offset: h.offset,
            }),
        })
    }
}

impl TryFrom<pb::WorkloadSpec> for PlacedSpec {
    type Error = ConvertError;

    fn try_from(s: pb::WorkloadSpec) -> Result<Self, ConvertError> {
        let kind = WorkloadKind::from_field("spec.kind", s.kind)?;
        let accelerator = match s.accelerator {
            unset if unset == common_pb::AcceleratorKind::Unspecified as i32 => None,
            value => Some(AcceleratorKind::from_field("spec.accelerator", value)?),
        };
        if s.driver.is_empty() {
            return Err(ConvertError::new("spec.driver", Problem::Missing));
        }
        // Parameters that don't read are the agent's to refuse when it would use them.
        let params = s
            .params
            .map(|p| WorkloadParams::from_proto(kind, Some(RawParams::from(p))))
            .transpose()
            .ok()
            .flatten();
        Ok(PlacedSpec {
            kind,
            compute_class: s.compute_class,
            accelerator,
            image: s.image,
            runtime: s.runtime,
            driver: s.driver,
            resources: s.resources.map(Into::into),
            requires_strong_isolation: s.requires_strong_isolation,
            egress: s.egress,
            retired: s.retired,
            params,
        })
    }
}

/// The same fields both ways: nothing in them needs checking.
macro_rules! resources {
    ($from:ty => $to:ty) => {
        impl From<$from> for $to {
            fn from(r: $from) -> Self {
                Self {
                    cpus: r.cpus,
                    memory_bytes: r.memory_bytes,
                    device_count: r.device_count,
                    device_uuids: r.device_uuids,
                    disk_bytes: r.disk_bytes,
                }
            }
        }
    };
}
resources!(pb::Resources => Resources);
resources!(Resources => pb::Resources);

impl From<DesiredWorkload> for pb::DesiredWorkload {
    fn from(d: DesiredWorkload) -> Self {
        pb::DesiredWorkload {
            workload_id: d.workload_id.to_string(),
            attempt: d.attempt,
            mode: d.mode.to_field(),
            spec: Some(d.spec.into()),
            output: d.output.map(|h| pb::OutputHead {
                attempt: h.attempt,
                offset: h.offset,
            }),
        }
    }
}

impl From<PlacedSpec> for pb::WorkloadSpec {
    fn from(s: PlacedSpec) -> Self {
        pb::WorkloadSpec {
            kind: s.kind.to_field(),
            compute_class: s.compute_class,
            accelerator: s
                .accelerator
                .map_or(common_pb::AcceleratorKind::Unspecified as i32, |a| {
                    a.to_field()
                }),
            image: s.image,
            runtime: s.runtime,
            driver: s.driver,
            resources: s.resources.map(Into::into),
            requires_strong_isolation: s.requires_strong_isolation,
            egress: s.egress,
            retired: s.retired,
            params: s.params.map(Into::into),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desired() -> DesiredWorkload {
        DesiredWorkload {
            workload_id: WorkloadId::new(),
            attempt: 3,
            mode: Mode::Run,
            output: Some(OutputResume {
                attempt: 3,
                offset: 4096,
            }),
            spec: PlacedSpec {
                kind: WorkloadKind::Endpoint,
                compute_class: "cpu-1c-2g".into(),
                accelerator: Some(AcceleratorKind::Cpu),
                image: "openai-endpoint".into(),
                runtime: "llama.cpp".into(),
                driver: "docker".into(),
                resources: Some(Resources {
                    cpus: 1,
                    memory_bytes: 2 << 30,
                    device_count: 0,
                    device_uuids: vec![],
                    disk_bytes: 10 << 30,
                }),
                requires_strong_isolation: true,
                egress: false,
                retired: false,
                params: Some(WorkloadParams::Endpoint {
                    model: "team/tiny.gguf".into(),
                    slots: 2,
                    served_name: "tiny".into(),
                    park_after_idle_s: None,
                }),
            },
        }
    }

    #[test]
    fn a_desired_workload_round_trips() {
        let ours = desired();
        let sent = pb::DesiredWorkload::from(ours.clone());
        assert_eq!(DesiredWorkload::try_from(sent).unwrap(), ours);
        let mut retired = desired();
        retired.spec.accelerator = None;
        retired.spec.resources = None;
        retired.spec.runtime.clear();
        retired.spec.retired = true;
        retired.spec.params = None;
        let sent = pb::DesiredWorkload::from(retired.clone());
        assert_eq!(DesiredWorkload::try_from(sent).unwrap(), retired);
    }

    #[test]
    fn what_isnt_a_desired_workload_is_refused_naming_the_field() {
        let good = || pb::DesiredWorkload::from(desired());
        let field = |d: pb::DesiredWorkload| DesiredWorkload::try_from(d).unwrap_err().field;
        let mut no_spec = good();
        no_spec.spec = None;
        assert_eq!(
            field(no_spec),
            "spec",
            "a missing spec is an error, not a default"
        );
        let mut bad_id = good();
        bad_id.workload_id = "../etc".into();
        assert_eq!(field(bad_id), "workload_id");
        let mut no_mode = good();
        no_mode.mode = 0;
        assert_eq!(field(no_mode), "mode");
        let mut odd_mode = good();
        odd_mode.mode = 99;
        assert_eq!(field(odd_mode), "mode");
        let mut no_kind = good();
        no_kind.spec.as_mut().unwrap().kind = 0;
        assert_eq!(field(no_kind), "spec.kind");
        let mut odd_accelerator = good();
        odd_accelerator.spec.as_mut().unwrap().accelerator = 42;
        assert_eq!(field(odd_accelerator), "spec.accelerator");
        let mut no_driver = good();
        no_driver.spec.as_mut().unwrap().driver.clear();
        assert_eq!(field(no_driver), "spec.driver");
    }

    /// Parameters that don't read are dropped, not fatal: the agent can still park and remove
    /// the workload, and refuses to start an endpoint without its model.
    #[test]
    fn unreadable_parameters_are_left_out() {
        let mut sent = pb::DesiredWorkload::from(desired());
        sent.spec.as_mut().unwrap().params = Some(pb::workload_spec::Params::Endpoint(
            common_pb::EndpointParams {
                model: "../../etc/shadow".into(),
                slots: None,
                served_name: None,
                park_after_idle_s: None,
            },
        ));
        let read = DesiredWorkload::try_from(sent).unwrap();
        assert_eq!(read.spec.params, None);
    }
}
