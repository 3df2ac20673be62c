use einsora_core::attempt::Attempt;
use einsora_core::ids::WorkloadId;
use einsora_core::lifecycle::State::{self, *};
use einsora_store::Event;
use time::OffsetDateTime;
use time::macros::datetime;

use super::{HourOfUse, hours_of_use, unix_ms};

/// A timeline from `(to, at, attempt)` steps; a step into the state it is in is a note.
fn timeline(steps: &[(State, OffsetDateTime, u32)]) -> Vec<Event> {
    let workload_id = WorkloadId::new();
    let mut from = None;
    steps
        .iter()
        .zip(1..)
        .map(|(&(to, at, attempt), seq)| {
            let event = Event {
                seq,
                workload_id,
                from,
                to,
                reason: "test".into(),
                attempt: Attempt::new(attempt),
                at,
            };
            from = Some(to);
            event
        })
        .collect()
}

/// `(hour, seconds, attempt)` of each hour of use.
fn hours(events: &[Event], now: OffsetDateTime) -> Vec<(OffsetDateTime, u32, u32)> {
    hours_of_use(events, now)
        .into_iter()
        .map(|h: HourOfUse| {
            let hour = OffsetDateTime::from_unix_timestamp(h.hour_start_ms / 1000).unwrap();
            (hour, h.seconds, h.attempt.get())
        })
        .collect()
}

/// Created, admitted and running at `at`.
fn started(created: OffsetDateTime, running: OffsetDateTime) -> Vec<(State, OffsetDateTime, u32)> {
    vec![
        (Pending, created, 0),
        (Provisioning, created, 1),
        (Running, running, 1),
    ]
}

const LATER: OffsetDateTime = datetime!(2030-01-01 00:00 UTC);

#[test]
fn a_run_across_an_hour_boundary_is_split_at_it() {
    let mut steps = started(
        datetime!(2025-03-01 10:58 UTC),
        datetime!(2025-03-01 10:59:30 UTC),
    );
    steps.push((Stopping, datetime!(2025-03-01 11:00:45 UTC), 1));
    steps.push((Stopped, datetime!(2025-03-01 11:01 UTC), 1));
    assert_eq!(
        hours(&timeline(&steps), LATER),
        [
            (datetime!(2025-03-01 10:00 UTC), 30, 1),
            (datetime!(2025-03-01 11:00 UTC), 45, 1),
        ]
    );
}

#[test]
fn a_workload_still_running_is_counted_up_to_now() {
    let steps = started(
        datetime!(2025-03-01 10:29 UTC),
        datetime!(2025-03-01 10:30 UTC),
    );
    let events = timeline(&steps);
    assert_eq!(
        hours(&events, datetime!(2025-03-01 12:15 UTC)),
        [
            (datetime!(2025-03-01 10:00 UTC), 1800, 1),
            (datetime!(2025-03-01 11:00 UTC), 3600, 1),
            (datetime!(2025-03-01 12:00 UTC), 900, 1),
        ]
    );
    // At the boundary itself, the hour that just ended is complete and the next has nothing.
    assert_eq!(
        hours(&events, datetime!(2025-03-01 11:00 UTC)),
        [(datetime!(2025-03-01 10:00 UTC), 1800, 1)]
    );
}

#[test]
fn runs_of_one_hour_are_summed_across_stop_and_start() {
    let mut steps = started(
        datetime!(2025-03-01 10:00 UTC),
        datetime!(2025-03-01 10:05 UTC),
    );
    steps.extend([
        (Stopping, datetime!(2025-03-01 10:10 UTC), 1),
        (Stopped, datetime!(2025-03-01 10:11 UTC), 1),
        (Pending, datetime!(2025-03-01 10:15 UTC), 1),
        (Provisioning, datetime!(2025-03-01 10:16 UTC), 2),
        (Running, datetime!(2025-03-01 10:20 UTC), 2),
        (Failed, datetime!(2025-03-01 10:25:30 UTC), 2),
    ]);
    assert_eq!(
        hours(&timeline(&steps), LATER),
        [(datetime!(2025-03-01 10:00 UTC), 630, 2)],
        "5 min + 5.5 min, accounted to the latest attempt"
    );
}

#[test]
fn an_hour_belongs_to_the_attempt_that_ran_in_it_last() {
    let mut steps = started(
        datetime!(2025-03-01 09:00 UTC),
        datetime!(2025-03-01 09:30 UTC),
    );
    steps.extend([
        (Failed, datetime!(2025-03-01 09:40 UTC), 1),
        (Pending, datetime!(2025-03-01 10:50 UTC), 1),
        (Provisioning, datetime!(2025-03-01 10:51 UTC), 2),
        (Running, datetime!(2025-03-01 10:55 UTC), 2),
    ]);
    assert_eq!(
        hours(&timeline(&steps), datetime!(2025-03-01 11:10 UTC)),
        [
            (datetime!(2025-03-01 09:00 UTC), 600, 1),
            (datetime!(2025-03-01 10:00 UTC), 300, 2),
            (datetime!(2025-03-01 11:00 UTC), 600, 2),
        ]
    );
}

