//! Inference limits, held here at the proxy: per inference key (its own) and per tenant (over
//! all its keys and API tokens), each optional: requests per minute and tokens per minute in
//! sliding one-minute windows (kept in 100 ms slots, so at most 600 entries each), and tokens
//! per UTC day. A request is let through when every limit that applies to it has room, and
//! counts one request at once; its tokens (prompt and completion, as the engine counted them)
//! are known only when its answer ends, and are added then (`usage.rs` calls [`Spend`]), so a
//! token limit refuses the requests after the one that reached it. The day's count starts from
//! the recorded usage the api hands over with the caller (`tokens_today`), when it is more than
//! what this proxy counted itself, otherwise from this proxy's count (zero after a restart
//! without recorded usage).
//!
//! Every answer to a request under limits carries OpenAI's `x-ratelimit-*` headers for the
//! tighter of the key's and the tenant's (the one with less remaining); a refusal is a 429
//! naming the limit, with `Retry-After` and `retry-after-ms` set to when it has room again.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use crate::errors::Failure;

const SLOT: Duration = Duration::from_millis(100);
const WINDOW_SLOTS: u64 = 600;
const DAY: Duration = Duration::from_secs(24 * 3600);
/// A counter untouched this long is forgotten (its day is over; its windows long empty).
const IDLE: Duration = Duration::from_secs(25 * 3600);
/// Forgotten counters are looked for every this many requests.
const SWEEP_EVERY: u64 = 4096;

pub(crate) const LIMIT_REQUESTS: HeaderName = HeaderName::from_static("x-ratelimit-limit-requests");
pub(crate) const REMAINING_REQUESTS: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining-requests");
pub(crate) const RESET_REQUESTS: HeaderName = HeaderName::from_static("x-ratelimit-reset-requests");
pub(crate) const LIMIT_TOKENS: HeaderName = HeaderName::from_static("x-ratelimit-limit-tokens");
pub(crate) const REMAINING_TOKENS: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining-tokens");
pub(crate) const RESET_TOKENS: HeaderName = HeaderName::from_static("x-ratelimit-reset-tokens");

/// One subject's limits, each `None` when it has none of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) requests_per_minute: Option<u32>,
    pub(crate) tokens_per_minute: Option<u32>,
    pub(crate) tokens_per_day: Option<u32>,
}

impl Limits {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Limits::default()
    }
}

/// Whose limits: a key's (by ID) or a tenant's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Subject {
    Key(String),
    Tenant(String),
}

impl Subject {
    fn whose(&self) -> &'static str {
        match self {
            Subject::Key(_) => "this inference key's",
            Subject::Tenant(_) => "your tenant's",
        }
    }
}

/// The limits a request is held to: its key's (if it came with one) and its tenant's, each
/// with the tokens recorded for it today.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) subject: Subject,
    pub(crate) limits: Limits,
    pub(crate) recorded_today: u64,
}

/// Every subject's counts.
#[derive(Debug)]
pub(crate) struct RateLimits {
    base: Instant,
    counters: Mutex<HashMap<Subject, Counter>>,
    admitted: AtomicU64,
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits {
            base: Instant::now(),
            counters: Mutex::default(),
            admitted: AtomicU64::new(0),
        }
    }
}

#[derive(Debug, Default)]
struct Counter {
    requests: Window,
    tokens: Window,
    /// The UTC day `day_tokens` counts, as days since 1970.
    day: u64,
    day_tokens: u64,
    touched: Option<Instant>,
}

/// A sliding minute: amounts by the 100 ms slot they came in, oldest first.
#[derive(Debug, Default)]
struct Window {
    slots: VecDeque<(u64, u64)>,
    sum: u64,
}

impl Window {
    fn expire(&mut self, now: u64) {
        while let Some(&(slot, n)) = self.slots.front() {
            if slot + WINDOW_SLOTS > now {
                break;
            }
            self.sum -= n;
            self.slots.pop_front();
        }
    }

    fn add(&mut self, now: u64, n: u64) {
        match self.slots.back_mut() {
            Some((slot, m)) if *slot == now => *m += n,
            _ => self.slots.push_back((now, n)),
        }
        self.sum += n;
    }

