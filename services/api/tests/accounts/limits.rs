mod flood;

use std::time::{Duration, Instant};

use einsora_proto::accounts::v1 as pb;
use einsora_proto::accounts::v1::account_service_server::AccountService;
use tonic::Code;

use crate::{Api, Creds, EMAIL, PASSWORD, api, assert_code};

async fn timed_failure(api: &Api, email: &str, addr: &'static str) -> (tonic::Status, Duration) {
    let start = Instant::now();
    let status = assert_code(
        api.try_login(email, "not the password", addr).await,
        Code::Unauthenticated,
    );
    (status, start.elapsed())
}

#[tokio::test]
async fn unknown_email_and_wrong_password_answer_alike() {
    let api = api().await;
    let (wrong, _) = timed_failure(&api, EMAIL, "192.0.2.1").await;
    let (unknown, _) = timed_failure(&api, "nobody@example.com", "192.0.2.2").await;
    assert_eq!(
        (wrong.code(), wrong.message()),
        (unknown.code(), unknown.message())
    );
    assert_eq!(wrong.metadata().len(), unknown.metadata().len());
    // Both check a password hash: without the dummy hash an unknown email would answer in a
    // small fraction of the time (a lookup instead of ~20-50 ms of argon2id).
    let (mut wrong_times, mut unknown_times) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        wrong_times.push(timed_failure(&api, EMAIL, "192.0.2.3").await.1);
        unknown_times.push(
            timed_failure(&api, "nobody@example.com", "192.0.2.4")
                .await
                .1,
        );
    }
    wrong_times.sort();
    unknown_times.sort();
    let (wrong, unknown) = (wrong_times[2], unknown_times[2]);
    assert!(
        unknown * 5 >= wrong,
        "wrong password {wrong:?}, unknown email {unknown:?}"
    );
}

#[tokio::test]
async fn the_limiter_trips_but_the_owner_still_logs_in_elsewhere() {
    let api = api().await;
    for _ in 0..5 {
        timed_failure(&api, EMAIL, "203.0.113.66").await;
    }
    let tripped = assert_code(
        api.try_login(EMAIL, PASSWORD, "203.0.113.66").await,
        Code::ResourceExhausted,
    );
    let retry: u64 = tripped
        .metadata()
        .get("retry-after")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (1..=5).contains(&retry),
        "a wait of seconds, not a lockout: {retry}"
    );
    // The owner, from their own address, is not delayed by the attacker's failures.
    let ok = api.try_login(EMAIL, PASSWORD, "192.0.2.10").await.unwrap();
    let owner = Creds {
        session: Some(ok.session_id),
        ..Creds::default()
    };
    // And the rest of the API keeps answering.
    api.me(&owner).await.unwrap();
    // Once the wait is over, the right password gets in from the guessing address too.
    tokio::time::sleep(Duration::from_secs(retry)).await;
    api.try_login(EMAIL, PASSWORD, "203.0.113.66")
        .await
        .unwrap();
}

#[tokio::test]
async fn one_address_cannot_spray_many_accounts() {
    let api = api().await;
    let start = Instant::now();
    let mut tripped = None;
    for i in 0..60 {
        let req = pb::LoginRequest {
            email: format!("user{i}@example.com"),
            password: "guess guess guess".into(),
            ..pb::LoginRequest::default()
        };
        let creds = Creds {
            addr: Some("198.51.100.7"),
            ..Creds::default()
        };
        if let Err(s) = api.accounts.login(creds.request(req)).await
            && s.code() == Code::ResourceExhausted
        {
            tripped = Some(i);
            break;
        }
    }
    assert_eq!(
        tripped,
        Some(50),
        "after 50 failures from one address ({:?})",
        start.elapsed()
    );
    api.try_login(EMAIL, PASSWORD, "192.0.2.10").await.unwrap();
}
