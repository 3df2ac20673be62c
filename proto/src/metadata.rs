//! The `x-einsora-*` gRPC metadata keys the gateway and the services exchange, defined once
//! (docs/api.md, "The edge"). Secrets travel in some of them: never log their values.

/// Names which 409 a FAILED_PRECONDITION is (`conflict`, `quota_exceeded`,
/// `invalid_transition`), or that an UNAVAILABLE is [`NOT_READY`], [`PARKED`] or [`STANDBY`].
pub const ERROR: &str = "x-einsora-error";
/// [`ERROR`]'s value on the controller's UNAVAILABLE for a running workload whose machine
/// hasn't said where it listens yet: the workload's state, worth a retry, not a fault.
pub const NOT_READY: &str = "not_ready";
/// [`ERROR`]'s value on the controller's UNAVAILABLE for an endpoint parked after its idle time
/// (scale-to-zero): a request to it wakes it (`ApiInternalService.WakeEndpoint`).
pub const PARKED: &str = "parked";
/// [`ERROR`]'s value on a controller's UNAVAILABLE while it stands by (another leads its
/// region): agents and the access proxy try the region's next controller.
pub const STANDBY: &str = "standby";
/// The caller's IP as the gateway saw it.
pub const CLIENT_ADDR: &str = "x-einsora-client-addr";
/// The `einsora_session` cookie's value (secret).
pub const SESSION: &str = "x-einsora-session";
/// The `X-CSRF-Token` header (secret).
pub const CSRF: &str = "x-einsora-csrf";
/// Login only: each proof of an earlier sign-in (secret).
pub const KNOWN_CLIENT: &str = "x-einsora-known-client";
/// Set by the api on internal calls: the authenticated tenant and subject.
pub const TENANT: &str = "x-einsora-tenant";
pub const SUBJECT: &str = "x-einsora-subject";
