//! Local accounts (EINSORA_AUTH_MODE=local, and dev's seeded users): logging in with a
//! password, dashboard sessions, the caller's own details and password, API tokens and
//! inference keys.

pub(crate) mod inference_keys;
pub mod known_client;
pub mod limiter;
pub(crate) mod me;
pub mod passwords;
pub mod secrets;
mod tokens;
mod users;

use std::sync::Arc;
use std::time::{Duration, Instant};

use einsora_core::reasons::{Actor, Credential, SessionClient};
use einsora_proto::accounts::v1 as pb;
use einsora_proto::accounts::v1::account_service_server::AccountService;
use einsora_proto::convert::{ProtoEnum, timestamp};
use einsora_store::{NewSession, PasswordLogin, SecretHash, User};
use time::OffsetDateTime;
use tonic::{Request, Response, Status};

use crate::caller::{Access, Auth, Presented};
use crate::{context, status};
use limiter::{Client, LIMITS, Limiter, Limits};
use passwords::Passwords;

pub use inference_keys::InferenceKeys;
pub use tokens::Tokens;
pub(crate) use tokens::check_name;
pub use users::Users;

/// A session lasts a week from its login.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// Both a wrong password and an unknown email get this, so neither tells which it was.
const WRONG_LOGIN: &str = "wrong email or password";

/// `AccountService`: Login, Logout, GetMe, ChangePassword.
#[derive(Debug)]
pub struct Accounts {
    auth: Arc<Auth>,
    passwords: Arc<Passwords>,
    limiter: Limiter,
}

impl Accounts {
    /// A write only a browser session may make: its user and session, or `refusal` for a token.
    async fn session_write(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        refusal: &'static str,
    ) -> Result<(User, SecretHash), Status> {
        let auth = self.auth.authenticate(metadata, Access::Write).await?;
        match auth.credential {
            Presented::Session { id_hash, .. } => Ok((auth.user, id_hash)),
            _ => Err(Status::permission_denied(refusal)),
        }
    }

    pub fn new(auth: Arc<Auth>, passwords: Arc<Passwords>) -> Self {
        Self::with_limits(auth, passwords, LIMITS)
    }

    /// With other login limits than [`LIMITS`] (tests scale the timers down).
    pub fn with_limits(auth: Arc<Auth>, passwords: Arc<Passwords>, limits: Limits) -> Self {
        Accounts {
            auth,
            passwords,
            limiter: Limiter::new(limits),
        }
    }
}

/// Whether `email` can be an account's address: an `@` between two non-empty parts, no space
/// or control character, at most 254 bytes. The error names the address.
pub fn check_email(email: &str) -> Result<(), String> {
    let valid = email.len() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && email
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty());
    if !valid {
        return Err(format!("{email:?} is not an email address"));
    }
    Ok(())
}

/// Emails compare without case or surrounding space.
pub fn normalize_email(email: &str) -> String {
    email.trim().to_lowercase()
}

fn rate_limited(retry: Duration) -> Status {
    let mut status = Status::resource_exhausted("too many failed sign-ins; try again later");
    let seconds = retry.as_secs() + u64::from(retry.subsec_nanos() > 0);
    status
        .metadata_mut()
        .insert("retry-after", seconds.max(1).into());
    status
}

impl Accounts {
    async fn password_login(&self, email: &str) -> Result<Option<PasswordLogin>, Status> {
        let store = self.auth.store();
        store.password_login(email).await.map_err(status::store)
    }

    /// The account whose password `password` is, under the login limits for `client`; `None`
    /// for a wrong password and an unknown email alike (both spend one hash). `login` is the
    /// account's record if it was already looked up (a known client's proof needed it).
    async fn check_password(
        &self,
        email: &str,
        password: String,
        client: Client<'_>,
        login: Option<Option<PasswordLogin>>,
        session: SessionClient,
    ) -> Result<Option<PasswordLogin>, Status> {
        self.limiter
            .begin(client, Instant::now())
            .map_err(rate_limited)?;
        let login = match login {
            Some(login) => login,
            None => self.password_login(email).await?,
        };
        let phc = login.as_ref().map(|l| l.phc.clone());
        if !self.passwords.verify(password, phc).await? {
            // A known account's tenant logs the failed sign-in.
            if let Some(login) = &login {
                context::attempted(context::Who {
                    tenant: login.user.tenant_id,
                    user: login.user.id,
                    subject: &login.user.email,
                    actor: signing_in(&login.user.email, session),
                    write: true,
                });
            }
            return Ok(None);
        }
        self.limiter.succeeded(client);
        Ok(login)
    }

