//! Inference keys (`isk_…`) at the proxy: which credential a bearer is sent to the api as, what
//! the api says a key may call (its scope) and the limits a caller's requests are held to: a
//! key's own and its tenant's; an API token (`tsk_…`) has only its tenant's.

use einsora_proto::accounts::v1 as accounts_pb;
use einsora_proto::internal::v1 as pb;
use einsora_proto::internal::v1::authenticate_request::Credential;
use uuid::Uuid;

use crate::ratelimit::{Limits, Rule, Subject};
use crate::upstream::Caller;

/// What every inference key starts with.
pub(crate) const PREFIX: &str = "isk_";

/// What an inference key may call, and its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyGrant {
    pub(crate) key_id: String,
    /// `None`: every endpoint of the tenant.
    pub(crate) endpoints: Option<Vec<Uuid>>,
    pub(crate) limits: Limits,
    /// Tokens recorded for it today (0 unless it has a daily limit).
    pub(crate) tokens_today: u64,
}

impl KeyGrant {
    /// Whether the key may call `endpoint`; one it may not is answered as unknown.
    pub(crate) fn allows(&self, endpoint: Uuid) -> bool {
        self.endpoints
            .as_ref()
            .is_none_or(|ids| ids.contains(&endpoint))
    }
}

/// The tenant's limits over all its keys and tokens, as the api said them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TenantLimits {
    pub(crate) limits: Limits,
    pub(crate) tokens_today: u64,
}

/// How a bearer credential is presented to the api: a key as a key, anything else as an API
/// token (which the api refuses unless it is one).
pub(crate) fn credential(bearer: &str) -> Credential {
    if bearer.starts_with(PREFIX) {
        Credential::InferenceKey(bearer.to_owned())
    } else {
        Credential::ApiToken(bearer.to_owned())
    }
}

pub(crate) fn limits(l: Option<&accounts_pb::InferenceLimits>) -> Limits {
    l.map(|l| Limits {
        requests_per_minute: l.requests_per_minute,
        tokens_per_minute: l.tokens_per_minute,
        tokens_per_day: l.tokens_per_day,
    })
    .unwrap_or_default()
}

/// The key's grant in an Authenticate answer, if it is one. An endpoint ID that doesn't parse
/// is one the key never reaches.
pub(crate) fn grant(answer: &pb::AuthenticateResponse) -> Option<KeyGrant> {
    let g = answer.inference_key.as_ref()?;
    let endpoints = (!g.all_endpoints).then(|| {
        g.endpoint_ids
            .iter()
            .filter_map(|id| Uuid::try_parse(id).ok())
            .collect()
    });
    Some(KeyGrant {
        key_id: g.key_id.clone(),
        endpoints,
        limits: limits(g.limits.as_ref()),
        tokens_today: g.tokens_today,
    })
}

pub(crate) fn tenant_limits(answer: &pb::AuthenticateResponse) -> TenantLimits {
    TenantLimits {
        limits: limits(answer.tenant_limits.as_ref()),
        tokens_today: answer.tenant_tokens_today,
    }
}

/// The limits a request of this caller is held to: its key's, then its tenant's.
pub(crate) fn rules(caller: &Caller) -> Vec<Rule> {
    let key = caller.key.as_ref().map(|k| Rule {
        subject: Subject::Key(k.key_id.clone()),
        limits: k.limits,
        recorded_today: k.tokens_today,
    });
    let tenant = Rule {
        subject: Subject::Tenant(caller.tenant_id.clone()),
        limits: caller.tenant_limits.limits,
        recorded_today: caller.tenant_limits.tokens_today,
    };
    key.into_iter().chain([tenant]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_go_as_keys_and_everything_else_as_a_token() {
        assert!(matches!(credential("isk_abc"), Credential::InferenceKey(_)));
        assert!(matches!(credential("tsk_abc"), Credential::ApiToken(_)));
        assert!(matches!(credential("ISK_abc"), Credential::ApiToken(_)));
    }

    #[test]
    fn a_scoped_key_allows_only_its_endpoints() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let answer = pb::AuthenticateResponse {
            inference_key: Some(pb::InferenceGrant {
                key_id: "k".into(),
                all_endpoints: false,
                endpoint_ids: vec![a.to_string(), "not an id".into()],
                limits: None,
                tokens_today: 0,
            }),
            ..pb::AuthenticateResponse::default()
        };
        let key = grant(&answer).unwrap();
        assert!(key.allows(a) && !key.allows(b));
        let mut all = answer.clone();
        all.inference_key.as_mut().unwrap().all_endpoints = true;
        assert!(grant(&all).unwrap().allows(b));
        assert!(grant(&pb::AuthenticateResponse::default()).is_none());
    }
}
