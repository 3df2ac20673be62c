use super::*;
use crate::common::v1::WorkloadKind as PbKind;
use pb::create_workload_request::Params;

fn notebook() -> CreateWorkloadRequest {
    CreateWorkloadRequest {
        kind: PbKind::Notebook as i32,
        name: "my-notebook".into(),
        gpu_class: "cpu-1c-2g".into(),
        image: "jupyterlab".into(),
        region: None,
        fallback: Vec::new(),
        fallback_after_s: None,
        params: None,
    }
}

fn endpoint(model: &str) -> CreateWorkloadRequest {
    CreateWorkloadRequest {
        kind: PbKind::Endpoint as i32,
        name: "chat".into(),
        gpu_class: "apple-silicon-32gb".into(),
        image: "openai-endpoint".into(),
        params: Some(Params::Endpoint(EndpointParams {
            model: model.into(),
            slots: None,
            served_name: None,
            park_after_idle_s: None,
        })),
        ..notebook()
    }
}

fn vm(keys: &[&str], disk_gib: Option<u32>) -> CreateWorkloadRequest {
    CreateWorkloadRequest {
        kind: PbKind::Vm as i32,
        name: "box".into(),
        gpu_class: "l40s-48gb".into(),
        image: "ubuntu-24.04".into(),
        params: Some(Params::Vm(VmParams {
            ssh_authorized_keys: keys.iter().map(|k| k.to_string()).collect(),
            disk_gib,
        })),
        ..notebook()
    }
}

/// The field the request is refused on.
fn refused(req: CreateWorkloadRequest) -> ConvertError {
    CreateWorkload::try_from(req).expect_err("accepted a bad request")
}

#[test]
fn a_plain_notebook_is_accepted() {
    let c = CreateWorkload::try_from(notebook()).unwrap();
    assert_eq!(c.kind, WorkloadKind::Notebook);
    assert_eq!(c.name, "my-notebook");
    assert_eq!(c.region, None);
    assert_eq!(c.params, WorkloadParams::Notebook);
}

#[test]
fn every_kind_round_trips_through_the_request() {
    let ok = [
        CreateWorkloadRequest {
            region: Some("eu-west-1".into()),
            fallback: vec!["cpu-4c-16g".into(), "cpu".into()],
            fallback_after_s: Some(300),
            params: Some(Params::Notebook(NotebookParams {})),
            ..notebook()
        },
        // Everything named, as the request comes back.
        CreateWorkloadRequest {
            params: Some(Params::Endpoint(EndpointParams {
                model: "mlx-community/Llama-3.2-1B-Instruct-4bit".into(),
                slots: Some(1),
                served_name: Some("llama-3.2-1b".into()),
                park_after_idle_s: Some(600),
            })),
            ..endpoint("mlx-community/Llama-3.2-1B-Instruct-4bit")
        },
        vm(&["ssh-ed25519 AAAAC3Nza me@host"], Some(100)),
    ];
    for req in ok {
        let c = CreateWorkload::try_from(req.clone()).unwrap();
        assert_eq!(c.params.kind(), c.kind);
        assert_eq!(CreateWorkloadRequest::from(c.clone()), req);
        assert_eq!(
            CreateWorkload::try_from(CreateWorkloadRequest::from(c.clone())),
            Ok(c)
        );
    }
}

#[test]
fn kind_is_required_and_known() {
    let err = refused(CreateWorkloadRequest {
        kind: 0,
        ..notebook()
    });
    assert_eq!(err, ConvertError::new("kind", Problem::Unspecified));
    let err = refused(CreateWorkloadRequest {
        kind: 42,
        ..notebook()
    });
    assert_eq!(
        err,
        ConvertError::new("kind", Problem::UnknownEnumValue(42))
    );
}

#[test]
fn empty_fields_are_missing_by_name() {
    for (field, req) in [
        (
            "name",
            CreateWorkloadRequest {
                name: String::new(),
                ..notebook()
            },
        ),
        (
            "gpu_class",
            CreateWorkloadRequest {
                gpu_class: String::new(),
                ..notebook()
            },
        ),
        (
            "image",
            CreateWorkloadRequest {
                image: String::new(),
                ..notebook()
            },
        ),
        ("endpoint.model", endpoint("")),
        (
            "endpoint.model",
            CreateWorkloadRequest {
                params: None,
                ..endpoint("x")
            },
        ),
    ] {
        assert_eq!(
            refused(req),
            ConvertError::new(field, Problem::Missing),
            "{field}"
        );
    }
    let err = refused(CreateWorkloadRequest {
        region: Some(String::new()),
        ..notebook()
    });
    assert_eq!(err.field, "region");
}

