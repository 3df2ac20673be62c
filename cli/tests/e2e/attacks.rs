//! Attacks on the edge and the accounts, over real HTTP: forged browser requests, bad and stale
//! credentials, session fixation, account probing and a login flood — and no secret in any log.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::cli::dev_password;
use crate::harness::log_gate::assert_no_secret_logged;
use crate::harness::solo::{Engine, Solo};
use crate::harness::world::{Credential, call, login, tenant, without_request_id};

const NOTEBOOK: &str =
    r#"{"kind":"notebook","name":"nb","gpu_class":"cpu-1c-2g","image":"jupyterlab"}"#;

#[test]
fn forged_browser_requests_are_refused() {
    let solo = Solo::start(&[("EINSORA_AUTH_MODE", "dev")]);
    let acme = tenant(&solo, "dev@acme");
    let Credential::Session { cookie, csrf } = &acme.session else {
        unreachable!()
    };
    let cookie = format!("einsora_session={cookie}");
    let json = ("Content-Type", "application/json");
    let post = |headers: &[(&str, &str)], body: &str| {
        solo.request("POST", "/v1/workloads", headers, Some(body))
    };

    let no_csrf = post(&[("Cookie", &cookie), json], NOTEBOOK);
    assert_eq!(no_csrf.status, 403, "missing CSRF header: {}", no_csrf.body);
    let wrong_csrf = post(
        &[("Cookie", &cookie), ("X-CSRF-Token", "0000"), json],
        NOTEBOOK,
    );
    assert_eq!(
        wrong_csrf.status, 403,
        "wrong CSRF header: {}",
        wrong_csrf.body
    );
    for origin in ["http://evil.example", "null", "http://127.0.0.1:1"] {
        let forged = post(
            &[
                ("Cookie", &cookie),
                ("X-CSRF-Token", csrf),
                ("Origin", origin),
                json,
            ],
            NOTEBOOK,
        );
        assert_eq!(forged.status, 403, "Origin {origin}: {}", forged.body);
    }
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let simple = post(
            &[
                ("Cookie", &cookie),
                ("X-CSRF-Token", csrf),
                ("Content-Type", content_type),
            ],
            NOTEBOOK,
        );
        assert_eq!(simple.status, 400, "{content_type}: {}", simple.body);
    }
    let listed = call(&solo, &acme.session, "GET", "/v1/workloads", None).json();
    assert_eq!(
        listed["workloads"].as_array().unwrap().len(),
        0,
        "none of those created anything"
    );

    let made = call(
        &solo,
        &acme.session,
        "POST",
        "/v1/workloads",
        Some(serde_json::from_str(NOTEBOOK).unwrap()),
    );
    assert_eq!(made.status, 202, "{}", made.body);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    for verb in ["stop", "start", "access"] {
        let get = call(
            &solo,
            &acme.session,
            "GET",
            &format!("/v1/workloads/{id}/{verb}"),
            None,
        );
        assert_eq!(get.status, 405, "GET {verb} must not act: {}", get.body);
    }
    let events = call(
        &solo,
        &acme.session,
        "GET",
        &format!("/v1/workloads/{id}/events"),
        None,
    )
    .json();
    // The controller may admit it meanwhile; no step may be a user's action.
    let actions: Vec<_> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["reason"].as_str())
        .filter(|r| r.contains("requested by") || r.starts_with("opened by"))
        .collect();
    assert!(actions.is_empty(), "no GET changed anything: {actions:?}");
    assert_no_secret_logged(&solo, &acme.secrets);
}

