-- The activity log (ADR 0012) (SQLite flavour of migrations/postgres/0011_activity.sql): one
-- row per API action of a tenant's users, and per call of theirs the API refused. Written in the
-- same transaction as the action it records (its own, for a refusal). `actor` is the
-- credential's description as timelines show it; `object_kind` and `object_id` name what the
-- action was on (none for a list or a sign-in); `result` is `ok` or the error code the caller
-- got.
CREATE TABLE activity (
    id           BLOB PRIMARY KEY,
    tenant_id    BLOB NOT NULL REFERENCES tenants(id),
    user_id      BLOB,
    at           BIGINT NOT NULL,
    actor        TEXT NOT NULL,
    action       TEXT NOT NULL,
    object_kind  TEXT,
    object_id    TEXT,
    result       TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    client_addr  TEXT
);
CREATE INDEX activity_tenant ON activity (tenant_id, id);
CREATE INDEX activity_at ON activity (at);
