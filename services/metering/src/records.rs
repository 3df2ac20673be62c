//! From hours of use to usage records, and how they differ from the records already stored.
//!
//! A record carries the placement it was used on. The workload row knows only its current
//! attempt's placement, so an hour whose latest run was an earlier attempt keeps the placement
//! it was recorded with; only if it was never recorded does it take the row's.

use std::collections::BTreeMap;

use einsora_core::ids::{MachineId, UsageRecordId};
use einsora_core::workload::Workload;
use einsora_store::{UsageChange, UsageRecord};
use time::OffsetDateTime;

use crate::accounting::HourOfUse;

/// What `existing` must become for the workload's records to say `hours`; `None` when they
/// already do. `existing` are the workload's stored records.
pub fn usage_change(
    workload: &Workload,
    hours: &[HourOfUse],
    existing: &[UsageRecord],
) -> Option<UsageChange> {
    let hours: BTreeMap<OffsetDateTime, &HourOfUse> = hours
        .iter()
        .filter_map(|h| Some((hour_start(h.hour_start_ms)?, h)))
        .collect();
    let stored_by_hour: BTreeMap<OffsetDateTime, &UsageRecord> =
        existing.iter().map(|r| (r.hour_start, r)).collect();
    let mut upsert = Vec::new();
    for (&hour_start, hour) in &hours {
        let stored = stored_by_hour.get(&hour_start).copied();
        let placement = match stored {
            Some(r) if hour.attempt != workload.attempt => Placement::of_record(r),
            _ => Placement::of_workload(workload),
        };
        let record = UsageRecord {
            id: stored.map_or_else(UsageRecordId::new, |r| r.id),
            tenant_id: workload.tenant_id,
            workload_id: workload.id,
            region: workload.region.clone(),
            machine_id: placement.machine_id,
            placed_class: placement.class,
            units: placement.units,
            hour_start,
            seconds: hour.seconds,
        };
        if stored != Some(&record) {
            upsert.push(record);
        }
    }
    let remove_hours = existing
        .iter()
        .map(|r| r.hour_start)
        .filter(|stored| !hours.contains_key(stored))
        .collect();
    let change = UsageChange {
        workload_id: workload.id,
        upsert,
        remove_hours,
    };
    (!change.is_empty()).then_some(change)
}

/// Where an hour was used: a class, its units, and on agents the machine.
struct Placement {
    class: String,
    units: u32,
    machine_id: Option<MachineId>,
}

impl Placement {
    fn of_workload(w: &Workload) -> Self {
        Placement {
            // A metered state needs a placement (lifecycle), so the requested class is only a
            // fallback for a row edited by hand; capacity counts such a row the same way.
            class: w
                .placed_class
                .clone()
                .unwrap_or_else(|| w.gpu_class.clone()),
            units: w.units,
            machine_id: w.machine_id,
        }
    }

    fn of_record(r: &UsageRecord) -> Self {
        Placement {
            class: r.placed_class.clone(),
            units: r.units,
            machine_id: r.machine_id,
        }
    }
}

fn hour_start(ms: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
