//! Login attempts, limited in memory per (email, address) and per address with sliding
//! windows. The pair limit stops guessing one account's password; the address limit stops
//! spraying many accounts from one place. Neither counts another address's attempts, so an
//! attacker elsewhere can't lock the owner out. Every attempt counts until it succeeds, so a
//! burst of concurrent guesses can't slip past before their failures are recorded.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most `max` failures within any `window`.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub max: usize,
    pub window: Duration,
}

pub const PER_PAIR: Rule = Rule {
    max: 5,
    window: Duration::from_secs(15 * 60),
};
pub const PER_ADDRESS: Rule = Rule {
    max: 50,
    window: Duration::from_secs(15 * 60),
};
/// Forgotten windows are swept once the maps grow past this (and then past twice their size).
const SWEEP_AT: usize = 4096;

/// IPv6 callers usually hold a whole /64, so it counts as one address; `None` is a caller
/// whose address the gateway didn't say.
type AddressKey = Option<IpAddr>;

#[derive(Debug)]
pub struct Limiter {
    pair: Rule,
    address: Rule,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    pairs: HashMap<(String, AddressKey), VecDeque<Instant>>,
    addresses: HashMap<AddressKey, VecDeque<Instant>>,
    sweep_at: usize,
}

impl Limiter {
    pub fn new(pair: Rule, address: Rule) -> Self {
        Limiter {
            pair,
            address,
            state: Mutex::new(State {
                sweep_at: SWEEP_AT,
                ..State::default()
            }),
        }
    }

    /// Counts an attempt as failed until `succeeded` says otherwise; `Err` with how long to wait
    /// when a limit is reached (the attempt is then not counted).
    pub fn begin(&self, email: &str, addr: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let addr = address_key(addr);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.sweep(now, self.pair.window.max(self.address.window));
        let pair_key = (email.to_owned(), addr);
        let pair_wait = wait(state.pairs.get_mut(&pair_key), self.pair, now);
        let addr_wait = wait(state.addresses.get_mut(&addr), self.address, now);
        if let Some(retry) = pair_wait.max(addr_wait) {
            return Err(retry);
        }
        state.pairs.entry(pair_key).or_default().push_back(now);
        state.addresses.entry(addr).or_default().push_back(now);
        Ok(())
    }

    /// The attempt was right: the pair starts afresh, and the address gets its attempt back.
    pub fn succeeded(&self, email: &str, addr: Option<IpAddr>) {
        let addr = address_key(addr);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.pairs.remove(&(email.to_owned(), addr));
        if let Some(times) = state.addresses.get_mut(&addr) {
            times.pop_back();
        }
    }
}

/// Drops the times that left the window; how long until the next attempt is allowed, if the
/// window is full.
fn wait(times: Option<&mut VecDeque<Instant>>, rule: Rule, now: Instant) -> Option<Duration> {
    let times = times?;
    while times
        .front()
        .is_some_and(|&t| now.saturating_duration_since(t) >= rule.window)
    {
        times.pop_front();
    }
    if times.len() < rule.max {
        return None;
    }
    let oldest = *times.front()?;
    Some(
        rule.window
            .saturating_sub(now.saturating_duration_since(oldest)),
    )
}

impl State {
    fn sweep(&mut self, now: Instant, window: Duration) {
        if self.pairs.len() + self.addresses.len() < self.sweep_at {
            return;
        }
        let live = |times: &mut VecDeque<Instant>| {
            times
                .back()
                .is_some_and(|&t| now.saturating_duration_since(t) < window)
        };
        self.pairs.retain(|_, times| live(times));
        self.addresses.retain(|_, times| live(times));
        self.sweep_at = SWEEP_AT.max(2 * (self.pairs.len() + self.addresses.len()));
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
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    fn limiter() -> Limiter {
        Limiter::new(
            Rule {
                max: 3,
                window: 10 * MIN,
            },
            Rule {
                max: 5,
                window: 10 * MIN,
            },
        )
    }

    #[test]
    fn pair_limit_slides_with_its_window() {
        let l = limiter();
        let t0 = Instant::now();
        for i in 0..3 {
            l.begin("a@x", ip("192.0.2.1"), t0 + i * MIN).unwrap();
        }
        let retry = l.begin("a@x", ip("192.0.2.1"), t0 + 3 * MIN).unwrap_err();
        assert_eq!(retry, 7 * MIN, "until the oldest failure leaves the window");
        // The first failure leaves the window at t0 + 10 min: one more attempt fits.
        l.begin("a@x", ip("192.0.2.1"), t0 + 10 * MIN).unwrap();
        assert!(l.begin("a@x", ip("192.0.2.1"), t0 + 10 * MIN).is_err());
    }

    #[test]
    fn another_address_is_not_locked_out() {
        let l = limiter();
        let t0 = Instant::now();
        for _ in 0..3 {
            l.begin("owner@x", ip("198.51.100.9"), t0).unwrap();
        }
        assert!(l.begin("owner@x", ip("198.51.100.9"), t0).is_err());
        l.begin("owner@x", ip("192.0.2.1"), t0).unwrap();
    }

    #[test]
    fn address_limit_stops_spraying_many_emails() {
        let l = limiter();
        let t0 = Instant::now();
        for i in 0..5 {
            l.begin(&format!("u{i}@x"), ip("2001:db8::1"), t0).unwrap();
        }
        assert!(l.begin("u9@x", ip("2001:db8::1"), t0).is_err());
        assert!(
            l.begin("u9@x", ip("2001:db8::ffff"), t0).is_err(),
            "same /64"
        );
        l.begin("u9@x", ip("2001:db8:0:1::1"), t0).unwrap();
    }

    #[test]
    fn success_clears_the_pair_and_returns_the_address_attempt() {
        let l = limiter();
        let t0 = Instant::now();
        for _ in 0..3 {
            l.begin("a@x", ip("192.0.2.1"), t0).unwrap();
        }
        l.succeeded("a@x", ip("192.0.2.1"));
        for _ in 0..3 {
            l.begin("a@x", ip("192.0.2.1"), t0).unwrap();
        }
        // 2 failed + 3 pending on the address (the successful one was handed back).
        assert!(l.begin("b@x", ip("192.0.2.1"), t0).is_err());
    }

    #[test]
    fn sweeping_forgets_old_windows() {
        let l = limiter();
        let t0 = Instant::now();
        for i in 0..SWEEP_AT {
            l.begin(
                "a@x",
                Some(IpAddr::from([10, 0, (i / 256) as u8, (i % 256) as u8])),
                t0,
            )
            .unwrap();
        }
        l.begin("a@x", ip("192.0.2.1"), t0 + 11 * MIN).unwrap();
        let state = l.state.lock().unwrap();
        assert_eq!((state.pairs.len(), state.addresses.len()), (1, 1));
    }
}
