//! Workload lifecycle steps as the store commits them, by edge: every step of every process
//! (the api's creates, starts, stops and deletes; the controller's admissions and the rest)
//! goes through the store, so this is the one place that sees them all.

use std::sync::LazyLock;

use einsora_core::lifecycle::State;
use einsora_metrics::Counters;

static TRANSITIONS: LazyLock<Counters<2>> = LazyLock::new(|| {
    einsora_metrics::register(
        "einsora_workload_transitions",
        "Workload lifecycle steps committed, by the state left (new for a create) and the state entered.",
        Counters::default(),
    )
});

/// A committed step; `from` is `None` for a workload just created.
pub(crate) fn stepped(from: Option<State>, to: State) {
    let labels = [
        ("from", from.map_or("new", State::as_str).to_owned()),
        ("to", to.as_str().to_owned()),
    ];
    TRANSITIONS.get_or_create(&labels).inc();
}
