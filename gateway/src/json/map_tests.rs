//! Maps, which no Einsora proto uses yet, on a descriptor built here.

use prost_reflect::{DescriptorPool, MessageDescriptor};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet, MessageOptions,
};
use serde_json::json;

use super::*;

fn field(
    name: &str,
    number: i32,
    kind: Type,
    type_name: Option<&str>,
    label: Label,
) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(label.into()),
        r#type: Some(kind.into()),
        type_name: type_name.map(Into::into),
        ..FieldDescriptorProto::default()
    }
}

fn entry(name: &str, key: Type, value: Type) -> DescriptorProto {
    DescriptorProto {
        name: Some(name.into()),
        field: vec![
            field("key", 1, key, None, Label::Optional),
            field("value", 2, value, None, Label::Optional),
        ],
        options: Some(MessageOptions {
            map_entry: Some(true),
            ..MessageOptions::default()
        }),
        ..DescriptorProto::default()
    }
}

/// `message Labels { map<string, int64> by_name = 1; map<uint32, string> by_id = 2; }`
fn labels() -> MessageDescriptor {
    let message = DescriptorProto {
        name: Some("Labels".into()),
        field: vec![
            field(
                "by_name",
                1,
                Type::Message,
                Some(".t.Labels.ByNameEntry"),
                Label::Repeated,
            ),
            field(
                "by_id",
                2,
                Type::Message,
                Some(".t.Labels.ByIdEntry"),
                Label::Repeated,
            ),
        ],
        nested_type: vec![
            entry("ByNameEntry", Type::String, Type::Int64),
            entry("ByIdEntry", Type::Uint32, Type::String),
        ],
        ..DescriptorProto::default()
    };
    let file = FileDescriptorProto {
        name: Some("t.proto".into()),
        package: Some("t".into()),
        syntax: Some("proto3".into()),
        message_type: vec![message],
        ..FileDescriptorProto::default()
    };
    let pool =
        DescriptorPool::from_file_descriptor_set(FileDescriptorSet { file: vec![file] }).unwrap();
    pool.get_message_by_name("t.Labels").unwrap()
}

#[test]
fn maps_are_objects_with_keys_and_values_by_type() {
    let (desc, words) = (labels(), Words::default());
    let given = json!({ "by_name": { "a": 5, "b": "6" }, "by_id": { "7": "seven" } });
    let message = decode_message(&desc, &given, &words, &[]).unwrap();
    let written = encode_message(&message, &words).unwrap();
    assert_eq!(
        written,
        json!({ "by_name": { "a": "5", "b": "6" }, "by_id": { "7": "seven" } })
    );
    let empty = encode_message(&prost_reflect::DynamicMessage::new(desc.clone()), &words).unwrap();
    assert_eq!(empty, json!({ "by_name": {}, "by_id": {} }));

    let refused = [
        (
            json!({ "by_id": { "x": "y" } }),
            "a key of field `by_id.x`: must be an integer from 0 to 4294967295",
        ),
        (
            json!({ "by_name": { "a": true } }),
            "field `by_name.a`: must be an integer",
        ),
        (
            json!({ "by_name": [] }),
            "field `by_name`: must be an object",
        ),
    ];
    for (body, expected) in refused {
        let error = decode_message(&desc, &body, &words, &[])
            .unwrap_err()
            .to_string();
        assert!(error.starts_with(expected), "{body}: {error}");
    }
}
