use einsora_core::attempt::Attempt;
use einsora_core::ids::{MachineId, UsageRecordId};
use einsora_core::workload::Workload;
use einsora_store::UsageRecord;
use time::OffsetDateTime;
use time::macros::datetime;

use super::usage_change;
use crate::accounting::{HourOfUse, unix_ms};
use crate::test_support::workload;

const H10: OffsetDateTime = datetime!(2025-03-01 10:00 UTC);
const H11: OffsetDateTime = datetime!(2025-03-01 11:00 UTC);

fn hour(start: OffsetDateTime, seconds: u32, attempt: u32) -> HourOfUse {
    HourOfUse {
        hour_start_ms: unix_ms(start),
        seconds,
        attempt: Attempt::new(attempt),
    }
}

fn stored(w: &Workload, start: OffsetDateTime, seconds: u32, class: &str) -> UsageRecord {
    UsageRecord {
        id: UsageRecordId::new(),
        tenant_id: w.tenant_id,
        workload_id: w.id,
        region: w.region.clone(),
        machine_id: None,
        placed_class: class.into(),
        units: 1,
        hour_start: start,
        seconds,
    }
}

#[test]
fn new_hours_are_recorded_on_the_workloads_placement() {
    let machine = MachineId::new();
    let w = workload(machine);
    let change = usage_change(&w, &[hour(H10, 30, 2), hour(H11, 45, 2)], &[]).unwrap();
    assert_eq!(change.workload_id, w.id);
    assert!(change.remove_hours.is_empty());
    let got: Vec<_> = change
        .upsert
        .iter()
        .map(|r| {
            (
                r.hour_start,
                r.seconds,
                r.placed_class.as_str(),
                r.units,
                r.machine_id,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (H10, 30, "gpu-a100", 2, Some(machine)),
            (H11, 45, "gpu-a100", 2, Some(machine)),
        ]
    );
    assert!(
        change
            .upsert
            .iter()
            .all(|r| r.tenant_id == w.tenant_id && r.workload_id == w.id)
    );
}

#[test]
fn records_that_already_say_it_change_nothing() {
    let w = workload(MachineId::new());
    let hours = [hour(H10, 30, 2), hour(H11, 45, 2)];
    let change = usage_change(&w, &hours, &[]).unwrap();
    assert_eq!(usage_change(&w, &hours, &change.upsert), None);
}

#[test]
fn a_growing_hour_is_rewritten_under_its_own_id() {
    let w = workload(MachineId::new());
    let first = usage_change(&w, &[hour(H10, 30, 2)], &[]).unwrap().upsert;
    let change = usage_change(&w, &[hour(H10, 30, 2), hour(H11, 60, 2)], &first).unwrap();
    assert_eq!(change.upsert.len(), 1, "only the new hour");
    let grown = usage_change(&w, &[hour(H10, 90, 2)], &first).unwrap();
    assert_eq!(grown.upsert[0].id, first[0].id);
    assert_eq!(grown.upsert[0].seconds, 90);
}

#[test]
fn an_earlier_attempts_hour_keeps_the_placement_it_was_recorded_with() {
    let w = workload(MachineId::new());
    let existing = [
        stored(&w, H10, 600, "cpu-1c-2g"),
        stored(&w, H11, 300, "cpu-1c-2g"),
    ];
    // 10:00 was attempt 1 only; attempt 2 also ran in 11:00, which it now owns.
    let change = usage_change(&w, &[hour(H10, 600, 1), hour(H11, 900, 2)], &existing).unwrap();
    assert_eq!(change.upsert.len(), 1);
    let r = &change.upsert[0];
    assert_eq!(
        (r.hour_start, r.seconds, r.placed_class.as_str(), r.id),
        (H11, 900, "gpu-a100", existing[1].id)
    );
}

#[test]
fn an_earlier_attempts_hour_never_recorded_takes_the_workloads_placement() {
    let w = workload(MachineId::new());
    let change = usage_change(&w, &[hour(H10, 600, 1)], &[]).unwrap();
    assert_eq!(change.upsert[0].placed_class, "gpu-a100");
}

#[test]
fn an_hour_the_timeline_no_longer_supports_is_removed() {
    let w = workload(MachineId::new());
    // Counted while it seemed to run past 11:00; the stop, committed late, says 10:59:59.
    let first = usage_change(&w, &[hour(H10, 3599, 2), hour(H11, 2, 2)], &[])
        .unwrap()
        .upsert;
    let change = usage_change(&w, &[hour(H10, 3599, 2)], &first).unwrap();
    assert!(change.upsert.is_empty());
    assert_eq!(change.remove_hours, [H11]);
}
