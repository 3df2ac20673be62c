//! A statuses report as the hub keeps it: only entries that name a workload, an attempt, a mode
//! and a code count.

use std::collections::HashMap;

use einsora_core::agent::{Mode, StatusCode};
use einsora_core::ids::WorkloadId;
use einsora_proto::agent::v1 as pb;
use einsora_proto::convert::ProtoEnum;

use super::hub::{AccessTarget, Reported};

/// The statuses of a report that name a workload, an attempt, a mode and a code; others are
/// dropped (an agent never sends free text, and a malformed entry decides nothing).
pub fn reported(statuses: &pb::WorkloadStatuses) -> HashMap<WorkloadId, Reported> {
    statuses
        .workloads
        .iter()
        .filter_map(|s| {
            let workload = s.workload_id.parse::<WorkloadId>().ok()?;
            let mode = Mode::from_field("mode", s.mode).ok()?;
            let code = StatusCode::from_field("code", s.code).ok()?;
            Some((
                workload,
                Reported {
                    attempt: s.attempt,
                    mode,
                    code,
                    target: s.access_target.as_ref().and_then(target),
                },
            ))
        })
        .collect()
}

/// An absolute socket path and a token, or nothing.
fn target(t: &pb::AccessTarget) -> Option<AccessTarget> {
    let absolute = std::path::Path::new(&t.socket_path).is_absolute();
    (absolute && !t.token.is_empty()).then(|| AccessTarget {
        socket_path: t.socket_path.clone(),
        token: t.token.clone(),
    })
}
