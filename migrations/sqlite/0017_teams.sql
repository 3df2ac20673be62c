-- Teams within a tenant (a user is in at most one), and quotas per class for each team and each
-- user beside the tenant's own (quotas): a create or start must fit all three.

CREATE TABLE teams (
    id          BLOB PRIMARY KEY,
    tenant_id   BLOB NOT NULL REFERENCES tenants(id),
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

-- The user's team, if any.
ALTER TABLE users ADD COLUMN team_id BLOB REFERENCES teams(id);

-- A row per (team, class): no row, no limit of the team's (the tenant's still holds).
CREATE TABLE team_quotas (
    team_id      BLOB NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    gpu_class    TEXT NOT NULL,
    limit_units  BIGINT NOT NULL CHECK (limit_units >= 0),
    PRIMARY KEY (team_id, gpu_class)
);

-- A row per (user, class), likewise.
CREATE TABLE user_quotas (
    user_id      BLOB NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    gpu_class    TEXT NOT NULL,
    limit_units  BIGINT NOT NULL CHECK (limit_units >= 0),
    PRIMARY KEY (user_id, gpu_class)
);

-- What a user's and a team's quota checks sum.
CREATE INDEX workloads_owner_quota ON workloads (owner_id, gpu_class, state);
