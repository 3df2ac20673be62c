//! A login flood from 127.0.0.1 against the real accounts service behind the real gateway,
//! while the owner signs in from the CLI (no Origin) and from the dashboard (its own origin):
//! both get in at once with the proofs their earlier sign-ins kept, a client that never signed
//! in waits seconds at a time, and the flood stays slow.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use einsora_api::accounts::Accounts;
use einsora_api::accounts::limiter::{LIMITS, Limits};
use einsora_api::accounts::passwords::Passwords;
use einsora_api::caller::Auth;
use einsora_proto::accounts::v1::account_service_server::AccountServiceServer;
use einsora_testkit::db::TestDb;
use serde_json::json;
use tonic::service::Routes;

use crate::http::{Answer, send};
use crate::{JSON, running};

const EMAIL: &str = "owner@example.com";
const PASSWORD: &str = "correct horse battery";
/// The real limits with waits of 50, 100, 200, then 300 ms.
const CAP: Duration = Duration::from_millis(300);

fn scaled() -> Limits {
    LIMITS.with_waits(Duration::from_millis(50), CAP)
}

/// The real AccountService on a fresh SQLite store with the owner set up.
async fn accounts(db: &TestDb) -> Routes {
    let store = Arc::clone(&db.store);
    einsora_api::setup::setup_owner(&*store, EMAIL, PASSWORD, false)
        .await
        .unwrap();
    let auth = Arc::new(Auth::new(store));
    let passwords = Arc::new(Passwords::new().await.unwrap());
    let accounts = Accounts::with_limits(auth, passwords, scaled());
    Routes::new(AccountServiceServer::new(accounts))
}

fn login_body(email: &str, password: &str) -> String {
    json!({ "email": email, "password": password }).to_string()
}

#[derive(Debug, Default)]
struct Tally {
    refused: AtomicU64,
    owner_guesses: AtomicU64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_loopback_flood_while_the_owner_signs_in_from_the_cli_and_the_dashboard() {
    let db = TestDb::sqlite().await;
    let running = running::start(accounts(&db).await, &[]).await;
    let http = running.http;
    let localhost = format!("localhost:{}", http.port());
    let dashboard_origin = format!("http://{localhost}");
    let right = login_body(EMAIL, PASSWORD);
    let cli = |cookie: &str| {
        let cookie = cookie.to_owned();
        let right = right.clone();
        async move {
            let headers = [JSON, ("cookie", cookie.as_str())];
            send(http, "POST", "/v1/sessions", &headers, &right).await
        }
    };
    let dashboard = |cookie: &str| {
        let (cookie, right) = (cookie.to_owned(), right.clone());
        let (host, origin) = (localhost.clone(), dashboard_origin.clone());
        async move {
            let headers = [
                JSON,
                ("host", host.as_str()),
                ("origin", origin.as_str()),
                ("cookie", cookie.as_str()),
            ];
            send(http, "POST", "/v1/sessions", &headers, &right).await
        }
    };
    let proof = |answer: &Answer| {
        assert_eq!(answer.status, 200, "{}", answer.raw);
        format!(
            "einsora_client={}",
            answer.cookie("einsora_client").unwrap()
        )
    };
    // Both signed in before, on this machine.
    let cli_proof = proof(&cli("").await);
    let dashboard_proof = proof(&dashboard("").await);

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let flood: Vec<_> = (0..8)
        .map(|worker| {
            let (stop, tally) = (Arc::clone(&stop), Arc::clone(&tally));
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let email = if n.is_multiple_of(2) {
                        format!("made-up-{worker}-{n}@example.com")
                    } else {
                        EMAIL.to_owned()
                    };
                    let guess = login_body(&email, &format!("guess number {worker}-{n}"));
                    let answer = send(http, "POST", "/v1/sessions", &[JSON], &guess).await;
                    match answer.status {
                        429 => {
                            assert_eq!(answer.header("retry-after"), "1", "{}", answer.raw);
                            tally.refused.fetch_add(1, Ordering::Relaxed);
                        }
                        401 if email == EMAIL => {
                            tally.owner_guesses.fetch_add(1, Ordering::Relaxed);
                        }
                        401 => {}
                        _ => panic!("a guess got {}", answer.raw),
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while tally.refused.load(Ordering::Relaxed) < 50 {
        assert!(
            Instant::now() < deadline,
            "the flood never reached the limits"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let mut unknown_successes = 0;
    for round in 0..5 {
        for (client, answer) in [
            ("CLI", cli(&cli_proof).await),
            ("dashboard", dashboard(&dashboard_proof).await),
        ] {
            assert_eq!(
                answer.status, 200,
                "{client}, round {round}: {}",
                answer.raw
            );
            let session = answer.cookie("einsora_session").unwrap();
            let cookie = format!("einsora_session={session}");
            let me = send(http, "GET", "/v1/me", &[("cookie", &cookie)], "").await;
            assert_eq!(me.body["email"], EMAIL, "{}", me.raw);
        }
        // A client that never signed in shares the flood's limits: refused at times, but
        // never told to wait more than the cap.
        let unknown = cli("").await;
        match unknown.status {
            200 => unknown_successes += 1,
            429 => assert_eq!(unknown.header("retry-after"), "1"),
            _ => panic!("{}", unknown.raw),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for worker in flood {
        worker.await.unwrap();
    }
    // Five free, the ramp, then one per cap; each success of the unknown client gave five more.
    let guesses = tally.owner_guesses.load(Ordering::Relaxed);
    let per_cap = elapsed.as_millis() / CAP.as_millis();
    let bound = 5 + 3 + per_cap + 2 + 5 * unknown_successes;
    assert!(
        u128::from(guesses) <= bound,
        "{guesses} guesses for the owner in {elapsed:?} (at most {bound})"
    );
    // With the flood over, the client that never signed in gets in after one wait at most.
    tokio::time::sleep(CAP).await;
    let after = cli("").await;
    assert_eq!(after.status, 200, "{}", after.raw);
    running.stop().await;
}
