//! Traces over OTLP (gRPC) when `EINSORA_OTLP_ENDPOINT` is set, and the W3C trace context
//! every internal call carries (`traceparent`, `tracestate` in its metadata), so one request is
//! one trace across the gateway, the api and the store, and the controller's work on a workload
//! joins the trace of the request that created it (its intent keeps the context). Unset, no
//! layer is installed and no context is propagated: nothing is spent on tracing.

use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use crate::settings::{ConfigError, Settings};

/// Where spans go: an OTLP/gRPC receiver (an OpenTelemetry Collector), `http://host:4317`.
pub const OTLP_ENDPOINT: &str = "EINSORA_OTLP_ENDPOINT";

/// How long a process waits, as it stops, for its last spans to reach the receiver.
const FLUSH: Duration = Duration::from_secs(5);

/// Which spans and events are exported: spans at INFO, the store's at DEBUG (each store call
/// is a span of its own, below the log's INFO); of events, only WARN and ERROR (as span
/// events), so the log's lines aren't sent twice.
fn exported(meta: &tracing::Metadata<'_>) -> bool {
    if meta.is_span() {
        let store = meta.target().starts_with("einsora_store");
        *meta.level() <= tracing::Level::INFO || (store && *meta.level() <= tracing::Level::DEBUG)
    } else {
        *meta.level() <= tracing::Level::WARN
    }
}

/// The receiver's URL, validated with the other settings.
pub(super) fn endpoint(settings: &Settings) -> Result<Option<String>, ConfigError> {
    if !settings.is_set(OTLP_ENDPOINT) {
        return Ok(None);
    }
    // Plain HTTP/2 only (no TLS in this exporter): a collector beside the roles forwards.
    Ok(Some(settings.url(OTLP_ENDPOINT, &["http"], "")?))
}

/// Exports this process's spans, as `einsora-<role>`: the layer that makes them, and the
/// provider that sends them (flushed by [`flush`]). Needs a Tokio runtime entered: the exporter's
/// connection lives there.
pub(super) fn layer<S>(endpoint: &str, role: &str) -> Result<(impl Layer<S>, Tracing), String>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| format!("{OTLP_ENDPOINT}: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(format!("einsora-{role}"))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("einsora");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(
            tracing_subscriber::filter::filter_fn(exported)
                .with_max_level_hint(tracing::level_filters::LevelFilter::DEBUG),
        );
    Ok((layer, Tracing(Some(provider))))
}

/// The span exporter of a process, if it has one.
#[derive(Debug, Default)]
pub struct Tracing(Option<SdkTracerProvider>);

impl Tracing {
    /// Sends what is still buffered, waiting a few seconds at most; called as the process stops.
    pub fn flush(&self) {
        if let Some(provider) = &self.0
            && let Err(e) = provider.shutdown_with_timeout(FLUSH)
        {
            tracing::debug!(error = %e, "the last spans may not have reached the receiver");
        }
    }
}

/// The current span's trace context, in `headers` (a request about to leave for another
/// role). Without traces, nothing is added.
pub fn inject(headers: &mut hyper::HeaderMap) {
    let context = tracing::Span::current().context();
    if !context.span().span_context().is_valid() {
        return;
    }
    TraceContextPropagator::new().inject_context(&context, &mut Headers(headers));
}

/// [`inject`] into a gRPC call's metadata.
pub fn inject_metadata(metadata: &mut tonic::metadata::MetadataMap) {
    if !tracing::Span::current()
        .context()
        .span()
        .span_context()
        .is_valid()
    {
        return;
    }
    let mut headers = std::mem::take(metadata).into_headers();
    inject(&mut headers);
    *metadata = tonic::metadata::MetadataMap::from_headers(headers);
}

/// Makes `span` a child of the trace context `headers` carry (a request that came in), if
/// they carry one and spans are exported.
pub fn continue_from(span: &tracing::Span, headers: &hyper::HeaderMap) {
    let context = TraceContextPropagator::new().extract(&Headers::read(headers));
    if context.span().span_context().is_valid() {
        let _ = span.set_parent(context);
    }
}

/// The current span's context as a `traceparent` value, to keep with an intent (a workload's
/// creation) for the work it leads to; none without traces.
pub fn traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut headers = hyper::HeaderMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut Headers(&mut headers));
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Keeps `span` and everything under it out of the exported traces (a followed log's polls
/// would grow one trace for as long as it is followed): it gets a parent that isn't sampled.
pub fn untraced(span: &tracing::Span) {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    let bytes = uuid::Uuid::now_v7().as_u128();
    let unsampled = SpanContext::new(
        TraceId::from(bytes),
        SpanId::from(bytes as u64 | 1),
        TraceFlags::default(),
        true,
        TraceState::default(),
    );
    let context = opentelemetry::Context::new().with_remote_span_context(unsampled);
    // Without spans exported there is no layer to tell: nothing to keep out.
    let _ = span.set_parent(context);
}

/// Makes `span` a child of a kept `traceparent` (see [`traceparent`]); a malformed one is
/// ignored.
pub fn continue_from_traceparent(span: &tracing::Span, traceparent: &str) {
    let mut headers = hyper::HeaderMap::new();
    if let Ok(value) = traceparent.parse() {
        headers.insert("traceparent", value);
        continue_from(span, &headers);
    }
}

struct Headers<'a>(&'a mut hyper::HeaderMap);

impl Injector for Headers<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(key.as_bytes()),
            hyper::header::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// Reading only: the extractor never writes.
struct Reading<'a>(&'a hyper::HeaderMap);

impl Headers<'_> {
    fn read(headers: &hyper::HeaderMap) -> Reading<'_> {
        Reading(headers)
    }
}

impl Extractor for Reading<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .map(hyper::header::HeaderName::as_str)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_span_exporter_nothing_is_carried() {
        let mut headers = hyper::HeaderMap::new();
        inject(&mut headers);
        assert!(headers.is_empty());
        assert_eq!(traceparent(), None);
        // A malformed context is ignored, not an error.
        continue_from_traceparent(&tracing::Span::none(), "not a traceparent");
    }
}
