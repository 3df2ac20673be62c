//! The store's query latency, from the event sqlx writes for every statement it ran (target
//! `sqlx::query`, at DEBUG, with `summary` and `elapsed_secs`): recorded in
//! `einsora_store_query_duration_seconds` by the statement's first word, whatever the log
//! filter lets through to the log itself.

use std::sync::LazyLock;
use std::time::Duration;

use einsora_metrics::Latencies;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};

const TARGET: &str = "sqlx::query";

static QUERIES: LazyLock<Latencies<1>> = LazyLock::new(|| {
    einsora_metrics::latencies(
        "einsora_store_query_duration_seconds",
        "Time the store's statements took, by kind of statement (select, insert, update, delete, other).",
    )
});

/// The layer, with the filter that gives it sqlx's statement events and nothing else.
pub(super) fn layer<S: Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>>()
-> impl Layer<S> {
    StoreQueries.with_filter(Targets::new().with_target(TARGET, Level::DEBUG))
}

struct StoreQueries;

impl<S: Subscriber> Layer<S> for StoreQueries {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if let Some(elapsed) = fields.elapsed {
            let labels = [("statement", statement(&fields.summary).to_owned())];
            einsora_metrics::observe(&QUERIES, labels, elapsed);
        }
    }
}

#[derive(Default)]
struct Fields {
    summary: String,
    elapsed: Option<Duration>,
}

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "elapsed_secs" {
            self.elapsed = Duration::try_from_secs_f64(value).ok();
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "summary" {
            self.summary = value.to_owned();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "summary" {
            self.summary = format!("{value:?}");
        }
    }
}

/// A statement's kind, from its summary's first word.
fn statement(summary: &str) -> &'static str {
    let word = summary
        .trim_start_matches(|c: char| !c.is_ascii_alphabetic())
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or_default();
    match word.to_ascii_lowercase().as_str() {
        "select" | "with" => "select",
        "insert" => "insert",
        "update" => "update",
        "delete" => "delete",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_known_by_their_first_word() {
        assert_eq!(statement("SELECT workload_id, attempt …"), "select");
        assert_eq!(statement("\"insert into workloads\""), "insert");
        assert_eq!(statement("WITH x AS"), "select");
        assert_eq!(statement("UPDATE workloads SET"), "update");
        assert_eq!(statement("BEGIN IMMEDIATE"), "other");
        assert_eq!(statement(""), "other");
    }
}