#[test]
fn notes_change_nothing() {
    let mut steps = started(
        datetime!(2025-03-01 10:00 UTC),
        datetime!(2025-03-01 10:00 UTC),
    );
    steps.extend([
        (Running, datetime!(2025-03-01 10:10 UTC), 1),
        (Stopping, datetime!(2025-03-01 10:20 UTC), 1),
        (Stopping, datetime!(2025-03-01 10:30 UTC), 1),
    ]);
    assert_eq!(
        hours(&timeline(&steps), LATER),
        [(datetime!(2025-03-01 10:00 UTC), 1200, 1)]
    );
}

#[test]
fn a_deleted_workload_is_counted_until_deletion_began() {
    let mut steps = started(
        datetime!(2025-03-01 10:00 UTC),
        datetime!(2025-03-01 10:00 UTC),
    );
    steps.extend([
        (Deleting, datetime!(2025-03-01 10:45 UTC), 1),
        (Deleted, datetime!(2025-03-01 10:46 UTC), 1),
    ]);
    assert_eq!(
        hours(&timeline(&steps), LATER),
        [(datetime!(2025-03-01 10:00 UTC), 2700, 1)]
    );
}

#[test]
fn a_full_hour_is_3600_seconds_and_less_than_a_second_is_nothing() {
    let mut steps = started(
        datetime!(2025-03-01 10:00 UTC),
        datetime!(2025-03-01 10:00 UTC),
    );
    steps.push((Stopping, datetime!(2025-03-01 11:00 UTC), 1));
    assert_eq!(
        hours(&timeline(&steps), LATER),
        [(datetime!(2025-03-01 10:00 UTC), 3600, 1)]
    );

    let mut blink = started(
        datetime!(2025-03-01 10:00 UTC),
        datetime!(2025-03-01 10:00 UTC),
    );
    blink.push((Failed, datetime!(2025-03-01 10:00:00.999 UTC), 1));
    assert_eq!(hours(&timeline(&blink), LATER), []);
}

#[test]
fn seconds_are_summed_before_rounding_down() {
    let mut steps = started(
        datetime!(2025-03-01 10:00 UTC),
        datetime!(2025-03-01 10:00 UTC),
    );
    steps.extend([
        (Failed, datetime!(2025-03-01 10:00:00.600 UTC), 1),
        (Pending, datetime!(2025-03-01 10:01 UTC), 1),
        (Provisioning, datetime!(2025-03-01 10:01 UTC), 2),
        (Running, datetime!(2025-03-01 10:02 UTC), 2),
        (Failed, datetime!(2025-03-01 10:02:00.600 UTC), 2),
    ]);
    assert_eq!(
        hours(&timeline(&steps), LATER),
        [(datetime!(2025-03-01 10:00 UTC), 1, 2)]
    );
}

#[test]
fn a_workload_that_never_ran_has_no_usage() {
    let steps = [
        (Pending, datetime!(2025-03-01 10:00 UTC), 0),
        (Provisioning, datetime!(2025-03-01 10:01 UTC), 1),
        (Failed, datetime!(2025-03-01 10:02 UTC), 1),
        (Deleting, datetime!(2025-03-01 10:03 UTC), 1),
        (Deleted, datetime!(2025-03-01 10:04 UTC), 1),
    ];
    assert_eq!(hours(&timeline(&steps), LATER), []);
    assert_eq!(hours(&[], LATER), []);
}

#[test]
fn time_that_runs_backwards_counts_nothing() {
    // Another controller's clock stopped it "before" it started.
    let mut steps = started(
        datetime!(2025-03-01 10:00 UTC),
        datetime!(2025-03-01 10:30 UTC),
    );
    steps.push((Stopping, datetime!(2025-03-01 10:29 UTC), 1));
    assert_eq!(hours(&timeline(&steps), LATER), []);

    // This clock is behind the one that recorded the start.
    let running = timeline(&started(
        datetime!(2025-03-01 10:00 UTC),
        datetime!(2025-03-01 10:30 UTC),
    ));
    assert_eq!(hours(&running, datetime!(2025-03-01 10:20 UTC)), []);
}

#[test]
fn accounting_twice_gives_the_same_answer() {
    let mut steps = started(
        datetime!(2025-03-01 10:00 UTC),
        datetime!(2025-03-01 10:59:30 UTC),
    );
    steps.push((Stopping, datetime!(2025-03-01 11:00:45 UTC), 1));
    let events = timeline(&steps);
    let first = hours_of_use(&events, LATER);
    assert_eq!(hours_of_use(&events, LATER), first);
    assert_eq!(
        hours_of_use(&events, datetime!(2031-06-01 00:00 UTC)),
        first,
        "a finished run no longer depends on the time"
    );
    let total: u32 = first.iter().map(|h| h.seconds).sum();
    assert_eq!(total, 75);
}

#[test]
fn hours_before_1970_are_on_the_hour_too() {
    let mut steps = started(
        datetime!(1969-12-31 23:00 UTC),
        datetime!(1969-12-31 23:59:50 UTC),
    );
    steps.push((Stopping, datetime!(1970-01-01 00:00:05 UTC), 1));
    let got = hours_of_use(&timeline(&steps), LATER);
    let starts: Vec<_> = got.iter().map(|h| (h.hour_start_ms, h.seconds)).collect();
    assert_eq!(starts, [(-3_600_000, 10), (0, 5)]);
    assert_eq!(unix_ms(datetime!(1969-12-31 23:59:59.9995 UTC)), -1);
}
