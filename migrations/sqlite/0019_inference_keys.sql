-- Inference keys (`isk_…`): credentials for a tenant's endpoints at the access proxy and
-- nothing else, owned by a user, scoped to some of the tenant's endpoints or all of them, each
-- with optional limits; and the tenant's own inference limits. Only the key's SHA-256 is kept.

CREATE TABLE inference_keys (
    id                   BLOB PRIMARY KEY,
    tenant_id            BLOB NOT NULL REFERENCES tenants(id),
    user_id              BLOB NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name                 TEXT NOT NULL,
    prefix               TEXT NOT NULL,
    key_hash             BLOB NOT NULL UNIQUE,
    -- A JSON list of endpoint workload IDs; NULL: every endpoint of the tenant.
    endpoints            TEXT,
    -- Limits, NULL being none of that kind.
    requests_per_minute  BIGINT CHECK (requests_per_minute IS NULL OR requests_per_minute >= 0),
    tokens_per_minute    BIGINT CHECK (tokens_per_minute IS NULL OR tokens_per_minute >= 0),
    tokens_per_day       BIGINT CHECK (tokens_per_day IS NULL OR tokens_per_day >= 0),
    created_at           BIGINT NOT NULL,
    revoked_at           BIGINT,
    last_used_at         BIGINT
);
CREATE INDEX inference_keys_tenant ON inference_keys (tenant_id, user_id);

-- A tenant's inference limits, over all its keys and API tokens; no row: none.
CREATE TABLE inference_limits (
    tenant_id            BLOB PRIMARY KEY REFERENCES tenants(id),
    requests_per_minute  BIGINT CHECK (requests_per_minute IS NULL OR requests_per_minute >= 0),
    tokens_per_minute    BIGINT CHECK (tokens_per_minute IS NULL OR tokens_per_minute >= 0),
    tokens_per_day       BIGINT CHECK (tokens_per_day IS NULL OR tokens_per_day >= 0),
    updated_at           BIGINT NOT NULL
);
