//! `TokenService`: the caller's API tokens. Only a session may create one (a token can't mint a
//! token); the secret is shown once, in the create response, and stored only as its SHA-256.

use std::sync::Arc;

use einsora_core::ids::TokenId;
use einsora_proto::accounts::v1 as pb;
use einsora_proto::accounts::v1::token_service_server::TokenService;
use einsora_proto::convert::optional_time;
use einsora_store::NewApiToken;
use time::OffsetDateTime;
use tonic::{Request, Response, Status};

use super::{me, secrets};
use crate::caller::{Access, Auth};
use crate::status;

const MAX_NAME_CHARS: usize = 64;

/// `TokenService`: CreateToken, ListTokens, RevokeToken.
#[derive(Debug)]
pub struct Tokens {
    auth: Arc<Auth>,
}

impl Tokens {
    pub fn new(auth: Arc<Auth>) -> Self {
        Tokens { auth }
    }
}

/// A token's name (API or enrolment token): 1-64 printable characters.
pub(crate) fn check_name(name: &str) -> Result<(), Status> {
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(Status::invalid_argument(format!(
            "name: use 1-{MAX_NAME_CHARS} printable characters"
        )));
    }
    if name.trim() != name {
        return Err(Status::invalid_argument(
            "name: no spaces at its start or end",
        ));
    }
    Ok(())
}

#[tonic::async_trait]
impl TokenService for Tokens {
    async fn create_token(
        &self,
        request: Request<pb::CreateTokenRequest>,
    ) -> Result<Response<pb::CreateTokenResponse>, Status> {
        let auth = self
            .auth
            .authenticate(request.metadata(), Access::Write)
            .await?;
        if auth.caller.via_token {
            return Err(Status::permission_denied(
                "an API token can't create tokens: sign in",
            ));
        }
        let req = request.into_inner();
        check_name(&req.name)?;
        let expires_at =
            optional_time("expires_at", req.expires_at.as_ref()).map_err(status::invalid)?;
        if expires_at.is_some_and(|t| t <= OffsetDateTime::now_utc()) {
            return Err(Status::invalid_argument("expires_at must be in the future"));
        }
        let token = secrets::new_token().map_err(status::internal)?;
        let new = NewApiToken {
            id: TokenId::new(),
            user_id: auth.user.id,
            tenant_id: auth.user.tenant_id,
            name: req.name,
            prefix: secrets::display_prefix(&token),
            token_hash: secrets::sha256(&token),
            expires_at,
        };
        let record = self
            .auth
            .store()
            .create_api_token(&new)
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::CreateTokenResponse {
            token,
            api_token: Some(me::api_token(&record)),
        }))
    }

    async fn list_tokens(
        &self,
        request: Request<pb::ListTokensRequest>,
    ) -> Result<Response<pb::ListTokensResponse>, Status> {
        let auth = self
            .auth
            .authenticate(request.metadata(), Access::Read)
            .await?;
        let tokens = self
            .auth
            .store()
            .api_tokens(auth.user.id)
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::ListTokensResponse {
            tokens: tokens.iter().map(me::api_token).collect(),
        }))
    }

    async fn revoke_token(
        &self,
        request: Request<pb::RevokeTokenRequest>,
    ) -> Result<Response<pb::ApiToken>, Status> {
        let auth = self
            .auth
            .authenticate(request.metadata(), Access::Write)
            .await?;
        let id: TokenId = crate::scoped::id(&request.get_ref().id)?;
        let revoked = self
            .auth
            .store()
            .revoke_api_token(auth.user.id, id)
            .await
            .map_err(status::store)?
            .ok_or_else(status::not_found)?;
        Ok(Response::new(me::api_token(&revoked)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use einsora_proto::schema::Schema;
    use regex::Regex;

    use super::*;

    #[test]
    fn names_are_short_and_printable() {
        assert!(check_name("laptop").is_ok());
        assert!(check_name("CI runner #2 ✓").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name(" laptop").is_err());
        assert!(check_name("lap\ntop").is_err());
        assert!(check_name(&"x".repeat(65)).is_err());
    }

    #[test]
    fn the_openapi_rules_allow_exactly_the_names_the_api_accepts() {
        let rules: HashMap<_, _> = Schema::load().unwrap().field_rules().into_iter().collect();
        let token = &rules["einsora.accounts.v1.CreateTokenRequest.name"];
        assert_eq!(
            token, &rules["einsora.enrolment.v1.CreateEnrolmentTokenRequest.name"],
            "both kinds of token take check_name's names"
        );
        assert!(token.required);
        let max = usize::try_from(token.max_length.unwrap()).unwrap();
        let pattern = Regex::new(token.string_pattern().unwrap().unwrap()).unwrap();
        // Letters, spaces of every kind, controls, and a byte-order mark (not a space in Rust).
        let samples = einsora_testkit::all_strings(
            "a é\t\u{85}\u{a0}\u{1680}\u{2009}\u{3000}\u{7f}\u{9f}\u{feff}",
            3,
        )
        .into_iter()
        .chain([
            "x".repeat(64),
            "x".repeat(65),
            "é".repeat(64),
            "é".repeat(65),
        ]);
        for name in samples {
            let allowed =
                !name.is_empty() && name.chars().count() <= max && pattern.is_match(&name);
            assert_eq!(check_name(&name).is_ok(), allowed, "{name:?}");
        }
    }
}