    /// How long until the window holds at most `limit - need` (room for `need` more).
    fn room_in(&self, limit: u64, need: u64, now: u64, at: Duration) -> Duration {
        let mut left = self.sum;
        for &(slot, n) in &self.slots {
            if left + need <= limit {
                break;
            }
            left -= n;
            if left + need <= limit {
                return slot_end(slot).saturating_sub(at);
            }
        }
        if left + need <= limit {
            return Duration::ZERO;
        }
        // More than the limit can ever hold: a whole window.
        slot_end(now).saturating_sub(at)
    }

    /// How long until it is empty again.
    fn empty_in(&self, at: Duration) -> Duration {
        self.slots.back().map_or(Duration::ZERO, |&(slot, _)| {
            slot_end(slot).saturating_sub(at)
        })
    }
}

/// When an amount counted in `slot` leaves the window, from the base.
fn slot_end(slot: u64) -> Duration {
    SLOT * u32::try_from(slot + WINDOW_SLOTS).unwrap_or(u32::MAX)
}

/// A UTC time as (day since 1970, time until the next day starts).
fn utc_day(wall: SystemTime) -> (u64, Duration) {
    let since = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
    let day = since.as_secs() / DAY.as_secs();
    let next = Duration::from_secs((day + 1) * DAY.as_secs());
    (day, next.saturating_sub(since))
}

/// Which limit a request would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    RequestsPerMinute,
    TokensPerMinute,
    TokensPerDay,
}

impl Kind {
    fn words(self) -> &'static str {
        match self {
            Kind::RequestsPerMinute => "requests per minute",
            Kind::TokensPerMinute => "tokens per minute",
            Kind::TokensPerDay => "tokens per day (UTC)",
        }
    }
}

/// What a request let through takes along: the headers of its answer, and where its tokens go.
#[derive(Debug, Clone)]
pub(crate) struct Admitted {
    pub(crate) headers: HeaderMap,
    pub(crate) spend: Option<Spend>,
}

/// Adds an answer's tokens to the windows and days of the subjects it was let through under.
#[derive(Debug, Clone)]
pub(crate) struct Spend {
    limits: Arc<RateLimits>,
    subjects: Vec<Subject>,
}

impl Spend {
    pub(crate) fn tokens(&self, tokens: u64) {
        let (now, wall) = (Instant::now(), SystemTime::now());
        self.limits.spent(&self.subjects, tokens, now, wall);
    }

    /// As `usage.rs` takes it: told each answer's prompt and completion tokens.
    pub(crate) fn on_spent(self) -> crate::usage::OnSpent {
        Arc::new(move |s: crate::usage::Spent| self.tokens(s.prompt.saturating_add(s.completion)))
    }
}

/// One limit's state after a request, for the headers.
#[derive(Debug, Clone, Copy)]
struct Standing {
    limit: u64,
    remaining: u64,
    reset: Duration,
}

impl Standing {
    /// The tighter of two: less remaining, then the smaller limit.
    fn tighter(a: Option<Standing>, b: Standing) -> Standing {
        match a {
            Some(a) if (a.remaining, a.limit) <= (b.remaining, b.limit) => a,
            _ => b,
        }
    }
}

