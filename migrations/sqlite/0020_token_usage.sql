-- Tokens that endpoints' answers used, as their engines counted them (the access proxy reads
-- each answer's usage): per hour, tenant, endpoint, inference key (NULL: an API token) and
-- user, each batch the proxy sends adding to its rows. No references: a count outlives the
-- key, user or endpoint it names, and a batch is never refused for one that is gone.

CREATE TABLE token_usage (
    id                 BLOB PRIMARY KEY,
    tenant_id          BLOB NOT NULL,
    endpoint_id        BLOB NOT NULL,
    key_id             BLOB,
    user_id            BLOB NOT NULL,
    hour_start         BIGINT NOT NULL,
    requests           BIGINT NOT NULL CHECK (requests >= 0),
    prompt_tokens      BIGINT NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens  BIGINT NOT NULL CHECK (completion_tokens >= 0)
);
-- One row per hour, endpoint, key and user; a row without a key is one of its own.
CREATE UNIQUE INDEX token_usage_keyed
    ON token_usage (tenant_id, hour_start, endpoint_id, user_id, key_id) WHERE key_id IS NOT NULL;
CREATE UNIQUE INDEX token_usage_unkeyed
    ON token_usage (tenant_id, hour_start, endpoint_id, user_id) WHERE key_id IS NULL;
-- A key's tokens since a time (its daily limit).
CREATE INDEX token_usage_key_hour ON token_usage (key_id, hour_start) WHERE key_id IS NOT NULL;

-- The batches already added, by the ID their sender gave them, so a batch sent again (its
-- answer was lost) adds nothing; kept a day.
CREATE TABLE token_usage_batches (
    id           BLOB PRIMARY KEY,
    received_at  BIGINT NOT NULL
);
CREATE INDEX token_usage_batches_received ON token_usage_batches (received_at);
