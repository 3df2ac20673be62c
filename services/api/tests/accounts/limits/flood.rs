//! A flood of wrong passwords from 127.0.0.1, for the owner's account and made-up ones, while
//! the owner signs in: a known client (the CLI, the dashboard) gets in at once, an unknown one
//! waits seconds at a time, and the flood's guesses stay few.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use einsora_api::accounts::limiter::{LIMITS, Limits};
use einsora_proto::accounts::v1 as pb;
use einsora_proto::accounts::v1::account_service_server::AccountService;
use tonic::Code;

use crate::{Api, Creds, EMAIL, PASSWORD, api_with, assert_code};

const LOOPBACK: &str = "127.0.0.1";

/// The real limits with their timers scaled down.
fn scaled(first_ms: u64, cap_ms: u64) -> Limits {
    LIMITS.with_waits(
        Duration::from_millis(first_ms),
        Duration::from_millis(cap_ms),
    )
}

#[derive(Debug, Default)]
struct Tally {
    /// Wrong passwords for the owner that were checked.
    owner_guesses: AtomicU64,
    refused: AtomicU64,
    longest_retry_after: AtomicU64,
}

/// `workers` tasks sending wrong passwords from loopback until `stop`; every other one for a
/// made-up account.
fn flood(
    api: &Arc<Api>,
    workers: usize,
    stop: &Arc<AtomicBool>,
) -> (Arc<Tally>, Vec<tokio::task::JoinHandle<()>>) {
    let tally = Arc::new(Tally::default());
    let tasks = (0..workers)
        .map(|worker| {
            let (api, stop, tally) = (Arc::clone(api), Arc::clone(stop), Arc::clone(&tally));
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let email = if n.is_multiple_of(2) {
                        format!("made-up-{worker}-{n}@example.com")
                    } else {
                        EMAIL.to_owned()
                    };
                    let guess = format!("guess number {worker}-{n}");
                    match api.try_login(&email, &guess, LOOPBACK).await {
                        Err(s) if s.code() == Code::ResourceExhausted => {
                            tally.refused.fetch_add(1, Ordering::Relaxed);
                            let retry = retry_after(&s);
                            tally
                                .longest_retry_after
                                .fetch_max(retry, Ordering::Relaxed);
                        }
                        Err(s) if s.code() == Code::Unauthenticated => {
                            if email == EMAIL {
                                tally.owner_guesses.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        other => panic!("a guess got {other:?}"),
                    }
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    (tally, tasks)
}

fn retry_after(status: &tonic::Status) -> u64 {
    let value = status.metadata().get("retry-after").expect("retry-after");
    value.to_str().unwrap().parse().unwrap()
}

fn from_loopback(proof: Option<&str>) -> Creds {
    Creds {
        addr: Some(LOOPBACK),
        proofs: proof.into_iter().map(str::to_owned).collect(),
        ..Creds::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_loopback_flood_never_keeps_the_owner_out() {
    let api = Arc::new(api_with(scaled(50, 300)).await);
    // The owner signed in from the CLI and from the dashboard before, on this machine.
    let (_, cli) = api
        .login_as(&from_loopback(None), EMAIL, PASSWORD)
        .await
        .unwrap();
    let (_, dashboard) = api
        .login_as(&from_loopback(None), EMAIL, PASSWORD)
        .await
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let (tally, tasks) = flood(&api, 8, &stop);
    let deadline = Instant::now() + Duration::from_secs(20);
    while tally.refused.load(Ordering::Relaxed) < 100 {
        assert!(
            Instant::now() < deadline,
            "the flood never reached the limits"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let unknown = from_loopback(None);
    let mut unknown_waits = Vec::new();
    for round in 0..5 {
        for (client, proof) in [("CLI", &cli), ("dashboard", &dashboard)] {
            let at = Instant::now();
            let signed_in = api
                .login_as(&from_loopback(Some(proof)), EMAIL, PASSWORD)
                .await;
            let (answer, _) =
                signed_in.unwrap_or_else(|s| panic!("{client}, round {round}: {s:?}"));
            assert!(
                at.elapsed() < Duration::from_secs(3),
                "{client}: {:?}",
                at.elapsed()
            );
            let session = Creds {
                session: Some(answer.session_id),
                ..Creds::default()
            };
            api.me(&session).await.unwrap();
        }
        // A client that never signed in shares the flood's bucket: it may be refused, but
        // never told to wait more than the cap (300 ms, so 1 s).
        if let Err(s) = api.login_as(&unknown, EMAIL, PASSWORD).await {
            assert_eq!(s.code(), Code::ResourceExhausted, "{s:?}");
            unknown_waits.push(retry_after(&s));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    assert!(unknown_waits.iter().all(|w| *w == 1), "{unknown_waits:?}");
    assert_eq!(tally.longest_retry_after.load(Ordering::Relaxed), 1);
    // Five free, the ramp, then one per 300 ms; the unknown client's successes each gave the
    // flood five more.
    let guesses = tally.owner_guesses.load(Ordering::Relaxed);
    let bound = 5 + 3 + elapsed.as_millis() / 300 + 1 + 5 * (5 - unknown_waits.len() as u128);
    assert!(
        u128::from(guesses) <= bound,
        "{guesses} guesses for the owner in {elapsed:?} (at most {bound})"
    );
    // With the flood over, the unknown client gets in after one wait at most.
    tokio::time::sleep(Duration::from_millis(300)).await;
    api.login_as(&unknown, EMAIL, PASSWORD).await.unwrap();
}

#[tokio::test]
async fn a_session_checks_its_password_alone_and_a_new_password_voids_the_proofs() {
    // Waits of 30 s: nothing below waits for them to pass.
    let api = api_with(scaled(30_000, 30_000)).await;
    let (answer, proof) = api
        .login_as(&from_loopback(None), EMAIL, PASSWORD)
        .await
        .unwrap();
    let session = Creds {
        session: Some(answer.session_id),
        csrf: answer.session.map(|s| s.csrf_token),
        addr: Some(LOOPBACK),
        ..Creds::default()
    };
    for i in 0..5 {
        let guess = format!("guess number {i}");
        assert_code(
            api.try_login(EMAIL, &guess, LOOPBACK).await,
            Code::Unauthenticated,
        );
    }
    assert_code(
        api.try_login(EMAIL, PASSWORD, LOOPBACK).await,
        Code::ResourceExhausted,
    );

    // The session's password check is its own: the flooded bucket doesn't delay it.
    let change = pb::ChangePasswordRequest {
        current_password: PASSWORD.into(),
        new_password: "a brand new password".into(),
    };
    api.accounts
        .change_password(session.request(change))
        .await
        .unwrap();
    // The old proof died with the old password: the client is anonymous again, and waits.
    let stale = api
        .login_as(&from_loopback(Some(&proof)), EMAIL, "a brand new password")
        .await;
    assert_code(stale, Code::ResourceExhausted);
    // A proof from a sign-in elsewhere gets in from the flooded address at once.
    let elsewhere = Creds {
        addr: Some("192.0.2.77"),
        ..Creds::default()
    };
    let (_, fresh) = api
        .login_as(&elsewhere, EMAIL, "a brand new password")
        .await
        .unwrap();
    api.login_as(&from_loopback(Some(&fresh)), EMAIL, "a brand new password")
        .await
        .unwrap();
}