impl RateLimits {
    fn lock(&self) -> MutexGuard<'_, HashMap<Subject, Counter>> {
        self.counters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self, now: Instant) -> (u64, Duration) {
        let at = now.saturating_duration_since(self.base);
        let slot = u64::try_from(at.as_millis() / SLOT.as_millis()).unwrap_or(u64::MAX);
        (slot, at)
    }

    /// Lets a request through under `rules`, or refuses it naming the first limit it would
    /// pass. `None` when no limit applies: nothing is counted and no header is added.
    pub(crate) fn admit(self: &Arc<Self>, rules: &[Rule]) -> Result<Option<Admitted>, Failure> {
        self.admit_at(rules, Instant::now(), SystemTime::now())
    }

    fn admit_at(
        self: &Arc<Self>,
        rules: &[Rule],
        now: Instant,
        wall: SystemTime,
    ) -> Result<Option<Admitted>, Failure> {
        let rules: Vec<&Rule> = rules.iter().filter(|r| !r.limits.is_empty()).collect();
        if rules.is_empty() {
            return Ok(None);
        }
        let (slot, at) = self.slot(now);
        let (day, day_left) = utc_day(wall);
        let mut counters = self.lock();
        if self
            .admitted
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SWEEP_EVERY)
        {
            counters.retain(|_, c| c.touched.is_some_and(|t| now.duration_since(t) < IDLE));
        }
        // Every limit is checked before anything is counted.
        for rule in &rules {
            let counter = counters.entry(rule.subject.clone()).or_default();
            counter.catch_up(slot, day, rule.recorded_today);
            if let Some((kind, limit, retry)) = counter.full(&rule.limits, slot, at, day_left) {
                let mut failure = Failure::busy(
                    format!(
                        "rate limit reached: {} limit of {limit} {}; try again in {}",
                        rule.subject.whose(),
                        kind.words(),
                        reset_text(retry)
                    ),
                    retry,
                );
                let headers = standings(&counters, &rules, at, day_left);
                failure = failure.with_headers(headers);
                return Err(failure);
            }
        }
        for rule in &rules {
            let counter = counters.entry(rule.subject.clone()).or_default();
            counter.requests.add(slot, 1);
            counter.touched = Some(now);
        }
        let headers = standings(&counters, &rules, at, day_left);
        drop(counters);
        let counts_tokens = rules
            .iter()
            .any(|r| r.limits.tokens_per_minute.is_some() || r.limits.tokens_per_day.is_some());
        let spend = counts_tokens.then(|| Spend {
            limits: Arc::clone(self),
            subjects: rules.iter().map(|r| r.subject.clone()).collect(),
        });
        Ok(Some(Admitted { headers, spend }))
    }

    fn spent(&self, subjects: &[Subject], tokens: u64, now: Instant, wall: SystemTime) {
        if tokens == 0 {
            return;
        }
        let (slot, _) = self.slot(now);
        let (day, _) = utc_day(wall);
        let mut counters = self.lock();
        for subject in subjects {
            let counter = counters.entry(subject.clone()).or_default();
            counter.catch_up(slot, day, 0);
            counter.tokens.add(slot, tokens);
            counter.day_tokens = counter.day_tokens.saturating_add(tokens);
            counter.touched = Some(now);
        }
    }
}

impl Counter {
    /// Drops what left the windows; a new day starts from what was recorded of it.
    fn catch_up(&mut self, slot: u64, day: u64, recorded: u64) {
        self.requests.expire(slot);
        self.tokens.expire(slot);
        if self.day != day {
            self.day = day;
            self.day_tokens = 0;
        }
        self.day_tokens = self.day_tokens.max(recorded);
    }

    /// The first limit with no room for another request, and when it will have.
    fn full(
        &self,
        limits: &Limits,
        slot: u64,
        at: Duration,
        day_left: Duration,
    ) -> Option<(Kind, u32, Duration)> {
        if let Some(rpm) = limits.requests_per_minute
            && self.requests.sum >= u64::from(rpm)
        {
            let retry = self.requests.room_in(u64::from(rpm), 1, slot, at);
            return Some((Kind::RequestsPerMinute, rpm, retry));
        }
        if let Some(tpm) = limits.tokens_per_minute
            && self.tokens.sum >= u64::from(tpm)
        {
            let retry = self.tokens.room_in(u64::from(tpm), 1, slot, at);
            return Some((Kind::TokensPerMinute, tpm, retry));
        }
        if let Some(tpd) = limits.tokens_per_day
            && self.day_tokens >= u64::from(tpd)
        {
            return Some((Kind::TokensPerDay, tpd, day_left));
        }
        None
    }
}

