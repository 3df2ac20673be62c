//! The request field rules (`einsora.options.v1.rules`) that the OpenAPI document is made of:
//! well formed, on every field the api requires, and saying what the api's own checks say, so
//! that a request the document allows is one the api accepts and the other way round.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};

use einsora_core::ids::WorkloadId;
use einsora_proto::common::v1::{EndpointParams, VmParams, WorkloadKind};
use einsora_proto::convert::{CreateWorkload, parse_id};
use einsora_proto::schema::{FieldRules, Schema, UUID_PATTERN};
use einsora_proto::workloads::v1::CreateWorkloadRequest;
use einsora_proto::workloads::v1::create_workload_request::Params;
use regex::Regex;

fn all_rules() -> BTreeMap<String, FieldRules> {
    Schema::load().unwrap().field_rules().into_iter().collect()
}

/// The rules of one field, with a checker of string values by them.
fn checker(field: &str) -> impl Fn(&str) -> bool + use<> {
    let rules = all_rules()
        .remove(field)
        .unwrap_or_else(|| panic!("{field} has no rules"));
    let pattern = rules
        .string_pattern()
        .unwrap()
        .map(|p| Regex::new(p).unwrap());
    move |value: &str| {
        let chars = u32::try_from(value.chars().count()).unwrap();
        !(rules.required && value.is_empty())
            && rules.min_length.is_none_or(|min| chars >= min)
            && rules.max_length.is_none_or(|max| chars <= max)
            && pattern.as_ref().is_none_or(|p| p.is_match(value))
    }
}

#[test]
fn every_rule_is_one_the_document_can_state() {
    for (field, rules) in all_rules() {
        let pattern = rules
            .string_pattern()
            .unwrap_or_else(|e| panic!("{field}: {e}"));
        if let Some(pattern) = pattern {
            assert!(
                pattern.starts_with('^') && pattern.ends_with('$'),
                "{field}: {pattern} isn't anchored"
            );
            Regex::new(pattern).unwrap_or_else(|e| panic!("{field}: {e}"));
        }
        if let (Some(min), Some(max)) = (rules.min_length, rules.max_length) {
            assert!(min <= max, "{field}");
        }
        if let (Some(min), Some(max)) = (rules.minimum, rules.maximum) {
            assert!(min <= max, "{field}");
        }
    }
}

