//! A statuses report as the hub keeps it, by workload.

use std::collections::HashMap;

use einsora_core::ids::WorkloadId;
use einsora_proto::convert::WorkloadStatuses;

use super::hub::Reported;

/// Each workload's reported status; the entries that didn't convert were dropped already.
pub fn reported(statuses: WorkloadStatuses) -> HashMap<WorkloadId, Reported> {
    statuses
        .workloads
        .into_iter()
        .map(|s| {
            let reported = Reported {
                attempt: s.attempt,
                mode: s.mode,
                code: s.code,
                target: s.access_target,
            };
            (s.workload_id, reported)
        })
        .collect()
}
