-- Einsora's data model. Times are Unix milliseconds (BIGINT) in both engines, so one set of
-- queries serves SQLite and Postgres (docs/decisions/0001-one-set-of-queries-for-two-engines.md).
-- Secrets are stored only as SHA-256 hashes (tokens, sessions, tickets) or PHC strings.

CREATE TABLE tenants (
    id          UUID PRIMARY KEY,
    slug        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    trusted     INTEGER NOT NULL DEFAULT 0 CHECK (trusted IN (0, 1)),
    created_at  BIGINT NOT NULL
);

CREATE TABLE users (
    id            UUID PRIMARY KEY,
    tenant_id     UUID NOT NULL REFERENCES tenants(id),
    email         TEXT NOT NULL UNIQUE,
    display_name  TEXT NOT NULL,
    created_at    BIGINT NOT NULL
);

CREATE TABLE password_credentials (
    user_id     UUID PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    phc         TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE sessions (
    id_hash     BYTEA PRIMARY KEY,
    user_id     UUID NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    csrf_hash   BYTEA NOT NULL,
    address     TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE api_tokens (
    id            UUID PRIMARY KEY,
    user_id       UUID NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    tenant_id     UUID NOT NULL REFERENCES tenants(id),
    name          TEXT NOT NULL,
    prefix        TEXT NOT NULL,
    token_hash    BYTEA NOT NULL UNIQUE,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT,
    revoked_at    BIGINT,
    last_used_at  BIGINT
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

-- One row per (tenant, class); gpu_class '*' is the tenant's default for classes without a row.
-- limit_units NULL means unlimited. The row is locked while a create or start is decided.
CREATE TABLE quotas (
    tenant_id    UUID NOT NULL REFERENCES tenants(id),
    gpu_class    TEXT NOT NULL,
    limit_units  BIGINT CHECK (limit_units IS NULL OR limit_units >= 0),
    PRIMARY KEY (tenant_id, gpu_class)
);

CREATE TABLE machines (
    id            UUID PRIMARY KEY,
    owner_id      UUID NOT NULL REFERENCES tenants(id),
    name          TEXT NOT NULL,
    region        TEXT NOT NULL,
    os            TEXT NOT NULL,
    arch          TEXT NOT NULL,
    cpus          BIGINT NOT NULL,
    memory_bytes  BIGINT NOT NULL,
    accelerators  TEXT NOT NULL DEFAULT '[]',
    drivers       TEXT NOT NULL DEFAULT '[]',
    sharing       TEXT NOT NULL DEFAULT 'private'
                  CHECK (sharing IN ('private', 'invite-only', 'community')),
    last_seen_at  BIGINT,
    revoked_at    BIGINT,
    created_at    BIGINT NOT NULL
);
CREATE INDEX machines_owner ON machines (owner_id);
CREATE INDEX machines_region ON machines (region);

CREATE TABLE workloads (
    id                UUID PRIMARY KEY,
    tenant_id         UUID NOT NULL REFERENCES tenants(id),
    kind              TEXT NOT NULL CHECK (kind IN ('vm', 'notebook', 'endpoint')),
    name              TEXT NOT NULL,
    gpu_class         TEXT NOT NULL,
    placed_class      TEXT,
    units             BIGINT NOT NULL CHECK (units > 0),
    image             TEXT NOT NULL,
    region            TEXT NOT NULL,
    machine_id        UUID REFERENCES machines(id),
    driver            TEXT,
    attempt           BIGINT NOT NULL DEFAULT 0,
    fallback          TEXT NOT NULL DEFAULT '[]',
    fallback_after_s  BIGINT,
    params            TEXT NOT NULL DEFAULT '{}',
    state             TEXT NOT NULL CHECK (state IN ('pending', 'queued', 'provisioning',
                          'running', 'stopping', 'stopped', 'failed', 'deleting', 'deleted')),
    reason            TEXT NOT NULL,
    version           BIGINT NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);
CREATE UNIQUE INDEX workloads_live_name ON workloads (tenant_id, name) WHERE state <> 'deleted';
CREATE INDEX workloads_tenant ON workloads (tenant_id, id);
CREATE INDEX workloads_region_state ON workloads (region, state);
CREATE INDEX workloads_quota ON workloads (tenant_id, gpu_class, state);

CREATE TABLE workload_events (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workload_id  UUID NOT NULL REFERENCES workloads(id),
    tenant_id    UUID NOT NULL,
    from_state   TEXT,
    to_state     TEXT NOT NULL,
    reason       TEXT NOT NULL,
    attempt      BIGINT NOT NULL,
    at           BIGINT NOT NULL
);
CREATE INDEX workload_events_workload ON workload_events (workload_id, seq);

-- Every state change appends its timeline row in the same statement: a transition is one
-- compare-and-swap UPDATE (docs/decisions/0001-one-set-of-queries-for-two-engines.md).
CREATE FUNCTION einsora_workload_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO workload_events (workload_id, tenant_id, from_state, to_state, reason, attempt, at)
    VALUES (NEW.id, NEW.tenant_id, NULL, NEW.state, NEW.reason, NEW.attempt, NEW.created_at);
    RETURN NULL;
END;
$$;
CREATE TRIGGER workload_created AFTER INSERT ON workloads
    FOR EACH ROW EXECUTE FUNCTION einsora_workload_created();

CREATE FUNCTION einsora_workload_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO workload_events (workload_id, tenant_id, from_state, to_state, reason, attempt, at)
    VALUES (NEW.id, NEW.tenant_id, OLD.state, NEW.state, NEW.reason, NEW.attempt, NEW.updated_at);
    RETURN NULL;
END;
$$;
CREATE TRIGGER workload_changed AFTER UPDATE OF version ON workloads
    FOR EACH ROW WHEN (NEW.version <> OLD.version) EXECUTE FUNCTION einsora_workload_changed();

CREATE TABLE usage_records (
    id           UUID PRIMARY KEY,
    tenant_id    UUID NOT NULL REFERENCES tenants(id),
    workload_id  UUID NOT NULL REFERENCES workloads(id),
    region       TEXT NOT NULL,
    machine_id   UUID,
    placed_class TEXT NOT NULL,
    units        BIGINT NOT NULL,
    hour_start   BIGINT NOT NULL,
    seconds      BIGINT NOT NULL CHECK (seconds >= 0 AND seconds <= 3600),
    UNIQUE (workload_id, hour_start)
);
CREATE INDEX usage_records_tenant_hour ON usage_records (tenant_id, hour_start);

-- Region leases: the epoch grows with every new holder, and every controller write checks it.
CREATE TABLE leases (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    epoch       BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);

CREATE TABLE access_tickets (
    ticket_hash  BYTEA PRIMARY KEY,
    workload_id  UUID NOT NULL REFERENCES workloads(id),
    tenant_id    UUID NOT NULL,
    user_id      UUID NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    used_at      BIGINT
);

CREATE TABLE idempotency_keys (
    user_id        UUID NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    key            TEXT NOT NULL,
    request_hash   BYTEA NOT NULL,
    status         BIGINT NOT NULL,
    response       TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    PRIMARY KEY (user_id, key)
);

CREATE TABLE enrolment_tokens (
    id          UUID PRIMARY KEY,
    tenant_id   UUID NOT NULL REFERENCES tenants(id),
    name        TEXT NOT NULL,
    region      TEXT NOT NULL,
    prefix      TEXT NOT NULL,
    token_hash  BYTEA NOT NULL UNIQUE,
    created_by  UUID NOT NULL REFERENCES users(id),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT,
    machine_id  UUID REFERENCES machines(id),
    revoked_at  BIGINT
);

CREATE TABLE machine_certificates (
    serial       TEXT PRIMARY KEY,
    machine_id   UUID NOT NULL REFERENCES machines(id),
    fingerprint  BYTEA NOT NULL UNIQUE,
    not_before   BIGINT NOT NULL,
    not_after    BIGINT NOT NULL,
    revoked_at   BIGINT,
    created_at   BIGINT NOT NULL
);
CREATE INDEX machine_certificates_machine ON machine_certificates (machine_id);

-- The change signal: controllers LISTEN on einsora_changes; one notification per statement
-- that changes workloads or machines (Postgres folds duplicates within a transaction).
CREATE FUNCTION einsora_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('einsora_changes', TG_TABLE_NAME);
    RETURN NULL;
END;
$$;
CREATE TRIGGER workloads_notify AFTER INSERT OR UPDATE ON workloads
    FOR EACH STATEMENT EXECUTE FUNCTION einsora_notify_change();
CREATE TRIGGER machines_notify AFTER INSERT OR UPDATE ON machines
    FOR EACH STATEMENT EXECUTE FUNCTION einsora_notify_change();
