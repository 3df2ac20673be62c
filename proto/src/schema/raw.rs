//! Mirrors of the parts of `google/protobuf/descriptor.proto` that `schema` reads (same field
//! numbers), plus the extension fields of the options Einsora uses. Unknown fields are skipped.

use crate::google::api::HttpRule;
use crate::options::v1::FieldRules;

#[derive(Clone, PartialEq, prost::Message)]
pub struct FileSet {
    #[prost(message, repeated, tag = "1")]
    pub file: Vec<File>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct File {
    #[prost(string, optional, tag = "2")]
    pub package: Option<String>,
    #[prost(message, repeated, tag = "4")]
    pub message_type: Vec<Message>,
    #[prost(message, repeated, tag = "5")]
    pub enum_type: Vec<Enum>,
    #[prost(message, repeated, tag = "6")]
    pub service: Vec<Service>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Message {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub field: Vec<Field>,
    #[prost(message, repeated, tag = "3")]
    pub nested_type: Vec<Message>,
    #[prost(message, repeated, tag = "4")]
    pub enum_type: Vec<Enum>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Field {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "8")]
    pub options: Option<FieldOptions>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct FieldOptions {
    /// `einsora.options.v1.secret`.
    #[prost(bool, optional, tag = "51700")]
    pub secret: Option<bool>,
    /// `einsora.options.v1.rules`.
    #[prost(message, optional, tag = "51702")]
    pub rules: Option<FieldRules>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Enum {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub value: Vec<EnumValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EnumValue {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub number: Option<i32>,
    #[prost(message, optional, tag = "3")]
    pub options: Option<EnumValueOptions>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EnumValueOptions {
    /// `einsora.options.v1.word`.
    #[prost(string, optional, tag = "51701")]
    pub word: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Service {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub method: Vec<Method>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Method {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub input_type: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub output_type: Option<String>,
    #[prost(message, optional, tag = "4")]
    pub options: Option<MethodOptions>,
    #[prost(bool, optional, tag = "6")]
    pub server_streaming: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MethodOptions {
    /// `google.api.http`.
    #[prost(message, optional, tag = "72295728")]
    pub http: Option<HttpRule>,
}
