//! JSON ↔ DynamicMessage against the real descriptors, checked on the wire through the
//! generated prost types.

use std::sync::OnceLock;

use einsora_proto::common::v1::{AcceleratorKind, NotebookParams, WorkloadKind, WorkloadState};
use einsora_proto::schema::Schema;
use einsora_proto::workloads::v1::{
    CreateWorkloadRequest, Workload, create_workload_request, workload,
};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};
use prost_types::Timestamp;
use serde_json::{Value as Json, json};

use super::*;

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(einsora_proto::FILE_DESCRIPTOR_SET).unwrap())
}

fn words() -> &'static Words {
    static WORDS: OnceLock<Words> = OnceLock::new();
    WORDS.get_or_init(|| Words::from_schema(&Schema::load().unwrap()))
}

fn desc(name: &str) -> MessageDescriptor {
    pool().get_message_by_name(name).unwrap()
}

fn decode(name: &str, json: Json) -> Result<DynamicMessage, String> {
    decode_message(&desc(name), &json, words(), &[]).map_err(|e| e.to_string())
}

fn encode(message: &DynamicMessage) -> Json {
    encode_message(message, words()).unwrap()
}

const CREATE: &str = "einsora.workloads.v1.CreateWorkloadRequest";

#[test]
fn a_create_body_round_trips_and_means_the_same_on_the_wire() {
    let body = json!({
        "kind": "endpoint",
        "name": "llm",
        "gpu_class": "l40s-48gb",
        "image": "openai-endpoint",
        "region": "local",
        "fallback": ["cpu"],
        "fallback_after_s": 30,
        "endpoint": { "model": "mlx-community/Llama" },
    });
    let message = decode(CREATE, body.clone()).unwrap();
    assert_eq!(encode(&message), body);
    let typed: CreateWorkloadRequest = message.transcode_to().unwrap();
    assert_eq!(typed.kind(), WorkloadKind::Endpoint);
    assert_eq!(typed.region.as_deref(), Some("local"));
    assert_eq!(typed.fallback_after_s, Some(30));
    let Some(create_workload_request::Params::Endpoint(endpoint)) = typed.params else {
        panic!("endpoint params expected");
    };
    assert_eq!(endpoint.model, "mlx-community/Llama");
}

#[test]
fn output_spells_int64_as_strings_times_as_rfc3339_and_enums_as_words() {
    let workload = Workload {
        id: "0190".into(),
        kind: WorkloadKind::Notebook.into(),
        state: WorkloadState::Running.into(),
        version: 9_007_199_254_740_993,
        created_at: Some(Timestamp {
            seconds: 1_738_315_800,
            nanos: 500_000_000,
        }),
        params: Some(workload::Params::Notebook(NotebookParams {})),
        ..Workload::default()
    };
    let message = DynamicMessage::decode(
        desc("einsora.workloads.v1.Workload"),
        workload.encode_to_vec().as_slice(),
    )
    .unwrap();
    let json = encode(&message);
    assert_eq!(json["version"], "9007199254740993");
    assert_eq!(json["created_at"], "2025-01-31T09:30:00.5Z");
    assert_eq!(
        (json["kind"].as_str(), json["state"].as_str()),
        (Some("notebook"), Some("running"))
    );
    assert_eq!(json["notebook"], json!({}));
    // Scalars and lists always appear; unset messages, optionals and oneof members don't.
    assert_eq!(
        (json["attempt"].clone(), json["fallback"].clone()),
        (json!(0), json!([]))
    );
    for absent in ["updated_at", "fallback_after_s", "vm", "endpoint"] {
        assert!(json.get(absent).is_none(), "{absent}");
    }
    // And it reads back to the same message.
    let back = decode("einsora.workloads.v1.Workload", json).unwrap();
    assert_eq!(back.transcode_to::<Workload>().unwrap(), workload);
}

#[test]
fn an_enum_zero_in_a_list_has_no_word_and_does_not_encode() {
    let class = einsora_proto::catalog::v1::Runtime {
        name: "x".into(),
        accelerators: vec![AcceleratorKind::Cpu.into(), 0],
    };
    let desc = desc("einsora.catalog.v1.Runtime");
    let message = DynamicMessage::decode(desc, class.encode_to_vec().as_slice()).unwrap();
    let error = encode_message(&message, words()).unwrap_err();
    assert!(error.to_string().contains("accelerators"), "{error}");
}

#[test]
fn integers_take_numbers_and_64_bit_ones_strings_too() {
    let workload = "einsora.workloads.v1.Workload";
    for version in [json!(7), json!("7"), json!(7.0), json!(0.7e1)] {
        let message = decode(workload, json!({ "version": version })).unwrap();
        assert_eq!(message.transcode_to::<Workload>().unwrap().version, 7);
    }
    let attempts = decode(workload, json!({ "attempt": 4_294_967_295_u64 })).unwrap();
    assert_eq!(
        attempts.transcode_to::<Workload>().unwrap().attempt,
        u32::MAX
    );
    let refused = [
        (
            json!({ "attempt": "3" }),
            "field `attempt`: must be an integer from 0 to 4294967295",
        ),
        (
            json!({ "attempt": -1 }),
            "field `attempt`: must be an integer from 0",
        ),
        (json!({ "attempt": 4_294_967_296_u64 }), "field `attempt`"),
        (json!({ "attempt": 1.5 }), "field `attempt`"),
        (
            json!({ "version": "7x" }),
            "field `version`: must be an integer",
        ),
        (
            json!({ "version": "9223372036854775808" }),
            "field `version`",
        ),
    ];
    for (body, expected) in refused {
        let error = decode(workload, body.clone()).unwrap_err();
        assert!(error.starts_with(expected), "{body}: {error}");
    }
}

