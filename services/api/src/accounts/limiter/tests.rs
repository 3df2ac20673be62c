use super::*;

const SEC: Duration = Duration::from_secs(1);

fn ip(s: &str) -> Option<IpAddr> {
    Some(s.parse().unwrap())
}

fn backoff(free: u32) -> Backoff {
    Backoff {
        free,
        first: SEC,
        cap: 5 * SEC,
        forget: 600 * SEC,
    }
}

fn limiter() -> Limiter {
    Limiter::new(Limits {
        account: backoff(3),
        address: backoff(5),
        known_client: backoff(2),
    })
}

fn anonymous<'a>(email: &'a str, addr: &str) -> Client<'a> {
    Client::Anonymous {
        email,
        addr: ip(addr),
    }
}

#[test]
fn the_delay_doubles_after_the_free_failures_up_to_the_cap() {
    let rule = backoff(2);
    let delays: Vec<u64> = (0..8).map(|n| rule.delay(n).as_secs()).collect();
    assert_eq!(delays, [0, 0, 1, 2, 4, 5, 5, 5]);
    assert_eq!(rule.delay(u32::MAX), 5 * SEC, "no overflow");
    assert_eq!(LIMITS.account.delay(4), Duration::ZERO);
    assert_eq!(LIMITS.account.delay(5), SEC);
    assert_eq!(LIMITS.account.delay(1000), 5 * SEC);
}

#[test]
fn a_bucket_waits_after_its_free_failures_and_waiting_attempts_do_not_count() {
    let l = limiter();
    let owner = anonymous("a@x", "192.0.2.1");
    let t0 = Instant::now();
    for _ in 0..3 {
        l.begin(owner, t0).unwrap();
    }
    assert_eq!(l.begin(owner, t0), Err(SEC), "the 4th waits 1 s");
    // Attempts while it waits are refused and change nothing.
    for ms in [1, 500, 999] {
        let at = t0 + Duration::from_millis(ms);
        assert_eq!(l.begin(owner, at), Err(SEC - Duration::from_millis(ms)));
    }
    l.begin(owner, t0 + SEC).unwrap();
    assert_eq!(l.begin(owner, t0 + SEC), Err(2 * SEC), "then 2 s");
    l.begin(owner, t0 + 3 * SEC).unwrap();
    assert_eq!(l.begin(owner, t0 + 3 * SEC), Err(4 * SEC), "then 4 s");
    l.begin(owner, t0 + 7 * SEC).unwrap();
    assert_eq!(l.begin(owner, t0 + 7 * SEC), Err(5 * SEC), "then the cap");
}

#[test]
fn however_long_a_flood_no_wait_passes_the_cap_and_guesses_stay_slow() {
    let l = limiter();
    let flood = anonymous("owner@x", "127.0.0.1");
    let t0 = Instant::now();
    let (mut counted, mut longest) = (0u32, Duration::ZERO);
    // An attempt every 10 ms for 10 minutes.
    for i in 0..60_000u32 {
        match l.begin(flood, t0 + Duration::from_millis(10 * u64::from(i))) {
            Ok(()) => counted += 1,
            Err(wait) => longest = longest.max(wait),
        }
    }
    assert!(longest <= 5 * SEC, "{longest:?}");
    // 3 free, 1 + 2 + 4 s of ramp, then one per 5 s: 3 + 3 + (600 - 7) / 5.
    assert!(
        (120..=125).contains(&counted),
        "{counted} guesses in 10 minutes"
    );
}

#[test]
fn another_address_is_not_delayed() {
    let l = limiter();
    let t0 = Instant::now();
    for _ in 0..3 {
        l.begin(anonymous("owner@x", "198.51.100.9"), t0).unwrap();
    }
    assert!(l.begin(anonymous("owner@x", "198.51.100.9"), t0).is_err());
    l.begin(anonymous("owner@x", "192.0.2.1"), t0).unwrap();
}

#[test]
fn the_address_bucket_slows_spraying_many_emails() {
    let l = limiter();
    let t0 = Instant::now();
    for i in 0..5 {
        let email = format!("u{i}@x");
        l.begin(anonymous(&email, "2001:db8::1"), t0).unwrap();
    }
    assert_eq!(l.begin(anonymous("u9@x", "2001:db8::1"), t0), Err(SEC));
    assert!(
        l.begin(anonymous("u9@x", "2001:db8::ffff"), t0).is_err(),
        "same /64"
    );
    l.begin(anonymous("u9@x", "2001:db8:0:1::1"), t0).unwrap();
    l.begin(anonymous("u9@x", "2001:db8::1"), t0 + SEC).unwrap();
}

#[test]
fn success_clears_the_account_and_returns_the_address_attempt() {
    let l = limiter();
    let t0 = Instant::now();
    let owner = anonymous("a@x", "192.0.2.1");
    for _ in 0..3 {
        l.begin(owner, t0).unwrap();
    }
    l.succeeded(owner);
    for _ in 0..3 {
        l.begin(owner, t0).unwrap();
    }
    // The address: 2 failed + 3 pending (the successful one was handed back) = its 5 free.
    assert!(l.begin(anonymous("b@x", "192.0.2.1"), t0).is_err());
}

#[test]
fn a_known_client_has_a_bucket_of_its_own() {
    let l = limiter();
    let t0 = Instant::now();
    for i in 0..100 {
        let _ = l.begin(anonymous("owner@x", "127.0.0.1"), t0);
        let _ = l.begin(anonymous(&format!("u{i}@x"), "127.0.0.1"), t0);
    }
    assert!(l.begin(anonymous("owner@x", "127.0.0.1"), t0).is_err());
    let (cli, dashboard) = ([1u8; 32], [2u8; 32]);
    l.begin(Client::Known(&cli), t0).unwrap();
    l.succeeded(Client::Known(&cli));
    // Its own failures delay it, and only it.
    for _ in 0..2 {
        l.begin(Client::Known(&cli), t0).unwrap();
    }
    assert_eq!(l.begin(Client::Known(&cli), t0), Err(SEC));
    l.begin(Client::Known(&dashboard), t0).unwrap();
    assert!(l.begin(anonymous("owner@x", "127.0.0.1"), t0).is_err());
}

#[test]
fn quiet_buckets_start_afresh() {
    let l = limiter();
    let owner = anonymous("a@x", "192.0.2.1");
    let t0 = Instant::now();
    for _ in 0..3 {
        l.begin(owner, t0).unwrap();
    }
    l.begin(owner, t0 + 5 * SEC).unwrap();
    assert!(l.begin(owner, t0 + 5 * SEC).is_err());
    // Ten minutes after its last attempt the bucket has its free failures again.
    let later = t0 + 605 * SEC;
    for _ in 0..3 {
        l.begin(owner, later).unwrap();
    }
    assert!(l.begin(owner, later).is_err());
}

#[test]
fn forgotten_buckets_are_swept() {
    let l = limiter();
    let t0 = Instant::now();
    // Two buckets an address: SWEEP_AT in all.
    for i in 0..SWEEP_AT / 2 {
        let addr = IpAddr::from([10, 0, (i / 256) as u8, (i % 256) as u8]);
        let client = Client::Anonymous {
            email: "a@x",
            addr: Some(addr),
        };
        l.begin(client, t0).unwrap();
    }
    l.begin(anonymous("b@x", "192.0.2.9"), t0 + 601 * SEC)
        .unwrap();
    let state = l.state.lock().unwrap();
    assert_eq!(state.buckets.len(), 2, "only b@x's two are left");
}
