//! proto3 JSON for the public API, read from the descriptors: proto field names (snake_case),
//! enums as their `(einsora.options.v1.word)`, Timestamps as RFC 3339, 64-bit integers as
//! strings on output (strings or numbers on input). Unknown fields are refused, and so is
//! `null`: a client leaves a field out instead, which keeps the OpenAPI document exact.

mod decode;
mod encode;
#[cfg(test)]
mod map_tests;
mod scalar;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;

use einsora_proto::schema::Schema;
use prost_reflect::{EnumDescriptor, FieldDescriptor, Kind};

pub(crate) use decode::{decode_field, decode_message};
pub(crate) use encode::{encode_field, encode_message};
pub(crate) use scalar::from_text;

pub(crate) const TIMESTAMP: &str = "google.protobuf.Timestamp";

/// The JSON word of every enum value that has one, from the descriptor set.
#[derive(Debug, Default)]
pub(crate) struct Words {
    by_enum: HashMap<String, Vec<(i32, String)>>,
}

impl Words {
    pub(crate) fn from_schema(schema: &Schema) -> Words {
        let by_enum = schema
            .enums()
            .into_iter()
            .map(|e| {
                let values = e
                    .values
                    .into_iter()
                    .filter_map(|v| Some((v.number, v.word?)))
                    .collect();
                (e.full_name, values)
            })
            .collect();
        Words { by_enum }
    }

    fn values(&self, e: &EnumDescriptor) -> &[(i32, String)] {
        self.by_enum.get(e.full_name()).map_or(&[], Vec::as_slice)
    }

    pub(crate) fn word(&self, e: &EnumDescriptor, number: i32) -> Option<&str> {
        let found = self.values(e).iter().find(|(n, _)| *n == number);
        found.map(|(_, word)| word.as_str())
    }

    pub(crate) fn number(&self, e: &EnumDescriptor, word: &str) -> Option<i32> {
        let found = self.values(e).iter().find(|(_, w)| w == word);
        found.map(|(n, _)| *n)
    }

    /// Every word of `e`, in declaration order.
    pub(crate) fn all(&self, e: &EnumDescriptor) -> Vec<&str> {
        self.values(e).iter().map(|(_, w)| w.as_str()).collect()
    }
}

/// A part of a request that doesn't fit its message. Names where, never the value (it may be a
/// secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid {
    at: String,
    problem: String,
}

impl Invalid {
    /// `at` reads like "field `vm.disk_gib`" or "query parameter `page_size`".
    pub(crate) fn new(at: impl Into<String>, problem: impl Into<String>) -> Self {
        Invalid {
            at: at.into(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.problem)
    }
}

/// Whether the encoder writes `field` whatever its value. The others (messages, optional and
/// oneof members, singular enums, which have no word for zero) appear only when set.
pub(crate) fn always_emitted(field: &FieldDescriptor) -> bool {
    field.is_list()
        || field.is_map()
        || (!field.supports_presence() && !matches!(field.kind(), Kind::Enum(_)))
}
