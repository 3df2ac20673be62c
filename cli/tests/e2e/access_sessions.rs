//! Notebook sessions in the access proxy last no longer than the credential that opened them:
//! logging out, a password change and revoking a token each end what they opened within 5 s,
//! an open kernel WebSocket included, while sessions from credentials that still stand carry
//! on. Real notebooks on the real engine (what docker.rs needs).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::cli::{Cli, dev_password};
use crate::harness::notebooks::{kernel_channels, open, solo};
use crate::harness::solo::Solo;
use crate::harness::support::stderr;
use crate::harness::workloads::wait_for;
use crate::harness::world::{Credential, a_notebook, call, launch, login, new_token, tenant};
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
        let origin = format!("http://{host}");
        let headers = [("Cookie", cookie), ("Origin", origin.as_str())];
        let asked = request("GET", "/api/status", host, &headers, "");
        let Some(answer) = einsora_testkit::http::try_exchange(&solo.access, &asked) else {
            // Cut before its answer: the session ended while the request was on its way
            // through (what a session opened ends with it). The next one is refused.
            assert_eq!(status(solo, host, cookie), 401, "after a cut request");
            return;
        };
        if answer.status == 401 {
            return;
        }
        assert_eq!(answer.status, 200);
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

/// A team on one Solo, through the real CLI and HTTP: the owner invites a member, who joins with
/// the link and signs in. Their notebook waits for strong isolation on the owner's machine (its
/// driver isolates weakly) until the owner trusts them with it, then runs and opens through the
/// proxy. Disabled, the member's session and token are refused at once, and the notebook
/// session they opened ends within 5 s; while their notebook lives, they can't be removed.
#[test]
fn a_member_joins_runs_on_a_trusting_owners_machine_and_is_cut_off_when_disabled() {
    let (solo, _leftovers) = solo();
    let owner = Cli::new(&solo, "owner");
    owner.login("dev@acme", &dev_password(&solo, "dev@acme"));
    let link = owner.ok(&["users", "invite", "ann@acme.example"]);
    let link = link.trim();
    let prefix = format!("http://{}/#/invite/", solo.http);
    assert!(link.starts_with(&prefix), "{link}");

    let ann_cli = Cli::new(&solo, "ann");
    let password = "ann's password 123";
    let joined = ann_cli.run(
        &["accept-invite", link, "--name", "Ann", "--password-stdin"],
        Some(&format!("{password}\n")),
    );
    assert!(joined.status.success(), "{}", stderr(&joined));
    let again = ann_cli.run(
        &["accept-invite", link, "--password-stdin"],
        Some("another password 123\n"),
    );
    assert!(!again.status.success(), "an invite works once");
    assert!(
        stderr(&again).contains("unknown, used, revoked or expired"),
        "{}",
        stderr(&again)
    );
    let ann = login(&solo, "ann@acme.example", password);
    let ann_token = Credential::Token(new_token(&solo, &ann));

    let id = launch(&solo, &ann, a_notebook("anns"));
    let waiting = "waiting for a machine that can isolate it: the drivers here that run \
                   notebooks on cpu-1c-2g run only the workloads of the user who owns the machine";
    einsora_testkit::eventually_or(
        "the notebook waiting for isolation",
        Duration::from_secs(30),
        || (reason(&solo, &ann, &id) == waiting).then_some(()),
        || reason(&solo, &ann, &id),
    );
    let machines = owner.json(&["machines"]);
    let machine = machines["machines"][0]["id"].as_str().unwrap();
    let trusted = owner.json(&["trust", machine, "ann@acme.example"]);
    assert_eq!(
        trusted["trusted_user_ids"].as_array().unwrap().len(),
        1,
        "{trusted}"
    );
    wait_for(&solo, &ann, &id, "running");
    let (host, cookie) = open(&solo, &ann_token, &id);
    assert_eq!(status(&solo, &host, &cookie), 200);

    let disabled = owner.json(&["users", "disable", "ann@acme.example"]);
    let at = Instant::now();
    assert!(disabled["disabled_at"].is_string(), "{disabled}");
    for who in [&ann, &ann_token] {
        let refused = call(&solo, who, "GET", "/v1/workloads", None);
        assert_eq!(refused.status, 401, "{who:?}: {}", refused.body);
    }
    assert_refused_soon(&solo, &host, &cookie, at);
    let kept = owner.run(&["users", "remove", "ann@acme.example"], None);
    assert!(!kept.status.success());
    assert!(stderr(&kept).contains("still own"), "{}", stderr(&kept));
}

/// The workload's latest timeline reason, as its owner reads it.
fn reason(solo: &Solo, who: &Credential, id: &str) -> String {
    let got = call(solo, who, "GET", &format!("/v1/workloads/{id}"), None).json();
    got["state_reason"].as_str().unwrap_or_default().to_owned()
}
