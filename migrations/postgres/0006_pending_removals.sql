-- Workloads deleted while their machine was away (offline past the failure threshold): the
-- machine is told to remove each when it returns, and the row goes once it says it did.

CREATE TABLE pending_removals (
    workload_id  UUID PRIMARY KEY REFERENCES workloads(id),
    machine_id   UUID NOT NULL REFERENCES machines(id),
    created_at   BIGINT NOT NULL
);
CREATE INDEX pending_removals_by_machine ON pending_removals (machine_id);
