//! The dashboard's words for workload states and kinds (web/format.js) are core's: a state or
//! kind added, renamed or reordered in one place and not the other fails here.

// A test harness: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;

const FORMAT_JS: &str = include_str!("../../web/format.js");

/// The quoted words of `export const <name> = [...]`.
fn words(name: &str) -> Vec<String> {
    let start = format!("export const {name} = [");
    let rest = &FORMAT_JS[FORMAT_JS.find(&start).unwrap() + start.len()..];
    let list = &rest[..rest.find(']').unwrap()];
    list.split(',')
        .map(|w| w.trim().trim_matches('\'').to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

#[test]
fn the_dashboards_states_and_kinds_are_cores() {
    let states: Vec<String> = State::ALL.iter().map(|s| s.as_str().to_owned()).collect();
    assert_eq!(
        words("STATES"),
        states,
        "web/format.js STATES, in lifecycle order"
    );
    // The launch form's order (notebooks first) is the dashboard's own.
    let mut kinds: Vec<String> = WorkloadKind::ALL
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect();
    let mut offered = words("KINDS");
    kinds.sort();
    offered.sort();
    assert_eq!(offered, kinds, "web/format.js KINDS");
}
