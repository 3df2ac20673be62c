//! Store records to proto messages. Conversions of core types live in `einsora_proto::convert`;
//! these records are the store's own, so their conversions live here.

use einsora_core::machine::GpuSample;
use einsora_core::workload::Workload;
use einsora_proto::common::v1 as common_pb;
use einsora_proto::convert::{ProtoEnum, timestamp};
use einsora_proto::enrolment::v1 as enrolment_pb;
use einsora_proto::machines::v1 as machines_pb;
use einsora_proto::usage::v1 as usage_pb;
use einsora_proto::workloads::v1 as pb;
use einsora_store::{EnrolmentTokenRecord, Event, MachineRecord, OutputLine, UsageRecord};
use time::{Duration, OffsetDateTime};
use tonic::Status;

use crate::status;

/// A machine is online if its agent was seen this recently.
pub const ONLINE_WITHIN: Duration = Duration::minutes(3);

/// A stored workload whose parameters don't read back is corrupt: an internal error.
pub fn workload(w: &Workload) -> Result<pb::Workload, Status> {
    pb::Workload::try_from(w).map_err(|e| status::internal(format!("workload {}: {e}", w.id)))
}

pub fn workloads(ws: &[Workload]) -> Result<Vec<pb::Workload>, Status> {
    ws.iter().map(workload).collect()
}

pub fn log_line(l: &OutputLine) -> pb::LogLine {
    pb::LogLine {
        number: l.seq,
        attempt: l.attempt,
        stream: l.stream.as_str().to_owned(),
        printed_at: Some(timestamp(l.printed_at)),
        text: l.text.clone(),
        dropped_before: l.dropped_before,
        gap_before: l.gap_before,
    }
}

pub fn event(e: &Event) -> pb::WorkloadEvent {
    pb::WorkloadEvent {
        from_state: e.from.map(ProtoEnum::to_field).unwrap_or_default(),
        to_state: e.to.to_field(),
        note: e.is_note(),
        reason: e.reason.clone(),
        attempt: e.attempt.get(),
        at: Some(timestamp(e.at)),
    }
}

pub fn usage(r: &UsageRecord) -> usage_pb::UsageRecord {
    usage_pb::UsageRecord {
        tenant_id: r.tenant_id.to_string(),
        workload_id: r.workload_id.to_string(),
        region: r.region.to_string(),
        machine_id: r.machine_id.map(|m| m.to_string()).unwrap_or_default(),
        placed_class: r.placed_class.clone(),
        hour_start: Some(timestamp(r.hour_start)),
        seconds: r.seconds,
        units: r.units,
    }
}

/// Revoked, online (seen within [`ONLINE_WITHIN`]) or offline.
pub fn machine_status(r: &MachineRecord, now: OffsetDateTime) -> machines_pb::MachineStatus {
    match (r.revoked_at, r.last_seen_at) {
        (Some(_), _) => machines_pb::MachineStatus::Revoked,
        (None, Some(seen)) if now - seen <= ONLINE_WITHIN => machines_pb::MachineStatus::Online,
        (None, _) => machines_pb::MachineStatus::Offline,
    }
}

/// `r` as the API shows it; each device names the workloads of `holding` (the reader's, holding
/// capacity) that hold it.
pub fn machine(
    r: &MachineRecord,
    holding: &[Workload],
    now: OffsetDateTime,
) -> machines_pb::Machine {
    let status = machine_status(r, now);
    machines_pb::Machine {
        drivers: r.drivers.clone(),
        models: r.models.iter().map(Into::into).collect(),
        gpu_note: r.gpu_note.map(|n| n.words().to_owned()).unwrap_or_default(),
        vm: r.vm.map(Into::into),
        status: status.into(),
        last_seen_at: r.last_seen_at.map(timestamp),
        workload_count: r.workload_count,
        created_at: Some(timestamp(r.created_at)),
        revoked_at: r.revoked_at.map(timestamp),
        flag: r.flag.as_ref().map(|f| machines_pb::MachineFlag {
            reason: f.what.clone(),
            since: Some(timestamp(f.since)),
            last: Some(timestamp(f.last)),
        }),
        devices: r
            .machine
            .devices
            .iter()
            .map(|d| machines_pb::Device {
                workload_ids: holding
                    .iter()
                    .filter(|w| w.machine_id == Some(r.machine.id) && w.devices.contains(&d.uuid))
                    .map(|w| w.id.to_string())
                    .collect(),
                gpu_use: gpu_use(&r.gpu_usage, std::slice::from_ref(&d.uuid), r.gpu_usage_at),
                ..machines_pb::Device::from(d)
            })
            .collect(),
        owner_user_id: r
            .machine
            .owner_user
            .map(|u| u.to_string())
            .unwrap_or_default(),
        trusted_user_ids: r
            .machine
            .trusted_users
            .iter()
            .map(ToString::to_string)
            .collect(),
        ..machines_pb::Machine::from(&r.machine)
    }
}

