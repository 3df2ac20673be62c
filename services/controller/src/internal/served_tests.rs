//! `ListServedModels`: the tenant's endpoints with their served names, a target for exactly
//! those the proxy may reach now (as `ResolveAccessTarget` would answer), and which are on a
//! CPU class.

use std::collections::HashMap;
use std::time::Duration;

use einsora_core::agent::{Mode, StatusCode};
use einsora_core::kind::WorkloadKind;
use einsora_testkit::fixtures::{Lifecycle, new_workload, path_to, registration, shape_of, tenant};

use super::*;
use crate::agents::hub::{AccessTarget, Reported};
use crate::testing::Tenancy;

struct World {
    internal: Internal,
    tenancy: Tenancy,
    machine: MachineId,
    _dir: tempfile::TempDir,
}

impl World {
    async fn new() -> World {
        let tenancy = Tenancy::new().await;
        let dir = tempfile::tempdir().unwrap();
        let reg = registration(tenancy.tenant, "box", None);
        let machine = reg.machine.id;
        tenancy.store.put_machine(&reg).await.unwrap();
        std::fs::write(dir.path().join("machine-id"), format!("{machine}\n")).unwrap();
        let hub = Arc::new(Hub::new(Duration::from_secs(60)));
        hub.leading_from_now();
        hub.connected(machine);
        let dirs = RunDirs {
            state_dir: dir.path().to_owned(),
            macos_root: dir.path().join("m"),
        };
        let internal = Internal::new(
            Arc::clone(&tenancy.store),
            hub,
            Arc::default(),
            einsora_testkit::fixtures::local(),
            dirs,
            Arc::new(Catalog::builtin()),
        );
        World {
            internal,
            tenancy,
            machine,
            _dir: dir,
        }
    }

    /// An endpoint of `tenant` on `class`, taken to `state` on this world's machine, with
    /// `params`.
    async fn endpoint(
        &self,
        tenant: TenantId,
        name: &str,
        class: &str,
        params: &str,
        state: State,
    ) -> WorkloadId {
        let mut new = new_workload(tenant, name);
        new.kind = WorkloadKind::Endpoint;
        new.image = "openai-endpoint".into();
        new.gpu_class = class.into();
        new.shape = shape_of(class);
        new.params = params.into();
        let mut lifecycle = Lifecycle::placing_on(class);
        lifecycle.admission.machine_id = Some(self.machine);
        lifecycle.admission.driver = Some("docker".into());
        let store = &*self.tenancy.store;
        lifecycle.through(store, &new, path_to(state)).await.id
    }

    /// Its machine says these are ready (and no other), each at the socket its agent lays
    /// out for it.
    fn ready(&self, ready: &[WorkloadId]) {
        let statuses = ready.iter().map(|w| {
            let socket = self
                .internal
                .reachable
                .dirs
                .socket_path("docker", &w.to_string(), WorkloadKind::Endpoint)
                .unwrap();
            let reported = Reported {
                attempt: 1,
                mode: Mode::Run,
                code: StatusCode::Ready,
                target: Some(AccessTarget {
                    socket_path: socket.display().to_string(),
                    token: "worker-key".into(),
                }),
            };
            (*w, reported)
        });
        self.internal.hub.report(self.machine, statuses.collect());
    }

    async fn list(&self, tenant: TenantId) -> Vec<pb::ServedModel> {
        let request = Request::new(pb::ListServedModelsRequest {
            tenant_id: tenant.to_string(),
        });
        let mut models = self
            .internal
            .list_served_models(request)
            .await
            .unwrap()
            .into_inner()
            .models;
        models.sort_by(|a, b| a.served_name.cmp(&b.served_name));
        models
    }
}

