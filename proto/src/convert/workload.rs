//! A recorded workload, to send. Its stored parameters are validated on the way out, so a
//! corrupt row is an error rather than a malformed answer.

use einsora_core::workload::Workload;

use super::{ConvertError, ProtoEnum, WorkloadParams, timestamp};
use crate::workloads::v1 as pb;

impl TryFrom<&Workload> for pb::Workload {
    type Error = ConvertError;

    fn try_from(w: &Workload) -> Result<Self, ConvertError> {
        let params = WorkloadParams::from_json(w.kind, &w.params)?;
        Ok(pb::Workload {
            id: w.id.to_string(),
            tenant_id: w.tenant_id.to_string(),
            kind: w.kind.to_field(),
            name: w.name.clone(),
            gpu_class: w.gpu_class.clone(),
            image: w.image.clone(),
            region: w.region.to_string(),
            placed_class: w.placed_class.clone().unwrap_or_default(),
            machine_id: w.machine_id.map(|m| m.to_string()).unwrap_or_default(),
            driver: w.driver.clone().unwrap_or_default(),
            attempt: w.attempt.get(),
            state: w.state.to_field(),
            state_reason: w.reason.clone(),
            fallback: w.fallback.clone(),
            fallback_after_s: w.fallback_after_s,
            created_at: Some(timestamp(w.created_at)),
            updated_at: Some(timestamp(w.updated_at)),
            version: w.version,
            params: Some(params.into()),
            device_uuids: w.devices.clone(),
            gpu_use: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use einsora_core::attempt::Attempt;
    use einsora_core::ids::{MachineId, TenantId, WorkloadId};
    use einsora_core::kind::WorkloadKind;
    use einsora_core::lifecycle::State;
    use einsora_core::region::Region;
    use time::macros::datetime;

    use super::*;
    use crate::common::v1::{EndpointParams, WorkloadKind as PbKind, WorkloadState as PbState};

    fn endpoint() -> Workload {
        Workload {
            owner: None,
            id: WorkloadId::new(),
            tenant_id: TenantId::new(),
            kind: WorkloadKind::Endpoint,
            name: "chat".into(),
            gpu_class: "l40s-48gb".into(),
            placed_class: None,
            units: 1,
            image: "openai-endpoint".into(),
            region: Region::new("local").unwrap(),
            machine_id: None,
            driver: None,
            devices: Vec::new(),
            attempt: Attempt::NONE,
            fallback: vec![],
            fallback_after_s: None,
            params: r#"{"model":"org/model"}"#.into(),
            state: State::Pending,
            reason: "created by you@example.com (browser session)".into(),
            version: 1,
            created_at: datetime!(2025-03-01 12:00 UTC),
            updated_at: datetime!(2025-03-01 12:01 UTC),
        }
    }

    #[test]
    fn a_workload_converts_with_its_params_member() {
        let w = endpoint();
        let pb = pb::Workload::try_from(&w).unwrap();
        assert_eq!(pb.id, w.id.to_string());
        assert_eq!(pb.kind, PbKind::Endpoint as i32);
        assert_eq!(pb.state, PbState::Pending as i32);
        assert_eq!((pb.placed_class.as_str(), pb.machine_id.as_str()), ("", ""));
        assert_eq!(pb.state_reason, w.reason);
        assert_eq!(
            pb.updated_at.unwrap().seconds,
            w.updated_at.unix_timestamp()
        );
        assert_eq!(
            pb.params,
            Some(pb::workload::Params::Endpoint(EndpointParams {
                model: "org/model".into(),
                slots: Some(1),
                served_name: Some("model".into()),
                park_after_idle_s: None,
            }))
        );

        let machine = MachineId::new();
        let placed = Workload {
            placed_class: Some("l40s-48gb".into()),
            machine_id: Some(machine),
            driver: Some("docker".into()),
            attempt: Attempt::new(2),
            state: State::Running,
            ..w
        };
        let pb = pb::Workload::try_from(&placed).unwrap();
        assert_eq!(pb.machine_id, machine.to_string());
        assert_eq!((pb.driver.as_str(), pb.attempt), ("docker", 2));
    }

    #[test]
    fn corrupt_params_are_an_error() {
        let w = Workload {
            params: "{}".into(),
            ..endpoint()
        };
        assert!(pb::Workload::try_from(&w).is_err());
    }
}
