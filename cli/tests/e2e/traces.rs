//! OpenTelemetry traces over OTLP, received by a real OTLP receiver built on the official
//! protobuf definitions (`einsora_testkit::otlp`): one create request is one trace across three
//! processes (the gateway's request, the api's call and its store calls, and the controller's
//! admission of the workload, which joins the trace its intent kept), and a caller's own
//! `traceparent` is continued.

use std::collections::BTreeSet;
use std::time::Duration;

use einsora_testkit::eventually_or;
use einsora_testkit::otlp::OtlpReceiver;

use crate::harness::solo::Solo;
use crate::harness::workloads::wait_for;
use crate::harness::world::{a_notebook, launch, tenant};

/// The batch exporter sends every 5 s.
const PATIENCE: Duration = Duration::from_secs(60);

#[test]
fn one_create_request_is_one_trace_across_the_gateway_the_api_and_the_controller() {
    let receiver = OtlpReceiver::start().unwrap();
    let endpoint = receiver.endpoint();
    let solo = Solo::start(&[
        ("EINSORA_AUTH_MODE", "dev"),
        ("EINSORA_OTLP_ENDPOINT", &endpoint),
    ]);
    let acme = tenant(&solo, "dev@acme");
    let id = launch(&solo, &acme.token, a_notebook("traced"));
    wait_for(&solo, &acme.session, &id, "running");

    let wanted = [
        ("einsora-gateway", "request"),
        ("einsora-api", "rpc"),
        ("einsora-api", "store.create_workload"),
        ("einsora-controller", "admit"),
    ];
    let trace = eventually_or(
        "the create's spans from the gateway, the api and the controller in one trace",
        PATIENCE,
        || {
            let spans = receiver.spans();
            // The trace whose controller span admitted this workload's... any trace holding
            // every wanted span will do: only the create leads to an admission.
            let traces: BTreeSet<String> = spans
                .iter()
                .filter(|s| s.service == "einsora-controller" && s.name == "admit")
                .map(|s| s.trace_id.clone())
                .collect();
            traces.into_iter().find(|trace| {
                wanted.iter().all(|(service, name)| {
                    spans
                        .iter()
                        .any(|s| &s.trace_id == trace && s.service == *service && s.name == *name)
                })
            })
        },
        || format!("{:#?}", receiver.spans()),
    );
    let spans: Vec<_> = receiver
        .spans()
        .into_iter()
        .filter(|s| s.trace_id == trace)
        .collect();
    let services: BTreeSet<&str> = spans.iter().map(|s| s.service.as_str()).collect();
    assert_eq!(
        services,
        BTreeSet::from(["einsora-api", "einsora-controller", "einsora-gateway"])
    );
    // Parent to child: the gateway's request is the root, the api's call its child, the
    // store's a child of the api's, and the admission hangs under the api's call.
    let find = |service: &str, name: &str| {
        spans
            .iter()
            .find(|s| s.service == service && s.name == name)
            .unwrap()
    };
    let request = find("einsora-gateway", "request");
    let rpc = find("einsora-api", "rpc");
    assert!(request.parent_span_id.is_empty(), "{request:?}");
    assert_eq!(rpc.parent_span_id, request.span_id);
    assert_eq!(
        find("einsora-api", "store.create_workload").parent_span_id,
        rpc.span_id
    );
    assert_eq!(
        find("einsora-controller", "admit").parent_span_id,
        rpc.span_id
    );

    // A caller's own trace context is continued.
    let theirs = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let token = match &acme.token {
        crate::harness::world::Credential::Token(t) => t.clone(),
        _ => unreachable!(),
    };
    let answer = einsora_testkit::http::exchange(
        &solo.http,
        &einsora_testkit::http::request(
            "GET",
            "/v1/workloads",
            &solo.http,
            &[
                ("Authorization", &format!("Bearer {token}")),
                ("traceparent", theirs),
            ],
            "",
        ),
    );
    assert_eq!(answer.status, 200);
    eventually_or(
        "the caller's trace continued by the gateway and the api",
        PATIENCE,
        || {
            let spans = receiver.spans();
            let of = |service: &str| {
                spans.iter().any(|s| {
                    s.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736" && s.service == service
                })
            };
            (of("einsora-gateway") && of("einsora-api")).then_some(())
        },
        || format!("{:#?}", receiver.spans()),
    );
}