/// How busy the GPUs named were at the sample taken `at`: their memory used, summed, and their
/// mean utilisation; `None` when the sample has none of them (or there is no sample).
pub fn gpu_use(
    samples: &[GpuSample],
    uuids: &[String],
    at: Option<OffsetDateTime>,
) -> Option<common_pb::GpuUse> {
    let at = at?;
    let theirs: Vec<&GpuSample> = samples.iter().filter(|s| uuids.contains(&s.uuid)).collect();
    let count = u32::try_from(theirs.len()).ok().filter(|n| *n > 0)?;
    Some(common_pb::GpuUse {
        utilization_percent: theirs.iter().map(|s| s.utilization_percent).sum::<u32>() / count,
        // Each within its GPU's memory, which its agent says: never trusted not to overflow.
        memory_used_bytes: theirs
            .iter()
            .fold(0_u64, |sum, s| sum.saturating_add(s.memory_used_bytes)),
        sampled_at: Some(timestamp(at)),
    })
}

/// Never the secret: the store doesn't have it.
pub fn enrolment_token(r: &EnrolmentTokenRecord) -> enrolment_pb::EnrolmentToken {
    enrolment_pb::EnrolmentToken {
        id: r.id.to_string(),
        name: r.name.clone(),
        prefix: r.prefix.clone(),
        region: r.region.to_string(),
        created_at: Some(timestamp(r.created_at)),
        expires_at: Some(timestamp(r.expires_at)),
        used_at: r.used_at.map(timestamp),
        machine_id: r.machine_id.map(|m| m.to_string()).unwrap_or_default(),
        revoked_at: r.revoked_at.map(timestamp),
    }
}

#[cfg(test)]
mod tests {
    use einsora_core::ids::{MachineId, TenantId};
    use einsora_core::machine::Machine;
    use einsora_core::region::Region;
    use einsora_core::sharing::SharingLevel;
    use machines_pb::MachineStatus;

    use super::*;

    fn record(last_seen_at: Option<OffsetDateTime>) -> MachineRecord {
        MachineRecord {
            machine: Machine {
                trusted_users: Vec::new(),
                owner_user: None,
                id: MachineId::new(),
                owner: TenantId::new(),
                name: "studio".into(),
                region: Region::new("local").unwrap(),
                os: "macos".into(),
                arch: "aarch64".into(),
                cpus: 12,
                memory_bytes: 64 << 30,
                devices: vec![],
                sharing: SharingLevel::Private,
                cores: Some(einsora_core::machine::CpuCores {
                    performance: 8,
                    efficiency: 4,
                }),
            },
            drivers: vec!["macos-native".into()],
            models: vec![],
            gpu_note: None,
            vm: None,
            gpu_usage: vec![],
            gpu_usage_at: None,
            last_seen_at,
            revoked_at: None,
            created_at: OffsetDateTime::UNIX_EPOCH,
            workload_count: 2,
            flag: None,
        }
    }

    #[test]
    fn a_machine_is_online_within_three_minutes_of_its_last_sync() {
        let now = OffsetDateTime::now_utc();
        let status = |r: &MachineRecord| machine(r, &[], now).status;
        let online = MachineStatus::Online as i32;
        let offline = MachineStatus::Offline as i32;
        assert_eq!(status(&record(Some(now))), online);
        assert_eq!(status(&record(Some(now - ONLINE_WITHIN))), online);
        let late = now - ONLINE_WITHIN - Duration::seconds(1);
        assert_eq!(status(&record(Some(late))), offline);
        assert_eq!(status(&record(None)), offline);
        let cores = machine(&record(None), &[], now).cores.unwrap();
        assert_eq!((cores.performance, cores.efficiency), (8, 4));
        let revoked = MachineRecord {
            revoked_at: Some(now),
            ..record(Some(now))
        };
        assert_eq!(status(&revoked), MachineStatus::Revoked as i32);

        let pb = machine(&record(None), &[], now);
        assert_eq!(
            (pb.name.as_str(), pb.cpus, pb.workload_count),
            ("studio", 12, 2)
        );
        assert_eq!(pb.drivers, ["macos-native"]);
        assert_eq!(pb.gpu_note, "", "nothing to say");
        let noted = MachineRecord {
            gpu_note: Some(einsora_core::machine::GpuNote::NvidiaUnusable),
            ..record(None)
        };
        let words = machine(&noted, &[], now).gpu_note;
        assert!(
            words.starts_with("NVIDIA GPUs found, but Docker can't use them"),
            "{words}"
        );
    }
}