#[test]
fn every_field_the_api_requires_is_marked_required() {
    let schema = Schema::load().unwrap();
    let required: BTreeSet<String> = schema
        .field_rules()
        .into_iter()
        .filter(|(_, rules)| rules.required)
        .map(|(field, _)| field)
        .collect();
    let ids = [
        "workloads.v1.GetWorkloadRequest",
        "workloads.v1.DeleteWorkloadRequest",
        "workloads.v1.StartWorkloadRequest",
        "workloads.v1.StopWorkloadRequest",
        "workloads.v1.ListWorkloadEventsRequest",
        "workloads.v1.ListWorkloadLogsRequest",
        "workloads.v1.ExportWorkloadRequest",
        "machines.v1.GetMachineRequest",
        "machines.v1.RevokeMachineRequest",
        "access.v1.OpenWorkloadRequest",
        "accounts.v1.RevokeTokenRequest",
        "accounts.v1.RevokeInferenceKeyRequest",
        "enrolment.v1.RevokeEnrolmentTokenRequest",
        "accounts.v1.UpdateUserRequest",
        "accounts.v1.RemoveUserRequest",
        "accounts.v1.CreatePasswordResetRequest",
        "accounts.v1.RevokeInviteRequest",
        "machines.v1.SetTrustedUsersRequest",
        "accounts.v1.DeleteTeamRequest",
    ]
    .map(|m| format!("{m}.id"));
    let others = [
        "workloads.v1.CreateWorkloadRequest.kind",
        "workloads.v1.CreateWorkloadRequest.name",
        "workloads.v1.CreateWorkloadRequest.gpu_class",
        "workloads.v1.CreateWorkloadRequest.image",
        "common.v1.EndpointParams.model",
        "accounts.v1.LoginRequest.email",
        "accounts.v1.LoginRequest.password",
        "accounts.v1.ChangePasswordRequest.current_password",
        "accounts.v1.ChangePasswordRequest.new_password",
        "accounts.v1.CreateTokenRequest.name",
        "accounts.v1.CreateInferenceKeyRequest.name",
        "accounts.v1.CreateInviteRequest.email",
        "accounts.v1.CreateTeamRequest.name",
        "accounts.v1.SetQuotaRequest.scope",
        "accounts.v1.SetQuotaRequest.gpu_class",
        "accounts.v1.AcceptInviteRequest.secret",
        "accounts.v1.AcceptInviteRequest.password",
        "accounts.v1.ResetPasswordRequest.secret",
        "accounts.v1.ResetPasswordRequest.password",
        "enrolment.v1.CreateEnrolmentTokenRequest.name",
        "usage.v1.ListUsageRequest.from",
        "usage.v1.ListUsageRequest.to",
        "usage.v1.GetUsageReportRequest.from",
        "usage.v1.GetUsageReportRequest.to",
        "usage.v1.GetUsageReportRequest.by",
    ]
    .map(String::from);
    let expected: BTreeSet<String> = ids
        .into_iter()
        .chain(others)
        .map(|f| format!("einsora.{f}"))
        .collect();
    assert_eq!(required, expected);
    // Every request the HTTP API takes is covered above or has no required field.
    let covered: BTreeSet<&str> = expected
        .iter()
        .map(|f| f.rsplit_once('.').unwrap().0)
        .collect();
    let optional_only = [
        "einsora.workloads.v1.ListWorkloadsRequest",
        "einsora.machines.v1.ListMachinesRequest",
        "einsora.catalog.v1.GetCatalogRequest",
        "einsora.accounts.v1.LogoutRequest",
        "einsora.accounts.v1.GetMeRequest",
        "einsora.accounts.v1.ListTokensRequest",
        "einsora.accounts.v1.ListInferenceKeysRequest",
        "einsora.accounts.v1.GetInferenceLimitsRequest",
        "einsora.accounts.v1.SetInferenceLimitsRequest",
        "einsora.accounts.v1.ListUsersRequest",
        "einsora.accounts.v1.ListInvitesRequest",
        "einsora.accounts.v1.ListTeamsRequest",
        "einsora.accounts.v1.ListQuotasRequest",
        "einsora.enrolment.v1.ListEnrolmentTokensRequest",
        "einsora.activity.v1.ListActivityRequest",
        "einsora.status.v1.GetStatusRequest",
    ];
    for route in schema.http_routes() {
        assert!(
            covered.contains(route.input_type.as_str())
                || optional_only.contains(&route.input_type.as_str()),
            "{} is new: say which of its fields the api requires",
            route.input_type
        );
    }
}

#[test]
fn ids_are_accepted_exactly_when_they_have_the_uuid_format() {
    let pattern = Regex::new(UUID_PATTERN).unwrap();
    let id = WorkloadId::new().to_string();
    let uuid = *WorkloadId::new().as_uuid();
    let mut samples = vec![
        id.clone(),
        id.to_uppercase(),
        uuid.simple().to_string(),
        uuid.braced().to_string(),
        uuid.urn().to_string(),
        format!(" {id}"),
        format!("{id}\n"),
        id[1..].to_owned(),
        format!("{id}0"),
        String::new(),
    ];
    for (i, _) in id.char_indices() {
        for c in ['0', 'F', 'g', '-', ' '] {
            samples.push(format!("{}{c}{}", &id[..i], &id[i + 1..]));
        }
    }
    // ListWorkloads' cursor is the last workload's ID, or empty.
    let page_token = checker("einsora.workloads.v1.ListWorkloadsRequest.page_token");
    assert!(page_token(""));
    for s in samples {
        let parses = parse_id::<WorkloadId>("id", &s).is_ok();
        assert_eq!(parses, pattern.is_match(&s), "{s:?}");
        assert_eq!(parses || s.is_empty(), page_token(&s), "{s:?}");
    }
}

