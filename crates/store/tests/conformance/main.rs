//! The store conformance suite: every case runs against SQLite and against a real Postgres
//! server (started from the installed server binaries), so both engines keep the same semantics.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod harness;

mod accounts;
mod activity;
mod backup;
mod capacity;
mod changes;
mod cpu_quotas;
mod enrolment;
mod idempotency;
mod inference_keys;
mod inventory;
mod leases;
mod metering;
mod migrations;
mod output;
mod quota;
mod races;
mod teams;
mod token_usage;
mod transitions;
mod usage_report;
mod users;
mod workloads;

// Each case once per engine: `sqlite::<case>` and `postgres::<case>`.
einsora_testkit::on_both_engines! {
    backup::every_table_is_dumped_or_left_out_by_name,
    workloads::the_census_counts_a_regions_workloads_by_state,
    workloads::endpoints_last_requests_move_forward_only,
    leases::leases_are_listed_with_their_holders,
    activity::activity_is_read_newest_first_filtered_and_paged,
    activity::an_actions_entry_is_written_in_its_transaction_or_not_at_all,
    activity::the_activity_sweep_drops_entries_before_the_cutoff,
    output::output_is_kept_in_order_once_and_resumes_from_its_head,
    output::output_reads_only_what_was_printed_since,
    output::a_batch_of_many_lines_is_kept_whole_and_numbered,
    output::output_past_a_cap_drops_the_oldest_and_says_so,
    output::the_retention_sweep_drops_lines_received_before_the_cutoff,
    transitions::every_legal_step_is_recorded,
    transitions::every_illegal_step_is_refused_and_changes_nothing,
    transitions::provisioning_needs_admission_and_pending_needs_start,
    transitions::admission_records_placement_and_a_new_attempt,
    transitions::notes_change_no_state,
    transitions::a_batch_applies_each_step_on_its_own,
    transitions::a_step_the_database_refuses_fails_alone,
    races::two_writers_exactly_one_wins,
    quota::concurrent_creates_stop_at_the_quota,
    quota::start_rechecks_quota,
    quota::default_and_missing_quota_rows,
    capacity::held_by_placed_class_else_requested,
    leases::stale_epoch_is_refused_after_takeover,
    leases::released_lease_is_taken_at_once,
    migrations::applied_twice_changes_nothing,
    migrations::newer_database_is_refused,
    migrations::older_or_missing_database_is_refused,
    changes::another_connection_commit_wakes_waiters,
    workloads::lists_hide_deleted_unless_asked,
    workloads::names_are_unique_among_live_workloads,
    workloads::the_queue_is_first_come_first_by_the_latest_step_into_pending,
    accounts::users_are_unique_by_email,
    idempotency::a_key_starts_once_then_keeps_its_answer,
    idempotency::keys_are_scoped_by_user,
    idempotency::keys_expire_and_abandoned_claims_are_taken_over,
    idempotency::concurrent_claims_start_exactly_once,
    users::an_invite_is_taken_once_and_only_while_it_stands,
    users::a_disabled_user_authenticates_nothing,
    users::the_last_owner_stays_and_owners_of_things_stay,
    users::a_password_reset_works_once,
    teams::concurrent_creates_overrun_no_users_teams_or_tenants_quota,
    teams::team_and_user_quotas_follow_their_changes,
    cpu_quotas::cpu_and_memory_limits_refuse_what_would_pass_them,
    cpu_quotas::concurrent_creates_overrun_no_cpu_or_memory_limit,
    users::a_machines_owning_user_sets_whom_it_trusts,
    accounts::sessions_live_until_they_expire_or_end,
    accounts::tokens_live_until_revoked_or_expired,
    accounts::tickets_are_redeemed_exactly_once,
    inference_keys::inference_keys_live_until_revoked,
    inference_keys::tenant_inference_limits_are_set_whole,
    accounts::grants_live_as_long_as_their_credential,
    enrolment::enrolment_tokens_are_created_listed_and_revoked,
    enrolment::enrolment_tokens_are_scoped_by_tenant,
    enrolment::a_used_enrolment_token_is_not_revoked,
    enrolment::a_token_enrols_exactly_one_machine_however_many_redeem_it,
    enrolment::revoked_expired_and_unknown_tokens_enrol_nothing,
    enrolment::only_an_unused_unrevoked_unexpired_token_is_redeemable,
    enrolment::a_certificate_in_use_retires_the_machines_older_ones,
    enrolment::trusted_certificates_are_the_good_ones_of_those_asked,
    enrolment::a_flagged_machine_keeps_its_first_time_and_latest_reason,
    inventory::workload_reads_are_scoped_by_tenant,
    inventory::machines_are_read_by_their_owner_only,
    inventory::machines_count_the_tenants_workloads_holding_them,
    inventory::a_machines_gpu_use_is_its_last_sample,
    inventory::a_removal_pends_until_the_machine_confirms_it,
    inventory::usage_is_read_by_tenant_and_period,
    metering::metering_reads_changed_and_metered_workloads,
    metering::timelines_and_usage_of_many_workloads,
    metering::usage_changes_are_applied_whole_or_not_at_all,
    usage_report::usage_is_summed_by_user_team_and_class,
    token_usage::token_usage_is_added_once_per_batch_and_read_by_hour_or_summed,
}
