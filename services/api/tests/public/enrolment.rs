use einsora_api::enrolment::{DEFAULT_LIFETIME, MAX_LIFETIME};
use einsora_core::ids::EnrolmentTokenId;
use einsora_proto::enrolment::v1 as pb;
use einsora_proto::enrolment::v1::enrolment_token_service_server::EnrolmentTokenService;
use prost_types::Timestamp;
use time::OffsetDateTime;
use tonic::{Code, Request, Status};

use crate::{Env, Who, assert_code, env, error_code};

fn create(name: &str) -> pb::CreateEnrolmentTokenRequest {
    pb::CreateEnrolmentTokenRequest {
        name: name.into(),
        ..pb::CreateEnrolmentTokenRequest::default()
    }
}

fn at(t: OffsetDateTime) -> Option<Timestamp> {
    Some(Timestamp {
        seconds: t.unix_timestamp(),
        nanos: 0,
    })
}

fn seconds(ts: Option<Timestamp>) -> i64 {
    ts.expect("a time").seconds
}

impl Env {
    async fn enrol(
        &self,
        req: Request<pb::CreateEnrolmentTokenRequest>,
    ) -> Result<pb::CreateEnrolmentTokenResponse, Status> {
        let created = self.enrolment.create_enrolment_token(req).await?;
        Ok(created.into_inner())
    }

    async fn enrolment_tokens(&self, who: &Who) -> Vec<pb::EnrolmentToken> {
        let req = who.req(pb::ListEnrolmentTokensRequest {});
        let list = self.enrolment.list_enrolment_tokens(req).await.unwrap();
        list.into_inner().enrolment_tokens
    }

    async fn revoke_enrolment(&self, who: &Who, id: &str) -> Result<pb::EnrolmentToken, Status> {
        let req = who.browser(pb::RevokeEnrolmentTokenRequest { id: id.into() });
        let revoked = self.enrolment.revoke_enrolment_token(req).await?;
        Ok(revoked.into_inner())
    }
}

#[tokio::test]
async fn a_session_creates_a_token_whose_secret_is_shown_once() {
    let env = env().await;
    let acme = env.tenant("acme", None).await;
    let before = OffsetDateTime::now_utc();
    let created = env.enrol(acme.browser(create("lab-box-3"))).await.unwrap();
    let secret = created.token;
    let (secret_part, pin) = secret
        .split_once('.')
        .expect("the secret, then the CA's pin");
    assert!(
        secret_part.starts_with("enr_") && secret_part.len() == 4 + 32,
        "≥128 bits"
    );
    assert_eq!(
        pin,
        "ab".repeat(32),
        "the installation CA's SHA-256, for the agent to pin"
    );
    let shown = created.enrolment_token.unwrap();
    assert_eq!(shown.prefix, secret[..8]);
    assert_eq!(
        (shown.name.as_str(), shown.region.as_str()),
        ("lab-box-3", "local")
    );
    let lifetime = seconds(shown.expires_at) - before.unix_timestamp();
    let default = DEFAULT_LIFETIME.whole_seconds();
    assert!((default..=default + 5).contains(&lifetime), "{lifetime} s");
    assert_eq!((shown.used_at, shown.revoked_at), (None, None));
    assert!(shown.machine_id.is_empty());

    let listed = env.enrolment_tokens(&acme).await;
    assert_eq!(listed, [shown], "an API token may list them");
    assert!(
        !format!("{listed:?}").contains(&secret[8..]),
        "never the secret"
    );
}

#[tokio::test]
async fn only_a_session_with_its_csrf_token_creates_one() {
    let env = env().await;
    let acme = env.tenant("acme", None).await;
    let status = assert_code(
        env.enrol(acme.req(create("by-token"))).await,
        Code::PermissionDenied,
    );
    assert!(status.message().contains("API token"), "{status:?}");
    let mut no_csrf = acme.browser(create("no-csrf"));
    no_csrf
        .metadata_mut()
        .remove(einsora_api::caller::CSRF_HEADER);
    assert_code(env.enrol(no_csrf).await, Code::PermissionDenied);
    assert_code(
        env.enrol(Request::new(create("anonymous"))).await,
        Code::Unauthenticated,
    );
    assert!(env.enrolment_tokens(&acme).await.is_empty());
}