#[test]
fn what_does_not_fit_is_refused_naming_the_field_never_the_value() {
    let cases = [
        (
            json!({ "kind": "notebook", "colour": "red" }),
            "field `colour`: is not a known field",
        ),
        (
            json!({ "gpuClass": "x" }),
            "field `gpuClass`: is not a known field",
        ),
        (
            json!({ "vm": { "disk_gib": 1, "extra": true } }),
            "field `vm.extra`: is not a known field",
        ),
        (json!({ "name": 5 }), "field `name`: must be a string"),
        (
            json!({ "kind": "laptop" }),
            "field `kind`: must be one of: vm, notebook, endpoint",
        ),
        (json!({ "kind": 2 }), "field `kind`: must be one of"),
        (
            json!({ "kind": "WORKLOAD_KIND_VM" }),
            "field `kind`: must be one of",
        ),
        (
            json!({ "fallback": "cpu" }),
            "field `fallback`: must be an array",
        ),
        (
            json!({ "fallback": ["cpu", 3] }),
            "field `fallback[1]`: must be a string",
        ),
        (
            json!({ "region": null }),
            "field `region`: must not be null",
        ),
        (json!({ "vm": "big" }), "field `vm`: must be an object"),
        (
            json!({ "vm": {}, "notebook": {} }),
            "field `vm`: can't be given with `notebook`",
        ),
        (json!([]), "the body: must be an object"),
        (
            json!({ "vm": { "ssh_authorized_keys": [null] } }),
            "field `vm.ssh_authorized_keys[0]`: must be a string",
        ),
    ];
    for (body, expected) in cases {
        let error = decode(CREATE, body.clone()).unwrap_err();
        assert!(error.starts_with(expected), "{body}: {error}");
        assert!(!error.contains("red") && !error.contains("laptop") && !error.contains("big"));
    }
}

#[test]
fn timestamps_are_rfc3339_within_the_proto_range() {
    let usage = "einsora.usage.v1.ListUsageRequest";
    let accepted = [
        ("2025-01-31T09:30:00Z", "2025-01-31T09:30:00Z"),
        ("2025-01-31T10:30:00.250+01:00", "2025-01-31T09:30:00.25Z"),
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
        ("2025-01-31t09:30:00z", "2025-01-31T09:30:00Z"),
        ("2025-01-31T09:30:00-00:00", "2025-01-31T09:30:00Z"),
        ("2016-12-31T23:59:60Z", "2016-12-31T23:59:59.999999999Z"),
        (
            "9999-12-31T23:59:59.999999999Z",
            "9999-12-31T23:59:59.999999999Z",
        ),
    ];
    for (given, written) in accepted {
        let message = decode(usage, json!({ "from": given })).unwrap();
        assert_eq!(encode(&message)["from"], written, "{given}");
    }
    for bad in [
        "2025-01-31",
        "2025-01-31 09:30:00",
        "yesterday",
        "2025-13-01T00:00:00Z",
        "0000-12-31T23:59:59Z",
    ] {
        let error = decode(usage, json!({ "from": bad })).unwrap_err();
        assert!(
            error.starts_with("field `from`: must be an RFC 3339 time"),
            "{bad}: {error}"
        );
    }
    let error = decode(usage, json!({ "from": 1_738_315_800 })).unwrap_err();
    assert!(
        error.starts_with("field `from`: must be an RFC 3339"),
        "{error}"
    );
}

#[test]
fn text_values_parse_by_type() {
    let kind = |name: &str| desc(CREATE).get_field_by_name(name).unwrap().kind();
    assert_eq!(
        from_text(&kind("kind"), "vm", words()),
        Ok(prost_reflect::Value::EnumNumber(1))
    );
    assert!(
        from_text(&kind("kind"), "VM", words())
            .unwrap_err()
            .starts_with("must be one of")
    );
    assert_eq!(
        from_text(&kind("fallback_after_s"), "12", words()),
        Ok(prost_reflect::Value::U32(12))
    );
    assert!(from_text(&kind("fallback_after_s"), "-1", words()).is_err());
    let include = desc("einsora.workloads.v1.ListWorkloadsRequest")
        .get_field_by_name("include_deleted")
        .unwrap();
    assert_eq!(
        from_text(&include.kind(), "true", words()),
        Ok(prost_reflect::Value::Bool(true))
    );
    assert_eq!(
        from_text(&include.kind(), "1", words()),
        Err("must be true or false".to_owned())
    );
}

#[test]
fn always_emitted_matches_what_the_encoder_writes() {
    let message = DynamicMessage::new(desc("einsora.workloads.v1.Workload"));
    let json = encode(&message);
    for field in desc("einsora.workloads.v1.Workload").fields() {
        assert_eq!(
            json.get(field.name()).is_some(),
            always_emitted(&field),
            "{}",
            field.name()
        );
    }
}
