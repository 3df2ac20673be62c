//! A kind's parameters as the store keeps them: a JSON object with the proto's field names
//! (`{}`, `{"model": "org/name"}`, `{"ssh_authorized_keys": [...], "disk_gib": 100}`).
//! Reading one back validates it again, so a hand-edited row can't smuggle in a bad value.

use einsora_core::kind::WorkloadKind;
use serde_json::{Map, Value, json};

use super::ConvertError;
use super::create_workload::{RawParams, WorkloadParams};
use crate::common::v1::{EndpointParams, NotebookParams, VmParams};

const FIELD: &str = "params";

impl WorkloadParams {
    pub fn to_json(&self) -> String {
        let value = match self {
            WorkloadParams::Notebook => json!({}),
            WorkloadParams::Endpoint {
                model,
                slots,
                served_name,
                park_after_idle_s,
            } => {
                let mut endpoint = Map::new();
                endpoint.insert("model".into(), json!(model));
                endpoint.insert("slots".into(), json!(slots));
                endpoint.insert("served_name".into(), json!(served_name));
                if let Some(seconds) = park_after_idle_s {
                    endpoint.insert("park_after_idle_s".into(), json!(seconds));
                }
                Value::Object(endpoint)
            }
            WorkloadParams::Vm {
                ssh_authorized_keys,
                disk_gib,
            } => {
                let mut vm = Map::new();
                vm.insert("ssh_authorized_keys".into(), json!(ssh_authorized_keys));
                if let Some(gib) = disk_gib {
                    vm.insert("disk_gib".into(), json!(gib));
                }
                Value::Object(vm)
            }
        };
        value.to_string()
    }

    /// Reads the stored parameters of a workload of `kind`.
    pub fn from_json(kind: WorkloadKind, text: &str) -> Result<Self, ConvertError> {
        let bad = || ConvertError::invalid(FIELD, format!("a JSON object of a {kind}'s fields"));
        let value: Value = serde_json::from_str(text).map_err(|_| bad())?;
        let object = value.as_object().ok_or_else(bad)?;
        let raw = match kind {
            WorkloadKind::Notebook => RawParams::Notebook(NotebookParams {}),
            WorkloadKind::Endpoint => RawParams::Endpoint(EndpointParams {
                model: match object.get("model") {
                    None => String::new(),
                    Some(model) => model.as_str().ok_or_else(bad)?.to_owned(),
                },
                // Rows written before endpoints had served names have none: the default.
                served_name: match object.get("served_name") {
                    None => None,
                    Some(name) => Some(name.as_str().ok_or_else(bad)?.to_owned()),
                },
                // Rows written before scale-to-zero, or without it: never parked.
                park_after_idle_s: match object.get("park_after_idle_s") {
                    None => None,
                    Some(n) => Some(
                        n.as_u64()
                            .and_then(|n| u32::try_from(n).ok())
                            .ok_or_else(bad)?,
                    ),
                },
                // Rows written before endpoints had slots have none: the default.
                slots: match object.get("slots") {
                    None => None,
                    Some(n) => Some(
                        n.as_u64()
                            .and_then(|n| u32::try_from(n).ok())
                            .ok_or_else(bad)?,
                    ),
                },
            }),
            WorkloadKind::Vm => RawParams::Vm(VmParams {
                ssh_authorized_keys: match object.get("ssh_authorized_keys") {
                    None => Vec::new(),
                    Some(keys) => keys
                        .as_array()
                        .ok_or_else(bad)?
                        .iter()
                        .map(|k| k.as_str().map(str::to_owned).ok_or_else(bad))
                        .collect::<Result<_, _>>()?,
                },
                disk_gib: match object.get("disk_gib") {
                    None => None,
                    Some(gib) => Some(
                        gib.as_u64()
                            .and_then(|g| u32::try_from(g).ok())
                            .ok_or_else(bad)?,
                    ),
                },
            }),
        };
        WorkloadParams::from_proto(kind, Some(raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_json() {
        let all = [
            WorkloadParams::Notebook,
            WorkloadParams::Endpoint {
                model: "mlx-community/Llama-3.2-1B-Instruct-4bit".into(),
                slots: 4,
                served_name: "llama-3.2-1b:4bit".into(),
                park_after_idle_s: Some(600),
            },
            WorkloadParams::Vm {
                ssh_authorized_keys: vec!["ssh-ed25519 AAAAC3Nza me@host".into()],
                disk_gib: Some(100),
            },
            WorkloadParams::Vm {
                ssh_authorized_keys: vec![],
                disk_gib: None,
            },
        ];
        for params in all {
            let json = params.to_json();
            assert_eq!(
                WorkloadParams::from_json(params.kind(), &json),
                Ok(params),
                "{json}"
            );
        }
        assert_eq!(
            WorkloadParams::Endpoint {
                model: "a/b".into(),
                slots: 2,
                served_name: "b".into(),
                park_after_idle_s: None,
            }
            .to_json(),
            r#"{"model":"a/b","served_name":"b","slots":2}"#
        );
        // Stored before endpoints had slots or served names: one, and the file's name.
        assert_eq!(
            WorkloadParams::from_json(WorkloadKind::Endpoint, r#"{"model":"a/b.gguf"}"#),
            Ok(WorkloadParams::Endpoint {
                model: "a/b.gguf".into(),
                slots: 1,
                served_name: "b".into(),
                park_after_idle_s: None,
            })
        );
    }

    #[test]
    fn bad_stored_params_are_refused_by_field() {
        let cases = [
            (WorkloadKind::Notebook, "not json"),
            (WorkloadKind::Notebook, "[]"),
            (WorkloadKind::Endpoint, "{}"),
            (WorkloadKind::Endpoint, r#"{"model": 1}"#),
            (WorkloadKind::Endpoint, r#"{"model": "../etc"}"#),
            (WorkloadKind::Endpoint, r#"{"model": "a", "slots": 0}"#),
            (WorkloadKind::Endpoint, r#"{"model": "a", "slots": 65}"#),
            (WorkloadKind::Endpoint, r#"{"model": "a", "slots": "2"}"#),
            (
                WorkloadKind::Endpoint,
                r#"{"model": "a", "served_name": "-a"}"#,
            ),
            (
                WorkloadKind::Endpoint,
                r#"{"model": "a", "served_name": 1}"#,
            ),
            (
                WorkloadKind::Endpoint,
                r#"{"model": "a", "park_after_idle_s": 59}"#,
            ),
            (
                WorkloadKind::Endpoint,
                r#"{"model": "a", "park_after_idle_s": "600"}"#,
            ),
            (
                WorkloadKind::Vm,
                r#"{"ssh_authorized_keys": "ssh-ed25519 AAAA"}"#,
            ),
            (WorkloadKind::Vm, r#"{"disk_gib": -1}"#),
            (WorkloadKind::Vm, r#"{"disk_gib": 0}"#),
        ];
        for (kind, text) in cases {
            let err = WorkloadParams::from_json(kind, text).expect_err(text);
            assert!(
                err.field == FIELD
                    || err.field.starts_with("endpoint.")
                    || err.field.starts_with("vm."),
                "{text}: {err}"
            );
        }
    }
}
