//! Login attempts, limited in memory so that online guessing stays slow while nobody else's
//! failures keep the owner out for more than a few seconds at a time (docs/security.md,
//! "Gateway: hosts, origins and login limiting").
//!
//! An attempt counts against buckets, and a bucket's failures make it wait before its next
//! attempt: nothing after its first few, then a delay that doubles up to a cap of seconds; a
//! bucket with no failure for a while starts afresh. An anonymous client's attempt counts
//! against (email, address), which slows guessing one account, and against the address, which
//! slows spraying many; no other address's attempts count, so an attacker elsewhere can't
//! delay the owner. A known client (one that proved it signed in to the account before, or a
//! session checking its password) counts against a bucket of its own only, so a flood from
//! its own address never delays it. An attempt made while a bucket waits is refused and not
//! counted; any other counts as failed until it succeeds, so concurrent guesses can't slip
//! past before their failures are recorded.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// After `free` failures, each further one makes the bucket wait `first`, doubling per failure
/// up to `cap`, from its last attempt. A bucket with no attempt for `forget` starts afresh.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub free: u32,
    pub first: Duration,
    pub cap: Duration,
    pub forget: Duration,
}

impl Backoff {
    /// How long after its last attempt a bucket with `failures` waits.
    pub fn delay(&self, failures: u32) -> Duration {
        let Some(over) = failures.checked_sub(self.free) else {
            return Duration::ZERO;
        };
        let factor = 1u32.checked_shl(over).unwrap_or(u32::MAX);
        self.first.saturating_mul(factor).min(self.cap)
    }
}

/// The buckets' rules.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// One account from one anonymous address.
    pub account: Backoff,
    /// Every account from one anonymous address.
    pub address: Backoff,
    /// One known client.
    pub known_client: Backoff,
}

impl Limits {
    /// The same rules with every wait from `first`, doubling, up to `cap`: how tests and
    /// benches scale the login limits down to milliseconds.
    pub fn with_waits(self, first: Duration, cap: Duration) -> Limits {
        let scale = |rule: Backoff| Backoff { first, cap, ..rule };
        Limits {
            account: scale(self.account),
            address: scale(self.address),
            known_client: scale(self.known_client),
        }
    }
}

const SECOND: Duration = Duration::from_secs(1);
const FIVE_SECONDS: Duration = Duration::from_secs(5);
const QUARTER_HOUR: Duration = Duration::from_secs(15 * 60);

/// Five failures free, then 1 s, 2 s, 4 s, then 5 s between attempts: at most 12 guesses a
/// minute per bucket once it is going, and never a wait of more than 5 s.
pub const LIMITS: Limits = Limits {
    account: Backoff {
        free: 5,
        first: SECOND,
        cap: FIVE_SECONDS,
        forget: QUARTER_HOUR,
    },
    address: Backoff {
        free: 50,
        first: SECOND,
        cap: FIVE_SECONDS,
        forget: QUARTER_HOUR,
    },
    known_client: Backoff {
        free: 5,
        first: SECOND,
        cap: FIVE_SECONDS,
        forget: QUARTER_HOUR,
    },
};

/// Forgotten buckets are swept once the map grows past this (and then past twice its size).
const SWEEP_AT: usize = 4096;

/// Who is attempting.
#[derive(Debug, Clone, Copy)]
pub enum Client<'a> {
    /// Known by its address alone (`None`: the gateway didn't say).
    Anonymous {
        email: &'a str,
        addr: Option<IpAddr>,
    },
    /// Known by a secret only it holds: a known-client proof's hash, or its session's.
    Known(&'a [u8; 32]),
}

/// IPv6 callers usually hold a whole /64, so it counts as one address.
type AddressKey = Option<IpAddr>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Account(String, AddressKey),
    Address(AddressKey),
    Known([u8; 32]),
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    failures: u32,
    last: Instant,
}

#[derive(Debug)]
pub struct Limiter {
    limits: Limits,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    buckets: HashMap<Key, Bucket>,
    sweep_at: usize,
}

impl Limiter {
    pub fn new(limits: Limits) -> Self {
        Limiter {
            limits,
            state: Mutex::new(State {
                buckets: HashMap::new(),
                sweep_at: SWEEP_AT,
            }),
        }
    }

    /// Counts an attempt as failed until `succeeded` says otherwise; `Err` with how long to wait
    /// while one of its buckets waits (the attempt is then not counted).
    pub fn begin(&self, client: Client<'_>, now: Instant) -> Result<(), Duration> {
        let keys = keys(client);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.sweep(&mut state, now);
        let wait = keys
            .iter()
            .filter_map(|key| {
                let rule = self.rule(key);
                let bucket = state.buckets.get(key)?;
                bucket.wait(&rule, now)
            })
            .max();
        if let Some(wait) = wait {
            return Err(wait);
        }
        for key in keys {
            let rule = self.rule(&key);
            let bucket = state.buckets.entry(key).or_insert(Bucket {
                failures: 0,
                last: now,
            });
            bucket.count(&rule, now);
        }
        Ok(())
    }

    /// The attempt was right: its own bucket starts afresh, and the address gets its attempt
    /// back.
    pub fn succeeded(&self, client: Client<'_>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for key in keys(client) {
            match key {
                Key::Address(_) => {
                    if let Some(bucket) = state.buckets.get_mut(&key) {
                        bucket.failures = bucket.failures.saturating_sub(1);
                    }
                }
                Key::Account(..) | Key::Known(_) => {
                    state.buckets.remove(&key);
                }
            }
        }
    }

    fn rule(&self, key: &Key) -> Backoff {
        match key {
            Key::Account(..) => self.limits.account,
            Key::Address(_) => self.limits.address,
            Key::Known(_) => self.limits.known_client,
        }
    }

    fn sweep(&self, state: &mut State, now: Instant) {
        if state.buckets.len() < state.sweep_at {
            return;
        }
        state
            .buckets
            .retain(|key, bucket| !bucket.forgotten(&self.rule(key), now));
        state.sweep_at = SWEEP_AT.max(2 * state.buckets.len());
    }
}

fn keys(client: Client<'_>) -> Vec<Key> {
    match client {
        Client::Anonymous { email, addr } => {
            let addr = address_key(addr);
            vec![Key::Account(email.to_owned(), addr), Key::Address(addr)]
        }
        Client::Known(secret) => vec![Key::Known(*secret)],
    }
}

impl Bucket {
    fn forgotten(&self, rule: &Backoff, now: Instant) -> bool {
        now.saturating_duration_since(self.last) >= rule.forget
    }

    fn failures(&self, rule: &Backoff, now: Instant) -> u32 {
        if self.forgotten(rule, now) {
            0
        } else {
            self.failures
        }
    }

    /// How long until the next attempt, if it must wait.
    fn wait(&self, rule: &Backoff, now: Instant) -> Option<Duration> {
        let ready = self.last + rule.delay(self.failures(rule, now));
        (now < ready).then(|| ready - now)
    }

    fn count(&mut self, rule: &Backoff, now: Instant) {
        self.failures = self.failures(rule, now).saturating_add(1);
        self.last = now;
    }
}

fn address_key(addr: Option<IpAddr>) -> AddressKey {
    match addr?.to_canonical() {
        IpAddr::V6(v6) => {
            let [a, b, c, d, ..] = v6.segments();
            Some(IpAddr::V6(std::net::Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0)))
        }
        v4 => Some(v4),
    }
}

#[cfg(test)]
mod tests;