#[test]
fn malformed_names_are_refused_by_field() {
    let long = "a".repeat(64);
    for name in [
        "My-Notebook",
        "1st",
        "a_b",
        "a-",
        "-a",
        "a b",
        "é",
        long.as_str(),
    ] {
        let err = refused(CreateWorkloadRequest {
            name: name.into(),
            ..notebook()
        });
        assert_eq!(err.field, "name", "{name:?}");
        assert!(matches!(err.problem, Problem::Invalid(_)));
        assert!(!err.to_string().contains(name), "the error echoes {name:?}");
    }
    for class in ["L40S", "-x", "x.", "a/b", "a b"] {
        let err = refused(CreateWorkloadRequest {
            gpu_class: class.into(),
            ..notebook()
        });
        assert_eq!(err.field, "gpu_class", "{class:?}");
        let err = refused(CreateWorkloadRequest {
            image: class.into(),
            ..notebook()
        });
        assert_eq!(err.field, "image", "{class:?}");
    }
    for region in ["Local", "a_b", "-a"] {
        let err = refused(CreateWorkloadRequest {
            region: Some(region.into()),
            ..notebook()
        });
        assert_eq!(err.field, "region", "{region:?}");
    }
}

#[test]
fn params_of_another_kind_are_refused() {
    let err = refused(CreateWorkloadRequest {
        params: Some(Params::Vm(VmParams::default())),
        ..notebook()
    });
    assert_eq!(
        err,
        ConvertError::new("vm", Problem::WrongKind(WorkloadKind::Notebook))
    );
    assert_eq!(err.to_string(), "vm is not allowed for a notebook");

    let err = refused(CreateWorkloadRequest {
        params: Some(Params::Notebook(NotebookParams {})),
        ..endpoint("m")
    });
    assert_eq!(
        err,
        ConvertError::new("notebook", Problem::WrongKind(WorkloadKind::Endpoint))
    );

    let err = refused(CreateWorkloadRequest {
        params: Some(Params::Endpoint(EndpointParams {
            model: "m".into(),
            slots: None,
            served_name: None,
            park_after_idle_s: None,
        })),
        ..vm(&[], None)
    });
    assert_eq!(err.field, "endpoint");
}

#[test]
fn bad_models_are_refused() {
    for model in [
        "/abs",
        "a//b",
        "../etc",
        "a/./b",
        "a b",
        "a\nb",
        &"m".repeat(257),
    ] {
        assert_eq!(
            refused(endpoint(model)).field,
            "endpoint.model",
            "{model:?}"
        );
    }
}

#[test]
fn bad_vm_params_are_refused() {
    let err = refused(vm(&["ssh-ed25519 AAAA", "not a key"], None));
    assert_eq!(err.field, "vm.ssh_authorized_keys[1]");
    assert_eq!(
        refused(vm(&["ssh-rsa"], None)).field,
        "vm.ssh_authorized_keys[0]"
    );
    assert_eq!(
        refused(vm(&["ssh-ed25519 AAAA\nssh-rsa BBBB"], None)).field,
        "vm.ssh_authorized_keys[0]"
    );
    let many = vec!["ssh-ed25519 AAAA"; MAX_SSH_KEYS + 1];
    assert_eq!(refused(vm(&many, None)).field, "vm.ssh_authorized_keys");
    assert_eq!(refused(vm(&[], Some(0))).field, "vm.disk_gib");
    assert_eq!(
        refused(vm(&[], Some(MAX_DISK_GIB + 1))).field,
        "vm.disk_gib"
    );
}

#[test]
fn bad_fallbacks_are_refused() {
    let with = |fallback: &[&str], after: Option<u32>| CreateWorkloadRequest {
        fallback: fallback.iter().map(|s| s.to_string()).collect(),
        fallback_after_s: after,
        ..notebook()
    };
    assert_eq!(refused(with(&["cpu-1c-2g"], None)).field, "fallback[0]");
    assert_eq!(
        refused(with(&["cpu", "x", "cpu"], None)).field,
        "fallback[2]"
    );
    assert_eq!(refused(with(&["Bad"], None)).field, "fallback[0]");
    assert_eq!(
        refused(with(&[""], None)),
        ConvertError::new("fallback[0]", Problem::Missing)
    );
    assert_eq!(
        refused(with(&["a"; MAX_FALLBACK + 1], None)).field,
        "fallback"
    );
    assert_eq!(refused(with(&[], Some(60))).field, "fallback_after_s");
    assert_eq!(
        refused(with(&["cpu"], Some(MAX_FALLBACK_AFTER_S + 1))).field,
        "fallback_after_s"
    );
    assert!(CreateWorkload::try_from(with(&["cpu"], Some(MAX_FALLBACK_AFTER_S))).is_ok());
}

