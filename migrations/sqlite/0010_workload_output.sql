-- What workloads printed (ADR 0011) (SQLite flavour of migrations/postgres/0010_workload_output.sql): one row per line, numbered per
-- workload in the order the store took them (seq), with the attempt that printed it, its stream,
-- when it was printed (as its agent read it) and received, its text (secrets redacted) and what
-- it costs the caps (its text's bytes and a row's overhead), and how many lines its source dropped
-- just before it.
CREATE TABLE workload_output (
    workload_id     BLOB NOT NULL REFERENCES workloads(id),
    seq             BIGINT NOT NULL,
    tenant_id       BLOB NOT NULL,
    attempt         BIGINT NOT NULL,
    stream          TEXT NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    printed_at      BIGINT NOT NULL,
    received_at     BIGINT NOT NULL,
    text            TEXT NOT NULL,
    bytes           BIGINT NOT NULL,
    dropped_before  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (workload_id, seq)
);
CREATE INDEX workload_output_received ON workload_output (received_at);
CREATE INDEX workload_output_tenant ON workload_output (tenant_id, received_at);

-- One row per workload that has printed: the next line's number, the attempt its agent last
-- shipped and where its source is up to (offsets grow across attempts; a restarted agent resumes
-- there), what it keeps (as the caps count it),
-- and the lines dropped from its oldest end by the caps and the retention sweep.
CREATE TABLE workload_output_heads (
    workload_id     BLOB PRIMARY KEY REFERENCES workloads(id),
    tenant_id       BLOB NOT NULL,
    next_seq        BIGINT NOT NULL,
    attempt         BIGINT NOT NULL,
    source_offset   BIGINT NOT NULL,
    bytes           BIGINT NOT NULL,
    dropped_lines   BIGINT NOT NULL
);
CREATE INDEX workload_output_heads_tenant ON workload_output_heads (tenant_id);

-- The bytes each tenant's output holds, and (the nil tenant's row) the whole store's: what the
-- caps check, one row each. Every append locks the whole store's row first, so appends take
-- their locks in one order.
CREATE TABLE workload_output_totals (
    tenant_id       BLOB PRIMARY KEY,
    bytes           BIGINT NOT NULL
);