#[tokio::test]
async fn a_tenants_endpoints_are_listed_with_a_target_for_those_ready_only() {
    let world = World::new().await;
    let you = world.tenancy.tenant;
    let gpu = world
        .endpoint(
            you,
            "chat-gpu",
            "l40s-48gb",
            r#"{"model":"team/tiny.gguf","served_name":"chat"}"#,
            State::Running,
        )
        .await;
    let cpu = world
        .endpoint(
            you,
            "chat-cpu",
            "cpu-1c-2g",
            r#"{"model":"team/tiny.gguf","served_name":"chat"}"#,
            State::Running,
        )
        .await;
    // Named by its model file, as stored before served names.
    let derived = world
        .endpoint(
            you,
            "tiny",
            "cpu-1c-2g",
            r#"{"model":"team/tiny.gguf"}"#,
            State::Running,
        )
        .await;
    let starting = world
        .endpoint(
            you,
            "warming",
            "cpu-1c-2g",
            r#"{"model":"m.gguf","served_name":"warming"}"#,
            State::Provisioning,
        )
        .await;
    // Not listed: stopped, a notebook, another tenant's.
    world
        .endpoint(
            you,
            "gone",
            "cpu-1c-2g",
            r#"{"model":"m.gguf","served_name":"gone"}"#,
            State::Stopped,
        )
        .await;
    let notebook = Lifecycle::placing_on("cpu-1c-2g")
        .through(
            &*world.tenancy.store,
            &new_workload(you, "nb"),
            path_to(State::Running),
        )
        .await;
    let other = tenant(
        &*world.tenancy.store,
        einsora_store::QuotaClass::Default,
        None,
    )
    .await;
    let theirs = world
        .endpoint(
            other,
            "theirs",
            "cpu-1c-2g",
            r#"{"model":"m.gguf","served_name":"chat"}"#,
            State::Running,
        )
        .await;
    world.ready(&[gpu, cpu, starting, notebook.id, theirs]);

    let listed = world.list(you).await;
    let seen: Vec<(&str, Option<&str>, bool)> = listed
        .iter()
        .map(|m| {
            let target = m.target.as_ref().map(|t| t.workload_id.as_str());
            (m.served_name.as_str(), target, m.cpu)
        })
        .collect();
    let (gpu, cpu, starting, derived) = (
        gpu.to_string(),
        cpu.to_string(),
        starting.to_string(),
        derived.to_string(),
    );
    assert_eq!(listed.len(), 4, "{seen:?}");
    let of = |id: &str| {
        listed
            .iter()
            .find(|m| m.target.as_ref().is_some_and(|t| t.workload_id == id))
            .unwrap_or_else(|| panic!("{id} listed with a target: {seen:?}"))
    };
    assert_eq!(
        (of(&gpu).served_name.as_str(), of(&gpu).cpu),
        ("chat", false)
    );
    assert_eq!(
        (of(&cpu).served_name.as_str(), of(&cpu).cpu),
        ("chat", true)
    );
    let target = of(&gpu).target.clone().unwrap();
    assert_eq!(target.token, "worker-key");
    assert_eq!(target.placed_class, "l40s-48gb");
    assert!(!target.relayed && target.socket_path.ends_with("llm.sock"));
    // Running but not reported ready, and starting: listed, with no target.
    for (name, id) in [("tiny", &derived), ("warming", &starting)] {
        let m = listed.iter().find(|m| m.served_name == name).unwrap();
        assert!(m.target.is_none(), "{id}: {m:?}");
        assert_eq!(&m.workload_id, id);
    }
    // Another tenant sees only its own.
    let theirs_listed = world.list(other).await;
    assert_eq!(theirs_listed.len(), 1);
    assert_eq!(
        theirs_listed[0].target.as_ref().unwrap().workload_id,
        theirs.to_string()
    );
}

/// A socket other than the one its agent lays out is never handed over in a list either.
#[tokio::test]
async fn a_reported_socket_that_isnt_the_workloads_own_gets_no_target() {
    let world = World::new().await;
    let you = world.tenancy.tenant;
    let w = world
        .endpoint(
            you,
            "chat",
            "l40s-48gb",
            r#"{"model":"m.gguf","served_name":"chat"}"#,
            State::Running,
        )
        .await;
    let reported = Reported {
        attempt: 1,
        mode: Mode::Run,
        code: StatusCode::Ready,
        target: Some(AccessTarget {
            socket_path: "/var/run/docker.sock".into(),
            token: "t".into(),
        }),
    };
    world
        .internal
        .hub
        .report(world.machine, HashMap::from([(w, reported)]));
    let listed = world.list(you).await;
    assert_eq!(listed.len(), 1);
    assert!(listed[0].target.is_none(), "{:?}", listed[0]);
}

/// A standby lists nothing: the one leading knows where workloads listen.
#[tokio::test]
async fn a_standby_refuses_to_list() {
    let world = World::new().await;
    world.internal.hub.stand_by();
    let request = Request::new(pb::ListServedModelsRequest {
        tenant_id: world.tenancy.tenant.to_string(),
    });
    let refused = world
        .internal
        .list_served_models(request)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable);
}

/// Scale-to-zero: a parked endpoint that parks when idle is listed, marked parked and without
/// a target, only while no other endpoint of its name runs or starts; one stopped that doesn't
/// park is not listed. `ResolveAccessTarget` marks it parked, for its tenant only.
#[tokio::test]
async fn a_parked_endpoint_is_listed_while_nothing_else_serves_its_name() {
    let world = World::new().await;
    let you = world.tenancy.tenant;
    let parks = r#"{"model":"m.gguf","served_name":"sleepy","park_after_idle_s":600}"#;
    let sleeper = world
        .endpoint(you, "sleeper", "cpu-1c-2g", parks, State::Stopped)
        .await;
    world
        .endpoint(
            you,
            "stopped",
            "cpu-1c-2g",
            r#"{"model":"m.gguf","served_name":"plain"}"#,
            State::Stopped,
        )
        .await;
    let listed = world.list(you).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].parked && listed[0].target.is_none());
    assert_eq!(listed[0].workload_id, sleeper.to_string());

    let resolve = |tenant: TenantId| {
        let request = Request::new(pb::ResolveAccessTargetRequest {
            workload_id: sleeper.to_string(),
            tenant_id: tenant.to_string(),
        });
        world.internal.resolve_access_target(request)
    };
    let parked = resolve(you).await.unwrap_err();
    assert_eq!(
        parked
            .metadata()
            .get(einsora_proto::metadata::ERROR)
            .unwrap(),
        einsora_proto::metadata::PARKED
    );
    let other = tenant(
        &*world.tenancy.store,
        einsora_store::QuotaClass::Default,
        None,
    )
    .await;
    assert_eq!(
        resolve(other).await.unwrap_err().code(),
        tonic::Code::NotFound
    );

    // Another endpoint of the name starting: that one is listed, the parked one not.
    world
        .endpoint(you, "awake", "cpu-1c-2g", parks, State::Provisioning)
        .await;
    let listed = world.list(you).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(!listed[0].parked);
}
