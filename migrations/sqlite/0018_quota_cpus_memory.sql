-- Quotas in CPUs and memory for CPU classes, beside the limit in the class's units (GPUs for a
-- GPU class, workloads for a CPU class): each limit a row states is checked at every create and
-- start, NULL being no limit of that kind. What a workload of the class counts comes from the
-- catalog's shape of the class (its cpus and memory_gib), at the time of the check.

ALTER TABLE quotas ADD COLUMN limit_cpus BIGINT CHECK (limit_cpus IS NULL OR limit_cpus >= 0);
ALTER TABLE quotas ADD COLUMN limit_memory_gib BIGINT
    CHECK (limit_memory_gib IS NULL OR limit_memory_gib >= 0);

-- A team's or user's row may now limit CPUs or memory alone, so its limit_units may be NULL
-- (SQLite can't drop a NOT NULL: each table is made again). A row states at least one limit:
-- one with none is no row.
CREATE TABLE team_quotas_0018 (
    team_id           BLOB NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    gpu_class         TEXT NOT NULL,
    limit_units       BIGINT CHECK (limit_units IS NULL OR limit_units >= 0),
    limit_cpus        BIGINT CHECK (limit_cpus IS NULL OR limit_cpus >= 0),
    limit_memory_gib  BIGINT CHECK (limit_memory_gib IS NULL OR limit_memory_gib >= 0),
    CHECK (limit_units IS NOT NULL OR limit_cpus IS NOT NULL OR limit_memory_gib IS NOT NULL),
    PRIMARY KEY (team_id, gpu_class)
);
INSERT INTO team_quotas_0018 (team_id, gpu_class, limit_units)
    SELECT team_id, gpu_class, limit_units FROM team_quotas;
DROP TABLE team_quotas;
ALTER TABLE team_quotas_0018 RENAME TO team_quotas;

CREATE TABLE user_quotas_0018 (
    user_id           BLOB NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    gpu_class         TEXT NOT NULL,
    limit_units       BIGINT CHECK (limit_units IS NULL OR limit_units >= 0),
    limit_cpus        BIGINT CHECK (limit_cpus IS NULL OR limit_cpus >= 0),
    limit_memory_gib  BIGINT CHECK (limit_memory_gib IS NULL OR limit_memory_gib >= 0),
    CHECK (limit_units IS NOT NULL OR limit_cpus IS NOT NULL OR limit_memory_gib IS NOT NULL),
    PRIMARY KEY (user_id, gpu_class)
);
INSERT INTO user_quotas_0018 (user_id, gpu_class, limit_units)
    SELECT user_id, gpu_class, limit_units FROM user_quotas;
DROP TABLE user_quotas;
ALTER TABLE user_quotas_0018 RENAME TO user_quotas;
