-- A machine's CPUs by kind, where its agent reports two kinds (a Mac's performance and
-- efficiency cores, from sysctl); NULL elsewhere.
ALTER TABLE machines ADD COLUMN performance_cores BIGINT;
ALTER TABLE machines ADD COLUMN efficiency_cores BIGINT;