/// The `x-ratelimit-*` headers: for requests and for tokens, the tighter of the rules' limits
/// (for tokens, of the per-minute and per-day ones alike).
fn standings(
    counters: &HashMap<Subject, Counter>,
    rules: &[&Rule],
    at: Duration,
    day_left: Duration,
) -> HeaderMap {
    let mut requests: Option<Standing> = None;
    let mut tokens: Option<Standing> = None;
    for rule in rules {
        let Some(counter) = counters.get(&rule.subject) else {
            continue;
        };
        let l = &rule.limits;
        if let Some(rpm) = l.requests_per_minute.map(u64::from) {
            let s = Standing {
                limit: rpm,
                remaining: rpm.saturating_sub(counter.requests.sum),
                reset: counter.requests.empty_in(at),
            };
            requests = Some(Standing::tighter(requests, s));
        }
        if let Some(tpm) = l.tokens_per_minute.map(u64::from) {
            let s = Standing {
                limit: tpm,
                remaining: tpm.saturating_sub(counter.tokens.sum),
                reset: counter.tokens.empty_in(at),
            };
            tokens = Some(Standing::tighter(tokens, s));
        }
        if let Some(tpd) = l.tokens_per_day.map(u64::from) {
            let s = Standing {
                limit: tpd,
                remaining: tpd.saturating_sub(counter.day_tokens),
                reset: if counter.day_tokens == 0 {
                    Duration::ZERO
                } else {
                    day_left
                },
            };
            tokens = Some(Standing::tighter(tokens, s));
        }
    }
    let mut headers = HeaderMap::new();
    for (standing, names) in [
        (
            requests,
            [LIMIT_REQUESTS, REMAINING_REQUESTS, RESET_REQUESTS],
        ),
        (tokens, [LIMIT_TOKENS, REMAINING_TOKENS, RESET_TOKENS]),
    ] {
        let Some(s) = standing else { continue };
        let [limit, remaining, reset] = names;
        headers.insert(limit, HeaderValue::from(s.limit));
        headers.insert(remaining, HeaderValue::from(s.remaining));
        if let Ok(value) = HeaderValue::from_str(&reset_text(s.reset)) {
            headers.insert(reset, value);
        }
    }
    headers
}

