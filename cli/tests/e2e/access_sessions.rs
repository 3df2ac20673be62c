//! Notebook sessions in the access proxy last no longer than the credential that opened them:
//! logging out, a password change and revoking a token each end what they opened within 5 s,
//! an open kernel WebSocket included, while sessions from credentials that still stand carry
//! on. Real notebooks on the real engine (what docker.rs needs).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::cli::dev_password;
use crate::harness::notebooks::{kernel_channels, open, solo};
use crate::harness::solo::Solo;
use crate::harness::workloads::wait_for;
use crate::harness::world::{Credential, a_notebook, call, launch, login, tenant};
use einsora_testkit::http::{exchange, request};

const WITHIN: Duration = Duration::from_secs(5);

/// A running notebook of `who`'s.
fn running(solo: &Solo, who: &Credential) -> String {
    let id = launch(solo, who, a_notebook("nb"));
    wait_for(solo, who, &id, "running");
    id
}

/// The status of `/api/status` through the proxy with `cookie`.
fn status(solo: &Solo, host: &str, cookie: &str) -> u16 {
    let origin = format!("http://{host}");
    let headers = [("Cookie", cookie), ("Origin", origin.as_str())];
    exchange(
        &solo.access,
        &request("GET", "/api/status", host, &headers, ""),
    )
    .status
}

/// `cookie` is refused within [`WITHIN`] of `since`.
fn assert_refused_soon(solo: &Solo, host: &str, cookie: &str, since: Instant) {
    loop {
        let now = status(solo, host, cookie);
        if now == 401 {
            return;
        }
        assert_eq!(now, 200);
        assert!(
            since.elapsed() < WITHIN,
            "still let in after {:?}",
            since.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn logging_out_or_revoking_a_token_ends_what_it_opened_websockets_included() {
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let browser = login(&solo, "dev@acme", &dev_password(&solo, "dev@acme"));
    let id = running(&solo, &acme.session);
    let (host, by_browser) = open(&solo, &browser, &id);
    let (_, by_token) = open(&solo, &acme.token, &id);
    assert_eq!(status(&solo, &host, &by_browser), 200);
    let mut ws = kernel_channels(&solo, &host, &by_browser);

    let out = call(&solo, &browser, "DELETE", "/v1/sessions/current", None);
    assert!((200..300).contains(&out.status), "{}", out.body);
    let logged_out = Instant::now();
    assert!(
        ws.closes_within(WITHIN),
        "the kernel's WebSocket outlived the logout"
    );
    assert_refused_soon(&solo, &host, &by_browser, logged_out);
    assert_eq!(
        status(&solo, &host, &by_token),
        200,
        "the token's session stands"
    );

    let tokens = call(&solo, &acme.session, "GET", "/v1/tokens", None).json();
    let laptop = tokens["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "laptop")
        .expect("the tenant's token")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    crate::harness::world::revoke_token(&solo, &acme.session, &laptop);
    assert_refused_soon(&solo, &host, &by_token, Instant::now());
}

#[test]
fn a_password_change_ends_what_the_other_sessions_opened() {
    let (solo, _leftovers) = solo();
    let password = dev_password(&solo, "dev@acme");
    let changer = login(&solo, "dev@acme", &password);
    let other = login(&solo, "dev@acme", &password);
    let id = running(&solo, &changer);
    let (host, by_other) = open(&solo, &other, &id);
    let (_, by_changer) = open(&solo, &changer, &id);
    let mut ws = kernel_channels(&solo, &host, &by_other);
    let body = json!({ "current_password": password, "new_password": "a new password 123" });
    let changed = call(&solo, &changer, "POST", "/v1/me/password", Some(body));
    assert!((200..300).contains(&changed.status), "{}", changed.body);
    let at = Instant::now();
    assert!(
        ws.closes_within(WITHIN),
        "the other session's WebSocket outlived the change"
    );
    assert_refused_soon(&solo, &host, &by_other, at);
    assert_eq!(
        status(&solo, &host, &by_changer),
        200,
        "the changer's own carries on"
    );
}