#[test]
fn params_read_from_a_workload_or_a_spec() {
    use crate::agent::v1::workload_spec;
    let raw = RawParams::from(workload_spec::Params::Endpoint(EndpointParams {
        model: "org/m".into(),
        slots: None,
        served_name: None,
        park_after_idle_s: None,
    }));
    let params = WorkloadParams::from_proto(WorkloadKind::Endpoint, Some(raw)).unwrap();
    assert_eq!(
        params,
        WorkloadParams::Endpoint {
            model: "org/m".into(),
            slots: 1,
            served_name: "m".into(),
            park_after_idle_s: None,
        }
    );
    let back = pb::workload::Params::from(params);
    assert_eq!(
        back,
        pb::workload::Params::Endpoint(EndpointParams {
            model: "org/m".into(),
            slots: Some(1),
            served_name: Some("m".into()),
            park_after_idle_s: None,
        })
    );
}

/// An endpoint's slots: 1 when unset, 1 to 64 when named.
#[test]
fn an_endpoints_slots_are_bounded() {
    let with = |slots| CreateWorkloadRequest {
        params: Some(Params::Endpoint(EndpointParams {
            model: "m".into(),
            slots,
            served_name: None,
            park_after_idle_s: None,
        })),
        ..endpoint("m")
    };
    for (slots, read) in [(None, 1), (Some(1), 1), (Some(64), 64)] {
        let made = CreateWorkload::try_from(with(slots)).unwrap();
        assert_eq!(
            made.params,
            WorkloadParams::Endpoint {
                model: "m".into(),
                slots: read,
                served_name: "m".into(),
                park_after_idle_s: None,
            }
        );
    }
    for slots in [0, 65, u32::MAX] {
        assert_eq!(refused(with(Some(slots))).field, "endpoint.slots");
    }
}

/// An endpoint's served name: as named when it fits the rule, else refused; unset, the model
/// file's name without its `.gguf`.
#[test]
fn an_endpoints_served_name_is_named_or_derived_from_its_model() {
    let with = |model: &str, served_name: Option<&str>| CreateWorkloadRequest {
        params: Some(Params::Endpoint(EndpointParams {
            model: model.into(),
            slots: None,
            served_name: served_name.map(str::to_owned),
            park_after_idle_s: None,
        })),
        ..endpoint(model)
    };
    let served = |model: &str, name: Option<&str>| match CreateWorkload::try_from(with(model, name))
        .unwrap()
        .params
    {
        WorkloadParams::Endpoint { served_name, .. } => served_name,
        other => panic!("{other:?}"),
    };
    for (model, name) in [
        ("tiny.gguf", "tiny"),
        ("team/tiny.gguf", "tiny"),
        ("org/Llama-3.2-1B", "Llama-3.2-1B"),
        ("a.b.gguf", "a.b"),
        (".gguf", ".gguf"),
        ("-x.gguf", "x"),
        ("--.gguf", "model"),
    ] {
        assert_eq!(served(model, None), name, "{model}");
    }
    let long = format!("{}.gguf", "a".repeat(200));
    assert_eq!(served(&long, None).len(), 128);
    for name in ["llama-3.2-1b", "team/tiny:q4", "_x", ".x", "A"] {
        assert_eq!(served("m.gguf", Some(name)), name);
    }
    let too_long = "a".repeat(129);
    for bad in ["", "-x", ":x", "/x", "a b", "a\nb", "ü", too_long.as_str()] {
        let err = refused(with("m.gguf", Some(bad)));
        assert_eq!(err.field, "endpoint.served_name", "{bad:?}");
    }
}

/// Scale-to-zero: unset never parks; a minute to a week when named, else refused.
#[test]
fn an_endpoints_idle_time_is_bounded() {
    let with = |park_after_idle_s| CreateWorkloadRequest {
        params: Some(Params::Endpoint(EndpointParams {
            model: "m".into(),
            slots: None,
            served_name: None,
            park_after_idle_s,
        })),
        ..endpoint("m")
    };
    for seconds in [None, Some(60), Some(600), Some(604_800)] {
        let made = CreateWorkload::try_from(with(seconds)).unwrap();
        match made.params {
            WorkloadParams::Endpoint {
                park_after_idle_s, ..
            } => assert_eq!(park_after_idle_s, seconds),
            other => panic!("{other:?}"),
        }
    }
    for seconds in [0, 59, 604_801, u32::MAX] {
        assert_eq!(
            refused(with(Some(seconds))).field,
            "endpoint.park_after_idle_s"
        );
    }
}
