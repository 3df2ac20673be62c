-- How busy each of a machine's GPUs is, as its agent last sampled it: a JSON
-- array of {"uuid", "utilization_percent", "memory_used_bytes"}, and when (ms since the epoch);
-- NULL until its first sample.

ALTER TABLE machines ADD COLUMN gpu_usage TEXT;
ALTER TABLE machines ADD COLUMN gpu_usage_at BIGINT;