/// A duration as OpenAI writes its resets: `340ms` under a second, else `12s`, `1m5s`,
/// `3h0m12s` (seconds rounded up).
pub(crate) fn reset_text(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(subject: Subject, rpm: Option<u32>, tpm: Option<u32>, tpd: Option<u32>) -> Rule {
        Rule {
            subject,
            limits: Limits {
                requests_per_minute: rpm,
                tokens_per_minute: tpm,
                tokens_per_day: tpd,
            },
            recorded_today: 0,
        }
    }

    fn key() -> Subject {
        Subject::Key("k".into())
    }

    fn tenant() -> Subject {
        Subject::Tenant("t".into())
    }

    /// Noon, some UTC day.
    fn noon() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(20_000 * 86_400 + 12 * 3600)
    }

    fn header(h: &HeaderMap, name: &HeaderName) -> String {
        h.get(name).unwrap().to_str().unwrap().to_owned()
    }

    #[test]
    fn requests_count_down_and_a_full_minute_refuses_until_it_slides() {
        let limits = Arc::new(RateLimits::default());
        let t0 = limits.base;
        let rules = [rule(key(), Some(3), None, None)];
        for (i, left) in ["2", "1", "0"].into_iter().enumerate() {
            let at = t0 + Duration::from_secs(10 * i as u64);
            let admitted = limits.admit_at(&rules, at, noon()).unwrap().unwrap();
            assert_eq!(header(&admitted.headers, &REMAINING_REQUESTS), left);
            assert_eq!(header(&admitted.headers, &LIMIT_REQUESTS), "3");
            assert!(admitted.spend.is_none(), "no token limit: nothing to count");
        }
        let refused = limits
            .admit_at(&rules, t0 + Duration::from_secs(25), noon())
            .unwrap_err();
        // The first request (at 0 s) leaves the window at 60 s: 35 s from now.
        assert_eq!(refused.hinted(), Some(Duration::from_secs(35)));
        assert!(
            format!("{refused:?}").contains("this inference key's limit of 3 requests per minute"),
            "{refused:?}"
        );
        assert!(
            limits
                .admit_at(&rules, t0 + Duration::from_secs(60), noon())
                .is_ok(),
            "the oldest has slid out"
        );
    }

    #[test]
    fn the_tighter_of_key_and_tenant_is_shown_and_either_refuses() {
        let limits = Arc::new(RateLimits::default());
        let t0 = limits.base;
        let rules = [
            rule(key(), Some(10), None, None),
            rule(tenant(), Some(2), None, None),
        ];
        let first = limits.admit_at(&rules, t0, noon()).unwrap().unwrap();
        assert_eq!(header(&first.headers, &LIMIT_REQUESTS), "2", "the tenant's");
        assert_eq!(header(&first.headers, &REMAINING_REQUESTS), "1");
        assert_eq!(header(&first.headers, &RESET_REQUESTS), "1m0s");
        limits.admit_at(&rules, t0, noon()).unwrap();
        let refused = limits.admit_at(&rules, t0, noon()).unwrap_err();
        assert!(
            format!("{refused:?}").contains("your tenant's limit of 2 requests per minute"),
            "{refused:?}"
        );
        // A refusal counts nothing: the key's own count stayed at 2.
        let counters = limits.lock();
        assert_eq!(counters[&key()].requests.sum, 2);
    }

    #[test]
    fn tokens_are_counted_when_spent_and_refuse_the_next_request() {
        let limits = Arc::new(RateLimits::default());
        let t0 = limits.base;
        let rules = [rule(key(), None, Some(100), Some(1000))];
        let admitted = limits.admit_at(&rules, t0, noon()).unwrap().unwrap();
        assert_eq!(header(&admitted.headers, &REMAINING_TOKENS), "100");
        let spend = admitted.spend.unwrap();
        limits.spent(&spend.subjects, 120, t0 + Duration::from_secs(1), noon());
        let refused = limits
            .admit_at(&rules, t0 + Duration::from_secs(2), noon())
            .unwrap_err();
        assert!(
            format!("{refused:?}").contains("limit of 100 tokens per minute"),
            "{refused:?}"
        );
        assert_eq!(refused.hinted(), Some(Duration::from_secs(59)));
        let later = limits
            .admit_at(&rules, t0 + Duration::from_secs(61), noon())
            .unwrap()
            .unwrap();
        // The minute has room again; the day has 880 left, the tighter of the two.
        assert_eq!(header(&later.headers, &REMAINING_TOKENS), "100");
        assert_eq!(header(&later.headers, &LIMIT_TOKENS), "100");
    }

    #[test]
    fn a_day_starts_from_what_was_recorded_and_resets_at_midnight_utc() {
        let limits = Arc::new(RateLimits::default());
        let t0 = limits.base;
        let mut day = rule(tenant(), None, None, Some(500));
        day.recorded_today = 450;
        let admitted = limits
            .admit_at(&[day.clone()], t0, noon())
            .unwrap()
            .unwrap();
        assert_eq!(header(&admitted.headers, &REMAINING_TOKENS), "50");
        assert_eq!(header(&admitted.headers, &RESET_TOKENS), "12h0m0s");
        limits.spent(&[tenant()], 60, t0, noon());
        let refused = limits.admit_at(&[day.clone()], t0, noon()).unwrap_err();
        assert_eq!(refused.hinted(), Some(Duration::from_secs(12 * 3600)));
        let tomorrow = noon() + DAY;
        day.recorded_today = 0;
        assert!(limits.admit_at(&[day], t0, tomorrow).is_ok());
    }

    #[test]
    fn no_limits_count_nothing_and_add_no_header() {
        let limits = Arc::new(RateLimits::default());
        let rules = [
            rule(key(), None, None, None),
            rule(tenant(), None, None, None),
        ];
        assert!(
            limits
                .admit_at(&rules, limits.base, noon())
                .unwrap()
                .is_none()
        );
        assert!(limits.lock().is_empty());
    }

    #[test]
    fn resets_read_like_openais() {
        assert_eq!(reset_text(Duration::from_millis(340)), "340ms");
        assert_eq!(reset_text(Duration::from_millis(11_200)), "12s");
        assert_eq!(reset_text(Duration::from_secs(65)), "1m5s");
        assert_eq!(reset_text(Duration::from_secs(3 * 3600 + 12)), "3h0m12s");
    }
}
