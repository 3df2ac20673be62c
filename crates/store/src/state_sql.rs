//! SQL lists of states derived from the lifecycle's properties, so the queries never restate
//! which states hold quota or capacity, or accrue usage.

use std::sync::LazyLock;

use einsora_core::lifecycle::State;

fn list(pred: fn(State) -> bool) -> String {
    State::ALL
        .iter()
        .filter(|s| pred(**s))
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) static HOLDS_QUOTA: LazyLock<String> = LazyLock::new(|| list(State::holds_quota));
pub(crate) static HOLDS_CAPACITY: LazyLock<String> = LazyLock::new(|| list(State::holds_capacity));
pub(crate) static METERED: LazyLock<String> = LazyLock::new(|| list(State::metered));
