-- The devices a workload holds on its machine, by UUID: chosen by placement in the
-- admission's transaction, sent to its agent, kept across restarts. A JSON list of strings,
-- as the fallback list is.

ALTER TABLE workloads ADD COLUMN devices TEXT NOT NULL DEFAULT '[]';