#[tokio::test]
async fn names_regions_and_expiry_are_checked() {
    let env = env().await;
    let acme = env.tenant("acme", None).await;
    let now = OffsetDateTime::now_utc();
    let refused = [
        create(""),
        create(" padded"),
        pb::CreateEnrolmentTokenRequest {
            region: Some("elsewhere".into()),
            ..create("box")
        },
        pb::CreateEnrolmentTokenRequest {
            expires_at: at(now - time::Duration::minutes(1)),
            ..create("box")
        },
        pb::CreateEnrolmentTokenRequest {
            expires_at: at(now + MAX_LIFETIME + time::Duration::minutes(1)),
            ..create("box")
        },
    ];
    for req in refused {
        let shown = format!("{req:?}");
        let result = env.enrol(acme.browser(req)).await;
        assert_eq!(result.unwrap_err().code(), Code::InvalidArgument, "{shown}");
    }
    let later = now + time::Duration::hours(2);
    let req = pb::CreateEnrolmentTokenRequest {
        region: Some("local".into()),
        expires_at: at(later),
        ..create("box")
    };
    let created = env.enrol(acme.browser(req)).await.unwrap();
    let shown = created.enrolment_token.unwrap();
    assert_eq!(seconds(shown.expires_at), later.unix_timestamp());
    assert_eq!(env.enrolment_tokens(&acme).await.len(), 1);
}

#[tokio::test]
async fn another_tenants_token_is_not_found_like_an_unknown_id() {
    let env = env().await;
    let (acme, globex) = (
        env.tenant("acme", None).await,
        env.tenant("globex", None).await,
    );
    let created = env.enrol(acme.browser(create("lab-box"))).await.unwrap();
    let id = created.enrolment_token.unwrap().id;

    assert!(env.enrolment_tokens(&globex).await.is_empty());
    let foreign = assert_code(env.revoke_enrolment(&globex, &id).await, Code::NotFound);
    let unknown = EnrolmentTokenId::new().to_string();
    let unknown = assert_code(env.revoke_enrolment(&acme, &unknown).await, Code::NotFound);
    let wire = |s: &Status| {
        let headers = s.metadata().clone().into_headers();
        (s.message().to_owned(), s.details().to_vec(), headers)
    };
    assert_eq!(wire(&foreign), wire(&unknown), "byte-identical");
    let bad = env.revoke_enrolment(&acme, "not-an-id").await;
    assert_code(bad, Code::InvalidArgument);
    assert_eq!(env.enrolment_tokens(&acme).await[0].revoked_at, None);
}

#[tokio::test]
async fn revoking_is_idempotent_and_a_used_token_is_refused() {
    let env = env().await;
    let acme = env.tenant("acme", None).await;
    let id = |r: pb::CreateEnrolmentTokenResponse| r.enrolment_token.unwrap().id;
    let unused = id(env.enrol(acme.browser(create("unused"))).await.unwrap());
    let used = id(env.enrol(acme.browser(create("used"))).await.unwrap());

    // An API token may revoke.
    let req = acme.req(pb::RevokeEnrolmentTokenRequest { id: unused.clone() });
    let revoked = env.enrolment.revoke_enrolment_token(req).await.unwrap();
    let at = revoked.into_inner().revoked_at.expect("revoked");
    let again = env.revoke_enrolment(&acme, &unused).await.unwrap();
    assert_eq!(again.revoked_at, Some(at), "revoking again changes nothing");

    // Enrolment arrives with the agents' Enroll RPC; until then, use it by hand.
    env.sql("UPDATE enrolment_tokens SET used_at = 1700000000000 WHERE name = 'used'");
    let status = assert_code(
        env.revoke_enrolment(&acme, &used).await,
        Code::FailedPrecondition,
    );
    assert_eq!(error_code(&status), "conflict");
    assert!(
        status.message().contains("revoke the machine"),
        "{status:?}"
    );
    let listed = env.enrolment_tokens(&acme).await;
    assert_eq!(listed[1].revoked_at, None);

    // Revoking a session's call needs its CSRF token too.
    let mut no_csrf = acme.browser(pb::RevokeEnrolmentTokenRequest { id: used });
    no_csrf
        .metadata_mut()
        .remove(einsora_api::caller::CSRF_HEADER);
    let refused = env.enrolment.revoke_enrolment_token(no_csrf).await;
    assert_code(refused, Code::PermissionDenied);
}
