//! The per-address limit on `Enroll`: at most `max` attempts in any `window` from one address
//! (an IPv6 address counts by its /64, which one host usually holds whole), good or bad alike,
//! so neither token guessing nor CSR signing can be driven hard from one place. In memory, per
//! controller; the number of addresses it tracks is bounded too, and when that many are
//! attempting at once a new one waits (a flood from many addresses can't grow it unbounded).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How many distinct addresses are tracked at most.
const MAX_ADDRESSES: usize = 4096;

#[derive(Debug)]
pub struct EnrolLimit {
    window: Duration,
    max: usize,
    max_addresses: usize,
    attempts: Mutex<HashMap<Source, Attempts>>,
}

/// One address's attempts within the window, and whether its refusal was logged (once per
/// spell of refusals, so a flood doesn't flood the log).
#[derive(Debug, Default)]
struct Attempts {
    at: VecDeque<Instant>,
    warned: bool,
}

/// Where attempts are counted: an IPv4 address, an IPv6 /64, or (no address known) one shared
/// bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Source {
    V4(u32),
    V6(u64),
    Unknown,
}

impl Source {
    fn of(addr: Option<IpAddr>) -> Source {
        match addr.map(|a| a.to_canonical()) {
            Some(IpAddr::V4(v4)) => Source::V4(u32::from(v4)),
            Some(IpAddr::V6(v6)) => Source::V6((u128::from(v6) >> 64) as u64),
            None => Source::Unknown,
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Source::V4(v4) => write!(f, "{}", std::net::Ipv4Addr::from(v4)),
            Source::V6(prefix) => {
                let v6 = std::net::Ipv6Addr::from(u128::from(prefix) << 64);
                write!(f, "{v6}/64")
            }
            Source::Unknown => f.write_str("an unknown address"),
        }
    }
}

impl EnrolLimit {
    /// `max` attempts per `window` and address (`max` at least 1).
    pub fn new(max: usize, window: Duration) -> EnrolLimit {
        EnrolLimit {
            window,
            max: max.max(1),
            max_addresses: MAX_ADDRESSES,
            attempts: Mutex::new(HashMap::new()),
        }
    }

    #[cfg(test)]
    fn tracking_at_most(self, addresses: usize) -> EnrolLimit {
        EnrolLimit {
            max_addresses: addresses,
            ..self
        }
    }

    /// Counts an attempt from `addr`; `Err` with how long until one more would be let through.
    pub fn admit(&self, addr: Option<IpAddr>) -> Result<(), Duration> {
        self.admit_at(addr, Instant::now())
    }

    fn admit_at(&self, addr: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let mut attempts = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        let source = Source::of(addr);
        if !attempts.contains_key(&source) && attempts.len() >= self.max_addresses {
            let live = |a: &Attempts| {
                a.at.back()
                    .is_some_and(|t| now.saturating_duration_since(*t) < self.window)
            };
            attempts.retain(|_, a| live(a));
            if attempts.len() >= self.max_addresses {
                tracing::warn!(
                    tracked = attempts.len(),
                    "enrolment attempts from too many addresses at once; refusing new ones"
                );
                return Err(self.window);
            }
        }
        let a = attempts.entry(source).or_default();
        while a
            .at
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= self.window)
        {
            a.at.pop_front();
        }
        if a.at.len() >= self.max {
            if !a.warned {
                a.warned = true;
                tracing::warn!(%source, max = self.max, window = ?self.window, "too many enrolment attempts; refusing this address's for a while");
            }
            let oldest = a.at.front().copied().unwrap_or(now);
            return Err(self
                .window
                .saturating_sub(now.saturating_duration_since(oldest)));
        }
        a.warned = false;
        a.at.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().expect("an address"))
    }

    #[test]
    fn an_address_gets_max_attempts_per_window_and_more_as_the_window_slides() {
        let limit = EnrolLimit::new(3, MINUTE);
        let t0 = Instant::now();
        for i in 0..3 {
            let at = t0 + Duration::from_secs(i);
            assert_eq!(limit.admit_at(ip("203.0.113.7"), at), Ok(()), "attempt {i}");
        }
        let refused = limit.admit_at(ip("203.0.113.7"), t0 + Duration::from_secs(10));
        assert_eq!(
            refused,
            Err(Duration::from_secs(50)),
            "until the first slides out"
        );
        assert_eq!(
            limit.admit_at(ip("203.0.113.8"), t0 + Duration::from_secs(10)),
            Ok(()),
            "another address has its own window"
        );
        let later = t0 + MINUTE;
        assert_eq!(limit.admit_at(ip("203.0.113.7"), later), Ok(()));
        assert!(limit.admit_at(ip("203.0.113.7"), later).is_err());
    }

    #[test]
    fn an_ipv6_slash_64_is_one_address_and_a_mapped_ipv4_is_the_ipv4() {
        let limit = EnrolLimit::new(1, MINUTE);
        let t0 = Instant::now();
        assert_eq!(limit.admit_at(ip("2001:db8:1:2::1"), t0), Ok(()));
        assert!(limit.admit_at(ip("2001:db8:1:2:ffff::9"), t0).is_err());
        assert_eq!(limit.admit_at(ip("2001:db8:1:3::1"), t0), Ok(()));
        assert_eq!(limit.admit_at(ip("192.0.2.1"), t0), Ok(()));
        assert!(limit.admit_at(ip("::ffff:192.0.2.1"), t0).is_err());
        assert_eq!(limit.admit_at(None, t0), Ok(()));
        assert!(
            limit.admit_at(None, t0).is_err(),
            "unknown addresses share one"
        );
    }

    #[test]
    fn the_addresses_tracked_are_bounded_and_freed_once_their_windows_pass() {
        let limit = EnrolLimit::new(5, MINUTE).tracking_at_most(2);
        let t0 = Instant::now();
        assert_eq!(limit.admit_at(ip("192.0.2.1"), t0), Ok(()));
        assert_eq!(limit.admit_at(ip("192.0.2.2"), t0), Ok(()));
        assert_eq!(limit.admit_at(ip("192.0.2.3"), t0), Err(MINUTE));
        assert_eq!(
            limit.admit_at(ip("192.0.2.1"), t0),
            Ok(()),
            "a tracked address still counts"
        );
        let later = t0 + MINUTE;
        assert_eq!(limit.admit_at(ip("192.0.2.3"), later), Ok(()));
        let tracked = limit.attempts.lock().unwrap().len();
        assert_eq!(tracked, 1, "the expired ones were dropped");
    }
}