    /// Login's check: a client that presents a proof of an earlier sign-in to this account
    /// has its own limits; any other is known by its address.
    async fn sign_in(
        &self,
        email: &str,
        password: String,
        addr: Option<std::net::IpAddr>,
        proofs: &[String],
        session: SessionClient,
    ) -> Result<Option<PasswordLogin>, Status> {
        let anonymous = Client::Anonymous { email, addr };
        if proofs.is_empty() {
            return self
                .check_password(email, password, anonymous, None, session)
                .await;
        }
        let login = self.password_login(email).await?;
        let now = OffsetDateTime::now_utc();
        let known = login
            .as_ref()
            .and_then(|l| known_client::check(proofs, &l.user.id, &l.phc, now));
        let client = known.as_ref().map_or(anonymous, Client::Known);
        self.check_password(email, password, client, Some(login), session)
            .await
    }
}

/// Who signs in, as the activity log names them: the account, by the session it asks for.
fn signing_in(email: &str, client: SessionClient) -> String {
    let credential = match client {
        SessionClient::Browser => Credential::BrowserSession,
        SessionClient::Cli => Credential::CliSession,
    };
    Actor {
        subject: email.to_owned(),
        credential,
    }
    .to_string()
}

fn random_secret() -> Result<String, Status> {
    secrets::new_secret().map_err(status::internal)
}

#[tonic::async_trait]
impl AccountService for Accounts {
    async fn login(
        &self,
        request: Request<pb::LoginRequest>,
    ) -> Result<Response<pb::LoginResponse>, Status> {
        let addr = Auth::client_addr(request.metadata());
        let proofs = known_client::presented(request.metadata());
        let pb::LoginRequest {
            email,
            password,
            client,
        } = request.into_inner();
        // Unsaid is the dashboard's; an unknown value is refused before the password is checked.
        let client = match client {
            0 => SessionClient::Browser,
            raw => SessionClient::from_field("client", raw).map_err(status::invalid)?,
        };
        let email = normalize_email(&email);
        let Some(login) = self
            .sign_in(&email, password, addr, &proofs, client)
            .await?
        else {
            return Err(Status::unauthenticated(WRONG_LOGIN));
        };
        context::authenticated(context::Who {
            tenant: login.user.tenant_id,
            user: login.user.id,
            subject: &login.user.email,
            actor: signing_in(&login.user.email, client),
            write: true,
        });
        // A new ID at every login: a session ID planted before it is worth nothing.
        let (session_id, csrf_token) = (random_secret()?, random_secret()?);
        let expires_at = OffsetDateTime::now_utc() + SESSION_LIFETIME;
        let session = NewSession {
            id_hash: secrets::sha256(&session_id),
            user_id: login.user.id,
            csrf_hash: secrets::sha256(&csrf_token),
            address: addr.map(|a| a.to_string()).unwrap_or_default(),
            client,
            expires_at,
        };
        self.auth
            .store()
            .create_session(&session)
            .await
            .map_err(status::store)?;
        let proof = known_client::issue(&login.user.id, &login.phc, OffsetDateTime::now_utc())
            .map_err(status::internal)?;
        let mut response = Response::new(pb::LoginResponse {
            session_id,
            session: Some(pb::Session {
                me: Some(me::me(&login.user, me::session_credential(client))),
                csrf_token,
                expires_at: Some(timestamp(expires_at)),
            }),
        });
        let proof = proof.parse().map_err(status::internal)?;
        response
            .metadata_mut()
            .insert(known_client::METADATA, proof);
        Ok(response)
    }

    async fn logout(
        &self,
        request: Request<pb::LogoutRequest>,
    ) -> Result<Response<pb::LogoutResponse>, Status> {
        let refusal = "an API token has no session to end: revoke the token instead";
        let (_, id_hash) = self.session_write(request.metadata(), refusal).await?;
        self.auth
            .store()
            .delete_session(&id_hash)
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::LogoutResponse {}))
    }

    async fn get_me(&self, request: Request<pb::GetMeRequest>) -> Result<Response<pb::Me>, Status> {
        let auth = self
            .auth
            .authenticate(request.metadata(), Access::Read)
            .await?;
        Ok(Response::new(me::me(&auth.user, me::credential(&auth))))
    }

    async fn change_password(
        &self,
        request: Request<pb::ChangePasswordRequest>,
    ) -> Result<Response<pb::ChangePasswordResponse>, Status> {
        let refusal = "an API token can't change the password: sign in";
        let (user, id_hash) = self.session_write(request.metadata(), refusal).await?;
        let req = request.into_inner();
        passwords::check_new(&req.new_password)
            .map_err(|rule| Status::invalid_argument(format!("new_password: {rule}")))?;
        // A stolen session mustn't become a way to guess the password either; its failures
        // are its own, so nobody else's delay the owner's change.
        let session = Client::Known(&id_hash);
        // (Authenticated already: a wrong password is logged as this caller's refusal.)
        let browser = SessionClient::Browser;
        let checked =
            self.check_password(&user.email, req.current_password, session, None, browser);
        if checked.await?.is_none() {
            return Err(Status::permission_denied("current_password is wrong"));
        }
        let phc = self.passwords.hash(req.new_password).await?;
        let store = self.auth.store();
        store
            .set_password(user.id, &phc)
            .await
            .map_err(status::store)?;
        store
            .delete_other_sessions(user.id, Some(&id_hash))
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::ChangePasswordResponse {}))
    }
}
