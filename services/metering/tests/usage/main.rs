//! Usage accounting on a real store: every case runs on SQLite and on a real Postgres. The
//! clock is injected (each pass is given its `now`), and timelines are moved in time with SQL,
//! so no test waits for an hour to pass.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod harness;

mod boundaries;
mod schedule;

// Each case once per engine: `sqlite::<case>` and `postgres::<case>`.
einsora_testkit::on_both_engines! {
    boundaries::a_run_across_an_hour_boundary_is_split_at_it,
    boundaries::replays_and_restarts_never_double_count,
    boundaries::a_running_workload_is_accounted_up_to_now,
    boundaries::a_changes_pass_leaves_unchanged_running_workloads_to_the_sweep,
    boundaries::a_deleted_workload_keeps_its_usage,
    schedule::passes_follow_changes_and_stop_on_shutdown,
}