fn notebook() -> CreateWorkloadRequest {
    CreateWorkloadRequest {
        kind: WorkloadKind::Notebook as i32,
        name: "nb".into(),
        gpu_class: "cpu-1c-2g".into(),
        image: "jupyterlab".into(),
        ..Default::default()
    }
}

fn vm(keys: Vec<String>, disk_gib: Option<u32>) -> CreateWorkloadRequest {
    CreateWorkloadRequest {
        kind: WorkloadKind::Vm as i32,
        params: Some(Params::Vm(VmParams {
            ssh_authorized_keys: keys,
            disk_gib,
        })),
        ..notebook()
    }
}

/// The field the create checks refuse `req` on, if any.
fn refused_at(req: CreateWorkloadRequest) -> Option<String> {
    CreateWorkload::try_from(req).err().map(|e| e.field)
}

#[test]
fn create_patterns_say_what_the_create_checks_say() {
    let names = einsora_testkit::all_strings("az09-.A_ é", 3)
        .into_iter()
        .chain([
            "a".repeat(63),
            "a".repeat(64),
            format!("a{}a", "-".repeat(61)),
        ]);
    let names: Vec<String> = names.collect();
    type Build = fn(String) -> CreateWorkloadRequest;
    let fields: [(&str, &str, Build); 5] = [
        ("name", "CreateWorkloadRequest.name", |s| {
            CreateWorkloadRequest {
                name: s,
                ..notebook()
            }
        }),
        ("gpu_class", "CreateWorkloadRequest.gpu_class", |s| {
            CreateWorkloadRequest {
                gpu_class: s,
                ..notebook()
            }
        }),
        ("image", "CreateWorkloadRequest.image", |s| {
            CreateWorkloadRequest {
                image: s,
                ..notebook()
            }
        }),
        ("region", "CreateWorkloadRequest.region", |s| {
            CreateWorkloadRequest {
                region: Some(s),
                ..notebook()
            }
        }),
        ("fallback[0]", "CreateWorkloadRequest.fallback", |s| {
            CreateWorkloadRequest {
                fallback: vec![s],
                ..notebook()
            }
        }),
    ];
    for (at, field, build) in fields {
        let allows = checker(&format!("einsora.workloads.v1.{field}"));
        for s in &names {
            assert_eq!(
                refused_at(build(s.clone())) != Some(at.to_owned()),
                allows(s),
                "{at} {s:?}"
            );
        }
    }

    let allows = checker("einsora.common.v1.EndpointParams.model");
    let models = einsora_testkit::all_strings("a./_-A é", 4)
        .into_iter()
        .chain([
            "a".repeat(256),
            "a".repeat(257),
            format!("{}/b", "a".repeat(254)),
        ]);
    for model in models {
        let req = CreateWorkloadRequest {
            kind: WorkloadKind::Endpoint as i32,
            image: "openai-endpoint".into(),
            params: Some(Params::Endpoint(EndpointParams {
                model: model.clone(),
                slots: None,
                served_name: None,
                park_after_idle_s: None,
            })),
            ..notebook()
        };
        let at = "endpoint.model".to_owned();
        assert_eq!(refused_at(req) != Some(at), allows(&model), "{model:?}");
    }

    let allows = checker("einsora.common.v1.EndpointParams.served_name");
    let long = "a".repeat(128);
    let too_long = "a".repeat(129);
    for name in [
        "tiny",
        "team/tiny:q4",
        "_x",
        ".x",
        "-x",
        ":x",
        "/x",
        "a b",
        "ü",
        "",
        &long,
        &too_long,
    ] {
        let req = CreateWorkloadRequest {
            kind: WorkloadKind::Endpoint as i32,
            image: "openai-endpoint".into(),
            params: Some(Params::Endpoint(EndpointParams {
                model: "m.gguf".into(),
                slots: None,
                served_name: Some(name.to_owned()),
                park_after_idle_s: None,
            })),
            ..notebook()
        };
        let at = "endpoint.served_name".to_owned();
        assert_eq!(refused_at(req) != Some(at), allows(name), "{name:?}");
    }

    let allows = checker("einsora.common.v1.VmParams.ssh_authorized_keys");
    let long = format!("ssh-ed25519 {}", "A".repeat(8192 - 12));
    let keys = ["ssh-", "ecdsa-", "sk-", "rsa-", "ssh"]
        .into_iter()
        .flat_map(|p| {
            einsora_testkit::all_strings(" K\t-é~", 4)
                .into_iter()
                .map(move |s| format!("{p}{s}"))
        })
        .chain([long.clone(), format!("{long}A")]);
    for key in keys {
        let at = "vm.ssh_authorized_keys[0]".to_owned();
        assert_eq!(
            refused_at(vm(vec![key.clone()], None)) != Some(at),
            allows(&key),
            "{key:?}"
        );
    }
}