#[test]
fn bad_and_stale_credentials_are_refused_alike() {
    // On Postgres: token and session expiry and revocation are store queries.
    let solo = Solo::start_on(Engine::Postgres, &[("EINSORA_AUTH_MODE", "dev")]);
    let acme = tenant(&solo, "dev@acme");
    let mut secrets = acme.secrets.clone();
    let unauthenticated = call(&solo, &Credential::Nobody, "GET", "/v1/workloads", None);
    assert_eq!(unauthenticated.status, 401);
    let reference = without_request_id(&unauthenticated).1;
    let Credential::Token(good) = &acme.token else {
        unreachable!()
    };

    // Each stale credential is shown to work first, so its refusal is the expiry's or the
    // revocation's, not a token that never worked.
    let works = |token: &str| {
        let bearer = format!("Bearer {token}");
        solo.request("GET", "/v1/workloads", &[("Authorization", &bearer)], None)
    };
    let lifetime = time::Duration::seconds(BRIEF_LIFETIME_S);
    let expires_at = time::OffsetDateTime::now_utc() + lifetime;
    let expiring = json!({ "name": "brief", "expires_at": rfc3339(expires_at) });
    let brief = call(&solo, &acme.session, "POST", "/v1/tokens", Some(expiring));
    assert_eq!(brief.status, 200, "{}", brief.body);
    let brief_token = brief.json()["token"].as_str().unwrap().to_owned();
    secrets.push(brief_token.clone());
    let fresh = works(&brief_token);
    assert_eq!(
        fresh.status, 200,
        "an expiring token works until it expires: {}",
        fresh.body
    );

    let revocable = call(
        &solo,
        &acme.session,
        "POST",
        "/v1/tokens",
        Some(json!({ "name": "gone" })),
    )
    .json();
    let revoked = revocable["token"].as_str().unwrap().to_owned();
    secrets.push(revoked.clone());
    let live = works(&revoked);
    assert_eq!(
        live.status, 200,
        "a token works until it is revoked: {}",
        live.body
    );
    let path = format!(
        "/v1/tokens/{}",
        revocable["api_token"]["id"].as_str().unwrap()
    );
    assert_eq!(
        call(&solo, &acme.session, "DELETE", &path, None).status,
        200
    );
    let after = works(&revoked);
    assert_eq!(after.status, 401, "refused at once: {}", after.body);

    // The brief token is accepted up to its expiry and refused from then on; a loaded machine
    // may take a while to answer, so the wait is the lifetime and a generous margin.
    let margin = Duration::from_secs(30);
    let deadline = Instant::now() + Duration::from_secs(BRIEF_LIFETIME_S.unsigned_abs()) + margin;
    let slack = time::Duration::milliseconds(50);
    loop {
        let sent = time::OffsetDateTime::now_utc();
        let answer = works(&brief_token);
        let answered = time::OffsetDateTime::now_utc();
        if answer.status == 401 {
            assert!(
                answered + slack >= expires_at,
                "refused at {answered}, before it expired at {expires_at}"
            );
            break;
        }
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(
            sent <= expires_at + slack,
            "accepted at {sent}, after it expired at {expires_at}"
        );
        assert!(
            Instant::now() < deadline,
            "still accepted {margin:?} past its expiry"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let bad = [
        vec![("Authorization".to_owned(), format!("Bearer {brief_token}"))],
        vec![("Authorization".to_owned(), format!("Bearer {revoked}"))],
        vec![(
            "Authorization".to_owned(),
            "Bearer tsk_notatoken".to_owned(),
        )],
        vec![("Authorization".to_owned(), "Bearer ".to_owned())],
        vec![("Authorization".to_owned(), format!("Basic {good}"))],
        vec![("Authorization".to_owned(), format!("Bearer {good}x"))],
        vec![(
            "Cookie".to_owned(),
            "einsora_session=0123456789abcdef".to_owned(),
        )],
    ];
    for headers in bad {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let answer = solo.request("GET", "/v1/workloads", &headers, None);
        assert_eq!(answer.status, 401, "{headers:?}: {}", answer.body);
        assert_eq!(
            without_request_id(&answer).1,
            reference,
            "every bad credential answers alike"
        );
    }
    let twice = [
        ("Authorization", format!("Bearer {good}")),
        ("Authorization", format!("Bearer {good}")),
    ];
    let twice: Vec<(&str, &str)> = twice.iter().map(|(n, v)| (*n, v.as_str())).collect();
    assert_eq!(
        solo.request("GET", "/v1/workloads", &twice, None).status,
        401,
        "two credentials are one too many"
    );

    let minted = call(
        &solo,
        &acme.token,
        "POST",
        "/v1/tokens",
        Some(json!({ "name": "child" })),
    );
    assert_eq!(
        minted.status, 403,
        "a token minted a token: {}",
        minted.body
    );
    let changed = call(
        &solo,
        &acme.token,
        "POST",
        "/v1/me/password",
        Some(
            json!({ "current_password": "whatever-it-is", "new_password": "a-new-long-password" }),
        ),
    );
    assert_eq!(
        changed.status, 403,
        "a token changed the password: {}",
        changed.body
    );

    // Session fixation: a cookie the attacker planted is never adopted.
    let planted = "einsora_session=feedfacefeedfacefeedfacefeedface";
    let password = dev_password(&solo, "dev@acme");
    let body = json!({ "email": "dev@acme", "password": password }).to_string();
    let login_answer = solo.request(
        "POST",
        "/v1/sessions",
        &[("Cookie", planted), ("Content-Type", "application/json")],
        Some(&body),
    );
    assert_eq!(login_answer.status, 200);
    let issued = login_answer.header("set-cookie").unwrap();
    assert!(
        !issued.contains("feedface"),
        "the planted session was adopted"
    );
    assert_eq!(
        solo.request("GET", "/v1/me", &[("Cookie", planted)], None)
            .status,
        401
    );

    // Logout ends the session server-side: the old cookie is dead even if replayed.
    let session = login(&solo, "dev@acme", &password);
    assert_eq!(call(&solo, &session, "GET", "/v1/me", None).status, 200);
    assert_eq!(
        call(&solo, &session, "DELETE", "/v1/sessions/current", None).status,
        200
    );
    assert_eq!(call(&solo, &session, "GET", "/v1/me", None).status, 401);
    if let Credential::Session { cookie, csrf } = &session {
        secrets.extend([cookie.clone(), csrf.clone()]);
    }
    assert_no_secret_logged(&solo, &secrets);
}

#[test]
fn account_probing_and_login_floods_get_nothing() {
    let solo = Solo::start(&[
        ("EINSORA_AUTH_MODE", "dev"),
        ("EINSORA_TRUSTED_PROXIES", "127.0.0.1"),
    ]);
    let acme = tenant(&solo, "dev@acme");
    let attempt = |email: &str, password: &str, from: &str| {
        let body = json!({ "email": email, "password": password }).to_string();
        solo.request(
            "POST",
            "/v1/sessions",
            &[
                ("Content-Type", "application/json"),
                ("X-Forwarded-For", from),
                ("X-Forwarded-Proto", "https"),
            ],
            Some(&body),
        )
    };
    let unknown = attempt("nobody@nowhere", "wrong-password-1", "10.9.0.1");
    let wrong = attempt("dev@acme", "wrong-password-1", "10.9.0.2");
    assert_eq!(unknown.status, 401, "{}", unknown.body);
    assert_eq!(
        without_request_id(&unknown),
        without_request_id(&wrong),
        "unknown email vs wrong password"
    );

    let mut limited = None;
    for i in 0..30 {
        let answer = attempt("dev@acme", &format!("guess-number-{i}"), "10.6.6.6");
        if answer.status == 429 {
            limited = Some(answer);
            break;
        }
        assert_eq!(answer.status, 401, "guess {i}: {}", answer.body);
        assert_eq!(
            call(&solo, &acme.token, "GET", "/v1/workloads", None).status,
            200,
            "the API keeps answering"
        );
    }
    let limited = limited.expect("the attempt limit never tripped");
    assert_eq!(limited.json()["error"]["code"], "rate_limited");
    let retry: u64 = limited
        .header("retry-after")
        .and_then(|r| r.parse().ok())
        .expect("429 says when to retry");
    assert!(
        (1..=5).contains(&retry),
        "a wait of seconds, not a lockout: {retry}"
    );
    let password = dev_password(&solo, "dev@acme");
    assert_eq!(
        attempt("dev@acme", &password, "10.1.1.1").status,
        200,
        "the owner logs in from elsewhere"
    );
    std::thread::sleep(Duration::from_secs(retry));
    assert_eq!(
        attempt("dev@acme", &password, "10.6.6.6").status,
        200,
        "and from the guessing address once its wait is over"
    );
    assert_no_secret_logged(&solo, &acme.secrets);
}

/// How long the brief token of `bad_and_stale_credentials_are_refused_alike` lives: long
/// enough to be shown working on a loaded machine, short enough to keep the test quick.
const BRIEF_LIFETIME_S: i64 = 4;

fn rfc3339(at: time::OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}
