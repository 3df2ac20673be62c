-- The trace context (a W3C `traceparent`) of the request that created a workload, when spans
-- are exported: the controller's work on the workload joins that trace. Empty otherwise.
ALTER TABLE workloads ADD COLUMN trace_context TEXT;