#[test]
fn create_bounds_say_what_the_create_checks_say() {
    let rules = all_rules();
    let within = |rules: &FieldRules, n: u32| {
        rules.minimum.is_none_or(|min| i64::from(n) >= min)
            && rules.maximum.is_none_or(|max| i64::from(n) <= max)
    };
    let disk = &rules["einsora.common.v1.VmParams.disk_gib"];
    for gib in [0, 1, 2, 65_535, 65_536, 65_537, u32::MAX] {
        let refused = refused_at(vm(Vec::new(), Some(gib))).is_some();
        assert_eq!(!refused, within(disk, gib), "{gib}");
    }
    let slots = &rules["einsora.common.v1.EndpointParams.slots"];
    for n in [0, 1, 2, 64, 65, u32::MAX] {
        let req = CreateWorkloadRequest {
            kind: WorkloadKind::Endpoint as i32,
            image: "openai-endpoint".into(),
            params: Some(Params::Endpoint(EndpointParams {
                model: "m.gguf".into(),
                slots: Some(n),
                served_name: None,
                park_after_idle_s: None,
            })),
            ..notebook()
        };
        assert_eq!(refused_at(req).is_none(), within(slots, n), "{n}");
    }
    let idle = &rules["einsora.common.v1.EndpointParams.park_after_idle_s"];
    for n in [0, 59, 60, 604_800, 604_801, u32::MAX] {
        let req = CreateWorkloadRequest {
            kind: WorkloadKind::Endpoint as i32,
            image: "openai-endpoint".into(),
            params: Some(Params::Endpoint(EndpointParams {
                model: "m.gguf".into(),
                slots: None,
                served_name: None,
                park_after_idle_s: Some(n),
            })),
            ..notebook()
        };
        assert_eq!(refused_at(req).is_none(), within(idle, n), "{n}");
    }
    let after = &rules["einsora.workloads.v1.CreateWorkloadRequest.fallback_after_s"];
    for s in [0, 604_800, 604_801, u32::MAX] {
        let req = CreateWorkloadRequest {
            fallback: vec!["cpu".into()],
            fallback_after_s: Some(s),
            ..notebook()
        };
        assert_eq!(refused_at(req).is_none(), within(after, s), "{s}");
    }

    let fallback = &rules["einsora.workloads.v1.CreateWorkloadRequest.fallback"];
    let max = usize::try_from(fallback.max_items.unwrap()).unwrap();
    let classes: Vec<String> = (0..=max).map(|i| format!("c{i}")).collect();
    let with = |fallback: Vec<String>| CreateWorkloadRequest {
        fallback,
        ..notebook()
    };
    assert_eq!(refused_at(with(classes[..max].to_vec())), None);
    assert_eq!(
        refused_at(with(classes.clone())).as_deref(),
        Some("fallback")
    );
    assert!(fallback.unique_items);
    let twice = vec![classes[0].clone(), classes[0].clone()];
    assert_eq!(refused_at(with(twice)).as_deref(), Some("fallback[1]"));

    let keys = &rules["einsora.common.v1.VmParams.ssh_authorized_keys"];
    let max = usize::try_from(keys.max_items.unwrap()).unwrap();
    let key = |i: usize| format!("ssh-ed25519 AAAA{i} me@host");
    assert_eq!(refused_at(vm((0..max).map(key).collect(), None)), None);
    assert_eq!(
        refused_at(vm((0..=max).map(key).collect(), None)).as_deref(),
        Some("vm.ssh_authorized_keys")
    );
}
