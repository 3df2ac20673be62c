-- The devices a workload holds on its machine, by UUID (SQLite flavour of
-- migrations/postgres/0007_workload_devices.sql): chosen by placement in the admission's
-- transaction, sent to its agent, kept across restarts. A JSON list of strings.

ALTER TABLE workloads ADD COLUMN devices TEXT NOT NULL DEFAULT '[]';
