//! What the accounts API says about a caller and their tokens: never a secret.

use einsora_core::reasons::SessionClient;
use einsora_proto::accounts::v1 as pb;
use einsora_proto::convert::{ProtoEnum, timestamp};
use einsora_store::{ApiTokenRecord, User};

use crate::caller::{Authenticated, Presented};

pub fn me(user: &User, credential: pb::Credential) -> pb::Me {
    pb::Me {
        user_id: user.id.to_string(),
        email: user.email.clone(),
        tenant_id: user.tenant_id.to_string(),
        tenant_name: user.tenant_name.clone(),
        credential: Some(credential),
        role: user.role.to_field(),
    }
}

pub fn session_credential(client: SessionClient) -> pb::Credential {
    let description = match client {
        SessionClient::Browser => "browser session",
        SessionClient::Cli => "CLI session",
    };
    pb::Credential {
        kind: pb::CredentialKind::Session.into(),
        description: description.into(),
        ..pb::Credential::default()
    }
}

pub fn credential(auth: &Authenticated) -> pb::Credential {
    match &auth.credential {
        Presented::Session { client, .. } => session_credential(*client),
        Presented::Token(t) => pb::Credential {
            kind: pb::CredentialKind::ApiToken.into(),
            description: format!("API token {:?} ({}…)", t.name, t.prefix),
            token_id: t.id.to_string(),
            token_name: t.name.clone(),
            token_prefix: t.prefix.clone(),
        },
    }
}

pub fn api_token(t: &ApiTokenRecord) -> pb::ApiToken {
    pb::ApiToken {
        id: t.id.to_string(),
        name: t.name.clone(),
        prefix: t.prefix.clone(),
        created_at: Some(timestamp(t.created_at)),
        expires_at: t.expires_at.map(timestamp),
        last_used_at: t.last_used_at.map(timestamp),
        revoked_at: t.revoked_at.map(timestamp),
    }
}
