-- Quotas in CPUs and memory for CPU classes, beside the limit in the class's units (GPUs for a
-- GPU class, workloads for a CPU class): each limit a row states is checked at every create and
-- start, NULL being no limit of that kind. What a workload of the class counts comes from the
-- catalog's shape of the class (its cpus and memory_gib), at the time of the check.

ALTER TABLE quotas ADD COLUMN limit_cpus BIGINT CHECK (limit_cpus IS NULL OR limit_cpus >= 0);
ALTER TABLE quotas ADD COLUMN limit_memory_gib BIGINT
    CHECK (limit_memory_gib IS NULL OR limit_memory_gib >= 0);

-- A team's or user's row may now limit CPUs or memory alone, so its limit_units may be NULL. A
-- row states at least one limit: one with none is no row.
ALTER TABLE team_quotas ALTER COLUMN limit_units DROP NOT NULL;
ALTER TABLE team_quotas ADD COLUMN limit_cpus BIGINT
    CHECK (limit_cpus IS NULL OR limit_cpus >= 0);
ALTER TABLE team_quotas ADD COLUMN limit_memory_gib BIGINT
    CHECK (limit_memory_gib IS NULL OR limit_memory_gib >= 0);
ALTER TABLE team_quotas ADD CONSTRAINT team_quotas_some_limit
    CHECK (limit_units IS NOT NULL OR limit_cpus IS NOT NULL OR limit_memory_gib IS NOT NULL);

ALTER TABLE user_quotas ALTER COLUMN limit_units DROP NOT NULL;
ALTER TABLE user_quotas ADD COLUMN limit_cpus BIGINT
    CHECK (limit_cpus IS NULL OR limit_cpus >= 0);
ALTER TABLE user_quotas ADD COLUMN limit_memory_gib BIGINT
    CHECK (limit_memory_gib IS NULL OR limit_memory_gib >= 0);
ALTER TABLE user_quotas ADD CONSTRAINT user_quotas_some_limit
    CHECK (limit_units IS NOT NULL OR limit_cpus IS NOT NULL OR limit_memory_gib IS NOT NULL);
