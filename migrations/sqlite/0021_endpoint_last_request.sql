-- Scale-to-zero: when an endpoint last served a request through the access proxy, or had one
-- in flight (the proxy reports them every few seconds), in milliseconds since the epoch. The
-- controller parks an endpoint that parks when idle once it has run that long past this (or
-- past its latest step into running, whichever is later); kept in the database so a controller
-- restart or failover doesn't park one that is in use. NULL: no request yet.

ALTER TABLE workloads ADD COLUMN last_request_at BIGINT;
