//! The accounts services called in-process through their tonic traits, with the metadata the
//! gateway would forward, on a real (SQLite) store.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod internal;
mod limits;
mod sessions;
mod setup;
mod tokens;

use std::sync::Arc;

use einsora_api::accounts::limiter::{LIMITS, Limits};
use einsora_api::accounts::passwords::Passwords;
use einsora_api::accounts::{Accounts, Tokens, known_client};
use einsora_api::caller::{Auth, CLIENT_ADDR_HEADER, CSRF_HEADER, SESSION_HEADER};
use einsora_api::internal::Internal;
use einsora_proto::accounts::v1 as pb;
use einsora_proto::accounts::v1::account_service_server::AccountService;
use einsora_proto::accounts::v1::token_service_server::TokenService;
use einsora_store::Store;
use einsora_testkit::db::TestDb;
use tonic::{Request, Status};

pub const EMAIL: &str = "owner@example.com";
pub const PASSWORD: &str = "correct horse battery";

#[derive(Debug)]
pub struct Api {
    pub store: Arc<dyn Store>,
    pub accounts: Accounts,
    pub tokens: Tokens,
    pub internal: Internal,
    _db: TestDb,
}

/// How a request presents itself: the metadata the gateway forwards.
#[derive(Debug, Clone, Default)]
pub struct Creds {
    pub session: Option<String>,
    pub csrf: Option<String>,
    pub bearer: Option<String>,
    pub addr: Option<&'static str>,
    /// Known-client proofs from earlier sign-ins.
    pub proofs: Vec<String>,
}

impl Creds {
    pub fn token(token: &str) -> Self {
        Creds {
            bearer: Some(token.into()),
            ..Creds::default()
        }
    }

    pub fn request<T>(&self, message: T) -> Request<T> {
        let mut req = Request::new(message);
        let md = req.metadata_mut();
        let mut put = |key: &'static str, value: &Option<String>| {
            if let Some(v) = value {
                md.insert(key, v.parse().unwrap());
            }
        };
        put(SESSION_HEADER, &self.session);
        put(CSRF_HEADER, &self.csrf);
        put(
            "authorization",
            &self.bearer.as_ref().map(|t| format!("Bearer {t}")),
        );
        put(CLIENT_ADDR_HEADER, &self.addr.map(str::to_owned));
        for proof in &self.proofs {
            md.append(known_client::METADATA, proof.parse().unwrap());
        }
        req
    }

    /// The same session without its CSRF token.
    pub fn without_csrf(&self) -> Self {
        Creds {
            csrf: None,
            ..self.clone()
        }
    }
}

/// A fresh store with the owner set up, and the services on it.
pub async fn api() -> Api {
    api_with(LIMITS).await
}

/// [`api`] with other login limits.
pub async fn api_with(limits: Limits) -> Api {
    let db = TestDb::sqlite().await;
    let store = Arc::clone(&db.store);
    einsora_api::setup::setup_owner(&*store, EMAIL, PASSWORD, false)
        .await
        .unwrap();
    let auth = Arc::new(Auth::new(Arc::clone(&store)));
    let passwords = Arc::new(Passwords::new().await.unwrap());
    Api {
        accounts: Accounts::with_limits(Arc::clone(&auth), passwords, limits),
        tokens: Tokens::new(Arc::clone(&auth)),
        internal: Internal::new(auth, Arc::new(einsora_core::catalog::Catalog::builtin())),
        store,
        _db: db,
    }
}

impl Api {
    pub async fn try_login(
        &self,
        email: &str,
        password: &str,
        addr: &'static str,
    ) -> Result<pb::LoginResponse, Status> {
        let creds = Creds {
            addr: Some(addr),
            ..Creds::default()
        };
        self.login_as(&creds, email, password)
            .await
            .map(|(answer, _)| answer)
    }

    /// A login with `creds`' address and proofs: the answer and the proof it hands out.
    pub async fn login_as(
        &self,
        creds: &Creds,
        email: &str,
        password: &str,
    ) -> Result<(pb::LoginResponse, String), Status> {
        let req = pb::LoginRequest {
            email: email.into(),
            password: password.into(),
            ..pb::LoginRequest::default()
        };
        let answer = self.accounts.login(creds.request(req)).await?;
        let proof = answer.metadata().get(known_client::METADATA);
        let proof = proof.expect("a login hands out a proof").to_str();
        let proof = proof.unwrap().to_owned();
        Ok((answer.into_inner(), proof))
    }

    /// Logs the owner in; the session's credentials, CSRF token included.
    pub async fn login(&self) -> Creds {
        let r = self.try_login(EMAIL, PASSWORD, "192.0.2.1").await.unwrap();
        Creds {
            session: Some(r.session_id),
            csrf: Some(r.session.unwrap().csrf_token),
            ..Creds::default()
        }
    }

    pub async fn me(&self, creds: &Creds) -> Result<pb::Me, Status> {
        self.accounts
            .get_me(creds.request(pb::GetMeRequest {}))
            .await
            .map(|r| r.into_inner())
    }

    pub async fn create_token(
        &self,
        creds: &Creds,
        name: &str,
    ) -> Result<pb::CreateTokenResponse, Status> {
        let req = pb::CreateTokenRequest {
            name: name.into(),
            expires_at: None,
        };
        self.tokens
            .create_token(creds.request(req))
            .await
            .map(|r| r.into_inner())
    }
}

pub use einsora_testkit::grpc::assert_code;
