-- Whether lines may be missing just before a line, how many unknown: a container's engine log
-- (capped, rotated by the engine) dropped them before the agent read them, and the engine keeps
-- no count (ADR 0011). A count the source does keep stays in dropped_before.
ALTER TABLE workload_output ADD COLUMN gap_before BOOLEAN NOT NULL DEFAULT FALSE;
