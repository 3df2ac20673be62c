-- Idempotency-Key (docs/api.md, "Idempotency-Key"; ADR 0016). The table is 0001's: a row per
-- user and key, with the request's hash (method, path, canonical body). `status` 0 is a
-- request still in progress; otherwise the HTTP status of its answer, whose JSON body is
-- `response`, or '' when the answer carried a secret and wasn't kept. Rows older than
-- EINSORA_IDEMPOTENCY_TTL (24 hours) are swept as new ones come in: by creation time.

CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
