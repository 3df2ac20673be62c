//! Prometheus metrics: one registry per process, in which each part of it registers its own
//! families once ([`register`], usually from a `LazyLock` beside the code that counts), and
//! the text the process's `/metrics` answers with ([`encode`]; `einsora_runtime::metrics`
//! serves it). Its own crate, like the settings, so the store counts without the runtime.
//!
//! Names follow Prometheus's conventions: `einsora_` and a base unit (`_seconds`, `_bytes`);
//! counters are registered without the `_total` the encoder adds. Labels are drawn from small
//! fixed sets (route templates, state words, class names): never a workload's ID, a user or
//! anything secret.

mod process;

use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

pub use prometheus_client::metrics::counter::Counter;
pub use prometheus_client::metrics::gauge::Gauge;

/// Labels: a few `(name, value)` pairs.
pub type Labels<const N: usize> = [(&'static str, String); N];

/// Counters by their labels.
pub type Counters<const N: usize> = Family<Labels<N>, Counter>;

/// Gauges by their labels.
pub type Gauges<const N: usize> = Family<Labels<N>, Gauge>;

/// Histograms of seconds by their labels, on [`latency`]'s buckets.
pub type Latencies<const N: usize> = Family<Labels<N>, Histogram, fn() -> Histogram>;

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(process::Process));
    Mutex::new(registry)
});

/// Registers `metric` in the process's registry as `name` and hands it back, to keep and
/// update.
pub fn register<M: Metric + Clone>(name: &str, help: &str, metric: M) -> M {
    let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    // The encoder ends the help with its own full stop.
    registry.register(name, help.trim_end_matches('.'), metric.clone());
    metric
}

/// A histogram family of durations in seconds, from 100 µs to half a minute.
pub fn latencies<const N: usize>(name: &str, help: &str) -> Latencies<N> {
    register(
        name,
        help,
        Family::new_with_constructor(latency as fn() -> Histogram),
    )
}

/// Buckets for what takes from 100 µs (a SQLite read) to half a minute.
pub fn latency() -> Histogram {
    Histogram::new([
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
        5.0, 10.0, 30.0,
    ])
}

/// Records `elapsed` in the histogram of `labels`.
pub fn observe<const N: usize>(family: &Latencies<N>, labels: Labels<N>, elapsed: Duration) {
    family.get_or_create(&labels).observe(elapsed.as_secs_f64());
}

static HTTP_REQUESTS: LazyLock<Latencies<3>> = LazyLock::new(|| {
    latencies(
        "einsora_http_request_duration_seconds",
        "Time an HTTP server took to answer a request's head, by route, method and status code.",
    )
});

/// Records an HTTP request a server answered: `route` is a template or a fixed word, never
/// the request's own path; a method other than the standard ones is `other`.
pub fn http_request(route: &str, method: &str, status: u16, elapsed: Duration) {
    let method = match method {
        "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS" => method,
        _ => "other",
    };
    let labels = [
        ("route", route.to_owned()),
        ("method", method.to_owned()),
        ("code", status_code(status)),
    ];
    observe(&HTTP_REQUESTS, labels, elapsed);
}

/// An HTTP status as a label: a registered code as it is, any other (a workload behind the
/// proxy answers what it likes) as `other`, so no caller or workload makes new series at will.
pub fn status_code(status: u16) -> String {
    const REGISTERED: [u16; 62] = [
        100, 101, 102, 103, 200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303,
        304, 305, 307, 308, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413,
        414, 415, 416, 417, 418, 421, 422, 423, 424, 425, 426, 428, 429, 431, 451, 500, 501, 502,
        503, 504, 505, 506, 507, 508, 510, 511,
    ];
    match status {
        s if REGISTERED.contains(&s) => s.to_string(),
        0 => "0".to_owned(),
        _ => "other".to_owned(),
    }
}

/// Which text format metrics are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// `text/plain; version=0.0.4`, what `promtool check metrics` reads.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Exposition {
    /// What an `Accept` header asks for: OpenMetrics only when it names it.
    pub fn accepted(accept: Option<&str>) -> Exposition {
        match accept {
            Some(v) if v.contains("application/openmetrics-text") => Exposition::OpenMetrics,
            _ => Exposition::Prometheus,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The process's metrics as text.
pub fn encode(exposition: Exposition) -> String {
    let mut text = String::new();
    let registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    let encoded = match exposition {
        Exposition::Prometheus => {
            prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)
        }
        Exposition::OpenMetrics => prometheus_client::encoding::text::encode(&mut text, &registry),
    };
    if let Err(e) = encoded {
        // Only a collector's own error does this; what was written so far is still served.
        tracing::warn!(error = %e, "encoding the metrics failed");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_registered_anywhere_are_encoded_in_either_format() {
        http_request("/v1/things/{id}", "GET", 200, Duration::from_millis(3));
        http_request("/v1/things/{id}", "BREW", 418, Duration::from_millis(3));
        let text = encode(Exposition::Prometheus);
        assert!(text.contains("# TYPE einsora_http_request_duration_seconds histogram"));
        assert!(
            !text.contains(".."),
            "one full stop after each help: {text}"
        );
        assert!(text.contains(
            "einsora_http_request_duration_seconds_count{route=\"/v1/things/{id}\",method=\"GET\",code=\"200\"} 1"
        ), "{text}");
        assert!(text.contains("method=\"other\",code=\"418\""), "{text}");
        assert_eq!(status_code(404), "404");
        assert_eq!(status_code(299), "other");
        assert_eq!(status_code(999), "other");
        assert!(text.contains("process_cpu_seconds_total"), "{text}");
        let open = encode(Exposition::OpenMetrics);
        assert!(open.ends_with("# EOF\n"), "{open}");
        assert_eq!(
            Exposition::accepted(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
            )),
            Exposition::OpenMetrics
        );
        assert_eq!(Exposition::accepted(None), Exposition::Prometheus);
    }
}
