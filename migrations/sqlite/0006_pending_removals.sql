-- Workloads deleted while their machine was away (SQLite flavour of
-- migrations/postgres/0006_pending_removals.sql): the machine is told to remove each when it
-- returns, and the row goes once it says it did.

CREATE TABLE pending_removals (
    workload_id  BLOB PRIMARY KEY REFERENCES workloads(id),
    machine_id   BLOB NOT NULL REFERENCES machines(id),
    created_at   BIGINT NOT NULL
);
CREATE INDEX pending_removals_by_machine ON pending_removals (machine_id);
