//! The accounting itself, sans I/O: a workload's timeline and the time now in, the seconds it
//! spent in a metered state during each UTC hour out. A pure function of its input, so running
//! it again (a replay, a restart) gives the same answer, and writing that answer never
//! double-counts.

use std::collections::BTreeMap;

use einsora_core::attempt::Attempt;
use einsora_store::Event;
use time::OffsetDateTime;

pub(crate) const HOUR_MS: i64 = 3_600_000;
const HOUR_SECONDS: u32 = 3600;

/// The time a workload spent in a metered state during one hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HourOfUse {
    /// The hour's start, Unix milliseconds, on the hour (UTC).
    pub hour_start_ms: i64,
    /// 1 to 3600: an hour with less than a second of use has no record.
    pub seconds: u32,
    /// The attempt of the hour's latest run: whose placement the hour is accounted to.
    pub attempt: Attempt,
}

/// One stretch in a metered state: `[start, end)` in Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    start: i64,
    end: i64,
    attempt: Attempt,
}

/// The hours a workload was in a metered state, oldest first. A run starts with the move into a
/// metered state and ends with the next move out of it; one still going is counted up to `now`.
/// Notes (from = to) change no state and are skipped. `events` are in timeline order.
pub fn hours_of_use(events: &[Event], now: OffsetDateTime) -> Vec<HourOfUse> {
    let mut hours: BTreeMap<i64, (i64, Attempt)> = BTreeMap::new();
    for run in runs(events, unix_ms(now)) {
        let mut hour = run.start.div_euclid(HOUR_MS) * HOUR_MS;
        while hour < run.end {
            let overlap = run.end.min(hour + HOUR_MS) - run.start.max(hour);
            let (ms, attempt) = hours.entry(hour).or_insert((0, run.attempt));
            *ms += overlap;
            *attempt = run.attempt;
            hour += HOUR_MS;
        }
    }
    hours
        .into_iter()
        .filter_map(|(hour_start_ms, (ms, attempt))| {
            // Whole seconds, never more than the hour has: clocks of different controllers may
            // disagree enough for two runs to overlap.
            let seconds = u32::try_from(ms / 1000)
                .unwrap_or(u32::MAX)
                .min(HOUR_SECONDS);
            (seconds > 0).then_some(HourOfUse {
                hour_start_ms,
                seconds,
                attempt,
            })
        })
        .collect()
}

fn runs(events: &[Event], now: i64) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut open: Option<(i64, Attempt)> = None;
    for event in events.iter().filter(|e| !e.is_note()) {
        let at = unix_ms(event.at);
        match (event.to.metered(), open) {
            (true, None) => open = Some((at, event.attempt)),
            (false, Some((start, attempt))) => {
                runs.push(Run {
                    start,
                    end: at,
                    attempt,
                });
                open = None;
            }
            _ => {}
        }
    }
    if let Some((start, attempt)) = open {
        runs.push(Run {
            start,
            end: now,
            attempt,
        });
    }
    // A run whose end precedes its start (clock skew) has no length to count.
    runs.retain(|r| r.end > r.start);
    runs
}

pub(crate) fn unix_ms(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos().div_euclid(1_000_000)).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[path = "accounting_tests.rs"]
mod tests;
